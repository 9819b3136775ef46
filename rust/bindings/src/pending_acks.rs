use std::sync::{Mutex, MutexGuard};

use numpy::PyArray1;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;

use crate::errors::{invalid, wrong_type, Raise};
use pyo3::PyTraverseError;

use super::draining::PyDrainingHashesTracker;
use crate::arrays::{BatchSizes, I64s, RingHashes};
use crate::buckets::HashRanges;
use crate::conversions::{
    arg, position, same_lengths, type_name, BatchSize, ConsumerId, FromArg, RingHash,
};
use crate::state::{detached, lock, notify, with_state};
use keyshared_kernels::draining::DrainingHashes;
use keyshared_kernels::error::{InvalidInput, KernelResult};
use keyshared_kernels::pending_acks::{PendingAck, PendingAcks, WithNotice};

#[doc = stub_doc!("PendingAcksMap")]
#[pyclass(name = "PendingAcksMap", module = "keyshared._core", frozen)]
pub struct PyPendingAcksMap {
    /// The kernel's consumer id, kept outside the lock: the lock order reads it.
    pub(crate) consumer_id: u64,
    pub(crate) state: Mutex<PendingAcks>,
    pub(crate) tracker: Option<Py<PyDrainingHashesTracker>>,
}

pub(crate) type Ack = (i64, i64, i32, u16);

impl PyPendingAcksMap {
    fn tracker(&self) -> Option<&PyDrainingHashesTracker> {
        self.tracker.as_ref().map(Py::get)
    }

    /// Runs `f` with this map and, when wired, the tracker, both locked (this map first).
    fn with_both<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut PendingAcks, Option<&mut DrainingHashes>) -> R + Send,
    ) -> R {
        let tracker = self.tracker();
        with_state(py, &self.state, |acks| match tracker {
            Some(t) => f(acks, Some(&mut lock(&t.state))),
            None => f(acks, None),
        })
    }

    fn notify(&self, py: Python<'_>, notice: Option<i32>) {
        notify(
            py,
            self.tracker().and_then(|t| t.handler(py)).as_ref(),
            notice,
        );
    }

    /// Calls `processor(ledger_id, entry_id, batch_size, sticky_key_hash)` for each ack, then
    /// tells the unblocking handler (whose errors go to `sys.unraisablehook`, see
    /// `state::notify`); the processor's first error is raised.
    fn process(
        &self,
        py: Python<'_>,
        processor: Option<&Bound<'_, PyAny>>,
        acks: &[PendingAck],
        notice: Option<i32>,
    ) -> PyResult<()> {
        let processed = match processor {
            Some(p) => acks.iter().try_for_each(|a| p.call1(tuple(*a)).map(drop)),
            None => Ok(()),
        };
        self.notify(py, notice);
        processed
    }

    fn clear_all(&self, py: Python<'_>, processor: &Bound<'_, PyAny>, close: bool) -> PyResult<()> {
        let (acks, notice) = self
            .with_both(py, |m, t| m.for_each_and_clear(close, t))
            .py()?;
        self.process(py, Some(processor), &acks, notice)
    }
}

#[pymethods]
impl PyPendingAcksMap {
    #[classattr]
    const PENDING_ACK_NOT_FOUND: i32 = -1;

