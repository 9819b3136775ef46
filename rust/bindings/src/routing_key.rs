//! A routing key back as the Python object it came as. It stands apart from `conversions`
//! because error messages show keys this way: `errors` imports it, and it imports nothing of
//! the crate, so no module is both imported by `errors` and importing it.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use keyshared_kernels::routing_key::RoutingKey;

/// A routing key as it arrived: str when it came as str.
pub fn routing_key_object<'py>(py: Python<'py>, key: &RoutingKey) -> Bound<'py, PyAny> {
    if key.text {
        PyString::new(py, &String::from_utf8_lossy(&key.bytes)).into_any()
    } else {
        PyBytes::new(py, &key.bytes).into_any()
    }
}
