//! Pulsar's `PersistentStickyKeyDispatcherMultipleConsumers` (PIP-379) over any
//! [`Selector`]: a read's entries are filtered as `filterAndGroupEntriesForDispatching` does
//! (hashes held within the read, permits taken once per read, entries waiting behind the
//! redelivery queue or a draining hash) and sent, each recorded as a pending ack of its
//! consumer; normal reads stop at the look-ahead limit; consumers connect and disconnect by
//! the dispatchers' one rule, a leaving consumer's pending acks going to the redelivery
//! queue.
//!
//! The dispatcher owns what only it knows (each consumer's flow permits and limits, the
//! settings); the selector, pending acks, tracker and redelivery queue come in as
//! [`Parts`], as the caller holds them.

use std::ops::DerefMut;

use rustc_hash::FxHashMap;
use smallvec::{smallvec, SmallVec};
use strum::{IntoStaticStr, VariantArray};

use super::{check_positions, disconnect, not_connected, Dispatcher, Parts, Removed, Selector};
use crate::draining::DrainingHashes;
use crate::error::{DispatchedConflict, InvalidInput, KernelResult, StateResult};
use crate::pending_acks::{PendingAck, PendingAcks};
use crate::redelivery::{
    available_permits, check_position, effective_look_ahead_limit, ConsumerPermits, Decision,
    LookAheadConfig, MessageRedeliveryController, Position,
};

/// What a consumer without flow control may take: Pulsar's permits are a Java int.
pub const UNLIMITED_PERMITS: i64 = i32::MAX as i64;

/// The parts with the dispatcher's redelivery queue.
pub type Queued<'a, S, A> = Parts<'a, S, A, MessageRedeliveryController>;

/// An entry of a read: its position, sticky key hash (1 to 65535) and batch size (messages,
/// 0 to 2**31 - 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadEntry {
    /// The entry's `(ledger_id, entry_id)`.
    pub position: Position,
    /// The entry's sticky key hash, 1 to 65535 (0 means "not set").
    pub sticky_key_hash: u16,
    /// How many messages the entry holds, 0 to 2**31 - 1.
    pub batch_size: i32,
}

/// Why an entry was not sent; named as its variant in snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, IntoStaticStr, VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum HoldReason {
    /// No consumer serves the hash. With none connected the entry is not queued: Pulsar
    /// rewinds the cursor instead.
    NoConsumer,
    /// An earlier entry of the same hash was held in this read, so this one waits too.
    BlockedInRead,
    /// The selected consumer has no permits (flow permits or unacked-messages room).
    NoPermits,
    /// A normal read of a hash with entries in the redelivery queue: they go first.
    AwaitingRedelivery,
    /// The hash drains on another consumer until its pending acks are acked.
    Draining,
    /// The redelivery queue is at the effective look-ahead limit: Pulsar reads no further,
    /// so the entry is not taken (not queued).
    LookAheadLimit,
    /// The consumer's pending-acks map refused the entry (the consumer is closing).
    PendingAckRefused,
}

/// What happened to one entry. `consumer` is the consumer it went to or, when held, the one
/// the selector picked (None when there is none or the hash was already held in this read);
/// `draining` is set for [`HoldReason::Draining`]; `queued` says the redelivery queue now
/// holds the entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dispatched {
    /// The consumer the entry went to or, when held, the one the selector picked; None when
    /// there is none, the hash was already held in this read, or the entry was not taken.
    pub consumer: Option<u64>,
    /// Why the entry was not sent; None when it was.
    pub held: Option<HoldReason>,
    /// The consumer the hash drains on, for [`HoldReason::Draining`] alone.
    pub draining: Option<u64>,
    /// True when the redelivery queue now holds the entry.
    pub queued: bool,
}

impl Dispatched {
    /// Checks that the parts agree as the dispatcher makes them (for one built by hand): a
    /// sent entry names its consumer and neither drains nor is queued; a drainer is named
    /// for [`HoldReason::Draining`] alone; an entry not taken (the look-ahead limit) names
    /// no consumer and is not queued; one the map refused names the consumer and is queued.
    /// Errors name the parts as the Python `DispatchResult` does.
    pub fn check(&self) -> KernelResult<()> {
        let conflict = match self.held {
            None if self.consumer.is_none() => DispatchedConflict::DeliveredWithoutConsumer,
            None if self.queued => DispatchedConflict::DeliveredQueued,
            Some(HoldReason::LookAheadLimit) if self.consumer.is_some() || self.queued => {
                DispatchedConflict::LookAheadTaken
            }
            Some(HoldReason::PendingAckRefused) if self.consumer.is_none() || !self.queued => {
                DispatchedConflict::RefusedNotQueued
            }
            held if self.draining.is_some() != (held == Some(HoldReason::Draining)) => {
                DispatchedConflict::DrainerMismatch
            }
            _ => return Ok(()),
        };
        Err(conflict.into())
    }

