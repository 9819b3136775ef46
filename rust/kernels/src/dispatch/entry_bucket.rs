//! The pure part of Pulsar's `PersistentEntryBucketDispatcherMultipleConsumers` (PIP-486): an
//! entry goes whole to the owner of its bucket, a stamped entry by its `entry_hash_min`, an
//! unstamped one by its key. Each consumer's pending acks, wired to the dispatcher's draining
//! tracker, hold canonical bucket hashes, so a bucket that moves is withheld from its new
//! owner until the previous owner's acks drain; consumers connect and disconnect by the
//! dispatchers' one rule ([`Dispatcher`]).

use std::ops::DerefMut;

use super::{check_positions, Dispatcher, NoQueue, Parts};
use crate::draining::DrainingHashes;
use crate::entry_bucket::{dispatch_to, key_ring_hash, EntryBucketSelector};
use crate::error::KernelResult;
use crate::pending_acks::{PendingAck, PendingAcks};

/// What an entry is dispatched by: its stamped `entry_hash_min`, or its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// A stamped entry: its `entry_hash_min`, the least hashB of its messages.
    Stamped(u16),
    /// An unstamped entry: its key, whose hashB (0 becoming 1) picks the bucket.
    Key(&'a [u8]),
}

impl Route<'_> {
    /// The canonical hash of the entry's bucket, which its pending ack is kept under.
    pub fn sticky_key_hash(self, selector: &EntryBucketSelector) -> u16 {
        selector.canonical_hash_of(self.ring_hash())
    }

    /// The hash that picks the entry's bucket: the stamped one, or the key's hashB.
    #[inline]
    fn ring_hash(self) -> u16 {
        match self {
            Route::Stamped(h) => h,
            Route::Key(k) => key_ring_hash(k),
        }
    }
}

/// An entry to dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The entry's ledger id.
    pub ledger_id: i64,
    /// The entry's id within its ledger.
    pub entry_id: i64,
    /// How many messages the entry holds (its batch size).
    pub batch_size: i32,
    /// What picks the entry's bucket.
    pub route: Route<'a>,
}

impl Entry<'_> {
    /// The entry as a pending ack under `hash`, its bucket's canonical hash.
    #[inline]
    fn ack(self, hash: u16) -> PendingAck {
        PendingAck {
            ledger_id: self.ledger_id,
            entry_id: self.entry_id,
            batch_size: self.batch_size,
            sticky_key_hash: hash,
        }
    }
}

/// An entry with the consumer owning its bucket, as a pending ack under the bucket's
/// canonical hash: what [`EntryBucketDispatcher::route`] gives and
/// [`EntryBucketDispatcher::dispatch_routed`] takes, so the bucket is looked up once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Routed {
    /// The consumer owning the entry's bucket.
    pub consumer: u64,
    /// The entry as that consumer's pending ack, under the bucket's canonical hash.
    pub ack: PendingAck,
}

/// The entry-bucket dispatcher: no state of its own, and no redelivery queue (a leaving
/// consumer's pending acks go back to the caller).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntryBucketDispatcher;

/// The parts of an entry-bucket dispatcher.
pub type Buckets<'a, A> = Parts<'a, EntryBucketSelector, A, NoQueue>;

impl Dispatcher<EntryBucketSelector> for EntryBucketDispatcher {
    type Queue = NoQueue;
}

impl EntryBucketDispatcher {
    /// The consumer owning the entry's bucket and the entry as its pending ack; None while
    /// no consumer is connected.
    #[inline]
    pub fn route(selector: &EntryBucketSelector, entry: Entry<'_>) -> Option<Routed> {
        let to = selector.route(entry.route.ring_hash());
        Some(Routed {
            consumer: to.owner?,
            ack: entry.ack(to.hash),
        })
    }

    /// Sends one entry if it may go now: the consumer it goes to, or None when no consumer
    /// is connected, the owner has no pending acks in `parts.acks`, its bucket drains on
    /// another consumer, or the owner's map refuses it.
    pub fn dispatch<A: DerefMut<Target = PendingAcks>>(
        &self,
        parts: Buckets<'_, A>,
        entry: Entry<'_>,
    ) -> KernelResult<Option<u64>> {
        match Self::route(parts.selector, entry) {
            Some(routed) => self.dispatch_routed(parts, routed),
            None => Ok(None),
        }
    }

