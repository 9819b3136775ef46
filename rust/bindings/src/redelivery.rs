use std::sync::Mutex;

use pyo3::prelude::*;

use crate::errors::Raise;

use super::draining::PyDrainingHashesTracker;
use crate::arrays::{I64s, RingHashes};
use crate::conversions::{
    arg, arg_or, opt_arg, queued_position, same_lengths, Callback, ConsumersByHash, Flag, Int,
    OptConsumerIds, Permits, RingHash, RingHashSet, Size,
};
use crate::state::{detached, lock, with_state};
use keyshared_kernels::redelivery::{
    available_permits, effective_look_ahead_limit, ConsumerPermits, Decision, LookAheadConfig,
    MessageRedeliveryController, Position,
};

#[doc = stub_doc!("MessageRedeliveryController")]
#[pyclass(
    name = "MessageRedeliveryController",
    module = "keyshared._core",
    frozen
)]
pub struct PyMessageRedeliveryController {
    pub(crate) state: Mutex<MessageRedeliveryController>,
}

type Decided = (&'static str, Option<u64>, Option<u64>);

fn decided(d: Decision) -> Decided {
    (d.into(), d.consumer(), d.draining())
}

impl PyMessageRedeliveryController {
    fn run<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut MessageRedeliveryController) -> R + Send,
    ) -> R {
        with_state(py, &self.state, f)
    }
}

