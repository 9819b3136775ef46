use numpy::PyArray1;
use pyo3::prelude::*;

use crate::errors::Raise;

use crate::conversions::{
    arg, instance, sequence, Int, RingHash, RingHashes, Splits, Text, Threads,
};
use keyshared_kernels::buckets::{self, HashRange};

#[doc = stub_doc!("HashRange")]
#[pyclass(
    name = "HashRange",
    module = "keyshared._core",
    frozen,
    eq,
    ord,
    hash,
    from_py_object
)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PyHashRange(pub HashRange);

#[pymethods]
impl PyHashRange {
    #[new]
    fn new(start: &Bound<'_, PyAny>, end: &Bound<'_, PyAny>) -> PyResult<Self> {
        let Int(start) = arg(start, "start")?;
        let Int(end) = arg(end, "end")?;
        Ok(Self(HashRange::new(start, end).py()?))
    }

    #[doc = stub_doc!("HashRange.full")]
    #[staticmethod]
    fn full() -> Self {
        Self(HashRange::full())
    }

    #[doc = stub_doc!("HashRange.from_hex")]
    #[staticmethod]
    fn from_hex(text: &Bound<'_, PyAny>) -> PyResult<Self> {
        let Text(text) = arg(text, "text")?;
        Ok(Self(HashRange::parse_hex(&text).py()?))
    }

    #[doc = stub_doc!("HashRange.start")]
    #[getter]
    fn start(&self) -> u16 {
        self.0.start()
    }

    #[doc = stub_doc!("HashRange.end")]
    #[getter]
    fn end(&self) -> u16 {
        self.0.end()
    }

    #[doc = stub_doc!("HashRange.size")]
    #[getter]
    fn size(&self) -> u32 {
        self.0.size()
    }

    #[doc = stub_doc!("HashRange.contains")]
    fn contains(&self, item: &Bound<'_, PyAny>) -> PyResult<bool> {
        if let Ok(other) = item.cast::<PyHashRange>() {
            return Ok(self.0.contains_range(other.get().0));
        }
        Ok(self.0.contains_hash(arg::<RingHash>(item, "hash")?.0))
    }

    fn __contains__(&self, item: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.contains(item)
    }

    #[doc = stub_doc!("HashRange.is_adjacent_to")]
    fn is_adjacent_to(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let other = instance::<Self>(other, "other")?.get().0;
        Ok(self.0.is_adjacent_to(other))
    }

    #[doc = stub_doc!("HashRange.split")]
    fn split(&self) -> PyResult<(Self, Self)> {
        let (low, high) = self.0.split().py()?;
        Ok((Self(low), Self(high)))
    }

    #[doc = stub_doc!("HashRange.merge")]
    fn merge(&self, other: &Bound<'_, PyAny>) -> PyResult<Self> {
        let other = instance::<Self>(other, "other")?.get().0;
        Ok(Self(self.0.merge(other).py()?))
    }

