use std::collections::BTreeMap;
use std::sync::Mutex;

use numpy::PyArray1;
use pyo3::prelude::*;

use crate::errors::{invalid, Raise};

use super::impacted::PyImpactedConsumersResult;
use crate::arrays::RingHashes;
use crate::buckets::{BucketBoundaries, PyHashRange};
use crate::conversions::{arg, key_bytes, opt_arg, ConsumerId, Int, RingHash, Splits, Text};
use crate::state::{check_unowned, detached, with_state};
use keyshared_kernels::buckets::HashRange;
use keyshared_kernels::entry_bucket::EntryBucketSelector;

#[doc = stub_doc!("EntryBucketConsumerSelector")]
#[pyclass(
    name = "EntryBucketConsumerSelector",
    module = "keyshared._core",
    frozen
)]
pub struct PyEntryBucketSelector {
    pub(crate) state: Mutex<EntryBucketSelector>,
    /// The dispatcher that owns it, if any: then it is read-only (`check_unowned`).
    pub(crate) owner: Option<&'static str>,
}

#[doc = stub_doc!("validate_bucket_boundaries")]
#[pyfunction(name = "validate_bucket_boundaries")]
fn validate_bucket_boundaries_py(ranges: &Bound<'_, PyAny>) -> PyResult<Vec<PyHashRange>> {
    Ok(arg::<BucketBoundaries>(ranges, "ranges")?
        .0
        .into_iter()
        .map(PyHashRange)
        .collect())
}

#[pymethods]
impl PyEntryBucketSelector {
    #[new]
    #[pyo3(signature = (bucket_splits=None))]
    fn new(bucket_splits: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let splits = opt_arg::<Splits>(bucket_splits, "bucket_splits")?;
        Ok(Self {
            state: Mutex::new(EntryBucketSelector::new(
                &splits.map_or_else(Vec::new, |s| s.0),
            )),
            owner: None,
        })
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.from_bucket_ranges")]
    #[staticmethod]
    fn from_bucket_ranges(ranges: &Bound<'_, PyAny>) -> PyResult<Self> {
        let BucketBoundaries(ranges) = arg(ranges, "ranges")?;
        Ok(Self {
            state: Mutex::new(EntryBucketSelector::from_bucket_ranges(&ranges)),
            owner: None,
        })
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.bucket_ranges")]
    #[getter]
    fn bucket_ranges(&self, py: Python<'_>) -> Vec<PyHashRange> {
        with_state(py, &self.state, |s| {
            s.bucket_ranges().iter().copied().map(PyHashRange).collect()
        })
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.bucket_splits")]
    #[getter]
    fn bucket_splits(&self, py: Python<'_>) -> Vec<u16> {
        with_state(py, &self.state, |s| s.bucket_splits().to_vec())
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.bucket_count")]
    #[getter]
    fn bucket_count(&self, py: Python<'_>) -> usize {
        with_state(py, &self.state, |s| s.bucket_count())
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.key_hash_range")]
    #[getter]
    fn key_hash_range(&self) -> PyHashRange {
        PyHashRange(HashRange::full())
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.consumer_ids")]
    #[getter]
    fn consumer_ids(&self, py: Python<'_>) -> Vec<u64> {
        with_state(py, &self.state, |s| s.consumer_ids())
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.bucket_index_of_hash")]
    fn bucket_index_of_hash(&self, py: Python<'_>, hash: &Bound<'_, PyAny>) -> PyResult<usize> {
        let RingHash(hash) = arg(hash, "hash")?;
        Ok(with_state(py, &self.state, |s| {
            s.bucket_index_of_hash(hash)
        }))
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.canonical_hash_of_bucket")]
    fn canonical_hash_of_bucket(&self, py: Python<'_>, bucket: &Bound<'_, PyAny>) -> PyResult<u16> {
        let Int(bucket) = arg(bucket, "bucket")?;
        with_state(py, &self.state, |s| s.canonical_hash_of_bucket(bucket)).py()
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.canonical_hash_of")]
    fn canonical_hash_of(&self, py: Python<'_>, hash: &Bound<'_, PyAny>) -> PyResult<u16> {
        let RingHash(hash) = arg(hash, "hash")?;
        Ok(with_state(py, &self.state, |s| s.canonical_hash_of(hash)))
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.make_sticky_key_hash")]
    fn make_sticky_key_hash(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u16> {
        let key = key_bytes(key, "key")?;
        Ok(with_state(py, &self.state, |s| s.make_sticky_key_hash(key)))
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.add_consumer")]
    #[pyo3(signature = (consumer_id, name=None))]
    fn add_consumer(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        name: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyImpactedConsumersResult> {
        check_unowned(self.owner)?;
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let name = opt_arg::<Text>(name, "name")?.map_or_else(String::new, |t| t.0);
        let impacted = with_state(py, &self.state, |s| s.add_consumer(consumer, &name)).py()?;
        Ok(PyImpactedConsumersResult(impacted))
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.remove_consumer")]
    fn remove_consumer(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
    ) -> PyResult<PyImpactedConsumersResult> {
        check_unowned(self.owner)?;
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let impacted = with_state(py, &self.state, |s| s.remove_consumer(consumer));
        Ok(PyImpactedConsumersResult(impacted))
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.select")]
    fn select(&self, py: Python<'_>, hash: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let RingHash(hash) = arg(hash, "hash")?;
        Ok(with_state(py, &self.state, |s| s.select(hash)))
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.select_many")]
    fn select_many<'py>(
        &self,
        py: Python<'py>,
        hashes: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let RingHashes(hashes) = arg(hashes, "hashes")?;
        let mut out = vec![0u64; hashes.len()];
        let selected = detached(py, &self.state, |s| s.select_many(&hashes, &mut out));
        if !selected && !hashes.is_empty() {
            return Err(invalid("the selector has no consumers"));
        }
        Ok(PyArray1::from_vec(py, out))
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.get_consumer_key_hash_ranges")]
    fn get_consumer_key_hash_ranges(&self, py: Python<'_>) -> BTreeMap<u64, Vec<PyHashRange>> {
        let ranges = with_state(py, &self.state, |s| s.consumer_key_hash_ranges());
        ranges
            .into_iter()
            .map(|(c, r)| (c, r.into_iter().map(PyHashRange).collect()))
            .collect()
    }

    #[doc = stub_doc!("EntryBucketConsumerSelector.bucket_owners")]
    fn bucket_owners(&self, py: Python<'_>) -> Vec<u64> {
        with_state(py, &self.state, |s| {
            s.assignments().into_iter().map(|a| a.1).collect()
        })
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        with_state(py, &self.state, |s| s.consumer_ids().len())
    }

    fn __contains__(&self, py: Python<'_>, consumer_id: &Bound<'_, PyAny>) -> PyResult<bool> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        Ok(with_state(py, &self.state, |s| s.contains(consumer)))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let (buckets, consumers) = with_state(py, &self.state, |s| {
            (s.bucket_count(), s.consumer_ids().len())
        });
        format!("EntryBucketConsumerSelector(buckets={buckets}, consumers={consumers})")
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEntryBucketSelector>()?;
    m.add_function(wrap_pyfunction!(validate_bucket_boundaries_py, m)?)
}