    fn sent(consumer: u64) -> Self {
        Self {
            consumer: Some(consumer),
            held: None,
            draining: None,
            queued: false,
        }
    }

    fn not_taken(held: HoldReason) -> Self {
        Self {
            consumer: None,
            held: Some(held),
            draining: None,
            queued: false,
        }
    }

    /// A decision to hold, the entry being queued for redelivery.
    fn held(decision: Decision) -> Self {
        let held = match decision {
            Decision::Deliver(_) => None,
            Decision::BlockedInRead => Some(HoldReason::BlockedInRead),
            Decision::NoConsumer => Some(HoldReason::NoConsumer),
            Decision::NoPermits(_) => Some(HoldReason::NoPermits),
            Decision::AwaitingRedelivery(_) => Some(HoldReason::AwaitingRedelivery),
            Decision::Draining { .. } => Some(HoldReason::Draining),
        };
        Self {
            consumer: decision.consumer(),
            held,
            draining: decision.draining(),
            queued: true,
        }
    }
}

/// What the dispatcher knows of a connected consumer's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Capacity {
    /// Flow permits left (messages); negative after a batch overshoots.
    available: i64,
    /// 0 means no limit.
    max_unacked: i64,
    avg_per_entry: i64,
}

impl Default for Capacity {
    fn default() -> Self {
        Self {
            available: 0,
            max_unacked: 0,
            avg_per_entry: 1,
        }
    }
}

/// The sticky-key dispatcher's own state; see the module documentation.
#[derive(Debug, Clone, Default)]
pub struct StickyKeyDispatcher {
    /// Whether flow permits count: without, a consumer may always take
    /// [`UNLIMITED_PERMITS`] under its unacked limit.
    flow_control: bool,
    look_ahead: LookAheadConfig,
    consumers: FxHashMap<u64, Capacity>,
}

impl StickyKeyDispatcher {
    /// A dispatcher with no consumer; `flow_control` says whether flow permits count, `look_ahead`
    /// bounds the redelivery queue.
    pub fn new(flow_control: bool, look_ahead: LookAheadConfig) -> Self {
        Self {
            flow_control,
            look_ahead,
            consumers: FxHashMap::default(),
        }
    }

    /// Whether flow permits count; without, a consumer may always take [`UNLIMITED_PERMITS`] under
    /// its unacked limit.
    pub fn flow_control(&self) -> bool {
        self.flow_control
    }

    /// The consumer asks for `permits` more messages (Pulsar's `consumerFlow`); the count
    /// saturates at [`UNLIMITED_PERMITS`].
    pub fn flow(&mut self, consumer: u64, permits: i32) -> StateResult<()> {
        let permits = non_negative(permits.into(), "permits", 0)?;
        let c = self.known(consumer)?;
        c.available = c.available.saturating_add(permits).min(UNLIMITED_PERMITS);
        Ok(())
    }

    /// Sets the consumer's unacked-messages limit (0 = none, in messages) and the average
    /// messages per entry (at least 1) its remaining room is divided by; None leaves a
    /// setting as it is. Every argument is checked first.
    pub fn set_consumer_limits(
        &mut self,
        consumer: u64,
        max_unacked_messages: Option<i32>,
        avg_messages_per_entry: Option<i32>,
    ) -> StateResult<()> {
        let max = max_unacked_messages
            .map(|m| non_negative(m.into(), "max_unacked_messages", 0))
            .transpose()?;
        let avg = avg_messages_per_entry
            .map(|a| non_negative(a.into(), "avg_messages_per_entry", 1))
            .transpose()?;
        let c = self.known(consumer)?;
        c.max_unacked = max.unwrap_or(c.max_unacked);
        c.avg_per_entry = avg.unwrap_or(c.avg_per_entry);
        Ok(())
    }

