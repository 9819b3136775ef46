//! Argument conversions shared by the bindings, each failing with a message naming the
//! argument.

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::errors::Raise;
use pyo3::types::{PyBool, PyBytes, PyString};

use keyshared_kernels::buckets::{ring_hash, validate_splits};
use keyshared_kernels::parallel::default_threads;

/// The bytes of a `str` (UTF-8) or `bytes` key.
pub fn key_bytes<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<&'a [u8]> {
    key_bytes_named(obj, || what.to_owned())
}

/// `key_bytes` for item `index` of a batch; the name is only built for an error message,
/// since this runs once per key.
pub fn key_bytes_at<'a>(obj: &'a Bound<'_, PyAny>, index: usize) -> PyResult<&'a [u8]> {
    key_bytes_named(obj, || format!("keys[{index}]"))
}

fn key_bytes_named<'a>(
    obj: &'a Bound<'_, PyAny>,
    what: impl FnOnce() -> String,
) -> PyResult<&'a [u8]> {
    if let Ok(s) = obj.cast::<PyString>() {
        s.to_str()
            .map(str::as_bytes)
            .map_err(|e| PyValueError::new_err(format!("{} is not valid text: {e}", what())))
    } else if let Ok(b) = obj.cast::<PyBytes>() {
        Ok(b.as_bytes())
    } else {
        Err(PyTypeError::new_err(format!(
            "{} must be str or bytes, got {}",
            what(),
            type_name(obj)
        )))
    }
}

/// A `str` argument as Rust text; lone surrogates are refused by name.
pub fn text_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    let text = obj
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be str, got {}", type_name(obj))))?;
    key_bytes(text.as_any(), what).map(|b| String::from_utf8_lossy(b).into_owned())
}

/// `err` with `prefix` (where it happened) put before its message, keeping TypeError a
/// TypeError; any other error becomes a ValueError.
pub fn prefixed(err: PyErr, prefix: &str) -> PyErr {
    Python::attach(|py| {
        let message = format!("{prefix} {}", err.value(py));
        if err.is_instance_of::<PyTypeError>(py) {
            PyTypeError::new_err(message)
        } else {
            PyValueError::new_err(message)
        }
    })
}

pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// An integer argument (anything with `__index__`) as i64; a non-integer is a TypeError, an
/// integer beyond i64 a ValueError.
pub fn int_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<i64> {
    refuse_bool(obj, what)?;
    obj.extract::<i64>().map_err(|err| {
        if err.is_instance_of::<PyOverflowError>(obj.py()) {
            PyValueError::new_err(format!("{what} = {obj} is out of range"))
        } else {
            PyTypeError::new_err(format!("{what} must be an int, got {}", type_name(obj)))
        }
    })
}

/// `bool` is an `int` subclass, but `True` as an id or a hash is a mistake, not a 1.
pub fn refuse_bool(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<()> {
    if obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int, got bool"
        )));
    }
    Ok(())
}

/// A 16-bit ring hash argument.
pub fn hash_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u16> {
    ring_hash(int_arg(obj, what)?, what).py()
}

/// Ascending bucket split points from any sequence of ints.
pub fn splits_arg(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u16>> {
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(format!(
            "splits must be a sequence of ints, got {}",
            type_name(obj)
        )));
    }
    let items = obj.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "splits must be a sequence of ints, got {}",
            type_name(obj)
        ))
    })?;
    let values = items
        .enumerate()
        .map(|(i, item)| int_arg(&item?, &format!("splits[{i}]")))
        .collect::<PyResult<Vec<i64>>>()?;
    validate_splits(&values).py()
}

/// The thread count of a batch call; None means the process-wide default.
pub fn threads_arg(threads: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
    let Some(threads) = threads.filter(|t| !t.is_none()) else {
        return Ok(default_threads());
    };
    let n = int_arg(threads, "threads")?;
    match usize::try_from(n) {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(PyValueError::new_err(format!(
            "threads must be at least 1, got {n}"
        ))),
    }
}
