//! The partitioners of other systems over Python keys: one key, or a batch (a sequence of
//! str/bytes/None or of ints, an Arrow array read in place, a NumPy integer array), with
//! the GIL released while the batch is partitioned.

use std::mem::MaybeUninit;

use arrow_array::builder::{BinaryBuilder, Int64Builder};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt8Type,
};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, BinaryArray, BinaryViewArray, Int32Array, Int64Array,
    LargeBinaryArray, PrimitiveArray,
};
use arrow_schema::DataType;
use numpy::{PyArray1, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyInt, PyList, PyString, PyTuple};
use strum::{EnumString, IntoStaticStr, VariantNames};

use crate::conversions::{key_bytes, key_bytes_at, named, type_name};
use crate::errors::Raise;
use keyshared_kernels::parallel::{collect_pairs, default_threads};
use keyshared_kernels::partitioners::{
    self as kernels, IcebergValue, IntColumn, IntKey, IntPartitioner, NumPartitions, Partitioner,
    SparkValue,
};

/// The type a key has in its system; Spark hashes an int and a long apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumString, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "lowercase")]
enum KeyType {
    String,
    Binary,
    Int,
    Long,
}

impl KeyType {
    fn is_int(self) -> bool {
        matches!(self, Self::Int | Self::Long)
    }

    fn name(self) -> &'static str {
        self.into()
    }
}

fn key_type(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<KeyType>> {
    match obj {
        Some(o) if !o.is_none() => {
            let name = o.cast::<PyString>().map_err(|_| {
                PyTypeError::new_err(format!("{what} must be a str, got {}", type_name(o)))
            })?;
            named(what, name.to_str()?).map(Some)
        }
        _ => Ok(None),
    }
}

fn partitioner(obj: &Bound<'_, PyAny>) -> PyResult<Partitioner> {
    let name = obj.cast::<PyString>().map_err(|_| {
        PyTypeError::new_err(format!("partitioner must be a str, got {}", type_name(obj)))
    })?;
    named("partitioner", name.to_str()?)
}

fn num_partitions(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<NumPartitions> {
    NumPartitions::new(int_arg(obj, what)?, what).py()
}

/// An int argument (bool refused), out-of-range values as a ValueError naming it.
fn int_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<i64> {
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int, got {}",
            type_name(obj)
        )));
    }
    obj.extract::<i64>().map_err(|err| {
        if err.is_instance_of::<PyOverflowError>(obj.py()) {
            PyValueError::new_err(format!("{what} = {obj} is outside the range of a long"))
        } else {
            err
        }
    })
}

/// An int value as the given integer type, checked to fit it.
fn int_key(value: i64, int_type: KeyType, what: &str) -> PyResult<IntKey> {
    match int_type {
        KeyType::Int => i32::try_from(value).map(IntKey::Int).map_err(|_| {
            PyValueError::new_err(format!(
                "{what} = {value} is outside the range of an int ([-2**31, 2**31 - 1]); \
                 use key type \"long\""
            ))
        }),
        _ => Ok(IntKey::Long(value)),
    }
}

/// One key of a typed system: bytes (a str as UTF-8), or an int of a given type.
enum Key<'a> {
    Bytes(&'a [u8]),
    Int(IntKey),
}

/// `value` as a key; an int without a type is a long, as PySpark infers a Python int.
fn typed_key<'a>(
    value: &'a Bound<'_, PyAny>,
    key_type: Option<KeyType>,
    what: &str,
) -> PyResult<Key<'a>> {
    let int_given = value.is_instance_of::<PyInt>() && !value.is_instance_of::<PyBool>();
    match (int_given, key_type) {
        (true, Some(t)) if !t.is_int() => Err(PyTypeError::new_err(format!(
            "{what} is an int but the key type is {:?}",
            t.name()
        ))),
        (true, t) => Ok(Key::Int(int_key(
            int_arg(value, what)?,
            t.unwrap_or(KeyType::Long),
            what,
        )?)),
        (false, Some(t)) if t.is_int() => Err(PyTypeError::new_err(format!(
            "{what} must be an int for key type {:?}, got {}",
            t.name(),
            type_name(value)
        ))),
        (false, _) => key_bytes(value, what).map(Key::Bytes),
    }
}

