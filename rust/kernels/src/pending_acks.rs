//! One consumer's pending acks (SPEC 6), following Pulsar's `PendingAcksMap`: messages sent
//! and not yet acknowledged, ordered by (ledger id, entry id), each with its remaining
//! unacked count (the batch size when sent, less the batch indexes acked since) and sticky
//! key hash.
//!
//! When wired to a `DrainingHashes` table, the map plays the part PIP-379's dispatcher gives
//! it: an add is refused while another consumer drains the hash, and every removal takes a
//! reference off the hash's draining entry (several removals in one batch). Each operation
//! returns at most one notice for the unblocking handler. Checks run before any change, so
//! a failed operation changes nothing here or in the table.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use super::buckets::HashRange;
use super::draining::DrainingHashes;
use super::error::{Conflict, InvalidInput, KernelResult};

/// A pending ack as the iterating operations report it; `batch_size` is the remaining
/// unacked count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingAck {
    /// The message's ledger id.
    pub ledger_id: i64,
    /// The message's entry id within its ledger.
    pub entry_id: i64,
    /// Its unacked count, in `[0, i32::MAX]`: the batch size when sent, less the batch indexes
    /// acked since.
    pub batch_size: i32,
    /// Its sticky key hash; 0 means "not set", which a map wired to a draining table refuses.
    pub sticky_key_hash: u16,
}

/// The operations' results, with the hash (or -1) the unblocking handler is to be told.
pub type WithNotice<T> = (T, Option<i32>);

/// One consumer's pending acks, Pulsar's `PendingAcksMap`: `(ledger_id, entry_id)` to
/// `(unacked count, sticky key hash)`, ordered by position, refusing every add once closed.
pub struct PendingAcks {
    consumer_id: u64,
    acks: BTreeMap<(i64, i64), (i32, u16)>,
    closed: bool,
}

impl PendingAcks {
    /// An open, empty map for `consumer_id`.
    pub fn new(consumer_id: u64) -> Self {
        Self {
            consumer_id,
            acks: BTreeMap::new(),
            closed: false,
        }
    }

    /// The consumer whose pending acks these are.
    pub fn consumer_id(&self) -> u64 {
        self.consumer_id
    }

    /// How many positions are pending.
    pub fn len(&self) -> usize {
        self.acks.len()
    }

    /// True when no position is pending.
    pub fn is_empty(&self) -> bool {
        self.acks.is_empty()
    }

    /// True once the map is closed: it refuses every add.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The messages still unacked: the sum of every pending ack's remaining count.
    pub fn unacked_messages(&self) -> i64 {
        self.acks
            .values()
            .map(|&(remaining, _)| i64::from(remaining))
            .sum()
    }

    /// Adds (or overwrites) a pending ack unless the map is closed or, when wired, another
    /// consumer is draining the hash. With a table, hash 0 is an error, except that a closed
    /// map refuses every add first, as Pulsar's checks `closed` before its add handler.
    pub fn add_pending_ack_if_allowed(
        &mut self,
        ack: PendingAck,
        tracker: Option<&DrainingHashes>,
    ) -> KernelResult<bool> {
        batch_count(ack.batch_size.into(), "batch_size")?;
        if tracker.is_some() && ack.sticky_key_hash == 0 && !self.closed {
            return Err(missing_hash(ack));
        }
        Ok(self.add_checked(ack, tracker))
    }

    /// `add_pending_ack_if_allowed` for each ack in order; on an error nothing is added.
    pub fn add_many(
        &mut self,
        acks: &[PendingAck],
        tracker: Option<&DrainingHashes>,
    ) -> KernelResult<Vec<bool>> {
        for (i, &ack) in acks.iter().enumerate() {
            batch_count(ack.batch_size.into(), &format!("acks[{i}].batch_size"))?;
            if tracker.is_some() && ack.sticky_key_hash == 0 && !self.closed {
                return Err(missing_hash(ack).at(i));
            }
        }
        Ok(acks.iter().map(|&a| self.add_checked(a, tracker)).collect())
    }