    /// How many entries the dispatcher may send the consumer now (Pulsar's
    /// `getAvailablePermits`).
    pub fn available_permits<A: DerefMut<Target = PendingAcks>>(
        &self,
        consumer: u64,
        acks: &[A],
    ) -> StateResult<i64> {
        self.consumers
            .get(&consumer)
            .ok_or_else(|| not_connected(consumer))?;
        Ok(self.permits_of(consumer, acks))
    }

    /// The redelivery-queue length at which normal reads stop, for `consumers` connected.
    pub fn effective_look_ahead_limit(&self, consumers: usize) -> i64 {
        effective_look_ahead_limit(self.look_ahead, consumers as u64)
    }

    /// Pulsar's `isNormalReadAllowed`: the redelivery queue is below the look-ahead limit
    /// and some consumer has permits.
    pub fn is_normal_read_allowed<A: DerefMut<Target = PendingAcks>>(
        &self,
        acks: &[A],
        redelivery: &MessageRedeliveryController,
    ) -> bool {
        self.normal_read_size(acks.len(), redelivery) > 0
            && acks
                .iter()
                .any(|a| self.permits_of(a.consumer_id(), acks) > 0)
    }

    /// Pulsar's `getMaxEntriesReadLimit`: the room left under the look-ahead limit.
    fn normal_read_size(
        &self,
        consumers: usize,
        redelivery: &MessageRedeliveryController,
    ) -> usize {
        let room = self.effective_look_ahead_limit(consumers) - redelivery.len() as i64;
        usize::try_from(room).unwrap_or(0)
    }

    /// Pulsar's `trySendMessagesToConsumers` for one read, in order: one result per entry.
    /// A replay read (of positions from [`Self::messages_to_replay_now`]) skips the
    /// redelivery-queue check and takes delivered entries off the queue; a normal read
    /// takes no more than the room under the look-ahead limit. With no consumer connected
    /// nothing is sent or queued. Every entry is checked before anything changes. `acks`
    /// needs only the maps of the consumers the entries select (one, for one entry).
    pub fn dispatch_read<S: Selector, A: DerefMut<Target = PendingAcks>>(
        &mut self,
        parts: Queued<'_, S, A>,
        entries: &[ReadEntry],
        replay: bool,
    ) -> KernelResult<SmallVec<[Dispatched; 1]>> {
        let consumers: SmallVec<[Option<u64>; 1]> = entries
            .iter()
            .map(|e| parts.selector.select(e.sticky_key_hash))
            .collect();
        self.dispatch_selected(parts, entries, &consumers, replay)
    }

    /// [`Self::dispatch_read`] of entries whose consumers the caller has looked up:
    /// `consumers[i]` is what `parts.selector` selects for `entries[i]` now. A caller that
    /// locks only the maps of the consumers a read goes to has looked them up already; a
    /// one-entry read then searches the selector once.
    pub fn dispatch_selected<S: Selector, A: DerefMut<Target = PendingAcks>>(
        &mut self,
        parts: Queued<'_, S, A>,
        entries: &[ReadEntry],
        consumers: &[Option<u64>],
        replay: bool,
    ) -> KernelResult<SmallVec<[Dispatched; 1]>> {
        if entries.len() != consumers.len() {
            return Err(InvalidInput::LengthMismatch {
                names: &["entries", "consumers"],
                lengths: vec![entries.len(), consumers.len()],
            });
        }
        debug_assert!(entries
            .iter()
            .zip(consumers)
            .all(|(e, &c)| parts.selector.select(e.sticky_key_hash) == c));
        for (i, e) in entries.iter().enumerate() {
            check_entry(e).map_err(|err| err.at(i))?;
        }
        // Each consumer's map looked up once for the checks and the sending alike.
        let index = consumer_index(parts.acks);
        {
            let acks: &[A] = parts.acks;
            let pending_on = |c: Option<u64>| c.and_then(|c| index.get(&c)).map(|&i| &*acks[i]);
            check_positions(
                entries
                    .iter()
                    .zip(consumers)
                    .map(|(e, &c)| (e.position, e.sticky_key_hash, pending_on(c))),
            )?;
        }
        if self.consumers.is_empty() {
            return Ok(smallvec![
                Dispatched::not_taken(HoldReason::NoConsumer);
                entries.len()
            ]);
        }
        let Parts {
            acks,
            redelivery,
            tracker,
            ..
        } = parts;
        let taken = if replay {
            entries.len()
        } else {
            entries
                .len()
                .min(self.normal_read_size(self.consumers.len(), redelivery))
        };
        let (read, rest) = entries.split_at(taken);
        let positions: SmallVec<[(Position, u16); 1]> = read
            .iter()
            .map(|e| (e.position, e.sticky_key_hash))
            .collect();
        // Every decision comes before any entry goes, so permits are as the read began.
        let decisions = {
            let acks: &[A] = acks;
            let permits_of = |c| self.permits_of(c, acks);
            let consumers = &consumers[..taken];
            redelivery.filter_checked(&positions, consumers, replay, permits_of, Some(tracker))?
        };
        let mut out = SmallVec::with_capacity(entries.len());
        for (entry, decision) in read.iter().zip(decisions) {
            out.push(match decision {
                Decision::Deliver(c) => {
                    let pending = index.get(&c).and_then(|&i| acks.get_mut(i));
                    self.send(pending.map(|a| &mut **a), redelivery, tracker, entry, c)?
                }
                held => Dispatched::held(held),
            });
        }
        out.extend(
            rest.iter()
                .map(|_| Dispatched::not_taken(HoldReason::LookAheadLimit)),
        );
        Ok(out)
    }

