use std::sync::Mutex;

use numpy::PyArray1;
use pyo3::prelude::*;

use crate::errors::{invalid, unknown_consumer, Raise};
use pyo3::types::PyBytes;

use super::buckets::PyHashRange;
use super::impacted::{
    ranges_dict, PyConsumerHashAssignmentsSnapshot, PyImpactedConsumersResult, PyRanges,
};
use super::keys::any_key_batch;
use crate::conversions::{arg, key_bytes, ConsumerId, Int, KeyPatterns, RingHash, RingHashes};
use crate::state::{check_unowned, detached, with_state};
use keyshared_kernels::danube_ring::KeySharedConsumerState;
use keyshared_kernels::ring::{ConsistentHashingSelector, DEFAULT_RANGE_MAX};

/// Pulsar's consistent-hashing selector on the key hash range `[1, range_max_value]`, with
/// colliding consumers queued behind a point's owner. Adding or removing a consumer returns
/// the impacted consumers (ranges lost and gained), unless built not to.
#[pyclass(
    name = "ConsistentHashingStickyKeyConsumerSelector",
    module = "keyshared._core",
    frozen
)]
pub struct PyConsistentHashingSelector {
    pub(crate) state: Mutex<ConsistentHashingSelector>,
    /// The dispatcher that owns it, if any: then it is read-only (`check_unowned`).
    pub(crate) owner: Option<&'static str>,
}

#[pymethods]
impl PyConsistentHashingSelector {
    #[new]
    #[pyo3(
        signature = (
            number_of_points=None,
            add_or_remove_returns_impacted_consumers_result=true,
            range_max_value=None
        ),
        text_signature = "(number_of_points=100, \
            add_or_remove_returns_impacted_consumers_result=True, range_max_value=65535)"
    )]
    fn new(
        number_of_points: Option<&Bound<'_, PyAny>>,
        add_or_remove_returns_impacted_consumers_result: bool,
        range_max_value: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let points = match number_of_points {
            Some(p) => arg::<Int>(p, "number_of_points")?.0,
            None => 100,
        };
        let range_max = match range_max_value {
            Some(r) => arg::<Int>(r, "range_max_value")?.0,
            None => i64::from(DEFAULT_RANGE_MAX),
        };
        let selector = ConsistentHashingSelector::new(
            points,
            add_or_remove_returns_impacted_consumers_result,
            range_max,
        )
        .py()?;
        Ok(Self {
            state: Mutex::new(selector),
            owner: None,
        })
    }

    #[getter]
    fn number_of_points(&self, py: Python<'_>) -> u32 {
        with_state(py, &self.state, |s| s.number_of_points())
    }

    #[getter]
    fn add_or_remove_returns_impacted_consumers_result(&self, py: Python<'_>) -> bool {
        with_state(py, &self.state, |s| s.returns_impacted())
    }

    /// `[1, range_max_value]`: the range keys and ring points hash to.
    #[getter]
    fn key_hash_range(&self, py: Python<'_>) -> PyHashRange {
        PyHashRange(with_state(py, &self.state, |s| s.key_hash_range()))
    }

    /// The consumers in the ring, by id.
    #[getter]
    fn consumer_ids(&self, py: Python<'_>) -> Vec<u64> {
        with_state(py, &self.state, |s| s.consumer_ids())
    }

    /// Pulsar's `makeStickyKeyHash(key)` over this selector's key hash range.
    fn make_sticky_key_hash(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u16> {
        let key = key_bytes(key, "key")?.to_vec();
        Ok(with_state(py, &self.state, |s| {
            s.make_sticky_key_hash(&key)
        }))
    }

    fn add_consumer(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        name: &Bound<'_, PyAny>,
    ) -> PyResult<Option<PyImpactedConsumersResult>> {
        check_unowned(self.owner)?;
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let name = key_bytes(name, "name")?.to_vec();
        let impacted = with_state(py, &self.state, |s| s.add_consumer(consumer, &name)).py()?;
        Ok(impacted.map(PyImpactedConsumersResult))
    }

    fn remove_consumer(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
    ) -> PyResult<Option<PyImpactedConsumersResult>> {
        check_unowned(self.owner)?;
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let impacted = with_state(py, &self.state, |s| s.remove_consumer(consumer));
        Ok(impacted.map(PyImpactedConsumersResult))
    }

    fn select(&self, py: Python<'_>, sticky_key_hash: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let RingHash(hash) = arg(sticky_key_hash, "sticky_key_hash")?;
        Ok(with_state(py, &self.state, |s| s.select(hash)))
    }

    /// `select` of every hash, as a uint64 array; ValueError when the ring is empty.
    fn select_many<'py>(
        &self,
        py: Python<'py>,
        sticky_key_hashes: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let RingHashes(hashes) = arg(sticky_key_hashes, "sticky_key_hashes")?;
        let out = detached(py, &self.state, |s| s.select_many(&hashes))
            .ok_or_else(|| invalid("the ring has no consumers"))?;
        Ok(PyArray1::from_vec(py, out))
    }

    fn get_consumer_key_hash_ranges(&self, py: Python<'_>) -> PyRanges {
        with_state(py, &self.state, |s| ranges_dict(s.assignments()))
    }

    fn get_consumer_hash_assignments_snapshot(
        &self,
        py: Python<'_>,
    ) -> PyConsumerHashAssignmentsSnapshot {
        PyConsumerHashAssignmentsSnapshot(with_state(py, &self.state, |s| s.assignments().to_vec()))
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        with_state(py, &self.state, |s| s.len())
    }

    fn __contains__(&self, py: Python<'_>, consumer_id: &Bound<'_, PyAny>) -> PyResult<bool> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        Ok(with_state(py, &self.state, |s| s.contains(consumer)))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let (points, range, consumers) = with_state(py, &self.state, |s| {
            (s.number_of_points(), s.key_hash_range(), s.len())
        });
        format!(
            "ConsistentHashingStickyKeyConsumerSelector(number_of_points={points}, \
             range_max_value={}, consumers={consumers})",
            range.end()
        )
    }
}

