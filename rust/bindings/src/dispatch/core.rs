//! The one binding core of both dispatchers: their shared parts, the one lock pattern over
//! them, and the calls both make the same way (consumers, pending acks, select, ack), which
//! `dispatcher_methods!` writes into both classes. Each `#[pyclass]` converts its other
//! arguments and calls in here.
//!
//! Locks are taken only by `with_own` (level 1), `with_selector` (level 2), `with_map`
//! (levels 1, 3, 5), `with_parts` (levels 1 to 5, every map) and `run_picked` (levels 1 to
//! 5, one map), in the order of `state`.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::pyclass::boolean_struct::True;
use pyo3::{PyClass, PyTraverseError, PyVisit};

use crate::conversions::{arg, key_bytes, ConsumerId};
use crate::draining::PyDrainingHashesTracker;
use crate::entry_bucket::PyEntryBucketSelector;
use crate::errors::Raise;
use crate::pending_acks::{lock_maps, tuple, Ack, PyPendingAcksMap};
use crate::redelivery::PyMessageRedeliveryController;
use crate::rings::PyConsistentHashingSelector;
use crate::state::{lock, notify, with_state};
use keyshared_kernels::dispatch::{not_connected, Dispatcher, NoQueue, Parts, Queue, Selector};
use keyshared_kernels::draining::DrainingHashes;
use keyshared_kernels::entry_bucket::EntryBucketSelector;
use keyshared_kernels::error::StateResult;
use keyshared_kernels::pending_acks::PendingAcks;
use keyshared_kernels::redelivery::MessageRedeliveryController;
use keyshared_kernels::ring::ConsistentHashingSelector;

/// Each connected consumer's pending-acks map, by consumer id.
type Maps = BTreeMap<u64, Py<PyPendingAcksMap>>;

/// Every connected consumer's pending acks, locked in the one order (`lock_maps`).
fn lock_acks(maps: &Maps) -> Vec<MutexGuard<'_, PendingAcks>> {
    lock_maps(maps.values().map(Py::get))
}

/// A consumer's id and name (`str` or `bytes`; empty when not given), as both dispatchers
/// take them.
pub fn consumer_and_name<'a>(
    consumer_id: &Bound<'_, PyAny>,
    name: Option<&'a Bound<'_, PyAny>>,
) -> PyResult<(u64, &'a [u8])> {
    let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
    let name = match name.filter(|n| !n.is_none()) {
        Some(n) => key_bytes(n, "name")?,
        None => b"",
    };
    Ok((consumer, name))
}

/// The `#[pymethods]` of a dispatcher class `$class` (Python name `$name`, for its docs):
/// the methods both classes forward to their `core` alike, then the class's own `methods`.
/// pyo3 takes one `#[pymethods]` block per class, so the shared methods are written into
/// each class's block rather than into a block of their own.
macro_rules! dispatcher_methods {
    ($class:ty, $name:literal, { $($methods:tt)* }) => {
        #[pymethods]
        impl $class {
            #[doc = stub_doc!($name, "add_consumer")]
            #[pyo3(
                signature = (consumer_id, name=None),
                text_signature = "($self, consumer_id, name='')"
            )]
            fn add_consumer(
                &self,
                py: Python<'_>,
                consumer_id: &Bound<'_, PyAny>,
                name: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<Py<$crate::pending_acks::PyPendingAcksMap>> {
                let (consumer, name) =
                    $crate::dispatch::core::consumer_and_name(consumer_id, name)?;
                self.core.add_consumer(py, consumer, name)
            }

            #[doc = stub_doc!($name, "remove_consumer")]
            fn remove_consumer(
                &self,
                py: Python<'_>,
                consumer_id: &Bound<'_, PyAny>,
            ) -> PyResult<Vec<$crate::pending_acks::Ack>> {
                let $crate::conversions::ConsumerId(consumer) =
                    $crate::conversions::arg(consumer_id, "consumer_id")?;
                self.core.remove_consumer(py, consumer)
            }

            #[doc = stub_doc!($name, "pending_acks")]
            fn pending_acks(
                &self,
                py: Python<'_>,
                consumer_id: &Bound<'_, PyAny>,
            ) -> PyResult<Py<$crate::pending_acks::PyPendingAcksMap>> {
                let $crate::conversions::ConsumerId(consumer) =
                    $crate::conversions::arg(consumer_id, "consumer_id")?;
                self.core.pending_acks(py, consumer)
            }

            #[doc = stub_doc!($name, "select")]
            fn select(
                &self,
                py: Python<'_>,
                sticky_key_hash: &Bound<'_, PyAny>,
            ) -> PyResult<Option<u64>> {
                let $crate::conversions::RingHash(hash) =
                    $crate::conversions::arg(sticky_key_hash, "sticky_key_hash")?;
                Ok(self.core.select(py, hash))
            }

            #[doc = stub_doc!($name, "ack")]
            fn ack(
                &self,
                py: Python<'_>,
                consumer_id: &Bound<'_, PyAny>,
                ledger_id: &Bound<'_, PyAny>,
                entry_id: &Bound<'_, PyAny>,
            ) -> PyResult<bool> {
                let $crate::conversions::ConsumerId(consumer) =
                    $crate::conversions::arg(consumer_id, "consumer_id")?;
                let (ledger, entry) = $crate::conversions::position(ledger_id, entry_id)?;
                self.core.ack(py, consumer, ledger, entry)
            }

            $($methods)*
        }
    };
}
pub(super) use dispatcher_methods;

