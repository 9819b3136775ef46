use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::{PyTraverseError, PyVisit};

use super::core::{dispatcher_methods, install_shared_fast_paths, Core};
use crate::arrays::{BatchSizes, I64s, RingHashes};
use crate::buckets::BucketBoundaries;
use crate::conversions::{arg, opt_arg, position, route, same_lengths, BatchSize, Splits};
use crate::draining::PyDrainingHashesTracker;
use crate::entry_bucket::PyEntryBucketSelector;
use crate::errors::Raise;
use keyshared_kernels::dispatch::entry_bucket::{
    withheld_buckets, Entry, EntryBucketDispatcher, Route,
};
use keyshared_kernels::dispatch::NoQueue;
use keyshared_kernels::entry_bucket::EntryBucketSelector;

/// The binding core over the kernel and an entry-bucket selector, without a queue.
type Buckets = Core<EntryBucketDispatcher, PyEntryBucketSelector, NoQueue>;

#[doc = stub_doc!("EntryBucketDispatcher")]
#[pyclass(name = "EntryBucketDispatcher", module = "keyshared._core", frozen)]
pub struct PyEntryBucketDispatcher {
    core: Buckets,
}

impl PyEntryBucketDispatcher {
    fn build(
        py: Python<'_>,
        selector: EntryBucketSelector,
        unblocking_handler: Option<Bound<'_, PyAny>>,
        dispatcher_name: String,
    ) -> PyResult<Self> {
        let core = Core::new(
            py,
            "EntryBucketDispatcher",
            EntryBucketDispatcher,
            selector,
            NoQueue,
            unblocking_handler,
            dispatcher_name,
        )?;
        Ok(Self { core })
    }
}

