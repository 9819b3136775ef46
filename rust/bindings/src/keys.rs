//! Python key batches -> `KeyBatch`: lists and tuples, NumPy arrays, Arrow arrays.

use arrow_array::cast::AsArray;
use arrow_array::{ArrayRef, BinaryArray, LargeBinaryArray};
use arrow_schema::DataType;
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::errors::Raise;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use pyo3::{ffi, intern};
use pyo3_arrow::{PyArray, PyChunkedArray};

use crate::conversions::{key_bytes, key_bytes_at, type_name};
use keyshared_kernels::keys::{KeyBatch, KeyChunk, PackedKeys};

/// Reads `keys` as a batch; `null_key` (str or bytes) stands in for null keys.
pub fn key_batch(
    keys: &Bound<'_, PyAny>,
    null_key: Option<&Bound<'_, PyAny>>,
) -> PyResult<KeyBatch> {
    let null_key = null_key
        .filter(|k| !k.is_none())
        .map(|k| key_bytes(k, "null_key").map(<[u8]>::to_vec))
        .transpose()?;
    let chunks = key_chunks(keys, null_key.as_deref())?;
    KeyBatch::new(chunks, null_key).py()
}

/// `key_batch`, also taking any other iterable of keys (a generator, a set), collected into
/// a list first.
pub fn any_key_batch(keys: &Bound<'_, PyAny>) -> PyResult<KeyBatch> {
    match key_batch(keys, None) {
        Err(err) if err.is_instance_of::<PyTypeError>(keys.py()) && is_other_iterable(keys) => {
            let items = keys.try_iter()?.collect::<PyResult<Vec<_>>>()?;
            key_batch(PyList::new(keys.py(), items)?.as_any(), None)
        }
        result => result,
    }
}

fn is_other_iterable(keys: &Bound<'_, PyAny>) -> bool {
    !(keys.is_instance_of::<PyString>()
        || keys.is_instance_of::<PyBytes>()
        || keys.is_instance_of::<PyList>()
        || keys.is_instance_of::<PyTuple>()
        || keys.cast::<PyUntypedArray>().is_ok())
        && keys.try_iter().is_ok()
}

fn key_chunks(keys: &Bound<'_, PyAny>, null_key: Option<&[u8]>) -> PyResult<Vec<KeyChunk>> {
    let py = keys.py();
    if keys.is_instance_of::<PyString>() || keys.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(
            "keys must be a batch of keys, not a single str or bytes; use key_hash for one key",
        ));
    }
    if keys.hasattr(intern!(py, "__arrow_c_array__"))? {
        let (array, _) = keys.extract::<PyArray>()?.into_inner();
        return Ok(vec![arrow_chunk(array)?]);
    }
    if keys.hasattr(intern!(py, "__arrow_c_stream__"))? {
        let (arrays, _) = keys.extract::<PyChunkedArray>()?.into_inner();
        return arrays.into_iter().map(arrow_chunk).collect();
    }
    if let Ok(array) = keys.cast::<PyUntypedArray>() {
        let mask = numpy_mask(array)?;
        return Ok(vec![KeyChunk::Packed(pack_numpy(
            array,
            null_key,
            mask.as_deref(),
        )?)]);
    }
    if let Ok(list) = keys.cast::<PyList>() {
        return Ok(vec![KeyChunk::Packed(pack_list(list, null_key)?)]);
    }
    if let Ok(tuple) = keys.cast::<PyTuple>() {
        // SAFETY: as for lists (pack_list); a tuple's items are inline after its header.
        let packed = unsafe {
            let items = (*(tuple.as_ptr() as *mut ffi::PyTupleObject))
                .ob_item
                .as_ptr();
            pack_objects(py, std::slice::from_raw_parts(items, tuple.len()), null_key)?
        };
        return Ok(vec![KeyChunk::Packed(packed)]);
    }
    Err(PyTypeError::new_err(format!(
        "keys must be a list or tuple of str/bytes, a NumPy array or an Arrow array, got {}",
        type_name(keys)
    )))
}

