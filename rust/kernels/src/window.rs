//! Danube's in-flight window for Key-Shared dispatch (SPEC 8): at most one message per
//! routing key in flight, later messages of a busy key waiting in a blocked queue, a safe
//! cursor over the offsets done, per-consumer caps, and Danube's retry, backoff, ack-timeout
//! and poison policies as a state machine driven by `now_ms`.
//!
//! Danube's defects are fixed: dropping a poison message leaves its blocked followers
//! queued (they are released in order once the key frees); the blocked queue is kept in
//! offset order and a message taken from it and put back returns to its place; a taken
//! message holds its key until it is dispatched, skipped or put back, so nothing overtakes
//! it; the per-consumer cap holds on every dispatch path, redeliveries included; a message
//! redelivered to another consumer moves its count along; and an ack for an offset not
//! awaiting one changes nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use strum::{EnumString, IntoStaticStr, VariantNames};

use super::cursor::{check_offset, SafeCursor};
use super::danube_ring::KeySharedConsumerState;
use super::error::{Conflict, Duplicate, InvalidInput, KernelResult, KeyConflict, OffsetState};
use super::routing_key::RoutingKey;

/// How the redelivery delay grows; named `fixed` and `exponential`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoStaticStr, EnumString, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum BackoffStrategy {
    /// The same delay, `base_redelivery_delay_ms`, before every retry.
    Fixed,
    /// `base_redelivery_delay_ms * 2^(attempt - 1)`: doubling after every delivery.
    Exponential,
}

/// What happens to a message out of retries; named `drop`, `dead_letter` and `block`.
#[derive(Debug, Clone, PartialEq, Eq, IntoStaticStr, EnumString, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum PoisonPolicy {
    /// Counted as done; its blocked followers stay queued.
    Drop,
    /// Reported for the dead-letter topic, then dropped.
    DeadLetter(String),
    /// Stays in flight, holding its key; other keys go on.
    Block,
}

/// Danube's `SubscriptionFailurePolicy`; times in milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailurePolicy {
    /// Redeliveries after the first delivery before a message is poison (`RetryExhausted`); 0 makes
    /// the first failure final. Default 5.
    pub max_redelivery_count: u32,
    /// How long a delivery waits for its ack before it counts as failed, in ms; at least 1. Default
    /// 30,000.
    pub ack_timeout_ms: u64,
    /// The first retry's delay, in ms; at most `max_redelivery_delay_ms`. Default 1,000.
    pub base_redelivery_delay_ms: u64,
    /// The longest delay before a retry, in ms, whatever the backoff or a nack asks for. Default
    /// 60,000.
    pub max_redelivery_delay_ms: u64,
    /// How the delay grows from one retry to the next. Default exponential.
    pub backoff_strategy: BackoffStrategy,
    /// What happens to a message out of retries. Default [`PoisonPolicy::Block`].
    pub poison_policy: PoisonPolicy,
}

impl Default for FailurePolicy {
    fn default() -> Self {
        Self {
            max_redelivery_count: 5,
            ack_timeout_ms: 30_000,
            base_redelivery_delay_ms: 1_000,
            max_redelivery_delay_ms: 60_000,
            backoff_strategy: BackoffStrategy::Exponential,
            poison_policy: PoisonPolicy::Block,
        }
    }
}

impl FailurePolicy {
    /// The policy, when it is usable: `ack_timeout_ms` of 0 is an error (`TooSmall`), so is a base
    /// delay above the maximum (`Exceeds`) and a dead-letter policy with an empty or blank topic
    /// (`NoDeadLetterTopic`).
    pub fn validate(self) -> KernelResult<Self> {
        at_least_one("ack_timeout_ms", self.ack_timeout_ms)?;
        if self.base_redelivery_delay_ms > self.max_redelivery_delay_ms {
            return Err(InvalidInput::Exceeds {
                what: "base_redelivery_delay_ms",
                value: self.base_redelivery_delay_ms,
                limit: "max_redelivery_delay_ms",
                limit_value: self.max_redelivery_delay_ms,
            });
        }
        if matches!(&self.poison_policy, PoisonPolicy::DeadLetter(t) if t.trim().is_empty()) {
            return Err(InvalidInput::NoDeadLetterTopic);
        }
        Ok(self)
    }

    /// The wait before redelivery after `attempt` deliveries: the backoff's delay or the
    /// requested one, whichever is longer, capped at the maximum.
    pub fn redelivery_delay_ms(&self, attempt: u32, requested_ms: Option<u64>) -> u64 {
        let policy = match self.backoff_strategy {
            BackoffStrategy::Fixed => self.base_redelivery_delay_ms,
            BackoffStrategy::Exponential => {
                let exponent = attempt.max(1).saturating_sub(1).min(63);
                self.base_redelivery_delay_ms
                    .saturating_mul(1u64 << exponent)
            }
        };
        policy
            .max(requested_ms.unwrap_or(0))
            .min(self.max_redelivery_delay_ms)
    }
}

/// Where an in-flight message is in its life; named `awaiting_ack`, `waiting_to_retry` and
/// `retry_exhausted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoStaticStr, EnumString, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum DeliveryStatus {
    /// Sent, and waiting for its ack until `ack_deadline_at_ms`.
    AwaitingAck,
    /// Nacked or timed out, to be redelivered at `next_redelivery_at_ms`.
    WaitingToRetry,
    /// Failed once past the redelivery count: poison, for the poison policy at the next
    /// heartbeat.
    RetryExhausted,
}

