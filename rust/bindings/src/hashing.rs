use numpy::PyArray1;
use pyo3::prelude::*;

use super::buckets::PyHashRange;
use super::keys::key_batch;
use crate::conversions::{arg, arg_or, key_bytes, DefaultThreads, ScalableRelease, Threads};
use keyshared_kernels::hashing::{self, bucket_hash, segment_hash, sticky_hash_in, HASH_VERSION};
use keyshared_kernels::parallel::set_default_threads;

/// MurmurHash3_x86_32 (seed 0) of a key, as an unsigned 32-bit int.
#[pyfunction]
fn key_hash(key: &Bound<'_, PyAny>) -> PyResult<u32> {
    Ok(hashing::key_hash(key_bytes(key, "key")?))
}

/// The key's place on the 16-bit segment ring: `key_hash(key) >> 16` on master,
/// `key_hash(key) & 0xFFFF` on 5.0.0-M1.
#[pyfunction(name = "segment_hash")]
#[pyo3(signature = (key, *, pulsar_version=None))]
fn py_segment_hash(
    key: &Bound<'_, PyAny>,
    pulsar_version: Option<&Bound<'_, PyAny>>,
) -> PyResult<u16> {
    let release = arg_or(pulsar_version, "pulsar_version", ScalableRelease::master())?;
    Ok(release.half.segment_hash(key_hash(key)?))
}

/// `key_hash(key) & 0xFFFF`: PIP-486's hashB, the key's place on a segment's bucket ring.
#[pyfunction(name = "bucket_hash")]
fn py_bucket_hash(key: &Bound<'_, PyAny>) -> PyResult<u16> {
    Ok(bucket_hash(key_hash(key)?))
}

/// The classic Key_Shared hash of a current Pulsar broker:
/// `(key_hash(key) & 0x7FFFFFFF) % 65535 + 1`.
#[pyfunction]
fn sticky_key_hash(key: &Bound<'_, PyAny>) -> PyResult<u16> {
    Ok(hashing::sticky_key_hash(key_bytes(key, "key")?))
}

/// Pulsar's `makeStickyKeyHash(key, range)`:
/// `(key_hash(key) & 0x7FFFFFFF) % range.size + range.start`, 0 mapped to 1.
#[pyfunction]
fn make_sticky_key_hash(key: &Bound<'_, PyAny>, hash_range: PyHashRange) -> PyResult<u16> {
    let r = hash_range.0;
    Ok(sticky_hash_in(
        hashing::key_hash(key_bytes(key, "key")?),
        r.start(),
        r.size(),
    ))
}

/// Hashes every key of a batch with the GIL released, writing `f(hash)` to two outputs.
pub(super) fn hash_keys<A, B, F>(
    keys: &Bound<'_, PyAny>,
    null_key: Option<&Bound<'_, PyAny>>,
    threads: Option<&Bound<'_, PyAny>>,
    f: F,
) -> PyResult<(Vec<A>, Vec<B>)>
where
    A: Copy + Send + Sync,
    B: Copy + Send + Sync,
    F: Fn(u32) -> (A, B) + Sync + Send,
{
    let threads = Threads::or_default(threads)?;
    let batch = key_batch(keys, null_key)?;
    Ok(keys.py().detach(move || batch.map_hashes(threads, f)))
}

/// `key_hash` of every key, as a uint32 array.
#[pyfunction]
#[pyo3(signature = (keys, *, null_key=None, threads=None))]
fn key_hashes<'py>(
    keys: &Bound<'py, PyAny>,
    null_key: Option<&Bound<'py, PyAny>>,
    threads: Option<&Bound<'_, PyAny>>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let (hashes, _) = hash_keys(keys, null_key, threads, |h| (h, ()))?;
    Ok(PyArray1::from_vec(keys.py(), hashes))
}

/// `sticky_key_hash` of every key, as a uint16 array.
#[pyfunction]
#[pyo3(signature = (keys, *, null_key=None, threads=None))]
fn sticky_key_hashes<'py>(
    keys: &Bound<'py, PyAny>,
    null_key: Option<&Bound<'py, PyAny>>,
    threads: Option<&Bound<'_, PyAny>>,
) -> PyResult<Bound<'py, PyArray1<u16>>> {
    let (hashes, _) = hash_keys(keys, null_key, threads, |h| {
        (hashing::sticky_from_hash(h), ())
    })?;
    Ok(PyArray1::from_vec(keys.py(), hashes))
}

/// `make_sticky_key_hash(key, hash_range)` of every key, as a uint16 array.
#[pyfunction]
#[pyo3(signature = (keys, hash_range, *, null_key=None, threads=None))]
fn make_sticky_key_hashes<'py>(
    keys: &Bound<'py, PyAny>,
    hash_range: PyHashRange,
    null_key: Option<&Bound<'py, PyAny>>,
    threads: Option<&Bound<'_, PyAny>>,
) -> PyResult<Bound<'py, PyArray1<u16>>> {
    let (start, size) = (hash_range.0.start(), hash_range.0.size());
    let (hashes, _) = hash_keys(keys, null_key, threads, move |h| {
        (sticky_hash_in(h, start, size), ())
    })?;
    Ok(PyArray1::from_vec(keys.py(), hashes))
}

/// (segment_hash, bucket_hash) of every key, as two uint16 arrays.
#[pyfunction]
#[pyo3(signature = (keys, *, null_key=None, threads=None))]
#[allow(clippy::type_complexity)]
fn split_hashes<'py>(
    keys: &Bound<'py, PyAny>,
    null_key: Option<&Bound<'py, PyAny>>,
    threads: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Bound<'py, PyArray1<u16>>, Bound<'py, PyArray1<u16>>)> {
    let (seg, bucket) = hash_keys(keys, null_key, threads, |h| {
        (segment_hash(h), bucket_hash(h))
    })?;
    let py = keys.py();
    Ok((PyArray1::from_vec(py, seg), PyArray1::from_vec(py, bucket)))
}

/// Sets how many threads batch calls use by default; 0 means one per available core.
#[pyfunction]
fn set_num_threads(threads: &Bound<'_, PyAny>) -> PyResult<()> {
    let DefaultThreads(n) = arg(threads, "threads")?;
    set_default_threads(n);
    Ok(())
}

/// How many threads batch calls use when they are not told.
#[pyfunction]
fn get_num_threads() -> usize {
    keyshared_kernels::parallel::default_threads()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("HASH_VERSION", HASH_VERSION)?;
    m.add_function(wrap_pyfunction!(key_hash, m)?)?;
    m.add_function(wrap_pyfunction!(py_segment_hash, m)?)?;
    m.add_function(wrap_pyfunction!(py_bucket_hash, m)?)?;
    m.add_function(wrap_pyfunction!(sticky_key_hash, m)?)?;
    m.add_function(wrap_pyfunction!(make_sticky_key_hash, m)?)?;
    m.add_function(wrap_pyfunction!(sticky_key_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(make_sticky_key_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(key_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(split_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    Ok(())
}