    /// Records a delivered entry as the consumer's pending ack and spends its permits; a
    /// map that refuses it (a closing consumer) leaves it queued for redelivery.
    fn send(
        &mut self,
        pending: Option<&mut PendingAcks>,
        redelivery: &mut MessageRedeliveryController,
        tracker: &DrainingHashes,
        entry: &ReadEntry,
        consumer: u64,
    ) -> KernelResult<Dispatched> {
        let ack = PendingAck {
            ledger_id: entry.position.0,
            entry_id: entry.position.1,
            batch_size: entry.batch_size,
            sticky_key_hash: entry.sticky_key_hash,
        };
        let added = match pending {
            Some(p) => p.add_pending_ack_if_allowed(ack, Some(tracker))?,
            None => false,
        };
        if !added {
            redelivery.add(entry.position, Some(entry.sticky_key_hash))?;
            return Ok(Dispatched {
                held: Some(HoldReason::PendingAckRefused),
                queued: true,
                ..Dispatched::sent(consumer)
            });
        }
        if self.flow_control {
            if let Some(c) = self.consumers.get_mut(&consumer) {
                c.available -= i64::from(entry.batch_size);
            }
        }
        Ok(Dispatched::sent(consumer))
    }

    /// Pulsar's replay filter: the queued positions a replay read takes now, in order, at
    /// most `max_messages`. A hash whose consumer has no permits or drains elsewhere is
    /// skipped with all its later positions.
    pub fn messages_to_replay_now<S: Selector, A: DerefMut<Target = PendingAcks>>(
        &self,
        parts: Queued<'_, S, A>,
        max_messages: usize,
    ) -> Vec<Position> {
        let Parts {
            selector,
            acks,
            redelivery,
            tracker,
        } = parts;
        let acks = &*acks;
        redelivery.replay_positions(
            max_messages,
            |h| selector.select(h),
            |c| self.permits_of(c, acks),
            Some(tracker),
        )
    }

    /// The consumer's permits as one read takes them; a consumer the dispatcher does not
    /// know (added to the shared selector behind its back) has none.
    fn permits_of<A: DerefMut<Target = PendingAcks>>(&self, consumer: u64, acks: &[A]) -> i64 {
        let Some(c) = self.consumers.get(&consumer) else {
            return 0;
        };
        let Some(pending) = acks.iter().find(|a| a.consumer_id() == consumer) else {
            return 0;
        };
        available_permits(ConsumerPermits {
            available_permits: if self.flow_control {
                c.available
            } else {
                UNLIMITED_PERMITS
            },
            max_unacked_messages: c.max_unacked,
            unacked_messages: if c.max_unacked > 0 {
                pending.unacked_messages()
            } else {
                0
            },
            avg_messages_per_entry: c.avg_per_entry,
            active: true,
        })
    }

    fn known(&mut self, consumer: u64) -> StateResult<&mut Capacity> {
        self.consumers
            .get_mut(&consumer)
            .ok_or_else(|| not_connected(consumer))
    }
}

fn non_negative(value: i64, what: &'static str, least: i64) -> KernelResult<i64> {
    if value < least {
        return Err(InvalidInput::TooSmall {
            what,
            min: least,
            value,
        });
    }
    Ok(value)
}