/// Danube's `PendingDelivery` without the message: one in-flight message's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// How many times the message was sent: 1 on its first delivery.
    pub attempt: u32,
    /// When it was first sent, in ms.
    pub first_sent_at_ms: u64,
    /// When it was last sent, in ms.
    pub last_sent_at_ms: u64,
    /// When its ack is due, in ms: the last send plus the ack timeout.
    pub ack_deadline_at_ms: u64,
    /// When it is to be redelivered, in ms, while `status` is `WaitingToRetry`.
    pub next_redelivery_at_ms: u64,
    /// Where the message is in its life.
    pub status: DeliveryStatus,
    /// Why it last failed: a nack's reason, or `"ack timeout"`; None until it fails, or for a nack
    /// without one.
    pub last_failure_reason: Option<String>,
}

impl Delivery {
    fn sent(now_ms: u64, ack_timeout_ms: u64) -> Self {
        Self {
            attempt: 1,
            first_sent_at_ms: now_ms,
            last_sent_at_ms: now_ms,
            ack_deadline_at_ms: now_ms.saturating_add(ack_timeout_ms),
            next_redelivery_at_ms: now_ms,
            status: DeliveryStatus::AwaitingAck,
            last_failure_reason: None,
        }
    }

    fn resent(&mut self, now_ms: u64, ack_timeout_ms: u64) {
        self.attempt = self.attempt.saturating_add(1);
        self.last_sent_at_ms = now_ms;
        self.ack_deadline_at_ms = now_ms.saturating_add(ack_timeout_ms);
        self.next_redelivery_at_ms = now_ms;
        self.status = DeliveryStatus::AwaitingAck;
    }

    /// A nack or an ack timeout: wait and retry, or give up once past the redelivery count.
    fn schedule_retry(
        &mut self,
        reason: Option<String>,
        requested_ms: Option<u64>,
        policy: &FailurePolicy,
        now_ms: u64,
    ) {
        self.last_failure_reason = reason;
        if self.attempt > policy.max_redelivery_count {
            self.status = DeliveryStatus::RetryExhausted;
            return;
        }
        let delay = policy.redelivery_delay_ms(self.attempt, requested_ms);
        self.next_redelivery_at_ms = now_ms.saturating_add(delay);
        self.status = DeliveryStatus::WaitingToRetry;
    }
}

/// An in-flight message.
#[derive(Debug, Clone)]
pub struct InFlightEntry {
    /// The message's offset.
    pub offset: u64,
    /// The message's routing key, which it holds while in flight.
    pub key: RoutingKey,
    /// The consumer it was last sent to.
    pub consumer_id: u64,
    /// Its delivery: attempts, times and status.
    pub delivery: Delivery,
}

/// What an [`Action`] asks of the caller; named as its variant in snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoStaticStr, EnumString, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum ActionKind {
    /// Send the message to `consumer_id` (attempt 1).
    Deliver,
    /// Send the message again, to `consumer_id`, after a nack or an ack timeout.
    Redeliver,
    /// No consumer takes the message's key: it counts as done, unsent.
    Skip,
    /// The message is queued: its key is busy, or the consumer selected for it (`consumer_id`)
    /// is full.
    Block,
    /// The poison message is dropped: it counts as done.
    Drop,
    /// Publish the poison message to `dead_letter_topic`: it counts as done.
    DeadLetter,
    /// The consumer `consumer_id` was inactive too long: its messages count as done and it is
    /// removed.
    Evict,
}

/// What the caller is to do: send a message, note a skip or a block, publish to the
/// dead-letter topic, or forget an evicted consumer.
#[derive(Debug, Clone)]
pub struct Action {
    /// What to do.
    pub kind: ActionKind,
    /// The message's offset; None for `Evict`.
    pub offset: Option<u64>,
    /// The message's routing key; None for `Evict`.
    pub key: Option<RoutingKey>,
    /// The consumer the message goes to (`Deliver`, `Redeliver`, `Block`) or was in flight on
    /// (`Drop`, `DeadLetter`), or the one evicted; None for `Skip`.
    pub consumer_id: Option<u64>,
    /// The delivery attempt the action ends or starts (1 for `Deliver`); 0 for `Skip`, `Block` and
    /// `Evict`.
    pub attempt: u32,
    /// The dead-letter topic, for `DeadLetter` alone.
    pub dead_letter_topic: Option<String>,
}

impl Action {
    fn message(kind: ActionKind, offset: u64, key: RoutingKey, consumer: Option<u64>) -> Self {
        Self {
            kind,
            offset: Some(offset),
            key: Some(key),
            consumer_id: consumer,
            attempt: 0,
            dead_letter_topic: None,
        }
    }

    fn with_attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }
}

/// Sizes of a window: Danube's window (in flight plus blocked) and per-consumer cap, and
/// the heartbeats a consumer may be reported inactive before it is evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowLimits {
    /// The most messages in the window, in flight plus blocked (queued or taken); at least 1.
    /// Default 10.
    pub max_window_size: usize,
    /// The most messages in flight on one consumer; at least 1. Default 1,000.
    pub max_per_consumer: usize,
    /// How many heartbeats in a row a consumer may be reported inactive before it is evicted; at
    /// least 1. Default 6.
    pub inactive_eviction_ticks: u32,
}

impl Default for WindowLimits {
    fn default() -> Self {
        Self {
            max_window_size: 10,
            max_per_consumer: 1_000,
            inactive_eviction_ticks: 6,
        }
    }
}

/// The key's holder (the offset in flight, or taken from the queue) and its queued offsets.
#[derive(Debug, Default)]
struct KeyState {
    holder: Option<u64>,
    waiting: BTreeSet<u64>,
}

impl KeyState {
    /// The queued offset to release next, when nothing holds the key.
    fn ready_head(&self) -> Option<u64> {
        match self.holder {
            None => self.waiting.first().copied(),
            Some(_) => None,
        }
    }
}

/// Results that may move the safe cursor carry its new position when it moved.
pub type WithCursor<T> = (T, Option<u64>);

