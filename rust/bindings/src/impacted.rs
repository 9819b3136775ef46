use std::collections::BTreeMap;

use pyo3::prelude::*;

use crate::errors::Raise;

use crate::buckets::{Assignments, ConsumerRanges, PyHashRange, Snapshot};
use crate::conversions::{arg, instance, opt_arg};
use keyshared_kernels::buckets::HashRange;
use keyshared_kernels::impacted::{impacted_consumers, validate_assignments, ImpactedConsumers};
use keyshared_kernels::ring::ranges_by_consumer;

pub type PyRanges = BTreeMap<u64, Vec<PyHashRange>>;

fn py_ranges(ranges: &BTreeMap<u64, Vec<HashRange>>) -> PyRanges {
    ranges
        .iter()
        .map(|(&c, r)| (c, r.iter().copied().map(PyHashRange).collect()))
        .collect()
}

/// Each consumer's ranges in sorted assignments, merged, by consumer id.
pub fn ranges_dict(assignments: &[(HashRange, u64)]) -> PyRanges {
    py_ranges(&ranges_by_consumer(assignments).into_iter().collect())
}

fn ranges_repr(ranges: &BTreeMap<u64, Vec<HashRange>>) -> String {
    let items: Vec<String> = ranges
        .iter()
        .map(|(c, r)| format!("{c}: [{}]", hash_ranges_repr(r)))
        .collect();
    format!("{{{}}}", items.join(", "))
}

fn hash_ranges_repr(ranges: &[HashRange]) -> String {
    let items: Vec<String> = ranges
        .iter()
        .map(|r| format!("HashRange({:#06x}, {:#06x})", r.start(), r.end()))
        .collect();
    items.join(", ")
}

#[doc = stub_doc!("ImpactedConsumersResult")]
#[pyclass(
    name = "ImpactedConsumersResult",
    module = "keyshared._core",
    frozen,
    eq
)]
#[derive(PartialEq)]
pub struct PyImpactedConsumersResult(pub ImpactedConsumers);

#[pymethods]
impl PyImpactedConsumersResult {
    #[new]
    #[pyo3(signature = (removed_hash_ranges=None, added_hash_ranges=None))]
    fn new(
        removed_hash_ranges: Option<&Bound<'_, PyAny>>,
        added_hash_ranges: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let removed = opt_arg::<ConsumerRanges>(removed_hash_ranges, "removed_hash_ranges")?
            .map_or_else(BTreeMap::new, |r| r.0);
        let added = opt_arg::<ConsumerRanges>(added_hash_ranges, "added_hash_ranges")?
            .map_or_else(BTreeMap::new, |r| r.0);
        Ok(Self(ImpactedConsumers::from_ranges(removed, added)))
    }

    #[doc = stub_doc!("ImpactedConsumersResult.removed_hash_ranges")]
    #[getter]
    fn removed_hash_ranges(&self) -> PyRanges {
        py_ranges(&self.0.removed)
    }

    #[doc = stub_doc!("ImpactedConsumersResult.added_hash_ranges")]
    #[getter]
    fn added_hash_ranges(&self) -> PyRanges {
        py_ranges(&self.0.added)
    }

    #[doc = stub_doc!("ImpactedConsumersResult.is_empty")]
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn __repr__(&self) -> String {
        format!(
            "ImpactedConsumersResult(removed_hash_ranges={}, added_hash_ranges={})",
            ranges_repr(&self.0.removed),
            ranges_repr(&self.0.added)
        )
    }
}

#[doc = stub_doc!("ConsumerHashAssignmentsSnapshot")]
#[pyclass(
    name = "ConsumerHashAssignmentsSnapshot",
    module = "keyshared._core",
    frozen,
    eq
)]
#[derive(PartialEq)]
pub struct PyConsumerHashAssignmentsSnapshot(pub Vec<(HashRange, u64)>);

#[pymethods]
impl PyConsumerHashAssignmentsSnapshot {
    #[new]
    fn new(hash_range_assignments: &Bound<'_, PyAny>) -> PyResult<Self> {
        let Assignments(pairs) = arg(hash_range_assignments, "hash_range_assignments")?;
        validate_assignments(&pairs, "hash_range_assignments").py()?;
        Ok(Self(pairs))
    }

    #[doc = stub_doc!("ConsumerHashAssignmentsSnapshot.empty")]
    #[staticmethod]
    fn empty() -> Self {
        Self(Vec::new())
    }

    #[doc = stub_doc!("ConsumerHashAssignmentsSnapshot.hash_range_assignments")]
    #[getter]
    fn hash_range_assignments(&self) -> Vec<(PyHashRange, u64)> {
        self.0.iter().map(|&(r, c)| (PyHashRange(r), c)).collect()
    }

    #[doc = stub_doc!("ConsumerHashAssignmentsSnapshot.get_ranges_by_consumer")]
    fn get_ranges_by_consumer(&self) -> PyRanges {
        ranges_dict(&self.0)
    }

    #[doc = stub_doc!("ConsumerHashAssignmentsSnapshot.resolve_impacted_consumers")]
    fn resolve_impacted_consumers(
        &self,
        py: Python<'_>,
        assignments_after: &Bound<'_, PyAny>,
    ) -> PyResult<PyImpactedConsumersResult> {
        let after = instance::<Self>(assignments_after, "assignments_after")?.get();
        let result = py.detach(|| impacted_consumers(&self.0, &after.0));
        Ok(PyImpactedConsumersResult(result))
    }

    fn __len__(&self) -> usize {
        self.0.len()
    }

    fn __repr__(&self) -> String {
        let items: Vec<String> = self
            .0
            .iter()
            .map(|(r, c)| format!("(HashRange({:#06x}, {:#06x}), {c})", r.start(), r.end()))
            .collect();
        format!("ConsumerHashAssignmentsSnapshot([{}])", items.join(", "))
    }
}

#[doc = stub_doc!("impacted_consumers")]
#[pyfunction(name = "impacted_consumers")]
fn impacted_consumers_py(
    before: &Bound<'_, PyAny>,
    after: &Bound<'_, PyAny>,
) -> PyResult<PyImpactedConsumersResult> {
    let Snapshot(before) = arg(before, "before")?;
    let Snapshot(after) = arg(after, "after")?;
    Ok(PyImpactedConsumersResult(impacted_consumers(
        &before, &after,
    )))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyImpactedConsumersResult>()?;
    m.add_class::<PyConsumerHashAssignmentsSnapshot>()?;
    m.add_function(wrap_pyfunction!(impacted_consumers_py, m)?)
}
