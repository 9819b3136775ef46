//! The ordering state of Pulsar's `PersistentStickyKeyDispatcherMultipleConsumers` beyond
//! the draining-hashes tracker: the redelivery queue indexed by sticky key hash
//! (`MessageRedeliveryController`), the per-read filter (hashes blocked within one read, a
//! per-read copy of each consumer's permits), consumer permits and the look-ahead limit.
//! Pure and clock-free: the caller passes the selected consumers and permits.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

use strum::IntoStaticStr;

use super::draining::DrainingHashes;
use super::error::{InvalidInput, KernelResult};

/// A message position `(ledger_id, entry_id)`, both in `[0, 2**63 - 1]`.
pub type Position = (i64, i64);

/// Checks a position: Pulsar's redelivery set holds non-negative ledger and entry ids.
pub fn check_position(position: Position, what: &'static str) -> KernelResult<Position> {
    if position.0 < 0 || position.1 < 0 {
        return Err(InvalidInput::NegativePosition { what, position });
    }
    Ok(position)
}

/// Pulsar's `MessageRedeliveryController`: positions awaiting redelivery in position order,
/// each with its sticky key hash when known (0 = not known), and per hash the number of
/// queued positions, so `contains_sticky_key_hash` is O(1).
#[derive(Debug, Clone, Default)]
pub struct MessageRedeliveryController {
    allow_out_of_order_delivery: bool,
    messages: BTreeMap<Position, u16>,
    hashes_ref_count: FxHashMap<u16, u32>,
}

impl MessageRedeliveryController {
    /// An empty queue. `allow_out_of_order_delivery` is the subscription's setting: when true, no
    /// hash waits for its queued entries, and hashes are not counted.
    pub fn new(allow_out_of_order_delivery: bool) -> Self {
        Self {
            allow_out_of_order_delivery,
            ..Self::default()
        }
    }

    /// Whether the subscription allows out-of-order delivery, so that no hash waits for its queued
    /// entries.
    pub fn allow_out_of_order_delivery(&self) -> bool {
        self.allow_out_of_order_delivery
    }

    /// Queues a position; `hash` None is Pulsar's two-argument `add` (hash not known). With
    /// ordering enforced, hash 0 ("not set") is refused, as Pulsar does.
    pub fn add(&mut self, position: Position, hash: Option<u16>) -> KernelResult<()> {
        let position = check_position(position, "position")?;
        let hash = match hash {
            Some(0) if !self.allow_out_of_order_delivery => {
                return Err(InvalidInput::ReservedHash {
                    position: Some(position),
                });
            }
            Some(h) => h,
            None => 0,
        };
        let old = self.messages.entry(position).or_insert(0);
        if hash == 0 || *old == hash {
            return Ok(());
        }
        // Pulsar overwrites the hash of a re-added position without moving its reference
        // count, so the old hash stays blocked forever; the count moves with the hash here.
        let previous = std::mem::replace(old, hash);
        self.release(previous);
        if !self.allow_out_of_order_delivery {
            *self.hashes_ref_count.entry(hash).or_insert(0) += 1;
        }
        Ok(())
    }

    fn release(&mut self, hash: u16) {
        if hash == 0 || self.allow_out_of_order_delivery {
            return;
        }
        if let Some(count) = self.hashes_ref_count.get_mut(&hash) {
            *count -= 1;
            if *count == 0 {
                self.hashes_ref_count.remove(&hash);
            }
        }
    }

    /// Removes a position; false when it was not queued.
    pub fn remove(&mut self, position: Position) -> bool {
        match self.messages.remove(&position) {
            Some(hash) => {
                self.release(hash);
                true
            }
            None => false,
        }
    }

    /// Removes every position at or below `mark` (the mark-delete position); returns how
    /// many went.
    pub fn remove_all_up_to(&mut self, mark: Position) -> usize {
        let above = match mark.1.checked_add(1) {
            Some(next) => self.messages.split_off(&(mark.0, next)),
            None => match mark.0.checked_add(1) {
                Some(ledger) => self.messages.split_off(&(ledger, i64::MIN)),
                None => BTreeMap::new(),
            },
        };
        let removed = std::mem::replace(&mut self.messages, above);
        for &hash in removed.values() {
            self.release(hash);
        }
        removed.len()
    }

