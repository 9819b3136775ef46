use std::sync::Mutex;

use numpy::PyArray1;
use pyo3::prelude::*;

use crate::errors::{invalid, Raise};
use pyo3::types::PyBytes;

use super::buckets::PyHashRange;
use super::impacted::{
    ranges_dict, PyConsumerHashAssignmentsSnapshot, PyImpactedConsumersResult, PyRanges,
};
use super::keys::any_key_batch;
use crate::arrays::RingHashes;
use crate::conversions::{arg, key_bytes, ConsumerId, Int, KeyPatterns, RingHash};
use crate::state::{check_unowned, detached, with_state};
use keyshared_kernels::danube_ring::KeySharedConsumerState;
use keyshared_kernels::error::NotFound;
use keyshared_kernels::ring::{ConsistentHashingSelector, DEFAULT_RANGE_MAX};

#[doc = stub_doc!("ConsistentHashingStickyKeyConsumerSelector")]
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

    #[doc = stub_doc!("ConsistentHashingStickyKeyConsumerSelector.number_of_points")]
    #[getter]
    fn number_of_points(&self, py: Python<'_>) -> u32 {
        with_state(py, &self.state, |s| s.number_of_points())
    }

    #[doc = stub_doc!("ConsistentHashingStickyKeyConsumerSelector.add_or_remove_returns_impacted_consumers_result")]
    #[getter]
    fn add_or_remove_returns_impacted_consumers_result(&self, py: Python<'_>) -> bool {
        with_state(py, &self.state, |s| s.returns_impacted())
    }

    #[doc = stub_doc!("ConsistentHashingStickyKeyConsumerSelector.key_hash_range")]
    #[getter]
    fn key_hash_range(&self, py: Python<'_>) -> PyHashRange {
        PyHashRange(with_state(py, &self.state, |s| s.key_hash_range()))
    }

    #[doc = stub_doc!("ConsistentHashingStickyKeyConsumerSelector.consumer_ids")]
    #[getter]
    fn consumer_ids(&self, py: Python<'_>) -> Vec<u64> {
        with_state(py, &self.state, |s| s.consumer_ids())
    }

    #[doc = stub_doc!("ConsistentHashingStickyKeyConsumerSelector.make_sticky_key_hash")]
    fn make_sticky_key_hash(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u16> {
        let key = key_bytes(key, "key")?.to_vec();
        Ok(with_state(py, &self.state, |s| {
            s.make_sticky_key_hash(&key)
        }))
    }

    #[doc = stub_doc!("ConsistentHashingStickyKeyConsumerSelector.add_consumer")]
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

    #[doc = stub_doc!("ConsistentHashingStickyKeyConsumerSelector.remove_consumer")]
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

    #[doc = stub_doc!("ConsistentHashingStickyKeyConsumerSelector.select")]
    fn select(&self, py: Python<'_>, sticky_key_hash: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let RingHash(hash) = arg(sticky_key_hash, "sticky_key_hash")?;
        Ok(with_state(py, &self.state, |s| s.select(hash)))
    }

    #[doc = stub_doc!("ConsistentHashingStickyKeyConsumerSelector.select_many")]
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

    #[doc = stub_doc!("ConsistentHashingStickyKeyConsumerSelector.get_consumer_key_hash_ranges")]
    fn get_consumer_key_hash_ranges(&self, py: Python<'_>) -> PyRanges {
        with_state(py, &self.state, |s| ranges_dict(s.assignments()))
    }

    #[doc = stub_doc!("ConsistentHashingStickyKeyConsumerSelector.get_consumer_hash_assignments_snapshot")]
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

#[doc = stub_doc!("KeySharedConsumerState")]
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

    #[doc = stub_doc!("KeySharedConsumerState.consumer_ids")]
    #[getter]
    fn consumer_ids(&self, py: Python<'_>) -> Vec<u64> {
        with_state(py, &self.state, |s| s.consumer_ids())
    }

    #[doc = stub_doc!("KeySharedConsumerState.add_consumer")]
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

    #[doc = stub_doc!("KeySharedConsumerState.remove_consumer")]
    fn remove_consumer(&self, py: Python<'_>, consumer_id: &Bound<'_, PyAny>) -> PyResult<()> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        with_state(py, &self.state, |s| s.remove_consumer(consumer)).py()
    }

    #[doc = stub_doc!("KeySharedConsumerState.key_filters")]
    fn key_filters<'py>(
        &self,
        py: Python<'py>,
        consumer_id: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let filters = with_state(py, &self.state, |s| s.key_filters(consumer))
            .ok_or(NotFound::Consumer {
                consumer,
                status: "in the state",
            })
            .py()?;
        Ok(filters.iter().map(|f| PyBytes::new(py, f)).collect())
    }

    #[doc = stub_doc!("KeySharedConsumerState.disconnect_all")]
    fn disconnect_all(&self, py: Python<'_>) {
        with_state(py, &self.state, KeySharedConsumerState::disconnect_all);
    }

    #[doc = stub_doc!("KeySharedConsumerState.is_empty")]
    fn is_empty(&self, py: Python<'_>) -> bool {
        with_state(py, &self.state, |s| s.is_empty())
    }

    #[doc = stub_doc!("KeySharedConsumerState.select_consumer")]
    fn select_consumer(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let key = key_bytes(key, "key")?.to_vec();
        Ok(with_state(py, &self.state, |s| s.select_consumer(&key)))
    }

    #[doc = stub_doc!("KeySharedConsumerState.select_consumers")]
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
    crate::fastcall::fast_method!(Select: PyConsistentHashingSelector, "select", |this, py, [
        hash
    ]| this.select(py, hash));
    crate::fastcall::install::<Select>(m.py())?;
    m.add_class::<PyKeySharedConsumerState>()?;
    Ok(())
}