dispatcher_methods!(PyEntryBucketDispatcher, "EntryBucketDispatcher", {
    #[new]
    #[pyo3(
        signature = (bucket_splits=None, *, unblocking_handler=None, dispatcher_name=String::new()),
        text_signature = "(bucket_splits=None, *, unblocking_handler=None, dispatcher_name='')"
    )]
    fn new(
        py: Python<'_>,
        bucket_splits: Option<&Bound<'_, PyAny>>,
        unblocking_handler: Option<Bound<'_, PyAny>>,
        dispatcher_name: String,
    ) -> PyResult<Self> {
        let splits = opt_arg::<Splits>(bucket_splits, "bucket_splits")?;
        let selector = EntryBucketSelector::new(&splits.map_or_else(Vec::new, |s| s.0));
        Self::build(py, selector, unblocking_handler, dispatcher_name)
    }

    #[staticmethod]
    #[pyo3(
        signature = (ranges, *, unblocking_handler=None, dispatcher_name=String::new()),
        text_signature = "(ranges, *, unblocking_handler=None, dispatcher_name='')"
    )]
    #[doc = stub_doc!("EntryBucketDispatcher.from_bucket_ranges")]
    fn from_bucket_ranges(
        py: Python<'_>,
        ranges: &Bound<'_, PyAny>,
        unblocking_handler: Option<Bound<'_, PyAny>>,
        dispatcher_name: String,
    ) -> PyResult<Self> {
        let BucketBoundaries(ranges) = arg(ranges, "ranges")?;
        let selector = EntryBucketSelector::from_bucket_ranges(&ranges);
        Self::build(py, selector, unblocking_handler, dispatcher_name)
    }

    #[doc = stub_doc!("EntryBucketDispatcher.selector")]
    #[getter]
    fn selector(&self, py: Python<'_>) -> Py<PyEntryBucketSelector> {
        self.core.selector.clone_ref(py)
    }

    #[doc = stub_doc!("EntryBucketDispatcher.tracker")]
    #[getter]
    fn tracker(&self, py: Python<'_>) -> Py<PyDrainingHashesTracker> {
        self.core.tracker.clone_ref(py)
    }

    #[doc = stub_doc!("EntryBucketDispatcher.sticky_key_hash")]
    #[pyo3(signature = (entry_hash_min=None, key=None))]
    fn sticky_key_hash(
        &self,
        py: Python<'_>,
        entry_hash_min: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u16> {
        let route = route(entry_hash_min, key)?;
        Ok(self.core.with_selector(py, |s| route.sticky_key_hash(s)))
    }

    #[pyo3(
        signature = (ledger_id, entry_id, *, entry_hash_min=None, key=None, batch_size=None),
        text_signature = "($self, ledger_id, entry_id, *, entry_hash_min=None, key=None, batch_size=1)"
    )]
    #[doc = stub_doc!("EntryBucketDispatcher.dispatch")]
    fn dispatch(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
        entry_hash_min: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
        batch_size: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<u64>> {
        let (ledger_id, entry_id) = position(ledger_id, entry_id)?;
        let entry = Entry {
            ledger_id,
            entry_id,
            batch_size: opt_arg::<BatchSize>(batch_size, "batch_size")?.map_or(1, |b| b.0),
            route: route(entry_hash_min, key)?,
        };
        let pick = |selector: &_| {
            let routed = EntryBucketDispatcher::route(selector, entry);
            (routed.map(|r| r.consumer), routed)
        };
        self.core
            .run_picked(py, pick, |d, parts, routed| match routed {
                Some(routed) => d.dispatch_routed(parts, routed),
                None => Ok(None),
            })
            .py()
    }

    #[doc = stub_doc!("EntryBucketDispatcher.dispatch_many")]
    #[pyo3(signature = (ledger_ids, entry_ids, entry_hash_mins, batch_sizes=None))]
    fn dispatch_many<'py>(
        &self,
        py: Python<'py>,
        ledger_ids: &Bound<'py, PyAny>,
        entry_ids: &Bound<'py, PyAny>,
        entry_hash_mins: &Bound<'py, PyAny>,
        batch_sizes: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let I64s(ledgers) = arg(ledger_ids, "ledger_ids")?;
        let I64s(entries) = arg(entry_ids, "entry_ids")?;
        let RingHashes(mins) = arg(entry_hash_mins, "entry_hash_mins")?;
        let sizes = opt_arg::<BatchSizes>(batch_sizes, "batch_sizes")?.map(|b| b.0);
        same_lengths(&[
            ("ledger_ids", ledgers.len()),
            ("entry_ids", entries.len()),
            ("entry_hash_mins", mins.len()),
            ("batch_sizes", sizes.as_ref().map_or(mins.len(), Vec::len)),
        ])?;
        let sizes = sizes.as_deref();
        let batch = (0..mins.len()).map(|i| Entry {
            ledger_id: ledgers[i],
            entry_id: entries[i],
            batch_size: sizes.map_or(1, |s| s[i]),
            route: Route::Stamped(mins[i]),
        });
        let (consumers, sent) = self
            .core
            .run(py, |d, parts| d.dispatch_many(parts, batch))
            .py_in("entry_ids")?;
        PyTuple::new(
            py,
            [
                PyArray1::from_vec(py, consumers).into_any(),
                PyArray1::from_vec(py, sent).into_any(),
            ],
        )
    }

    #[doc = stub_doc!("EntryBucketDispatcher.withheld_buckets")]
    fn withheld_buckets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let withheld = self.core.run(py, |_, parts| {
            withheld_buckets(parts.selector, parts.tracker)
        });
        PyTuple::new(py, withheld)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.core.traverse(&visit)
    }

    fn __clear__(&self) {
        self.core.clear();
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let buckets = self.core.with_selector(py, |s| s.bucket_count());
        let consumers = self.core.consumer_count();
        format!("EntryBucketDispatcher(buckets={buckets}, consumers={consumers})")
    }
});

/// Puts the `fastcall` entry points in front of `select` and `ack`.
pub(super) fn install_fast_paths(py: Python<'_>) -> PyResult<()> {
    install_shared_fast_paths!(PyEntryBucketDispatcher, py)
}
