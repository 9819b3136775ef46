//! Kernel errors as Python exceptions, all of them classes of `keyshared.errors`: bad input is
//! an `InvalidArgument` (a ValueError), an argument of the wrong type an `ArgumentTypeError` (a
//! TypeError), something a stateful kernel does not hold a `NotFound` or, for a consumer, an
//! `UnknownConsumer` (KeyErrors). Each carries a `kind`, the `argument` that was wrong and the
//! `index` of the wrong item of a batch; a kernel error's come from its variant, and its
//! `ErrorCategory` alone picks the class (`exception`). The bindings raise through the
//! constructors below, never a built-in exception, so that one `except KeysharedError` catches
//! every mistake a caller makes.

use std::fmt::{self, Display};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

use crate::routing_key::routing_key_object;
use keyshared_kernels::error::{
    ErrorCategory, InvalidInput, KeyConflict, NotFound, StateError, Tiling,
};
use keyshared_kernels::routing_key::RoutingKey;

/// The classes of `keyshared.errors`, imported on first use.
pub mod classes {
    pyo3::import_exception!(keyshared.errors, InvalidArgument);
    pyo3::import_exception!(keyshared.errors, ArgumentTypeError);
    pyo3::import_exception!(keyshared.errors, NotFound);
    pyo3::import_exception!(keyshared.errors, UnknownConsumer);
}

/// Where a mistake is: an argument, and the item of it where the argument is a batch.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    pub argument: &'a str,
    pub index: Option<usize>,
}

impl<'a> At<'a> {
    /// The argument `argument` as a whole.
    pub fn arg(argument: &'a str) -> Self {
        Self {
            argument,
            index: None,
        }
    }

    /// Item `index` of the batch argument `argument`.
    pub fn item(argument: &'a str, index: usize) -> Self {
        Self {
            argument,
            index: Some(index),
        }
    }
}

/// As Python code names it: `keys`, `keys[3]`.
impl Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(index) => write!(f, "{}[{index}]", self.argument),
            None => f.write_str(self.argument),
        }
    }
}

/// The one place a kind of mistake becomes a Python class. `kind` None is the class's own
/// (`invalid_argument`, `wrong_type`, ...).
fn exception(
    category: ErrorCategory,
    message: String,
    kind: Option<&'static str>,
    argument: Option<&str>,
    index: Option<usize>,
) -> PyErr {
    Python::attach(|py| {
        let class: Bound<'_, PyType> = match category {
            ErrorCategory::Value => py.get_type::<classes::InvalidArgument>(),
            ErrorCategory::Type => py.get_type::<classes::ArgumentTypeError>(),
            ErrorCategory::NotFound => py.get_type::<classes::NotFound>(),
            ErrorCategory::UnknownConsumer => py.get_type::<classes::UnknownConsumer>(),
        };
        let fields = PyDict::new(py);
        let error = fields
            .set_item("kind", kind)
            .and_then(|()| fields.set_item("argument", argument))
            .and_then(|()| fields.set_item("index", index))
            .and_then(|()| class.call((message,), Some(&fields)));
        match error {
            Ok(error) => PyErr::from_value(error),
            Err(err) => err,
        }
    })
}

/// An `InvalidArgument` (a ValueError): an argument's value is one the call cannot take.
pub fn invalid(message: impl Display) -> PyErr {
    exception(ErrorCategory::Value, message.to_string(), None, None, None)
}

/// `invalid`, naming the argument (and item) that was wrong.
pub fn invalid_at(at: At<'_>, message: impl Display) -> PyErr {
    let message = message.to_string();
    exception(
        ErrorCategory::Value,
        message,
        None,
        Some(at.argument),
        at.index,
    )
}

/// An `ArgumentTypeError` (a TypeError): an argument's type is one the call does not take.
pub fn wrong_type(message: impl Display) -> PyErr {
    exception(ErrorCategory::Type, message.to_string(), None, None, None)
}

/// `wrong_type`, naming the argument (and item) that was wrong.
pub fn wrong_type_at(at: At<'_>, message: impl Display) -> PyErr {
    let message = message.to_string();
    exception(
        ErrorCategory::Type,
        message,
        None,
        Some(at.argument),
        at.index,
    )
}

/// The kernel error `error` in the binding's own words, `message`, about `argument`.
pub fn worded(error: &InvalidInput, argument: &str, message: impl Display) -> PyErr {
    let message = message.to_string();
    exception(
        error.category(),
        message,
        Some(error.kind()),
        Some(argument),
        error.index(),
    )
}

/// Every kind a kernel error can have, for `keyshared.errors.KINDS` to be checked against.
#[doc = stub_doc!("_error_kinds")]
#[pyfunction(name = "_error_kinds")]
pub fn error_kinds() -> Vec<&'static str> {
    keyshared_kernels::error::kinds()
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
        let (category, kind, index) = (self.category(), self.kind(), self.index());
        let argument = match (batch, index) {
            (Some(batch), Some(_)) => Some(batch.to_owned()),
            _ => self.argument().map(str::to_owned),
        };
        let message = message(self, batch);
        exception(category, message, Some(kind), argument.as_deref(), index)
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
        InvalidInput::Tiling(tiling) => match batch {
            Some(name) => splits_message(&tiling, name),
            None => tiling.to_string(),
        },
        e @ InvalidInput::IntTooWide { .. } => match batch {
            Some(name) => format!("{name}: {e}"),
            None => e.to_string(),
        },
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
        | InvalidInput::Duplicate(_)
        | InvalidInput::Conflict(_)
        | InvalidInput::Dispatched(_)
        | InvalidInput::OutOfSequence { .. }
        | InvalidInput::NoTracker { .. }
        | InvalidInput::ConsumerExists { .. }
        | InvalidInput::NotUtf8 { .. }
        | InvalidInput::EmptyFilter
        | InvalidInput::NoDeadLetterTopic
        | InvalidInput::IntKeysUnsupported { .. }) => e.to_string(),
    }
}

/// The kernel's sentence about split points, naming them `name` as the caller does.
fn splits_message(tiling: &Tiling, name: &str) -> String {
    match *tiling {
        Tiling::SplitOutsideRing { index, value } => {
            format!("{name}[{index}] = {value} is outside [1, 0xffff]")
        }
        Tiling::FirstSplitTooLow { value, min } => format!(
            "{name}[0] = {value} leaves bucket 0 narrower than [0, 1]: the first split must be \
             at least {min}"
        ),
        Tiling::SplitsNotAscending {
            index,
            value,
            previous,
        } => format!(
            "{name} must be strictly ascending: {name}[{index}] = {value} follows {previous}"
        ),
        _ => tiling.to_string(),
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
    fn to_py_err_in(self, batch: Option<&str>) -> PyErr {
        let (category, kind, index) = (self.category(), self.kind(), self.index());
        let argument = batch.filter(|_| index.is_some());
        exception(category, self.to_string(), Some(kind), argument, index)
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
