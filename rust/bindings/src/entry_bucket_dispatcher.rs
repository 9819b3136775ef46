use std::collections::BTreeMap;
use std::sync::Mutex;

use numpy::PyArray1;
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::errors::Raise;
use pyo3::types::PyTuple;
use pyo3::{PyTraverseError, PyVisit};

use super::draining::PyDrainingHashesTracker;
use super::entry_bucket::PyEntryBucketSelector;
use super::pending_acks::PyPendingAcksMap;
use crate::conversions::{
    arg, key_bytes, opt_arg, same_lengths, BucketBoundaries, ConsumerId, I32s, I64s, Int, RingHash,
    RingHashes, Splits, Text,
};
use crate::state::{lock, notify};
use keyshared_kernels::draining::DrainingHashes;
use keyshared_kernels::entry_bucket::{dispatch_to, EntryBucketSelector};
use keyshared_kernels::error::{InvalidInput, KernelResult};
use keyshared_kernels::handoff;
use keyshared_kernels::impacted::ImpactedConsumers;
use keyshared_kernels::pending_acks::{PendingAck, PendingAcks};

type Maps = BTreeMap<u64, Py<PyPendingAcksMap>>;
type Ack = (i64, i64, i32, u16);

/// The pure part of Pulsar's `PersistentEntryBucketDispatcherMultipleConsumers` (PIP-486): an
/// entry goes whole to the owner of its bucket, a stamped entry by its `entry_hash_min`, an
/// unstamped one by its key; each consumer's pending acks (a `PendingAcksMap` wired to the
/// dispatcher's `DrainingHashesTracker`) hold canonical bucket hashes, so a bucket that moves
/// is withheld from its new owner until the previous owner's acks drain. Consumer changes
/// hand off through `register_draining_hashes`' rule. Changes and dispatches are serialized
/// (the Java methods are `synchronized`); locks go dispatcher, selector, map, tracker.
#[pyclass(name = "EntryBucketDispatcher", module = "keyshared._core", frozen)]
pub struct PyEntryBucketDispatcher {
    selector: Py<PyEntryBucketSelector>,
    tracker: Py<PyDrainingHashesTracker>,
    maps: Mutex<Maps>,
}

/// The checked position and batch size of an entry.
fn ack_args(
    ledger_id: &Bound<'_, PyAny>,
    entry_id: &Bound<'_, PyAny>,
    size: i64,
) -> PyResult<(i64, i64, i32)> {
    let Int(ledger) = arg(ledger_id, "ledger_id")?;
    let Int(entry) = arg(entry_id, "entry_id")?;
    let size = i32::try_from(size)
        .ok()
        .filter(|s| *s >= 0)
        .ok_or_else(|| {
            InvalidInput::Message(format!("batch_size must be in [0, 2**31 - 1], got {size}"))
        })
        .py()?;
    Ok((ledger, entry, size))
}

/// What an entry is dispatched by: its stamped `entry_hash_min`, or its key.
enum Route<'a> {
    Stamped(u16),
    Key(&'a [u8]),
}

fn route_arg<'a>(
    entry_hash_min: Option<&'a Bound<'_, PyAny>>,
    key: Option<&'a Bound<'_, PyAny>>,
) -> PyResult<Route<'a>> {
    match (
        entry_hash_min.filter(|h| !h.is_none()),
        key.filter(|k| !k.is_none()),
    ) {
        (Some(h), None) => Ok(Route::Stamped(arg::<RingHash>(h, "entry_hash_min")?.0)),
        (None, Some(k)) => Ok(Route::Key(key_bytes(k, "key")?)),
        _ => Err(PyTypeError::new_err(
            "give exactly one of entry_hash_min (stamped entry) and key",
        )),
    }
}

fn sticky_hash(selector: &EntryBucketSelector, route: &Route<'_>) -> u16 {
    match *route {
        Route::Stamped(h) => selector.canonical_hash_of(h),
        Route::Key(k) => selector.make_sticky_key_hash(k),
    }
}

impl PyEntryBucketDispatcher {
    fn build(
        py: Python<'_>,
        splits: &[u16],
        unblocking_handler: Option<&Bound<'_, PyAny>>,
        dispatcher_name: &str,
    ) -> PyResult<Self> {
        let tracker = py
            .get_type::<PyDrainingHashesTracker>()
            .call1((unblocking_handler, dispatcher_name))?
            .cast_into::<PyDrainingHashesTracker>()?
            .unbind();
        let selector = PyEntryBucketSelector {
            state: Mutex::new(EntryBucketSelector::new(splits)),
        };
        Ok(Self {
            selector: Py::new(py, selector)?,
            tracker,
            maps: Mutex::new(BTreeMap::new()),
        })
    }

    fn tracker_state(&self) -> &Mutex<DrainingHashes> {
        &self.tracker.get().state
    }

    /// The one hand-off rule over every connected consumer's map; maps are locked in key
    /// order, then the tracker.
    fn hand_off(
        &self,
        maps: &Maps,
        impacted: &ImpactedConsumers,
        skip: u64,
    ) -> KernelResult<Option<i32>> {
        let guards: Vec<_> = maps.values().map(|m| lock(&m.get().state)).collect();
        let refs: Vec<&PendingAcks> = guards.iter().map(|g| &**g).collect();
        let mut tracker = lock(self.tracker_state());
        Ok(handoff::register_draining_hashes(impacted, Some(skip), &refs, &mut tracker)?.notice)
    }

