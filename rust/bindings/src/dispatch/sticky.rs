use std::sync::Mutex;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyList, PySequence, PyString, PyTuple};
use pyo3::{PyTraverseError, PyVisit};

use super::core::{dispatcher_methods, install_shared_fast_paths, Core};
use super::result::PyDispatchResult;
use crate::conversions::{
    arg, opt_arg, type_name, BatchSize, ConsumerId, FromArg, Int, QueuedId, Size, StickyKeyHash,
};
use crate::draining::PyDrainingHashesTracker;
use crate::errors::{self, Raise};
use crate::redelivery::{look_ahead_config, PyMessageRedeliveryController};
use crate::rings::PyConsistentHashingSelector;
use keyshared_kernels::dispatch::sticky::{ReadEntry, StickyKeyDispatcher};
use keyshared_kernels::redelivery::{MessageRedeliveryController, Position};
use keyshared_kernels::ring::{ConsistentHashingSelector, DEFAULT_RANGE_MAX};

/// The binding core over the kernel, a ring and the shared redelivery queue.
type Sticky =
    Core<StickyKeyDispatcher, PyConsistentHashingSelector, Py<PyMessageRedeliveryController>>;

#[doc = stub_doc!("StickyKeyDispatcher")]
#[pyclass(name = "StickyKeyDispatcher", module = "keyshared._core", frozen)]
pub struct PyStickyKeyDispatcher {
    core: Sticky,
}

/// Puts the `fastcall` entry points in front of `dispatch` (its three positional
/// arguments), `select` and `ack`.
pub(super) fn install_fast_paths(py: Python<'_>) -> PyResult<()> {
    install_shared_fast_paths!(PyStickyKeyDispatcher, py)?;
    crate::fastcall::fast_method!(Dispatch: PyStickyKeyDispatcher, "dispatch", |this, py, [
        ledger, entry, hash
    ]| this.dispatch(py, ledger, entry, hash, None));
    crate::fastcall::install::<Dispatch>(py)
}

impl PyStickyKeyDispatcher {
    fn read(
        &self,
        py: Python<'_>,
        entries: Vec<ReadEntry>,
        replay: bool,
    ) -> PyResult<Vec<PyDispatchResult>> {
        if let [one] = entries.as_slice() {
            return Ok(vec![self.read_one(py, one, replay)?]);
        }
        let results = self
            .core
            .run(py, |d, parts| d.dispatch_read(parts, &entries, replay))
            .py_in("entries")?;
        Ok(entries
            .iter()
            .zip(results)
            .map(|(e, r)| PyDispatchResult::of(e, r))
            .collect())
    }

    /// A read of one entry. Its work is shorter than releasing the GIL, and needs only the
    /// map of the consumer it goes to, whom the selector is asked once, for the lock and for
    /// the read.
    fn read_one(
        &self,
        py: Python<'_>,
        entry: &ReadEntry,
        replay: bool,
    ) -> PyResult<PyDispatchResult> {
        let results = self
            .core
            .run_picked(
                py,
                |s| {
                    let consumer = s.select(entry.sticky_key_hash);
                    (consumer, consumer)
                },
                |d, parts, consumer| {
                    d.dispatch_selected(parts, std::slice::from_ref(entry), &[consumer], replay)
                },
            )
            .py_in("entries")?;
        let result = results
            .into_iter()
            .next()
            .ok_or_else(|| PyRuntimeError::new_err("the read returned no result"))?;
        Ok(PyDispatchResult::of(entry, result))
    }
}

