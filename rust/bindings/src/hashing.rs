use numpy::{Element, PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

use super::buckets::PyHashRange;
use super::keys::{exact_key, hash_short, key_batch, null_key_arg};
use super::spare;
use crate::conversions::{
    arg, arg_or, instance, key_bytes, numpy, opt_arg, DefaultThreads, ScalableRelease, Threads,
};
use crate::fastcall::{self, fast_function};
use keyshared_kernels::hashing::{self, bucket_hash, segment_hash, sticky_hash_in, HASH_VERSION};
use keyshared_kernels::keys::Hashed;
use keyshared_kernels::parallel::{default_threads, set_default_threads};

#[doc = stub_doc!("key_hash")]
#[pyfunction]
fn key_hash(key: &Bound<'_, PyAny>) -> PyResult<u32> {
    Ok(hashing::key_hash(key_bytes(key, "key")?))
}

fast_function!(
    /// `key_hash`'s one common call (a single positional exact `str` or `bytes`): read the
    /// key's bytes, hash, make the int, with no argument parsing; every other call (a
    /// keyword, another type, text that is not valid UTF-8) goes to the `#[pyfunction]`
    /// above, which behaves and fails as before. Per call it does what `mmh3.hash` does:
    /// take the argument, read the UTF-8 CPython caches in the str (or the bytes), hash,
    /// make the int.
    key_hash_fast,
    |py, args| match args {
        // SAFETY: the argument is live for the call, and the GIL is held.
        [key] => unsafe { exact_key(key.as_ptr()) }
            .map(|bytes| hashing::key_hash(bytes).into_bound_py_any(py)),
        _ => None,
    }
);

fast_function!(
    /// `key_hashes`' common call for a short batch: a single positional list or tuple of at
    /// most `keys::SHORT` keys, hashed in place into a new array; every other call goes to
    /// the `#[pyfunction]`, which does the same for it after reading its keywords.
    key_hashes_fast,
    |py, args| match args {
        [keys] => hash_short(keys, None, |hashes| array_of(py, hashes, |h| h))
            .map(|out| out.map(Bound::into_any))
            .transpose(),
        _ => None,
    }
);

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

/// Hashes every key of a batch and maps each hash by `f`: a short list or tuple with the GIL
/// held (`short` of its key hashes, `hash_short`), anything else with it released (`long` of
/// the two outputs).
pub(super) fn hash_keys<A, B, R>(
    keys: &Bound<'_, PyAny>,
    null_key: Option<&Bound<'_, PyAny>>,
    threads: Option<&Bound<'_, PyAny>>,
    f: impl Fn(u32) -> (A, B) + Sync,
    short: impl FnOnce(&[u32]) -> R,
    long: impl FnOnce(Vec<A>, Vec<B>) -> R,
) -> PyResult<R>
where
    A: Copy + Send + Sync,
    B: Copy + Send + Sync,
{
    // Checked first, looked up only where a batch takes threads.
    let threads = opt_arg::<Threads>(threads, "threads")?;
    let null_key = null_key_arg(null_key)?;
    if let Some(out) = hash_short(keys, null_key.as_deref(), short)? {
        return Ok(out);
    }
    let threads = threads.map_or_else(default_threads, |t| t.0);
    let null = f(hashing::key_hash(null_key.as_deref().unwrap_or_default()));
    let (a, b) = key_batch(keys, null_key)?.map(keys.py(), threads, &Hashed(&f), null)?;
    Ok(long(a, b))
}

/// `f` of every key's hash as a NumPy array; see [`hash_keys`].
pub(super) fn hash_array<'py, A: Element + Copy + Send + Sync + 'static>(
    keys: &Bound<'py, PyAny>,
    null_key: Option<&Bound<'_, PyAny>>,
    threads: Option<&Bound<'_, PyAny>>,
    f: impl Fn(u32) -> A + Sync,
) -> PyResult<Bound<'py, PyArray1<A>>> {
    let py = keys.py();
    hash_keys(
        keys,
        null_key,
        threads,
        |h| (f(h), ()),
        |hashes| array_of(py, hashes, &f),
        |a, _| numpy(py, a),
    )
}