fn check_entry(e: &ReadEntry) -> KernelResult<()> {
    check_position(e.position, "position")?;
    if e.sticky_key_hash == 0 {
        return Err(InvalidInput::ReservedHash {
            position: Some(e.position),
        });
    }
    non_negative(e.batch_size.into(), "batch_size", 0).map(drop)
}

/// Each connected consumer's place in `acks`, by id: a sorted list rather than a hash map,
/// since a read makes one and consumers are few (a dispatch of one entry made two maps, a
/// third of its time).
struct ConsumerIndex(SmallVec<[(u64, usize); 1]>);

impl ConsumerIndex {
    fn get(&self, consumer: &u64) -> Option<&usize> {
        let at = self.0.binary_search_by_key(consumer, |&(c, _)| c).ok()?;
        Some(&self.0[at].1)
    }
}

fn consumer_index<A: DerefMut<Target = PendingAcks>>(acks: &[A]) -> ConsumerIndex {
    let mut index: SmallVec<[(u64, usize); 1]> = acks
        .iter()
        .enumerate()
        .map(|(i, a)| (a.consumer_id(), i))
        .collect();
    index.sort_unstable();
    ConsumerIndex(index)
}

/// Consumers connect with no permits, and leave with their capacity forgotten; a leaving
/// consumer's pending acks go to the redelivery queue.
impl<S: Selector> Dispatcher<S> for StickyKeyDispatcher {
    type Queue = MessageRedeliveryController;

    fn add_consumer<A: DerefMut<Target = PendingAcks>>(
        &mut self,
        parts: Queued<'_, S, A>,
        consumer: u64,
        name: &[u8],
    ) -> StateResult<Option<i32>> {
        let notice = super::connect(parts, consumer, name)?;
        self.consumers.insert(consumer, Capacity::default());
        Ok(notice)
    }