    fn add_checked(&mut self, ack: PendingAck, tracker: Option<&DrainingHashes>) -> bool {
        if !allows(self.closed, self.consumer_id, ack.sticky_key_hash, tracker) {
            return false;
        }
        self.acks.insert(
            (ack.ledger_id, ack.entry_id),
            (ack.batch_size, ack.sticky_key_hash),
        );
        true
    }

    /// `add_pending_ack_if_allowed` with the table, after `decide`, looking the position up
    /// once (a dispatcher's check and its add, one walk of the map): `decide` is given the
    /// `(remaining, hash)` pending at the position now, if any, and the table; its error,
    /// or false, adds nothing. The ack's own checks come first, so on any error `decide`
    /// has changed nothing.
    pub fn add_pending_ack_after(
        &mut self,
        ack: PendingAck,
        tracker: &mut DrainingHashes,
        decide: impl FnOnce(Option<(i32, u16)>, &mut DrainingHashes) -> KernelResult<bool>,
    ) -> KernelResult<bool> {
        batch_count(ack.batch_size.into(), "batch_size")?;
        if ack.sticky_key_hash == 0 && !self.closed {
            return Err(missing_hash(ack));
        }
        let slot = self.acks.entry((ack.ledger_id, ack.entry_id));
        let pending = match &slot {
            Entry::Occupied(o) => Some(*o.get()),
            Entry::Vacant(_) => None,
        };
        if !decide(pending, tracker)?
            || !allows(
                self.closed,
                self.consumer_id,
                ack.sticky_key_hash,
                Some(tracker),
            )
        {
            return Ok(false);
        }
        let value = (ack.batch_size, ack.sticky_key_hash);
        match slot {
            Entry::Occupied(mut o) => {
                o.insert(value);
            }
            Entry::Vacant(v) => {
                v.insert(value);
            }
        }
        Ok(true)
    }

    /// True when the position `(ledger_id, entry_id)` is pending.
    pub fn contains(&self, ledger_id: i64, entry_id: i64) -> bool {
        self.acks.contains_key(&(ledger_id, entry_id))
    }

    /// The greatest position pending, if any: found without comparing keys, so a lookup
    /// of a position past it (a new read's, as a rule) can be skipped.
    pub fn last_position(&self) -> Option<(i64, i64)> {
        self.acks.last_key_value().map(|(&k, _)| k)
    }

    /// `(batch_size, sticky_key_hash)` of a pending ack.
    pub fn get(&self, ledger_id: i64, entry_id: i64) -> Option<(i32, u16)> {
        self.acks.get(&(ledger_id, entry_id)).copied()
    }

    /// Pulsar's `updateRemainingUnacked`: `acked_delta` more batch indexes of a pending ack
    /// were acked. False (and nothing changes) when it is not pending or the count would go
    /// below zero; a negative delta is an error (Pulsar would raise the count).
    pub fn update_remaining_unacked(
        &mut self,
        ledger_id: i64,
        entry_id: i64,
        acked_delta: i32,
    ) -> KernelResult<bool> {
        batch_count(acked_delta.into(), "acked_delta")?;
        Ok(self.apply_acked_delta((ledger_id, entry_id), acked_delta))
    }

    /// `update_remaining_unacked` for each `(keys[i], acked_deltas[i])` in order; every
    /// delta is checked first, so an error changes nothing.
    pub fn update_remaining_unacked_many(
        &mut self,
        keys: &[(i64, i64)],
        acked_deltas: &[i32],
    ) -> KernelResult<Vec<bool>> {
        for (i, &delta) in acked_deltas.iter().enumerate() {
            batch_count(delta.into(), &format!("acked_deltas[{i}]"))?;
        }
        Ok(keys
            .iter()
            .zip(acked_deltas)
            .map(|(&key, &delta)| self.apply_acked_delta(key, delta))
            .collect())
    }