    #[new]
    #[pyo3(signature = (consumer_id, tracker=None))]
    fn new(
        consumer_id: &Bound<'_, PyAny>,
        tracker: Option<Py<PyDrainingHashesTracker>>,
    ) -> PyResult<Self> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        Ok(Self {
            consumer_id: consumer,
            state: Mutex::new(PendingAcks::new(consumer)),
            tracker,
        })
    }

    #[doc = stub_doc!("PendingAcksMap.consumer_id")]
    #[getter]
    fn consumer_id(&self) -> u64 {
        self.consumer_id
    }

    // The tracker's handler may hold this map (a bound method of its owner), so the
    // collector must see the map's reference to the tracker; the tracker clears the cycle.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.tracker)
    }

    #[doc = stub_doc!("PendingAcksMap.tracker")]
    #[getter(tracker)]
    fn get_tracker(&self, py: Python<'_>) -> Option<Py<PyDrainingHashesTracker>> {
        self.tracker.as_ref().map(|t| t.clone_ref(py))
    }

    #[doc = stub_doc!("PendingAcksMap.closed")]
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        with_state(py, &self.state, |m| m.is_closed())
    }

    #[doc = stub_doc!("PendingAcksMap.add_pending_ack_if_allowed")]
    fn add_pending_ack_if_allowed(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
        batch_size: &Bound<'_, PyAny>,
        sticky_key_hash: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let ack = pending_ack(ledger_id, entry_id, batch_size, sticky_key_hash)?;
        self.with_both(py, |m, t| m.add_pending_ack_if_allowed(ack, t.as_deref()))
            .py()
    }

    #[doc = stub_doc!("PendingAcksMap.add_pending_acks_if_allowed")]
    fn add_pending_acks_if_allowed<'py>(
        &self,
        py: Python<'py>,
        ledger_ids: &Bound<'py, PyAny>,
        entry_ids: &Bound<'py, PyAny>,
        batch_sizes: &Bound<'py, PyAny>,
        sticky_key_hashes: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<bool>>> {
        let columns = [
            (batch_sizes, "batch_sizes"),
            (sticky_key_hashes, "sticky_key_hashes"),
        ];
        let Entries {
            keys,
            columns: (BatchSizes(sizes), RingHashes(hashes)),
        } = Entries::read(ledger_ids, entry_ids, columns)?;
        let acks: Vec<PendingAck> = (0..keys.len())
            .map(|i| PendingAck {
                ledger_id: keys[i].0,
                entry_id: keys[i].1,
                batch_size: sizes[i],
                sticky_key_hash: hashes[i],
            })
            .collect();
        let added = py
            .detach(|| {
                let tracker = self.tracker();
                let mut m = lock(&self.state);
                match tracker {
                    Some(t) => m.add_many(&acks, Some(&lock(&t.state))),
                    None => m.add_many(&acks, None),
                }
            })
            // Batch sizes were checked on conversion; what the kernel numbers is a hash.
            .py_in("sticky_key_hashes")?;
        Ok(PyArray1::from_vec(py, added))
    }

    #[doc = stub_doc!("PendingAcksMap.remove")]
    #[pyo3(signature = (ledger_id, entry_id, batch_size=None, sticky_key_hash=None))]
    fn remove(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
        batch_size: Option<&Bound<'_, PyAny>>,
        sticky_key_hash: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let (ledger, entry) = position(ledger_id, entry_id)?;
        let expected = match (batch_size, sticky_key_hash) {
            (Some(b), Some(h)) => Some((
                arg::<BatchSize>(b, "batch_size")?.0,
                arg::<RingHash>(h, "sticky_key_hash")?.0,
            )),
            (None, None) => None,
            _ => {
                return Err(wrong_type(
                    "remove takes batch_size and sticky_key_hash together, or neither",
                ))
            }
        };
        let (removed, notice) = self
            .with_both(py, |m, t| m.remove(ledger, entry, expected, t))
            .py()?;
        self.notify(py, notice);
        Ok(removed)
    }

    #[doc = stub_doc!("PendingAcksMap.remove_and_get")]
    fn remove_and_get(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<Option<(i32, u16)>> {
        let (ledger, entry) = position(ledger_id, entry_id)?;
        let (removed, notice) = self
            .with_both(py, |m, t| m.remove_and_get(ledger, entry, t))
            .py()?;
        self.notify(py, notice);
        Ok(removed)
    }

    #[doc = stub_doc!("PendingAcksMap.get_remaining_unacked")]
    fn get_remaining_unacked(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<i32> {
        let (ledger, entry) = position(ledger_id, entry_id)?;
        let found = with_state(py, &self.state, |m| m.get(ledger, entry));
        Ok(found.map_or(Self::PENDING_ACK_NOT_FOUND, |(remaining, _)| remaining))
    }

    #[doc = stub_doc!("PendingAcksMap.remove_and_get_remaining_unacked")]
    fn remove_and_get_remaining_unacked(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<i32> {
        let removed = self.remove_and_get(py, ledger_id, entry_id)?;
        Ok(removed.map_or(Self::PENDING_ACK_NOT_FOUND, |(remaining, _)| remaining))
    }

    #[doc = stub_doc!("PendingAcksMap.update_remaining_unacked")]
    fn update_remaining_unacked(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
        acked_delta: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let (ledger, entry) = position(ledger_id, entry_id)?;
        let BatchSize(delta) = arg(acked_delta, "acked_delta")?;
        with_state(py, &self.state, |m| {
            m.update_remaining_unacked(ledger, entry, delta)
        })
        .py()
    }

    #[doc = stub_doc!("PendingAcksMap.update_remaining_unacked_many")]
    fn update_remaining_unacked_many<'py>(
        &self,
        py: Python<'py>,
        ledger_ids: &Bound<'py, PyAny>,
        entry_ids: &Bound<'py, PyAny>,
        acked_deltas: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<bool>>> {
        let Entries {
            keys,
            columns: BatchSizes(deltas),
        } = Entries::read(ledger_ids, entry_ids, [(acked_deltas, "acked_deltas")])?;
        let updated = detached(py, &self.state, |m| {
            m.update_remaining_unacked_many(&keys, &deltas)
        })
        .py()?;
        Ok(PyArray1::from_vec(py, updated))
    }

    #[doc = stub_doc!("PendingAcksMap.remove_many")]
    fn remove_many<'py>(
        &self,
        py: Python<'py>,
        ledger_ids: &Bound<'py, PyAny>,
        entry_ids: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<bool>>> {
        let Entries { keys, columns: () } = Entries::read(ledger_ids, entry_ids, [])?;
        let result: KernelResult<WithNotice<Vec<bool>>> = py.detach(|| {
            let tracker = self.tracker();
            let mut m = lock(&self.state);
            match tracker {
                Some(t) => m.remove_many(&keys, Some(&mut lock(&t.state))),
                None => m.remove_many(&keys, None),
            }
        });
        let (removed, notice) = result.py()?;
        self.notify(py, notice);
        Ok(PyArray1::from_vec(py, removed))
    }

    #[doc = stub_doc!("PendingAcksMap.remove_all_up_to")]
    #[pyo3(signature = (ledger_id, entry_id, callback=None))]
    fn remove_all_up_to(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
        callback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let (ledger, entry) = position(ledger_id, entry_id)?;
        let (acks, notice) = self
            .with_both(py, |m, t| m.remove_all_up_to(ledger, entry, t))
            .py()?;
        self.process(py, callback.filter(|c| !c.is_none()), &acks, notice)?;
        Ok(acks.len())
    }

    #[doc = stub_doc!("PendingAcksMap.for_each")]
    fn for_each(&self, py: Python<'_>, processor: &Bound<'_, PyAny>) -> PyResult<()> {
        let acks = with_state(py, &self.state, |m| m.for_each());
        self.process(py, Some(processor), &acks, None)
    }

    #[doc = stub_doc!("PendingAcksMap.for_each_and_close")]
    fn for_each_and_close(&self, py: Python<'_>, processor: &Bound<'_, PyAny>) -> PyResult<()> {
        self.clear_all(py, processor, true)
    }

    #[doc = stub_doc!("PendingAcksMap.for_each_and_clear")]
    fn for_each_and_clear(&self, py: Python<'_>, processor: &Bound<'_, PyAny>) -> PyResult<()> {
        self.clear_all(py, processor, false)
    }

    #[doc = stub_doc!("PendingAcksMap.contains")]
    fn contains(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let (ledger, entry) = position(ledger_id, entry_id)?;
        Ok(with_state(py, &self.state, |m| m.contains(ledger, entry)))
    }

    #[doc = stub_doc!("PendingAcksMap.get")]
    fn get(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<Option<(i32, u16)>> {
        let (ledger, entry) = position(ledger_id, entry_id)?;
        Ok(with_state(py, &self.state, |m| m.get(ledger, entry)))
    }

    #[doc = stub_doc!("PendingAcksMap.size")]
    fn size(&self, py: Python<'_>) -> usize {
        with_state(py, &self.state, |m| m.len())
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.size(py)
    }

    #[doc = stub_doc!("PendingAcksMap.to_list")]
    fn to_list(&self, py: Python<'_>) -> Vec<Ack> {
        let acks = with_state(py, &self.state, |m| m.for_each());
        acks.into_iter().map(tuple).collect()
    }

    #[doc = stub_doc!("PendingAcksMap.register_draining_hashes")]
    fn register_draining_hashes(
        &self,
        py: Python<'_>,
        ranges: &Bound<'_, PyAny>,
    ) -> PyResult<usize> {
        let HashRanges(ranges) = arg(ranges, "ranges")?;
        let registered = self
            .with_both(py, |m, t| match t {
                Some(t) => m.register_draining_hashes(&ranges, t),
                None => Err(InvalidInput::NoTracker {
                    call: "register_draining_hashes",
                }),
            })
            .py()?;
        Ok(registered)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let (consumer, len, closed) = with_state(py, &self.state, |m| {
            (m.consumer_id(), m.len(), m.is_closed())
        });
        let closed = if closed { "True" } else { "False" };
        format!("PendingAcksMap(consumer_id={consumer}, size={len}, closed={closed})")
    }
}

/// A batch call's entries: the `(ledger_id, entry_id)` keys its `ledger_ids` and `entry_ids`
/// name, and `columns`, the further per-entry arguments it takes. All are converted in
/// argument order, then checked to be of one length.
struct Entries<C> {
    keys: Vec<(i64, i64)>,
    columns: C,
}

impl<C> Entries<C> {
    fn read<'py, const N: usize>(
        ledger_ids: &Bound<'py, PyAny>,
        entry_ids: &Bound<'py, PyAny>,
        columns: [Named<'_, 'py>; N],
    ) -> PyResult<Self>
    where
        C: Columns<'py, N>,
    {
        let I64s(ledgers) = arg(ledger_ids, "ledger_ids")?;
        let I64s(entries) = arg(entry_ids, "entry_ids")?;
        let mut lengths = vec![("ledger_ids", ledgers.len()), ("entry_ids", entries.len())];
        let columns = C::read(columns, &mut lengths)?;
        same_lengths(&lengths)?;
        let keys = ledgers.into_iter().zip(entries).collect();
        Ok(Self { keys, columns })
    }
}

/// An argument and its name.
type Named<'a, 'py> = (&'a Bound<'py, PyAny>, &'static str);

/// The names and lengths of a batch's columns, for `same_lengths`.
type Lengths = Vec<(&'static str, usize)>;

/// A per-entry column of a batch call.
trait Column<'py>: FromArg<'py> {
    fn len(&self) -> usize;
}

impl Column<'_> for BatchSizes {
    fn len(&self) -> usize {
        self.0.len()
    }
}

impl Column<'_> for RingHashes {
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// The `N` further columns of a batch call, converted in order into `lengths`.
trait Columns<'py, const N: usize>: Sized {
    fn read(args: [Named<'_, 'py>; N], lengths: &mut Lengths) -> PyResult<Self>;
}

impl<'py> Columns<'py, 0> for () {
    fn read(_: [Named<'_, 'py>; 0], _: &mut Lengths) -> PyResult<Self> {
        Ok(())
    }
}

impl<'py, A: Column<'py>> Columns<'py, 1> for A {
    fn read([a]: [Named<'_, 'py>; 1], lengths: &mut Lengths) -> PyResult<Self> {
        column(a, lengths)
    }
}

impl<'py, A: Column<'py>, B: Column<'py>> Columns<'py, 2> for (A, B) {
    fn read([a, b]: [Named<'_, 'py>; 2], lengths: &mut Lengths) -> PyResult<Self> {
        Ok((column(a, lengths)?, column(b, lengths)?))
    }
}

fn column<'py, T: Column<'py>>((obj, name): Named<'_, 'py>, lengths: &mut Lengths) -> PyResult<T> {
    let column: T = arg(obj, name)?;
    lengths.push((name, column.len()));
    Ok(column)
}

/// A pending ack from its four arguments.
fn pending_ack(
    ledger_id: &Bound<'_, PyAny>,
    entry_id: &Bound<'_, PyAny>,
    batch_size: &Bound<'_, PyAny>,
    sticky_key_hash: &Bound<'_, PyAny>,
) -> PyResult<PendingAck> {
    let (ledger_id, entry_id) = position(ledger_id, entry_id)?;
    Ok(PendingAck {
        ledger_id,
        entry_id,
        batch_size: arg::<BatchSize>(batch_size, "batch_size")?.0,
        sticky_key_hash: arg::<RingHash>(sticky_key_hash, "sticky_key_hash")?.0,
    })
}

/// Locks pending-acks maps in the one order of level 3: by consumer id, then by address
/// (an object never moves), whatever order they come in. The guards are in that order.
pub fn lock_maps<'m>(
    maps: impl IntoIterator<Item = &'m PyPendingAcksMap>,
) -> Vec<MutexGuard<'m, PendingAcks>> {
    let mut maps: Vec<&PyPendingAcksMap> = maps.into_iter().collect();
    maps.sort_by_key(|m| lock_key(m));
    maps.into_iter().map(|m| lock(&m.state)).collect()
}

