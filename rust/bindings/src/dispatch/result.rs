//! What the dispatchers report: `HoldReason`, an `enum.Enum` made from the kernel's reasons,
//! and `DispatchResult`, built without running Python code per entry.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{IntoPyDict, PyTuple, PyType};
use strum::VariantArray;

use crate::conversions::{arg, opt_arg, type_name, ConsumerId, QueuedId, StickyKeyHash};
use crate::errors::{self, Raise};
use keyshared_kernels::dispatch::sticky::{Dispatched, HoldReason, ReadEntry};

/// The `HoldReason` class and its members, in the kernel's order.
pub struct Reasons {
    pub class: Py<PyType>,
    members: Vec<Py<PyAny>>,
}

static REASONS: PyOnceLock<Reasons> = PyOnceLock::new();

fn member_name(reason: HoldReason) -> String {
    <&str>::from(reason).to_uppercase()
}

pub fn reasons(py: Python<'_>) -> PyResult<&'static Reasons> {
    REASONS.get_or_try_init(py, || {
        let names: Vec<(String, &str)> = HoldReason::VARIANTS
            .iter()
            .map(|&r| (member_name(r), r.into()))
            .collect();
        let kwargs = [("module", "keyshared._core"), ("qualname", "HoldReason")];
        let class = py
            .import("enum")?
            .getattr("Enum")?
            .call(("HoldReason", names), Some(&kwargs.into_py_dict(py)?))?;
        class.setattr("__doc__", stub_doc!("HoldReason"))?;
        let members = HoldReason::VARIANTS
            .iter()
            .map(|&r| class.getattr(member_name(r)).map(Bound::unbind))
            .collect::<PyResult<_>>()?;
        Ok(Reasons {
            class: class.cast_into::<PyType>()?.unbind(),
            members,
        })
    })
}

/// A `HoldReason` member as the kernel's reason.
fn hold_reason(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<HoldReason> {
    let r = reasons(obj.py())?;
    r.members
        .iter()
        .position(|m| m.bind(obj.py()).is(obj))
        .map(|i| HoldReason::VARIANTS[i])
        .ok_or_else(|| {
            errors::wrong_type(format!(
                "{what} must be a HoldReason or None, got {}",
                type_name(obj)
            ))
        })
}

#[doc = stub_doc!("DispatchResult")]
#[pyclass(
    name = "DispatchResult",
    module = "keyshared._core",
    frozen,
    eq,
    hash,
    skip_from_py_object
)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyDispatchResult {
    #[doc = stub_doc!("DispatchResult.ledger_id")]
    #[pyo3(get)]
    ledger_id: i64,
    #[doc = stub_doc!("DispatchResult.entry_id")]
    #[pyo3(get)]
    entry_id: i64,
    #[doc = stub_doc!("DispatchResult.sticky_key_hash")]
    #[pyo3(get)]
    sticky_key_hash: u16,
    #[doc = stub_doc!("DispatchResult.consumer_id")]
    #[pyo3(get)]
    consumer_id: Option<u64>,
    held_for: Option<HoldReason>,
    #[doc = stub_doc!("DispatchResult.draining_consumer_id")]
    #[pyo3(get)]
    draining_consumer_id: Option<u64>,
    #[doc = stub_doc!("DispatchResult.queued_for_redelivery")]
    #[pyo3(get)]
    queued_for_redelivery: bool,
}

impl PyDispatchResult {
    pub fn of(entry: &ReadEntry, d: Dispatched) -> Self {
        Self {
            ledger_id: entry.position.0,
            entry_id: entry.position.1,
            sticky_key_hash: entry.sticky_key_hash,
            consumer_id: d.consumer,
            held_for: d.held,
            draining_consumer_id: d.draining,
            queued_for_redelivery: d.queued,
        }
    }
}

#[pymethods]
impl PyDispatchResult {
    #[new]
    #[pyo3(signature = (
        ledger_id, entry_id, sticky_key_hash, consumer_id,
        held=None, draining_consumer_id=None, queued_for_redelivery=false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
        sticky_key_hash: &Bound<'_, PyAny>,
        consumer_id: Option<&Bound<'_, PyAny>>,
        held: Option<&Bound<'_, PyAny>>,
        draining_consumer_id: Option<&Bound<'_, PyAny>>,
        queued_for_redelivery: bool,
    ) -> PyResult<Self> {
        let entry = ReadEntry {
            position: (
                arg::<QueuedId>(ledger_id, "ledger_id")?.0,
                arg::<QueuedId>(entry_id, "entry_id")?.0,
            ),
            sticky_key_hash: arg::<StickyKeyHash>(sticky_key_hash, "sticky_key_hash")?.0,
            batch_size: 0,
        };
        let dispatched = Dispatched {
            consumer: opt_arg::<ConsumerId>(consumer_id, "consumer_id")?.map(|c| c.0),
            held: match held.filter(|h| !h.is_none()) {
                Some(h) => Some(hold_reason(h, "held")?),
                None => None,
            },
            draining: opt_arg::<ConsumerId>(draining_consumer_id, "draining_consumer_id")?
                .map(|c| c.0),
            queued: queued_for_redelivery,
        };
        dispatched.check().py()?;
        Ok(Self::of(&entry, dispatched))
    }

    /// Pickled (and copied) as the constructor's arguments.
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyType>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let r = slf.get();
        let args = (
            r.ledger_id,
            r.entry_id,
            r.sticky_key_hash,
            r.consumer_id,
            r.held(py)?,
            r.draining_consumer_id,
            r.queued_for_redelivery,
        );
        Ok((slf.get_type(), args.into_pyobject(py)?))
    }

    #[doc = stub_doc!("DispatchResult.held")]
    #[getter]
    fn held(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let Some(reason) = self.held_for else {
            return Ok(None);
        };
        // Members are made in the order of the kernel's variants.
        Ok(Some(reasons(py)?.members[reason as usize].clone_ref(py)))
    }

    #[doc = stub_doc!("DispatchResult.delivered")]
    #[getter]
    fn delivered(&self) -> bool {
        self.held_for.is_none()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let shown = |v: Option<u64>| v.map_or_else(|| "None".to_owned(), |c| c.to_string());
        let held = match self.held(py)? {
            Some(h) => h.bind(py).repr()?.to_string(),
            None => "None".to_owned(),
        };
        Ok(format!(
            "DispatchResult(ledger_id={}, entry_id={}, sticky_key_hash={}, consumer_id={}, \
             held={held}, draining_consumer_id={}, queued_for_redelivery={})",
            self.ledger_id,
            self.entry_id,
            self.sticky_key_hash,
            shown(self.consumer_id),
            shown(self.draining_consumer_id),
            if self.queued_for_redelivery {
                "True"
            } else {
                "False"
            }
        ))
    }
}
