//! keyshared's native core: plain-Rust kernels (`kernels`) and a thin PyO3 layer
//! (`bindings`) that converts arguments and releases the GIL around the work.

mod bindings;
pub mod kernels;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    bindings::register(m)
}
