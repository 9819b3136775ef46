//! Argument conversions, error mapping and locking shared by the bindings of the stateful
//! kernels (draining hashes, pending acks, rings, cursors, window).

use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use numpy::{PyArray1, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyList, PyString, PyTuple};

use super::args::{key_bytes, refuse_bool, type_name};
use super::buckets::PyHashRange;
use keyshared_kernels::buckets::HashRange;
use keyshared_kernels::cursor::MAX_OFFSET;
use keyshared_kernels::window::RoutingKey;

/// Runs `f` on the locked state. When another thread holds the lock, waits for it without
/// the GIL, so that thread (maybe in a long batch) and other Python threads go on. `f` must
/// not touch Python: a callback into the same object would deadlock on the lock.
pub fn with_state<S: Send, R: Send>(
    py: Python<'_>,
    state: &Mutex<S>,
    f: impl FnOnce(&mut S) -> R + Send,
) -> R {
    match state.try_lock() {
        Ok(mut guard) => f(&mut guard),
        Err(TryLockError::Poisoned(poisoned)) => f(&mut poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => py.detach(|| f(&mut lock(state))),
    }
}

/// Runs `f` on the locked state without the GIL, for batches.
pub fn detached<S: Send, R: Send>(
    py: Python<'_>,
    state: &Mutex<S>,
    f: impl FnOnce(&mut S) -> R + Send,
) -> R {
    py.detach(|| f(&mut lock(state)))
}

/// Locks a mutex; kernels never panic while holding one, so poisoning carries no meaning.
pub fn lock<S>(state: &Mutex<S>) -> MutexGuard<'_, S> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
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

/// Calls a Python callable, if any, with the hash the kernel reported, if any. Runs with no
/// lock held, so the callable may call back into the object that reported it.
pub fn notify(py: Python<'_>, handler: Option<&Py<PyAny>>, notice: Option<i32>) -> PyResult<()> {
    if let (Some(handler), Some(hash)) = (handler, notice) {
        handler.call1(py, (hash,))?;
    }
    Ok(())
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
