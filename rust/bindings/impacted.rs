use std::collections::BTreeMap;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyMapping;

use super::args::type_name;
use super::buckets::PyHashRange;
use super::state_args::consumer_arg;
use crate::kernels::buckets::HashRange;
use crate::kernels::impacted::{check_assignments, impacted_consumers, ImpactedConsumers};

type RangesByConsumer = BTreeMap<u64, Vec<PyHashRange>>;

/// The consumers a selector change impacted (Pulsar's `ImpactedConsumersResult`): per
/// consumer id, the hash ranges it lost and the ranges it gained, each list sorted with
/// adjacent ranges merged.
#[pyclass(name = "ImpactedConsumersResult", module = "keyshared._core", frozen)]
pub struct PyImpactedConsumersResult(pub ImpactedConsumers);

fn to_python(ranges: &BTreeMap<u64, Vec<HashRange>>) -> RangesByConsumer {
    ranges
        .iter()
        .map(|(&c, r)| (c, r.iter().copied().map(PyHashRange).collect()))
        .collect()
}

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
fn assignments_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<(HashRange, u64)>> {
    let mut pairs: Vec<(HashRange, u64)> = ranges_arg(Some(obj), what)?
        .into_iter()
        .flat_map(|(c, ranges)| ranges.into_iter().map(move |r| (r, c)))
        .collect();
    pairs.sort();
    check_assignments(&pairs, what).map_err(|e| PyValueError::new_err(e.0))?;
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

    /// Per consumer id, the ranges it lost.
    #[getter]
    fn removed_hash_ranges(&self) -> RangesByConsumer {
        to_python(&self.0.removed)
    }

    /// Per consumer id, the ranges it gained.
    #[getter]
    fn added_hash_ranges(&self) -> RangesByConsumer {
        to_python(&self.0.added)
    }

    /// True when no consumer lost a range (Pulsar's `isEmpty`, which ignores gains).
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn __eq__(&self, other: &Bound<'_, Self>) -> bool {
        self.0 == other.get().0
    }

    fn __repr__(&self) -> String {
        let show = |m: &BTreeMap<u64, Vec<HashRange>>| {
            let items: Vec<String> = m
                .iter()
                .map(|(c, r)| {
                    let ranges: Vec<String> = r
                        .iter()
                        .map(|r| format!("HashRange({:#06x}, {:#06x})", r.start(), r.end()))
                        .collect();
                    format!("{c}: [{}]", ranges.join(", "))
                })
                .collect();
            format!("{{{}}}", items.join(", "))
        };
        format!(
            "ImpactedConsumersResult(removed_hash_ranges={}, added_hash_ranges={})",
            show(&self.0.removed),
            show(&self.0.added)
        )
    }
}

/// The impacted consumers between two `{consumer_id: [HashRange, ...]}` snapshots (such as
/// `get_consumer_key_hash_ranges()` before and after a change).
#[pyfunction(name = "impacted_consumers")]
fn impacted_consumers_py(
    before: &Bound<'_, PyAny>,
    after: &Bound<'_, PyAny>,
) -> PyResult<PyImpactedConsumersResult> {
    let before = assignments_arg(before, "before")?;
    let after = assignments_arg(after, "after")?;
    Ok(PyImpactedConsumersResult(impacted_consumers(
        &before, &after,
    )))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyImpactedConsumersResult>()?;
    m.add_function(wrap_pyfunction!(impacted_consumers_py, m)?)
}
