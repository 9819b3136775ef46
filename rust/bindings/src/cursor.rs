use std::collections::BTreeMap;
use std::sync::Mutex;

use pyo3::prelude::*;

use crate::errors::Raise;
use pyo3::types::PyTuple;

use crate::arrays::{Offsets, SegmentIds, U32s};
use crate::conversions::{arg, same_lengths, segment_bucket, Offset};
use crate::state::{detached, with_state};
use keyshared_kernels::cursor::{BucketCheckpoints, SafeCursor};

#[doc = stub_doc!("SafeCursor")]
#[pyclass(name = "SafeCursor", module = "keyshared._core", frozen)]
pub struct PySafeCursor {
    state: Mutex<SafeCursor>,
}

#[pymethods]
impl PySafeCursor {
    #[new]
    fn new(first_offset: &Bound<'_, PyAny>) -> PyResult<Self> {
        let Offset(first) = arg(first_offset, "first_offset")?;
        Ok(Self {
            state: Mutex::new(SafeCursor::new(first).py()?),
        })
    }

    #[doc = stub_doc!("SafeCursor.first_offset")]
    #[getter]
    fn first_offset(&self, py: Python<'_>) -> u64 {
        with_state(py, &self.state, |c| c.first_offset())
    }

    #[doc = stub_doc!("SafeCursor.position")]
    #[getter]
    fn position(&self, py: Python<'_>) -> Option<u64> {
        with_state(py, &self.state, |c| c.position())
    }

    #[doc = stub_doc!("SafeCursor.pending")]
    #[getter]
    fn pending(&self, py: Python<'_>) -> usize {
        with_state(py, &self.state, |c| c.pending())
    }

    #[doc = stub_doc!("SafeCursor.ack")]
    fn ack(&self, py: Python<'_>, offset: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let Offset(offset) = arg(offset, "offset")?;
        with_state(py, &self.state, |c| c.ack(offset)).py()
    }

    #[doc = stub_doc!("SafeCursor.skip")]
    fn skip(&self, py: Python<'_>, offset: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        self.ack(py, offset)
    }

    #[doc = stub_doc!("SafeCursor.ack_many")]
    fn ack_many(&self, py: Python<'_>, offsets: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let Offsets(offsets) = arg(offsets, "offsets")?;
        detached(py, &self.state, |c| c.ack_many(&offsets)).py()
    }

    #[doc = stub_doc!("SafeCursor.is_done")]
    fn is_done(&self, py: Python<'_>, offset: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Offset(offset) = arg(offset, "offset")?;
        Ok(with_state(py, &self.state, |c| c.is_done(offset)))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let (first, position) = with_state(py, &self.state, |c| (c.first_offset(), c.position()));
        let position = position.map_or("None".to_owned(), |p| p.to_string());
        format!("SafeCursor(first_offset={first}, position={position})")
    }
}

#[doc = stub_doc!("BucketCheckpoints")]
#[pyclass(name = "BucketCheckpoints", module = "keyshared._core", frozen)]
pub struct PyBucketCheckpoints {
    state: Mutex<BucketCheckpoints>,
}

#[pymethods]
impl PyBucketCheckpoints {
    #[new]
    fn new() -> Self {
        Self {
            state: Mutex::new(BucketCheckpoints::new()),
        }
    }

    #[doc = stub_doc!("BucketCheckpoints.open")]
    fn open(
        &self,
        py: Python<'_>,
        segment_id: &Bound<'_, PyAny>,
        bucket: &Bound<'_, PyAny>,
        first_offset: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (segment, bucket) = segment_bucket(segment_id, bucket)?;
        let Offset(first) = arg(first_offset, "first_offset")?;
        with_state(py, &self.state, |cp| cp.open(segment, bucket, first)).py()
    }

    #[doc = stub_doc!("BucketCheckpoints.close")]
    fn close(
        &self,
        py: Python<'_>,
        segment_id: &Bound<'_, PyAny>,
        bucket: &Bound<'_, PyAny>,
    ) -> PyResult<Option<u64>> {
        let (segment, bucket) = segment_bucket(segment_id, bucket)?;
        with_state(py, &self.state, |cp| cp.close(segment, bucket)).py()
    }

    #[doc = stub_doc!("BucketCheckpoints.ack")]
    fn ack(
        &self,
        py: Python<'_>,
        segment_id: &Bound<'_, PyAny>,
        bucket: &Bound<'_, PyAny>,
        offset: &Bound<'_, PyAny>,
    ) -> PyResult<Option<u64>> {
        let (segment, bucket) = segment_bucket(segment_id, bucket)?;
        let Offset(offset) = arg(offset, "offset")?;
        with_state(py, &self.state, |cp| cp.ack(segment, bucket, offset)).py()
    }

    #[doc = stub_doc!("BucketCheckpoints.skip")]
    fn skip(
        &self,
        py: Python<'_>,
        segment_id: &Bound<'_, PyAny>,
        bucket: &Bound<'_, PyAny>,
        offset: &Bound<'_, PyAny>,
    ) -> PyResult<Option<u64>> {
        self.ack(py, segment_id, bucket, offset)
    }

    #[doc = stub_doc!("BucketCheckpoints.ack_many")]
    fn ack_many<'py>(
        &self,
        py: Python<'py>,
        segment_ids: &Bound<'py, PyAny>,
        buckets: &Bound<'py, PyAny>,
        offsets: &Bound<'py, PyAny>,
    ) -> PyResult<BTreeMap<(u64, u32), u64>> {
        let SegmentIds(segments) = arg(segment_ids, "segment_ids")?;
        let U32s(buckets) = arg(buckets, "buckets")?;
        let Offsets(offsets) = arg(offsets, "offsets")?;
        same_lengths(&[
            ("segment_ids", segments.len()),
            ("buckets", buckets.len()),
            ("offsets", offsets.len()),
        ])?;
        let moved = detached(py, &self.state, |cp| {
            cp.ack_many(&segments, &buckets, &offsets)
        })
        .py()?;
        Ok(moved.into_iter().collect())
    }

    #[doc = stub_doc!("BucketCheckpoints.position")]
    fn position(
        &self,
        py: Python<'_>,
        segment_id: &Bound<'_, PyAny>,
        bucket: &Bound<'_, PyAny>,
    ) -> PyResult<Option<u64>> {
        let (segment, bucket) = segment_bucket(segment_id, bucket)?;
        with_state(py, &self.state, |cp| {
            cp.cursor(segment, bucket).map(SafeCursor::position)
        })
        .py()
    }

    #[doc = stub_doc!("BucketCheckpoints.positions")]
    fn positions(&self, py: Python<'_>) -> BTreeMap<(u64, u32), Option<u64>> {
        with_state(py, &self.state, |cp| cp.positions())
            .into_iter()
            .collect()
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        with_state(py, &self.state, |cp| cp.len())
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(pair) = key.cast::<PyTuple>() else {
            return Ok(false);
        };
        if pair.len() != 2 {
            return Ok(false);
        }
        // Like a dict, a key of the wrong type is simply not there.
        let Ok((segment, bucket)) = segment_bucket(&pair.get_item(0)?, &pair.get_item(1)?) else {
            return Ok(false);
        };
        Ok(with_state(py, &self.state, |cp| {
            cp.cursor(segment, bucket).is_ok()
        }))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("BucketCheckpoints(open={})", self.__len__(py))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySafeCursor>()?;
    m.add_class::<PyBucketCheckpoints>()?;
    Ok(())
}
