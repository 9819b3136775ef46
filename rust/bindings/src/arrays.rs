//! Integer array arguments: a NumPy array of any integer dtype, or any sequence of ints,
//! each value checked against the argument's range and named by its index when it is not in it.

use std::fmt::Display;

use numpy::{
    Element, PyArray1, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyList, PyString, PyTuple};

use crate::conversions::{arg, argument, int_in, type_name, ConsumerId, FromArg};
use crate::errors::{invalid_at, wrong_type, At, Raise};
use keyshared_kernels::cursor::MAX_OFFSET;
use keyshared_kernels::pending_acks::batch_count;

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
        Some(i) => Err(wrong_type(format!("{what}[{i}] must be an int, got bool"))),
        None => Ok(()),
    }
}

fn not_ints(obj: &Bound<'_, PyAny>, what: &str) -> PyErr {
    let got = match obj.cast::<PyUntypedArray>() {
        Ok(a) => format!("dtype {} with {} dimensions", a.dtype(), a.ndim()),
        Err(_) => type_name(obj),
    };
    wrong_type(format!(
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
            return Err(outside(At::item(what, i), v, (min, max)));
        }
        Ok(convert(v))
    };
    let array = match int_array(obj, what) {
        Ok(array) => array,
        // A list NumPy holds as floats or objects (a value beyond int64, a bool, a float):
        // its items one by one, so the error names the one at fault.
        Err(err) if obj.cast::<PyUntypedArray>().is_err() => {
            let values = item_values(obj, what, (min, max)).map_err(|e| e.unwrap_or(err))?;
            return check_each(values, check);
        }
        Err(err) => return Err(err),
    };
    if array.dtype().kind() == b'u' {
        check_each(wide::<u64>(&array, "uint64")?, check)
    } else {
        check_each(wide::<i64>(&array, "int64")?, check)
    }
}

/// `check` of each of `values` with its index, widened to i128.
fn check_each<V: Into<i128>, T>(
    values: Vec<V>,
    check: impl Fn((usize, i128)) -> PyResult<T>,
) -> PyResult<Vec<T>> {
    values
        .into_iter()
        .map(Into::into)
        .enumerate()
        .map(check)
        .collect()
}

/// The items of a Python iterable of ints, each checked to be an int, one beyond i128 refused
/// as outside `range`; `Err(None)` when it is not iterable (the caller's error then stands).
fn item_values(
    obj: &Bound<'_, PyAny>,
    what: &str,
    range: (i128, i128),
) -> Result<Vec<i128>, Option<PyErr>> {
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(None);
    }
    let items = obj.try_iter().map_err(|_| None)?;
    items
        .enumerate()
        .map(|(i, item)| {
            let item = item?;
            let at = At::item(what, i);
            int_in(&item, at, || outside(at, &item, range))
        })
        .collect::<PyResult<Vec<i128>>>()
        .map_err(Some)
}

/// The refusal of an array's item: `what = value is outside [min, max]`.
fn outside(at: At<'_>, value: impl Display, (min, max): (i128, i128)) -> PyErr {
    invalid_at(at, format!("{at} = {value} is outside [{min}, {max}]"))
}

/// The array's values as `W`, converting the dtype only when it differs.
fn wide<W: Element + Copy>(array: &Bound<'_, PyUntypedArray>, dtype: &str) -> PyResult<Vec<W>> {
    if let Ok(exact) = array.cast::<PyArray1<W>>() {
        return Ok(values(exact));
    }
    let converted = array.call_method1(intern!(array.py(), "astype"), (dtype,))?;
    Ok(values(converted.cast::<PyArray1<W>>()?))
}

fn values<W: Element + Copy>(array: &Bound<'_, PyArray1<W>>) -> Vec<W> {
    match array.to_vec() {
        Ok(v) => v,
        Err(_) => array.readonly().as_array().to_vec(),
    }
}

argument!(
    /// 16-bit hashes, each in `[0, 0xFFFF]`.
    RingHashes(Vec<u16>) = |obj, what| match obj.cast::<PyArray1<u16>>() {
        Ok(exact) => Ok(values(exact)),
        Err(_) => checked_values(obj, what, (0, 0xFFFF), |v| v as u16),
    }
);

argument!(
    /// Log offsets, each in `[0, 2**63 - 1]`.
    Offsets(Vec<u64>) =
        |obj, what| checked_values(obj, what, (0, i128::from(MAX_OFFSET)), |v| v as u64)
);

argument!(
    /// Consumer ids, each in `[0, 2**64 - 1]`.
    ConsumerIds(Vec<u64>) =
        |obj, what| checked_values(obj, what, (0, i128::from(u64::MAX)), |v| v as u64)
);

argument!(
    /// Segment ids, each in `[0, 2**64 - 1]`.
    SegmentIds(Vec<u64>) =
        |obj, what| checked_values(obj, what, (0, i128::from(u64::MAX)), |v| v as u64)
);

argument!(
    /// Signed 64-bit ids (ledger and entry ids).
    I64s(Vec<i64>) = |obj, what| {
        let range = (i128::from(i64::MIN), i128::from(i64::MAX));
        checked_values(obj, what, range, |v| v as i64)
    }
);

argument!(
    /// Batch sizes, or counts of acked batch indexes: each as [`crate::conversions::BatchSize`].
    BatchSizes(Vec<i32>) = |obj, what| {
        let I64s(values) = arg(obj, what)?;
        let item = |(i, v)| batch_count(v, &format!("{what}[{i}]")).py();
        values.into_iter().enumerate().map(item).collect()
    }
);

argument!(
    /// Unsigned 32-bit values (bucket indices, key hashes).
    U32s(Vec<u32>) = |obj, what| match obj.cast::<PyArray1<u32>>() {
        Ok(exact) => Ok(values(exact)),
        Err(_) => checked_values(obj, what, (0, i128::from(u32::MAX)), |v| v as u32),
    }
);

/// One consumer id for every item of a batch, or one per item.
pub enum EachConsumer {
    One(u64),
    Many(Vec<u64>),
}

impl<'py> FromArg<'py> for EachConsumer {
    fn from_arg(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Self> {
        let scalar =
            obj.cast::<PyUntypedArray>().is_err() && obj.hasattr(intern!(obj.py(), "__index__"))?;
        if scalar {
            return Ok(Self::One(arg::<ConsumerId>(obj, what)?.0));
        }
        Ok(Self::Many(arg::<ConsumerIds>(obj, what)?.0))
    }
}
