//! Locking the state of the native objects, and calling back into Python outside the lock.

use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use pyo3::prelude::*;

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

/// Calls a Python callable, if any, with the hash the kernel reported, if any. Runs with no
/// lock held, so the callable may call back into the object that reported it.
pub fn notify(py: Python<'_>, handler: Option<&Py<PyAny>>, notice: Option<i32>) -> PyResult<()> {
    if let (Some(handler), Some(hash)) = (handler, notice) {
        handler.call1(py, (hash,))?;
    }
    Ok(())
}
