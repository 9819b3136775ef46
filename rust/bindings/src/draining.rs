use std::sync::Mutex;

use numpy::PyArray1;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;

use crate::errors::Raise;
use pyo3::PyTraverseError;

use crate::arrays::{EachConsumer, RingHashes};
use crate::conversions::{arg, opt_arg, same_lengths, Callback, ConsumerId, RingHash};
use crate::state::{detached, lock, notify, with_state};
use keyshared_kernels::draining::{
    ConsumerDrainingStats, DrainingHashEntry, DrainingHashStat, DrainingHashes,
};

#[doc = stub_doc!("DrainingHashesTracker")]
#[pyclass(name = "DrainingHashesTracker", module = "keyshared._core", frozen)]
pub struct PyDrainingHashesTracker {
    pub(crate) state: Mutex<DrainingHashes>,
    /// Behind a lock only so that the garbage collector can clear it (`__clear__`): a
    /// handler that is a bound method of the tracker's owner makes a reference cycle.
    handler: Mutex<Option<Py<PyAny>>>,
    dispatcher_name: String,
}

impl PyDrainingHashesTracker {
    pub(crate) fn handler(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        lock(&self.handler).as_ref().map(|h| h.clone_ref(py))
    }
}

#[pymethods]
impl PyDrainingHashesTracker {
    #[new]
    #[pyo3(
        signature = (unblocking_handler=None, dispatcher_name=String::new()),
        text_signature = "(unblocking_handler=None, dispatcher_name='')"
    )]
    pub(crate) fn new(
        unblocking_handler: Option<Bound<'_, PyAny>>,
        dispatcher_name: String,
    ) -> PyResult<Self> {
        Ok(Self {
            state: Mutex::new(DrainingHashes::new()),
            handler: Mutex::new(
                opt_arg::<Callback>(unblocking_handler.as_ref(), "unblocking_handler")?
                    .map(|c| c.0),
            ),
            dispatcher_name,
        })
    }

    #[doc = stub_doc!("DrainingHashesTracker.dispatcher_name")]
    #[getter]
    fn dispatcher_name(&self) -> &str {
        &self.dispatcher_name
    }

    #[doc = stub_doc!("DrainingHashesTracker.unblocking_handler")]
    #[getter]
    fn unblocking_handler(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.handler(py)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        // The lock is only ever held to copy or take the reference, never across Python
        // code; were it held, skipping the visit only keeps the object alive this round.
        if let Ok(handler) = self.handler.try_lock() {
            visit.call(handler.as_ref())?;
        }
        Ok(())
    }

    fn __clear__(&self) {
        let handler = lock(&self.handler).take();
        drop(handler);
    }

    #[doc = stub_doc!("DrainingHashesTracker.add_entry")]
    fn add_entry(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        sticky_key_hash: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let RingHash(hash) = arg(sticky_key_hash, "sticky_key_hash")?;
        with_state(py, &self.state, |t| t.add_entry(consumer, hash)).py()
    }

    #[doc = stub_doc!("DrainingHashesTracker.add_entries")]
    fn add_entries(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        sticky_key_hashes: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let RingHashes(hashes) = arg(sticky_key_hashes, "sticky_key_hashes")?;
        detached(py, &self.state, |t| t.add_entries(consumer, &hashes)).py_in("sticky_key_hashes")
    }

    #[doc = stub_doc!("DrainingHashesTracker.reduce_ref_count")]
    #[pyo3(signature = (consumer_id, sticky_key_hash, closing=false))]
    fn reduce_ref_count(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        sticky_key_hash: &Bound<'_, PyAny>,
        closing: bool,
    ) -> PyResult<()> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let RingHash(hash) = arg(sticky_key_hash, "sticky_key_hash")?;
        let notice = with_state(py, &self.state, |t| {
            t.reduce_ref_count(consumer, hash, closing)
        })
        .py()?;
        notify(py, self.handler(py).as_ref(), notice);
        Ok(())
    }

    #[doc = stub_doc!("DrainingHashesTracker.reduce_ref_counts")]
    #[pyo3(signature = (consumer_id, sticky_key_hashes, closing=false))]
    fn reduce_ref_counts(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        sticky_key_hashes: &Bound<'_, PyAny>,
        closing: bool,
    ) -> PyResult<()> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let RingHashes(hashes) = arg(sticky_key_hashes, "sticky_key_hashes")?;
        let notice = detached(py, &self.state, |t| {
            t.reduce_ref_counts(consumer, &hashes, closing)
        })
        .py_in("sticky_key_hashes")?;
        notify(py, self.handler(py).as_ref(), notice);
        Ok(())
    }

    #[doc = stub_doc!("DrainingHashesTracker.should_block_sticky_key_hash")]
    fn should_block_sticky_key_hash(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        sticky_key_hash: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let RingHash(hash) = arg(sticky_key_hash, "sticky_key_hash")?;
        Ok(with_state(py, &self.state, |t| {
            t.should_block_sticky_key_hash(consumer, hash)
        }))
    }

    #[doc = stub_doc!("DrainingHashesTracker.should_block_sticky_key_hashes")]
    fn should_block_sticky_key_hashes<'py>(
        &self,
        py: Python<'py>,
        consumer_ids: &Bound<'py, PyAny>,
        sticky_key_hashes: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<bool>>> {
        let RingHashes(hashes) = arg(sticky_key_hashes, "sticky_key_hashes")?;
        let consumers: EachConsumer = arg(consumer_ids, "consumer_ids")?;
        if let EachConsumer::Many(many) = &consumers {
            same_lengths(&[
                ("sticky_key_hashes", hashes.len()),
                ("consumer_ids", many.len()),
            ])?;
        }
        let out = detached(py, &self.state, |t| {
            let mut out = vec![false; hashes.len()];
            match &consumers {
                EachConsumer::One(c) => t.should_block_many(|_| *c, &hashes, &mut out),
                EachConsumer::Many(cs) => t.should_block_many(|i| cs[i], &hashes, &mut out),
            }
            out
        });
        Ok(PyArray1::from_vec(py, out))
    }

    #[doc = stub_doc!("DrainingHashesTracker.get_entry")]
    fn get_entry(
        &self,
        py: Python<'_>,
        sticky_key_hash: &Bound<'_, PyAny>,
    ) -> PyResult<Option<PyDrainingHashEntry>> {
        let RingHash(hash) = arg(sticky_key_hash, "sticky_key_hash")?;
        Ok(with_state(py, &self.state, |t| t.get_entry(hash)).map(PyDrainingHashEntry))
    }

    #[doc = stub_doc!("DrainingHashesTracker.start_batch")]
    fn start_batch(&self, py: Python<'_>) {
        with_state(py, &self.state, DrainingHashes::start_batch);
    }

    #[doc = stub_doc!("DrainingHashesTracker.end_batch")]
    fn end_batch(&self, py: Python<'_>) -> PyResult<()> {
        let notice = with_state(py, &self.state, DrainingHashes::end_batch).py()?;
        notify(py, self.handler(py).as_ref(), notice);
        Ok(())
    }

    #[doc = stub_doc!("DrainingHashesTracker.clear")]
    fn clear(&self, py: Python<'_>) {
        with_state(py, &self.state, DrainingHashes::clear);
    }

    #[doc = stub_doc!("DrainingHashesTracker.consumer_removed")]
    fn consumer_removed(&self, py: Python<'_>, consumer_id: &Bound<'_, PyAny>) -> PyResult<()> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        with_state(py, &self.state, |t| t.consumer_removed(consumer));
        Ok(())
    }

    #[doc = stub_doc!("DrainingHashesTracker.consumer_stats")]
    fn consumer_stats(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
    ) -> PyResult<PyConsumerDrainingHashesStats> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let stats = with_state(py, &self.state, |t| t.consumer_stats(consumer));
        Ok(PyConsumerDrainingHashesStats::from(stats))
    }

    #[doc = stub_doc!("DrainingHashesTracker.memory_bytes")]
    fn memory_bytes(&self, py: Python<'_>) -> usize {
        with_state(py, &self.state, |t| t.memory_bytes())
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        with_state(py, &self.state, |t| t.len())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let len = self.__len__(py);
        format!(
            "DrainingHashesTracker(dispatcher_name='{}', draining={len})",
            self.dispatcher_name
        )
    }
}

