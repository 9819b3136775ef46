use std::collections::HashSet;
use std::sync::Mutex;

use pyo3::prelude::*;

use crate::conversions::{
    arg, arg_or, instance, named, ConsumerId, ConsumerSet, Count, Millis, Offset, Text,
};
use crate::errors::Raise;
use crate::rings::PyKeySharedConsumerState;
use crate::routing_key::routing_key_object;
use crate::state::{lock, with_state};
use keyshared_kernels::routing_key::RoutingKey;
use keyshared_kernels::window::{
    Action, BackoffStrategy, FailurePolicy, InFlightEntry, InFlightWindow, PoisonPolicy,
    WindowLimits,
};

#[doc = stub_doc!("SubscriptionFailurePolicy")]
#[pyclass(
    name = "SubscriptionFailurePolicy",
    module = "keyshared._core",
    frozen,
    eq,
    from_py_object
)]
#[derive(Clone, PartialEq)]
pub struct PyFailurePolicy {
    policy: FailurePolicy,
    dead_letter_topic: Option<String>,
}

#[pymethods]
impl PyFailurePolicy {
    #[new]
    #[pyo3(signature = (
        max_redelivery_count=None,
        ack_timeout_ms=None,
        base_redelivery_delay_ms=None,
        max_redelivery_delay_ms=None,
        backoff_strategy="exponential",
        poison_policy="block",
        dead_letter_topic=None,
    ), text_signature = "(max_redelivery_count=5, ack_timeout_ms=30000, \
        base_redelivery_delay_ms=1000, max_redelivery_delay_ms=60000, \
        backoff_strategy='exponential', poison_policy='block', dead_letter_topic=None)")]
    fn new(
        max_redelivery_count: Option<&Bound<'_, PyAny>>,
        ack_timeout_ms: Option<&Bound<'_, PyAny>>,
        base_redelivery_delay_ms: Option<&Bound<'_, PyAny>>,
        max_redelivery_delay_ms: Option<&Bound<'_, PyAny>>,
        backoff_strategy: &str,
        poison_policy: &str,
        dead_letter_topic: Option<String>,
    ) -> PyResult<Self> {
        let d = FailurePolicy::default();
        let millis = |obj, what, default| arg_or(obj, what, Millis(default)).map(|v| v.0);
        let backoff_strategy: BackoffStrategy = named("backoff_strategy", backoff_strategy)?;
        let poison_policy = match named("poison_policy", poison_policy)? {
            PoisonPolicy::DeadLetter(_) => {
                PoisonPolicy::DeadLetter(dead_letter_topic.clone().unwrap_or_default())
            }
            other => other,
        };
        let policy = FailurePolicy {
            max_redelivery_count: arg_or(
                max_redelivery_count,
                "max_redelivery_count",
                Count(d.max_redelivery_count),
            )?
            .0,
            ack_timeout_ms: millis(ack_timeout_ms, "ack_timeout_ms", d.ack_timeout_ms)?,
            base_redelivery_delay_ms: millis(
                base_redelivery_delay_ms,
                "base_redelivery_delay_ms",
                d.base_redelivery_delay_ms,
            )?,
            max_redelivery_delay_ms: millis(
                max_redelivery_delay_ms,
                "max_redelivery_delay_ms",
                d.max_redelivery_delay_ms,
            )?,
            backoff_strategy,
            poison_policy,
        };
        Ok(Self {
            policy: policy.validate().py()?,
            dead_letter_topic,
        })
    }

    #[doc = stub_doc!("SubscriptionFailurePolicy.max_redelivery_count")]
    #[getter]
    fn max_redelivery_count(&self) -> u32 {
        self.policy.max_redelivery_count
    }

    #[doc = stub_doc!("SubscriptionFailurePolicy.ack_timeout_ms")]
    #[getter]
    fn ack_timeout_ms(&self) -> u64 {
        self.policy.ack_timeout_ms
    }

    #[doc = stub_doc!("SubscriptionFailurePolicy.base_redelivery_delay_ms")]
    #[getter]
    fn base_redelivery_delay_ms(&self) -> u64 {
        self.policy.base_redelivery_delay_ms
    }

    #[doc = stub_doc!("SubscriptionFailurePolicy.max_redelivery_delay_ms")]
    #[getter]
    fn max_redelivery_delay_ms(&self) -> u64 {
        self.policy.max_redelivery_delay_ms
    }

    #[doc = stub_doc!("SubscriptionFailurePolicy.backoff_strategy")]
    #[getter]
    fn backoff_strategy(&self) -> &'static str {
        self.policy.backoff_strategy.into()
    }

    #[doc = stub_doc!("SubscriptionFailurePolicy.poison_policy")]
    #[getter]
    fn poison_policy(&self) -> &'static str {
        (&self.policy.poison_policy).into()
    }

    #[doc = stub_doc!("SubscriptionFailurePolicy.dead_letter_topic")]
    #[getter]
    fn dead_letter_topic(&self) -> Option<String> {
        self.dead_letter_topic.clone()
    }

    #[doc = stub_doc!("SubscriptionFailurePolicy.redelivery_delay_ms")]
    #[pyo3(signature = (attempt, requested_ms=None))]
    fn redelivery_delay_ms(
        &self,
        attempt: &Bound<'_, PyAny>,
        requested_ms: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let Count(attempt) = arg(attempt, "attempt")?;
        let requested = requested_ms
            .map(|r| arg::<Millis>(r, "requested_ms").map(|v| v.0))
            .transpose()?;
        Ok(self.policy.redelivery_delay_ms(attempt, requested))
    }

    fn __repr__(&self) -> String {
        let p = &self.policy;
        format!(
            "SubscriptionFailurePolicy(max_redelivery_count={}, ack_timeout_ms={}, \
             base_redelivery_delay_ms={}, max_redelivery_delay_ms={}, backoff_strategy='{}', \
             poison_policy='{}', dead_letter_topic={})",
            p.max_redelivery_count,
            p.ack_timeout_ms,
            p.base_redelivery_delay_ms,
            p.max_redelivery_delay_ms,
            self.backoff_strategy(),
            self.poison_policy(),
            self.dead_letter_topic
                .as_ref()
                .map_or("None".to_owned(), |t| format!("'{t}'"))
        )
    }
}