    #[doc = stub_doc!("HashRange.to_hex")]
    // Python methods take `&self`; the name is the one users look for.
    #[allow(clippy::wrong_self_convention)]
    fn to_hex(&self) -> String {
        self.0.to_string()
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __repr__(&self) -> String {
        format!("HashRange({:#06x}, {:#06x})", self.0.start(), self.0.end())
    }

    fn __getnewargs__(&self) -> (u16, u16) {
        (self.0.start(), self.0.end())
    }
}

#[doc = stub_doc!("equal_width_splits")]
#[pyfunction]
fn equal_width_splits(n: &Bound<'_, PyAny>) -> PyResult<Vec<u16>> {
    buckets::equal_width_splits(arg::<Int>(n, "n")?.0).py()
}

#[doc = stub_doc!("bucket_ranges")]
#[pyfunction]
fn bucket_ranges(splits: &Bound<'_, PyAny>) -> PyResult<Vec<PyHashRange>> {
    let Splits(splits) = arg(splits, "splits")?;
    Ok(buckets::bucket_ranges(&splits)
        .into_iter()
        .map(PyHashRange)
        .collect())
}

#[doc = stub_doc!("_checked_splits")]
#[pyfunction(name = "_checked_splits")]
fn checked_splits(splits: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<u16>> {
    let values = sequence(splits, name, "a sequence of ints")?
        .iter()
        .enumerate()
        .map(|(i, item)| arg::<Int>(item, &format!("{name}[{i}]")).map(|n| n.0))
        .collect::<PyResult<Vec<i64>>>()?;
    buckets::validate_splits(&values).py_in(name)
}

#[doc = stub_doc!("bucket_index")]
#[pyfunction]
fn bucket_index(hash_b: &Bound<'_, PyAny>, splits: &Bound<'_, PyAny>) -> PyResult<u32> {
    let RingHash(hash_b) = arg(hash_b, "hash_b")?;
    Ok(buckets::bucket_index(
        hash_b,
        &arg::<Splits>(splits, "splits")?.0,
    ))
}

#[doc = stub_doc!("entry_bucket")]
#[pyfunction]
fn entry_bucket(
    entry_hash_min: &Bound<'_, PyAny>,
    entry_hash_max: &Bound<'_, PyAny>,
    splits: &Bound<'_, PyAny>,
) -> PyResult<u32> {
    let RingHash(min) = arg(entry_hash_min, "entry_hash_min")?;
    let RingHash(max) = arg(entry_hash_max, "entry_hash_max")?;
    buckets::entry_bucket(min, max, &arg::<Splits>(splits, "splits")?.0).py()
}

#[doc = stub_doc!("canonical_bucket_hash")]
#[pyfunction]
fn canonical_bucket_hash(index: &Bound<'_, PyAny>, splits: &Bound<'_, PyAny>) -> PyResult<u16> {
    let Int(index) = arg(index, "index")?;
    buckets::canonical_bucket_hash(index, &arg::<Splits>(splits, "splits")?.0).py()
}

#[doc = stub_doc!("buckets_for_budget")]
#[pyfunction]
fn buckets_for_budget(budget: &Bound<'_, PyAny>, segments: &Bound<'_, PyAny>) -> PyResult<i64> {
    let Int(budget) = arg(budget, "budget")?;
    buckets::buckets_for_budget(budget, arg::<Int>(segments, "segments")?.0).py()
}

#[doc = stub_doc!("bucket_indices")]
#[pyfunction]
#[pyo3(signature = (hash_b, splits, *, threads=None))]
fn bucket_indices<'py>(
    hash_b: &Bound<'py, PyAny>,
    splits: &Bound<'py, PyAny>,
    threads: Option<&Bound<'_, PyAny>>,
) -> PyResult<Bound<'py, PyArray1<i32>>> {
    let threads = Threads::or_default(threads)?;
    let Splits(splits) = arg(splits, "splits")?;
    let RingHashes(hashes) = arg(hash_b, "hash_b")?;
    let out = hash_b
        .py()
        .detach(|| buckets::bucket_indices(&hashes, &splits, threads));
    Ok(PyArray1::from_vec(hash_b.py(), out))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("RING_SIZE", buckets::RING_SIZE)?;
    m.add("MIN_FIRST_SPLIT", buckets::MIN_FIRST_SPLIT)?;
    m.add_class::<PyHashRange>()?;
    m.add_function(wrap_pyfunction!(equal_width_splits, m)?)?;
    m.add_function(wrap_pyfunction!(checked_splits, m)?)?;
    m.add_function(wrap_pyfunction!(bucket_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(bucket_index, m)?)?;
    m.add_function(wrap_pyfunction!(bucket_indices, m)?)?;
    m.add_function(wrap_pyfunction!(entry_bucket, m)?)?;
    m.add_function(wrap_pyfunction!(canonical_bucket_hash, m)?)?;
    m.add_function(wrap_pyfunction!(buckets_for_budget, m)?)?;
    Ok(())
}
