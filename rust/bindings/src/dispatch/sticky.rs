use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyList, PySequence, PyString, PyTuple};
use pyo3::{PyTraverseError, PyVisit};

use super::{lock_acks, Maps, PyDispatchResult};
use crate::conversions::{
    arg, key_bytes, opt_arg, type_name, BatchSize, ConsumerId, FromArg, Int, QueuedId, RingHash,
    Size, StickyKeyHash,
};
use crate::draining::PyDrainingHashesTracker;
use crate::errors::Raise;
use crate::pending_acks::{tuple, Ack, PyPendingAcksMap};
use crate::redelivery::{look_ahead_config, PyMessageRedeliveryController};
use crate::rings::PyConsistentHashingSelector;
use crate::state::{lock, notify, with_state};
use keyshared_kernels::dispatch::sticky::{Parts, ReadEntry, StickyKeyDispatcher};
use keyshared_kernels::pending_acks::PendingAcks;
use keyshared_kernels::redelivery::{MessageRedeliveryController, Position};
use keyshared_kernels::ring::{ConsistentHashingSelector, DEFAULT_RANGE_MAX};

/// What the dispatcher alone holds: the kernel's state and each consumer's map.
struct Own {
    kernel: StickyKeyDispatcher,
    maps: Maps,
}

/// The parts as one call holds them locked.
type Locked<'a, 'g> = Parts<'a, ConsistentHashingSelector, MutexGuard<'g, PendingAcks>>;

/// PIP-379's sticky-key dispatcher (Pulsar's `PersistentStickyKeyDispatcherMultipleConsumers`)
/// over a consistent-hashing selector, a draining-hashes tracker, a redelivery queue and
/// each connected consumer's pending acks, each shared with Python; the kernel's
/// `dispatch::sticky` decides, a whole read at a time without the GIL. Changes and reads
/// are serialized (the Java methods are `synchronized`); locks go dispatcher, selector,
/// maps, redelivery queue, tracker: the one lock order (`state`).
#[pyclass(name = "StickyKeyDispatcher", module = "keyshared._core", frozen)]
pub struct PyStickyKeyDispatcher {
    selector: Py<PyConsistentHashingSelector>,
    tracker: Py<PyDrainingHashesTracker>,
    redelivery: Py<PyMessageRedeliveryController>,
    own: Mutex<Own>,
}

impl PyStickyKeyDispatcher {
    /// Runs `f` on the kernel and every part, all locked, without the GIL; then `then` on
    /// the result and the maps, the parts unlocked.
    fn with_parts<R: Send, T: Send>(
        &self,
        py: Python<'_>,
        f: impl for<'a, 'g> FnOnce(&mut StickyKeyDispatcher, Locked<'a, 'g>) -> R + Send,
        then: impl FnOnce(&R, &mut Maps) -> T + Send,
    ) -> (R, T) {
        py.detach(|| {
            let mut own = lock(&self.own);
            let Own { kernel, maps } = &mut *own;
            let result = {
                let mut selector = lock(&self.selector.get().state);
                let mut acks = lock_acks(maps);
                let mut redelivery = lock(&self.redelivery.get().state);
                let mut tracker = lock(&self.tracker.get().state);
                let parts = Parts {
                    selector: &mut *selector,
                    acks: &mut acks,
                    redelivery: &mut redelivery,
                    tracker: &mut tracker,
                };
                f(kernel, parts)
            };
            let after = then(&result, maps);
            (result, after)
        })
    }

    /// `with_parts` with nothing to do afterwards.
    fn run<R: Send>(
        &self,
        py: Python<'_>,
        f: impl for<'a, 'g> FnOnce(&mut StickyKeyDispatcher, Locked<'a, 'g>) -> R + Send,
    ) -> R {
        self.with_parts(py, f, |_, _| ()).0
    }

    fn notify(&self, py: Python<'_>, notices: impl IntoIterator<Item = i32>) {
        let handler = self.tracker.get().handler(py);
        for n in notices {
            notify(py, handler.as_ref(), Some(n));
        }
    }

    fn read(
        &self,
        py: Python<'_>,
        entries: Vec<ReadEntry>,
        replay: bool,
    ) -> PyResult<Vec<PyDispatchResult>> {
        let results = self
            .run(py, |d, parts| d.dispatch_read(parts, &entries, replay))
            .py_in("entries")?;
        Ok(entries
            .iter()
            .zip(results)
            .map(|(e, r)| PyDispatchResult::of(e, r))
            .collect())
    }
}