/// The partition of one key (None, str, bytes, or an int for the typed systems), or None
/// where the system picks no fixed partition for it.
#[pyfunction]
#[pyo3(signature = (key, num_partitions, partitioner, key_type=None))]
fn partition_key(
    key: &Bound<'_, PyAny>,
    num_partitions: &Bound<'_, PyAny>,
    partitioner: &Bound<'_, PyAny>,
    key_type: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<u32>> {
    let p = self::partitioner(partitioner)?;
    let n = self::num_partitions(num_partitions, "num_partitions")?;
    let key_type = self::key_type(key_type, "key_type")?;
    if key.is_none() {
        return Ok(p.partition(None, n));
    }
    match typed_key(key, key_type, "key")? {
        Key::Bytes(b) => Ok(p.partition(Some(b), n)),
        Key::Int(k) => Ok(Some(int_partitioner(p)?.partition(k, n))),
    }
}

/// The partitioner of int keys; a TypeError for a system whose keys are bytes.
fn int_partitioner(p: Partitioner) -> PyResult<IntPartitioner> {
    p.for_ints()
        .map_err(|e| PyTypeError::new_err(e.to_string()))
}

/// A batch read from Python: byte keys or integer keys, in Arrow arrays.
enum Batch {
    Bytes(Vec<ByteChunk>),
    Ints(Vec<IntChunk>),
}

enum ByteChunk {
    Binary(BinaryArray),
    LargeBinary(LargeBinaryArray),
    View(BinaryViewArray),
}

enum IntChunk {
    Int32(Int32Array),
    Int64(Int64Array),
}

impl ByteChunk {
    fn len(&self) -> usize {
        match self {
            Self::Binary(a) => a.len(),
            Self::LargeBinary(a) => a.len(),
            Self::View(a) => a.len(),
        }
    }

    /// `f` of keys `start..start + out.len()` (None for a null) into `out`; one loop per
    /// layout, so that the layout is not matched again for every key.
    fn map_into(
        &self,
        start: usize,
        out: &mut [MaybeUninit<i64>],
        f: &impl Fn(Option<&[u8]>) -> i64,
    ) {
        let len = out.len();
        match self {
            Self::Binary(a) => fill(out, a.slice(start, len).iter(), f),
            Self::LargeBinary(a) => fill(out, a.slice(start, len).iter(), f),
            Self::View(a) => fill(out, a.slice(start, len).iter(), f),
        }
    }
}

impl IntChunk {
    fn len(&self) -> usize {
        match self {
            Self::Int32(a) => a.len(),
            Self::Int64(a) => a.len(),
        }
    }

    /// The first value (index, value) that does not fit an int, when read as `int_type`.
    fn first_beyond_int(&self, int_type: Option<KeyType>) -> Option<(usize, i64)> {
        match self {
            Self::Int64(a) if int_type == Some(KeyType::Int) => a
                .iter()
                .enumerate()
                .find_map(|(i, v)| v.filter(|&v| i32::try_from(v).is_err()).map(|v| (i, v))),
            _ => None,
        }
    }

    /// `f` of keys `start..start + out.len()` as `int_type` (None: the chunk's own width),
    /// None for a null; a value beyond an int was refused before (`first_beyond_int`).
    fn map_into(
        &self,
        start: usize,
        out: &mut [MaybeUninit<i64>],
        int_type: Option<KeyType>,
        f: &impl Fn(Option<IntKey>) -> i64,
    ) {
        let len = out.len();
        match self {
            Self::Int32(a) => {
                let long = int_type == Some(KeyType::Long);
                let key = |v: i32| match long {
                    true => IntKey::Long(i64::from(v)),
                    false => IntKey::Int(v),
                };
                fill(out, a.slice(start, len).iter().map(|v| v.map(key)), f);
            }
            Self::Int64(a) => {
                let int = int_type == Some(KeyType::Int);
                let key = |v: i64| match (int, i32::try_from(v)) {
                    (true, Ok(v)) => IntKey::Int(v),
                    _ => IntKey::Long(v),
                };
                fill(out, a.slice(start, len).iter().map(|v| v.map(key)), f);
            }
        }
    }
}

fn fill<T>(out: &mut [MaybeUninit<i64>], keys: impl Iterator<Item = T>, f: &impl Fn(T) -> i64) {
    for (slot, key) in out.iter_mut().zip(keys) {
        slot.write(f(key));
    }
}

/// An output of `len` items filled piece by piece by `work(start, piece)`, on the default
/// number of threads.
fn in_pieces(len: usize, work: impl Fn(usize, &mut [MaybeUninit<i64>]) + Sync) -> Vec<i64> {
    let work =
        |start: usize, out: &mut [MaybeUninit<i64>], _: &mut [MaybeUninit<()>]| work(start, out);
    // SAFETY: every `work` here is a chunk's `map_into`, which writes one value for each
    // slot: the slice it reads is as long as the piece, and inside the chunk since the
    // pieces tile `0..len`.
    unsafe { collect_pairs(len, default_threads(), work) }.0
}

fn byte_chunk(array: ArrayRef) -> Option<ByteChunk> {
    Some(match array.data_type() {
        DataType::Utf8 => ByteChunk::Binary(BinaryArray::from(array.as_string::<i32>().clone())),
        DataType::LargeUtf8 => {
            ByteChunk::LargeBinary(LargeBinaryArray::from(array.as_string::<i64>().clone()))
        }
        DataType::Binary => ByteChunk::Binary(array.as_binary::<i32>().clone()),
        DataType::LargeBinary => ByteChunk::LargeBinary(array.as_binary::<i64>().clone()),
        DataType::Utf8View => ByteChunk::View(array.as_string_view().clone().to_binary_view()),
        DataType::BinaryView => ByteChunk::View(array.as_binary_view().clone()),
        _ => return None,
    })
}

/// An Arrow integer array as int32 or int64 values, by the type Spark gives each width
/// (`IntColumn`); None for other types and for uint64.
fn int_chunk(array: ArrayRef) -> Option<IntChunk> {
    fn widened<T: ArrowPrimitiveType, U: ArrowPrimitiveType>(
        array: &ArrayRef,
        f: fn(T::Native) -> U::Native,
    ) -> PrimitiveArray<U> {
        array.as_primitive::<T>().unary(f)
    }
    let is_int = |bits, signed| IntColumn { bits, signed }.is_int().ok();
    Some(match array.data_type() {
        DataType::Int8 if is_int(8, true)? => {
            IntChunk::Int32(widened::<Int8Type, Int32Type>(&array, i32::from))
        }
        DataType::Int16 if is_int(16, true)? => {
            IntChunk::Int32(widened::<Int16Type, Int32Type>(&array, i32::from))
        }
        DataType::UInt8 if is_int(8, false)? => {
            IntChunk::Int32(widened::<UInt8Type, Int32Type>(&array, i32::from))
        }
        DataType::UInt16 if is_int(16, false)? => {
            IntChunk::Int32(widened::<UInt16Type, Int32Type>(&array, i32::from))
        }
        DataType::Int32 if is_int(32, true)? => {
            IntChunk::Int32(array.as_primitive::<Int32Type>().clone())
        }
        DataType::UInt32 if !is_int(32, false)? => {
            IntChunk::Int64(widened::<UInt32Type, Int64Type>(&array, i64::from))
        }
        DataType::Int64 if !is_int(64, true)? => {
            IntChunk::Int64(array.as_primitive::<Int64Type>().clone())
        }
        _ => return None,
    })
}

/// Arrow arrays as one batch: all of byte types or all of integer types. An all-null array
/// (what pyarrow infers for nothing but None) takes the key type's side.
fn arrow_batch(arrays: Vec<ArrayRef>, key_type: Option<KeyType>) -> PyResult<Batch> {
    let ints = match arrays.iter().find(|a| a.data_type() != &DataType::Null) {
        Some(a) => int_chunk(a.clone()).is_some(),
        None => key_type.is_some_and(KeyType::is_int),
    };
    let unsupported = |a: &ArrayRef| {
        PyTypeError::new_err(format!(
            "keys: Arrow type {} is not supported; use string, large_string, binary, \
             large_binary, or an integer type up to int64 (one kind for the whole batch)",
            a.data_type()
        ))
    };
    if ints {
        let chunks = arrays.into_iter().map(|a| match a.data_type() {
            DataType::Null => Ok(IntChunk::Int64(Int64Array::new_null(a.len()))),
            _ => int_chunk(a.clone()).ok_or_else(|| unsupported(&a)),
        });
        return chunks.collect::<PyResult<_>>().map(Batch::Ints);
    }
    let chunks = arrays.into_iter().map(|a| match a.data_type() {
        DataType::Null => Ok(ByteChunk::Binary(BinaryArray::new_null(a.len()))),
        _ => byte_chunk(a.clone()).ok_or_else(|| unsupported(&a)),
    });
    chunks.collect::<PyResult<_>>().map(Batch::Bytes)
}

/// A list or tuple of keys: str/bytes and None, or ints and None (by the first key that is
/// not None, or by the key type when all are None).
fn sequence_batch(items: &[Bound<'_, PyAny>], key_type: Option<KeyType>) -> PyResult<Batch> {
    let first = items.iter().find(|k| !k.is_none());
    let ints = match first {
        Some(k) => k.is_instance_of::<PyInt>() && !k.is_instance_of::<PyBool>(),
        None => key_type.is_some_and(KeyType::is_int),
    };
    if ints {
        let mut values = Int64Builder::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item.is_none() {
                true => values.append_null(),
                false => values.append_value(int_arg(item, &format!("keys[{i}]"))?),
            }
        }
        return Ok(Batch::Ints(vec![IntChunk::Int64(values.finish())]));
    }
    let mut keys = BinaryBuilder::with_capacity(items.len(), items.len() * 16);
    for (i, item) in items.iter().enumerate() {
        match item.is_none() {
            true => keys.append_null(),
            false => keys.append_value(key_bytes_at(item, i)?),
        }
    }
    Ok(Batch::Bytes(vec![ByteChunk::Binary(keys.finish())]))
}

/// A NumPy array: integer dtypes as int32 or int64 values, by the type Spark gives each
/// width (`IntColumn`), in any byte order and stride; any other dtype as its items.
fn numpy_batch(array: &Bound<'_, PyUntypedArray>, key_type: Option<KeyType>) -> PyResult<Batch> {
    if array.ndim() != 1 {
        return Err(PyTypeError::new_err(format!(
            "keys must be a one-dimensional array, got {} dimensions",
            array.ndim()
        )));
    }
    let dtype = array.dtype();
    if !matches!(dtype.kind(), b'i' | b'u') {
        let items = array.call_method0(intern!(array.py(), "tolist"))?;
        let items: Vec<Bound<'_, PyAny>> = items.cast::<PyList>()?.iter().collect();
        return sequence_batch(&items, key_type);
    }
    let column = IntColumn {
        bits: 8 * u32::try_from(dtype.itemsize()).unwrap_or(u32::MAX),
        signed: dtype.kind() == b'i',
    };
    let is_int = column
        .is_int()
        .map_err(|e| PyTypeError::new_err(format!("keys: {e}")))?;
    // A copy in native order, contiguous, of the width read: NumPy converts byte order,
    // stride and width in one pass (a no-op for what is already so).
    let native = array
        .py()
        .import(intern!(array.py(), "numpy"))?
        .call_method1(
            intern!(array.py(), "ascontiguousarray"),
            (array, if is_int { "=i4" } else { "=i8" }),
        )?;
    Ok(Batch::Ints(vec![if is_int {
        IntChunk::Int32(Int32Array::from(native.cast::<PyArray1<i32>>()?.to_vec()?))
    } else {
        IntChunk::Int64(Int64Array::from(native.cast::<PyArray1<i64>>()?.to_vec()?))
    }]))
}

fn read_batch(keys: &Bound<'_, PyAny>, key_type: Option<KeyType>) -> PyResult<Batch> {
    let py = keys.py();
    if keys.is_instance_of::<PyString>() || keys.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(
            "keys must be a batch of keys, not a single str or bytes; use partition for one key",
        ));
    }
    if keys.hasattr(intern!(py, "__arrow_c_array__"))? {
        let (array, _) = keys.extract::<pyo3_arrow::PyArray>()?.into_inner();
        return arrow_batch(vec![array], key_type);
    }
    if keys.hasattr(intern!(py, "__arrow_c_stream__"))? {
        let (arrays, _) = keys.extract::<pyo3_arrow::PyChunkedArray>()?.into_inner();
        return arrow_batch(arrays, key_type);
    }
    if let Ok(array) = keys.cast::<PyUntypedArray>() {
        return numpy_batch(array, key_type);
    }
    if let Ok(list) = keys.cast::<PyList>() {
        return sequence_batch(&list.iter().collect::<Vec<_>>(), key_type);
    }
    if let Ok(tuple) = keys.cast::<PyTuple>() {
        return sequence_batch(&tuple.iter().collect::<Vec<_>>(), key_type);
    }
    match keys.try_iter() {
        Ok(items) => sequence_batch(&items.collect::<PyResult<Vec<_>>>()?, key_type),
        Err(_) => Err(PyTypeError::new_err(format!(
            "keys must be a sequence of str/bytes/None or of ints, a NumPy integer array or \
             an Arrow array, got {}",
            type_name(keys)
        ))),
    }
}

