use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use numpy::PyArray1;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::{PyTraverseError, PyVisit};

use super::{lock_acks, Maps};
use crate::conversions::{
    arg, opt_arg, position, route, same_lengths, BatchSize, BatchSizes, BucketBoundaries,
    ConsumerId, I64s, RingHashes, Splits, Text,
};
use crate::draining::PyDrainingHashesTracker;
use crate::entry_bucket::PyEntryBucketSelector;
use crate::errors::Raise;
use crate::pending_acks::{tuple, Ack, PyPendingAcksMap};
use crate::state::{lock, notify};
use keyshared_kernels::dispatch::entry_bucket::{self as kernel, Entry, Route};
use keyshared_kernels::draining::DrainingHashes;
use keyshared_kernels::entry_bucket::EntryBucketSelector;
use keyshared_kernels::error::{KernelResult, StateResult};

/// PIP-486's entry-bucket dispatcher over a selector, a tracker and each connected
/// consumer's pending acks (a `PendingAcksMap` wired to the tracker), each shared with
/// Python; the kernel's `dispatch::entry_bucket` decides. Changes and dispatches are
/// serialized (the Java methods are `synchronized`); locks go dispatcher, selector, maps,
/// tracker: the one lock order (`state`).
#[pyclass(name = "EntryBucketDispatcher", module = "keyshared._core", frozen)]
pub struct PyEntryBucketDispatcher {
    selector: Py<PyEntryBucketSelector>,
    tracker: Py<PyDrainingHashesTracker>,
    maps: Mutex<Maps>,
}

impl PyEntryBucketDispatcher {
    fn build(
        py: Python<'_>,
        selector: EntryBucketSelector,
        unblocking_handler: Option<&Bound<'_, PyAny>>,
        dispatcher_name: &str,
    ) -> PyResult<Self> {
        let tracker = py
            .get_type::<PyDrainingHashesTracker>()
            .call1((unblocking_handler, dispatcher_name))?
            .cast_into::<PyDrainingHashesTracker>()?
            .unbind();
        let selector = PyEntryBucketSelector {
            state: Mutex::new(selector),
            owner: Some("EntryBucketDispatcher"),
        };
        Ok(Self {
            selector: Py::new(py, selector)?,
            tracker,
            maps: Mutex::new(BTreeMap::new()),
        })
    }

    fn selector_state(&self) -> MutexGuard<'_, EntryBucketSelector> {
        lock(&self.selector.get().state)
    }

    fn tracker_state(&self) -> MutexGuard<'_, DrainingHashes> {
        lock(&self.tracker.get().state)
    }

    fn notify(&self, py: Python<'_>, notices: impl IntoIterator<Item = i32>) {
        let handler = self.tracker.get().handler(py);
        for n in notices {
            notify(py, handler.as_ref(), Some(n));
        }
    }
}

