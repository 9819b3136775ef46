//! Every conversion of a Python argument to what a kernel takes, each failing with a
//! message that names the argument (and the index, for an item of a batch).

use numpy::{PyArray1, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyList, PyString, PyTuple};

use crate::buckets::PyHashRange;
use crate::errors::Raise;
use keyshared_kernels::buckets::{ring_hash, validate_splits, HashRange};
use keyshared_kernels::cursor::MAX_OFFSET;
use keyshared_kernels::parallel::default_threads;
use keyshared_kernels::window::RoutingKey;

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

/// A consumer id: an int in `[0, 2**64 - 1]`.
pub fn consumer_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    refuse_bool(obj, what)?;
    obj.extract::<u64>().map_err(|err| {
        if err.is_instance_of::<PyOverflowError>(obj.py()) {
            PyValueError::new_err(format!("{what} must be in [0, 2**64 - 1], got {obj}"))
        } else {
            PyTypeError::new_err(format!("{what} must be an int, got {}", type_name(obj)))
        }
    })
}

/// A non-negative int up to `max`, as u64.
pub fn bounded_arg(obj: &Bound<'_, PyAny>, what: &str, max: u64, bound: &str) -> PyResult<u64> {
    refuse_bool(obj, what)?;
    if let Some(v) = obj
        .extract::<i64>()
        .ok()
        .and_then(|v| u64::try_from(v).ok())
    {
        if v <= max {
            return Ok(v);
        }
    }
    let out_of_range =
        || PyValueError::new_err(format!("{what} must be in [0, {bound}], got {obj}"));
    let value = obj.extract::<i128>().map_err(|err| {
        if err.is_instance_of::<PyOverflowError>(obj.py()) {
            out_of_range()
        } else {
            PyTypeError::new_err(format!("{what} must be an int, got {}", type_name(obj)))
        }
    })?;
    u64::try_from(value)
        .ok()
        .filter(|&v| v <= max)
        .ok_or_else(out_of_range)
}

/// A log offset: an int in `[0, 2**63 - 1]`.
pub fn offset_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    bounded_arg(obj, what, MAX_OFFSET, "2**63 - 1")
}

/// A time in milliseconds: an int in `[0, 2**63 - 1]`.
pub fn millis_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    bounded_arg(obj, what, i64::MAX as u64, "2**63 - 1")
}

/// A count: an int in `[0, 2**32 - 1]`.
pub fn count_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u32> {
    Ok(bounded_arg(obj, what, u64::from(u32::MAX), "2**32 - 1")? as u32)
}

/// A routing key (str or bytes), remembering which it was.
pub fn routing_key_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<RoutingKey> {
    let text = obj.is_instance_of::<PyString>();
    Ok(RoutingKey::new(key_bytes(obj, what)?, text))
}

/// A routing key as it arrived: str when it came as str.
pub fn routing_key_object<'py>(py: Python<'py>, key: &RoutingKey) -> Bound<'py, PyAny> {
    if key.text {
        PyString::new(py, &String::from_utf8_lossy(&key.bytes)).into_any()
    } else {
        PyBytes::new(py, &key.bytes).into_any()
    }
}

/// Checks an optional callable argument.
pub fn callable_arg(obj: Option<Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Py<PyAny>>> {
    match obj {
        Some(f) if f.is_none() => Ok(None),
        Some(f) if f.is_callable() => Ok(Some(f.unbind())),
        Some(f) => Err(PyTypeError::new_err(format!(
            "{what} must be callable or None, got {}",
            type_name(&f)
        ))),
        None => Ok(None),
    }
}

/// A one-dimensional integer array from a NumPy array or any sequence of ints.
fn int_array<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Bound<'py, PyUntypedArray>> {
    let py = obj.py();
    let array = match obj.cast::<PyUntypedArray>() {
        Ok(a) => a.clone(),
        Err(_) if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() => {
            return Err(not_ints(obj, what));
        }
        Err(_) => {
            refuse_bools(obj, what)?;
            let numpy = py.import(intern!(py, "numpy"))?;
            let converted = numpy
                .call_method1(intern!(py, "asarray"), (obj,))
                .map_err(|_| not_ints(obj, what))?;
            converted.cast_into::<PyUntypedArray>()?
        }
    };
    let kind = array.dtype().kind();
    let empty = array.len() == 0;
    if array.ndim() != 1 || !(matches!(kind, b'i' | b'u') || empty) {
        return Err(not_ints(&array, what));
    }
    Ok(array)
}