#[pymethods]
impl PyStickyKeyDispatcher {
    #[new]
    #[pyo3(
        signature = (
            number_of_points=None, unblocking_handler=None, dispatcher_name=String::new(), *,
            flow_control=false, look_ahead_per_consumer=None, look_ahead_per_subscription=None,
            max_unacked_messages_per_consumer=None, max_unacked_messages_per_subscription=None
        ),
        text_signature = "(number_of_points=100, unblocking_handler=None, dispatcher_name='', *, \
            flow_control=False, look_ahead_per_consumer=None, look_ahead_per_subscription=None, \
            max_unacked_messages_per_consumer=None, max_unacked_messages_per_subscription=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        number_of_points: Option<&Bound<'_, PyAny>>,
        unblocking_handler: Option<&Bound<'_, PyAny>>,
        dispatcher_name: String,
        flow_control: bool,
        look_ahead_per_consumer: Option<&Bound<'_, PyAny>>,
        look_ahead_per_subscription: Option<&Bound<'_, PyAny>>,
        max_unacked_messages_per_consumer: Option<&Bound<'_, PyAny>>,
        max_unacked_messages_per_subscription: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let points = opt_arg::<Int>(number_of_points, "number_of_points")?.map_or(100, |p| p.0);
        let look_ahead = look_ahead_config([
            (look_ahead_per_consumer, "look_ahead_per_consumer"),
            (look_ahead_per_subscription, "look_ahead_per_subscription"),
            (
                max_unacked_messages_per_consumer,
                "max_unacked_messages_per_consumer",
            ),
            (
                max_unacked_messages_per_subscription,
                "max_unacked_messages_per_subscription",
            ),
        ])?;
        let selector =
            ConsistentHashingSelector::new(points, true, DEFAULT_RANGE_MAX.into()).py()?;
        let tracker = py
            .get_type::<PyDrainingHashesTracker>()
            .call1((unblocking_handler, dispatcher_name))?
            .cast_into::<PyDrainingHashesTracker>()?
            .unbind();
        Ok(Self {
            selector: Py::new(
                py,
                PyConsistentHashingSelector {
                    state: Mutex::new(selector),
                    owner: Some("StickyKeyDispatcher"),
                },
            )?,
            tracker,
            redelivery: Py::new(
                py,
                PyMessageRedeliveryController {
                    state: Mutex::new(MessageRedeliveryController::new(false)),
                },
            )?,
            own: Mutex::new(Own {
                kernel: StickyKeyDispatcher::new(flow_control, look_ahead),
                maps: Maps::new(),
            }),
        })
    }

    #[getter]
    fn selector(&self, py: Python<'_>) -> Py<PyConsistentHashingSelector> {
        self.selector.clone_ref(py)
    }

    #[getter]
    fn tracker(&self, py: Python<'_>) -> Py<PyDrainingHashesTracker> {
        self.tracker.clone_ref(py)
    }

    #[getter]
    fn redelivery(&self, py: Python<'_>) -> Py<PyMessageRedeliveryController> {
        self.redelivery.clone_ref(py)
    }

    #[getter]
    fn flow_control(&self, py: Python<'_>) -> bool {
        with_state(py, &self.own, |own| own.kernel.flow_control())
    }

    /// Adds the consumer to the ring (ValueError if its id is there already); returns its
    /// pending-acks map. Hashes it takes from others drain first.
    fn add_consumer(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        name: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyPendingAcksMap>> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let name = key_bytes(name, "name")?.to_vec();
        let map = py
            .get_type::<PyPendingAcksMap>()
            .call1((consumer, self.tracker.clone_ref(py)))?
            .cast_into::<PyPendingAcksMap>()?
            .unbind();
        let handle = map.clone_ref(py);
        let (notice, unused) = self.with_parts(
            py,
            |d, parts| d.add_consumer(parts, consumer, &name),
            |added, maps| match added {
                Ok(_) => {
                    maps.insert(consumer, map);
                    None
                }
                Err(_) => Some(map),
            },
        );
        drop(unused);
        self.notify(py, notice.py()?);
        Ok(handle)
    }

    /// Removes the consumer (KeyError if unknown). Its pending acks are closed and
    /// returned, in order, as `(ledger_id, entry_id, batch_size, sticky_key_hash)`; the
    /// dispatcher also queues them in `redelivery` while other consumers remain.
    fn remove_consumer(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Ack>> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let (removed, map) = self.with_parts(
            py,
            |d, parts| d.remove_consumer(parts, consumer),
            |_, maps| maps.remove(&consumer),
        );
        drop(map);
        let removed = removed.py()?;
        self.notify(py, removed.notices);
        Ok(removed.acks.into_iter().map(tuple).collect())
    }

    /// The consumer's pending-acks map (KeyError if unknown).
    fn pending_acks(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyPendingAcksMap>> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        lock(&self.own)
            .maps
            .get(&consumer)
            .map(|m| m.clone_ref(py))
            .ok_or_else(|| PyKeyError::new_err(consumer))
    }

    /// The consumer the ring gives a sticky key hash; None with no consumer.
    fn select(&self, py: Python<'_>, sticky_key_hash: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let RingHash(hash) = arg(sticky_key_hash, "sticky_key_hash")?;
        Ok(with_state(py, &self.selector.get().state, |s| {
            s.select(hash)
        }))
    }

    /// A normal read of one entry: sent to the selected consumer if nothing holds it back,
    /// else held (and queued for redelivery unless the reason says otherwise).
    #[pyo3(signature = (ledger_id, entry_id, sticky_key_hash, batch_size=None),
           text_signature = "($self, ledger_id, entry_id, sticky_key_hash, batch_size=1)")]
    fn dispatch(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
        sticky_key_hash: &Bound<'_, PyAny>,
        batch_size: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyDispatchResult> {
        let entry = ReadEntry {
            position: (
                arg::<QueuedId>(ledger_id, "ledger_id")?.0,
                arg::<QueuedId>(entry_id, "entry_id")?.0,
            ),
            sticky_key_hash: arg::<StickyKeyHash>(sticky_key_hash, "sticky_key_hash")?.0,
            batch_size: opt_arg::<BatchSize>(batch_size, "batch_size")?.map_or(1, |b| b.0),
        };
        let mut results = self.read(py, vec![entry], false)?;
        results
            .pop()
            .ok_or_else(|| PyValueError::new_err("the read returned no result"))
    }

    /// Pulsar's `trySendMessagesToConsumers` for one read of `(ledger_id, entry_id,
    /// sticky_key_hash, batch_size)` entries, in order: one result per entry. A replay read
    /// (of positions from `get_messages_to_replay_now`) skips the redelivery-queue check and
    /// takes delivered entries off the queue. Every entry is checked before anything
    /// changes; the read runs without the GIL.
    #[pyo3(signature = (entries, *, replay=false))]
    fn dispatch_read(
        &self,
        py: Python<'_>,
        entries: &Bound<'_, PyAny>,
        replay: bool,
    ) -> PyResult<Vec<PyDispatchResult>> {
        let entries = read_entries(entries)?;
        self.read(py, entries, replay)
    }

    /// Pulsar's replay filter: the queued positions a replay read takes now, in order
    /// (`max_messages_to_read` at most, Pulsar's `dispatcherMaxReadBatchSize` 100 by
    /// default). A hash whose consumer has no permits or drains elsewhere is skipped with
    /// all its later positions.
    #[pyo3(signature = (max_messages_to_read=None),
           text_signature = "($self, max_messages_to_read=100)")]
    fn get_messages_to_replay_now(
        &self,
        py: Python<'_>,
        max_messages_to_read: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Position>> {
        let max =
            opt_arg::<Size>(max_messages_to_read, "max_messages_to_read")?.map_or(100, |s| s.0);
        Ok(self.run(py, |d, parts| d.messages_to_replay_now(parts, max)))
    }

    /// The consumer asks for `permits` more messages (Pulsar's `consumerFlow`).
    fn flow(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        permits: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let BatchSize(permits) = arg(permits, "permits")?;
        with_state(py, &self.own, |own| own.kernel.flow(consumer, permits)).py()
    }

    /// Sets the consumer's unacked-messages limit (0 = none) and the average messages per
    /// entry its remaining room is divided by; None leaves a setting as it is.
    #[pyo3(signature = (consumer_id, *, max_unacked_messages=None, avg_messages_per_entry=None))]
    fn set_consumer_limits(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        max_unacked_messages: Option<&Bound<'_, PyAny>>,
        avg_messages_per_entry: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let max = opt_arg::<BatchSize>(max_unacked_messages, "max_unacked_messages")?;
        let avg = opt_arg::<BatchSize>(avg_messages_per_entry, "avg_messages_per_entry")?;
        let (max, avg) = (max.map(|m| m.0), avg.map(|a| a.0));
        with_state(py, &self.own, |own| {
            own.kernel.set_consumer_limits(consumer, max, avg)
        })
        .py()
    }

    /// How many entries the dispatcher may send the consumer now (Pulsar's
    /// `getAvailablePermits`); without flow control, 2**31 - 1 under its unacked limit.
    fn get_available_permits(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
    ) -> PyResult<i64> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        self.run(py, |d, parts| d.available_permits(consumer, parts.acks))
            .py()
    }

    /// The redelivery-queue length at which normal reads stop, for the consumers now.
    fn get_effective_look_ahead_limit(&self, py: Python<'_>) -> i64 {
        with_state(py, &self.own, |own| {
            own.kernel.effective_look_ahead_limit(own.maps.len())
        })
    }

    /// Pulsar's `isNormalReadAllowed`: the redelivery queue is below the look-ahead limit
    /// and some consumer has permits.
    fn is_normal_read_allowed(&self, py: Python<'_>) -> bool {
        self.run(py, |d, parts| {
            d.is_normal_read_allowed(parts.acks, parts.redelivery)
        })
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

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.tracker)?;
        if let Ok(own) = self.own.try_lock() {
            for m in own.maps.values() {
                visit.call(m)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        if let Ok(mut own) = self.own.try_lock() {
            own.maps.clear();
        }
    }

    fn __repr__(&self) -> String {
        let own = lock(&self.own);
        format!(
            "StickyKeyDispatcher(consumers={}, flow_control={})",
            own.maps.len(),
            if own.kernel.flow_control() {
                "True"
            } else {
                "False"
            }
        )
    }
}

