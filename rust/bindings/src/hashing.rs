use numpy::PyArray1;
use pyo3::prelude::*;

use super::buckets::PyHashRange;
use super::keys::key_batch;
use crate::conversions::{
    arg, arg_or, instance, key_bytes, DefaultThreads, ScalableRelease, Threads,
};
use keyshared_kernels::hashing::{self, bucket_hash, segment_hash, sticky_hash_in, HASH_VERSION};
use keyshared_kernels::parallel::set_default_threads;

#[doc = stub_doc!("key_hash")]
#[pyfunction]
fn key_hash(key: &Bound<'_, PyAny>) -> PyResult<u32> {
    Ok(hashing::key_hash(key_bytes(key, "key")?))
}

#[doc = stub_doc!("segment_hash")]
#[pyfunction(name = "segment_hash")]
#[pyo3(signature = (key, *, pulsar_version=None))]
fn py_segment_hash(
    key: &Bound<'_, PyAny>,
    pulsar_version: Option<&Bound<'_, PyAny>>,
) -> PyResult<u16> {
    let release = arg_or(pulsar_version, "pulsar_version", ScalableRelease::master())?;
    Ok(release.half.segment_hash(key_hash(key)?))
}

#[doc = stub_doc!("bucket_hash")]
#[pyfunction(name = "bucket_hash")]
fn py_bucket_hash(key: &Bound<'_, PyAny>) -> PyResult<u16> {
    Ok(bucket_hash(key_hash(key)?))
}

#[doc = stub_doc!("sticky_key_hash")]
#[pyfunction]
fn sticky_key_hash(key: &Bound<'_, PyAny>) -> PyResult<u16> {
    Ok(hashing::sticky_key_hash(key_bytes(key, "key")?))
}

#[doc = stub_doc!("make_sticky_key_hash")]
#[pyfunction]
fn make_sticky_key_hash(key: &Bound<'_, PyAny>, hash_range: &Bound<'_, PyAny>) -> PyResult<u16> {
    let r = instance::<PyHashRange>(hash_range, "hash_range")?.get().0;
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
    key_batch(keys, null_key)?.map(keys.py(), threads, |batch, threads| {
        batch.map_hashes(threads, &f)
    })
}

#[doc = stub_doc!("key_hashes")]
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

#[doc = stub_doc!("sticky_key_hashes")]
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

#[doc = stub_doc!("make_sticky_key_hashes")]
#[pyfunction]
#[pyo3(signature = (keys, hash_range, *, null_key=None, threads=None))]
fn make_sticky_key_hashes<'py>(
    keys: &Bound<'py, PyAny>,
    hash_range: &Bound<'py, PyAny>,
    null_key: Option<&Bound<'py, PyAny>>,
    threads: Option<&Bound<'_, PyAny>>,
) -> PyResult<Bound<'py, PyArray1<u16>>> {
    let r = instance::<PyHashRange>(hash_range, "hash_range")?.get().0;
    let (start, size) = (r.start(), r.size());
    let (hashes, _) = hash_keys(keys, null_key, threads, move |h| {
        (sticky_hash_in(h, start, size), ())
    })?;
    Ok(PyArray1::from_vec(keys.py(), hashes))
}

#[doc = stub_doc!("split_hashes")]
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

#[doc = stub_doc!("set_num_threads")]
#[pyfunction]
fn set_num_threads(threads: &Bound<'_, PyAny>) -> PyResult<()> {
    let DefaultThreads(n) = arg(threads, "threads")?;
    set_default_threads(n);
    Ok(())
}

#[doc = stub_doc!("get_num_threads")]
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