dispatcher_methods!(PyStickyKeyDispatcher, "StickyKeyDispatcher", {
    #[new]
    #[pyo3(
        signature = (
            number_of_points=None, *, unblocking_handler=None, dispatcher_name=String::new(),
            flow_control=false, look_ahead_per_consumer=None, look_ahead_per_subscription=None,
            max_unacked_messages_per_consumer=None, max_unacked_messages_per_subscription=None
        ),
        text_signature = "(number_of_points=100, *, unblocking_handler=None, dispatcher_name='', \
            flow_control=False, look_ahead_per_consumer=None, look_ahead_per_subscription=None, \
            max_unacked_messages_per_consumer=None, max_unacked_messages_per_subscription=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        number_of_points: Option<&Bound<'_, PyAny>>,
        unblocking_handler: Option<Bound<'_, PyAny>>,
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
        let redelivery = PyMessageRedeliveryController {
            state: Mutex::new(MessageRedeliveryController::new(false)),
        };
        let core = Core::new(
            py,
            "StickyKeyDispatcher",
            StickyKeyDispatcher::new(flow_control, look_ahead),
            selector,
            Py::new(py, redelivery)?,
            unblocking_handler,
            dispatcher_name,
        )?;
        Ok(Self { core })
    }

    #[doc = stub_doc!("StickyKeyDispatcher.selector")]
    #[getter]
    fn selector(&self, py: Python<'_>) -> Py<PyConsistentHashingSelector> {
        self.core.selector.clone_ref(py)
    }

    #[doc = stub_doc!("StickyKeyDispatcher.tracker")]
    #[getter]
    fn tracker(&self, py: Python<'_>) -> Py<PyDrainingHashesTracker> {
        self.core.tracker.clone_ref(py)
    }

    #[doc = stub_doc!("StickyKeyDispatcher.redelivery")]
    #[getter]
    fn redelivery(&self, py: Python<'_>) -> Py<PyMessageRedeliveryController> {
        self.core.redelivery.clone_ref(py)
    }

    #[doc = stub_doc!("StickyKeyDispatcher.flow_control")]
    #[getter]
    fn flow_control(&self, py: Python<'_>) -> bool {
        self.core.with_own(py, |own| own.kernel.flow_control())
    }

    #[pyo3(signature = (ledger_id, entry_id, sticky_key_hash, batch_size=None),
           text_signature = "($self, ledger_id, entry_id, sticky_key_hash, batch_size=1)")]
    #[doc = stub_doc!("StickyKeyDispatcher.dispatch")]
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
        self.read_one(py, &entry, false)
    }

    // Every entry is converted before the read, which runs without the GIL.
    #[doc = stub_doc!("StickyKeyDispatcher.dispatch_read")]
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

    // `dispatcherMaxReadBatchSize`, 100 by default.
    #[pyo3(signature = (max_messages_to_read=None),
           text_signature = "($self, max_messages_to_read=100)")]
    #[doc = stub_doc!("StickyKeyDispatcher.get_messages_to_replay_now")]
    fn get_messages_to_replay_now(
        &self,
        py: Python<'_>,
        max_messages_to_read: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Position>> {
        let max =
            opt_arg::<Size>(max_messages_to_read, "max_messages_to_read")?.map_or(100, |s| s.0);
        Ok(self
            .core
            .run(py, |d, parts| d.messages_to_replay_now(parts, max)))
    }

    #[doc = stub_doc!("StickyKeyDispatcher.flow")]
    fn flow(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
        permits: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let BatchSize(permits) = arg(permits, "permits")?;
        self.core
            .with_own(py, |own| own.kernel.flow(consumer, permits))
            .py()
    }

    #[doc = stub_doc!("StickyKeyDispatcher.set_consumer_limits")]
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
        self.core
            .with_own(py, |own| own.kernel.set_consumer_limits(consumer, max, avg))
            .py()
    }

    #[doc = stub_doc!("StickyKeyDispatcher.get_available_permits")]
    fn get_available_permits(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
    ) -> PyResult<i64> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        self.core
            .run(py, |d, parts| d.available_permits(consumer, parts.acks))
            .py()
    }

    #[doc = stub_doc!("StickyKeyDispatcher.get_effective_look_ahead_limit")]
    fn get_effective_look_ahead_limit(&self, py: Python<'_>) -> i64 {
        self.core.with_own(py, |own| {
            own.kernel.effective_look_ahead_limit(own.maps.len())
        })
    }

    #[doc = stub_doc!("StickyKeyDispatcher.is_normal_read_allowed")]
    fn is_normal_read_allowed(&self, py: Python<'_>) -> bool {
        self.core.run(py, |d, parts| {
            d.is_normal_read_allowed(parts.acks, parts.redelivery)
        })
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.core.traverse(&visit)
    }

    fn __clear__(&self) {
        self.core.clear();
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let (consumers, flow_control) = self
            .core
            .with_own(py, |own| (own.maps.len(), own.kernel.flow_control()));
        let flow_control = if flow_control { "True" } else { "False" };
        format!("StickyKeyDispatcher(consumers={consumers}, flow_control={flow_control})")
    }
});

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
    errors::wrong_type(format!("{what} must be a sequence, got {}", type_name(obj)))
}

/// Entry `index` of a read. Plain ints in range convert without building names; anything
/// else goes through the named conversion, which says what is wrong.
fn read_entry(obj: &Bound<'_, PyAny>, index: usize) -> PyResult<ReadEntry> {
    let where_ = || format!("entries[{index}]");
    let items = items_of(obj, &where_())?;
    let n = items.len()?;
    if n != 4 {
        return Err(errors::invalid(format!(
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
