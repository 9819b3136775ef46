//! Vectorcall entry points for the calls a broker or a client makes one at a time in a loop
//! (`key_hash`, `key_hashes` of a few keys, `select`, `dispatch`, `ack`), where pyo3's
//! argument parsing, not the work, was most of a call's time.
//!
//! Each entry point takes its common shape (positional arguments only, as many as the fast
//! path expects) and converts them with the same conversions as the pyo3 function or method
//! it stands in front of, so that it answers and fails exactly as that one does; any other
//! call (keywords, an optional argument) is handed to the pyo3 one. A panic in a fast path
//! hands the call to the pyo3 one too, which turns it into a Python exception.

use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::{ptr, slice};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;
use pyo3::{ffi, PyClass};

/// A call's arguments as the fast path sees them: borrowed, positional.
pub type Args<'a, 'py> = &'a [Bound<'py, PyAny>];

/// What a fast path answers: None leaves the call to the pyo3 function.
pub type Answer<'py> = Option<PyResult<Bound<'py, PyAny>>>;

/// A method's fast path on the frozen class `Class`.
pub trait FastMethod {
    type Class: PyClass<Frozen = pyo3::pyclass::boolean_struct::True> + Sync;
    const NAME: &'static str;
    /// Where the pyo3 method it stands in front of is kept (for the life of the process).
    fn full() -> &'static AtomicPtr<ffi::PyObject>;
    fn call<'py>(this: &Self::Class, py: Python<'py>, args: Args<'_, 'py>) -> Answer<'py>;
}

/// The positional arguments of a vectorcall as borrowed objects.
///
/// # Safety
/// `args` holds `nargs` live objects (or is null with `nargs` 0).
unsafe fn positional<'a, 'py>(
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
) -> &'a [Bound<'py, PyAny>] {
    if nargs == 0 {
        return &[];
    }
    // SAFETY: a `Bound<PyAny>` is a pointer to the object (repr(transparent) over it).
    slice::from_raw_parts(args.cast::<Bound<'py, PyAny>>(), nargs as usize)
}

/// The answer as a vectorcall returns it, or None to hand the call on.
fn returned(py: Python<'_>, answer: std::thread::Result<Answer<'_>>) -> Option<*mut ffi::PyObject> {
    match answer {
        Ok(Some(Ok(out))) => Some(out.into_ptr()),
        Ok(Some(Err(err))) => {
            err.restore(py);
            Some(ptr::null_mut())
        }
        Ok(None) | Err(_) => None,
    }
}

unsafe extern "C" fn method<M: FastMethod>(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    let py = Python::assume_attached();
    if kwnames.is_null() {
        // The method descriptor checked that `slf` is an instance of the class.
        let this = positional(&slf, 1)[0].cast_unchecked::<M::Class>();
        let argv = positional(args, nargs);
        let answer = catch_unwind(AssertUnwindSafe(|| M::call(this.get(), py, argv)));
        if let Some(out) = returned(py, answer) {
            return out;
        }
    }
    let kw = if kwnames.is_null() {
        0
    } else {
        ffi::PyTuple_Size(kwnames)
    };
    let given = (nargs + kw) as usize;
    let mut all = Vec::with_capacity(1 + given);
    all.push(slf);
    if given > 0 {
        all.extend_from_slice(slice::from_raw_parts(args, given));
    }
    let full = M::full().load(Ordering::Acquire);
    ffi::PyObject_Vectorcall(full, all.as_ptr(), (nargs + 1) as usize, kwnames)
}

/// The definition of a vectorcall function or method named `name` with `full`'s text
/// signature and doc (leaked: a definition lives as long as what it defines).
fn definition(
    name: &str,
    full: &Bound<'_, PyAny>,
    meth: ffi::PyCFunctionFastWithKeywords,
) -> PyResult<*mut ffi::PyMethodDef> {
    let signature: String = full.getattr("__text_signature__")?.extract()?;
    let doc: String = full.getattr("__doc__")?.extract()?;
    let text = format!("{name}{signature}\n--\n\n{doc}");
    let leak = |s: String| -> PyResult<*const c_char> {
        let c = CString::new(s).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Box::leak(c.into_boxed_c_str()).as_ptr())
    };
    Ok(Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: leak(name.to_owned())?,
        ml_meth: ffi::PyMethodDefPointer {
            PyCFunctionFastWithKeywords: meth,
        },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: leak(text)?,
    })))
}

