//! The dispatchers of a Key_Shared subscription, over one selector interface: the sticky-key
//! dispatcher of Pulsar's `PersistentStickyKeyDispatcherMultipleConsumers` (PIP-379, with
//! its redelivery queue, permits and look-ahead limit) and the entry-bucket dispatcher of
//! PIP-486. Both connect and disconnect consumers by the one rule here.
//!
//! A dispatcher's parts (selector, pending acks, draining tracker, redelivery queue) are
//! each shared with their own users, so these functions take them as the caller holds
//! them: `acks` is every connected consumer's pending acks, each a `&mut PendingAcks` or a
//! lock guard. Notices for the unblocking handler are returned, for the caller to deliver
//! with nothing held.

pub mod entry_bucket;
pub mod sticky;

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};

use smallvec::SmallVec;

use super::draining::DrainingHashes;
use super::entry_bucket::EntryBucketSelector;
use super::error::{Duplicate, InvalidInput, KernelResult, NotFound, StateError, StateResult};
use super::handoff::register_draining_hashes;
use super::impacted::ImpactedConsumers;
use super::pending_acks::{keeps_hash, PendingAck, PendingAcks};
use super::redelivery::{check_position, MessageRedeliveryController, Position};
use super::ring::ConsistentHashingSelector;

/// What a dispatcher asks of its selector: the consumer serving a sticky key hash, and the
/// ranges each consumer lost and gained when one connects or disconnects.
pub trait Selector {
    /// The consumer serving `hash`; None while no consumer is connected.
    fn select(&self, hash: u16) -> Option<u64>;

    /// Connects a consumer; an id already connected is an error and changes nothing.
    fn add_consumer(&mut self, consumer: u64, name: &[u8]) -> StateResult<ImpactedConsumers>;

    /// Disconnects a consumer; one not connected changes nothing and impacts nobody.
    fn remove_consumer(&mut self, consumer: u64) -> ImpactedConsumers;
}

/// A ring built not to report impacted consumers impacts nobody: nothing drains.
impl Selector for ConsistentHashingSelector {
    fn select(&self, hash: u16) -> Option<u64> {
        ConsistentHashingSelector::select(self, hash)
    }

    fn add_consumer(&mut self, consumer: u64, name: &[u8]) -> StateResult<ImpactedConsumers> {
        Ok(ConsistentHashingSelector::add_consumer(self, consumer, name)?.unwrap_or_default())
    }

    fn remove_consumer(&mut self, consumer: u64) -> ImpactedConsumers {
        ConsistentHashingSelector::remove_consumer(self, consumer).unwrap_or_default()
    }
}

/// Consumer names are text here (ordered as Java strings): a name that is not UTF-8 is an
/// error.
impl Selector for EntryBucketSelector {
    fn select(&self, hash: u16) -> Option<u64> {
        EntryBucketSelector::select(self, hash)
    }

    fn add_consumer(&mut self, consumer: u64, name: &[u8]) -> StateResult<ImpactedConsumers> {
        let name = std::str::from_utf8(name).map_err(|error| InvalidInput::NotUtf8 {
            what: "consumer name",
            error,
        })?;
        EntryBucketSelector::add_consumer(self, consumer, name)
    }

    fn remove_consumer(&mut self, consumer: u64) -> ImpactedConsumers {
        EntryBucketSelector::remove_consumer(self, consumer)
    }
}

/// A dispatcher's shared parts, borrowed for one call, as the caller holds them: `acks`
/// holds every connected consumer's pending acks, one map per consumer (a consumer is
/// connected when its map is there); `redelivery` is where a leaving consumer's acks wait
/// ([`NoQueue`] for a dispatcher that hands them back instead).
pub struct Parts<'a, S, A, Q = NoQueue> {
    /// The selector that maps sticky key hashes to consumers.
    pub selector: &'a mut S,
    /// Every connected consumer's pending acks, one map per consumer.
    pub acks: &'a mut [A],
    /// Where a leaving consumer's pending acks wait for redelivery ([`NoQueue`] for none).
    pub redelivery: &'a mut Q,
    /// The dispatcher's draining hashes (PIP-379).
    pub tracker: &'a mut DrainingHashes,
}

