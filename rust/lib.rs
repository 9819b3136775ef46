//! keyshared's native core: plain-Rust kernels (`kernels`) and a thin PyO3 layer
//! (`bindings`) that converts arguments and releases the GIL around the work.

mod bindings;
pub mod kernels;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The one version source: Cargo.toml's, which maturin also gives the wheel.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    bindings::register(m)
}