/// Puts `M`'s fast path in front of the class's pyo3 method of that name.
pub fn install<M: FastMethod>(py: Python<'_>) -> PyResult<()> {
    let class = py.get_type::<M::Class>();
    let full = class.getattr(M::NAME)?;
    let def = definition(M::NAME, &full, method::<M>)?;
    // SAFETY: `def` is 'static and the class is live.
    let descr = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyDescr_NewMethod(class.as_ptr().cast::<ffi::PyTypeObject>(), def),
        )?
    };
    M::full().store(full.into_ptr(), Ordering::Release);
    class.setattr(M::NAME, descr)
}

/// A module function's fast path: `meth` answers the common call, `full` (the pyo3 function,
/// kept in `slot` for the life of the process) every other. The new function's `self` is the
/// module, as a pyo3 function's is, so that it pickles by its qualified name.
pub fn function(
    m: &Bound<'_, PyModule>,
    name: &str,
    full: Bound<'_, PyAny>,
    meth: ffi::PyCFunctionFastWithKeywords,
    slot: &'static AtomicPtr<ffi::PyObject>,
) -> PyResult<()> {
    let py = m.py();
    let def = definition(name, &full, meth)?;
    let module = PyString::new(py, "keyshared._core");
    slot.store(full.into_ptr(), Ordering::Release);
    // SAFETY: `def` is 'static; the module and its name are live for the call.
    let function = unsafe {
        Bound::from_owned_ptr_or_err(py, ffi::PyCFunction_NewEx(def, m.as_ptr(), module.as_ptr()))?
    };
    m.add(name, function)
}

/// The body of a module function's fast entry point: `fast` on the positional arguments,
/// else `full` on the whole call.
///
/// # Safety
/// As a vectorcall: the arguments are live, and `full` is callable.
pub unsafe fn function_call(
    full: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
    fast: impl for<'a, 'py> FnOnce(Python<'py>, Args<'a, 'py>) -> Answer<'py>,
) -> *mut ffi::PyObject {
    let py = Python::assume_attached();
    if kwnames.is_null() {
        let answer = catch_unwind(AssertUnwindSafe(|| fast(py, positional(args, nargs))));
        if let Some(out) = returned(py, answer) {
            return out;
        }
    }
    ffi::PyObject_Vectorcall(full, args, nargs as usize, kwnames)
}

/// A [`FastMethod`] named `$name` for `$class`'s method `$method`: a call with exactly the
/// positional arguments `[$arg, ...]` answers `$body` (a `PyResult` of something Python takes),
/// any other goes to the pyo3 method.
macro_rules! fast_method {
    ($name:ident: $class:ty, $method:literal, |$this:ident, $py:ident, [$($arg:ident),*]| $body:expr) => {
        struct $name;
        impl $crate::fastcall::FastMethod for $name {
            type Class = $class;
            const NAME: &'static str = $method;
            fn full() -> &'static std::sync::atomic::AtomicPtr<pyo3::ffi::PyObject> {
                static FULL: std::sync::atomic::AtomicPtr<pyo3::ffi::PyObject> =
                    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
                &FULL
            }
            fn call<'py>(
                $this: &$class,
                $py: pyo3::Python<'py>,
                args: $crate::fastcall::Args<'_, 'py>,
            ) -> $crate::fastcall::Answer<'py> {
                use pyo3::IntoPyObjectExt;
                match args {
                    [$($arg),*] => Some($body.and_then(|out| out.into_bound_py_any($py))),
                    _ => None,
                }
            }
        }
    };
}
pub(crate) use fast_method;

/// A module function's vectorcall entry point, `$name::call`: `$body` answers its positional
/// call (`$args`), else the full function, kept in `$name::FULL`, takes the call; see
/// [`function`]. The body sees the items of the module the macro is used in.
macro_rules! fast_function {
    ($(#[$doc:meta])* $name:ident, |$py:ident, $args:ident| $body:expr) => {
        $(#[$doc])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            pub static FULL: std::sync::atomic::AtomicPtr<pyo3::ffi::PyObject> =
                std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

            pub unsafe extern "C" fn call(
                _module: *mut pyo3::ffi::PyObject,
                args: *const *mut pyo3::ffi::PyObject,
                nargs: pyo3::ffi::Py_ssize_t,
                kwnames: *mut pyo3::ffi::PyObject,
            ) -> *mut pyo3::ffi::PyObject {
                let full = FULL.load(std::sync::atomic::Ordering::Acquire);
                $crate::fastcall::function_call(full, args, nargs, kwnames, |$py, $args| $body)
            }
        }
    };
}
pub(crate) use fast_function;