/// Danube's in-flight window with its defects fixed: at most one message per routing key in flight,
/// later messages of a busy key in a blocked queue in offset order, a safe cursor over the offsets
/// done, per-consumer caps, and retries, ack timeouts and poison resolved by
/// [`handle_heartbeat`](Self::handle_heartbeat) at the caller's `now_ms`.
#[derive(Debug)]
pub struct InFlightWindow {
    limits: WindowLimits,
    policy: FailurePolicy,
    in_flight: BTreeMap<u64, InFlightEntry>,
    keys: HashMap<RoutingKey, KeyState>,
    queued: BTreeMap<u64, RoutingKey>,
    taken: HashMap<u64, RoutingKey>,
    /// The head of every free key's queue: what `take_unblocked` may hand out.
    ready: BTreeSet<u64>,
    cursor: Option<SafeCursor>,
    per_consumer: HashMap<u64, usize>,
    inactive_ticks: HashMap<u64, u32>,
}

impl InFlightWindow {
    /// An empty window. A limit of 0 is an error (`TooSmall`), and so is a policy
    /// [`FailurePolicy::validate`] refuses.
    pub fn new(limits: WindowLimits, policy: FailurePolicy) -> KernelResult<Self> {
        at_least_one("max_window_size", limits.max_window_size as u64)?;
        at_least_one("max_per_consumer", limits.max_per_consumer as u64)?;
        at_least_one(
            "inactive_eviction_ticks",
            limits.inactive_eviction_ticks.into(),
        )?;
        Ok(Self {
            limits,
            policy: policy.validate()?,
            in_flight: BTreeMap::new(),
            keys: HashMap::new(),
            queued: BTreeMap::new(),
            taken: HashMap::new(),
            ready: BTreeSet::new(),
            cursor: None,
            per_consumer: HashMap::new(),
            inactive_ticks: HashMap::new(),
        })
    }

    /// The window's sizes.
    pub fn limits(&self) -> WindowLimits {
        self.limits
    }

    /// Whether more messages may be polled: in flight plus blocked below the window size.
    pub fn has_capacity(&self) -> bool {
        self.in_flight.len() + self.queued.len() + self.taken.len() < self.limits.max_window_size
    }

    /// True when `consumer` is below its cap of in-flight messages.
    pub fn consumer_has_capacity(&self, consumer: u64) -> bool {
        self.consumer_in_flight(consumer) < self.limits.max_per_consumer
    }

    /// How many messages are in flight on `consumer` (0 for one the window does not know).
    pub fn consumer_in_flight(&self, consumer: u64) -> usize {
        self.per_consumer.get(&consumer).copied().unwrap_or(0)
    }

    /// Whether a new message with this key must wait: one is in flight or taken, or older
    /// ones are queued.
    pub fn is_key_active(&self, key: &[u8]) -> bool {
        self.keys.contains_key(key)
    }

    /// The safe cursor: the last offset such that it and every offset from the first one polled are
    /// done (acked, skipped, dropped or evicted); None before that.
    pub fn get_safe_cursor(&self) -> Option<u64> {
        self.cursor.as_ref().and_then(SafeCursor::position)
    }

    /// How many messages are in flight.
    pub fn in_flight_count(&self) -> usize {
        self.in_flight.len()
    }

    /// Messages waiting in the blocked queue, taken ones included.
    pub fn blocked_count(&self) -> usize {
        self.queued.len() + self.taken.len()
    }

    /// The in-flight message at `offset`, if any.
    pub fn get_entry(&self, offset: u64) -> Option<&InFlightEntry> {
        self.in_flight.get(&offset)
    }

    /// The in-flight messages, by ascending offset.
    pub fn in_flight_entries(&self) -> impl Iterator<Item = &InFlightEntry> {
        self.in_flight.values()
    }

    /// The queued messages in release order (taken ones are not listed).
    pub fn blocked(&self) -> impl Iterator<Item = (u64, &RoutingKey)> {
        self.queued.iter().map(|(&o, k)| (o, k))
    }

    /// Notes the first offset polled, where the safe cursor starts.
    pub fn record_polled(&mut self, offset: u64) -> KernelResult<()> {
        let offset = check_offset(i128::from(offset), "offset")?;
        self.ensure_cursor(offset);
        Ok(())
    }

    /// Records a message as sent to `consumer` at `now_ms`. The offset must be new (or the
    /// one `take_unblocked` handed out, with its key), the key must have nothing in flight
    /// and nothing queued before it, and the consumer must be under its cap.
    pub fn mark_dispatched(
        &mut self,
        offset: u64,
        key: &RoutingKey,
        consumer: u64,
        now_ms: u64,
    ) -> KernelResult<()> {
        let offset = check_offset(i128::from(offset), "offset")?;
        match self.taken.get(&offset) {
            Some(held) => check_same_key(offset, held, key)?,
            None => self.check_new_with_key(offset, key)?,
        }
        if !self.consumer_has_capacity(consumer) {
            return Err(Conflict::ConsumerFull {
                consumer,
                max_per_consumer: self.limits.max_per_consumer,
            }
            .into());
        }
        self.ensure_cursor(offset);
        self.dispatch(offset, key.clone(), consumer, now_ms);
        Ok(())
    }

    /// Queues a message behind its key. A message `take_unblocked` handed out goes back to
    /// its place; any other offset must be new.
    pub fn push_blocked(&mut self, offset: u64, key: &RoutingKey) -> KernelResult<()> {
        let offset = check_offset(i128::from(offset), "offset")?;
        match self.taken.get(&offset) {
            Some(held) => {
                check_same_key(offset, held, key)?;
                self.taken.remove(&offset);
                self.update_key(key, |s| s.holder = None);
            }
            None => {
                self.check_new(offset)?;
                self.ensure_cursor(offset);
            }
        }
        self.update_key(key, |s| s.waiting.insert(offset));
        self.queued.insert(offset, key.clone());
        Ok(())
    }