    /// The sticky key hash a queued position was added with; None when not queued or not
    /// known.
    pub fn get_hash(&self, position: Position) -> Option<u16> {
        self.messages.get(&position).copied().filter(|&h| h != 0)
    }

    /// Whether a normal read of `hash` must wait for queued entries of the same hash.
    /// Always false when out-of-order delivery is allowed, and for hash 0.
    #[inline]
    pub fn contains_sticky_key_hash(&self, hash: u16) -> bool {
        !self.allow_out_of_order_delivery && hash != 0 && self.hashes_ref_count.contains_key(&hash)
    }

    /// True when any of `hashes` must wait for queued entries
    /// ([`contains_sticky_key_hash`](Self::contains_sticky_key_hash)).
    pub fn contains_sticky_key_hashes(&self, hashes: impl IntoIterator<Item = u16>) -> bool {
        hashes.into_iter().any(|h| self.contains_sticky_key_hash(h))
    }

    /// The lowest queued position, if any.
    pub fn first_position(&self) -> Option<Position> {
        self.messages.keys().next().copied()
    }

    /// How many positions are queued.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// True when no position is queued.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Removes every queued position.
    pub fn clear(&mut self) {
        self.messages.clear();
        self.hashes_ref_count.clear();
    }

    /// Queued positions in order, with their hash (0 = not known).
    pub fn iter(&self) -> impl Iterator<Item = (Position, u16)> + '_ {
        self.messages.iter().map(|(&p, &h)| (p, h))
    }

    /// The distinct known hashes of the queued positions.
    pub fn hashes(&self) -> Vec<u16> {
        let mut out: Vec<u16> = self
            .messages
            .values()
            .copied()
            .filter(|&h| h != 0)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Pulsar's `getMessagesToReplayNow`: queued positions in order that `filter` admits,
    /// at most `max_messages`. Pulsar tests one position before checking the limit, so a
    /// limit of 0 may return one position there; here 0 returns none.
    pub fn messages_to_replay_now(
        &self,
        max_messages: usize,
        mut filter: impl FnMut(Position, u16) -> bool,
    ) -> Vec<Position> {
        let mut out = Vec::new();
        for (position, hash) in self.iter() {
            if out.len() >= max_messages {
                break;
            }
            if filter(position, hash) {
                out.push(position);
            }
        }
        out
    }

    /// Pulsar's `ReplayPositionFilter`: which queued positions a replay read takes now.
    /// A position whose hash is not known is taken (its entry is filtered once read); a
    /// hash with no consumer, a consumer without permits, or a hash draining on another
    /// consumer blocks that hash's later positions too, so they stay in order.
    pub fn replay_positions(
        &self,
        max_messages: usize,
        consumer_of: impl Fn(u16) -> Option<u64>,
        permits_of: impl Fn(u64) -> i64,
        mut tracker: Option<&mut DrainingHashes>,
    ) -> Vec<Position> {
        let mut read = ReadFilter::default();
        self.messages_to_replay_now(max_messages, |_, hash| {
            if hash == 0 {
                return true;
            }
            let decision = read.decide(hash, consumer_of(hash), &permits_of, |consumer| {
                draining_elsewhere(tracker.as_deref_mut(), consumer, hash)
            });
            matches!(decision, Decision::Deliver(_))
        })
    }

    /// Pulsar's `filterAndGroupEntriesForDispatching` for one read, in order: each entry's
    /// decision. Held entries are queued for redelivery (with their hash); delivered
    /// entries of a replay read leave the queue. `consumers[i]` is the consumer the
    /// selector picks for `entries[i]`'s hash. Entries are checked before any change.
    pub fn filter_read(
        &mut self,
        entries: &[(Position, u16)],
        consumers: &[Option<u64>],
        replay: bool,
        permits_of: impl Fn(u64) -> i64,
        tracker: Option<&mut DrainingHashes>,
    ) -> KernelResult<SmallVec<[Decision; 1]>> {
        if entries.len() != consumers.len() {
            return Err(InvalidInput::LengthMismatch {
                names: &["entries", "consumers"],
                lengths: vec![entries.len(), consumers.len()],
            });
        }
        for (i, &(position, hash)) in entries.iter().enumerate() {
            check_position(position, "position").map_err(|e| e.at(i))?;
            if hash == 0 {
                return Err(InvalidInput::ReservedHash {
                    position: Some(position),
                }
                .at(i));
            }
        }
        self.filter_checked(entries, consumers, replay, permits_of, tracker)
    }

    /// [`Self::filter_read`] of a read already checked: one consumer per entry, each
    /// position valid and no hash 0 (the sticky-key dispatcher checks its entries first).
    pub(crate) fn filter_checked(
        &mut self,
        entries: &[(Position, u16)],
        consumers: &[Option<u64>],
        replay: bool,
        permits_of: impl Fn(u64) -> i64,
        mut tracker: Option<&mut DrainingHashes>,
    ) -> KernelResult<SmallVec<[Decision; 1]>> {
        let mut read = ReadFilter::default();
        let mut out = SmallVec::with_capacity(entries.len());
        for (&(position, hash), &consumer) in entries.iter().zip(consumers) {
            let awaiting = !replay && self.contains_sticky_key_hash(hash);
            let decision = read.decide(hash, consumer, &permits_of, |c| {
                if awaiting {
                    Some(Hold::AwaitingRedelivery)
                } else {
                    draining_elsewhere(tracker.as_deref_mut(), c, hash)
                }
            });
            match decision {
                Decision::Deliver(_) if replay => {
                    self.remove(position);
                }
                Decision::Deliver(_) => {}
                _ => self.add(position, Some(hash))?,
            }
            out.push(decision);
        }
        Ok(out)
    }
}