    fn notify(&self, py: Python<'_>, notices: &[Option<i32>]) -> PyResult<()> {
        let handler = self.tracker.get().handler(py);
        notices
            .iter()
            .try_for_each(|n| notify(py, handler.as_ref(), *n))
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
        let splits = bucket_splits
            .map(|s| arg::<Splits>(s, "bucket_splits").map(|v| v.0))
            .transpose()?
            .unwrap_or_default();
        Self::build(py, &splits, unblocking_handler, &dispatcher_name)
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
        let splits: Vec<u16> = ranges[1..].iter().map(|r| r.start()).collect();
        Self::build(py, &splits, unblocking_handler, &dispatcher_name)
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
        let notice = py.detach(|| -> PyResult<Option<i32>> {
            let mut maps = lock(&self.maps);
            let impacted = lock(&self.selector.get().state)
                .add_consumer(consumer, &name)
                .py()?;
            maps.extend(slot.take().map(|m| (consumer, m)));
            self.hand_off(&maps, &impacted, consumer).py()
        })?;
        drop(slot);
        self.notify(py, &[notice])?;
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
        let (map, acks, notices) = py
            .detach(|| -> KernelResult<_> {
                let mut maps = lock(&self.maps);
                let impacted = lock(&self.selector.get().state).remove_consumer(consumer);
                let Some(map) = maps.remove(&consumer) else {
                    return Ok((None, Vec::new(), [None, None]));
                };
                let (acks, closed) = {
                    let mut state = lock(&map.get().state);
                    let mut tracker = lock(self.tracker_state());
                    let closed = state.for_each_and_clear(true, Some(&mut tracker))?;
                    if maps.is_empty() {
                        tracker.clear();
                    }
                    closed
                };
                let handed = self.hand_off(&maps, &impacted, consumer)?;
                lock(self.tracker_state()).consumer_removed(consumer);
                Ok((Some(map), acks, [closed, handed]))
            })
            .py()?;
        drop(map);
        self.notify(py, &notices)?;
        Ok(acks
            .into_iter()
            .map(|a| (a.ledger_id, a.entry_id, a.batch_size, a.sticky_key_hash))
            .collect())
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
        let route = route_arg(entry_hash_min, key)?;
        Ok(sticky_hash(&lock(&self.selector.get().state), &route))
    }

    /// Sends one entry if it may go now: the consumer it goes to, or None when no consumer
    /// is connected, its bucket drains on another consumer, or the map refuses it.
    #[pyo3(signature = (ledger_id, entry_id, *, entry_hash_min=None, key=None, batch_size=1))]
    fn dispatch(
        &self,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
        entry_hash_min: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
        batch_size: i64,
    ) -> PyResult<Option<u64>> {
        let (ledger, entry, size) = ack_args(ledger_id, entry_id, batch_size)?;
        let route = route_arg(entry_hash_min, key)?;
        let maps = lock(&self.maps);
        let (hash, consumer) = {
            let selector = lock(&self.selector.get().state);
            let hash = sticky_hash(&selector, &route);
            (hash, selector.select(hash))
        };
        let Some(consumer) = consumer else {
            return Ok(None);
        };
        let ack = PendingAck {
            ledger_id: ledger,
            entry_id: entry,
            batch_size: size,
            sticky_key_hash: hash,
        };
        let sent = match maps.get(&consumer) {
            Some(m) => dispatch_to(
                consumer,
                ack,
                &mut lock(&m.get().state),
                &mut lock(self.tracker_state()),
            )
            .py()?,
            None => false,
        };
        Ok(sent.then_some(consumer))
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
        let sizes = match batch_sizes {
            Some(b) => arg::<I32s>(b, "batch_sizes")?.0,
            None => vec![1; ledgers.len()],
        };
        same_lengths(&[
            ("ledger_ids", ledgers.len()),
            ("entry_ids", entries.len()),
            ("entry_hash_mins", mins.len()),
            ("batch_sizes", sizes.len()),
        ])?;
        if let Some(i) = sizes.iter().position(|&s| s < 0) {
            return Err(PyValueError::new_err(format!(
                "batch_sizes[{i}] must not be negative"
            )));
        }
        let (consumers, sent) = py
            .detach(|| -> KernelResult<(Vec<u64>, Vec<bool>)> {
                let maps = lock(&self.maps);
                let selector = lock(&self.selector.get().state);
                let mut states: BTreeMap<u64, _> = maps
                    .iter()
                    .map(|(&c, m)| (c, lock(&m.get().state)))
                    .collect();
                let mut tracker = lock(self.tracker_state());
                let (mut consumers, mut sent) = (vec![0u64; mins.len()], vec![false; mins.len()]);
                for i in 0..mins.len() {
                    let hash = selector.canonical_hash_of(mins[i]);
                    let Some(consumer) = selector.select(hash) else {
                        continue;
                    };
                    consumers[i] = consumer;
                    let ack = PendingAck {
                        ledger_id: ledgers[i],
                        entry_id: entries[i],
                        batch_size: sizes[i],
                        sticky_key_hash: hash,
                    };
                    if let Some(pending) = states.get_mut(&consumer) {
                        sent[i] = dispatch_to(consumer, ack, pending, &mut tracker)?;
                    }
                }
                Ok((consumers, sent))
            })
            .py()?;
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
        let withheld: Vec<usize> = {
            let selector = lock(&self.selector.get().state);
            let tracker = lock(self.tracker_state());
            (0..selector.bucket_count())
                .filter(|&b| {
                    let h = selector.canonical_hash_of(selector.bucket_ranges()[b].start());
                    tracker
                        .get_entry(h)
                        .is_some_and(|e| Some(e.consumer_id) != selector.select(h))
                })
                .collect()
        };
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
        let selector = lock(&self.selector.get().state);
        format!(
            "EntryBucketDispatcher(buckets={}, consumers={})",
            selector.bucket_count(),
            selector.consumer_ids().len()
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEntryBucketDispatcher>()
}