#[doc = stub_doc!("InFlightEntry")]
#[pyclass(name = "InFlightEntry", module = "keyshared._core", frozen)]
pub struct PyInFlightEntry(InFlightEntry);

#[pymethods]
impl PyInFlightEntry {
    #[doc = stub_doc!("InFlightEntry.offset")]
    #[getter]
    fn offset(&self) -> u64 {
        self.0.offset
    }

    #[doc = stub_doc!("InFlightEntry.key")]
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        routing_key_object(py, &self.0.key)
    }

    #[doc = stub_doc!("InFlightEntry.consumer_id")]
    #[getter]
    fn consumer_id(&self) -> u64 {
        self.0.consumer_id
    }

    #[doc = stub_doc!("InFlightEntry.delivery_attempt")]
    #[getter]
    fn delivery_attempt(&self) -> u32 {
        self.0.delivery.attempt
    }

    #[doc = stub_doc!("InFlightEntry.status")]
    #[getter]
    fn status(&self) -> &'static str {
        self.0.delivery.status.into()
    }

    #[doc = stub_doc!("InFlightEntry.first_sent_at_ms")]
    #[getter]
    fn first_sent_at_ms(&self) -> u64 {
        self.0.delivery.first_sent_at_ms
    }

    #[doc = stub_doc!("InFlightEntry.last_sent_at_ms")]
    #[getter]
    fn last_sent_at_ms(&self) -> u64 {
        self.0.delivery.last_sent_at_ms
    }

    #[doc = stub_doc!("InFlightEntry.ack_deadline_at_ms")]
    #[getter]
    fn ack_deadline_at_ms(&self) -> u64 {
        self.0.delivery.ack_deadline_at_ms
    }

    #[doc = stub_doc!("InFlightEntry.next_redelivery_at_ms")]
    #[getter]
    fn next_redelivery_at_ms(&self) -> u64 {
        self.0.delivery.next_redelivery_at_ms
    }

    #[doc = stub_doc!("InFlightEntry.last_failure_reason")]
    #[getter]
    fn last_failure_reason(&self) -> Option<String> {
        self.0.delivery.last_failure_reason.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "InFlightEntry(offset={}, consumer_id={}, delivery_attempt={}, status='{}')",
            self.0.offset,
            self.0.consumer_id,
            self.0.delivery.attempt,
            self.status()
        )
    }
}