/// The partition of every key as an int64 array, -1 where the system picks no fixed
/// partition; large batches run on the default number of threads (`set_num_threads`).
#[pyfunction]
#[pyo3(signature = (keys, num_partitions, partitioner, key_type=None))]
fn partition_keys<'py>(
    keys: &Bound<'py, PyAny>,
    num_partitions: &Bound<'py, PyAny>,
    partitioner: &Bound<'py, PyAny>,
    key_type: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let p = self::partitioner(partitioner)?;
    let n = self::num_partitions(num_partitions, "num_partitions")?;
    let key_type = self::key_type(key_type, "key_type")?;
    let batch = read_batch(keys, key_type)?;
    let out: Vec<i64> = match batch {
        Batch::Bytes(chunks) => {
            if let Some(t) = key_type.filter(|t| t.is_int()) {
                return Err(PyTypeError::new_err(format!(
                    "keys are str/bytes but key_type is {:?}",
                    t.name()
                )));
            }
            keys.py().detach(|| {
                let f = |k: Option<&[u8]>| p.partition(k, n).map_or(-1, i64::from);
                let each = |c: &ByteChunk| in_pieces(c.len(), |at, out| c.map_into(at, out, &f));
                chunks.iter().flat_map(each).collect()
            })
        }
        Batch::Ints(chunks) => {
            let ints = int_partitioner(p)?;
            if let Some(t) = key_type.filter(|t| !t.is_int()) {
                return Err(PyTypeError::new_err(format!(
                    "keys are ints but key_type is {:?}",
                    t.name()
                )));
            }
            let mut start = 0;
            for c in &chunks {
                if let Some((i, v)) = c.first_beyond_int(key_type) {
                    return Err(PyValueError::new_err(format!(
                        "keys[{}] = {v} is outside the range of an int ([-2**31, 2**31 - 1]); \
                         use key_type=\"long\"",
                        start + i
                    )));
                }
                start += c.len();
            }
            let null = p.partition(None, n).map_or(-1, i64::from);
            keys.py().detach(|| {
                let f = |k: Option<IntKey>| k.map_or(null, |k| i64::from(ints.partition(k, n)));
                let each =
                    |c: &IntChunk| in_pieces(c.len(), |at, out| c.map_into(at, out, key_type, &f));
                chunks.iter().flat_map(each).collect()
            })
        }
    };
    Ok(PyArray1::from_vec(keys.py(), out))
}

