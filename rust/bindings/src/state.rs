//! Locking the state of the native objects, and calling back into Python outside the lock.
//!
//! # The lock order
//!
//! The kernels hold no locks; every lock is a binding's, and a call that takes more than
//! one takes them in this one order, outermost first, so no two calls can wait on each
//! other (tests/unit/test_lock_order.py races every pair of such calls on two threads):
//!
//! 1. a dispatcher's own state (its kernel and its map of consumers), or an
//!    `InFlightWindow`;
//! 2. a selector (`ConsistentHashingStickyKeyConsumerSelector`, `EntryBucketConsumerSelector`,
//!    `KeySharedConsumerState`);
//! 3. pending-acks maps, by consumer id, maps of one id by address
//!    ([`lock_maps`](crate::pending_acks::lock_maps)): the
//!    dispatchers and `register_draining_hashes` alike;
//! 4. a redelivery queue (`MessageRedeliveryController`);
//! 5. a draining-hashes tracker, and last its handler's cell (taken alone, only to copy it).
//!
//! A call skips the levels it does not need but never goes back up one. Both dispatchers
//! lock through one core (`dispatch/core.rs`), whose accessors take levels 1, 2, 1-3-5
//! (one consumer's map, for an ack) and 1 to 5 (with every map, or only the one an entry
//! goes to). No lock is held
//! while Python code runs (callbacks run after with `notify`), so the GIL never waits on a
//! lock held by a thread that waits for the GIL.

use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use pyo3::prelude::*;

use crate::errors;

/// Runs `f` on the locked state. When another thread holds the lock, waits for it without
/// the GIL, so that thread (maybe in a long batch) and other Python threads go on. `f` must
/// not touch Python: a callback into the same object would deadlock on the lock.
pub fn with_state<S: Send, R: Send>(
    py: Python<'_>,
    state: &Mutex<S>,
    f: impl FnOnce(&mut S) -> R + Send,
) -> R {
    match state.try_lock() {
        Ok(mut guard) => f(&mut guard),
        Err(TryLockError::Poisoned(poisoned)) => f(&mut poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => py.detach(|| f(&mut lock(state))),
    }
}

/// Runs `f` on the locked state without the GIL, for batches.
pub fn detached<S: Send, R: Send>(
    py: Python<'_>,
    state: &Mutex<S>,
    f: impl FnOnce(&mut S) -> R + Send,
) -> R {
    py.detach(|| f(&mut lock(state)))
}

/// Locks a mutex; kernels never panic while holding one, so poisoning carries no meaning.
pub fn lock<S>(state: &Mutex<S>) -> MutexGuard<'_, S> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Refuses to change a selector a dispatcher owns (`owner`, the dispatcher's class): a
/// consumer added or removed behind the dispatcher's back would have no pending-acks map
/// there, and could then be neither removed nor added through it.
pub fn check_unowned(owner: Option<&str>) -> PyResult<()> {
    match owner {
        Some(owner) => Err(errors::wrong_type(format!(
            "this selector is a {owner}'s: add and remove consumers through the dispatcher"
        ))),
        None => Ok(()),
    }
}

/// Calls the unblocking handler, if any, with the hash the kernel reported, if any. Runs
/// with no lock held, so the handler may call back into the object that reported it. The
/// change it reports is made: were the handler's exception raised, the call would raise
/// having changed something (and a retry would find nothing to do), so it goes to
/// `sys.unraisablehook`, as Python reports an exception it cannot propagate (a `__del__`,
/// a weakref callback), and the call returns normally.
pub fn notify(py: Python<'_>, handler: Option<&Py<PyAny>>, notice: Option<i32>) {
    if let (Some(handler), Some(hash)) = (handler, notice) {
        if let Err(err) = handler.call1(py, (hash,)) {
            err.write_unraisable(py, Some(handler.bind(py)));
        }
    }
}
