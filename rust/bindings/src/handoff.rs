use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::errors::Raise;

use super::draining::PyDrainingHashesTracker;
use super::impacted::PyImpactedConsumersResult;
use super::pending_acks::PyPendingAcksMap;
use crate::conversions::{arg, type_name, ConsumerId};
use crate::state::{lock, notify};
use keyshared_kernels::handoff;
use keyshared_kernels::pending_acks::PendingAcks;

/// The maps of a hand-off and the one tracker they are wired to (None for no maps).
type WiredMaps<'py> = (
    Vec<Bound<'py, PyPendingAcksMap>>,
    Option<Py<PyDrainingHashesTracker>>,
);

/// The pending-acks maps of a hand-off, checked to be distinct and wired to one tracker.
fn maps_arg<'py>(pending_acks: &Bound<'py, PyAny>) -> PyResult<WiredMaps<'py>> {
    let mut maps: Vec<Bound<'py, PyPendingAcksMap>> = Vec::new();
    let mut tracker: Option<Py<PyDrainingHashesTracker>> = None;
    for (i, item) in pending_acks.try_iter()?.enumerate() {
        let item = item?;
        let map = item.cast::<PyPendingAcksMap>().map_err(|_| {
            PyTypeError::new_err(format!(
                "pending_acks[{i}] must be a PendingAcksMap, got {}",
                type_name(&item)
            ))
        })?;
        let Some(own) = map.get().tracker.as_ref() else {
            return Err(PyValueError::new_err(format!(
                "pending_acks[{i}] has no tracker to register draining hashes in"
            )));
        };
        match &tracker {
            Some(t) if !t.is(own) => {
                return Err(PyValueError::new_err(format!(
                    "pending_acks[{i}] is wired to another tracker than pending_acks[0]"
                )))
            }
            Some(_) => {}
            None => tracker = Some(own.clone_ref(item.py())),
        }
        if maps.iter().any(|m| m.is(map)) {
            return Err(PyValueError::new_err(format!(
                "pending_acks[{i}] is given twice"
            )));
        }
        maps.push(map.clone());
    }
    Ok((maps, tracker))
}

/// PIP-379's hand-off after a change of range owners (Pulsar's `registerDrainingHashes`):
/// each consumer's pending acks in the ranges it lost are registered as draining in the
/// maps' tracker, and each consumer releases its own draining entries in the ranges it got
/// back. `skip_consumer` (the consumer just added or removed) is left out. Returns how many
/// pending acks were registered and how many references released.
#[pyfunction]
#[pyo3(signature = (impacted, pending_acks, skip_consumer=None))]
fn register_draining_hashes(
    py: Python<'_>,
    impacted: &Bound<'_, PyImpactedConsumersResult>,
    pending_acks: &Bound<'_, PyAny>,
    skip_consumer: Option<&Bound<'_, PyAny>>,
) -> PyResult<(usize, usize)> {
    let skip = skip_consumer
        .filter(|s| !s.is_none())
        .map(|s| arg::<ConsumerId>(s, "skip_consumer").map(|v| v.0))
        .transpose()?;
    let (mut maps, tracker) = maps_arg(pending_acks)?;
    let Some(tracker) = tracker else {
        return Ok((0, 0));
    };
    // Maps are locked in one (address) order, then the tracker, as every map operation
    // locks its map before the tracker: concurrent hand-offs cannot deadlock.
    maps.sort_by_key(|m| m.as_ptr() as usize);
    let impacted = &impacted.get().0;
    let states: Vec<&std::sync::Mutex<PendingAcks>> = maps.iter().map(|m| &m.get().state).collect();
    let t = tracker.get();
    let done = py
        .detach(|| {
            let guards: Vec<_> = states.iter().map(|s| lock(s)).collect();
            let refs: Vec<&PendingAcks> = guards.iter().map(|g| &**g).collect();
            handoff::register_draining_hashes(impacted, skip, &refs, &mut lock(&t.state))
        })
        .py()?;
    notify(py, t.handler(py).as_ref(), done.notice)?;
    Ok((done.registered, done.released))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(register_draining_hashes, m)?)
}