/// Kafka's `Utils.murmur2` of the bytes (a str as UTF-8), as Java's signed int.
#[pyfunction]
fn murmur2(data: &Bound<'_, PyAny>) -> PyResult<i32> {
    Ok(kernels::murmur2(key_bytes(data, "data")?))
}

/// FNV-1a (32 bits) of the bytes (a str as UTF-8), unsigned.
#[pyfunction]
fn fnv1a_32(data: &Bound<'_, PyAny>) -> PyResult<u32> {
    Ok(kernels::fnv1a_32(key_bytes(data, "data")?))
}

/// Java's `String.hashCode` of a str, or of bytes decoded as `new String(bytes, UTF_8)`.
#[pyfunction]
fn java_string_hash_code(key: &Bound<'_, PyAny>) -> PyResult<i32> {
    if let Ok(text) = key.cast::<PyString>() {
        if text.to_str().is_err() {
            // Lone surrogates: a Java string may hold them; hash the units as they are.
            let units =
                text.call_method1(intern!(key.py(), "encode"), ("utf-16-le", "surrogatepass"))?;
            let units = units.cast::<PyBytes>()?.as_bytes();
            let units = units
                .chunks_exact(2)
                .map(|u| u16::from_le_bytes([u[0], u[1]]));
            return Ok(kernels::java_string_hash(units));
        }
    }
    Ok(kernels::java_string_hash_utf8(key_bytes(key, "key")?))
}

