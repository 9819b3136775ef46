//! The short result arrays of the key-hash calls, kept for reuse once their caller lets go.
//!
//! A fresh one-element NumPy array costs more than hashing a key: NumPy looks up its memory
//! handler (a context variable and a capsule) on every allocation and every free. A loop that
//! hashes one key a call and reads the answer drops each array before its next call, so the
//! last array made is kept here and handed out again when nothing else holds it and it is
//! still exactly as it was made (as CPython's free lists do for its own small objects).
//! Anything that could see the reuse (a view, a memoryview, a weak reference, an array
//! reshaped, retyped or made read-only) keeps a reference or changes a field checked here,
//! and a new array is made instead.

use std::any::TypeId;
use std::sync::{Mutex, MutexGuard};

use numpy::npyffi::PyArrayObject;
use numpy::{Element, PyArray1};
use pyo3::ffi;
use pyo3::prelude::*;

/// The last short array made, and what it was made as.
struct Spare {
    array: Py<PyAny>,
    element: TypeId,
    made: Fields,
}

/// The fields of an array a caller could change while holding it.
#[derive(PartialEq, Eq, Clone, Copy)]
struct Fields {
    class: usize,
    data: usize,
    descr: usize,
    flags: i32,
    nd: i32,
    len: isize,
    stride: isize,
    base: usize,
    weakrefs: usize,
}

impl Fields {
    /// # Safety
    /// `obj` is a live NumPy array and the GIL is held.
    unsafe fn of(obj: *mut ffi::PyObject) -> Self {
        let a = obj.cast::<PyArrayObject>();
        Fields {
            class: ffi::Py_TYPE(obj) as usize,
            data: (*a).data as usize,
            descr: (*a).descr as usize,
            flags: (*a).flags,
            nd: (*a).nd,
            // A caller may have reshaped it: the shape is read only while it has one dimension.
            len: if (*a).nd == 1 { *(*a).dimensions } else { -1 },
            stride: if (*a).nd == 1 { *(*a).strides } else { -1 },
            base: (*a).base as usize,
            weakrefs: (*a).weakreflist as usize,
        }
    }
}

static SPARE: Mutex<Option<Spare>> = Mutex::new(None);

/// An array of `len` `T`s to be written before it is handed out: the spare one if nothing
/// else holds it and it is still a `len`-long array of `T` exactly as it was made (same
/// class, data, dtype, flags, shape and strides, no base, no weak reference), else a new one,
/// which becomes the spare.
///
/// # Safety
/// Its elements are uninitialized or stale: the caller writes every one before the array
/// reaches Python. The GIL is held.
pub unsafe fn array<T: Element + 'static>(py: Python<'_>, len: usize) -> Bound<'_, PyArray1<T>> {
    let fits = |s: &Spare| {
        let obj = s.array.as_ptr();
        s.element == TypeId::of::<T>()
            && s.made.len == len as isize
            && ffi::Py_REFCNT(obj) == 1
            && Fields::of(obj) == s.made
    };
    if let Some(s) = spare().as_ref().filter(|s| fits(s)) {
        return s.array.bind(py).clone().cast_into_unchecked();
    }
    // Made unlocked: making an array may collect garbage, which may run Python code.
    let array = PyArray1::<T>::new(py, len, false);
    let made = Spare {
        array: array.clone().into_any().unbind(),
        element: TypeId::of::<T>(),
        made: Fields::of(array.as_ptr()),
    };
    let old = spare().replace(made);
    // Let go of now (a `Py` dropped on a fast path's thread would wait for pyo3's pool) and
    // unlocked, as freeing it is the allocator's work too.
    drop(old.map(|s| s.array.into_bound(py)));
    array
}

fn spare() -> MutexGuard<'static, Option<Spare>> {
    SPARE.lock().unwrap_or_else(|e| e.into_inner())
}