#[pymethods]
impl PyMessageRedeliveryController {
    #[new]
    #[pyo3(
        signature = (allow_out_of_order_delivery=None),
        text_signature = "(allow_out_of_order_delivery=False)"
    )]
    fn new(allow_out_of_order_delivery: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let Flag(allow) = arg_or(
            allow_out_of_order_delivery,
            "allow_out_of_order_delivery",
            Flag(false),
        )?;
        Ok(Self {
            state: Mutex::new(MessageRedeliveryController::new(allow)),
        })
    }

    #[doc = stub_doc!("MessageRedeliveryController.allow_out_of_order_delivery")]
    #[getter]
    fn allow_out_of_order_delivery(&self, py: Python<'_>) -> bool {
        self.run(py, |c| c.allow_out_of_order_delivery())
    }

    #[doc = stub_doc!("MessageRedeliveryController.add")]
    #[pyo3(signature = (ledger_id, entry_id, sticky_key_hash=None))]
    fn add(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
        sticky_key_hash: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let position = queued_position(ledger_id, entry_id)?;
        let hash = opt_arg::<RingHash>(sticky_key_hash, "sticky_key_hash")?.map(|h| h.0);
        self.run(py, |c| c.add(position, hash)).py()
    }

    #[doc = stub_doc!("MessageRedeliveryController.remove")]
    fn remove(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let position = queued_position(ledger_id, entry_id)?;
        Ok(self.run(py, |c| c.remove(position)))
    }

    #[doc = stub_doc!("MessageRedeliveryController.remove_all_up_to")]
    fn remove_all_up_to(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<usize> {
        let mark = queued_position(ledger_id, entry_id)?;
        Ok(self.run(py, |c| c.remove_all_up_to(mark)))
    }

    #[doc = stub_doc!("MessageRedeliveryController.get_hash")]
    fn get_hash(
        &self,
        py: Python<'_>,
        ledger_id: &Bound<'_, PyAny>,
        entry_id: &Bound<'_, PyAny>,
    ) -> PyResult<Option<u16>> {
        let position = queued_position(ledger_id, entry_id)?;
        Ok(self.run(py, |c| c.get_hash(position)))
    }

    #[doc = stub_doc!("MessageRedeliveryController.contains_sticky_key_hash")]
    fn contains_sticky_key_hash(
        &self,
        py: Python<'_>,
        sticky_key_hash: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let RingHash(hash) = arg(sticky_key_hash, "sticky_key_hash")?;
        Ok(self.run(py, |c| c.contains_sticky_key_hash(hash)))
    }

    #[doc = stub_doc!("MessageRedeliveryController.contains_sticky_key_hashes")]
    fn contains_sticky_key_hashes(
        &self,
        py: Python<'_>,
        sticky_key_hashes: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let RingHashSet(hashes) = arg(sticky_key_hashes, "sticky_key_hashes")?;
        Ok(self.run(py, |c| c.contains_sticky_key_hashes(hashes)))
    }

    #[doc = stub_doc!("MessageRedeliveryController.get_first_position_in_replay")]
    fn get_first_position_in_replay(&self, py: Python<'_>) -> Option<Position> {
        self.run(py, |c| c.first_position())
    }

    #[doc = stub_doc!("MessageRedeliveryController.get_messages_to_replay_now")]
    #[pyo3(signature = (max_messages, filter=None))]
    fn get_messages_to_replay_now(
        &self,
        py: Python<'_>,
        max_messages: &Bound<'_, PyAny>,
        filter: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Position>> {
        let Size(max) = arg(max_messages, "max_messages")?;
        let Some(Callback(filter)) = opt_arg(filter, "filter")? else {
            return Ok(self.run(py, |c| c.messages_to_replay_now(max, |_, _| true)));
        };
        let queued: Vec<Position> = self.run(py, |c| c.iter().map(|(p, _)| p).collect());
        let mut out = Vec::new();
        for position in queued {
            if out.len() >= max {
                break;
            }
            if filter.bind(py).call1(position)?.is_truthy()? {
                out.push(position);
            }
        }
        Ok(out)
    }

    #[doc = stub_doc!("MessageRedeliveryController.is_empty")]
    fn is_empty(&self, py: Python<'_>) -> bool {
        self.run(py, |c| c.is_empty())
    }

    #[doc = stub_doc!("MessageRedeliveryController.size")]
    fn size(&self, py: Python<'_>) -> usize {
        self.run(py, |c| c.len())
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.size(py)
    }

    #[doc = stub_doc!("MessageRedeliveryController.clear")]
    fn clear(&self, py: Python<'_>) {
        self.run(py, MessageRedeliveryController::clear);
    }

    #[doc = stub_doc!("MessageRedeliveryController.to_list")]
    fn to_list(&self, py: Python<'_>) -> Vec<(i64, i64, Option<u16>)> {
        self.run(py, |c| {
            c.iter()
                .map(|((l, e), h)| (l, e, (h != 0).then_some(h)))
                .collect()
        })
    }

    #[doc = stub_doc!("MessageRedeliveryController.sticky_key_hashes")]
    fn sticky_key_hashes(&self, py: Python<'_>) -> Vec<u16> {
        self.run(py, |c| c.hashes())
    }

    #[doc = stub_doc!("MessageRedeliveryController.filter_read")]
    #[pyo3(signature = (ledger_ids, entry_ids, sticky_key_hashes, consumers, permits, replay=false, tracker=None))]
    #[allow(clippy::too_many_arguments)]
    fn filter_read(
        &self,
        py: Python<'_>,
        ledger_ids: &Bound<'_, PyAny>,
        entry_ids: &Bound<'_, PyAny>,
        sticky_key_hashes: &Bound<'_, PyAny>,
        consumers: &Bound<'_, PyAny>,
        permits: &Bound<'_, PyAny>,
        replay: bool,
        tracker: Option<&Bound<'_, PyDrainingHashesTracker>>,
    ) -> PyResult<Vec<Decided>> {
        let I64s(ledgers) = arg(ledger_ids, "ledger_ids")?;
        let I64s(entries) = arg(entry_ids, "entry_ids")?;
        let RingHashes(hashes) = arg(sticky_key_hashes, "sticky_key_hashes")?;
        let OptConsumerIds(chosen) = arg(consumers, "consumers")?;
        same_lengths(&[
            ("ledger_ids", ledgers.len()),
            ("entry_ids", entries.len()),
            ("sticky_key_hashes", hashes.len()),
            ("consumers", chosen.len()),
        ])?;
        let read: Vec<_> = ledgers.into_iter().zip(entries).zip(hashes).collect();
        let Permits(permits) = arg(permits, "permits")?;
        let tracker = tracker.map(Bound::get);
        let decisions = detached(py, &self.state, |c| {
            let mut guard = tracker.map(|t| lock(&t.state));
            let permits_of = |c: u64| permits.get(&c).copied().unwrap_or(0);
            c.filter_read(&read, &chosen, replay, permits_of, guard.as_deref_mut())
        })
        .py_in("entries")?;
        Ok(decisions.into_iter().map(decided).collect())
    }

    #[doc = stub_doc!("MessageRedeliveryController.replay_positions")]
    #[pyo3(signature = (max_messages, consumers, permits, tracker=None))]
    fn replay_positions(
        &self,
        py: Python<'_>,
        max_messages: &Bound<'_, PyAny>,
        consumers: &Bound<'_, PyAny>,
        permits: &Bound<'_, PyAny>,
        tracker: Option<&Bound<'_, PyDrainingHashesTracker>>,
    ) -> PyResult<Vec<Position>> {
        let Size(max) = arg(max_messages, "max_messages")?;
        let ConsumersByHash(by_hash) = arg(consumers, "consumers")?;
        let Permits(permits) = arg(permits, "permits")?;
        let tracker = tracker.map(Bound::get);
        Ok(detached(py, &self.state, |c| {
            let mut guard = tracker.map(|t| lock(&t.state));
            c.replay_positions(
                max,
                |h| by_hash.get(&h).copied().flatten(),
                |c| permits.get(&c).copied().unwrap_or(0),
                guard.as_deref_mut(),
            )
        }))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        self.run(py, |c| {
            format!(
                "MessageRedeliveryController(size={}, allow_out_of_order_delivery={})",
                c.len(),
                if c.allow_out_of_order_delivery() {
                    "True"
                } else {
                    "False"
                }
            )
        })
    }
}

/// An int setting that None (or absent) leaves at `default`.
fn setting(obj: Option<&Bound<'_, PyAny>>, what: &str, default: i64) -> PyResult<i64> {
    Ok(opt_arg::<Int>(obj, what)?.map_or(default, |v| v.0))
}

/// The look-ahead settings `(value, name)` in `LookAheadConfig`'s field order: per
/// consumer, per subscription, max unacked messages per consumer and per subscription.
/// A setting left None takes Pulsar's default.
pub(crate) fn look_ahead_config(
    settings: [(Option<&Bound<'_, PyAny>>, &str); 4],
) -> PyResult<LookAheadConfig> {
    let d = LookAheadConfig::default();
    let [c, s, mc, ms] = settings;
    Ok(LookAheadConfig {
        per_consumer: setting(c.0, c.1, d.per_consumer)?,
        per_subscription: setting(s.0, s.1, d.per_subscription)?,
        max_unacked_messages_per_consumer: setting(
            mc.0,
            mc.1,
            d.max_unacked_messages_per_consumer,
        )?,
        max_unacked_messages_per_subscription: setting(
            ms.0,
            ms.1,
            d.max_unacked_messages_per_subscription,
        )?,
    })
}

#[doc = stub_doc!("get_available_permits")]
#[pyfunction]
#[pyo3(signature = (available_permits, max_unacked_messages=None, unacked_messages=None, avg_messages_per_entry=None, active=true))]
fn get_available_permits(
    available_permits: &Bound<'_, PyAny>,
    max_unacked_messages: Option<&Bound<'_, PyAny>>,
    unacked_messages: Option<&Bound<'_, PyAny>>,
    avg_messages_per_entry: Option<&Bound<'_, PyAny>>,
    active: bool,
) -> PyResult<i64> {
    Ok(self::available_permits(ConsumerPermits {
        available_permits: arg::<Int>(available_permits, "available_permits")?.0,
        max_unacked_messages: setting(max_unacked_messages, "max_unacked_messages", 0)?,
        unacked_messages: setting(unacked_messages, "unacked_messages", 0)?,
        avg_messages_per_entry: setting(avg_messages_per_entry, "avg_messages_per_entry", 1)?,
        active,
    }))
}

#[doc = stub_doc!("get_effective_look_ahead_limit")]
#[pyfunction]
#[pyo3(signature = (consumer_count, per_consumer=None, per_subscription=None, max_unacked_messages_per_consumer=None, max_unacked_messages_per_subscription=None))]
fn get_effective_look_ahead_limit(
    consumer_count: &Bound<'_, PyAny>,
    per_consumer: Option<&Bound<'_, PyAny>>,
    per_subscription: Option<&Bound<'_, PyAny>>,
    max_unacked_messages_per_consumer: Option<&Bound<'_, PyAny>>,
    max_unacked_messages_per_subscription: Option<&Bound<'_, PyAny>>,
) -> PyResult<i64> {
    let config = look_ahead_config([
        (per_consumer, "per_consumer"),
        (per_subscription, "per_subscription"),
        (
            max_unacked_messages_per_consumer,
            "max_unacked_messages_per_consumer",
        ),
        (
            max_unacked_messages_per_subscription,
            "max_unacked_messages_per_subscription",
        ),
    ])?;
    let count = arg::<Size>(consumer_count, "consumer_count")?.0 as u64;
    Ok(effective_look_ahead_limit(config, count))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMessageRedeliveryController>()?;
    m.add_function(wrap_pyfunction!(get_available_permits, m)?)?;
    m.add_function(wrap_pyfunction!(get_effective_look_ahead_limit, m)?)
}