    /// `dispatch` of an entry [`route`](Self::route)d by `parts.selector` as it is now.
    pub fn dispatch_routed<A: DerefMut<Target = PendingAcks>>(
        &self,
        parts: Buckets<'_, A>,
        routed: Routed,
    ) -> KernelResult<Option<u64>> {
        let Routed { consumer, ack } = routed;
        let Some(acks) = parts.acks.iter_mut().find(|a| a.consumer_id() == consumer) else {
            return Ok(None);
        };
        Ok(dispatch_to(consumer, ack, acks, parts.tracker)?.then_some(consumer))
    }

    /// `dispatch` of each entry in order: the owner of each (0 with no consumer connected)
    /// and whether it went. Every entry is checked first (`check_positions`), so an error
    /// changes nothing. The entries are read twice (checked, then sent).
    pub fn dispatch_many<'e, A: DerefMut<Target = PendingAcks>>(
        &self,
        parts: Buckets<'_, A>,
        entries: impl ExactSizeIterator<Item = Entry<'e>> + Clone,
    ) -> KernelResult<(Vec<u64>, Vec<bool>)> {
        let Parts {
            selector,
            acks,
            tracker,
            ..
        } = parts;
        let len = entries.len();
        let mut sent = vec![false; len];
        if selector.owners().is_empty() {
            // No consumer: nothing goes, and no entry has an owner to check against.
            return Ok((vec![0; len], sent));
        }
        let slots = Slots::new(acks).by_bucket(selector.owners(), len);
        // Each entry's owner (in `consumers`), and its canonical hash and the owner's place
        // in `acks` (in `routes`), found once, as the entries are checked (every one of them
        // unless the check fails).
        let mut consumers = Vec::with_capacity(len);
        let mut routes: Vec<(u16, Option<u32>)> = Vec::with_capacity(len);
        let checked = entries.clone().map(|e| {
            let to = selector.route(e.route.ring_hash());
            // Every bucket has an owner once a consumer is connected.
            let owner = to.owner.unwrap_or_default();
            let slot = slots.get(to.bucket, owner);
            consumers.push(owner);
            routes.push((to.hash, slot));
            let pending = slot.map(|s| &*acks[s as usize]);
            ((e.ledger_id, e.entry_id), to.hash, pending)
        });
        check_positions(checked)?;
        let sends = entries.zip(&routes).zip(&consumers).zip(&mut sent);
        for (((e, &(hash, slot)), &consumer), went) in sends {
            if let Some(s) = slot {
                *went = dispatch_to(consumer, e.ack(hash), &mut acks[s as usize], tracker)?;
            }
        }
        Ok((consumers, sent))
    }
}

/// Where each consumer's map is in a call's `acks`: the ids sorted, for a binary search.
struct Slots(Vec<(u64, u32)>);

impl Slots {
    fn new<A: DerefMut<Target = PendingAcks>>(acks: &[A]) -> Self {
        let mut slots: Vec<(u64, u32)> = acks
            .iter()
            .zip(0..)
            .map(|(a, i)| (a.consumer_id(), i))
            .collect();
        slots.sort_unstable();
        Self(slots)
    }

    #[inline]
    fn get(&self, consumer: u64) -> Option<u32> {
        let at = self.0.partition_point(|&(c, _)| c < consumer);
        self.0
            .get(at)
            .filter(|&&(c, _)| c == consumer)
            .map(|&(_, i)| i)
    }

    /// The places for a batch of `len` entries over buckets owned as `owners` says: from
    /// an eighth as many entries as buckets on, each bucket's owner's place is looked up
    /// once, ahead (owners hold runs of buckets, so once a run), else once an entry.
    fn by_bucket(self, owners: &[u64], len: usize) -> BucketSlots {
        if len.saturating_mul(8) < owners.len() {
            return BucketSlots::Search(self);
        }
        let mut run: Option<(u64, Option<u32>)> = None;
        let table = owners
            .iter()
            .map(|&owner| match run {
                Some((c, slot)) if c == owner => slot,
                _ => {
                    let slot = self.get(owner);
                    run = Some((owner, slot));
                    slot
                }
            })
            .collect();
        BucketSlots::Table(table)
    }
}

