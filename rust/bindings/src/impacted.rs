use std::collections::BTreeMap;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::errors::Raise;
use pyo3::types::{PyMapping, PyTuple};

use super::buckets::PyHashRange;
use crate::conversions::consumer_arg;
use crate::conversions::type_name;
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

/// The consumers a change of hash-range assignments impacted (Pulsar's
/// `ImpactedConsumersResult`): per consumer id, the ranges it lost and the ranges it gained.
#[pyclass(
    name = "ImpactedConsumersResult",
    module = "keyshared._core",
    frozen,
    eq
)]
#[derive(PartialEq)]
pub struct PyImpactedConsumersResult(pub ImpactedConsumers);

/// A consumer id that is a real int (a bool is refused, not read as 0 or 1).
pub fn strict_consumer_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int, got bool"
        )));
    }
    consumer_arg(obj, what)
}

/// `{consumer_id: [HashRange, ...]}` from a mapping; `what` names the argument.
fn ranges_arg(
    obj: Option<&Bound<'_, PyAny>>,
    what: &str,
) -> PyResult<BTreeMap<u64, Vec<HashRange>>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(BTreeMap::new());
    };
    let mapping = obj.cast::<PyMapping>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a mapping of consumer id to hash ranges, got {}",
            type_name(obj)
        ))
    })?;
    let mut out: BTreeMap<u64, Vec<HashRange>> = BTreeMap::new();
    for item in mapping.items()?.iter() {
        let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let consumer = strict_consumer_arg(&key, &format!("{what} key"))?;
        let ranges = out.entry(consumer).or_default();
        for (i, r) in value.try_iter()?.enumerate() {
            let r = r?;
            let range = r.cast::<PyHashRange>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "{what}[{consumer}][{i}] must be a HashRange, got {}",
                    type_name(&r)
                ))
            })?;
            ranges.push(range.get().0);
        }
    }
    Ok(out)
}

/// Range assignments from a `{consumer_id: ranges}` snapshot, sorted and checked disjoint.
fn snapshot_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<(HashRange, u64)>> {
    let mut pairs: Vec<(HashRange, u64)> = ranges_arg(Some(obj), what)?
        .into_iter()
        .flat_map(|(c, ranges)| ranges.into_iter().map(move |r| (r, c)))
        .collect();
    pairs.sort();
    validate_assignments(&pairs, what).py()?;
    Ok(pairs)
}

#[pymethods]
impl PyImpactedConsumersResult {
    #[new]
    #[pyo3(signature = (removed_hash_ranges=None, added_hash_ranges=None))]
    fn new(
        removed_hash_ranges: Option<&Bound<'_, PyAny>>,
        added_hash_ranges: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let removed = ranges_arg(removed_hash_ranges, "removed_hash_ranges")?;
        let added = ranges_arg(added_hash_ranges, "added_hash_ranges")?;
        Ok(Self(ImpactedConsumers::from_ranges(removed, added)))
    }

    /// Per consumer id, the ranges it lost: sorted, adjacent ranges merged.
    #[getter]
    fn removed_hash_ranges(&self) -> PyRanges {
        py_ranges(&self.0.removed)
    }

    /// Per consumer id, the ranges it gained: sorted, adjacent ranges merged.
    #[getter]
    fn added_hash_ranges(&self) -> PyRanges {
        py_ranges(&self.0.added)
    }

    /// No consumer lost a range (gains alone leave it empty, as in Pulsar).
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

/// The hash ranges assigned to each consumer at one point in time (Pulsar's
/// `ConsumerHashAssignmentsSnapshot`): `(range, consumer_id)` pairs sorted by range, not
/// overlapping.
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
        let pairs = assignments_arg(hash_range_assignments)?;
        validate_assignments(&pairs, "hash_range_assignments").py()?;
        Ok(Self(pairs))
    }

    #[staticmethod]
    fn empty() -> Self {
        Self(Vec::new())
    }

    /// The `(range, consumer_id)` pairs, sorted by range.
    #[getter]
    fn hash_range_assignments(&self) -> Vec<(PyHashRange, u64)> {
        self.0.iter().map(|&(r, c)| (PyHashRange(r), c)).collect()
    }

    /// Each consumer's ranges, sorted, adjacent ranges merged; consumers by id.
    fn get_ranges_by_consumer(&self) -> PyRanges {
        ranges_dict(&self.0)
    }

    /// What changed from this snapshot to `assignments_after`, per consumer.
    fn resolve_impacted_consumers(
        &self,
        py: Python<'_>,
        assignments_after: &Self,
    ) -> PyImpactedConsumersResult {
        let result = py.detach(|| impacted_consumers(&self.0, &assignments_after.0));
        PyImpactedConsumersResult(result)
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

/// `(HashRange, consumer_id)` pairs from any iterable.
fn assignments_arg(obj: &Bound<'_, PyAny>) -> PyResult<Vec<(HashRange, u64)>> {
    let items = obj.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "hash_range_assignments must be an iterable of (HashRange, consumer id) pairs, \
             got {}",
            type_name(obj)
        ))
    })?;
    items
        .enumerate()
        .map(|(i, item)| {
            let item = item?;
            let what = format!("hash_range_assignments[{i}]");
            let bad = || {
                PyTypeError::new_err(format!(
                    "{what} must be a (HashRange, consumer id) pair, got {}",
                    type_name(&item)
                ))
            };
            let pair = item.cast::<PyTuple>().map_err(|_| bad())?;
            if pair.len() != 2 {
                return Err(bad());
            }
            let range: PyHashRange = pair.get_item(0)?.extract().map_err(|_| bad())?;
            let consumer = consumer_arg(&pair.get_item(1)?, &format!("{what}[1]"))?;
            Ok((range.0, consumer))
        })
        .collect()
}

/// The impacted consumers between two `{consumer_id: [HashRange, ...]}` snapshots (such as
/// `get_consumer_key_hash_ranges()` before and after a change).
#[pyfunction(name = "impacted_consumers")]
fn impacted_consumers_py(
    before: &Bound<'_, PyAny>,
    after: &Bound<'_, PyAny>,
) -> PyResult<PyImpactedConsumersResult> {
    let before = snapshot_arg(before, "before")?;
    let after = snapshot_arg(after, "after")?;
    Ok(PyImpactedConsumersResult(impacted_consumers(
        &before, &after,
    )))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyImpactedConsumersResult>()?;
    m.add_class::<PyConsumerHashAssignmentsSnapshot>()?;
    m.add_function(wrap_pyfunction!(impacted_consumers_py, m)?)
}
