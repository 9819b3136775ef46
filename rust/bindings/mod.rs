//! The PyO3 layer: argument conversion, GIL release and error mapping only.

mod args;
mod buckets;
mod cursor;
mod draining;
mod entry_bucket;
mod entry_bucket_dispatcher;
mod handoff;
mod hashing;
mod impacted;
mod keys;
mod pending_acks;
mod redelivery;
mod rings;
mod routing;
mod state_args;
mod window;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    hashing::register(m)?;
    buckets::register(m)?;
    routing::register(m)?;
    draining::register(m)?;
    pending_acks::register(m)?;
    redelivery::register(m)?;
    rings::register(m)?;
    impacted::register(m)?;
    entry_bucket::register(m)?;
    entry_bucket_dispatcher::register(m)?;
    handoff::register(m)?;
    cursor::register(m)?;
    window::register(m)?;
    Ok(())
}