    /// The first queued message (lowest offset) whose key is free. It holds its key until
    /// it is dispatched, skipped or pushed back.
    pub fn take_unblocked(&mut self) -> Option<(u64, RoutingKey)> {
        let offset = *self.ready.first()?;
        self.take(offset).map(|key| (offset, key))
    }

    /// An ack: the message leaves the window and frees its key. Returns the key and the new
    /// cursor; an offset not in flight awaiting an ack changes nothing.
    pub fn on_ack(&mut self, offset: u64) -> WithCursor<Option<RoutingKey>> {
        let awaiting = self
            .in_flight
            .get(&offset)
            .is_some_and(|e| e.delivery.status == DeliveryStatus::AwaitingAck);
        if !awaiting {
            return (None, None);
        }
        let key = self.remove_in_flight(offset).map(|e| e.key);
        (key, self.mark_done(offset))
    }

    /// Counts a message as done without a delivery (no consumer wanted it); a taken message
    /// frees its key. An offset in flight or queued is an error; one already done changes
    /// nothing.
    pub fn on_skipped(&mut self, offset: u64) -> KernelResult<Option<u64>> {
        let offset = check_offset(i128::from(offset), "offset")?;
        if self.in_flight.contains_key(&offset) {
            return Err(Conflict::SkippedInFlight { offset }.into());
        }
        if self.queued.contains_key(&offset) {
            return Err(Conflict::SkippedQueued { offset }.into());
        }
        Ok(self.skip_taken(offset))
    }

    /// Counts an offset done, freeing its key if it was taken from the queue.
    fn skip_taken(&mut self, offset: u64) -> Option<u64> {
        if let Some(key) = self.taken.remove(&offset) {
            self.update_key(&key, |s| s.holder = None);
        }
        self.mark_done(offset)
    }

    /// Takes a message out of flight without counting it done (the caller decides: skip it,
    /// or dispatch it again); its key frees.
    pub fn remove_entry(&mut self, offset: u64) -> Option<InFlightEntry> {
        self.remove_in_flight(offset)
    }

    /// Removes every queued message of a key, counting each as done so the cursor can pass
    /// them. Returns their offsets.
    pub fn drain_blocked_for_key(&mut self, key: &[u8]) -> WithCursor<Vec<u64>> {
        let Some(state) = self.keys.get(key) else {
            return (Vec::new(), None);
        };
        let offsets: Vec<u64> = state.waiting.iter().copied().collect();
        if let Some(routing_key) = offsets.first().and_then(|o| self.queued.get(o)).cloned() {
            self.update_key(&routing_key, |s| s.waiting.clear());
        }
        let mut moved = None;
        for &offset in &offsets {
            self.queued.remove(&offset);
            moved = self.mark_done(offset).or(moved);
        }
        (offsets, moved)
    }

    /// Evicts a consumer's messages: they leave the window counted as done (they are lost
    /// to this subscription, so the cursor does not stall on them). Returns the freed keys.
    pub fn remove_consumer_entries(&mut self, consumer: u64) -> Vec<RoutingKey> {
        let offsets: Vec<u64> = self
            .in_flight
            .values()
            .filter(|e| e.consumer_id == consumer)
            .map(|e| e.offset)
            .collect();
        let mut freed = Vec::with_capacity(offsets.len());
        for offset in offsets {
            if let Some(entry) = self.remove_in_flight(offset) {
                freed.push(entry.key);
                self.mark_done(offset);
            }
        }
        self.per_consumer.remove(&consumer);
        self.inactive_ticks.remove(&consumer);
        freed
    }

    /// A nack: retry after the backoff (or `delay_ms`, if longer), or give up once past the
    /// redelivery count. Returns the new status; an offset not in flight changes nothing.
    pub fn on_nack(
        &mut self,
        offset: u64,
        now_ms: u64,
        delay_ms: Option<u64>,
        reason: Option<String>,
    ) -> Option<DeliveryStatus> {
        let entry = self.in_flight.get_mut(&offset)?;
        entry
            .delivery
            .schedule_retry(reason, delay_ms, &self.policy, now_ms);
        Some(entry.delivery.status)
    }

    /// Danube's dispatch of one polled message: skipped (counted done) when no consumer
    /// takes its key, queued when its key is busy or its consumer full, else sent.
    pub fn dispatch_polled(
        &mut self,
        offset: u64,
        key: &RoutingKey,
        state: &KeySharedConsumerState,
        now_ms: u64,
    ) -> KernelResult<WithCursor<Action>> {
        let offset = check_offset(i128::from(offset), "offset")?;
        self.check_new(offset)?;
        self.ensure_cursor(offset);
        let Some(consumer) = state.select_consumer(&key.bytes) else {
            let moved = self.mark_done(offset);
            return Ok((
                Action::message(ActionKind::Skip, offset, key.clone(), None),
                moved,
            ));
        };
        if self.is_key_active(&key.bytes) || !self.consumer_has_capacity(consumer) {
            self.push_blocked(offset, key)?;
            let action = Action::message(ActionKind::Block, offset, key.clone(), Some(consumer));
            return Ok((action, None));
        }
        self.dispatch(offset, key.clone(), consumer, now_ms);
        let action = Action::message(ActionKind::Deliver, offset, key.clone(), Some(consumer));
        Ok((action.with_attempt(1), None))
    }

