//! The one hand-off rule of PIP-379 draining (Pulsar's `registerDrainingHashes`), applied
//! after any change of hash-range owners, whatever the selector (consistent hashing, entry
//! buckets, an explicit bucket assignment):
//!
//! * a consumer that lost ranges has each of its pending acks in them registered as draining
//!   under the ack's sticky key hash, so that the hash's new owner waits for the acks;
//! * a consumer that got ranges back releases its own draining entries in them, one
//!   reference per pending ack there, since it no longer waits for itself (without this a
//!   range lost twice would count its pending acks twice and never drain).
//!
//! The consumer that was just added or removed is skipped, as in Pulsar.

use std::collections::HashMap;

use super::draining::DrainingHashes;
use super::error::{Conflict, KernelResult};
use super::impacted::{contains_hash, ImpactedConsumers};
use super::pending_acks::PendingAcks;

/// What one hand-off did, and the notice (a hash, or -1) for the unblocking handler.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandOff {
    /// How many pending acks were registered as draining for the consumers that lost ranges.
    pub registered: usize,
    /// How many draining references the consumers that got ranges back released on their own
    /// hashes.
    pub released: usize,
    /// -1 ([`UNBLOCKED_IN_BATCH`](crate::draining::UNBLOCKED_IN_BATCH)) when a release unblocked a
    /// hash, for the unblocking handler; else None.
    pub notice: Option<i32>,
}

/// Applies `impacted` to `tracker` through the pending acks of `maps` (one per consumer).
/// Every registration is checked before anything changes, so on an error nothing has.
pub fn register_draining_hashes(
    impacted: &ImpactedConsumers,
    skip: Option<u64>,
    maps: &[&PendingAcks],
    tracker: &mut DrainingHashes,
) -> KernelResult<HandOff> {
    let mut adds: Vec<(u64, Vec<u16>)> = Vec::new();
    let mut releases: Vec<(u64, u16)> = Vec::new();
    for map in maps.iter().filter(|m| Some(m.consumer_id()) != skip) {
        let c = map.consumer_id();
        let lost = impacted.removed.get(&c).map_or(&[][..], Vec::as_slice);
        let gained = impacted.added.get(&c).map_or(&[][..], Vec::as_slice);
        if lost.is_empty() && gained.is_empty() {
            continue;
        }
        let acks = map.for_each();
        let hashes = |ranges| {
            acks.iter()
                .map(|a| a.sticky_key_hash)
                .filter(move |&h| h != 0 && contains_hash(ranges, h))
        };
        adds.push((c, hashes(lost).collect()));
        releases.extend(hashes(gained).map(|h| (c, h)));
    }
    check_adds(&adds, tracker)?;
    let mut done = HandOff::default();
    for (c, hashes) in &adds {
        tracker.add_entries(*c, hashes)?;
        done.registered += hashes.len();
    }
    tracker.start_batch();
    for &(c, h) in &releases {
        if tracker.get_entry(h).is_some_and(|e| e.consumer_id == c) {
            tracker.reduce_ref_count(c, h, false)?;
            done.released += 1;
        }
    }
    done.notice = tracker.end_batch()?;
    Ok(done)
}

/// Fails when a hash to register drains, or is about to drain, on another consumer.
fn check_adds(adds: &[(u64, Vec<u16>)], tracker: &DrainingHashes) -> KernelResult<()> {
    let mut planned: HashMap<u16, u64> = HashMap::new();
    for (c, hashes) in adds {
        for &h in hashes {
            let owner = tracker.get_entry(h).map(|e| e.consumer_id);
            let owner = owner.or_else(|| planned.get(&h).copied());
            if let Some(other) = owner.filter(|o| o != c) {
                return Err(Conflict::Draining {
                    hash: h,
                    owner: other,
                    consumer: *c,
                }
                .into());
            }
            planned.insert(h, *c);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buckets::HashRange;
    use crate::impacted::impacted_consumers;
    use crate::pending_acks::PendingAck;

    fn r(start: u16, end: u16) -> HashRange {
        HashRange::between(start, end).unwrap()
    }

    fn acks(consumer: u64, hashes: &[u16]) -> PendingAcks {
        let mut m = PendingAcks::new(consumer);
        for (i, &h) in hashes.iter().enumerate() {
            let ack = PendingAck {
                ledger_id: 1,
                entry_id: i as i64,
                batch_size: 1,
                sticky_key_hash: h,
            };
            assert!(m.add_pending_ack_if_allowed(ack, None).unwrap());
        }
        m
    }

    #[test]
    fn lost_ranges_drain_and_regained_ranges_release() {
        let (a, b) = (acks(1, &[5, 5, 0x9000]), acks(2, &[]));
        let one = [(r(0, 0xFFFF), 1)];
        let two = [(r(0, 0x7FFF), 1), (r(0x8000, 0xFFFF), 2)];
        let mut t = DrainingHashes::new();
        let joined = impacted_consumers(&one, &two);
        let done = register_draining_hashes(&joined, Some(2), &[&a, &b], &mut t).unwrap();
        assert_eq!((done.registered, done.released), (1, 0));
        assert_eq!(t.get_entry(0x9000).unwrap().ref_count, 1);
        assert!(t.should_block_sticky_key_hash(2, 0x9000));
        // b leaves before a acked: a gets the range back and releases its own entry.
        let left = impacted_consumers(&two, &one);
        let done = register_draining_hashes(&left, Some(2), &[&a], &mut t).unwrap();
        assert_eq!((done.registered, done.released), (0, 1));
        assert!(t.is_empty());
        assert_eq!(done.notice, Some(-1));
    }

    #[test]
    fn a_range_lost_twice_drains_once() {
        let a = acks(1, &[0x9000]);
        let one = [(r(0, 0xFFFF), 1)];
        let two = [(r(0, 0x7FFF), 1), (r(0x8000, 0xFFFF), 2)];
        let mut t = DrainingHashes::new();
        for _ in 0..3 {
            let lost = impacted_consumers(&one, &two);
            register_draining_hashes(&lost, Some(2), &[&a], &mut t).unwrap();
            let back = impacted_consumers(&two, &one);
            register_draining_hashes(&back, Some(2), &[&a], &mut t).unwrap();
        }
        assert!(t.is_empty());
    }

    #[test]
    fn conflicting_registrations_change_nothing() {
        let (a, b) = (acks(1, &[7]), acks(2, &[7, 9]));
        let before = [(r(0, 0xFFFF), 3)];
        let lost = ImpactedConsumers::from_ranges(
            [(1, vec![r(0, 10)]), (2, vec![r(0, 10)])].into(),
            Default::default(),
        );
        let mut t = DrainingHashes::new();
        assert!(register_draining_hashes(&lost, None, &[&a, &b], &mut t).is_err());
        assert!(t.is_empty());
        let none = impacted_consumers(&before, &before);
        let done = register_draining_hashes(&none, None, &[&a, &b], &mut t).unwrap();
        assert_eq!(done, HandOff::default());
    }
}
