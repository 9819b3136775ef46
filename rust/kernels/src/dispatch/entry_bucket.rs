//! The pure part of Pulsar's `PersistentEntryBucketDispatcherMultipleConsumers` (PIP-486): an
//! entry goes whole to the owner of its bucket, a stamped entry by its `entry_hash_min`, an
//! unstamped one by its key. Each consumer's pending acks, wired to the dispatcher's draining
//! tracker, hold canonical bucket hashes, so a bucket that moves is withheld from its new
//! owner until the previous owner's acks drain; consumers connect and disconnect by the
//! dispatchers' one rule ([`super::connect`], [`super::disconnect`]).

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

use super::{check_pending, check_positions, connect, disconnect, Removed};
use crate::draining::DrainingHashes;
use crate::entry_bucket::{dispatch_to, EntryBucketSelector};
use crate::error::{KernelResult, StateResult};
use crate::pending_acks::{PendingAck, PendingAcks};
use crate::redelivery::Position;

/// What an entry is dispatched by: its stamped `entry_hash_min`, or its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    Stamped(u16),
    Key(&'a [u8]),
}

impl Route<'_> {
    /// The canonical hash of the entry's bucket, which its pending ack is kept under.
    pub fn sticky_key_hash(self, selector: &EntryBucketSelector) -> u16 {
        match self {
            Route::Stamped(h) => selector.canonical_hash_of(h),
            Route::Key(k) => selector.make_sticky_key_hash(k),
        }
    }
}

/// An entry to dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    pub ledger_id: i64,
    pub entry_id: i64,
    pub batch_size: i32,
    pub route: Route<'a>,
}

/// The owner of the entry's bucket, and the entry as a pending ack under the bucket's
/// canonical hash; None while no consumer is connected.
fn owned(selector: &EntryBucketSelector, entry: Entry<'_>) -> Option<(u64, PendingAck)> {
    let hash = entry.route.sticky_key_hash(selector);
    let ack = PendingAck {
        ledger_id: entry.ledger_id,
        entry_id: entry.entry_id,
        batch_size: entry.batch_size,
        sticky_key_hash: hash,
    };
    Some((selector.select(hash)?, ack))
}

/// Sends one entry if it may go now: the consumer it goes to, or None when no consumer is
/// connected, the owner has no pending acks in `acks_of`, its bucket drains on another
/// consumer, or the owner's map refuses it. Only the owner's acks and then the tracker are
/// asked for, so a caller locks nothing else.
pub fn dispatch<A, T>(
    selector: &EntryBucketSelector,
    entry: Entry<'_>,
    acks_of: impl FnOnce(u64) -> Option<A>,
    tracker: impl FnOnce() -> T,
) -> KernelResult<Option<u64>>
where
    A: DerefMut<Target = PendingAcks>,
    T: DerefMut<Target = DrainingHashes>,
{
    let Some((consumer, ack)) = owned(selector, entry) else {
        return Ok(None);
    };
    let Some(mut acks) = acks_of(consumer) else {
        return Ok(None);
    };
    check_pending(position(&ack), ack.sticky_key_hash, &acks)?;
    Ok(dispatch_to(consumer, ack, &mut acks, &mut tracker())?.then_some(consumer))
}

fn position(ack: &PendingAck) -> Position {
    (ack.ledger_id, ack.entry_id)
}

/// `dispatch` of each entry in order: the owner of each (0 with no consumer connected) and
/// whether it went. Every entry is checked first (`check_positions`), so an error changes
/// nothing.
pub fn dispatch_many<'e, A: DerefMut<Target = PendingAcks>>(
    selector: &EntryBucketSelector,
    entries: impl ExactSizeIterator<Item = Entry<'e>>,
    acks: &mut [A],
    tracker: &mut DrainingHashes,
) -> KernelResult<(Vec<u64>, Vec<bool>)> {
    let mut by_id: BTreeMap<u64, &mut PendingAcks> = acks
        .iter_mut()
        .map(|a| (a.consumer_id(), &mut **a))
        .collect();
    let owners: Vec<Option<(u64, PendingAck)>> = entries.map(|e| owned(selector, e)).collect();
    // Entries have owners all or none (none while no consumer is connected, when nothing
    // goes), so the items checked keep their indexes.
    check_positions(owners.iter().flatten().map(|&(consumer, ack)| {
        let pending = by_id.get(&consumer).map(|p| &**p);
        (position(&ack), ack.sticky_key_hash, pending)
    }))?;
    let (mut consumers, mut sent) = (Vec::with_capacity(owners.len()), vec![false; owners.len()]);
    for (owner, went) in owners.into_iter().zip(&mut sent) {
        let Some((consumer, ack)) = owner else {
            consumers.push(0);
            continue;
        };
        consumers.push(consumer);
        if let Some(pending) = by_id.get_mut(&consumer) {
            *went = dispatch_to(consumer, ack, pending, tracker)?;
        }
    }
    Ok((consumers, sent))
}