/// Why an entry a consumer could take must wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Entries of the hash wait in the redelivery queue: a normal read's entry goes after them.
    AwaitingRedelivery,
    /// The hash drains on this other consumer (PIP-379) until its pending acks are acked.
    Draining(u64),
}

/// What the dispatcher does with one entry of a read; named as its variant in snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Decision {
    /// Sent to this consumer.
    Deliver(u64),
    /// An earlier entry of the same hash was held in this read.
    BlockedInRead,
    /// No consumer is selected for the hash.
    NoConsumer,
    /// The selected consumer has no permits left in this read.
    NoPermits(u64),
    /// A normal read of a hash with entries awaiting redelivery (selected consumer).
    AwaitingRedelivery(u64),
    /// The hash drains on `draining`, not on the selected `consumer`.
    Draining {
        /// The consumer the selector picked for the hash.
        consumer: u64,
        /// The consumer the hash drains on.
        draining: u64,
    },
}

impl Decision {
    /// The consumer the decision is about: the one sent to, or the one selected.
    pub fn consumer(self) -> Option<u64> {
        match self {
            Decision::Deliver(c) | Decision::NoPermits(c) | Decision::AwaitingRedelivery(c) => {
                Some(c)
            }
            Decision::Draining { consumer, .. } => Some(consumer),
            Decision::BlockedInRead | Decision::NoConsumer => None,
        }
    }

    /// The consumer the hash drains on, for `Draining`.
    pub fn draining(self) -> Option<u64> {
        match self {
            Decision::Draining { draining, .. } => Some(draining),
            _ => None,
        }
    }
}

fn draining_elsewhere(
    tracker: Option<&mut DrainingHashes>,
    consumer: u64,
    hash: u16,
) -> Option<Hold> {
    let tracker = tracker?;
    if !tracker.should_block_sticky_key_hash(consumer, hash) {
        return None;
    }
    let draining = tracker.get_entry(hash).map_or(consumer, |e| e.consumer_id);
    Some(Hold::Draining(draining))
}

/// The state of one read: hashes held so far (their later entries are held too, to keep
/// order) and each consumer's permits, taken once per read and spent one per entry.
#[derive(Debug, Default)]
pub struct ReadFilter {
    blocked: FxHashSet<u16>,
    permits: ReadPermits,
}

/// Each consumer's permits left in one read. Most reads go to a few consumers, found by a
/// scan with nothing allocated (a one-entry read's map was a tenth of its time); the
/// consumers past the first few go to a hash map.
#[derive(Debug, Default)]
struct ReadPermits {
    few: SmallVec<[(u64, i64); ReadPermits::FEW]>,
    many: FxHashMap<u64, i64>,
}

impl ReadPermits {
    const FEW: usize = 8;