    /// Danube's heartbeat at `now_ms`: ack timeouts become retries or poison; poison is
    /// dropped or dead-lettered per the policy (or left blocking); messages due for retry
    /// are redelivered; consumers reported inactive for `inactive_eviction_ticks`
    /// heartbeats in a row are evicted (from the window and from `state`); then queued
    /// messages whose keys are free are sent. With no consumers nothing happens.
    pub fn handle_heartbeat(
        &mut self,
        now_ms: u64,
        state: &mut KeySharedConsumerState,
        inactive: &HashSet<u64>,
    ) -> WithCursor<Vec<Action>> {
        if state.is_empty() {
            self.inactive_ticks.clear();
            return (Vec::new(), None);
        }
        let before = self.get_safe_cursor();
        let mut actions = Vec::new();
        self.expire_acks(now_ms);
        self.resolve_poison(&mut actions);
        self.redeliver(now_ms, state, &mut actions);
        self.evict_inactive(state, inactive, &mut actions);
        self.dispatch_unblocked(now_ms, state, &mut actions);
        let after = self.get_safe_cursor();
        (actions, if after != before { after } else { None })
    }

    fn expire_acks(&mut self, now_ms: u64) {
        for entry in self.in_flight.values_mut() {
            let d = &mut entry.delivery;
            if d.status == DeliveryStatus::AwaitingAck && now_ms >= d.ack_deadline_at_ms {
                d.schedule_retry(Some("ack timeout".into()), None, &self.policy, now_ms);
            }
        }
    }

    fn resolve_poison(&mut self, actions: &mut Vec<Action>) {
        let (kind, topic) = match &self.policy.poison_policy {
            PoisonPolicy::Block => return,
            PoisonPolicy::Drop => (ActionKind::Drop, None),
            PoisonPolicy::DeadLetter(t) => (ActionKind::DeadLetter, Some(t.clone())),
        };
        let exhausted: Vec<u64> = self
            .in_flight
            .values()
            .filter(|e| e.delivery.status == DeliveryStatus::RetryExhausted)
            .map(|e| e.offset)
            .collect();
        for offset in exhausted {
            if let Some(e) = self.remove_in_flight(offset) {
                self.mark_done(offset);
                let mut action = Action::message(kind, offset, e.key, Some(e.consumer_id));
                action.dead_letter_topic = topic.clone();
                actions.push(action.with_attempt(e.delivery.attempt));
            }
        }
    }

    fn redeliver(
        &mut self,
        now_ms: u64,
        state: &KeySharedConsumerState,
        actions: &mut Vec<Action>,
    ) {
        let due: Vec<u64> = self
            .in_flight
            .values()
            .filter(|e| {
                e.delivery.status == DeliveryStatus::WaitingToRetry
                    && now_ms >= e.delivery.next_redelivery_at_ms
            })
            .map(|e| e.offset)
            .collect();
        for offset in due {
            let Some(entry) = self.in_flight.get(&offset) else {
                continue;
            };
            let Some(target) = state.select_consumer(&entry.key.bytes) else {
                continue;
            };
            let previous = entry.consumer_id;
            if target != previous && !self.consumer_has_capacity(target) {
                continue;
            }
            if target != previous {
                self.release_count(previous);
                *self.per_consumer.entry(target).or_insert(0) += 1;
            }
            let timeout = self.policy.ack_timeout_ms;
            let Some(entry) = self.in_flight.get_mut(&offset) else {
                continue;
            };
            entry.consumer_id = target;
            entry.delivery.resent(now_ms, timeout);
            let action = Action::message(
                ActionKind::Redeliver,
                offset,
                entry.key.clone(),
                Some(target),
            );
            actions.push(action.with_attempt(entry.delivery.attempt));
        }
    }

    fn evict_inactive(
        &mut self,
        state: &mut KeySharedConsumerState,
        inactive: &HashSet<u64>,
        actions: &mut Vec<Action>,
    ) {
        let ids = state.consumer_ids();
        self.inactive_ticks.retain(|id, _| ids.contains(id));
        let mut evict = Vec::new();
        for id in ids {
            if !inactive.contains(&id) {
                self.inactive_ticks.remove(&id);
                continue;
            }
            let ticks = self.inactive_ticks.entry(id).or_insert(0);
            *ticks += 1;
            if *ticks >= self.limits.inactive_eviction_ticks {
                evict.push(id);
            }
        }
        for id in evict {
            self.remove_consumer_entries(id);
            if state.remove_consumer(id).is_ok() {
                actions.push(Action {
                    kind: ActionKind::Evict,
                    offset: None,
                    key: None,
                    consumer_id: Some(id),
                    attempt: 0,
                    dead_letter_topic: None,
                });
            }
        }
    }

    fn dispatch_unblocked(
        &mut self,
        now_ms: u64,
        state: &KeySharedConsumerState,
        actions: &mut Vec<Action>,
    ) {
        let mut from = 0;
        while let Some(&offset) = self.ready.range(from..).next() {
            from = offset + 1;
            let Some(key) = self.queued.get(&offset).cloned() else {
                continue;
            };
            match state.select_consumer(&key.bytes) {
                Some(c) if !self.consumer_has_capacity(c) => continue,
                Some(c) => {
                    self.take(offset);
                    self.dispatch(offset, key.clone(), c, now_ms);
                    let action = Action::message(ActionKind::Deliver, offset, key, Some(c));
                    actions.push(action.with_attempt(1));
                }
                None => {
                    self.take(offset);
                    self.skip_taken(offset);
                    actions.push(Action::message(ActionKind::Skip, offset, key, None));
                }
            }
        }
    }

    fn check_new(&self, offset: u64) -> KernelResult<()> {
        let state = if self.in_flight.contains_key(&offset) {
            OffsetState::InFlight
        } else if self.queued.contains_key(&offset) || self.taken.contains_key(&offset) {
            OffsetState::Queued
        } else if self.cursor.as_ref().is_some_and(|c| c.is_done(offset)) {
            OffsetState::Done
        } else {
            return Ok(());
        };
        Err(Duplicate::Offset { offset, state }.into())
    }

