//! Other systems' partitioners over Python keys: argument conversion only; batches are
//! read by `keys::key_column` and partitioned by the kernels with the GIL released.

use numpy::PyArray1;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use strum::{EnumString, IntoStaticStr, VariantNames};

use crate::conversions::{int_at, is_int, key_bytes, named_arg, numpy, type_name};
use crate::errors::{self, At, Raise};
use crate::keys::{key_column, Keys};
use keyshared_kernels::jdk_utf8;
use keyshared_kernels::keys::{IntKey, IntTyping};
use keyshared_kernels::parallel::default_threads;
use keyshared_kernels::partitioners::{
    self as kernels, IntPartitioner, NumPartitions, Partitioner,
};
use keyshared_kernels::system_hashes::{self, IcebergValue, SparkValue};

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
        Some(o) if !o.is_none() => named_arg(o, what).map(Some),
        _ => Ok(None),
    }
}

fn partitioner(obj: &Bound<'_, PyAny>) -> PyResult<Partitioner> {
    named_arg(obj, "partitioner")
}

fn num_partitions(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<NumPartitions> {
    NumPartitions::new(int_at(obj, At::arg(what))?, what).py()
}

/// An int value as the given integer type, checked to fit it; `type_arg` names the argument
/// that gave the type.
fn int_key(value: i64, int_type: KeyType, what: &str, type_arg: &str) -> PyResult<IntKey> {
    match int_type {
        KeyType::Int => i32::try_from(value)
            .map(IntKey::Int)
            .map_err(|_| beyond_int(At::arg(what), value, type_arg)),
        _ => Ok(IntKey::Long(value)),
    }
}

/// The refusal of an int key too wide for the int type, pointing to the long type by the
/// argument `type_arg` that chose it.
fn beyond_int(at: At<'_>, value: i64, type_arg: &str) -> PyErr {
    errors::invalid_at(
        at,
        format!(
            "{at} = {value} is outside the range of an int ([-2**31, 2**31 - 1]); \
             use {type_arg}=\"long\""
        ),
    )
}

/// One key of a typed system: bytes (a str as UTF-8), or an int of a given type.
enum Key<'a> {
    Bytes(&'a [u8]),
    Int(IntKey),
}

/// `value` as a key, of the type the argument `type_arg` gives; an int without a type is a
/// long, as PySpark infers a Python int.
fn typed_key<'a>(
    value: &'a Bound<'_, PyAny>,
    key_type: Option<KeyType>,
    what: &str,
    type_arg: &str,
) -> PyResult<Key<'a>> {
    let int_given = is_int(value);
    match (int_given, key_type) {
        (true, Some(t)) if !t.is_int() => Err(errors::wrong_type_at(
            At::arg(what),
            format!("{what} is an int but the key type is {:?}", t.name()),
        )),
        (true, t) => Ok(Key::Int(int_key(
            int_at(value, At::arg(what))?,
            t.unwrap_or(KeyType::Long),
            what,
            type_arg,
        )?)),
        (false, Some(t)) if t.is_int() => Err(errors::wrong_type_at(
            At::arg(what),
            format!(
                "{what} must be an int for key type {:?}, got {}",
                t.name(),
                type_name(value)
            ),
        )),
        (false, _) => key_bytes(value, what).map(Key::Bytes),
    }
}

#[doc = stub_doc!("partition_key")]
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
    match typed_key(key, key_type, "key", "key_type")? {
        Key::Bytes(b) => Ok(p.partition(Some(b), n)),
        Key::Int(k) => Ok(Some(int_partitioner(p)?.partition(k, n))),
    }
}

/// The partitioner of int keys; a TypeError for a system whose keys are bytes.
fn int_partitioner(p: Partitioner) -> PyResult<IntPartitioner> {
    p.for_ints().py()
}

#[doc = stub_doc!("partition_keys")]
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
    let type_error = |kind: &str, t: KeyType| {
        errors::wrong_type_at(
            At::arg("key_type"),
            format!("keys are {kind} but key_type is {:?}", t.name()),
        )
    };
    let out = match key_column(keys, key_type.is_some_and(KeyType::is_int))? {
        Keys::Bytes(batch) => {
            if let Some(t) = key_type.filter(|t| t.is_int()) {
                return Err(type_error("str/bytes", t));
            }
            let m = p.key_map(n);
            batch.map(keys.py(), default_threads(), &m, (m.null, ()))?.0
        }
        Keys::Ints(ints) => {
            let int_partitioner = int_partitioner(p)?;
            if let Some(t) = key_type.filter(|t| !t.is_int()) {
                return Err(type_error("ints", t));
            }
            let typing = match key_type {
                Some(KeyType::Int) => IntTyping::Int,
                Some(KeyType::Long) => IntTyping::Long,
                _ => IntTyping::ByWidth,
            };
            if let Some((i, v)) = ints.first_beyond_int(typing) {
                return Err(beyond_int(At::item("keys", i), v, "key_type"));
            }
            let null = p.partition(None, n).map_or(-1, i64::from);
            keys.py()
                .detach(|| int_partitioner.partitions(&ints, typing, n, null, default_threads()))
        }
    };
    Ok(numpy(keys.py(), out))
}

#[doc = stub_doc!("murmur2")]
#[pyfunction]
fn murmur2(data: &Bound<'_, PyAny>) -> PyResult<i32> {
    Ok(system_hashes::murmur2(key_bytes(data, "data")?))
}

#[doc = stub_doc!("fnv1a_32")]
#[pyfunction]
fn fnv1a_32(data: &Bound<'_, PyAny>) -> PyResult<u32> {
    Ok(system_hashes::fnv1a_32(key_bytes(data, "data")?))
}

#[doc = stub_doc!("java_string_hash_code")]
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
            return Ok(system_hashes::java_string_hash(units));
        }
    }
    Ok(system_hashes::java_string_hash_utf8(key_bytes(key, "key")?))
}

#[doc = stub_doc!("java_utf8")]
#[pyfunction]
fn java_utf8<'py>(key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    Ok(PyBytes::new(
        key.py(),
        &jdk_utf8::java_utf8(key_bytes(key, "key")?),
    ))
}

#[doc = stub_doc!("iceberg_bucket")]
#[pyfunction]
fn iceberg_bucket(value: &Bound<'_, PyAny>, num_buckets: &Bound<'_, PyAny>) -> PyResult<u32> {
    let n = num_partitions(num_buckets, "num_buckets")?;
    let hash = match typed_key(value, None, "value", "data_type")? {
        Key::Bytes(b) => system_hashes::iceberg_hash(IcebergValue::Bytes(b)),
        Key::Int(k) => system_hashes::iceberg_hash(k.into()),
    };
    Ok(kernels::iceberg_bucket(hash, n))
}

#[doc = stub_doc!("spark_hash")]
#[pyfunction]
#[pyo3(signature = (value, data_type=None))]
fn spark_hash(value: &Bound<'_, PyAny>, data_type: Option<&Bound<'_, PyAny>>) -> PyResult<i32> {
    let data_type = key_type(data_type, "data_type")?;
    if value.is_none() {
        return Ok(system_hashes::SPARK_SEED as i32);
    }
    Ok(match typed_key(value, data_type, "value", "data_type")? {
        Key::Bytes(b) => system_hashes::spark_hash(SparkValue::Bytes(b)),
        Key::Int(k) => system_hashes::spark_hash(k.into()),
    })
}

#[doc = stub_doc!("spark_bucket")]
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