/// Where a leaving consumer's pending acks wait for redelivery, if anywhere.
pub trait Queue {
    /// The redelivery queue, or None when a leaving consumer's pending acks go back to the caller
    /// alone.
    fn queue(&mut self) -> Option<&mut MessageRedeliveryController>;
}

/// The sticky-key dispatcher's redelivery queue.
impl Queue for MessageRedeliveryController {
    fn queue(&mut self) -> Option<&mut MessageRedeliveryController> {
        Some(self)
    }
}

/// No redelivery queue: a leaving consumer's pending acks go back to the caller alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoQueue;

impl Queue for NoQueue {
    fn queue(&mut self) -> Option<&mut MessageRedeliveryController> {
        None
    }
}

/// What every dispatcher does with consumers, by the one rule ([`connect`],
/// [`disconnect`]); a dispatcher with state of its own per consumer keeps it in step.
pub trait Dispatcher<S: Selector> {
    /// Where a leaving consumer's pending acks wait: [`MessageRedeliveryController`] for the
    /// sticky-key dispatcher, [`NoQueue`] for the entry-bucket one.
    type Queue: Queue;

    /// Connects a consumer whose pending acks the caller adds to `parts.acks` afterwards;
    /// returns the notice for the unblocking handler. On an error nothing changes.
    fn add_consumer<A: DerefMut<Target = PendingAcks>>(
        &mut self,
        parts: Parts<'_, S, A, Self::Queue>,
        consumer: u64,
        name: &[u8],
    ) -> StateResult<Option<i32>> {
        connect(parts, consumer, name)
    }

    /// Disconnects a consumer (NotFound if not connected); the caller drops its map from
    /// `parts.acks` afterwards.
    fn remove_consumer<A: DerefMut<Target = PendingAcks>>(
        &mut self,
        parts: Parts<'_, S, A, Self::Queue>,
        consumer: u64,
    ) -> StateResult<Removed> {
        disconnect(parts, consumer)
    }
}

/// Connects a consumer; the ranges it takes from others are withheld until their pending
/// acks drain. Returns the notice for the unblocking handler. On an error (an id already
/// connected, a hash that cannot be registered) nothing changes.
pub fn connect<S: Selector, A: Deref<Target = PendingAcks>, Q>(
    parts: Parts<'_, S, A, Q>,
    consumer: u64,
    name: &[u8],
) -> StateResult<Option<i32>> {
    let Parts {
        selector,
        acks,
        tracker,
        ..
    } = parts;
    let impacted = selector.add_consumer(consumer, name)?;
    hand_off(&impacted, consumer, acks, tracker).map_err(|e| {
        // The hand-off checks before it changes the tracker: only the selector to undo.
        selector.remove_consumer(consumer);
        e.into()
    })
}

/// What disconnecting a consumer gave back: its pending acks, in order, and the notices for
/// the unblocking handler, in order.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Removed {
    /// The consumer's pending acks, in (ledger id, entry id) order.
    pub acks: Vec<PendingAck>,
    /// The notices for the unblocking handler, in order: -1
    /// ([`UNBLOCKED_IN_BATCH`](crate::draining::UNBLOCKED_IN_BATCH)) for closing the
    /// consumer's map, then for handing its ranges off, each when it unblocked a hash.
    pub notices: Vec<i32>,
}

/// Disconnects a consumer: closes its map, taking its pending acks; clears the tracker when
/// it was the last consumer; queues the acks for redelivery when there is a queue (which
/// empties instead when no consumer is left, as Pulsar rewinds the cursor then); hands its
/// ranges to the others; forgets its stats.
///
/// A consumer that is not connected (no map in `parts.acks`) is NotFound, and nothing
/// changes. Pulsar logs that case as an error ("Trying to remove a non-connected
/// consumer": a broker bug it survives, not a call it expects); here it is the caller's
/// mistake, said rather than hidden, and a caller that means "if connected" asks first.
/// A queued position must be non-negative: one that is not fails before anything changes.
pub fn disconnect<S: Selector, A: DerefMut<Target = PendingAcks>, Q: Queue>(
    parts: Parts<'_, S, A, Q>,
    consumer: u64,
) -> StateResult<Removed> {
    let Parts {
        selector,
        acks,
        redelivery,
        tracker,
    } = parts;
    let last = acks.len() == 1;
    let Some(own) = acks.iter_mut().find(|a| a.consumer_id() == consumer) else {
        return Err(not_connected(consumer));
    };
    let queue = redelivery.queue();
    if queue.is_some() && !last {
        for ack in own.for_each() {
            check_position((ack.ledger_id, ack.entry_id), "a pending ack's position")?;
        }
    }
    let (taken, closed) = own.for_each_and_clear(true, Some(tracker))?;
    let impacted = selector.remove_consumer(consumer);
    if last {
        tracker.clear();
    }
    if let Some(queue) = queue {
        requeue(queue, &taken, last)?;
    }
    let handed = hand_off(&impacted, consumer, acks, tracker)?;
    tracker.consumer_removed(consumer);
    Ok(Removed {
        acks: taken,
        notices: [closed, handed].into_iter().flatten().collect(),
    })
}