    fn remove_consumer<A: DerefMut<Target = PendingAcks>>(
        &mut self,
        parts: Queued<'_, S, A>,
        consumer: u64,
    ) -> StateResult<Removed> {
        let removed = disconnect(parts, consumer)?;
        self.consumers.remove(&consumer);
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry_bucket::EntryBucketSelector;
    use crate::ring::ConsistentHashingSelector;

    /// A dispatcher with its parts, owned.
    struct Owned<S> {
        d: StickyKeyDispatcher,
        selector: S,
        acks: Vec<PendingAcks>,
        redelivery: MessageRedeliveryController,
        tracker: DrainingHashes,
    }

    fn ring(flow_control: bool) -> Owned<ConsistentHashingSelector> {
        Owned::new(
            ConsistentHashingSelector::new(4, true, 0xFFFF).unwrap(),
            flow_control,
        )
    }

    impl<S: Selector> Owned<S> {
        fn new(selector: S, flow_control: bool) -> Self {
            Self {
                d: StickyKeyDispatcher::new(flow_control, LookAheadConfig::default()),
                selector,
                acks: Vec::new(),
                redelivery: MessageRedeliveryController::new(false),
                tracker: DrainingHashes::new(),
            }
        }

        /// Runs `f` on the dispatcher and its parts.
        fn with<R>(
            &mut self,
            f: impl FnOnce(&mut StickyKeyDispatcher, Queued<'_, S, &mut PendingAcks>) -> R,
        ) -> R {
            let mut acks: Vec<&mut PendingAcks> = self.acks.iter_mut().collect();
            let parts = Parts {
                selector: &mut self.selector,
                acks: &mut acks,
                redelivery: &mut self.redelivery,
                tracker: &mut self.tracker,
            };
            f(&mut self.d, parts)
        }

        fn add(&mut self, consumer: u64, name: &str) {
            self.with(|d, parts| d.add_consumer(parts, consumer, name.as_bytes()))
                .unwrap();
            self.acks.push(PendingAcks::new(consumer));
        }

        fn remove(&mut self, consumer: u64) -> Removed {
            let removed = self
                .with(|d, parts| d.remove_consumer(parts, consumer))
                .unwrap();
            self.acks.retain(|a| a.consumer_id() != consumer);
            removed
        }

        fn read(&mut self, entries: &[(i64, u16)], replay: bool) -> Vec<Dispatched> {
            let entries: Vec<ReadEntry> = entries
                .iter()
                .map(|&(entry_id, hash)| ReadEntry {
                    position: (1, entry_id),
                    sticky_key_hash: hash,
                    batch_size: 1,
                })
                .collect();
            self.with(|d, parts| d.dispatch_read(parts, &entries, replay))
                .unwrap()
                .into_vec()
        }

        fn replay_now(&mut self, max: usize) -> Vec<Position> {
            self.with(|d, parts| d.messages_to_replay_now(parts, max))
        }

        fn permits(&mut self, consumer: u64) -> StateResult<i64> {
            self.with(|d, parts| d.available_permits(consumer, parts.acks))
        }

        fn acks_of(&mut self, consumer: u64) -> &mut PendingAcks {
            self.acks
                .iter_mut()
                .find(|a| a.consumer_id() == consumer)
                .unwrap()
        }

        fn queued(&self) -> Vec<(Position, u16)> {
            self.redelivery.iter().collect()
        }
    }

    fn held(consumer: Option<u64>, why: HoldReason) -> (Option<u64>, Option<HoldReason>) {
        (consumer, Some(why))
    }

    fn shown(results: &[Dispatched]) -> Vec<(Option<u64>, Option<HoldReason>)> {
        results.iter().map(|r| (r.consumer, r.held)).collect()
    }

    #[test]
    fn a_read_with_its_consumers_looked_up_goes_as_one_without() {
        let mut o = ring(true);
        o.add(1, "a");
        o.add(2, "b");
        o.with(|d, _| d.flow(1, 10).and(d.flow(2, 10))).unwrap();
        let entry = |entry_id, sticky_key_hash| ReadEntry {
            position: (1, entry_id),
            sticky_key_hash,
            batch_size: 1,
        };
        let first = [entry(1, 7), entry(2, 40_000)];
        let consumers: Vec<Option<u64>> = first
            .iter()
            .map(|e| o.selector.select(e.sticky_key_hash))
            .collect();
        let selected = o.with(|d, parts| d.dispatch_selected(parts, &first, &consumers, false));
        let read = o.read(&[(3, 7), (4, 40_000)], false);
        assert_eq!(shown(&selected.unwrap()), shown(&read));
        let err = o.with(|d, parts| d.dispatch_selected(parts, &[entry(5, 7)], &[], false));
        assert!(err.unwrap_err().to_string().contains("entries"));
        assert_eq!(o.acks.iter().map(|a| a.len()).sum::<usize>(), 4);
    }

    #[test]
    fn a_position_twice_in_one_read_changes_nothing() {
        let mut o = ring(true);
        o.add(1, "a");
        o.with(|d, _| d.flow(1, 10)).unwrap();
        let entries = [(1, 0), (1, 1), (1, 0)].map(|(l, e)| ReadEntry {
            position: (l, e),
            sticky_key_hash: 7,
            batch_size: 1,
        });
        let err = o.with(|d, parts| d.dispatch_read(parts, &entries, false));
        let message = err.unwrap_err().to_string();
        assert!(
            message.starts_with("item 2: position (1, 0) is given twice"),
            "{message}"
        );
        assert!(o.acks[0].is_empty() && o.redelivery.is_empty());
        assert_eq!(o.permits(1), Ok(10));
    }

    #[test]
    fn a_pending_position_keeps_its_hash() {
        let mut o = ring(false);
        o.add(1, "a");
        assert!(o.read(&[(0, 7)], false)[0].held.is_none());
        let entry = |hash| ReadEntry {
            position: (1, 0),
            sticky_key_hash: hash,
            batch_size: 1,
        };
        // Its hash moved to another consumer: it drains on consumer 1 until acked.
        o.add(2, "b");
        let owner = o.selector.select(7).unwrap();
        // The same hash again is a redelivery; another hash the same consumer serves would
        // leave hash 7 draining for ever, and is refused with nothing changed.
        let other = (1..=u16::MAX).find(|&h| h != 7 && o.selector.select(h) == Some(1));
        let err = o.with(|d, parts| d.dispatch_read(parts, &[entry(other.unwrap())], false));
        let message = err.unwrap_err().to_string();
        assert!(
            message.contains("is pending on consumer 1 under sticky key hash 7"),
            "{message}"
        );
        assert_eq!(o.acks[0].get(1, 0), Some((1, 7)));
        if owner == 2 {
            assert_eq!(o.tracker.get_entry(7).unwrap().consumer_id, 1);
        }
        assert!(o.read(&[(0, 7)], false)[0].held.is_some() == (owner == 2));
    }

    #[test]
    fn without_consumers_nothing_is_sent_or_queued() {
        let mut o = ring(false);
        let got = o.read(&[(1, 5), (2, 6)], false);
        assert_eq!(got, vec![Dispatched::not_taken(HoldReason::NoConsumer); 2]);
        assert!(o.redelivery.is_empty());
    }

    /// PersistentStickyKeyDispatcherMultipleConsumersTest.testSkipRedeliverTemporally, as
    /// the kernel sees it: a consumer without permits holds its hash for the whole read.
    #[test]
    fn a_consumer_without_permits_holds_its_hash_for_the_read() {
        let mut o = ring(true);
        o.add(1, "consumer1");
        o.add(2, "consumer2");
        o.d.flow(1, 1000).unwrap();
        let slow = (1..).find(|&h| o.selector.select(h) == Some(2)).unwrap();
        let fast = (1..).find(|&h| o.selector.select(h) == Some(1)).unwrap();
        let got = o.read(&[(1, slow), (2, slow), (3, fast)], false);
        assert_eq!(
            shown(&got),
            vec![
                held(Some(2), HoldReason::NoPermits),
                held(None, HoldReason::BlockedInRead),
                (Some(1), None)
            ]
        );
        assert!(got[0].queued && got[1].queued && !got[2].queued);
        assert_eq!(o.replay_now(10), vec![]);
        o.d.flow(2, 2).unwrap();
        assert_eq!(o.replay_now(10), vec![(1, 1), (1, 2)]);
        let got = o.read(&[(1, slow), (2, slow)], true);
        assert!(got.iter().all(|r| r.held.is_none()));
        assert!(o.redelivery.is_empty());
        assert_eq!(o.permits(2), Ok(0));
        assert_eq!(o.permits(1), Ok(999));
    }

    #[test]
    fn a_normal_read_waits_behind_the_redelivery_queue() {
        let mut o = ring(false);
        o.add(1, "a");
        o.redelivery.add((1, 1), Some(7)).unwrap();
        let got = o.read(&[(2, 7), (3, 8)], false);
        assert_eq!(got[0].held, Some(HoldReason::AwaitingRedelivery));
        assert_eq!(got[1].held, None);
        assert_eq!(o.queued(), vec![((1, 1), 7), ((1, 2), 7)]);
    }

    #[test]
    fn reads_stop_at_the_look_ahead_limit() {
        let mut o = ring(true);
        o.d.look_ahead = LookAheadConfig {
            per_consumer: 0,
            per_subscription: 2,
            ..LookAheadConfig::default()
        };
        o.add(1, "a");
        // No permits: the first two are held and queued, which fills the queue.
        let got = o.read(&[(1, 5), (2, 6), (3, 7)], false);
        assert_eq!(got.iter().filter(|r| r.queued).count(), 2);
        assert_eq!(got[2], Dispatched::not_taken(HoldReason::LookAheadLimit));
        let got = o.read(&[(4, 9)], false);
        assert_eq!(got, vec![Dispatched::not_taken(HoldReason::LookAheadLimit)]);
        assert!(!o.with(|d, parts| d.is_normal_read_allowed(parts.acks, parts.redelivery)));
        // A replay read is not limited.
        assert_eq!(o.read(&[(1, 5)], true)[0].held, Some(HoldReason::NoPermits));
    }

    #[test]
    fn permits_count_batches_and_the_unacked_limit_caps_them() {
        let mut o = ring(true);
        o.add(1, "a");
        o.d.flow(1, 10).unwrap();
        let entries = [ReadEntry {
            position: (1, 1),
            sticky_key_hash: 5,
            batch_size: 4,
        }];
        let got = o.with(|d, parts| d.dispatch_read(parts, &entries, false));
        assert_eq!(got.unwrap()[0].held, None);
        o.d.set_consumer_limits(1, Some(5), Some(2)).unwrap();
        // One message of room at two per entry: one entry, rounded up.
        assert_eq!(o.permits(1), Ok(1));
        assert!(o.d.set_consumer_limits(1, Some(-1), None).is_err());
        assert!(o.d.set_consumer_limits(1, Some(1), Some(0)).is_err());
        assert!(o.d.set_consumer_limits(9, None, None).is_err());
        assert!(o.d.flow(1, -1).is_err() && o.d.flow(9, 1).is_err());
        o.d.flow(1, i32::MAX).unwrap();
        assert_eq!(o.permits(1), Ok(1));
        assert_eq!(o.d.consumers[&1].available, UNLIMITED_PERMITS);
    }

    /// PIP-379: a joining consumer waits for the hashes it took until they are acked.
    #[test]
    fn moved_hashes_drain_on_their_old_consumer() {
        let mut o = ring(false);
        o.add(1, "a");
        let hashes: Vec<(i64, u16)> = (0..40).map(|i| (i, 1 + i as u16 * 1601)).collect();
        assert!(o.read(&hashes, false).iter().all(|r| r.consumer == Some(1)));
        o.add(2, "b");
        let (&(entry_id, h), _) = hashes
            .iter()
            .zip(0..)
            .find(|((_, h), _)| o.selector.select(*h) == Some(2))
            .unwrap();
        let got = o.read(&[(100, h)], false);
        assert_eq!(got[0].held, Some(HoldReason::Draining));
        assert_eq!((got[0].consumer, got[0].draining), (Some(2), Some(1)));
        let tracker = &mut o.tracker;
        let a = o.acks.iter_mut().find(|a| a.consumer_id() == 1).unwrap();
        assert_eq!(
            a.remove(1, entry_id, None, Some(tracker)),
            Ok((true, Some(h.into())))
        );
        assert_eq!(o.replay_now(10), vec![(1, 100)]);
        assert_eq!(o.read(&[(100, h)], true)[0].consumer, Some(2));
    }

    #[test]
    fn a_leaving_consumer_s_acks_wait_for_redelivery() {
        let mut o = ring(false);
        o.add(1, "a");
        o.add(2, "b");
        let h1 = (1..).find(|&h| o.selector.select(h) == Some(1)).unwrap();
        o.read(&[(1, h1), (2, h1)], false);
        let removed = o.remove(1);
        assert_eq!(removed.acks.len(), 2);
        assert_eq!(o.queued(), vec![((1, 1), h1), ((1, 2), h1)]);
        assert_eq!(o.replay_now(10), vec![(1, 1), (1, 2)]);
        assert!(matches!(
            o.with(|d, parts| d.remove_consumer(parts, 1)),
            Err(crate::error::StateError::NotFound(_))
        ));
        o.remove(2);
        assert!(o.redelivery.is_empty() && o.selector.is_empty());
    }

    #[test]
    fn bad_entries_change_nothing() {
        let mut o = ring(true);
        o.add(1, "a");
        o.d.flow(1, 5).unwrap();
        for bad in [
            ReadEntry {
                position: (-1, 0),
                sticky_key_hash: 5,
                batch_size: 1,
            },
            ReadEntry {
                position: (1, 1),
                sticky_key_hash: 0,
                batch_size: 1,
            },
            ReadEntry {
                position: (1, 1),
                sticky_key_hash: 5,
                batch_size: -1,
            },
        ] {
            let good = ReadEntry {
                position: (1, 0),
                sticky_key_hash: 9,
                batch_size: 1,
            };
            let err = o.with(|d, parts| d.dispatch_read(parts, &[good, bad], false));
            let err = err.unwrap_err();
            assert!(
                matches!(err, InvalidInput::Item { index: 1, .. }),
                "{err:?}"
            );
        }
        assert!(o.redelivery.is_empty() && o.acks_of(1).is_empty());
        assert_eq!(o.d.consumers[&1].available, 5);
    }

    /// The dispatcher is the selector's user only through the trait: over entry buckets it
    /// dispatches by bucket owner, with the same redelivery and draining.
    #[test]
    fn works_over_entry_buckets_too() {
        let mut o = Owned::new(EntryBucketSelector::new(&[0x8000]), false);
        o.add(1, "a");
        assert_eq!(o.read(&[(1, 0x9000)], false)[0].consumer, Some(1));
        o.add(2, "b");
        let got = o.read(&[(2, 0x9000)], false);
        assert_eq!(
            (got[0].held, got[0].draining),
            (Some(HoldReason::Draining), Some(1))
        );
        o.remove(1);
        assert_eq!(o.replay_now(10), vec![(1, 1), (1, 2)]);
    }

    #[test]
    fn hold_reasons_are_named_in_snake_case() {
        let names: Vec<&str> = HoldReason::VARIANTS.iter().map(|&r| r.into()).collect();
        assert_eq!(names[0], "no_consumer");
        assert_eq!(names[6], "pending_ack_refused");
    }
}
