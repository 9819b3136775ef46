//! The PyO3 layer: argument conversion, GIL release and error mapping only.

mod args;
mod buckets;
mod hashing;
mod keys;
mod routing;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    hashing::register(m)?;
    buckets::register(m)?;
    routing::register(m)?;
    Ok(())
}