    fn apply_acked_delta(&mut self, key: (i64, i64), acked_delta: i32) -> bool {
        match self.acks.get_mut(&key) {
            Some((remaining, _)) if *remaining >= acked_delta => {
                *remaining -= acked_delta;
                true
            }
            _ => false,
        }
    }

    /// Removes a pending ack; with `expected` (remaining count, hash), only on an exact match.
    pub fn remove(
        &mut self,
        ledger_id: i64,
        entry_id: i64,
        expected: Option<(i32, u16)>,
        tracker: Option<&mut DrainingHashes>,
    ) -> KernelResult<WithNotice<bool>> {
        let found = self.get(ledger_id, entry_id);
        if found.is_none() || expected.is_some_and(|e| Some(e) != found) {
            return Ok((false, None));
        }
        let (removed, notice) = self.remove_and_get(ledger_id, entry_id, tracker)?;
        Ok((removed.is_some(), notice))
    }

    /// Removes a pending ack and returns its `(batch_size, sticky_key_hash)`.
    pub fn remove_and_get(
        &mut self,
        ledger_id: i64,
        entry_id: i64,
        tracker: Option<&mut DrainingHashes>,
    ) -> KernelResult<WithNotice<Option<(i32, u16)>>> {
        let Some((batch, hash)) = self.get(ledger_id, entry_id) else {
            return Ok((None, None));
        };
        let notice = match tracker {
            Some(t) => {
                t.check_owners(self.consumer_id, [hash])?;
                t.apply_reduce(hash, self.closed)
            }
            None => None,
        };
        self.acks.remove(&(ledger_id, entry_id));
        Ok((Some((batch, hash)), notice))
    }

    /// Removes each `(ledger_ids[i], entry_ids[i])`; the result says which were pending.
    /// The table sees the removals as one batch.
    pub fn remove_many(
        &mut self,
        keys: &[(i64, i64)],
        tracker: Option<&mut DrainingHashes>,
    ) -> KernelResult<WithNotice<Vec<bool>>> {
        let mut seen = std::collections::HashSet::new();
        let found: Vec<Option<u16>> = keys
            .iter()
            .map(|k| self.acks.get(k).filter(|_| seen.insert(*k)).map(|v| v.1))
            .collect();
        let hashes = found.iter().flatten().copied();
        let notice = self.reduce_in_batch(hashes, tracker)?;
        let mut removed = Vec::with_capacity(keys.len());
        for (key, hit) in keys.iter().zip(&found) {
            if hit.is_some() {
                self.acks.remove(key);
            }
            removed.push(hit.is_some());
        }
        Ok((removed, notice))
    }

    /// Removes every pending ack up to and including `(ledger_id, entry_id)`, returning
    /// them in order. The table sees the removals as one batch.
    pub fn remove_all_up_to(
        &mut self,
        ledger_id: i64,
        entry_id: i64,
        tracker: Option<&mut DrainingHashes>,
    ) -> KernelResult<WithNotice<Vec<PendingAck>>> {
        let removed: Vec<PendingAck> = self
            .acks
            .range(..=(ledger_id, entry_id))
            .map(to_ack)
            .collect();
        if removed.is_empty() {
            return Ok((removed, None));
        }
        let notice = self.reduce_in_batch(removed.iter().map(|a| a.sticky_key_hash), tracker)?;
        self.acks = self.acks.split_off(&(ledger_id, entry_id));
        self.acks.remove(&(ledger_id, entry_id));
        Ok((removed, notice))
    }

    /// Every pending ack, in order.
    pub fn for_each(&self) -> Vec<PendingAck> {
        self.acks.iter().map(to_ack).collect()
    }