const ENTRY: &str = "(ledger_id, entry_id, sticky_key_hash, batch_size)";

/// A read's entries: a sequence of `(ledger_id, entry_id, sticky_key_hash, batch_size)`.
fn read_entries(obj: &Bound<'_, PyAny>) -> PyResult<Vec<ReadEntry>> {
    if let Ok(list) = obj.cast::<PyList>() {
        return list
            .iter()
            .enumerate()
            .map(|(i, e)| read_entry(&e, i))
            .collect();
    }
    if let Ok(tuple) = obj.cast::<PyTuple>() {
        return tuple
            .iter()
            .enumerate()
            .map(|(i, e)| read_entry(&e, i))
            .collect();
    }
    let items = items_of(obj, "entries")?;
    (0..items.len()?)
        .map(|i| read_entry(&items.get_item(i)?, i))
        .collect()
}

/// `obj` as a sequence (not str or bytes), else a TypeError naming it `what`.
fn items_of<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Bound<'py, PySequence>> {
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(not_a_sequence(obj, what));
    }
    obj.cast::<PySequence>()
        .cloned()
        .map_err(|_| not_a_sequence(obj, what))
}

fn not_a_sequence(obj: &Bound<'_, PyAny>, what: &str) -> PyErr {
    PyTypeError::new_err(format!("{what} must be a sequence, got {}", type_name(obj)))
}

