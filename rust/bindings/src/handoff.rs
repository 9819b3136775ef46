use pyo3::prelude::*;

use crate::errors::Raise;

use super::impacted::PyImpactedConsumersResult;
use crate::conversions::{arg, instance, opt_arg, ConsumerId};
use crate::pending_acks::{lock_maps, PyPendingAcksMap, WiredMaps};
use crate::state::{lock, notify};
use keyshared_kernels::handoff;
use keyshared_kernels::pending_acks::PendingAcks;

#[doc = stub_doc!("register_draining_hashes")]
#[pyfunction]
#[pyo3(signature = (impacted, pending_acks, skip_consumer=None))]
fn register_draining_hashes(
    py: Python<'_>,
    impacted: &Bound<'_, PyAny>,
    pending_acks: &Bound<'_, PyAny>,
    skip_consumer: Option<&Bound<'_, PyAny>>,
) -> PyResult<(usize, usize)> {
    let impacted = instance::<PyImpactedConsumersResult>(impacted, "impacted")?;
    let skip = opt_arg::<ConsumerId>(skip_consumer, "skip_consumer")?.map(|s| s.0);
    let WiredMaps(maps, tracker) = arg(pending_acks, "pending_acks")?;
    let Some(tracker) = tracker else {
        return Ok((0, 0));
    };
    let impacted = &impacted.get().0;
    let maps: Vec<&PyPendingAcksMap> = maps.iter().map(Bound::get).collect();
    let t = tracker.get();
    let done = py
        .detach(|| {
            // The maps, then the tracker: the one lock order (`state`).
            let guards = lock_maps(maps);
            let refs: Vec<&PendingAcks> = guards.iter().map(|g| &**g).collect();
            handoff::register_draining_hashes(impacted, skip, &refs, &mut lock(&t.state))
        })
        .py()?;
    notify(py, t.handler(py).as_ref(), done.notice);
    Ok((done.registered, done.released))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(register_draining_hashes, m)?)
}