#[doc = stub_doc!("WindowAction")]
#[pyclass(name = "WindowAction", module = "keyshared._core", frozen)]
pub struct PyWindowAction(Action);

#[pymethods]
impl PyWindowAction {
    #[doc = stub_doc!("WindowAction.kind")]
    #[getter]
    fn kind(&self) -> &'static str {
        self.0.kind.into()
    }

    #[doc = stub_doc!("WindowAction.offset")]
    #[getter]
    fn offset(&self) -> Option<u64> {
        self.0.offset
    }

    #[doc = stub_doc!("WindowAction.key")]
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        self.0.key.as_ref().map(|k| routing_key_object(py, k))
    }

    #[doc = stub_doc!("WindowAction.consumer_id")]
    #[getter]
    fn consumer_id(&self) -> Option<u64> {
        self.0.consumer_id
    }

    #[doc = stub_doc!("WindowAction.attempt")]
    #[getter]
    fn attempt(&self) -> u32 {
        self.0.attempt
    }

    #[doc = stub_doc!("WindowAction.dead_letter_topic")]
    #[getter]
    fn dead_letter_topic(&self) -> Option<String> {
        self.0.dead_letter_topic.clone()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let key = match self.key(py) {
            Some(k) => k.repr()?.to_string(),
            None => "None".to_owned(),
        };
        let show = |v: Option<u64>| v.map_or("None".to_owned(), |v| v.to_string());
        Ok(format!(
            "WindowAction(kind='{}', offset={}, key={key}, consumer_id={}, attempt={})",
            self.kind(),
            show(self.0.offset),
            show(self.0.consumer_id),
            self.0.attempt
        ))
    }
}

type WithCursor<T> = (T, Option<u64>);

#[doc = stub_doc!("InFlightWindow")]
#[pyclass(name = "InFlightWindow", module = "keyshared._core", frozen)]
pub struct PyInFlightWindow {
    state: Mutex<InFlightWindow>,
    policy: PyFailurePolicy,
}

