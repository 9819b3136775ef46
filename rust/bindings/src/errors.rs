//! Kernel errors as Python exceptions: bad input is a `ValueError`, something a stateful
//! kernel does not hold is a `KeyError`.

use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::PyErr;

use keyshared_kernels::error::{InvalidInput, NotFound, StateError};

/// The Python exception a kernel error raises.
pub trait ToPyErr {
    fn to_py_err(self) -> PyErr;
}

impl ToPyErr for InvalidInput {
    fn to_py_err(self) -> PyErr {
        PyValueError::new_err(self.0)
    }
}

impl ToPyErr for NotFound {
    fn to_py_err(self) -> PyErr {
        PyKeyError::new_err(self.0)
    }
}

impl ToPyErr for StateError {
    fn to_py_err(self) -> PyErr {
        match self {
            StateError::Invalid(e) => e.to_py_err(),
            StateError::NotFound(e) => e.to_py_err(),
        }
    }
}

/// `kernel_call().py()?`: a kernel result with its error raised in Python.
pub trait Raise<T> {
    fn py(self) -> pyo3::PyResult<T>;
}

impl<T, E: ToPyErr> Raise<T> for Result<T, E> {
    fn py(self) -> pyo3::PyResult<T> {
        self.map_err(ToPyErr::to_py_err)
    }
}