/// Puts the `fastcall` entry points in front of the `select` and `ack` that
/// `dispatcher_methods!` wrote into `$class`: the one-entry calls of a broker's loop.
macro_rules! install_shared_fast_paths {
    ($class:ty, $py:expr) => {{
        $crate::fastcall::fast_method!(Select: $class, "select", |this, py, [hash]| this
            .select(py, hash));
        $crate::fastcall::fast_method!(Ack: $class, "ack", |this, py, [consumer, ledger, entry]| {
            this.ack(py, consumer, ledger, entry)
        });
        $crate::fastcall::install::<Select>($py)?;
        $crate::fastcall::install::<Ack>($py)
    }};
}
pub(super) use install_shared_fast_paths;

/// A selector class a dispatcher owns.
pub trait SelectorCell: PyClass<Frozen = True> + Sync {
    type Selector: Selector + Send;
    /// A new selector that refuses changes not made by `owner` (`state::check_unowned`).
    fn owned(py: Python<'_>, selector: Self::Selector, owner: &'static str) -> PyResult<Py<Self>>;
    fn state(&self) -> &Mutex<Self::Selector>;
}

/// Both selector classes hold their selector the same way: a `state` lock and an `owner`.
macro_rules! selector_cell {
    ($class:ty, $selector:ty) => {
        impl SelectorCell for $class {
            type Selector = $selector;
            fn owned(
                py: Python<'_>,
                selector: Self::Selector,
                owner: &'static str,
            ) -> PyResult<Py<Self>> {
                let state = Mutex::new(selector);
                Py::new(
                    py,
                    Self {
                        state,
                        owner: Some(owner),
                    },
                )
            }
            fn state(&self) -> &Mutex<Self::Selector> {
                &self.state
            }
        }
    };
}

selector_cell!(PyConsistentHashingSelector, ConsistentHashingSelector);
selector_cell!(PyEntryBucketSelector, EntryBucketSelector);

/// Where a dispatcher's redelivery queue lives: `with` locks it (level 4) around `f`.
pub trait QueueCell: Send + Sync {
    type Queue: Queue;
    fn with<R>(&self, f: impl FnOnce(&mut Self::Queue) -> R) -> R;
}

impl QueueCell for NoQueue {
    type Queue = NoQueue;
    fn with<R>(&self, f: impl FnOnce(&mut NoQueue) -> R) -> R {
        f(&mut NoQueue)
    }
}

impl QueueCell for Py<PyMessageRedeliveryController> {
    type Queue = MessageRedeliveryController;
    fn with<R>(&self, f: impl FnOnce(&mut MessageRedeliveryController) -> R) -> R {
        f(&mut lock(&self.get().state))
    }
}

/// What the dispatcher alone holds (level 1): the kernel and each consumer's map.
pub struct Own<D> {
    pub kernel: D,
    pub maps: Maps,
}

/// The parts as one call holds them locked.
pub type Locked<'a, 'g, S, Q> = Parts<'a, S, MutexGuard<'g, PendingAcks>, Q>;

/// A dispatcher: kernel `D` over the selector class `S` and the queue `Q`, with a tracker.
pub struct Core<D, S, Q> {
    pub selector: Py<S>,
    pub tracker: Py<PyDrainingHashesTracker>,
    pub redelivery: Q,
    own: Mutex<Own<D>>,
}

