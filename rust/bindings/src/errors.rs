//! Kernel errors as Python exceptions: bad input is a `ValueError`, something a stateful
//! kernel does not hold is a `KeyError`.

use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;

use crate::conversions::routing_key_object;
use keyshared_kernels::error::{InvalidInput, KeyConflict, NotFound, StateError};
use keyshared_kernels::routing_key::RoutingKey;

/// The Python exception a kernel error raises.
pub trait ToPyErr: Sized {
    fn to_py_err(self) -> PyErr {
        self.to_py_err_in(None)
    }

    /// The same, naming `batch` (the argument whose items the kernel numbered) where the
    /// kernel says which item was wrong.
    fn to_py_err_in(self, batch: Option<&str>) -> PyErr;
}

impl ToPyErr for InvalidInput {
    fn to_py_err_in(self, batch: Option<&str>) -> PyErr {
        PyValueError::new_err(message(self, batch))
    }
}

fn message(error: InvalidInput, batch: Option<&str>) -> String {
    match error {
        InvalidInput::Item { index, error } => match batch {
            Some(name) => format!("{name}[{index}]: {}", message(*error, None)),
            None => format!("item {index}: {}", message(*error, None)),
        },
        InvalidInput::Message(message) => message,
        InvalidInput::OutOfRange { what, value, max } => {
            format!("{what} must be in [0, {}], got {value}", python_bound(max))
        }
        InvalidInput::NullKey { index } => {
            format!("keys[{index}] is null; pass null_key= to hash nulls as given bytes")
        }
        InvalidInput::Key(conflict) => key_conflict(&conflict),
    }
}

/// A bound as Python code writes it: powers of two less one as `2**n - 1`.
fn python_bound(max: u64) -> String {
    match max
        .checked_add(1)
        .filter(|b| b.is_power_of_two() && *b > 1 << 16)
    {
        Some(b) => format!("2**{} - 1", b.trailing_zeros()),
        None => max.to_string(),
    }
}

/// The window's refusal, with keys shown as Python shows the str or bytes they came as.
fn key_conflict(conflict: &KeyConflict) -> String {
    Python::attach(|py| {
        let show = |key: &RoutingKey| {
            routing_key_object(py, key)
                .repr()
                .map_or_else(|_| key.to_string(), |r| r.to_string())
        };
        match conflict {
            KeyConflict::Held {
                key,
                holder,
                offset,
            } => format!(
                "key {} is held by offset {holder}; push_blocked offset {offset} instead",
                show(key)
            ),
            KeyConflict::Queued { key, offset } => format!(
                "older messages of key {} are queued; push_blocked offset {offset} behind them",
                show(key)
            ),
            KeyConflict::OtherKey { offset, held, key } => format!(
                "offset {offset} was taken with key {}, not {}",
                show(held),
                show(key)
            ),
        }
    })
}

impl ToPyErr for NotFound {
    fn to_py_err_in(self, _batch: Option<&str>) -> PyErr {
        PyKeyError::new_err(self.0)
    }
}

impl ToPyErr for StateError {
    fn to_py_err_in(self, batch: Option<&str>) -> PyErr {
        match self {
            StateError::Invalid(e) => e.to_py_err_in(batch),
            StateError::NotFound(e) => e.to_py_err_in(batch),
        }
    }
}

/// `kernel_call().py()?`: a kernel result with its error raised in Python.
pub trait Raise<T> {
    fn py(self) -> PyResult<T>;

    /// `py`, naming the batch argument `batch` in an error about one of its items.
    fn py_in(self, batch: &str) -> PyResult<T>;
}

impl<T, E: ToPyErr> Raise<T> for Result<T, E> {
    fn py(self) -> PyResult<T> {
        self.map_err(ToPyErr::to_py_err)
    }

    fn py_in(self, batch: &str) -> PyResult<T> {
        self.map_err(|e| e.to_py_err_in(Some(batch)))
    }
}