#[doc = stub_doc!("DrainingHashEntry")]
#[pyclass(
    name = "DrainingHashEntry",
    module = "keyshared._core",
    frozen,
    eq,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyDrainingHashEntry(DrainingHashEntry);

#[pymethods]
impl PyDrainingHashEntry {
    #[doc = stub_doc!("DrainingHashEntry.consumer_id")]
    #[getter]
    fn consumer_id(&self) -> u64 {
        self.0.consumer_id
    }

    #[doc = stub_doc!("DrainingHashEntry.ref_count")]
    #[getter]
    fn ref_count(&self) -> u32 {
        self.0.ref_count
    }

    #[doc = stub_doc!("DrainingHashEntry.blocked_count")]
    #[getter]
    fn blocked_count(&self) -> u32 {
        self.0.blocked_count
    }

    fn __repr__(&self) -> String {
        format!(
            "DrainingHashEntry(consumer_id={}, ref_count={}, blocked_count={})",
            self.0.consumer_id, self.0.ref_count, self.0.blocked_count
        )
    }
}

#[doc = stub_doc!("DrainingHash")]
#[pyclass(
    name = "DrainingHash",
    module = "keyshared._core",
    frozen,
    eq,
    get_all,
    skip_from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyDrainingHash {
    #[doc = stub_doc!("DrainingHash.hash")]
    hash: u16,
    #[doc = stub_doc!("DrainingHash.unack_msgs")]
    unack_msgs: u32,
    #[doc = stub_doc!("DrainingHash.blocked_attempts")]
    blocked_attempts: u32,
}