/// The one error for a consumer a dispatcher does not have.
pub fn not_connected(consumer: u64) -> StateError {
    NotFound::Consumer {
        consumer,
        status: "connected",
    }
    .into()
}

fn requeue(
    queue: &mut MessageRedeliveryController,
    acks: &[PendingAck],
    last: bool,
) -> KernelResult<()> {
    if last {
        queue.clear();
        return Ok(());
    }
    acks.iter().try_for_each(|a| {
        let hash = Some(a.sticky_key_hash).filter(|&h| h != 0);
        queue.add((a.ledger_id, a.entry_id), hash)
    })
}

/// A dispatch's entries, checked before anything changes: each position at most once (a
/// Pulsar read holds an entry once, a replay read taking a set of positions; twice, it
/// would be sent and charged twice but pending once), and none pending on the consumer it
/// goes to under another sticky key hash. An entry's key fixes its hash, so another hash
/// is a caller's error, and Pulsar's `PendingAcksMap`, which overwrites, never sees one:
/// here the overwrite would leave the old hash draining (its bucket withheld) for ever, as
/// the ack would take its reference off the new hash. Each item is `(position, hash, the
/// pending acks of the consumer it goes to)`; an error names the item.
pub fn check_positions<'a>(
    entries: impl IntoIterator<Item = (Position, u16, Option<&'a PendingAcks>)>,
) -> KernelResult<()> {
    let entries = entries.into_iter();
    let mut seen = Seen::with_capacity(entries.size_hint().0);
    for (i, (position, hash, pending)) in entries.enumerate() {
        if let Some(first) = seen.insert(position, i) {
            return Err(InvalidInput::from(Duplicate::Position { position, first }).at(i));
        }
        if let Some(pending) = pending {
            check_pending(position, hash, pending).map_err(|e| e.at(i))?;
        }
    }
    Ok(())
}

/// The positions of a batch seen so far. A read's positions ascend, and ascending ones
/// cannot repeat: until one does not, only the last is compared; from then on every
/// position goes into a map (those before it first), which names the first index of a
/// repeated one.
struct Seen {
    ascending: SmallVec<[Position; 1]>,
    map: Option<HashMap<Position, usize>>,
}

impl Seen {
    fn with_capacity(len: usize) -> Self {
        Self {
            ascending: SmallVec::with_capacity(len),
            map: None,
        }
    }

    /// Records position `i`; the index of its first occurrence if it was seen already.
    #[inline]
    fn insert(&mut self, position: Position, i: usize) -> Option<usize> {
        if let Some(map) = &mut self.map {
            return map.insert(position, i);
        }
        if self.ascending.last().is_none_or(|&last| last < position) {
            self.ascending.push(position);
            return None;
        }
        let before = std::mem::take(&mut self.ascending);
        let mut map: HashMap<Position, usize> = before.into_iter().zip(0..).collect();
        let first = map.insert(position, i);
        self.map = Some(map);
        first
    }
}

/// An entry about to be dispatched under `hash` is not pending in `pending` (the map of
/// the consumer it goes to) under another hash; see [`check_positions`].
pub fn check_pending(position: Position, hash: u16, pending: &PendingAcks) -> KernelResult<()> {
    if pending.last_position().is_none_or(|last| position > last) {
        return Ok(());
    }
    let held = pending.get(position.0, position.1).map(|(_, h)| h);
    keeps_hash(position, hash, held, pending.consumer_id())
}