/// A map's place in the lock order: its consumer id, then its address.
fn lock_key(map: &PyPendingAcksMap) -> (u64, usize) {
    (map.consumer_id, std::ptr::from_ref(map) as usize)
}

/// The pending-acks maps of a hand-off, checked to be distinct and wired to one tracker,
/// and that tracker (None for no maps).
pub struct WiredMaps<'py>(
    pub Vec<Bound<'py, PyPendingAcksMap>>,
    pub Option<Py<PyDrainingHashesTracker>>,
);

impl<'py> FromArg<'py> for WiredMaps<'py> {
    fn from_arg(pending_acks: &Bound<'py, PyAny>, what: &str) -> PyResult<Self> {
        let mut maps: Vec<Bound<'py, PyPendingAcksMap>> = Vec::new();
        let mut tracker: Option<Py<PyDrainingHashesTracker>> = None;
        for (i, item) in pending_acks.try_iter()?.enumerate() {
            let item = item?;
            let map = item.cast::<PyPendingAcksMap>().map_err(|_| {
                wrong_type(format!(
                    "{what}[{i}] must be a PendingAcksMap, got {}",
                    type_name(&item)
                ))
            })?;
            let Some(own) = map.get().tracker.as_ref() else {
                return Err(invalid(format!(
                    "{what}[{i}] has no tracker to register draining hashes in"
                )));
            };
            match &tracker {
                Some(t) if !t.is(own) => {
                    return Err(invalid(format!(
                        "{what}[{i}] is wired to another tracker than {what}[0]"
                    )))
                }
                Some(_) => {}
                None => tracker = Some(own.clone_ref(item.py())),
            }
            if maps.iter().any(|m| m.is(map)) {
                return Err(invalid(format!("{what}[{i}] is given twice")));
            }
            maps.push(map.clone());
        }
        Ok(Self(maps, tracker))
    }
}

pub(crate) fn tuple(a: PendingAck) -> Ack {
    (a.ledger_id, a.entry_id, a.batch_size, a.sticky_key_hash)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPendingAcksMap>()
}