fn arrow_chunk(array: ArrayRef) -> PyResult<KeyChunk> {
    Ok(match array.data_type() {
        DataType::Utf8 => KeyChunk::Binary(BinaryArray::from(array.as_string::<i32>().clone())),
        DataType::LargeUtf8 => {
            KeyChunk::LargeBinary(LargeBinaryArray::from(array.as_string::<i64>().clone()))
        }
        DataType::Binary => KeyChunk::Binary(array.as_binary::<i32>().clone()),
        DataType::LargeBinary => KeyChunk::LargeBinary(array.as_binary::<i64>().clone()),
        DataType::Utf8View => KeyChunk::BinaryView(array.as_string_view().clone().to_binary_view()),
        DataType::BinaryView => KeyChunk::BinaryView(array.as_binary_view().clone()),
        // What pyarrow infers for a batch of nothing but nulls.
        DataType::Null => KeyChunk::Binary(BinaryArray::new_null(array.len())),
        other => {
            return Err(PyTypeError::new_err(format!(
                "keys: Arrow type {other} is not supported; use string, large_string, \
                 binary or large_binary"
            )))
        }
    })
}

fn pack_list(list: &Bound<'_, PyList>, null_key: Option<&[u8]>) -> PyResult<PackedKeys> {
    // An empty list has no item array (a null pointer), which no slice may point at.
    if list.is_empty() {
        return unsafe { pack_objects(list.py(), &[], null_key) };
    }
    // SAFETY: a list's item array holds its len() live objects; the list is borrowed for
    // this call and does not change while packing (see pack_objects).
    unsafe {
        let items = (*(list.as_ptr() as *mut ffi::PyListObject)).ob_item;
        pack_objects(
            list.py(),
            std::slice::from_raw_parts(items, list.len()),
            null_key,
        )
    }
}

/// Packs the keys of a list, tuple or object array, given as borrowed object pointers.
///
/// SAFETY (for callers): `items` must be live objects owned by a container that the caller
/// holds, with the GIL held. Nothing here runs Python code or releases the GIL, so the
/// container cannot change while it is read.
unsafe fn pack_objects(
    py: Python<'_>,
    items: &[*mut ffi::PyObject],
    null_key: Option<&[u8]>,
) -> PyResult<PackedKeys> {
    let mut packed = PackedKeys::with_capacity(items.len(), items.len() * 32);
    for (i, &item) in items.iter().enumerate() {
        if let Some(ahead) = items.get(i + PREFETCH_AHEAD) {
            prefetch(*ahead);
        }
        if let Some(bytes) = exact_key(item) {
            packed.push(bytes);
        } else if item == ffi::Py_None() {
            packed.push(null_key.ok_or_else(|| null_error(i))?);
        } else {
            // Subclasses, wrong types and undecodable text: the checked path with messages.
            let item = Bound::from_borrowed_ptr(py, item);
            packed.push(key_bytes_at(&item, i)?);
        }
    }
    Ok(packed)
}

/// Objects are scattered over the heap; asking for them early hides the cache misses.
const PREFETCH_AHEAD: usize = 8;

#[inline]
fn prefetch(obj: *mut ffi::PyObject) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint and never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(obj as *const i8);
        _mm_prefetch::<_MM_HINT_T0>((obj as *const i8).wrapping_add(64));
    }
}

/// The bytes of an exact `str` or `bytes`, or None for anything else (or text that does not
/// encode, with the error cleared so that the checked path can report it).
///
/// SAFETY: `obj` is live for `'a` and the GIL is held.
#[inline]
unsafe fn exact_key<'a>(obj: *mut ffi::PyObject) -> Option<&'a [u8]> {
    if ffi::PyUnicode_CheckExact(obj) != 0 {
        let mut size: ffi::Py_ssize_t = 0;
        let data = ffi::PyUnicode_AsUTF8AndSize(obj, &mut size);
        if data.is_null() {
            ffi::PyErr_Clear();
            return None;
        }
        return Some(std::slice::from_raw_parts(data as *const u8, size as usize));
    }
    if ffi::PyBytes_CheckExact(obj) != 0 {
        let data = ffi::PyBytes_AS_STRING(obj) as *const u8;
        return Some(std::slice::from_raw_parts(
            data,
            ffi::PyBytes_Size(obj) as usize,
        ));
    }
    None
}

fn null_error(i: usize) -> PyErr {
    PyValueError::new_err(format!(
        "keys[{i}] is None; pass null_key= to hash nulls as given bytes"
    ))
}