/// Danube's Key-Shared consumer state: consumers with optional glob key filters on a
/// consistent-hash ring of 100 virtual nodes each.
#[pyclass(name = "KeySharedConsumerState", module = "keyshared._core", frozen)]
pub struct PyKeySharedConsumerState {
    pub(crate) state: Mutex<KeySharedConsumerState>,
}

#[pymethods]
impl PyKeySharedConsumerState {
    #[new]
    fn new() -> Self {
        Self {
            state: Mutex::new(KeySharedConsumerState::new()),
        }
    }

    /// The consumers in the order they were added.
    #[getter]
    fn consumer_ids(&self, py: Python<'_>) -> Vec<u64> {
        with_state(py, &self.state, |s| s.consumer_ids())
    }

    #[pyo3(signature = (consumer_id, key_filters=None))]
    fn add_consumer(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        key_filters: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let filters = match key_filters {
            Some(f) if !f.is_none() => arg::<KeyPatterns>(f, "key_filters")?.0,
            _ => Vec::new(),
        };
        with_state(py, &self.state, |s| s.add_consumer(consumer, filters)).py_in("key_filters")
    }

    fn remove_consumer(&self, py: Python<'_>, consumer_id: &Bound<'_, PyAny>) -> PyResult<()> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        with_state(py, &self.state, |s| s.remove_consumer(consumer)).py()
    }

    /// A consumer's key filters, as given; KeyError for a consumer not in the state.
    fn key_filters<'py>(
        &self,
        py: Python<'py>,
        consumer_id: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let filters = with_state(py, &self.state, |s| s.key_filters(consumer))
            .ok_or_else(|| unknown_consumer(format!("consumer {consumer} is not in the state")))?;
        Ok(filters.iter().map(|f| PyBytes::new(py, f)).collect())
    }

    fn disconnect_all(&self, py: Python<'_>) {
        with_state(py, &self.state, KeySharedConsumerState::disconnect_all);
    }

    fn is_empty(&self, py: Python<'_>) -> bool {
        with_state(py, &self.state, |s| s.is_empty())
    }

    fn select_consumer(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let key = key_bytes(key, "key")?.to_vec();
        Ok(with_state(py, &self.state, |s| s.select_consumer(&key)))
    }

    /// `select_consumer` of every key: consumer ids (uint64, 0 where none) and whether a
    /// consumer was selected (bool).
    #[allow(clippy::type_complexity)]
    fn select_consumers<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<bool>>)> {
        let batch = any_key_batch(keys)?;
        let (ids, selected) = detached(py, &self.state, |s| {
            let mut eligible = Vec::new();
            let mut ids = Vec::with_capacity(batch.len());
            let mut selected = Vec::with_capacity(batch.len());
            batch.for_each_key(|key| {
                let chosen = s.select_with(key, &mut eligible);
                ids.push(chosen.unwrap_or(0));
                selected.push(chosen.is_some());
            });
            (ids, selected)
        });
        Ok((
            PyArray1::from_vec(py, ids),
            PyArray1::from_vec(py, selected),
        ))
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        with_state(py, &self.state, |s| s.len())
    }

    fn __contains__(&self, py: Python<'_>, consumer_id: &Bound<'_, PyAny>) -> PyResult<bool> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        Ok(with_state(py, &self.state, |s| s.contains(consumer)))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "KeySharedConsumerState(consumers={:?})",
            self.consumer_ids(py)
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyConsistentHashingSelector>()?;
    m.add_class::<PyKeySharedConsumerState>()?;
    Ok(())
}