/// Connects a consumer; the buckets it takes from others are withheld until their pending
/// acks drain. Returns the notice for the unblocking handler. On an error (an id already
/// connected, a hash that cannot be registered) nothing changes.
pub fn add_consumer<A: Deref<Target = PendingAcks>>(
    selector: &mut EntryBucketSelector,
    consumer: u64,
    name: &str,
    acks: &[A],
    tracker: &mut DrainingHashes,
) -> StateResult<Option<i32>> {
    connect(selector, consumer, name.as_bytes(), acks, tracker)
}

/// Disconnects a consumer by the dispatchers' one rule, without a redelivery queue: its
/// pending acks are returned for the caller to redeliver.
pub fn remove_consumer<A: DerefMut<Target = PendingAcks>>(
    selector: &mut EntryBucketSelector,
    consumer: u64,
    acks: &mut [A],
    tracker: &mut DrainingHashes,
) -> KernelResult<Removed> {
    disconnect(selector, consumer, acks, tracker, None)
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
    use super::*;

    const FOUR: [u16; 3] = [0x4000, 0x8000, 0xC000];

    /// A dispatcher's parts, owned.
    struct Parts {
        selector: EntryBucketSelector,
        acks: Vec<PendingAcks>,
        tracker: DrainingHashes,
    }

    impl Parts {
        fn new() -> Self {
            Self {
                selector: EntryBucketSelector::new(&FOUR),
                acks: Vec::new(),
                tracker: DrainingHashes::new(),
            }
        }

        fn add(&mut self, consumer: u64, name: &str) -> StateResult<Option<i32>> {
            let refs: Vec<&PendingAcks> = self.acks.iter().collect();
            let notice =
                add_consumer(&mut self.selector, consumer, name, &refs, &mut self.tracker)?;
            self.acks.push(PendingAcks::new(consumer));
            Ok(notice)
        }

        fn remove(&mut self, consumer: u64) -> Removed {
            let mut refs: Vec<&mut PendingAcks> = self.acks.iter_mut().collect();
            let removed =
                remove_consumer(&mut self.selector, consumer, &mut refs, &mut self.tracker);
            self.acks.retain(|a| a.consumer_id() != consumer);
            removed.unwrap()
        }

        fn send(&mut self, entry_id: i64, hash: u16) -> Option<u64> {
            self.dispatch(stamped(entry_id, hash))
        }

        fn dispatch(&mut self, entry: Entry<'_>) -> Option<u64> {
            let acks = &mut self.acks;
            let tracker = &mut self.tracker;
            // `{ acks }` moves the borrow into the result, as a lock guard would be.
            let acks_of = |c| { acks }.iter_mut().find(|a| a.consumer_id() == c);
            dispatch(&self.selector, entry, acks_of, || tracker).unwrap()
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
        let mut p = Parts::new();
        p.add(1, "a").unwrap();
        assert_eq!(p.send(0, 0xD000), Some(1));
        // Bucket 3 moves to consumer 2 and drains on 1; entry 0 again in bucket 0 (still
        // consumer 1's) would leave bucket 3 withheld for ever: refused, nothing changed.
        p.add(2, "b").unwrap();
        assert_eq!(withheld_buckets(&p.selector, &p.tracker), vec![3]);
        let acks = &mut p.acks;
        let acks_of = |c| {
            { acks }
                .iter_mut()
                .find(|a: &&mut PendingAcks| a.consumer_id() == c)
        };
        let other = stamped(0, 0x1000);
        assert_eq!(p.selector.select(0x1000), Some(1));
        let err = dispatch(&p.selector, other, acks_of, || &mut p.tracker).unwrap_err();
        assert!(
            err.to_string()
                .contains("under sticky key hash 49152, not 1"),
            "{err}"
        );
        let mut refs: Vec<&mut PendingAcks> = p.acks.iter_mut().collect();
        let many = [stamped(5, 0x1000), other].into_iter();
        assert!(dispatch_many(&p.selector, many, &mut refs, &mut p.tracker).is_err());
        assert_eq!(p.pending(1), 1);
        assert_eq!(p.pending(2), 0);
        // Acked, the bucket is released.
        assert!(
            p.acks[0]
                .remove(1, 0, None, Some(&mut p.tracker))
                .unwrap()
                .0
        );
        assert!(withheld_buckets(&p.selector, &p.tracker).is_empty());
    }

    #[test]
    fn a_position_twice_in_one_batch_changes_nothing() {
        let mut p = Parts::new();
        p.add(1, "a").unwrap();
        let mut refs: Vec<&mut PendingAcks> = p.acks.iter_mut().collect();
        let twice = [stamped(0, 1), stamped(1, 2), stamped(0, 1)].into_iter();
        let err = dispatch_many(&p.selector, twice, &mut refs, &mut p.tracker).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("item 2: position (1, 0) is given twice"));
        assert_eq!(p.pending(1), 0);
    }

    #[test]
    fn entries_go_to_the_bucket_owner() {
        let mut p = Parts::new();
        assert_eq!(p.send(0, 0x9000), None);
        p.add(1, "a").unwrap();
        p.add(2, "b").unwrap();
        assert_eq!(p.send(0, 0x1000), Some(1));
        assert_eq!(p.send(1, 0x9000), Some(2));
        assert_eq!(p.acks[1].for_each()[0].sticky_key_hash, 0x8000);
        // An owner whose acks the caller does not hold gets nothing.
        let none = dispatch(
            &p.selector,
            stamped(2, 0x9000),
            |_| None::<&mut PendingAcks>,
            || &mut p.tracker,
        );
        assert_eq!(none, Ok(None));
    }

    #[test]
    fn a_moved_bucket_is_withheld_until_its_acks_drain() {
        let mut p = Parts::new();
        p.add(1, "a").unwrap();
        assert_eq!(p.send(0, 0x9000), Some(1));
        assert_eq!(p.add(2, "b"), Ok(None));
        assert_eq!(withheld_buckets(&p.selector, &p.tracker), vec![2]);
        assert_eq!(p.send(1, 0x9000), None);
        assert_eq!(p.send(2, 0xC000), Some(2));
        let (_, notice) = p.acks[0].remove(1, 0, None, Some(&mut p.tracker)).unwrap();
        assert_eq!(notice, Some(0x8000));
        assert!(withheld_buckets(&p.selector, &p.tracker).is_empty());
        assert_eq!(p.send(1, 0x9000), Some(2));
    }

    #[test]
    fn a_failed_add_changes_nothing() {
        let mut p = Parts::new();
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
        let mut p = Parts::new();
        p.add(1, "a").unwrap();
        assert_eq!(p.send(0, 0x9000), Some(1));
        p.add(2, "b").unwrap();
        assert_eq!(p.send(1, 0x9000), None);
        // Consumer 2 leaves: consumer 1 owns the bucket again and stops waiting for itself.
        let removed = p.remove(2);
        assert!(removed.acks.is_empty());
        assert_eq!(removed.notices, vec![-1]);
        assert!(p.tracker.is_empty());
        assert_eq!(p.send(1, 0x9000), Some(1));
        let last = p.remove(1);
        assert_eq!(last.acks.len(), 2);
        assert_eq!(p.selector.consumer_ids(), Vec::<u64>::new());
        assert_eq!(p.remove(1), Removed::default());
    }

    #[test]
    fn removing_a_drainer_unblocks_the_new_owner() {
        let mut p = Parts::new();
        p.add(1, "a").unwrap();
        assert_eq!(p.send(0, 0x9000), Some(1));
        p.add(2, "b").unwrap();
        assert_eq!(p.send(1, 0x9000), None);
        p.add(3, "c").unwrap();
        let removed = p.remove(1);
        assert_eq!(removed.acks.len(), 1);
        assert_eq!(removed.notices, Vec::<i32>::new());
        assert!(p.tracker.is_empty() && p.pending(1) == 0);
        assert!(withheld_buckets(&p.selector, &p.tracker).is_empty());
    }

    #[test]
    fn the_last_consumer_leaving_clears_the_tracker() {
        let mut p = Parts::new();
        p.add(1, "a").unwrap();
        p.tracker.add_entry(9, 0x4000).unwrap();
        p.remove(1);
        assert!(p.tracker.is_empty());
    }

    #[test]
    fn a_batch_decides_as_single_dispatches_do() {
        let entries: Vec<(i64, u16, i32)> = (0..40)
            .map(|i| (i, (i as u16).wrapping_mul(0x1E37), 1 + i as i32 % 3))
            .collect();
        let make = || {
            let mut p = Parts::new();
            p.add(1, "a").unwrap();
            p.send(100, 0x3100);
            p.send(101, 0xB000);
            p.add(2, "b").unwrap();
            p
        };
        let (mut one, mut many) = (make(), make());
        let want: Vec<Option<u64>> = entries
            .iter()
            .map(|&(e, h, n)| {
                one.dispatch(Entry {
                    batch_size: n,
                    ..stamped(e, h)
                })
            })
            .collect();
        let batch = entries.iter().map(|&(e, h, n)| Entry {
            batch_size: n,
            ..stamped(e, h)
        });
        let mut refs: Vec<&mut PendingAcks> = many.acks.iter_mut().collect();
        let (consumers, sent) =
            dispatch_many(&many.selector, batch, &mut refs, &mut many.tracker).unwrap();
        let got: Vec<Option<u64>> = consumers
            .iter()
            .zip(&sent)
            .map(|(&c, &s)| s.then_some(c))
            .collect();
        assert_eq!(got, want);
        assert!(consumers.iter().all(|&c| c == 1 || c == 2));
        for (a, b) in one.acks.iter().zip(&many.acks) {
            assert_eq!(a.for_each(), b.for_each());
        }
        assert_eq!(
            withheld_buckets(&one.selector, &one.tracker),
            withheld_buckets(&many.selector, &many.tracker)
        );
        let idle = EntryBucketSelector::new(&FOUR);
        let none: &mut [&mut PendingAcks] = &mut [];
        let (c, s) =
            dispatch_many(&idle, [stamped(0, 5)].into_iter(), none, &mut many.tracker).unwrap();
        assert_eq!((c, s), (vec![0], vec![false]));
    }
}