    /// The consumer's permits, `taken(consumer)` the first time it is asked for.
    fn entry(&mut self, consumer: u64, taken: impl FnOnce(u64) -> i64) -> &mut i64 {
        match self.few.iter().position(|&(c, _)| c == consumer) {
            Some(at) => &mut self.few[at].1,
            None if self.few.len() < Self::FEW => {
                let at = self.few.len();
                self.few.push((consumer, taken(consumer)));
                &mut self.few[at].1
            }
            None => self.many.entry(consumer).or_insert_with(|| taken(consumer)),
        }
    }
}

impl ReadFilter {
    /// One entry's decision; `hold(consumer)` is asked only when the consumer has a permit,
    /// since asking the draining tracker counts a blocked attempt.
    pub fn decide(
        &mut self,
        hash: u16,
        consumer: Option<u64>,
        permits_of: impl Fn(u64) -> i64,
        hold: impl FnOnce(u64) -> Option<Hold>,
    ) -> Decision {
        if self.blocked.contains(&hash) {
            return Decision::BlockedInRead;
        }
        let decision = match consumer {
            None => Decision::NoConsumer,
            Some(c) => {
                let permits = self.permits.entry(c, &permits_of);
                if *permits <= 0 {
                    Decision::NoPermits(c)
                } else {
                    match hold(c) {
                        None => {
                            *permits -= 1;
                            Decision::Deliver(c)
                        }
                        Some(Hold::AwaitingRedelivery) => Decision::AwaitingRedelivery(c),
                        Some(Hold::Draining(d)) => Decision::Draining {
                            consumer: c,
                            draining: d,
                        },
                    }
                }
            }
        };
        if !matches!(decision, Decision::Deliver(_)) {
            self.blocked.insert(hash);
        }
        decision
    }
}

/// What Pulsar's dispatcher knows of a consumer's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerPermits {
    /// Flow permits left (messages); may be negative after a batch overshoots.
    pub available_permits: i64,
    /// The consumer's unacked-messages limit; 0 or less means none.
    pub max_unacked_messages: i64,
    /// The consumer's unacked messages now.
    pub unacked_messages: i64,
    /// Average messages per entry; below 1 counts as 1.
    pub avg_messages_per_entry: i64,
    /// False while the consumer's connection closes: it gets nothing.
    pub active: bool,
}

/// The dispatcher's `getAvailablePermits(consumer)`: how many entries it may send the
/// consumer now. With an unacked limit, the entries that fit under it at the average
/// batch size (rounded up) cap the flow permits.
pub fn available_permits(c: ConsumerPermits) -> i64 {
    if !c.active {
        return 0;
    }
    let available = c.available_permits.max(0);
    if available == 0 || c.max_unacked_messages <= 0 {
        return available;
    }
    let room = c
        .max_unacked_messages
        .saturating_sub(c.unacked_messages)
        .max(0);
    if room == 0 {
        return 0;
    }
    let avg = c.avg_messages_per_entry.max(1);
    available.min(room / avg + i64::from(room % avg != 0))
}

/// The settings behind Pulsar's `getEffectiveLookAheadLimit`; 0 or less disables a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookAheadConfig {
    /// Pulsar's `keySharedLookAheadMsgInReplayThresholdPerConsumer`, in entries: times the
    /// consumer count, it is the limit unless `per_subscription` is lower; 0 or less leaves
    /// `per_subscription` alone. Default 2000.
    pub per_consumer: i64,
    /// Pulsar's `keySharedLookAheadMsgInReplayThresholdPerSubscription`, in entries: the
    /// subscription's limit where it is lower. Default 20000.
    pub per_subscription: i64,
    /// Pulsar's `maxUnackedMessagesPerConsumer`, in messages: where neither threshold gives a
    /// limit, this times the consumer count or `max_unacked_messages_per_subscription`,
    /// whichever is lower (0 or less bounds nothing). Default 50000.
    pub max_unacked_messages_per_consumer: i64,
    /// Pulsar's `maxUnackedMessagesPerSubscription`, in messages: the other bound where neither
    /// threshold gives a limit (0 or less bounds nothing). Default 200000.
    pub max_unacked_messages_per_subscription: i64,
}

/// Pulsar's defaults: `keySharedLookAheadMsgInReplayThresholdPerConsumer` 2000,
/// `...PerSubscription` 20000, `maxUnackedMessagesPerConsumer` 50000,
/// `maxUnackedMessagesPerSubscription` 200000.
impl Default for LookAheadConfig {
    fn default() -> Self {
        Self {
            per_consumer: 2000,
            per_subscription: 20000,
            max_unacked_messages_per_consumer: 50000,
            max_unacked_messages_per_subscription: 200_000,
        }
    }
}

