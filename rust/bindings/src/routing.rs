use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors::Raise;

use super::hashing::{hash_arrays, hash_keys};
use crate::arrays::U32s;
use crate::buckets::{PyHashRange, SegmentRoutes};
use crate::conversions::{
    arg, arg_or, key_bytes, numpy, KeyHash, RingHash, ScalableRelease, Size, Threads,
};
use keyshared_kernels::hashing::key_hash;
use keyshared_kernels::routing::{hash_halves, RoutingTable as Table};

#[doc = stub_doc!("RoutingTable")]
#[pyclass(name = "RoutingTable", module = "keyshared._core", frozen, eq)]
#[derive(PartialEq)]
pub struct PyRoutingTable {
    table: Table,
    pulsar_version: String,
}

#[pymethods]
impl PyRoutingTable {
    #[new]
    #[pyo3(signature = (segments, pulsar_version=None))]
    fn new(
        segments: &Bound<'_, PyAny>,
        pulsar_version: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let release = arg_or(pulsar_version, "pulsar_version", ScalableRelease::master())?;
        let SegmentRoutes(routes) = arg(segments, "segments")?;
        Ok(Self {
            table: Table::new(routes, release.half).py()?,
            pulsar_version: release.name,
        })
    }

    #[doc = stub_doc!("RoutingTable.replaced")]
    fn replaced(
        &self,
        start: &Bound<'_, PyAny>,
        count: &Bound<'_, PyAny>,
        segments: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let RingHash(start) = arg(start, "start")?;
        let Size(count) = arg(count, "count")?;
        let SegmentRoutes(routes) = arg(segments, "segments")?;
        Ok(Self {
            table: self.table.replaced(start, count, routes).py()?,
            pulsar_version: self.pulsar_version.clone(),
        })
    }

    #[doc = stub_doc!("RoutingTable.pulsar_version")]
    #[getter]
    fn pulsar_version(&self) -> &str {
        &self.pulsar_version
    }

    #[doc = stub_doc!("RoutingTable.segments")]
    #[getter]
    fn segments(&self) -> Vec<(u64, PyHashRange, Vec<u16>)> {
        self.table
            .segments()
            .iter()
            .map(|s| (s.segment_id, PyHashRange(s.range), s.splits.clone()))
            .collect()
    }

    fn __len__(&self) -> usize {
        self.table.segments().len()
    }

    /// Pickles as its segments and release, so a table crosses to Spark executors (or any
    /// process) whole.
    fn __getnewargs__(&self) -> (Vec<(u64, PyHashRange, Vec<u16>)>, String) {
        (self.segments(), self.pulsar_version.clone())
    }

    #[doc = stub_doc!("RoutingTable.route")]
    fn route(&self, key: &Bound<'_, PyAny>) -> PyResult<(u64, u32)> {
        Ok(self.table.route(key_hash(key_bytes(key, "key")?)))
    }

    #[doc = stub_doc!("RoutingTable.route_hash")]
    fn route_hash(&self, key_hash: &Bound<'_, PyAny>) -> PyResult<(u64, u32)> {
        let KeyHash(h) = arg(key_hash, "key_hash")?;
        Ok(self.table.route(h))
    }

    #[doc = stub_doc!("RoutingTable.route_keys")]
    #[pyo3(signature = (keys, *, null_key=None, threads=None, with_hashes=false))]
    fn route_keys<'py>(
        &self,
        keys: &Bound<'py, PyAny>,
        null_key: Option<&Bound<'py, PyAny>>,
        threads: Option<&Bound<'_, PyAny>>,
        with_hashes: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let py = keys.py();
        if !with_hashes {
            let routes = hash_arrays(keys, null_key, threads, |h| self.table.route_signed(h))?;
            return routes.into_pyobject(py);
        }
        let n = Threads::or_default(threads)?;
        let hashes = hash_keys(
            keys,
            null_key,
            threads,
            |h| (h, ()),
            <[u32]>::to_vec,
            |hashes, _| hashes,
        )?;
        let ((ids, buckets), (high, low)) =
            py.detach(|| (self.table.route_hashes(&hashes, n), hash_halves(&hashes, n)));
        (
            numpy(py, ids),
            numpy(py, buckets),
            numpy(py, hashes),
            numpy(py, high),
            numpy(py, low),
        )
            .into_pyobject(py)
    }

    #[doc = stub_doc!("RoutingTable.route_hashes")]
    #[pyo3(signature = (key_hashes, *, threads=None))]
    #[allow(clippy::type_complexity)]
    fn route_hashes<'py>(
        &self,
        key_hashes: &Bound<'py, PyAny>,
        threads: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i32>>)> {
        let threads = Threads::or_default(threads)?;
        let U32s(hashes) = arg(key_hashes, "key_hashes")?;
        let py = key_hashes.py();
        let (ids, buckets) = py.detach(|| self.table.route_hashes(&hashes, threads));
        Ok((numpy(py, ids), numpy(py, buckets)))
    }

    #[doc = stub_doc!("RoutingTable.bucket_count")]
    #[getter]
    fn bucket_count(&self) -> u64 {
        self.table.bucket_count()
    }

    #[doc = stub_doc!("RoutingTable.bucket_counts")]
    #[getter]
    fn bucket_counts(&self) -> Vec<u32> {
        self.table.bucket_counts().collect()
    }

    #[doc = stub_doc!("RoutingTable.bucket_ordinals")]
    #[pyo3(signature = (key_hashes, *, threads=None))]
    fn bucket_ordinals<'py>(
        &self,
        key_hashes: &Bound<'py, PyAny>,
        threads: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let threads = Threads::or_default(threads)?;
        let U32s(hashes) = arg(key_hashes, "key_hashes")?;
        let py = key_hashes.py();
        let ordinals = py.detach(|| self.table.bucket_ordinals(&hashes, threads));
        Ok(numpy(py, ordinals))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRoutingTable>()
}