/// The UTF-8 bytes of the Java string a key stands for: a str's, or `new String(bytes,
/// UTF_8).getBytes(UTF_8)` of bytes (malformed sequences replaced as the JDK replaces them).
#[pyfunction]
fn java_utf8<'py>(key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    Ok(PyBytes::new(
        key.py(),
        &kernels::java_utf8(key_bytes(key, "key")?),
    ))
}

/// Iceberg's `bucket[num_buckets]` of a str, bytes or int value.
#[pyfunction]
fn iceberg_bucket(value: &Bound<'_, PyAny>, num_buckets: &Bound<'_, PyAny>) -> PyResult<u32> {
    let n = num_partitions(num_buckets, "num_buckets")?;
    let hash = match typed_key(value, None, "value")? {
        Key::Bytes(b) => kernels::iceberg_hash(IcebergValue::Bytes(b)),
        Key::Int(k) => kernels::iceberg_hash(k.into()),
    };
    Ok(kernels::iceberg_bucket(hash, n))
}

/// Spark's `hash()` of one value (seed 42) as Spark's signed int. `data_type` is "string",
/// "binary", "int" or "long"; an int is a long unless told, as PySpark infers a Python int;
/// None hashes to the seed.
#[pyfunction]
#[pyo3(signature = (value, data_type=None))]
fn spark_hash(value: &Bound<'_, PyAny>, data_type: Option<&Bound<'_, PyAny>>) -> PyResult<i32> {
    let data_type = key_type(data_type, "data_type")?;
    if value.is_none() {
        return Ok(kernels::SPARK_SEED as i32);
    }
    Ok(match typed_key(value, data_type, "value")? {
        Key::Bytes(b) => kernels::spark_hash(SparkValue::Bytes(b)),
        Key::Int(k) => kernels::spark_hash(k.into()),
    })
}

/// `pmod(hash(value), num_buckets)`: the bucket Spark's `bucketBy` gives the value.
#[pyfunction]
#[pyo3(signature = (value, num_buckets, data_type=None))]
fn spark_bucket(
    value: &Bound<'_, PyAny>,
    num_buckets: &Bound<'_, PyAny>,
    data_type: Option<&Bound<'_, PyAny>>,
) -> PyResult<u32> {
    let n = num_partitions(num_buckets, "num_buckets")?;
    Ok(kernels::pmod(spark_hash(value, data_type)?, n.get()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(partition_key, m)?)?;
    m.add_function(wrap_pyfunction!(partition_keys, m)?)?;
    m.add_function(wrap_pyfunction!(murmur2, m)?)?;
    m.add_function(wrap_pyfunction!(fnv1a_32, m)?)?;
    m.add_function(wrap_pyfunction!(java_string_hash_code, m)?)?;
    m.add_function(wrap_pyfunction!(java_utf8, m)?)?;
    m.add_function(wrap_pyfunction!(iceberg_bucket, m)?)?;
    m.add_function(wrap_pyfunction!(spark_hash, m)?)?;
    m.add_function(wrap_pyfunction!(spark_bucket, m)?)?;
    Ok(())
}