#[pymethods]
impl PyDrainingHash {
    fn __repr__(&self) -> String {
        format!(
            "DrainingHash(hash={}, unack_msgs={}, blocked_attempts={})",
            self.hash, self.unack_msgs, self.blocked_attempts
        )
    }
}

impl From<DrainingHashStat> for PyDrainingHash {
    fn from(s: DrainingHashStat) -> Self {
        Self {
            hash: s.hash,
            unack_msgs: s.unack_msgs,
            blocked_attempts: s.blocked_attempts,
        }
    }
}

#[doc = stub_doc!("ConsumerDrainingHashesStats")]
#[pyclass(
    name = "ConsumerDrainingHashesStats",
    module = "keyshared._core",
    frozen,
    get_all
)]
pub struct PyConsumerDrainingHashesStats {
    #[doc = stub_doc!("ConsumerDrainingHashesStats.draining_hashes_count")]
    draining_hashes_count: u32,
    #[doc = stub_doc!("ConsumerDrainingHashesStats.draining_hashes_cleared_total")]
    draining_hashes_cleared_total: u64,
    #[doc = stub_doc!("ConsumerDrainingHashesStats.draining_hashes_unacked_messages")]
    draining_hashes_unacked_messages: u64,
    #[doc = stub_doc!("ConsumerDrainingHashesStats.draining_hashes")]
    draining_hashes: Vec<PyDrainingHash>,
}

#[pymethods]
impl PyConsumerDrainingHashesStats {
    fn __repr__(&self) -> String {
        format!(
            "ConsumerDrainingHashesStats(draining_hashes_count={}, \
             draining_hashes_cleared_total={}, draining_hashes_unacked_messages={})",
            self.draining_hashes_count,
            self.draining_hashes_cleared_total,
            self.draining_hashes_unacked_messages
        )
    }
}

impl From<ConsumerDrainingStats> for PyConsumerDrainingHashesStats {
    fn from(s: ConsumerDrainingStats) -> Self {
        Self {
            draining_hashes_count: s.draining_hashes_count,
            draining_hashes_cleared_total: s.draining_hashes_cleared_total,
            draining_hashes_unacked_messages: s.draining_hashes_unacked_messages,
            draining_hashes: s.draining_hashes.into_iter().map(Into::into).collect(),
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDrainingHashesTracker>()?;
    m.add_class::<PyDrainingHashEntry>()?;
    m.add_class::<PyDrainingHash>()?;
    m.add_class::<PyConsumerDrainingHashesStats>()?;
    Ok(())
}