    fn check_new_with_key(&self, offset: u64, key: &RoutingKey) -> KernelResult<()> {
        self.check_new(offset)?;
        let Some(state) = self.keys.get(key) else {
            return Ok(());
        };
        let key = key.clone().into();
        Err(match state.holder {
            Some(holder) => KeyConflict::Held {
                key,
                holder,
                offset,
            },
            None => KeyConflict::Queued { key, offset },
        }
        .into())
    }

    /// Sends a checked message: a taken one keeps its key, a new one takes it.
    fn dispatch(&mut self, offset: u64, key: RoutingKey, consumer: u64, now_ms: u64) {
        if self.taken.remove(&offset).is_none() {
            self.update_key(&key, |s| s.holder = Some(offset));
        }
        *self.per_consumer.entry(consumer).or_insert(0) += 1;
        let delivery = Delivery::sent(now_ms, self.policy.ack_timeout_ms);
        self.in_flight.insert(
            offset,
            InFlightEntry {
                offset,
                key,
                consumer_id: consumer,
                delivery,
            },
        );
    }

    fn take(&mut self, offset: u64) -> Option<RoutingKey> {
        let key = self.queued.remove(&offset)?;
        self.update_key(&key, |s| {
            s.waiting.remove(&offset);
            s.holder = Some(offset);
        });
        self.taken.insert(offset, key.clone());
        Some(key)
    }

    fn remove_in_flight(&mut self, offset: u64) -> Option<InFlightEntry> {
        let entry = self.in_flight.remove(&offset)?;
        self.update_key(&entry.key, |s| {
            if s.holder == Some(offset) {
                s.holder = None;
            }
        });
        self.release_count(entry.consumer_id);
        Some(entry)
    }

    fn release_count(&mut self, consumer: u64) {
        if let Some(count) = self.per_consumer.get_mut(&consumer) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.per_consumer.remove(&consumer);
            }
        }
    }

    fn ensure_cursor(&mut self, offset: u64) {
        if self.cursor.is_none() {
            self.cursor = SafeCursor::new(offset).ok();
        }
    }

    fn mark_done(&mut self, offset: u64) -> Option<u64> {
        self.ensure_cursor(offset);
        self.cursor.as_mut()?.ack(offset).ok().flatten()
    }

    /// Changes a key's state, keeping the ready set and the key table in step with it.
    fn update_key<R>(&mut self, key: &RoutingKey, change: impl FnOnce(&mut KeyState) -> R) -> R {
        let state = self.keys.entry(key.clone()).or_default();
        if let Some(head) = state.ready_head() {
            self.ready.remove(&head);
        }
        let result = change(state);
        if let Some(head) = state.ready_head() {
            self.ready.insert(head);
        }
        if state.holder.is_none() && state.waiting.is_empty() {
            self.keys.remove(key);
        }
        result
    }
}

/// Checks that a limit or timeout (`what`) is at least 1.
fn at_least_one(what: &'static str, value: u64) -> KernelResult<()> {
    if value == 0 {
        return Err(InvalidInput::TooSmall {
            what,
            min: 1,
            value: 0,
        });
    }
    Ok(())
}