#[pymethods]
impl PyInFlightWindow {
    #[new]
    #[pyo3(signature = (
        max_window_size=None,
        max_per_consumer=None,
        failure_policy=None,
        inactive_eviction_ticks=None,
    ), text_signature = "(max_window_size=10, max_per_consumer=1000, failure_policy=None, \
        inactive_eviction_ticks=6)")]
    fn new(
        max_window_size: Option<&Bound<'_, PyAny>>,
        max_per_consumer: Option<&Bound<'_, PyAny>>,
        failure_policy: Option<PyFailurePolicy>,
        inactive_eviction_ticks: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let d = WindowLimits::default();
        let size = |obj, what, default: usize| {
            arg_or(obj, what, Count(default as u32)).map(|v| v.0 as usize)
        };
        let limits = WindowLimits {
            max_window_size: size(max_window_size, "max_window_size", d.max_window_size)?,
            max_per_consumer: size(max_per_consumer, "max_per_consumer", d.max_per_consumer)?,
            inactive_eviction_ticks: arg_or(
                inactive_eviction_ticks,
                "inactive_eviction_ticks",
                Count(d.inactive_eviction_ticks),
            )?
            .0,
        };
        let policy = match failure_policy {
            Some(p) => p,
            None => PyFailurePolicy {
                policy: FailurePolicy::default(),
                dead_letter_topic: None,
            },
        };
        Ok(Self {
            state: Mutex::new(InFlightWindow::new(limits, policy.policy.clone()).py()?),
            policy,
        })
    }

    #[doc = stub_doc!("InFlightWindow.max_window_size")]
    #[getter]
    fn max_window_size(&self, py: Python<'_>) -> usize {
        with_state(py, &self.state, |w| w.limits().max_window_size)
    }

    #[doc = stub_doc!("InFlightWindow.max_per_consumer")]
    #[getter]
    fn max_per_consumer(&self, py: Python<'_>) -> usize {
        with_state(py, &self.state, |w| w.limits().max_per_consumer)
    }

    #[doc = stub_doc!("InFlightWindow.inactive_eviction_ticks")]
    #[getter]
    fn inactive_eviction_ticks(&self, py: Python<'_>) -> u32 {
        with_state(py, &self.state, |w| w.limits().inactive_eviction_ticks)
    }

    #[doc = stub_doc!("InFlightWindow.failure_policy")]
    #[getter]
    fn failure_policy(&self) -> PyFailurePolicy {
        self.policy.clone()
    }

    #[doc = stub_doc!("InFlightWindow.record_polled")]
    fn record_polled(&self, py: Python<'_>, offset: &Bound<'_, PyAny>) -> PyResult<()> {
        let Offset(offset) = arg(offset, "offset")?;
        with_state(py, &self.state, |w| w.record_polled(offset)).py()
    }

    #[doc = stub_doc!("InFlightWindow.mark_dispatched")]
    #[pyo3(
        signature = (offset, key, consumer_id, now_ms=None),
        text_signature = "($self, offset, key, consumer_id, now_ms=0)"
    )]
    fn mark_dispatched(
        &self,
        py: Python<'_>,
        offset: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
        consumer_id: &Bound<'_, PyAny>,
        now_ms: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let Offset(offset) = arg(offset, "offset")?;
        let key: RoutingKey = arg(key, "key")?;
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let Millis(now) = arg_or(now_ms, "now_ms", Millis(0))?;
        with_state(py, &self.state, |w| {
            w.mark_dispatched(offset, &key, consumer, now)
        })
        .py()
    }

    #[doc = stub_doc!("InFlightWindow.push_blocked")]
    fn push_blocked(
        &self,
        py: Python<'_>,
        offset: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let Offset(offset) = arg(offset, "offset")?;
        let key: RoutingKey = arg(key, "key")?;
        with_state(py, &self.state, |w| w.push_blocked(offset, &key)).py()
    }

    #[doc = stub_doc!("InFlightWindow.take_unblocked")]
    fn take_unblocked<'py>(&self, py: Python<'py>) -> Option<(u64, Bound<'py, PyAny>)> {
        let taken = with_state(py, &self.state, InFlightWindow::take_unblocked);
        taken.map(|(offset, key)| (offset, routing_key_object(py, &key)))
    }

    #[doc = stub_doc!("InFlightWindow.on_ack")]
    fn on_ack<'py>(
        &self,
        py: Python<'py>,
        offset: &Bound<'py, PyAny>,
    ) -> PyResult<WithCursor<Option<Bound<'py, PyAny>>>> {
        let Offset(offset) = arg(offset, "offset")?;
        let (key, cursor) = with_state(py, &self.state, |w| w.on_ack(offset));
        Ok((key.map(|k| routing_key_object(py, &k)), cursor))
    }

    #[doc = stub_doc!("InFlightWindow.on_skipped")]
    fn on_skipped(&self, py: Python<'_>, offset: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
        let Offset(offset) = arg(offset, "offset")?;
        with_state(py, &self.state, |w| w.on_skipped(offset)).py()
    }

    #[doc = stub_doc!("InFlightWindow.on_nack")]
    #[pyo3(signature = (offset, now_ms, delay_ms=None, reason=None))]
    fn on_nack(
        &self,
        py: Python<'_>,
        offset: &Bound<'_, PyAny>,
        now_ms: &Bound<'_, PyAny>,
        delay_ms: Option<&Bound<'_, PyAny>>,
        reason: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<&'static str>> {
        let reason = reason
            .filter(|r| !r.is_none())
            .map(|r| arg::<Text>(r, "reason").map(|v| v.0))
            .transpose()?;
        let Offset(offset) = arg(offset, "offset")?;
        let Millis(now) = arg(now_ms, "now_ms")?;
        let delay = delay_ms
            .map(|d| arg::<Millis>(d, "delay_ms").map(|v| v.0))
            .transpose()?;
        let status = with_state(py, &self.state, |w| w.on_nack(offset, now, delay, reason));
        Ok(status.map(<&'static str>::from))
    }

    #[doc = stub_doc!("InFlightWindow.remove_entry")]
    fn remove_entry(
        &self,
        py: Python<'_>,
        offset: &Bound<'_, PyAny>,
    ) -> PyResult<Option<PyInFlightEntry>> {
        let Offset(offset) = arg(offset, "offset")?;
        let entry = with_state(py, &self.state, |w| w.remove_entry(offset));
        Ok(entry.map(PyInFlightEntry))
    }

    #[doc = stub_doc!("InFlightWindow.drain_blocked_for_key")]
    fn drain_blocked_for_key(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<WithCursor<Vec<u64>>> {
        let key: RoutingKey = arg(key, "key")?;
        Ok(with_state(py, &self.state, |w| {
            w.drain_blocked_for_key(&key.bytes)
        }))
    }

    #[doc = stub_doc!("InFlightWindow.remove_consumer_entries")]
    fn remove_consumer_entries<'py>(
        &self,
        py: Python<'py>,
        consumer_id: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        let freed = with_state(py, &self.state, |w| w.remove_consumer_entries(consumer));
        Ok(keys_out(py, &freed))
    }

    #[doc = stub_doc!("InFlightWindow.get_safe_cursor")]
    fn get_safe_cursor(&self, py: Python<'_>) -> Option<u64> {
        with_state(py, &self.state, |w| w.get_safe_cursor())
    }

    #[doc = stub_doc!("InFlightWindow.has_capacity")]
    fn has_capacity(&self, py: Python<'_>) -> bool {
        with_state(py, &self.state, |w| w.has_capacity())
    }

    #[doc = stub_doc!("InFlightWindow.consumer_has_capacity")]
    fn consumer_has_capacity(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        Ok(with_state(py, &self.state, |w| {
            w.consumer_has_capacity(consumer)
        }))
    }

    #[doc = stub_doc!("InFlightWindow.consumer_in_flight")]
    fn consumer_in_flight(
        &self,
        py: Python<'_>,
        consumer_id: &Bound<'_, PyAny>,
    ) -> PyResult<usize> {
        let ConsumerId(consumer) = arg(consumer_id, "consumer_id")?;
        Ok(with_state(py, &self.state, |w| {
            w.consumer_in_flight(consumer)
        }))
    }

    #[doc = stub_doc!("InFlightWindow.is_key_active")]
    fn is_key_active(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key: RoutingKey = arg(key, "key")?;
        Ok(with_state(py, &self.state, |w| w.is_key_active(&key.bytes)))
    }

    #[doc = stub_doc!("InFlightWindow.get_entry")]
    fn get_entry(
        &self,
        py: Python<'_>,
        offset: &Bound<'_, PyAny>,
    ) -> PyResult<Option<PyInFlightEntry>> {
        let Offset(offset) = arg(offset, "offset")?;
        let entry = with_state(py, &self.state, |w| w.get_entry(offset).cloned());
        Ok(entry.map(PyInFlightEntry))
    }

    #[doc = stub_doc!("InFlightWindow.in_flight_entries")]
    fn in_flight_entries(&self, py: Python<'_>) -> Vec<PyInFlightEntry> {
        let entries: Vec<InFlightEntry> = with_state(py, &self.state, |w| {
            w.in_flight_entries().cloned().collect()
        });
        entries.into_iter().map(PyInFlightEntry).collect()
    }

    #[doc = stub_doc!("InFlightWindow.blocked")]
    fn blocked<'py>(&self, py: Python<'py>) -> Vec<(u64, Bound<'py, PyAny>)> {
        let queued: Vec<(u64, RoutingKey)> = with_state(py, &self.state, |w| {
            w.blocked().map(|(o, k)| (o, k.clone())).collect()
        });
        queued
            .into_iter()
            .map(|(o, k)| (o, routing_key_object(py, &k)))
            .collect()
    }

    #[doc = stub_doc!("InFlightWindow.in_flight_count")]
    #[getter]
    fn in_flight_count(&self, py: Python<'_>) -> usize {
        with_state(py, &self.state, |w| w.in_flight_count())
    }

    #[doc = stub_doc!("InFlightWindow.blocked_count")]
    #[getter]
    fn blocked_count(&self, py: Python<'_>) -> usize {
        with_state(py, &self.state, |w| w.blocked_count())
    }

    #[doc = stub_doc!("InFlightWindow.dispatch_polled")]
    fn dispatch_polled(
        &self,
        py: Python<'_>,
        offset: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
        state: &Bound<'_, PyAny>,
        now_ms: &Bound<'_, PyAny>,
    ) -> PyResult<(PyWindowAction, Option<u64>)> {
        let Offset(offset) = arg(offset, "offset")?;
        let key: RoutingKey = arg(key, "key")?;
        let Millis(now) = arg(now_ms, "now_ms")?;
        let ring = instance::<PyKeySharedConsumerState>(state, "state")?.get();
        let (action, cursor) = with_state(py, &self.state, |w| {
            w.dispatch_polled(offset, &key, &lock(&ring.state), now)
        })
        .py()?;
        Ok((PyWindowAction(action), cursor))
    }

    #[doc = stub_doc!("InFlightWindow.handle_heartbeat")]
    #[pyo3(signature = (now_ms, state, inactive_consumers=None))]
    fn handle_heartbeat(
        &self,
        py: Python<'_>,
        now_ms: &Bound<'_, PyAny>,
        state: &Bound<'_, PyAny>,
        inactive_consumers: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Vec<PyWindowAction>, Option<u64>)> {
        let Millis(now) = arg(now_ms, "now_ms")?;
        let inactive = match inactive_consumers {
            Some(ids) if !ids.is_none() => arg::<ConsumerSet>(ids, "inactive_consumers")?.0,
            _ => HashSet::new(),
        };
        let ring = instance::<PyKeySharedConsumerState>(state, "state")?.get();
        let (actions, cursor) = with_state(py, &self.state, |w| {
            w.handle_heartbeat(now, &mut lock(&ring.state), &inactive)
        });
        Ok((actions.into_iter().map(PyWindowAction).collect(), cursor))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let (flying, blocked, cursor) = with_state(py, &self.state, |w| {
            (w.in_flight_count(), w.blocked_count(), w.get_safe_cursor())
        });
        let cursor = cursor.map_or("None".to_owned(), |c| c.to_string());
        format!("InFlightWindow(in_flight={flying}, blocked={blocked}, safe_cursor={cursor})")
    }
}

fn keys_out<'py>(py: Python<'py>, keys: &[RoutingKey]) -> Vec<Bound<'py, PyAny>> {
    keys.iter().map(|k| routing_key_object(py, k)).collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFailurePolicy>()?;
    m.add_class::<PyInFlightEntry>()?;
    m.add_class::<PyWindowAction>()?;
    m.add_class::<PyInFlightWindow>()?;
    Ok(())
}