    /// Removes and returns every pending ack; `close` also refuses every later add. The
    /// table sees the removals as one batch, as closing when the map is closed.
    pub fn for_each_and_clear(
        &mut self,
        close: bool,
        tracker: Option<&mut DrainingHashes>,
    ) -> KernelResult<WithNotice<Vec<PendingAck>>> {
        let all = self.for_each();
        let closing = self.closed || close;
        let notice = match tracker {
            Some(t) => {
                t.check_owners(self.consumer_id, all.iter().map(|a| a.sticky_key_hash))?;
                t.start_batch();
                for ack in &all {
                    t.apply_reduce(ack.sticky_key_hash, closing);
                }
                t.end_batch()?
            }
            None => None,
        };
        self.closed = closing;
        self.acks.clear();
        Ok((all, notice))
    }

    /// Registers the hash of every pending ack that falls in `ranges` as draining for this
    /// consumer (PIP-379's reaction to this consumer losing those ranges). Hash 0 is
    /// skipped. Returns how many pending acks were registered.
    pub fn register_draining_hashes(
        &self,
        ranges: &[HashRange],
        tracker: &mut DrainingHashes,
    ) -> KernelResult<usize> {
        let mut sorted = ranges.to_vec();
        sorted.sort();
        let hashes: Vec<u16> = self
            .acks
            .values()
            .map(|v| v.1)
            .filter(|&h| h != 0 && in_ranges(&sorted, h))
            .collect();
        tracker.add_entries(self.consumer_id, &hashes)?;
        Ok(hashes.len())
    }

    fn reduce_in_batch(
        &self,
        hashes: impl Iterator<Item = u16> + Clone,
        tracker: Option<&mut DrainingHashes>,
    ) -> KernelResult<Option<i32>> {
        let Some(t) = tracker else {
            return Ok(None);
        };
        t.check_owners(self.consumer_id, hashes.clone())?;
        t.start_batch();
        for hash in hashes {
            t.apply_reduce(hash, self.closed);
        }
        t.end_batch()
    }
}

fn to_ack(
    (&(ledger_id, entry_id), &(batch_size, sticky_key_hash)): (&(i64, i64), &(i32, u16)),
) -> PendingAck {
    PendingAck {
        ledger_id,
        entry_id,
        batch_size,
        sticky_key_hash,
    }
}

/// A batch size, or a count of a batch's acked indexes, called `what`: a value in
/// `[0, i32::MAX]`, as Pulsar keeps it in an int.
pub fn batch_count(value: i64, what: &str) -> KernelResult<i32> {
    i32::try_from(value)
        .ok()
        .filter(|n| *n >= 0)
        .ok_or_else(|| InvalidInput::OutOfRange {
            what: what.to_owned(),
            value: value.into(),
            min: 0,
            max: i32::MAX as u64,
        })
}

/// Whether a map (`closed`, of `consumer`) takes an ack of `hash`: open, and no other
/// consumer draining the hash.
fn allows(closed: bool, consumer: u64, hash: u16, tracker: Option<&DrainingHashes>) -> bool {
    !closed
        && tracker
            .and_then(|t| t.get_entry(hash))
            .is_none_or(|e| e.consumer_id == consumer)
}

/// An entry at `position` (ledger id, entry id), about to be dispatched under `hash`, keeps
/// the hash `held` under which it is pending on `consumer` now, if it is.
pub fn keeps_hash(
    position: (i64, i64),
    hash: u16,
    held: Option<u16>,
    consumer: u64,
) -> KernelResult<()> {
    match held {
        Some(held) if held != hash => Err(Conflict::HashChanged {
            position,
            consumer,
            held,
            hash,
        }
        .into()),
        _ => Ok(()),
    }
}

fn missing_hash(ack: PendingAck) -> InvalidInput {
    InvalidInput::ReservedHash {
        position: Some((ack.ledger_id, ack.entry_id)),
    }
}