fn check_same_key(offset: u64, held: &RoutingKey, key: &RoutingKey) -> KernelResult<()> {
    if held == key {
        return Ok(());
    }
    Err(KeyConflict::OtherKey {
        offset,
        held: held.clone().into(),
        key: key.clone().into(),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> RoutingKey {
        RoutingKey::new(k.as_bytes(), true)
    }

    fn window() -> InFlightWindow {
        let limits = WindowLimits {
            max_window_size: 100,
            ..WindowLimits::default()
        };
        InFlightWindow::new(limits, FailurePolicy::default()).unwrap()
    }

    fn ring(ids: &[u64]) -> KeySharedConsumerState {
        let mut s = KeySharedConsumerState::new();
        for &id in ids {
            s.add_consumer(id, vec![]).unwrap();
        }
        s
    }

    #[test]
    fn key_conflicts_name_the_key_and_offsets() {
        let mut w = window();
        w.mark_dispatched(1, &key("a"), 100, 0).unwrap();
        let held = KeyConflict::Held {
            key: key("a").into(),
            holder: 1,
            offset: 2,
        };
        assert_eq!(w.mark_dispatched(2, &key("a"), 100, 0), Err(held.into()));
        w.push_blocked(2, &key("a")).unwrap();
        w.on_ack(1);
        assert_eq!(w.take_unblocked(), Some((2, key("a"))));
        let other = KeyConflict::OtherKey {
            offset: 2,
            held: key("a").into(),
            key: key("b").into(),
        };
        assert_eq!(w.mark_dispatched(2, &key("b"), 100, 0), Err(other.into()));
    }

    #[test]
    fn key_conflicts_show_the_key() {
        assert_eq!(
            InvalidInput::from(KeyConflict::Queued {
                key: key("k").into(),
                offset: 7
            })
            .to_string(),
            r#"older messages of key "k" are queued; offset 7 must queue behind them"#
        );
    }

    #[test]
    fn one_in_flight_per_key() {
        let mut w = window();
        w.mark_dispatched(1, &key("order-123"), 100, 0).unwrap();
        assert!(w.is_key_active(b"order-123"));
        assert!(w.mark_dispatched(2, &key("order-123"), 100, 0).is_err());
        w.push_blocked(2, &key("order-123")).unwrap();
        assert_eq!(w.blocked_count(), 1);
        assert_eq!(w.take_unblocked(), None);
        let (freed, cursor) = w.on_ack(1);
        assert_eq!(freed, Some(key("order-123")));
        assert_eq!(cursor, Some(1));
        assert!(w.is_key_active(b"order-123"));
        assert_eq!(w.take_unblocked(), Some((2, key("order-123"))));
        w.mark_dispatched(2, &key("order-123"), 100, 0).unwrap();
        assert_eq!(w.on_ack(2), (Some(key("order-123")), Some(2)));
        assert!(!w.is_key_active(b"order-123"));
    }

    #[test]
    fn the_cursor_waits_for_gaps() {
        let mut w = window();
        for i in 1..=3 {
            w.mark_dispatched(i, &key(&format!("k{i}")), 100, 0)
                .unwrap();
        }
        assert_eq!(w.on_ack(3).1, None);
        assert_eq!(w.on_ack(1).1, Some(1));
        assert_eq!(w.on_ack(2).1, Some(3));
        assert_eq!(w.on_ack(2), (None, None));
        assert_eq!(w.on_ack(77), (None, None));
    }

    #[test]
    fn skips_count_as_done() {
        let mut w = window();
        assert_eq!(w.on_skipped(1), Ok(Some(1)));
        assert_eq!(w.on_skipped(2), Ok(Some(2)));
        assert_eq!(w.on_skipped(4), Ok(None));
        assert_eq!(w.on_skipped(3), Ok(Some(4)));
        assert_eq!(w.on_skipped(3), Ok(None));
        assert!(w.mark_dispatched(3, &key("a"), 1, 0).is_err());
    }

    #[test]
    fn a_put_back_message_keeps_its_place() {
        let mut w = window();
        w.mark_dispatched(1, &key("a"), 1, 0).unwrap();
        w.push_blocked(2, &key("a")).unwrap();
        w.push_blocked(3, &key("a")).unwrap();
        w.on_ack(1);
        assert_eq!(w.take_unblocked(), Some((2, key("a"))));
        assert_eq!(w.take_unblocked(), None);
        assert!(w.mark_dispatched(4, &key("a"), 1, 0).is_err());
        w.push_blocked(2, &key("a")).unwrap();
        assert_eq!(w.take_unblocked(), Some((2, key("a"))));
        assert!(w.push_blocked(2, &key("b")).is_err());
    }

    #[test]
    fn the_cap_holds() {
        let limits = WindowLimits {
            max_window_size: 100,
            max_per_consumer: 1,
            ..WindowLimits::default()
        };
        let mut w = InFlightWindow::new(limits, FailurePolicy::default()).unwrap();
        w.mark_dispatched(1, &key("a"), 7, 0).unwrap();
        assert!(!w.consumer_has_capacity(7));
        assert!(w.mark_dispatched(2, &key("b"), 7, 0).is_err());
        let state = ring(&[7]);
        let (action, _) = w.dispatch_polled(2, &key("b"), &state, 0).unwrap();
        assert_eq!(action.kind, ActionKind::Block);
        let mut state = ring(&[7]);
        let (actions, _) = w.handle_heartbeat(1, &mut state, &HashSet::new());
        assert!(actions.is_empty());
        w.on_ack(1);
        let (actions, _) = w.handle_heartbeat(2, &mut state, &HashSet::new());
        assert_eq!(actions.len(), 1);
        assert_eq!(actions[0].kind, ActionKind::Deliver);
        assert_eq!(actions[0].offset, Some(2));
    }

    #[test]
    fn timeouts_retry_with_backoff_then_poison() {
        let policy = FailurePolicy {
            max_redelivery_count: 1,
            poison_policy: PoisonPolicy::Drop,
            ..FailurePolicy::default()
        };
        let limits = WindowLimits {
            max_window_size: 100,
            ..WindowLimits::default()
        };
        let mut w = InFlightWindow::new(limits, policy).unwrap();
        let mut state = ring(&[1]);
        let none = HashSet::new();
        w.mark_dispatched(10, &key("a"), 1, 0).unwrap();
        w.push_blocked(11, &key("a")).unwrap();
        let (actions, _) = w.handle_heartbeat(30_000, &mut state, &none);
        assert!(actions.is_empty());
        assert_eq!(
            w.get_entry(10).unwrap().delivery.status,
            DeliveryStatus::WaitingToRetry
        );
        assert_eq!(
            w.get_entry(10).unwrap().delivery.next_redelivery_at_ms,
            31_000
        );
        let (actions, _) = w.handle_heartbeat(31_000, &mut state, &none);
        assert_eq!(actions[0].kind, ActionKind::Redeliver);
        assert_eq!(actions[0].attempt, 2);
        let (actions, cursor) = w.handle_heartbeat(61_000, &mut state, &none);
        let kinds: Vec<_> = actions.iter().map(|a| (a.kind, a.offset)).collect();
        assert_eq!(
            kinds,
            vec![
                (ActionKind::Drop, Some(10)),
                (ActionKind::Deliver, Some(11))
            ]
        );
        assert_eq!(cursor, Some(10));
        assert_eq!(w.on_ack(11).1, Some(11));
    }

    #[test]
    fn exponential_backoff_is_capped() {
        let p = FailurePolicy::default();
        let delays: Vec<u64> = (1..=8).map(|a| p.redelivery_delay_ms(a, None)).collect();
        assert_eq!(
            delays,
            vec![1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]
        );
        assert_eq!(p.redelivery_delay_ms(1, Some(2_500)), 2_500);
        assert_eq!(p.redelivery_delay_ms(1, Some(90_000)), 60_000);
        let fixed = FailurePolicy {
            backoff_strategy: BackoffStrategy::Fixed,
            ..p.clone()
        };
        assert_eq!(fixed.redelivery_delay_ms(7, None), 1_000);
        assert_eq!(p.redelivery_delay_ms(u32::MAX, None), 60_000);
    }

    #[test]
    fn nacks_exhaust_after_the_redelivery_count() {
        let mut w = window();
        let mut state = ring(&[1, 2]);
        w.mark_dispatched(1, &key("a"), 1, 0).unwrap();
        let mut now = 0;
        for attempt in 1..=6u32 {
            assert_eq!(w.get_entry(1).unwrap().delivery.attempt, attempt);
            let status = w.on_nack(1, now, None, Some("nack".into()));
            if attempt == 6 {
                assert_eq!(status, Some(DeliveryStatus::RetryExhausted));
                break;
            }
            assert_eq!(status, Some(DeliveryStatus::WaitingToRetry));
            now += 60_000;
            let (actions, _) = w.handle_heartbeat(now, &mut state, &HashSet::new());
            assert_eq!(actions[0].kind, ActionKind::Redeliver);
        }
        let (actions, _) = w.handle_heartbeat(now, &mut state, &HashSet::new());
        assert!(actions.is_empty());
        assert!(w.is_key_active(b"a"));
        assert_eq!(w.on_nack(99, 0, None, None), None);
    }

    #[test]
    fn dead_letters_carry_the_topic() {
        let policy = FailurePolicy {
            max_redelivery_count: 0,
            poison_policy: PoisonPolicy::DeadLetter("dlq".into()),
            ..FailurePolicy::default()
        };
        let mut w = InFlightWindow::new(WindowLimits::default(), policy).unwrap();
        let mut state = ring(&[1]);
        w.mark_dispatched(5, &key("a"), 1, 0).unwrap();
        w.on_nack(5, 0, None, None);
        let (actions, cursor) = w.handle_heartbeat(0, &mut state, &HashSet::new());
        assert_eq!(actions[0].kind, ActionKind::DeadLetter);
        assert_eq!(actions[0].dead_letter_topic.as_deref(), Some("dlq"));
        assert_eq!(cursor, Some(5));
    }

    #[test]
    fn counts_follow_a_redelivered_message() {
        let mut w = window();
        let mut state = ring(&[1, 2]);
        let k = (0..)
            .map(|i| format!("k{i}"))
            .find(|k| state.select_consumer(k.as_bytes()) == Some(2))
            .unwrap();
        w.mark_dispatched(1, &key(&k), 1, 0).unwrap();
        w.on_nack(1, 0, None, None);
        let (actions, _) = w.handle_heartbeat(1_000, &mut state, &HashSet::new());
        assert_eq!(actions[0].consumer_id, Some(2));
        assert_eq!(w.consumer_in_flight(1), 0);
        assert_eq!(w.consumer_in_flight(2), 1);
    }

    #[test]
    fn eviction_counts_offsets_done() {
        let mut w = window();
        let mut state = ring(&[1, 2]);
        w.mark_dispatched(1, &key("a"), 1, 0).unwrap();
        w.mark_dispatched(2, &key("b"), 2, 0).unwrap();
        let inactive: HashSet<u64> = [1].into();
        for tick in 1..6 {
            let (actions, _) = w.handle_heartbeat(tick, &mut state, &inactive);
            assert!(actions.is_empty());
        }
        let (actions, cursor) = w.handle_heartbeat(6, &mut state, &inactive);
        assert_eq!(actions[0].kind, ActionKind::Evict);
        assert_eq!(cursor, Some(1));
        assert_eq!(state.consumer_ids(), vec![2]);
        assert!(!w.is_key_active(b"a"));
        assert_eq!(w.remove_consumer_entries(2), vec![key("b")]);
        assert_eq!(w.get_safe_cursor(), Some(2));
    }

    #[test]
    fn draining_a_key_counts_its_messages_done() {
        let mut w = window();
        w.mark_dispatched(1, &key("a"), 1, 0).unwrap();
        w.push_blocked(2, &key("a")).unwrap();
        w.push_blocked(3, &key("b")).unwrap();
        w.push_blocked(4, &key("a")).unwrap();
        assert_eq!(w.drain_blocked_for_key(b"a"), (vec![2, 4], None));
        assert_eq!(w.remove_entry(1).map(|e| e.offset), Some(1));
        assert_eq!(w.on_skipped(1), Ok(Some(2)));
        assert_eq!(w.take_unblocked(), Some((3, key("b"))));
        assert_eq!(w.on_skipped(3), Ok(Some(4)));
        assert!(!w.is_key_active(b"b"));
    }

    #[test]
    fn polled_messages_go_where_the_ring_says() {
        let mut w = window();
        let mut state = KeySharedConsumerState::new();
        state
            .add_consumer(1, vec![b"pay*".to_vec().into()])
            .unwrap();
        let (a, _) = w.dispatch_polled(1, &key("payment"), &state, 0).unwrap();
        assert_eq!((a.kind, a.consumer_id), (ActionKind::Deliver, Some(1)));
        let (a, _) = w.dispatch_polled(2, &key("payment"), &state, 0).unwrap();
        assert_eq!(a.kind, ActionKind::Block);
        let (a, cursor) = w.dispatch_polled(3, &key("other"), &state, 0).unwrap();
        assert_eq!((a.kind, cursor), (ActionKind::Skip, None));
        assert!(w.dispatch_polled(3, &key("other"), &state, 0).is_err());
        state.disconnect_all();
        let (actions, _) = w.handle_heartbeat(0, &mut state, &HashSet::new());
        assert!(actions.is_empty());
    }

    #[test]
    fn bad_limits_and_policies() {
        let zero = WindowLimits {
            max_window_size: 0,
            ..WindowLimits::default()
        };
        assert!(InFlightWindow::new(zero, FailurePolicy::default()).is_err());
        let bad = [
            FailurePolicy {
                ack_timeout_ms: 0,
                ..FailurePolicy::default()
            },
            FailurePolicy {
                base_redelivery_delay_ms: 10,
                max_redelivery_delay_ms: 5,
                ..FailurePolicy::default()
            },
            FailurePolicy {
                poison_policy: PoisonPolicy::DeadLetter(" ".into()),
                ..FailurePolicy::default()
            },
        ];
        for policy in bad {
            assert!(policy.validate().is_err());
        }
    }
}