/// `f` of every key's hash as two NumPy arrays; see [`hash_keys`].
#[allow(clippy::type_complexity)]
pub(super) fn hash_arrays<'py, A, B>(
    keys: &Bound<'py, PyAny>,
    null_key: Option<&Bound<'_, PyAny>>,
    threads: Option<&Bound<'_, PyAny>>,
    f: impl Fn(u32) -> (A, B) + Sync,
) -> PyResult<(Bound<'py, PyArray1<A>>, Bound<'py, PyArray1<B>>)>
where
    A: Element + Copy + Send + Sync + 'static,
    B: Element + Copy + Send + Sync + 'static,
{
    let py = keys.py();
    let short = |hashes: &[u32]| {
        let a = array_of(py, hashes, |h| f(h).0);
        (a, array_of(py, hashes, |h| f(h).1))
    };
    let long = |a, b| (numpy(py, a), numpy(py, b));
    hash_keys(keys, null_key, threads, &f, short, long)
}

/// `f` of each hash, written straight into a short NumPy array ([`spare::array`]).
#[inline]
fn array_of<'py, T: Element + Copy + 'static>(
    py: Python<'py>,
    hashes: &[u32],
    f: impl Fn(u32) -> T,
) -> Bound<'py, PyArray1<T>> {
    // SAFETY: the array holds `hashes.len()` elements, each written before it is handed
    // out; nothing outside this module has a reference to it.
    unsafe {
        let array = spare::array::<T>(py, hashes.len());
        let data = array.data();
        for (i, &h) in hashes.iter().enumerate() {
            data.add(i).write(f(h));
        }
        array
    }
}

#[doc = stub_doc!("key_hashes")]
#[pyfunction]
#[pyo3(signature = (keys, *, null_key=None, threads=None))]
fn key_hashes<'py>(
    keys: &Bound<'py, PyAny>,
    null_key: Option<&Bound<'py, PyAny>>,
    threads: Option<&Bound<'_, PyAny>>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    hash_array(keys, null_key, threads, |h| h)
}

#[doc = stub_doc!("sticky_key_hashes")]
#[pyfunction]
#[pyo3(signature = (keys, *, null_key=None, threads=None))]
fn sticky_key_hashes<'py>(
    keys: &Bound<'py, PyAny>,
    null_key: Option<&Bound<'py, PyAny>>,
    threads: Option<&Bound<'_, PyAny>>,
) -> PyResult<Bound<'py, PyArray1<u16>>> {
    hash_array(keys, null_key, threads, hashing::sticky_from_hash)
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
    hash_array(keys, null_key, threads, |h| sticky_hash_in(h, start, size))
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
    hash_arrays(keys, null_key, threads, |h| {
        (segment_hash(h), bucket_hash(h))
    })
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
    default_threads()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("HASH_VERSION", HASH_VERSION)?;
    let full = wrap_pyfunction!(key_hash, m)?.into_any();
    fastcall::function(
        m,
        "key_hash",
        full,
        key_hash_fast::call,
        &key_hash_fast::FULL,
    )?;
    m.add_function(wrap_pyfunction!(py_segment_hash, m)?)?;
    m.add_function(wrap_pyfunction!(py_bucket_hash, m)?)?;
    m.add_function(wrap_pyfunction!(sticky_key_hash, m)?)?;
    m.add_function(wrap_pyfunction!(make_sticky_key_hash, m)?)?;
    m.add_function(wrap_pyfunction!(sticky_key_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(make_sticky_key_hashes, m)?)?;
    let full = wrap_pyfunction!(key_hashes, m)?.into_any();
    fastcall::function(
        m,
        "key_hashes",
        full,
        key_hashes_fast::call,
        &key_hashes_fast::FULL,
    )?;
    m.add_function(wrap_pyfunction!(split_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    Ok(())
}
