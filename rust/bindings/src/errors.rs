//! Kernel errors as Python exceptions, all of them classes of `keyshared.errors`: bad input is
//! an `InvalidArgument` (a ValueError), an argument of the wrong type an `ArgumentTypeError` (a
//! TypeError), something a stateful kernel does not hold a `NotFound` or, for a consumer, an
//! `UnknownConsumer` (KeyErrors). The bindings raise through the constructors below, never a
//! built-in exception, so that one `except KeysharedError` catches every mistake a caller makes.

use std::fmt::Display;

use pyo3::prelude::*;

use crate::routing_key::routing_key_object;
use keyshared_kernels::error::{InvalidInput, KeyConflict, NotFound, StateError};
use keyshared_kernels::routing_key::RoutingKey;

/// The classes of `keyshared.errors`, imported on first use.
pub mod classes {
    pyo3::import_exception!(keyshared.errors, InvalidArgument);
    pyo3::import_exception!(keyshared.errors, ArgumentTypeError);
    pyo3::import_exception!(keyshared.errors, NotFound);
    pyo3::import_exception!(keyshared.errors, UnknownConsumer);
}

/// An `InvalidArgument` (a ValueError): an argument's value is one the call cannot take.
pub fn invalid(message: impl Display) -> PyErr {
    classes::InvalidArgument::new_err(message.to_string())
}

/// An `ArgumentTypeError` (a TypeError): an argument's type is one the call does not take.
pub fn wrong_type(message: impl Display) -> PyErr {
    classes::ArgumentTypeError::new_err(message.to_string())
}

/// An `UnknownConsumer` (a KeyError) whose message is `message`.
pub fn unknown_consumer(message: impl Display) -> PyErr {
    classes::UnknownConsumer::new_err(message.to_string())
}

/// A `NotFound` (a KeyError) whose message is `message`.
pub fn not_found(message: impl Display) -> PyErr {
    classes::NotFound::new_err(message.to_string())
}

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
        invalid(message(self, batch))
    }
}

fn message(error: InvalidInput, batch: Option<&str>) -> String {
    match error {
        InvalidInput::Item { index, error } => match batch {
            Some(name) => format!("{name}[{index}]: {}", message(*error, None)),
            None => format!("item {index}: {}", message(*error, None)),
        },
        InvalidInput::OutOfRange {
            what,
            value,
            min,
            max,
        } => format!(
            "{what} must be in [{min}, {}], got {value}",
            python_bound(max)
        ),
        InvalidInput::NullKey { index } => {
            format!("keys[{index}] is null; pass null_key= to hash nulls as given bytes")
        }
        InvalidInput::Key(conflict) => key_conflict(&conflict),
        // The kernel's own sentence, which names the arguments as Python does.
        e @ (InvalidInput::TooSmall { .. }
        | InvalidInput::Exceeds { .. }
        | InvalidInput::NotRingHash { .. }
        | InvalidInput::ReservedHash { .. }
        | InvalidInput::NegativePosition { .. }
        | InvalidInput::LengthMismatch { .. }
        | InvalidInput::ReversedRange { .. }
        | InvalidInput::Unsplittable { .. }
        | InvalidInput::NotAdjacent { .. }
        | InvalidInput::NotAHashRange { .. }
        | InvalidInput::Straddles { .. }
        | InvalidInput::NoSuchBucket { .. }
        | InvalidInput::Tiling(_)
        | InvalidInput::Duplicate(_)
        | InvalidInput::Conflict(_)
        | InvalidInput::Dispatched(_)
        | InvalidInput::OutOfSequence { .. }
        | InvalidInput::NoTracker { .. }
        | InvalidInput::ConsumerExists { .. }
        | InvalidInput::NotUtf8 { .. }
        | InvalidInput::EmptyFilter
        | InvalidInput::NoDeadLetterTopic
        | InvalidInput::IntKeysUnsupported { .. }
        | InvalidInput::IntTooWide { .. }) => e.to_string(),
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
        let show = |(bytes, text): &(Box<[u8]>, bool)| {
            let key = RoutingKey::new(bytes, *text);
            routing_key_object(py, &key)
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
        if self.is_consumer() {
            unknown_consumer(self)
        } else {
            not_found(self)
        }
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