/// Where the owner of a bucket has its map in a call's `acks`, if there.
enum BucketSlots {
    Search(Slots),
    Table(Vec<Option<u32>>),
}

impl BucketSlots {
    #[inline]
    fn get(&self, bucket: usize, owner: u64) -> Option<u32> {
        match self {
            BucketSlots::Search(slots) => slots.get(owner),
            BucketSlots::Table(table) => table[bucket],
        }
    }
}

/// Buckets whose owner waits for another consumer's acks, ascending.
pub fn withheld_buckets(selector: &EntryBucketSelector, tracker: &DrainingHashes) -> Vec<usize> {
    (0..selector.bucket_count())
        .filter(|&b| {
            let h = selector.canonical_hash_of(selector.bucket_ranges()[b].start());
            tracker
                .get_entry(h)
                .is_some_and(|e| Some(e.consumer_id) != selector.select(h))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::Removed;
    use super::*;
    use crate::error::{StateError, StateResult};
    use crate::pending_acks::PendingAcks;

    const FOUR: [u16; 3] = [0x4000, 0x8000, 0xC000];

    /// A dispatcher's parts, owned.
    struct Owned {
        selector: EntryBucketSelector,
        acks: Vec<PendingAcks>,
        tracker: DrainingHashes,
    }

    impl Owned {
        fn new() -> Self {
            Self::with_splits(&FOUR)
        }

        fn with_splits(splits: &[u16]) -> Self {
            Self {
                selector: EntryBucketSelector::new(splits),
                acks: Vec::new(),
                tracker: DrainingHashes::new(),
            }
        }

        /// Runs `f` on the dispatcher and its parts.
        fn with<R>(&mut self, f: impl FnOnce(Buckets<'_, &mut PendingAcks>) -> R) -> R {
            let mut acks: Vec<&mut PendingAcks> = self.acks.iter_mut().collect();
            f(Parts {
                selector: &mut self.selector,
                acks: &mut acks,
                redelivery: &mut NoQueue,
                tracker: &mut self.tracker,
            })
        }

        fn add(&mut self, consumer: u64, name: &str) -> StateResult<Option<i32>> {
            let notice =
                self.with(|p| EntryBucketDispatcher.add_consumer(p, consumer, name.as_bytes()))?;
            self.acks.push(PendingAcks::new(consumer));
            Ok(notice)
        }

        fn remove(&mut self, consumer: u64) -> StateResult<Removed> {
            let removed = self.with(|p| EntryBucketDispatcher.remove_consumer(p, consumer))?;
            self.acks.retain(|a| a.consumer_id() != consumer);
            Ok(removed)
        }

        fn send(&mut self, entry_id: i64, hash: u16) -> Option<u64> {
            self.dispatch(stamped(entry_id, hash))
        }

        fn dispatch(&mut self, entry: Entry<'_>) -> Option<u64> {
            self.try_dispatch(entry).unwrap()
        }

        fn try_dispatch(&mut self, entry: Entry<'_>) -> KernelResult<Option<u64>> {
            self.with(|p| EntryBucketDispatcher.dispatch(p, entry))
        }

        fn many(&mut self, entries: &[Entry<'_>]) -> KernelResult<(Vec<u64>, Vec<bool>)> {
            self.with(|p| EntryBucketDispatcher.dispatch_many(p, entries.iter().copied()))
        }

        fn withheld(&self) -> Vec<usize> {
            withheld_buckets(&self.selector, &self.tracker)
        }

        fn pending(&self, consumer: u64) -> usize {
            self.acks
                .iter()
                .find(|a| a.consumer_id() == consumer)
                .map_or(0, PendingAcks::len)
        }
    }

    fn stamped(entry_id: i64, hash: u16) -> Entry<'static> {
        Entry {
            ledger_id: 1,
            entry_id,
            batch_size: 1,
            route: Route::Stamped(hash),
        }
    }

    #[test]
    fn routes_by_stamped_hash_or_key() {
        let s = EntryBucketSelector::new(&FOUR);
        assert_eq!(Route::Stamped(0x4321).sticky_key_hash(&s), 0x4000);
        assert_eq!(Route::Stamped(0).sticky_key_hash(&s), 1);
        assert_eq!(
            Route::Key(b"k").sticky_key_hash(&s),
            s.make_sticky_key_hash(b"k")
        );
    }

    #[test]
    fn a_pending_entry_keeps_its_bucket() {
        let mut p = Owned::new();
        p.add(1, "a").unwrap();
        assert_eq!(p.send(0, 0xD000), Some(1));
        // Bucket 3 moves to consumer 2 and drains on 1; entry 0 again in bucket 0 (still
        // consumer 1's) would leave bucket 3 withheld for ever: refused, nothing changed.
        p.add(2, "b").unwrap();
        assert_eq!(p.withheld(), vec![3]);
        let other = stamped(0, 0x1000);
        assert_eq!(p.selector.select(0x1000), Some(1));
        let err = p.try_dispatch(other).unwrap_err();
        assert!(
            err.to_string()
                .contains("under sticky key hash 49152, not 1"),
            "{err}"
        );
        assert!(p.many(&[stamped(5, 0x1000), other]).is_err());
        assert_eq!(p.pending(1), 1);
        assert_eq!(p.pending(2), 0);
        // Acked, the bucket is released.
        assert!(
            p.acks[0]
                .remove(1, 0, None, Some(&mut p.tracker))
                .unwrap()
                .0
        );
        assert!(p.withheld().is_empty());
    }

    #[test]
    fn a_position_twice_in_one_batch_changes_nothing() {
        let mut p = Owned::new();
        p.add(1, "a").unwrap();
        let err = p
            .many(&[stamped(0, 1), stamped(1, 2), stamped(0, 1)])
            .unwrap_err();
        assert!(err
            .to_string()
            .starts_with("item 2: position (1, 0) is given twice"));
        assert_eq!(p.pending(1), 0);
    }

    #[test]
    fn entries_go_to_the_bucket_owner() {
        let mut p = Owned::new();
        assert_eq!(p.send(0, 0x9000), None);
        p.add(1, "a").unwrap();
        p.add(2, "b").unwrap();
        assert_eq!(p.send(0, 0x1000), Some(1));
        assert_eq!(p.send(1, 0x9000), Some(2));
        assert_eq!(p.acks[1].for_each()[0].sticky_key_hash, 0x8000);
        // An owner whose acks the caller does not hold gets nothing.
        let parts = Parts {
            selector: &mut p.selector,
            acks: &mut [] as &mut [&mut PendingAcks],
            redelivery: &mut NoQueue,
            tracker: &mut p.tracker,
        };
        let none = EntryBucketDispatcher.dispatch(parts, stamped(2, 0x9000));
        assert_eq!(none, Ok(None));
    }

    #[test]
    fn a_moved_bucket_is_withheld_until_its_acks_drain() {
        let mut p = Owned::new();
        p.add(1, "a").unwrap();
        assert_eq!(p.send(0, 0x9000), Some(1));
        assert_eq!(p.add(2, "b"), Ok(None));
        assert_eq!(p.withheld(), vec![2]);
        assert_eq!(p.send(1, 0x9000), None);
        assert_eq!(p.send(2, 0xC000), Some(2));
        let (_, notice) = p.acks[0].remove(1, 0, None, Some(&mut p.tracker)).unwrap();
        assert_eq!(notice, Some(0x8000));
        assert!(p.withheld().is_empty());
        assert_eq!(p.send(1, 0x9000), Some(2));
    }

    #[test]
    fn a_failed_add_changes_nothing() {
        let mut p = Owned::new();
        p.add(1, "a").unwrap();
        assert!(p.add(1, "again").is_err());
        assert_eq!(p.send(0, 0x9000), Some(1));
        // Another consumer already drains the hash consumer 1 would have to register.
        p.tracker.add_entry(7, 0x8000).unwrap();
        assert!(p.add(2, "b").is_err());
        assert_eq!(p.selector.consumer_ids(), vec![1]);
        assert_eq!(p.tracker.get_entry(0x8000).unwrap().ref_count, 1);
    }

    #[test]
    fn removing_hands_buckets_back_and_returns_the_acks() {
        let mut p = Owned::new();
        p.add(1, "a").unwrap();
        assert_eq!(p.send(0, 0x9000), Some(1));
        p.add(2, "b").unwrap();
        assert_eq!(p.send(1, 0x9000), None);
        // Consumer 2 leaves: consumer 1 owns the bucket again and stops waiting for itself.
        let removed = p.remove(2).unwrap();
        assert!(removed.acks.is_empty());
        assert_eq!(removed.notices, vec![-1]);
        assert!(p.tracker.is_empty());
        assert_eq!(p.send(1, 0x9000), Some(1));
        let last = p.remove(1).unwrap();
        assert_eq!(last.acks.len(), 2);
        assert_eq!(p.selector.consumer_ids(), Vec::<u64>::new());
        // The one rule for a consumer not connected: NotFound, nothing changed.
        assert!(matches!(p.remove(1), Err(StateError::NotFound(_))));
    }

    #[test]
    fn removing_a_drainer_unblocks_the_new_owner() {
        let mut p = Owned::new();
        p.add(1, "a").unwrap();
        assert_eq!(p.send(0, 0x9000), Some(1));
        p.add(2, "b").unwrap();
        assert_eq!(p.send(1, 0x9000), None);
        p.add(3, "c").unwrap();
        let removed = p.remove(1).unwrap();
        assert_eq!(removed.acks.len(), 1);
        assert_eq!(removed.notices, Vec::<i32>::new());
        assert!(p.tracker.is_empty() && p.pending(1) == 0);
        assert!(p.withheld().is_empty());
    }

    #[test]
    fn the_last_consumer_leaving_clears_the_tracker() {
        let mut p = Owned::new();
        p.add(1, "a").unwrap();
        p.tracker.add_entry(9, 0x4000).unwrap();
        p.remove(1).unwrap();
        assert!(p.tracker.is_empty());
    }

    /// `entries` dispatched one at a time on `one` and as a batch on `many` (two equal
    /// dispatchers) go to the same consumers and leave the same state; the batch's
    /// consumers.
    fn decides_as_single_dispatches(
        mut one: Owned,
        mut many: Owned,
        entries: &[Entry<'_>],
    ) -> Vec<u64> {
        let want: Vec<Option<u64>> = entries.iter().map(|&e| one.dispatch(e)).collect();
        let (consumers, sent) = many.many(entries).unwrap();
        let got: Vec<Option<u64>> = consumers
            .iter()
            .zip(&sent)
            .map(|(&c, &s)| s.then_some(c))
            .collect();
        assert_eq!(got, want, "{} entries", entries.len());
        for (a, b) in one.acks.iter().zip(&many.acks) {
            assert_eq!(a.for_each(), b.for_each());
        }
        assert_eq!(one.withheld(), many.withheld());
        consumers
    }

    /// A batch far smaller than the buckets finds each owner's map by its id, not through
    /// a table over the buckets; either way it decides as single dispatches do.
    #[test]
    fn a_short_batch_over_many_buckets_decides_as_single_dispatches_do() {
        let splits: Vec<u16> = (1..256).map(|i| i * 256).collect();
        for len in [1, 3, 31, 32, 40] {
            let entries: Vec<Entry<'_>> = (0..len)
                .map(|i| stamped(i, (i as u16).wrapping_mul(0x2F1B)))
                .collect();
            let make = || {
                let mut p = Owned::with_splits(&splits);
                p.add(1, "a").unwrap();
                p.send(100, 0xF000);
                p.add(2, "b").unwrap();
                p.add(3, "c").unwrap();
                p
            };
            decides_as_single_dispatches(make(), make(), &entries);
        }
    }

    #[test]
    fn a_batch_decides_as_single_dispatches_do() {
        let entries: Vec<Entry<'_>> = (0..40)
            .map(|i| Entry {
                batch_size: 1 + i as i32 % 3,
                ..stamped(i, (i as u16).wrapping_mul(0x1E37))
            })
            .collect();
        let make = || {
            let mut p = Owned::new();
            p.add(1, "a").unwrap();
            p.send(100, 0x3100);
            p.send(101, 0xB000);
            p.add(2, "b").unwrap();
            p
        };
        let consumers = decides_as_single_dispatches(make(), make(), &entries);
        assert!(consumers.iter().all(|&c| c == 1 || c == 2));
        let mut idle = Owned::new();
        let (c, s) = idle.many(&[stamped(0, 5)]).unwrap();
        assert_eq!((c, s), (vec![0], vec![false]));
    }
}