/// Whether `hash` lies in one of the ranges, sorted by start.
fn in_ranges(sorted: &[HashRange], hash: u16) -> bool {
    let after = sorted.partition_point(|r| r.start() <= hash);
    sorted[..after].iter().rev().any(|r| r.contains_hash(hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(ledger_id: i64, entry_id: i64, hash: u16) -> PendingAck {
        PendingAck {
            ledger_id,
            entry_id,
            batch_size: 1,
            sticky_key_hash: hash,
        }
    }

    fn keys(m: &PendingAcks) -> Vec<(i64, i64)> {
        m.for_each()
            .iter()
            .map(|a| (a.ledger_id, a.entry_id))
            .collect()
    }

    #[test]
    fn ordered_adds_gets_and_removes() {
        let mut m = PendingAcks::new(1);
        for (l, e) in [(2, 1), (1, 5), (1, -1), (2, 0)] {
            assert!(m.add_pending_ack_if_allowed(ack(l, e, 9), None).unwrap());
        }
        assert_eq!(keys(&m), vec![(1, -1), (1, 5), (2, 0), (2, 1)]);
        assert_eq!(m.get(1, 5), Some((1, 9)));
        assert_eq!(m.remove(1, 5, Some((2, 9)), None), Ok((false, None)));
        assert_eq!(m.remove(1, 5, Some((1, 9)), None), Ok((true, None)));
        assert_eq!(m.remove(1, 5, None, None), Ok((false, None)));
        let (removed, _) = m.remove_all_up_to(2, 0, None).unwrap();
        assert_eq!(removed.len(), 2);
        assert_eq!(keys(&m), vec![(2, 1)]);
        assert!(m.add_pending_ack_if_allowed(ack(1, 1, 9), None).is_ok());
        assert!(m
            .add_pending_ack_if_allowed(
                PendingAck {
                    batch_size: -1,
                    ..ack(1, 1, 9)
                },
                None
            )
            .is_err());
    }

    #[test]
    fn remove_all_up_to_the_last_entry() {
        let mut m = PendingAcks::new(1);
        for e in [i64::MAX - 1, i64::MAX] {
            m.add_pending_ack_if_allowed(ack(3, e, 9), None).unwrap();
        }
        let (removed, _) = m.remove_all_up_to(3, i64::MAX, None).unwrap();
        assert_eq!(removed.len(), 2);
        assert!(m.is_empty());
    }

    #[test]
    fn partial_acks_lower_the_remaining_count() {
        let mut m = PendingAcks::new(1);
        let batch = PendingAck {
            batch_size: 100,
            ..ack(1, 1, 9)
        };
        m.add_pending_ack_if_allowed(batch, None).unwrap();
        assert_eq!(m.update_remaining_unacked(1, 1, 7), Ok(true));
        assert_eq!(m.get(1, 1), Some((93, 9)));
        assert_eq!(m.update_remaining_unacked(1, 1, 94), Ok(false));
        assert_eq!(m.update_remaining_unacked(1, 2, 1), Ok(false));
        assert!(m.update_remaining_unacked(1, 1, -1).is_err());
        assert_eq!(m.remove(1, 1, Some((100, 9)), None), Ok((false, None)));
        assert_eq!(
            m.update_remaining_unacked_many(&[(1, 1), (1, 1), (2, 2)], &[90, 4, 1]),
            Ok(vec![true, false, false])
        );
        assert!(m.update_remaining_unacked_many(&[(1, 1)], &[-3]).is_err());
        assert_eq!(m.get(1, 1), Some((3, 9)));
        assert_eq!(m.remove(1, 1, Some((3, 9)), None), Ok((true, None)));
    }

    #[test]
    fn closing_refuses_adds() {
        let mut m = PendingAcks::new(1);
        m.add_pending_ack_if_allowed(ack(1, 1, 9), None).unwrap();
        let (all, _) = m.for_each_and_clear(true, None).unwrap();
        assert_eq!(all.len(), 1);
        assert!(!m.add_pending_ack_if_allowed(ack(1, 2, 9), None).unwrap());
        assert!(m.is_empty());
    }

    /// Pulsar's `addPendingAckIfAllowed` checks `closed` before the dispatcher's add handler,
    /// which refuses hash 0: a closed map answers false even for hash 0.
    #[test]
    fn closed_map_refuses_hash_zero_without_an_error() {
        let t = DrainingHashes::new();
        let mut m = PendingAcks::new(1);
        m.for_each_and_clear(true, None).unwrap();
        assert_eq!(
            m.add_pending_ack_if_allowed(ack(1, 1, 0), Some(&t)),
            Ok(false)
        );
        assert_eq!(
            m.add_many(&[ack(1, 1, 0), ack(1, 2, 5)], Some(&t)),
            Ok(vec![false, false])
        );
    }

    #[test]
    fn wired_to_the_tracker() {
        let mut t = DrainingHashes::new();
        let mut a = PendingAcks::new(1);
        let mut b = PendingAcks::new(2);
        for e in 0..3 {
            a.add_pending_ack_if_allowed(ack(1, e, 7), Some(&t))
                .unwrap();
        }
        assert!(a
            .add_pending_ack_if_allowed(ack(1, 9, 0), Some(&t))
            .is_err());
        let r = HashRange::new(5, 8).unwrap();
        assert_eq!(a.register_draining_hashes(&[r], &mut t), Ok(3));
        assert_eq!(t.get_entry(7).unwrap().ref_count, 3);
        assert!(!b
            .add_pending_ack_if_allowed(ack(1, 10, 7), Some(&t))
            .unwrap());
        assert!(t.should_block_sticky_key_hash(2, 7));
        assert_eq!(a.remove(1, 0, None, Some(&mut t)), Ok((true, None)));
        assert_eq!(
            a.remove_many(&[(1, 1), (1, 1), (5, 5)], Some(&mut t))
                .unwrap()
                .0,
            vec![true, false, false]
        );
        assert_eq!(
            a.remove_and_get(1, 2, Some(&mut t)),
            Ok((Some((1, 7)), Some(7)))
        );
        assert!(t.is_empty());
        assert!(b
            .add_pending_ack_if_allowed(ack(1, 10, 7), Some(&t))
            .unwrap());
    }

    #[test]
    fn batches_notify_once_and_closing_not_at_all() {
        let mut t = DrainingHashes::new();
        let mut a = PendingAcks::new(1);
        for (e, h) in [(0, 3), (1, 4)] {
            a.add_pending_ack_if_allowed(ack(1, e, h), Some(&t))
                .unwrap();
            t.add_entry(1, h).unwrap();
            assert!(t.should_block_sticky_key_hash(2, h));
        }
        assert_eq!(a.remove_all_up_to(1, 1, Some(&mut t)).unwrap().1, Some(-1));
        for (e, h) in [(0, 3), (1, 4)] {
            a.add_pending_ack_if_allowed(ack(1, e, h), Some(&t))
                .unwrap();
            t.add_entry(1, h).unwrap();
            assert!(t.should_block_sticky_key_hash(2, h));
        }
        assert_eq!(a.for_each_and_clear(true, Some(&mut t)).unwrap().1, None);
        assert!(t.is_empty());
    }

    #[test]
    fn a_foreign_owner_changes_nothing() {
        let mut t = DrainingHashes::new();
        let mut a = PendingAcks::new(1);
        a.add_pending_ack_if_allowed(ack(1, 0, 3), None).unwrap();
        t.add_entry(2, 3).unwrap();
        assert!(a.remove(1, 0, None, Some(&mut t)).is_err());
        assert!(a.for_each_and_clear(true, Some(&mut t)).is_err());
        assert!(!a.is_closed());
        assert!(a.contains(1, 0));
        let r = HashRange::new(0, 9).unwrap();
        assert!(a.register_draining_hashes(&[r], &mut t).is_err());
        assert_eq!(t.get_entry(3).unwrap().ref_count, 1);
    }
}
