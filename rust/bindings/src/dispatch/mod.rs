//! The dispatchers (the kernels' `dispatch` module) and what they report.

mod core;
mod entry_bucket;
mod result;
mod sticky;

use pyo3::prelude::*;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "HoldReason",
        result::reasons(m.py())?.class.clone_ref(m.py()),
    )?;
    m.add_class::<result::PyDispatchResult>()?;
    m.add_class::<entry_bucket::PyEntryBucketDispatcher>()?;
    m.add_class::<sticky::PyStickyKeyDispatcher>()?;
    entry_bucket::install_fast_paths(m.py())?;
    sticky::install_fast_paths(m.py())
}