/// A masked array's mask (True where an item is masked, a null key), or None.
fn numpy_mask(array: &Bound<'_, PyUntypedArray>) -> PyResult<Option<Vec<bool>>> {
    let py = array.py();
    // Plain arrays are by far the most common: only subclasses can be masked.
    if array.get_type().is(numpy_type(py, "ndarray")?) {
        return Ok(None);
    }
    let ma = py.import(intern!(py, "numpy.ma"))?;
    if !array.is_instance(&ma.getattr(intern!(py, "MaskedArray"))?)? {
        return Ok(None);
    }
    let mask = ma.call_method1(intern!(py, "getmaskarray"), (array,))?;
    Ok(Some(mask.call_method0(intern!(py, "tolist"))?.extract()?))
}

fn numpy_type<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import(intern!(py, "numpy"))?.getattr(name)
}

fn pack_numpy(
    array: &Bound<'_, PyUntypedArray>,
    null_key: Option<&[u8]>,
    mask: Option<&[bool]>,
) -> PyResult<PackedKeys> {
    if array.ndim() != 1 {
        return Err(PyValueError::new_err(format!(
            "keys must be a one-dimensional array, got {} dimensions",
            array.ndim()
        )));
    }
    let dtype = array.dtype();
    let null = |i: usize| null_key.ok_or_else(|| masked_error(i));
    match dtype.kind() {
        b'O' => {
            // Object arrays are copied to a contiguous list of pointers first, whatever
            // their strides; the copy holds the array's own references.
            let list = array.call_method0("tolist")?;
            let list = list.cast::<PyList>()?;
            for (i, _) in mask.into_iter().flatten().enumerate().filter(|&(_, &m)| m) {
                null(i)?;
                list.set_item(i, array.py().None())?;
            }
            pack_list(list, null_key)
        }
        b'S' => pack_fixed(array, dtype.itemsize(), 1, |packed, raw, i| {
            match mask.is_some_and(|m| m[i]) {
                true => packed.push(null(i)?),
                false => packed.push(trim_nuls(raw)),
            }
            Ok(())
        }),
        b'U' => {
            let big_endian = match dtype.byteorder() {
                b'>' => true,
                b'<' => false,
                _ => cfg!(target_endian = "big"),
            };
            pack_fixed(array, dtype.itemsize(), 4, |packed, raw, i| {
                if mask.is_some_and(|m| m[i]) {
                    packed.push(null(i)?);
                    return Ok(());
                }
                packed.push_ucs4(raw, big_endian).map_err(|code| {
                    PyValueError::new_err(format!(
                        "keys[{i}] holds {code:#x}, which is not a Unicode scalar value"
                    ))
                })
            })
        }
        _ => Err(PyTypeError::new_err(format!(
            "keys: NumPy dtype {dtype} holds neither text nor bytes; use str, bytes or object"
        ))),
    }
}

fn masked_error(i: usize) -> PyErr {
    PyValueError::new_err(format!(
        "keys[{i}] is masked (null); pass null_key= to hash nulls as given bytes"
    ))
}

/// NumPy pads fixed-width bytes with trailing zeros, which are not part of the value.
fn trim_nuls(raw: &[u8]) -> &[u8] {
    let end = raw.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
    &raw[..end]
}

/// Packs the items of a one-dimensional fixed-width array, following its stride; items of
/// `unit` bytes a character take about `itemsize / unit` bytes packed.
fn pack_fixed(
    array: &Bound<'_, PyUntypedArray>,
    itemsize: usize,
    unit: usize,
    push: impl Fn(&mut PackedKeys, &[u8], usize) -> PyResult<()>,
) -> PyResult<PackedKeys> {
    let len = array.len();
    let stride = array.strides()[0];
    let mut packed = PackedKeys::with_capacity(len, len * itemsize / unit);
    // SAFETY: the array is alive and borrowed for this whole call, which holds the GIL; the
    // item at index i starts `i * stride` bytes from the data pointer and spans itemsize bytes.
    let base = unsafe { (*array.as_array_ptr()).data as *const u8 };
    for i in 0..len {
        let raw = unsafe { std::slice::from_raw_parts(base.offset(i as isize * stride), itemsize) };
        push(&mut packed, raw, i)?;
    }
    Ok(packed)
}