#[pymethods]
impl PyEntryBucketDispatcher {
    #[new]
    #[pyo3(
        signature = (bucket_splits=None, *, unblocking_handler=None, dispatcher_name=String::new()),
        text_signature = "(bucket_splits=None, *, unblocking_handler=None, dispatcher_name='')"
    )]
    fn new(
        py: Python<'_>,
        bucket_splits: Option<&Bound<'_, PyAny>>,
        unblocking_handler: Option<&Bound<'_, PyAny>>,
        dispatcher_name: String,
    ) -> PyResult<Self> {
        let splits = opt_arg::<Splits>(bucket_splits, "bucket_splits")?;
        let selector = EntryBucketSelector::new(&splits.map_or_else(Vec::new, |s| s.0));
        Self::build(py, selector, unblocking_handler, &dispatcher_name)
    }

    /// A dispatcher for the bucket ranges a subscription declares, validated as Pulsar's
    /// `validateBucketBoundaries` does.
    #[staticmethod]
    #[pyo3(
        signature = (ranges, *, unblocking_handler=None, dispatcher_name=String::new()),
        text_signature = "(ranges, *, unblocking_handler=None, dispatcher_name='')"
    )]
    fn from_bucket_ranges(
        py: Python<'_>,
        ranges: &Bound<'_, PyAny>,
        unblocking_handler: Option<&Bound<'_, PyAny>>,
        dispatcher_name: String,
    ) -> PyResult<Self> {
        let BucketBoundaries(ranges) = arg(ranges, "ranges")?;
        let selector = EntryBucketSelector::from_bucket_ranges(&ranges);
        Self::build(py, selector, unblocking_handler, &dispatcher_name)
    }

    #[getter]
    fn selector(&self, py: Python<'_>) -> Py<PyEntryBucketSelector> {
        self.selector.clone_ref(py)
    }

    #[getter]
    fn tracker(&self, py: Python<'_>) -> Py<PyDrainingHashesTracker> {
        self.tracker.clone_ref(py)
    }

    /// Connects a consumer (ValueError if its id is connected already); returns its
    /// pending-acks map. Buckets it takes from others drain first.
    #[pyo3(signature = (consumer_id, name=None))]
    fn add_consumer(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        name: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyPendingAcksMap>> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let name = opt_arg::<Text>(name, "name")?.map_or_else(String::new, |t| t.0);
        let map = py
            .get_type::<PyPendingAcksMap>()
            .call1((consumer, self.tracker.clone_ref(py)))?
            .cast_into::<PyPendingAcksMap>()?
            .unbind();
        let handle = map.clone_ref(py);
        let mut slot = Some(map);
        let notice = py.detach(|| -> StateResult<_> {
            let mut maps = lock(&self.maps);
            let notice = kernel::add_consumer(
                &mut self.selector_state(),
                consumer,
                &name,
                &lock_acks(&maps),
                &mut self.tracker_state(),
            )?;
            maps.extend(slot.take().map(|m| (consumer, m)));
            Ok(notice)
        });
        drop(slot);
        self.notify(py, notice.py()?);
        Ok(handle)
    }

    /// Disconnects a consumer (one not connected changes nothing). Its pending acks are
    /// closed and returned, in order, as `(ledger_id, entry_id, batch_size,
    /// sticky_key_hash)`, for redelivery.
    fn remove_consumer(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Ack>> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let (map, removed) = py
            .detach(|| -> KernelResult<_> {
                let mut maps = lock(&self.maps);
                let removed = kernel::remove_consumer(
                    &mut self.selector_state(),
                    consumer,
                    &mut lock_acks(&maps),
                    &mut self.tracker_state(),
                )?;
                Ok((maps.remove(&consumer), removed))
            })
            .py()?;
        drop(map);
        self.notify(py, removed.notices);
        Ok(removed.acks.into_iter().map(tuple).collect())
    }

    /// The consumer's pending-acks map (KeyError if not connected).
    fn pending_acks(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyPendingAcksMap>> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        lock(&self.maps)
            .get(&consumer)
            .map(|m| m.clone_ref(py))
            .ok_or_else(|| PyKeyError::new_err(consumer))
    }

    /// The canonical hash an entry is dispatched under.
    #[pyo3(signature = (entry_hash_min=None, key=None))]
    fn sticky_key_hash(
        &self,
        entry_hash_min: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u16> {
        let route = route(entry_hash_min, key)?;
        Ok(route.sticky_key_hash(&self.selector_state()))
    }

    /// Sends one entry if it may go now: the consumer it goes to, or None when no consumer
    /// is connected, its bucket drains on another consumer, or the map refuses it.
    #[pyo3(
        signature = (ledger_id, entry_id, *, entry_hash_min=None, key=None, batch_size=None),
        text_signature = "($self, ledger_id, entry_id, *, entry_hash_min=None, key=None, batch_size=1)"
    )]
    fn dispatch(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
        entry_hash_min: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
        batch_size: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<u64>> {
        let (ledger_id, entry_id) = position(ledger_id, entry_id)?;
        let entry = Entry {
            ledger_id,
            entry_id,
            batch_size: opt_arg::<BatchSize>(batch_size, "batch_size")?.map_or(1, |b| b.0),
            route: route(entry_hash_min, key)?,
        };
        let maps = lock(&self.maps);
        kernel::dispatch(
            &self.selector_state(),
            entry,
            |c| maps.get(&c).map(|m| lock(&m.get().state)),
            || self.tracker_state(),
        )
        .py()
    }

    /// `dispatch` of each stamped entry in order, without the GIL: returns the consumer of
    /// each entry (uint64) and whether it went (bool).
    #[pyo3(signature = (ledger_ids, entry_ids, entry_hash_mins, batch_sizes=None))]
    fn dispatch_many<'py>(
        &self,
        py: Python<'py>,
        ledger_ids: &Bound<'py, PyAny>,
        entry_ids: &Bound<'py, PyAny>,
        entry_hash_mins: &Bound<'py, PyAny>,
        batch_sizes: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let I64s(ledgers) = arg(ledger_ids, "ledger_ids")?;
        let I64s(entries) = arg(entry_ids, "entry_ids")?;
        let RingHashes(mins) = arg(entry_hash_mins, "entry_hash_mins")?;
        let sizes = opt_arg::<BatchSizes>(batch_sizes, "batch_sizes")?
            .map_or_else(|| vec![1; ledgers.len()], |b| b.0);
        same_lengths(&[
            ("ledger_ids", ledgers.len()),
            ("entry_ids", entries.len()),
            ("entry_hash_mins", mins.len()),
            ("batch_sizes", sizes.len()),
        ])?;
        let batch = (0..mins.len()).map(|i| Entry {
            ledger_id: ledgers[i],
            entry_id: entries[i],
            batch_size: sizes[i],
            route: Route::Stamped(mins[i]),
        });
        let (consumers, sent) = py
            .detach(|| {
                let maps = lock(&self.maps);
                let selector = self.selector_state();
                let mut acks = lock_acks(&maps);
                kernel::dispatch_many(&selector, batch, &mut acks, &mut self.tracker_state())
            })
            .py_in("entry_ids")?;
        PyTuple::new(
            py,
            [
                PyArray1::from_vec(py, consumers).into_any(),
                PyArray1::from_vec(py, sent).into_any(),
            ],
        )
    }

    /// The consumer acked an entry; False if it was not pending there.
    fn ack(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let map = self.pending_acks(py, consumer_id)?;
        map.bind(py)
            .call_method1("remove", (ledger_id, entry_id))?
            .extract()
    }

    /// Buckets whose owner waits for another consumer's acks, ascending.
    fn withheld_buckets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let withheld = kernel::withheld_buckets(&self.selector_state(), &self.tracker_state());
        PyTuple::new(py, withheld)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.tracker)?;
        if let Ok(maps) = self.maps.try_lock() {
            for m in maps.values() {
                visit.call(m)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        if let Ok(mut maps) = self.maps.try_lock() {
            maps.clear();
        }
    }

    fn __repr__(&self) -> String {
        let selector = self.selector_state();
        format!(
            "EntryBucketDispatcher(buckets={}, consumers={})",
            selector.bucket_count(),
            selector.consumer_ids().len()
        )
    }
}