/// Entry `index` of a read. Plain ints in range convert without building names; anything
/// else goes through the named conversion, which says what is wrong.
fn read_entry(obj: &Bound<'_, PyAny>, index: usize) -> PyResult<ReadEntry> {
    let where_ = || format!("entries[{index}]");
    let items = items_of(obj, &where_())?;
    let n = items.len()?;
    if n != 4 {
        return Err(PyValueError::new_err(format!(
            "{} must be {ENTRY}, got {n} items",
            where_()
        )));
    }
    let named = |name: &str| format!("{}.{name}", where_());
    let (ledger, entry) = (items.get_item(0)?, items.get_item(1)?);
    let (hash, batch) = (items.get_item(2)?, items.get_item(3)?);
    let id = |item: &Bound<'_, PyAny>, name: &str| {
        plain_or(
            item,
            |v| (v >= 0).then_some(v),
            || Ok(QueuedId::from_arg(item, &named(name))?.0),
        )
    };
    Ok(ReadEntry {
        position: (id(&ledger, "ledger_id")?, id(&entry, "entry_id")?),
        sticky_key_hash: plain_or(
            &hash,
            |v| u16::try_from(v).ok().filter(|&h| h != 0),
            || Ok(StickyKeyHash::from_arg(&hash, &named("sticky_key_hash"))?.0),
        )?,
        batch_size: plain_or(
            &batch,
            |v| i32::try_from(v).ok().filter(|&b| b >= 0),
            || Ok(BatchSize::from_arg(&batch, &named("batch_size"))?.0),
        )?,
    })
}

/// `fast` of a plain int's value when it takes it, else `slow()`.
fn plain_or<T>(
    item: &Bound<'_, PyAny>,
    fast: impl FnOnce(i64) -> Option<T>,
    slow: impl FnOnce() -> PyResult<T>,
) -> PyResult<T> {
    let value = item
        .is_exact_instance_of::<PyInt>()
        .then(|| item.extract::<i64>().ok())
        .flatten();
    match value.and_then(fast) {
        Some(v) => Ok(v),
        None => slow(),
    }
}