/// NumPy reads `[True, 3]` as `[1, 3]`: a bool in a list or tuple is refused by index.
fn refuse_bools(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<()> {
    let items = match (obj.cast::<PyList>(), obj.cast::<PyTuple>()) {
        (Ok(list), _) => list.iter().collect::<Vec<_>>(),
        (_, Ok(tuple)) => tuple.iter().collect(),
        _ => return Ok(()),
    };
    match items
        .iter()
        .position(|item| item.is_instance_of::<PyBool>())
    {
        Some(i) => refuse_bool(&items[i], &format!("{what}[{i}]")),
        None => Ok(()),
    }
}

fn not_ints(obj: &Bound<'_, PyAny>, what: &str) -> PyErr {
    let got = match obj.cast::<PyUntypedArray>() {
        Ok(a) => format!("dtype {} with {} dimensions", a.dtype(), a.ndim()),
        Err(_) => type_name(obj),
    };
    PyTypeError::new_err(format!(
        "{what} must be a one-dimensional array of integers, got {got}"
    ))
}

/// The values of an integer array, each checked to lie in `[min, max]`.
fn checked_values<T>(
    obj: &Bound<'_, PyAny>,
    what: &str,
    (min, max): (i128, i128),
    convert: impl Fn(i128) -> T,
) -> PyResult<Vec<T>> {
    let check = |(i, v): (usize, i128)| {
        if v < min || v > max {
            return Err(PyValueError::new_err(format!(
                "{what}[{i}] = {v} is outside [{min}, {max}]"
            )));
        }
        Ok(convert(v))
    };
    let array = match int_array(obj, what) {
        Ok(array) => array,
        // A list NumPy holds as floats or objects (a value beyond int64, a bool, a float):
        // its items one by one, so the error names the one at fault.
        Err(err) if obj.cast::<PyUntypedArray>().is_err() => {
            return item_values(obj, what)
                .map_err(|item_err| item_err.unwrap_or(err))?
                .into_iter()
                .enumerate()
                .map(check)
                .collect();
        }
        Err(err) => return Err(err),
    };
    if array.dtype().kind() == b'u' {
        let values = wide::<u64>(&array, "uint64")?;
        values
            .into_iter()
            .map(i128::from)
            .enumerate()
            .map(check)
            .collect()
    } else {
        let values = wide::<i64>(&array, "int64")?;
        values
            .into_iter()
            .map(i128::from)
            .enumerate()
            .map(check)
            .collect()
    }
}

/// The items of a Python iterable of ints, each checked; `Err(None)` when it is not
/// iterable (the caller's error then stands).
fn item_values(obj: &Bound<'_, PyAny>, what: &str) -> Result<Vec<i128>, Option<PyErr>> {
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(None);
    }
    let items = obj.try_iter().map_err(|_| None)?;
    items
        .enumerate()
        .map(|(i, item)| {
            let item = item?;
            let what = format!("{what}[{i}]");
            refuse_bool(&item, &what)?;
            item.extract::<i128>().map_err(|err| {
                if err.is_instance_of::<PyOverflowError>(obj.py()) {
                    PyValueError::new_err(format!("{what} = {item} is out of range"))
                } else {
                    PyTypeError::new_err(format!("{what} must be an int, got {}", type_name(&item)))
                }
            })
        })
        .collect::<PyResult<Vec<i128>>>()
        .map_err(Some)
}

/// The array's values as `W`, converting the dtype only when it differs.
fn wide<W: numpy::Element + Copy>(
    array: &Bound<'_, PyUntypedArray>,
    dtype: &str,
) -> PyResult<Vec<W>> {
    if let Ok(exact) = array.cast::<PyArray1<W>>() {
        return Ok(values(exact));
    }
    let converted = array.call_method1(intern!(array.py(), "astype"), (dtype,))?;
    Ok(values(converted.cast::<PyArray1<W>>()?))
}

fn values<W: numpy::Element + Copy>(array: &Bound<'_, PyArray1<W>>) -> Vec<W> {
    match array.to_vec() {
        Ok(v) => v,
        Err(_) => array.readonly().as_array().to_vec(),
    }
}

/// 16-bit hashes, each in `[0, 0xFFFF]`.
pub fn hash_array(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u16>> {
    if let Ok(exact) = obj.cast::<PyArray1<u16>>() {
        return Ok(values(exact));
    }
    checked_values(obj, what, (0, 0xFFFF), |v| v as u16)
}

/// Log offsets, each in `[0, 2**63 - 1]`.
pub fn offset_array(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u64>> {
    checked_values(obj, what, (0, i128::from(MAX_OFFSET)), |v| v as u64)
}

/// Consumer ids, each in `[0, 2**64 - 1]`.
pub fn consumer_array(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u64>> {
    checked_values(obj, what, (0, i128::from(u64::MAX)), |v| v as u64)
}

/// Signed 64-bit ids (ledger and entry ids).
pub fn i64_array(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<i64>> {
    let range = (i128::from(i64::MIN), i128::from(i64::MAX));
    checked_values(obj, what, range, |v| v as i64)
}

/// Signed 32-bit values (batch sizes).
pub fn i32_array(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<i32>> {
    let range = (i128::from(i32::MIN), i128::from(i32::MAX));
    checked_values(obj, what, range, |v| v as i32)
}

/// Unsigned 32-bit values (bucket indices, key hashes).
pub fn u32_array(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u32>> {
    if let Ok(exact) = obj.cast::<PyArray1<u32>>() {
        return Ok(values(exact));
    }
    checked_values(obj, what, (0, i128::from(u32::MAX)), |v| v as u32)
}

/// Hash ranges from any iterable of `HashRange` (a lone str or bytes is refused).
pub fn hash_ranges_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<HashRange>> {
    let not_ranges = || {
        PyTypeError::new_err(format!(
            "{what} must be an iterable of HashRange, got {}",
            type_name(obj)
        ))
    };
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(not_ranges());
    }
    let items = obj.try_iter().map_err(|_| not_ranges())?;
    items
        .enumerate()
        .map(|(i, item)| {
            let item = item?;
            let range = item.cast::<PyHashRange>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "{what}[{i}] must be a HashRange, got {}",
                    type_name(&item)
                ))
            })?;
            Ok(range.get().0)
        })
        .collect()
}

/// Fails unless every named length equals the first.
pub fn same_lengths(lengths: &[(&str, usize)]) -> PyResult<()> {
    let (first, n) = lengths[0];
    for &(name, len) in &lengths[1..] {
        if len != n {
            return Err(PyValueError::new_err(format!(
                "{name} has {len} items but {first} has {n}"
            )));
        }
    }
    Ok(())
}