/// The most entries the redelivery queue may hold before normal reads stop. Pulsar
/// computes this in 32-bit ints, so a large per-consumer product wraps; it saturates at
/// `i32::MAX` here instead.
pub fn effective_look_ahead_limit(config: LookAheadConfig, consumer_count: u64) -> i64 {
    let cap = i64::from(i32::MAX);
    let count = i64::try_from(consumer_count).unwrap_or(i64::MAX);
    let times = |limit: i64| limit.saturating_mul(count).min(cap);
    let mut limit = if config.per_consumer <= 0 {
        config.per_subscription
    } else {
        let per_consumers = times(config.per_consumer);
        if config.per_subscription > 0 && config.per_subscription < per_consumers {
            config.per_subscription
        } else {
            per_consumers
        }
    };
    if limit <= 0 {
        let positive_or_max = |v: i64| if v <= 0 { cap } else { v.min(cap) };
        let per_subscription = positive_or_max(config.max_unacked_messages_per_subscription);
        let by_consumers = positive_or_max(times(config.max_unacked_messages_per_consumer));
        limit = per_subscription.min(by_consumers);
    }
    limit.min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn controller(ooo: bool) -> MessageRedeliveryController {
        MessageRedeliveryController::new(ooo)
    }

    #[test]
    fn add_and_remove_as_pulsar_test_add_and_remove() {
        for ooo in [true, false] {
            let mut c = controller(ooo);
            c.add((1, 1), None).unwrap();
            c.add((1, 2), None).unwrap();
            assert_eq!(c.len(), 2);
            assert_eq!(c.get_hash((1, 1)), None);
            assert!(c.remove((1, 1)) && c.remove((1, 2)));
            assert!(c.is_empty());
            c.add((2, 1), Some(100)).unwrap();
            c.add((2, 2), Some(101)).unwrap();
            c.add((2, 3), Some(101)).unwrap();
            assert_eq!(c.get_hash((2, 3)), Some(101));
            assert_eq!(c.contains_sticky_key_hash(100), !ooo);
            c.remove((2, 1));
            c.remove((2, 2));
            assert!(!c.contains_sticky_key_hash(100));
            assert_eq!(c.contains_sticky_key_hash(101), !ooo);
            c.clear();
            assert!(c.is_empty() && !c.contains_sticky_key_hash(101));
            for (p, h) in [
                ((2, 2), 201),
                ((1, 3), 100),
                ((3, 1), 300),
                ((2, 1), 200),
                ((3, 2), 301),
                ((1, 2), 101),
                ((1, 1), 100),
            ] {
                c.add(p, Some(h)).unwrap();
            }
            assert_eq!(c.remove_all_up_to((1, 3)), 3);
            assert_eq!(c.len(), 4);
            assert!(!c.contains_sticky_key_hash(100));
            assert_eq!(c.contains_sticky_key_hash(200), !ooo);
            c.remove_all_up_to((3, 1));
            assert_eq!(c.len(), 1);
            assert_eq!(c.get_hash((3, 2)), Some(301));
            c.remove_all_up_to((5, 10));
            assert!(c.is_empty() && !c.contains_sticky_key_hash(301));
        }
    }

    #[test]
    fn hash_zero_is_refused_when_ordered_and_unknown_otherwise() {
        let mut c = controller(false);
        assert!(c.add((1, 1), Some(0)).is_err());
        assert!(c.is_empty());
        let mut c = controller(true);
        c.add((1, 1), Some(0)).unwrap();
        assert_eq!((c.len(), c.get_hash((1, 1))), (1, None));
    }

    #[test]
    fn re_adding_with_another_hash_moves_the_count() {
        let mut c = controller(false);
        c.add((1, 1), Some(5)).unwrap();
        c.add((1, 1), Some(6)).unwrap();
        c.add((1, 1), None).unwrap();
        assert!(!c.contains_sticky_key_hash(5));
        assert!(c.contains_sticky_key_hash(6));
        assert_eq!(c.get_hash((1, 1)), Some(6));
        c.remove((1, 1));
        assert!(!c.contains_sticky_key_hash(6));
    }

    #[test]
    fn remove_all_up_to_the_largest_positions() {
        let mut c = controller(false);
        c.add((i64::MAX, i64::MAX), Some(1)).unwrap();
        c.add((3, i64::MAX), Some(2)).unwrap();
        c.add((4, 0), Some(3)).unwrap();
        assert_eq!(c.remove_all_up_to((3, i64::MAX)), 1);
        assert_eq!(c.remove_all_up_to((i64::MAX, i64::MAX)), 2);
        assert!(c.is_empty() && c.hashes_ref_count.is_empty());
        assert!(c.add((-1, 0), Some(1)).is_err());
    }

    #[test]
    fn replay_now_is_ordered_and_limited() {
        let mut c = controller(false);
        for p in [(2, 2), (1, 3), (3, 1), (2, 1), (3, 2), (1, 2), (1, 1)] {
            c.add(p, None).unwrap();
        }
        assert_eq!(
            c.messages_to_replay_now(3, |_, _| true),
            vec![(1, 1), (1, 2), (1, 3)]
        );
        assert_eq!(c.messages_to_replay_now(0, |_, _| true), vec![]);
        assert_eq!(c.first_position(), Some((1, 1)));
    }

    #[test]
    fn a_held_hash_holds_its_later_entries_in_the_read() {
        let mut c = controller(false);
        let entries = [((1, 1), 7), ((1, 2), 8), ((1, 3), 7), ((1, 4), 9)];
        let consumers = [Some(1), Some(2), Some(2), None];
        let permits = |c: u64| if c == 1 { 0 } else { 10 };
        let d = c
            .filter_read(&entries, &consumers, false, permits, None)
            .unwrap();
        assert_eq!(
            d.as_slice(),
            [
                Decision::NoPermits(1),
                Decision::Deliver(2),
                Decision::BlockedInRead,
                Decision::NoConsumer
            ]
        );
        assert_eq!(c.len(), 3);
        // A later normal read of hash 7 waits for the queued entries.
        let d = c
            .filter_read(&[((1, 5), 7)], &[Some(2)], false, |_| 10, None)
            .unwrap();
        assert_eq!(d.as_slice(), [Decision::AwaitingRedelivery(2)]);
        // The replay read delivers and dequeues.
        let d = c
            .filter_read(&[((1, 1), 7)], &[Some(2)], true, |_| 10, None)
            .unwrap();
        assert_eq!(d.as_slice(), [Decision::Deliver(2)]);
        assert_eq!(c.get_hash((1, 1)), None);
    }

    #[test]
    fn permits_are_spent_one_per_entry_in_a_read() {
        let mut c = controller(false);
        let entries = [((1, 1), 1), ((1, 2), 2), ((1, 3), 3)];
        let d = c
            .filter_read(&entries, &[Some(4); 3], false, |_| 2, None)
            .unwrap();
        assert_eq!(d[2], Decision::NoPermits(4));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn permits_are_kept_per_consumer_past_the_first_few() {
        // Twice as many consumers as are scanned before the map: each has one permit, so
        // each one's first entry goes and its second waits.
        let consumers: Vec<Option<u64>> = (0..2 * ReadPermits::FEW as u64)
            .flat_map(|c| [Some(c), Some(c)])
            .collect();
        let entries: Vec<(Position, u16)> = (0..consumers.len())
            .map(|i| ((1, i as i64), i as u16 + 1))
            .collect();
        let d = controller(false)
            .filter_read(&entries, &consumers, false, |_| 1, None)
            .unwrap();
        for (pair, c) in d.chunks(2).zip(0..) {
            assert_eq!(pair, [Decision::Deliver(c), Decision::NoPermits(c)]);
        }
    }

    #[test]
    fn decisions_are_named_with_their_consumers() {
        let draining = Decision::Draining {
            consumer: 2,
            draining: 1,
        };
        let shown = |d: Decision| (<&str>::from(d), d.consumer(), d.draining());
        assert_eq!(shown(draining), ("draining", Some(2), Some(1)));
        assert_eq!(
            shown(Decision::AwaitingRedelivery(3)),
            ("awaiting_redelivery", Some(3), None)
        );
        assert_eq!(
            shown(Decision::BlockedInRead),
            ("blocked_in_read", None, None)
        );
    }

    #[test]
    fn draining_blocks_other_consumers_and_counts_the_attempt() {
        let mut t = DrainingHashes::new();
        t.add_entry(1, 7).unwrap();
        let mut c = controller(false);
        let d = c
            .filter_read(&[((1, 1), 7)], &[Some(2)], false, |_| 1, Some(&mut t))
            .unwrap();
        assert_eq!(
            d.as_slice(),
            [Decision::Draining {
                consumer: 2,
                draining: 1
            }]
        );
        assert_eq!(t.get_entry(7).unwrap().blocked_count, 1);
        let replay = c.replay_positions(10, |_| Some(1), |_| 1, Some(&mut t));
        assert_eq!(replay, vec![(1, 1)]);
        assert!(t.get_entry(7).is_none());
    }

    #[test]
    fn replay_positions_skip_blocked_hashes_and_spend_permits() {
        let mut c = controller(false);
        c.add((1, 1), Some(7)).unwrap();
        c.add((1, 2), Some(8)).unwrap();
        c.add((1, 3), Some(7)).unwrap();
        c.add((1, 4), None).unwrap();
        c.add((1, 5), Some(8)).unwrap();
        let consumer_of = |h: u16| if h == 7 { Some(1) } else { Some(2) };
        let permits = |c: u64| if c == 1 { 0 } else { 1 };
        let got = c.replay_positions(10, consumer_of, permits, None);
        assert_eq!(got, vec![(1, 2), (1, 4)]);
    }

    #[test]
    fn bad_reads_change_nothing() {
        let mut c = controller(false);
        assert!(c
            .filter_read(&[((1, 1), 0)], &[Some(1)], false, |_| 1, None)
            .is_err());
        assert!(c
            .filter_read(&[((1, 1), 1)], &[], false, |_| 1, None)
            .is_err());
        assert!(c.is_empty());
    }

    #[test]
    fn available_permits_as_pulsar() {
        let p = |available, max_unacked, unacked, avg| ConsumerPermits {
            available_permits: available,
            max_unacked_messages: max_unacked,
            unacked_messages: unacked,
            avg_messages_per_entry: avg,
            active: true,
        };
        assert_eq!(available_permits(p(1000, 0, 5000, 1)), 1000);
        assert_eq!(available_permits(p(-3, 0, 0, 1)), 0);
        assert_eq!(available_permits(p(1000, 100, 100, 1)), 0);
        assert_eq!(available_permits(p(1000, 100, 90, 1)), 10);
        assert_eq!(available_permits(p(1000, 100, 90, 3)), 4);
        assert_eq!(available_permits(p(2, 100, 0, 0)), 2);
        let inactive = ConsumerPermits {
            active: false,
            ..p(10, 0, 0, 1)
        };
        assert_eq!(available_permits(inactive), 0);
    }

    #[test]
    fn effective_look_ahead_limit_as_pulsar_test_get_effective_look_ahead_limit() {
        let cfg = |per_consumer, per_subscription, max_c, max_s| LookAheadConfig {
            per_consumer,
            per_subscription,
            max_unacked_messages_per_consumer: max_c,
            max_unacked_messages_per_subscription: max_s,
        };
        let d = LookAheadConfig::default();
        let m = d.max_unacked_messages_per_consumer;
        let s = d.max_unacked_messages_per_subscription;
        assert_eq!(effective_look_ahead_limit(cfg(5, 100, m, s), 5), 25);
        assert_eq!(effective_look_ahead_limit(cfg(5, 100, m, s), 100), 100);
        assert_eq!(effective_look_ahead_limit(cfg(5, 0, m, s), 100), 500);
        assert_eq!(effective_look_ahead_limit(cfg(0, 6000, m, s), 100), 6000);
        let max = i64::from(i32::MAX);
        assert_eq!(effective_look_ahead_limit(cfg(0, 0, 0, 0), 100), max);
        assert_eq!(effective_look_ahead_limit(cfg(0, 0, 1, 10), 100), 10);
        assert_eq!(effective_look_ahead_limit(cfg(0, 0, 22, 0), 100), 2200);
        assert_eq!(effective_look_ahead_limit(cfg(i64::MAX, 0, 0, 0), 3), max);
        assert_eq!(effective_look_ahead_limit(cfg(0, 0, 1 << 30, 0), 8), max);
    }
}