/// The one hand-off rule over every connected consumer's acks; `changed` (the consumer
/// added or removed) is skipped, as in Pulsar.
fn hand_off<A: Deref<Target = PendingAcks>>(
    impacted: &ImpactedConsumers,
    changed: u64,
    acks: &[A],
    tracker: &mut DrainingHashes,
) -> KernelResult<Option<i32>> {
    let maps: Vec<&PendingAcks> = acks.iter().map(|a| &**a).collect();
    Ok(register_draining_hashes(impacted, Some(changed), &maps, tracker)?.notice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buckets::HashRange;

    fn ring() -> ConsistentHashingSelector {
        ConsistentHashingSelector::new(16, true, 0xFFFF).unwrap()
    }

    fn ack(entry_id: i64, hash: u16) -> PendingAck {
        PendingAck {
            ledger_id: 1,
            entry_id,
            batch_size: 1,
            sticky_key_hash: hash,
        }
    }

    /// Both selectors answer through the trait as through their own methods.
    #[test]
    fn both_selectors_answer_the_same_questions() {
        fn exercise<S: Selector>(s: &mut S) -> (Option<u64>, bool, bool) {
            let none = s.select(7);
            let first = s.add_consumer(1, b"a").unwrap();
            assert!(s.add_consumer(1, b"a").is_err());
            let joined = s.add_consumer(2, b"b").unwrap();
            assert_eq!(s.remove_consumer(9), ImpactedConsumers::default());
            (none, first.is_empty(), joined.removed.contains_key(&1))
        }
        assert_eq!(exercise(&mut ring()), (None, true, true));
        let mut buckets = EntryBucketSelector::new(&[0x8000]);
        assert_eq!(exercise(&mut buckets), (None, true, true));
        assert!(Selector::add_consumer(&mut buckets, 3, b"\xff").is_err());
        assert_eq!(buckets.consumer_ids(), vec![1, 2]);
    }

    /// `connect` over the consumers in `acks`, without a queue.
    fn add<S: Selector>(
        s: &mut S,
        consumer: u64,
        acks: &mut [&mut PendingAcks],
        tracker: &mut DrainingHashes,
    ) -> StateResult<Option<i32>> {
        let parts = Parts {
            selector: s,
            acks,
            redelivery: &mut NoQueue,
            tracker,
        };
        connect(parts, consumer, b"c")
    }

    /// `disconnect` over the consumers in `acks`, with the queue given.
    fn remove<S: Selector, Q: Queue>(
        s: &mut S,
        consumer: u64,
        acks: &mut [&mut PendingAcks],
        tracker: &mut DrainingHashes,
        redelivery: &mut Q,
    ) -> StateResult<Removed> {
        let parts = Parts {
            selector: s,
            acks,
            redelivery,
            tracker,
        };
        disconnect(parts, consumer)
    }

    #[test]
    fn a_ring_that_reports_no_impact_drains_nothing() {
        let mut quiet = ConsistentHashingSelector::new(16, false, 0xFFFF).unwrap();
        let mut tracker = DrainingHashes::new();
        let mut a = PendingAcks::new(1);
        add(&mut quiet, 1, &mut [], &mut tracker).unwrap();
        a.add_pending_ack_if_allowed(ack(0, 5), Some(&tracker))
            .unwrap();
        add(&mut quiet, 2, &mut [&mut a], &mut tracker).unwrap();
        assert!(tracker.is_empty());
    }

    #[test]
    fn disconnecting_queues_the_acks_and_hands_the_ranges_back() {
        let mut s = EntryBucketSelector::new(&[0x8000]);
        let mut tracker = DrainingHashes::new();
        let mut queue = MessageRedeliveryController::new(false);
        let (mut a, mut b) = (PendingAcks::new(1), PendingAcks::new(2));
        add(&mut s, 1, &mut [], &mut tracker).unwrap();
        a.add_pending_ack_if_allowed(ack(0, 0x8000), Some(&tracker))
            .unwrap();
        a.add_pending_ack_if_allowed(ack(1, 1), Some(&tracker))
            .unwrap();
        add(&mut s, 2, &mut [&mut a], &mut tracker).unwrap();
        assert_eq!(tracker.get_entry(0x8000).unwrap().consumer_id, 1);
        // The drainer leaves: its acks wait for redelivery, and nothing drains any more.
        let removed = remove(&mut s, 1, &mut [&mut a, &mut b], &mut tracker, &mut queue);
        assert_eq!(removed.unwrap().acks, vec![ack(0, 0x8000), ack(1, 1)]);
        assert!(tracker.is_empty() && a.is_closed());
        let queued: Vec<_> = queue.iter().collect();
        assert_eq!(queued, vec![((1, 0), 0x8000), ((1, 1), 1)]);
        // The last consumer leaving empties the queue instead.
        b.add_pending_ack_if_allowed(ack(2, 9), None).unwrap();
        let removed = remove(&mut s, 2, &mut [&mut b], &mut tracker, &mut queue);
        assert_eq!(removed.unwrap().acks, vec![ack(2, 9)]);
        assert!(queue.is_empty());
        assert_eq!(s.select(1), None);
    }

    #[test]
    fn an_entry_pending_under_another_hash_is_refused_wherever_it_is() {
        let mut a = PendingAcks::new(1);
        assert!(check_pending((1, 0), 9, &a).is_ok());
        for entry_id in [0, 5] {
            a.add_pending_ack_if_allowed(ack(entry_id, 7), None)
                .unwrap();
        }
        for (position, hash) in [((1, 0), 9), ((1, 5), 9)] {
            let err = check_pending(position, hash, &a).unwrap_err();
            assert!(
                err.to_string().contains("under sticky key hash 7, not 9"),
                "{err}"
            );
        }
        for (position, hash) in [((1, 5), 7), ((1, 3), 9), ((1, 6), 9), ((2, 0), 9)] {
            assert!(check_pending(position, hash, &a).is_ok(), "{position:?}");
        }
        assert_eq!(a.last_position(), Some((1, 5)));
    }

    #[test]
    fn without_a_queue_the_acks_only_go_back() {
        let mut s = ring();
        let mut tracker = DrainingHashes::new();
        let (mut a, mut b) = (PendingAcks::new(1), PendingAcks::new(2));
        add(&mut s, 1, &mut [], &mut tracker).unwrap();
        add(&mut s, 2, &mut [&mut a], &mut tracker).unwrap();
        a.add_pending_ack_if_allowed(ack(0, 3), None).unwrap();
        let removed = remove(&mut s, 1, &mut [&mut a, &mut b], &mut tracker, &mut NoQueue);
        assert_eq!(removed.unwrap().acks, vec![ack(0, 3)]);
        assert_eq!(s.consumer_ids(), vec![2]);
    }

    /// The one rule for an unknown consumer: NotFound, and nothing changes.
    #[test]
    fn an_unknown_consumer_is_not_found_and_changes_nothing() {
        let mut s = ring();
        let mut tracker = DrainingHashes::new();
        let mut queue = MessageRedeliveryController::new(false);
        let mut a = PendingAcks::new(4);
        add(&mut s, 4, &mut [], &mut tracker).unwrap();
        a.add_pending_ack_if_allowed(ack(0, 3), None).unwrap();
        for consumer in [5, 0] {
            let removed = remove(&mut s, consumer, &mut [&mut a], &mut tracker, &mut queue);
            assert!(
                matches!(removed, Err(StateError::NotFound(_))),
                "{removed:?}"
            );
        }
        let none = remove(&mut s, 4, &mut [], &mut tracker, &mut NoQueue);
        assert!(matches!(none, Err(StateError::NotFound(_))));
        assert!(s.contains(4) && a.len() == 1 && !a.is_closed() && queue.is_empty());
    }

    #[test]
    fn a_position_that_cannot_be_queued_changes_nothing() {
        let mut s = ring();
        let mut tracker = DrainingHashes::new();
        let mut queue = MessageRedeliveryController::new(false);
        let (mut a, mut b) = (PendingAcks::new(1), PendingAcks::new(2));
        add(&mut s, 1, &mut [], &mut tracker).unwrap();
        add(&mut s, 2, &mut [&mut a], &mut tracker).unwrap();
        let bad = PendingAck {
            ledger_id: -1,
            ..ack(0, 3)
        };
        a.add_pending_ack_if_allowed(bad, None).unwrap();
        let removed = remove(&mut s, 1, &mut [&mut a, &mut b], &mut tracker, &mut queue);
        assert!(removed.is_err());
        assert!(s.contains(1) && a.len() == 1 && !a.is_closed() && queue.is_empty());
        let r = HashRange::full();
        assert_eq!(a.register_draining_hashes(&[r], &mut tracker), Ok(1));
    }
}
