//! `HashRange` and the bucket functions, and every argument made of hash ranges.

use std::collections::BTreeMap;

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyMapping, PyString, PyTuple};

use crate::arrays::RingHashes;
use crate::conversions::{
    arg, argument, each, instance, int_arg, prefixed, sequence, type_name, ConsumerId, Int,
    RingHash, SegmentId, Splits, Text, Threads,
};
use crate::errors::{wrong_type, Raise};
use keyshared_kernels::buckets::{self, HashRange};
use keyshared_kernels::entry_bucket::validate_bucket_boundaries;
use keyshared_kernels::impacted::validate_assignments;
use keyshared_kernels::routing::SegmentRoute;

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

argument!(
    /// Hash ranges from any iterable of `HashRange`.
    HashRanges(Vec<HashRange>) = |obj, what| each(obj, what, "an iterable of HashRange", hash_range)
);

fn hash_range(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<HashRange> {
    let range = obj.cast::<PyHashRange>().map_err(|_| {
        wrong_type(format!(
            "{what} must be a HashRange, got {}",
            type_name(obj)
        ))
    })?;
    Ok(range.get().0)
}

argument!(
    /// Pulsar's declared bucket ranges (each a HashRange or a `(start, end)` pair of ints),
    /// checked by the kernel to tile the ring from 0 in order.
    BucketBoundaries(Vec<HashRange>) = |obj, what| {
        let pairs = each(obj, what, "a sequence of bucket ranges", range_bounds)?;
        validate_bucket_boundaries(&pairs).py()
    }
);

/// `(start, end)` of a bucket range given as a HashRange or a pair of ints.
fn range_bounds(item: &Bound<'_, PyAny>, what: &str) -> PyResult<(i64, i64)> {
    if let Ok(r) = item.cast::<PyHashRange>() {
        let r = r.get().0;
        return Ok((i64::from(r.start()), i64::from(r.end())));
    }
    let bad = || {
        wrong_type(format!(
            "{what} must be a HashRange or a (start, end) pair of ints, got {}",
            type_name(item)
        ))
    };
    if item.is_instance_of::<PyString>() {
        return Err(bad());
    }
    let (start, end): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract().map_err(|_| bad())?;
    Ok((
        int_arg(&start, &format!("{what}[0]"))?,
        int_arg(&end, &format!("{what}[1]"))?,
    ))
}

argument!(
    /// `{consumer_id: [HashRange, ...]}` from a mapping.
    ConsumerRanges(BTreeMap<u64, Vec<HashRange>>) = |obj, what| {
        let mapping = obj.cast::<PyMapping>().map_err(|_| {
            wrong_type(format!(
                "{what} must be a mapping of consumer id to hash ranges, got {}",
                type_name(obj)
            ))
        })?;
        let mut out: BTreeMap<u64, Vec<HashRange>> = BTreeMap::new();
        for item in mapping.items()?.iter() {
            let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
            let ConsumerId(consumer) = arg(&key, &format!("{what} key"))?;
            let ranges = out.entry(consumer).or_default();
            for (i, r) in value.try_iter()?.enumerate() {
                ranges.push(hash_range(&r?, &format!("{what}[{consumer}][{i}]"))?);
            }
        }
        Ok(out)
    }
);

argument!(
    /// `(HashRange, consumer_id)` pairs from any iterable.
    Assignments(Vec<(HashRange, u64)>) =
        |obj, what| each(obj, what, "an iterable of (HashRange, consumer id) pairs", assignment)
);

fn assignment(item: &Bound<'_, PyAny>, what: &str) -> PyResult<(HashRange, u64)> {
    let bad = || {
        wrong_type(format!(
            "{what} must be a (HashRange, consumer id) pair, got {}",
            type_name(item)
        ))
    };
    let pair = item.cast::<PyTuple>().map_err(|_| bad())?;
    if pair.len() != 2 {
        return Err(bad());
    }
    let range: PyHashRange = pair.get_item(0)?.extract().map_err(|_| bad())?;
    let ConsumerId(consumer) = arg(&pair.get_item(1)?, &format!("{what}[1]"))?;
    Ok((range.0, consumer))
}

argument!(
    /// Range assignments from a `{consumer_id: ranges}` snapshot, sorted and checked disjoint.
    Snapshot(Vec<(HashRange, u64)>) = |obj, what| {
        let mut pairs: Vec<(HashRange, u64)> = arg::<ConsumerRanges>(obj, what)?
            .0
            .into_iter()
            .flat_map(|(c, ranges)| ranges.into_iter().map(move |r| (r, c)))
            .collect();
        pairs.sort();
        validate_assignments(&pairs, what).py()?;
        Ok(pairs)
    }
);

argument!(
    /// `(segment_id, HashRange, splits)` triples from any iterable.
    SegmentRoutes(Vec<SegmentRoute>) = |obj, what| {
        each(obj, what, "an iterable of (segment_id, HashRange, splits) triples", segment_route)
    }
);

fn segment_route(item: &Bound<'_, PyAny>, what: &str) -> PyResult<SegmentRoute> {
    let bad = || {
        wrong_type(format!(
            "{what} must be a (segment_id, HashRange, splits) triple, got {}",
            type_name(item)
        ))
    };
    let (id, range, splits): (Bound<'_, PyAny>, Bound<'_, PyAny>, Bound<'_, PyAny>) =
        item.extract().map_err(|_| bad())?;
    let SegmentId(segment_id) = arg(&id, &format!("{what} segment_id"))?;
    let range = range.cast::<PyHashRange>().map_err(|_| bad())?.get().0;
    let splits = arg::<Splits>(&splits, "splits")
        .map_err(|e| prefixed(e, &format!("{what} bucket splits:")))?
        .0;
    Ok(SegmentRoute {
        segment_id,
        range,
        splits,
    })
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