impl<D, S, Q> Core<D, S, Q>
where
    D: Dispatcher<S::Selector, Queue = Q::Queue> + Send,
    S: SelectorCell,
    Q: QueueCell,
{
    /// `owner` is the dispatcher's class name: its selector refuses changes not made here.
    pub fn new(
        py: Python<'_>,
        owner: &'static str,
        kernel: D,
        selector: S::Selector,
        redelivery: Q,
        unblocking_handler: Option<Bound<'_, PyAny>>,
        dispatcher_name: String,
    ) -> PyResult<Self> {
        let tracker = PyDrainingHashesTracker::new(unblocking_handler, dispatcher_name)?;
        Ok(Self {
            selector: S::owned(py, selector, owner)?,
            tracker: Py::new(py, tracker)?,
            redelivery,
            own: Mutex::new(Own {
                kernel,
                maps: Maps::new(),
            }),
        })
    }

    /// Runs `f` on the dispatcher's own state (level 1).
    pub fn with_own<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Own<D>) -> R + Send) -> R {
        with_state(py, &self.own, f)
    }

    /// Runs `f` on the selector alone (level 2).
    pub fn with_selector<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut S::Selector) -> R + Send,
    ) -> R {
        with_state(py, self.selector.get().state(), f)
    }

    /// Runs `f` on the kernel and every part, all locked, without the GIL; then `then` on
    /// the result and the maps, the parts unlocked and the dispatcher's state still locked.
    pub fn with_parts<R: Send, T: Send>(
        &self,
        py: Python<'_>,
        f: impl for<'a, 'g> FnOnce(&mut D, Locked<'a, 'g, S::Selector, Q::Queue>) -> R + Send,
        then: impl FnOnce(&R, &mut Maps) -> T + Send,
    ) -> (R, T) {
        py.detach(|| {
            let mut own = lock(&self.own);
            let Own { kernel, maps } = &mut *own;
            let result = {
                let mut selector = lock(self.selector.get().state());
                let mut acks = lock_acks(maps);
                self.with_rest(kernel, &mut selector, &mut acks, f)
            };
            let after = then(&result, maps);
            (result, after)
        })
    }

    /// `with_parts` with only the map of the consumer `pick` chooses (none if it chooses
    /// none), keeping the GIL: a call that dispatches one entry locks one map, not every
    /// consumer's, and takes no allocation. `pick` also gives what it found out (an entry's
    /// route, say), which `f` is given with the parts, so nothing is looked up twice.
    ///
    /// One entry's work is shorter than releasing the GIL; waiting for these locks with it
    /// held is safe, since no lock holder ever waits for the GIL (state.rs).
    pub fn run_picked<P, R>(
        &self,
        _py: Python<'_>,
        pick: impl FnOnce(&S::Selector) -> (Option<u64>, P),
        f: impl for<'a, 'g> FnOnce(&mut D, Locked<'a, 'g, S::Selector, Q::Queue>, P) -> R,
    ) -> R {
        let mut own = lock(&self.own);
        let Own { kernel, maps } = &mut *own;
        let mut selector = lock(self.selector.get().state());
        let (consumer, picked) = pick(&selector);
        // One map is in the lock order whatever its id.
        let mut acks = consumer
            .and_then(|c| maps.get(&c))
            .map(|m| lock(&m.get().state));
        self.with_rest(kernel, &mut selector, acks.as_mut_slice(), |d, parts| {
            f(d, parts, picked)
        })
    }

    /// Runs `f` on the kernel and the parts: the selector and `acks` as the caller locked
    /// them (levels 2 and 3), the queue (4) and the tracker (5) locked here.
    fn with_rest<'g, R>(
        &self,
        kernel: &mut D,
        selector: &mut S::Selector,
        acks: &mut [MutexGuard<'g, PendingAcks>],
        f: impl for<'a> FnOnce(&mut D, Locked<'a, 'g, S::Selector, Q::Queue>) -> R,
    ) -> R {
        self.redelivery.with(|redelivery| {
            let mut tracker = lock(&self.tracker.get().state);
            let parts = Parts {
                selector,
                acks,
                redelivery,
                tracker: &mut tracker,
            };
            f(kernel, parts)
        })
    }

    /// `with_parts` with nothing to do afterwards.
    pub fn run<R: Send>(
        &self,
        py: Python<'_>,
        f: impl for<'a, 'g> FnOnce(&mut D, Locked<'a, 'g, S::Selector, Q::Queue>) -> R + Send,
    ) -> R {
        self.with_parts(py, f, |_, _| ()).0
    }

    /// Runs `f` on one connected consumer's map and the tracker, keeping the GIL (one ack's
    /// work is shorter than releasing it; no lock holder waits for the GIL, state.rs);
    /// NotFound if the consumer is not connected.
    pub fn with_map<R>(
        &self,
        _py: Python<'_>,
        consumer: u64,
        f: impl FnOnce(&mut PendingAcks, &mut DrainingHashes) -> R,
    ) -> StateResult<R> {
        let own = lock(&self.own);
        let map = own
            .maps
            .get(&consumer)
            .ok_or_else(|| not_connected(consumer))?;
        let mut acks = lock(&map.get().state);
        Ok(f(&mut acks, &mut lock(&self.tracker.get().state)))
    }

    /// Connects a consumer; returns its pending-acks map, wired to the tracker.
    pub fn add_consumer(
        &self,
        py: Python<'_>,
        consumer: u64,
        name: &[u8],
    ) -> PyResult<Py<PyPendingAcksMap>> {
        let map = Py::new(
            py,
            PyPendingAcksMap {
                consumer_id: consumer,
                state: Mutex::new(PendingAcks::new(consumer)),
                tracker: Some(self.tracker.clone_ref(py)),
            },
        )?;
        let handle = map.clone_ref(py);
        let (notice, unused) = self.with_parts(
            py,
            |d, parts| d.add_consumer(parts, consumer, name),
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

    /// Disconnects a consumer (KeyError if not connected); returns its pending acks.
    pub fn remove_consumer(&self, py: Python<'_>, consumer: u64) -> PyResult<Vec<Ack>> {
        let (removed, map) = self.with_parts(
            py,
            |d, parts| d.remove_consumer(parts, consumer),
            |removed, maps| removed.is_ok().then(|| maps.remove(&consumer)),
        );
        drop(map);
        let removed = removed.py()?;
        self.notify(py, removed.notices);
        Ok(removed.acks.into_iter().map(tuple).collect())
    }

    /// The consumer's map (KeyError if not connected). Cloning a reference needs the GIL,
    /// so this waits for the lock holding it: no holder of level 1 waits for the GIL.
    pub fn pending_acks(&self, py: Python<'_>, consumer: u64) -> PyResult<Py<PyPendingAcksMap>> {
        lock(&self.own)
            .maps
            .get(&consumer)
            .map(|m| m.clone_ref(py))
            .ok_or_else(|| not_connected(consumer))
            .py()
    }

    pub fn select(&self, py: Python<'_>, sticky_key_hash: u16) -> Option<u64> {
        self.with_selector(py, |s| s.select(sticky_key_hash))
    }

    /// The consumer acked an entry (KeyError if not connected); False if it was not
    /// pending there.
    pub fn ack(
        &self,
        py: Python<'_>,
        consumer: u64,
        ledger_id: i64,
        entry_id: i64,
    ) -> PyResult<bool> {
        let (removed, notice) = self
            .with_map(py, consumer, |m, t| {
                m.remove(ledger_id, entry_id, None, Some(t))
            })
            .py()?
            .py()?;
        self.notify(py, notice);
        Ok(removed)
    }

    /// Delivers notices to the unblocking handler, with nothing locked. Most calls have
    /// none, and then the handler is not looked up.
    pub fn notify(&self, py: Python<'_>, notices: impl IntoIterator<Item = i32>) {
        let mut notices = notices.into_iter().peekable();
        if notices.peek().is_none() {
            return;
        }
        let handler = self.tracker.get().handler(py);
        for n in notices {
            notify(py, handler.as_ref(), Some(n));
        }
    }

    pub fn consumer_count(&self) -> usize {
        lock(&self.own).maps.len()
    }

    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.tracker)?;
        if let Ok(own) = self.own.try_lock() {
            for m in own.maps.values() {
                visit.call(m)?;
            }
        }
        Ok(())
    }

    pub fn clear(&self) {
        if let Ok(mut own) = self.own.try_lock() {
            own.maps.clear();
        }
    }
}
