//! PIP-379's draining hashes (SPEC 6): hashes whose pending messages still sit with the
//! consumer that owned them before a hash-range change, with reference counts, blocked
//! counts and per-consumer stats, following Pulsar's `DrainingHashesTracker`.
//!
//! The table is paged: 256 pages of 256 slots, a page allocated on its first entry and
//! freed with its last, so an idle tracker costs about 2 KiB and all 65,536 hashes
//! draining fit in about 0.75 MiB (Pulsar estimates 5 MB for the same).

use std::collections::{HashMap, HashSet};
use std::mem::size_of;

use super::error::{Conflict, InvalidInput, KernelResult};

/// What the unblocking handler is told when hashes were unblocked inside a batch.
pub const UNBLOCKED_IN_BATCH: i32 = -1;

const PAGE_BITS: u32 = 8;
const PAGE_SIZE: usize = 1 << PAGE_BITS;
const PAGES: usize = 1 << (16 - PAGE_BITS);

/// One hash's state; `owner` is an index into the owner table plus one, 0 when empty.
#[derive(Clone, Copy, Default)]
struct Slot {
    owner: u32,
    ref_count: u32,
    blocked_count: u32,
}

struct Page {
    slots: [Slot; PAGE_SIZE],
    used: u16,
}

/// A draining hash as `get_entry` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainingHashEntry {
    /// The consumer the hash drains on: the one its pending messages still sit with.
    pub consumer_id: u64,
    /// How many of its pending messages are not yet acked; the entry goes at zero.
    pub ref_count: u32,
    /// How many times the hash blocked a dispatch to another consumer.
    pub blocked_count: u32,
}

/// One hash of a consumer's stats: Pulsar's `DrainingHash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainingHashStat {
    /// The sticky key hash.
    pub hash: u16,
    /// How many of its pending messages are not yet acked (the entry's reference count).
    pub unack_msgs: u32,
    /// How many times it blocked a dispatch to another consumer (the entry's blocked count).
    pub blocked_attempts: u32,
}

/// A consumer's draining-hash stats, as Pulsar's `updateConsumerStats` fills them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerDrainingStats {
    /// How many hashes drain on the consumer (the length of `draining_hashes`).
    pub draining_hashes_count: u32,
    /// How many of its draining hashes were cleared (acked to zero) since its stats began.
    pub draining_hashes_cleared_total: u64,
    /// Its unacked messages over all its draining hashes: the sum of their reference counts.
    pub draining_hashes_unacked_messages: u64,
    /// Each draining hash of the consumer, in ascending hash order.
    pub draining_hashes: Vec<DrainingHashStat>,
}

/// A consumer known to the table: the owner of some entries, or the holder of stats.
struct Owner {
    consumer_id: u64,
    hashes: u32,
    cleared_total: u64,
    has_stats: bool,
}

/// The draining hashes of one dispatcher.
pub struct DrainingHashes {
    pages: Vec<Option<Box<Page>>>,
    len: usize,
    owners: Vec<Owner>,
    free_owners: Vec<u32>,
    owner_index: HashMap<u64, u32>,
    /// Draining hashes left out of their owner's stats: those it held when its stats were
    /// dropped (`consumer_removed`). As in Pulsar, whose stats list the hashes added since
    /// they began, stats made anew by a later entry leave these out.
    unlisted: HashSet<u16>,
    batch_level: u32,
    unblocked_while_batching: bool,
}

impl Default for DrainingHashes {
    fn default() -> Self {
        Self::new()
    }
}

impl DrainingHashes {
    /// A tracker with no draining hash, no stats and no open batch.
    pub fn new() -> Self {
        Self {
            pages: (0..PAGES).map(|_| None).collect(),
            len: 0,
            owners: Vec::new(),
            free_owners: Vec::new(),
            owner_index: HashMap::new(),
            unlisted: HashSet::new(),
            batch_level: 0,
            unblocked_while_batching: false,
        }
    }

    /// How many hashes are draining.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no hash is draining.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds one pending message of `hash` to `consumer`'s draining entry, creating it.
    /// Hash 0 ("not set") and a hash another consumer is draining are errors.
    pub fn add_entry(&mut self, consumer: u64, hash: u16) -> KernelResult<()> {
        self.check_add(consumer, hash, 1)?;
        self.apply_add(consumer, hash);
        Ok(())
    }

    /// `add_entry` for every hash in order; on an error nothing is added.
    pub fn add_entries(&mut self, consumer: u64, hashes: &[u16]) -> KernelResult<()> {
        let most = u32::try_from(hashes.len()).unwrap_or(u32::MAX);
        for (i, &hash) in hashes.iter().enumerate() {
            self.check_add(consumer, hash, most).map_err(|e| e.at(i))?;
        }
        for &hash in hashes {
            self.apply_add(consumer, hash);
        }
        Ok(())
    }

    fn check_add(&self, consumer: u64, hash: u16, adding: u32) -> KernelResult<()> {
        if hash == 0 {
            return Err(InvalidInput::ReservedHash { position: None });
        }
        match self.slot(hash) {
            Some(slot) if self.owners[slot.owner as usize - 1].consumer_id != consumer => {
                Err(self.owner_error(slot, consumer, hash))
            }
            Some(slot) if slot.ref_count.checked_add(adding).is_none() => {
                Err(Conflict::RefCountOverflow { hash }.into())
            }
            _ => Ok(()),
        }
    }

    fn apply_add(&mut self, consumer: u64, hash: u16) {
        if self.slot(hash).is_none() {
            let owner = self.intern(consumer);
            let page = self.page_mut(hash);
            page.used += 1;
            page.slots[usize::from(hash) % PAGE_SIZE].owner = owner;
            self.len += 1;
            let o = &mut self.owners[owner as usize - 1];
            o.hashes += 1;
            o.has_stats = true;
        }
        self.slot_mut(hash).ref_count += 1;
    }

    /// Takes one pending message of `hash` off `consumer`'s entry. At zero the entry goes;
    /// when it had blocked a dispatch and `closing` is false, the result is the hash to tell
    /// the unblocking handler (outside a batch). Hash 0 and unknown hashes change nothing;
    /// a hash another consumer is draining is an error.
    pub fn reduce_ref_count(
        &mut self,
        consumer: u64,
        hash: u16,
        closing: bool,
    ) -> KernelResult<Option<i32>> {
        self.check_owner(consumer, hash)?;
        Ok(self.apply_reduce(hash, closing))
    }

    /// `reduce_ref_count` for every hash in one batch; the result is the -1 to tell the
    /// handler when the batch unblocked something. On an error nothing changes.
    pub fn reduce_ref_counts(
        &mut self,
        consumer: u64,
        hashes: &[u16],
        closing: bool,
    ) -> KernelResult<Option<i32>> {
        for (i, &hash) in hashes.iter().enumerate() {
            self.check_owner(consumer, hash).map_err(|e| e.at(i))?;
        }
        self.start_batch();
        for &hash in hashes {
            self.apply_reduce(hash, closing);
        }
        self.end_batch()
    }

    /// Fails when any of `hashes` is draining for a consumer other than `consumer`. Since
    /// reductions only ever remove entries, this is checked once up front for a whole batch.
    pub fn check_owners(
        &self,
        consumer: u64,
        hashes: impl IntoIterator<Item = u16>,
    ) -> KernelResult<()> {
        hashes
            .into_iter()
            .try_for_each(|hash| self.check_owner(consumer, hash))
    }

    fn check_owner(&self, consumer: u64, hash: u16) -> KernelResult<()> {
        match self.slot(hash) {
            Some(slot) if self.owners[slot.owner as usize - 1].consumer_id != consumer => {
                Err(self.owner_error(slot, consumer, hash))
            }
            _ => Ok(()),
        }
    }

    fn owner_error(&self, slot: Slot, consumer: u64, hash: u16) -> InvalidInput {
        let owner = self.owners[slot.owner as usize - 1].consumer_id;
        Conflict::Draining {
            hash,
            owner,
            consumer,
        }
        .into()
    }

    /// Callers have checked the owner; a hash with no entry (or 0) is ignored.
    pub(crate) fn apply_reduce(&mut self, hash: u16, closing: bool) -> Option<i32> {
        let slot = self.slot(hash)?;
        if slot.ref_count > 1 {
            self.slot_mut(hash).ref_count -= 1;
            return None;
        }
        self.remove(hash);
        if closing || slot.blocked_count == 0 {
            return None;
        }
        if self.batch_level > 0 {
            self.unblocked_while_batching = true;
            None
        } else {
            Some(i32::from(hash))
        }
    }

    /// Whether dispatching `hash` to `consumer` must wait. A hash draining on the same
    /// consumer was reassigned back to it: the entry goes and nothing is blocked. A hash
    /// draining elsewhere counts one more blocked attempt and blocks.
    #[inline]
    pub fn should_block_sticky_key_hash(&mut self, consumer: u64, hash: u16) -> bool {
        let Some(page) = self.pages[usize::from(hash) >> PAGE_BITS].as_deref_mut() else {
            return false;
        };
        let slot = &mut page.slots[usize::from(hash) % PAGE_SIZE];
        if slot.owner == 0 {
            return false;
        }
        if self.owners[slot.owner as usize - 1].consumer_id != consumer {
            slot.blocked_count = slot.blocked_count.saturating_add(1);
            return true;
        }
        self.remove(hash);
        false
    }

    /// `should_block_sticky_key_hash` for each `(consumer_of(i), hashes[i])` in order.
    pub fn should_block_many(
        &mut self,
        consumer_of: impl Fn(usize) -> u64,
        hashes: &[u16],
        out: &mut [bool],
    ) {
        if self.is_empty() {
            out.fill(false);
            return;
        }
        for (i, (slot, &hash)) in out.iter_mut().zip(hashes).enumerate() {
            *slot = self.should_block_sticky_key_hash(consumer_of(i), hash);
        }
    }

    /// The entry of a draining hash; None for hash 0 and for hashes not draining.
    pub fn get_entry(&self, hash: u16) -> Option<DrainingHashEntry> {
        self.slot(hash).map(|slot| DrainingHashEntry {
            consumer_id: self.owners[slot.owner as usize - 1].consumer_id,
            ref_count: slot.ref_count,
            blocked_count: slot.blocked_count,
        })
    }

    /// Starts a (nestable) batch: unblocked hashes are reported once, as -1, when the
    /// outermost batch ends.
    pub fn start_batch(&mut self) {
        self.batch_level += 1;
    }

    /// Ends a batch; the result is the -1 to tell the handler when the outermost batch
    /// unblocked something. Ending a batch that was never started is an error.
    pub fn end_batch(&mut self) -> KernelResult<Option<i32>> {
        if self.batch_level == 0 {
            return Err(InvalidInput::OutOfSequence {
                call: "end_batch",
                missing: "a matching start_batch",
            });
        }
        self.batch_level -= 1;
        if self.batch_level == 0 && self.unblocked_while_batching {
            self.unblocked_while_batching = false;
            return Ok(Some(UNBLOCKED_IN_BATCH));
        }
        Ok(None)
    }

    /// Drops every entry and every consumer's stats; an open batch stays open.
    pub fn clear(&mut self) {
        self.pages.iter_mut().for_each(|p| *p = None);
        self.len = 0;
        self.owners = Vec::new();
        self.free_owners = Vec::new();
        self.owner_index = HashMap::new();
        self.unlisted = HashSet::new();
    }

    /// Forgets a consumer's stats (its cleared total); its entries, if any, stay, but out of
    /// any stats the consumer gets later, as in Pulsar.
    pub fn consumer_removed(&mut self, consumer: u64) {
        if let Some(&owner) = self.owner_index.get(&consumer) {
            if self.owners[owner as usize - 1].hashes > 0 {
                let held: Vec<u16> = self.hashes_of(owner).iter().map(|d| d.hash).collect();
                self.unlisted.extend(held);
            }
            let o = &mut self.owners[owner as usize - 1];
            o.has_stats = false;
            o.cleared_total = 0;
            self.release_if_unused(owner);
        }
    }

    /// The consumer's stats; all zero for a consumer without stats.
    pub fn consumer_stats(&self, consumer: u64) -> ConsumerDrainingStats {
        let Some(&owner) = self.owner_index.get(&consumer) else {
            return ConsumerDrainingStats::default();
        };
        let o = &self.owners[owner as usize - 1];
        if !o.has_stats {
            return ConsumerDrainingStats::default();
        }
        let mut draining_hashes = self.hashes_of(owner);
        if !self.unlisted.is_empty() {
            draining_hashes.retain(|d| !self.unlisted.contains(&d.hash));
        }
        ConsumerDrainingStats {
            draining_hashes_count: draining_hashes.len() as u32,
            draining_hashes_cleared_total: o.cleared_total,
            draining_hashes_unacked_messages: draining_hashes
                .iter()
                .map(|d| u64::from(d.unack_msgs))
                .sum(),
            draining_hashes,
        }
    }

    fn hashes_of(&self, owner: u32) -> Vec<DrainingHashStat> {
        let mut out = Vec::new();
        for (p, page) in self.pages.iter().enumerate() {
            let Some(page) = page else { continue };
            for (i, slot) in page.slots.iter().enumerate() {
                if slot.owner == owner {
                    out.push(DrainingHashStat {
                        hash: (p * PAGE_SIZE + i) as u16,
                        unack_msgs: slot.ref_count,
                        blocked_attempts: slot.blocked_count,
                    });
                }
            }
        }
        out
    }

    /// Bytes held on the heap and inline, counting each allocation at its capacity.
    pub fn memory_bytes(&self) -> usize {
        let pages = self.pages.iter().flatten().count() * size_of::<Page>();
        let index = self.owner_index.capacity() * (size_of::<(u64, u32)>() + 1)
            + self.unlisted.capacity() * (size_of::<u16>() + 1);
        size_of::<Self>()
            + self.pages.capacity() * size_of::<Option<Box<Page>>>()
            + pages
            + self.owners.capacity() * size_of::<Owner>()
            + self.free_owners.capacity() * size_of::<u32>()
            + index
    }

    fn slot(&self, hash: u16) -> Option<Slot> {
        let page = self.pages[usize::from(hash) >> PAGE_BITS].as_ref()?;
        let slot = page.slots[usize::from(hash) % PAGE_SIZE];
        (slot.owner != 0).then_some(slot)
    }

    /// Only for hashes whose page exists.
    fn slot_mut(&mut self, hash: u16) -> &mut Slot {
        &mut self.page_mut(hash).slots[usize::from(hash) % PAGE_SIZE]
    }

    fn page_mut(&mut self, hash: u16) -> &mut Page {
        self.pages[usize::from(hash) >> PAGE_BITS].get_or_insert_with(|| {
            Box::new(Page {
                slots: [Slot::default(); PAGE_SIZE],
                used: 0,
            })
        })
    }

    /// Removes an existing entry, counting it as cleared for its consumer.
    fn remove(&mut self, hash: u16) {
        let p = usize::from(hash) >> PAGE_BITS;
        let Some(page) = self.pages[p].as_mut() else {
            return;
        };
        let slot = std::mem::take(&mut page.slots[usize::from(hash) % PAGE_SIZE]);
        page.used -= 1;
        if page.used == 0 {
            self.pages[p] = None;
        }
        self.len -= 1;
        if !self.unlisted.is_empty() {
            self.unlisted.remove(&hash);
        }
        let o = &mut self.owners[slot.owner as usize - 1];
        o.hashes -= 1;
        if o.has_stats {
            o.cleared_total += 1;
        }
        self.release_if_unused(slot.owner);
    }

    fn intern(&mut self, consumer: u64) -> u32 {
        if let Some(&owner) = self.owner_index.get(&consumer) {
            return owner;
        }
        let fresh = Owner {
            consumer_id: consumer,
            hashes: 0,
            cleared_total: 0,
            has_stats: true,
        };
        let owner = match self.free_owners.pop() {
            Some(owner) => {
                self.owners[owner as usize - 1] = fresh;
                owner
            }
            None => {
                self.owners.push(fresh);
                self.owners.len() as u32
            }
        };
        self.owner_index.insert(consumer, owner);
        owner
    }

    fn release_if_unused(&mut self, owner: u32) {
        let o = &self.owners[owner as usize - 1];
        if o.hashes == 0 && !o.has_stats {
            self.owner_index.remove(&o.consumer_id);
            self.free_owners.push(owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(t: &DrainingHashes, hash: u16) -> Option<(u64, u32, u32)> {
        t.get_entry(hash)
            .map(|e| (e.consumer_id, e.ref_count, e.blocked_count))
    }

    #[test]
    fn a_reference_count_at_its_most_refuses_another_add() {
        let mut t = DrainingHashes::new();
        t.add_entry(1, 7).unwrap();
        t.slot_mut(7).ref_count = u32::MAX;
        assert_eq!(
            t.add_entry(1, 7).unwrap_err(),
            InvalidInput::Conflict(Conflict::RefCountOverflow { hash: 7 })
        );
        assert_eq!(entry(&t, 7), Some((1, u32::MAX, 0)));
    }

    #[test]
    fn add_reduce_and_remove() {
        let mut t = DrainingHashes::new();
        t.add_entry(1, 7).unwrap();
        t.add_entry(1, 7).unwrap();
        assert_eq!(entry(&t, 7), Some((1, 2, 0)));
        assert_eq!(t.reduce_ref_count(1, 7, false), Ok(None));
        assert_eq!(entry(&t, 7), Some((1, 1, 0)));
        assert_eq!(t.reduce_ref_count(1, 7, false), Ok(None));
        assert_eq!(entry(&t, 7), None);
        assert!(t.is_empty());
        assert_eq!(t.reduce_ref_count(1, 7, false), Ok(None));
    }

    #[test]
    fn zero_and_foreign_hashes() {
        let mut t = DrainingHashes::new();
        assert!(t.add_entry(1, 0).is_err());
        t.add_entry(1, 5).unwrap();
        let err = t.add_entry(2, 5).unwrap_err();
        assert!(
            err.to_string()
                .contains("consumer 1 is already draining hash 5"),
            "{err}"
        );
        assert!(t.reduce_ref_count(2, 5, false).is_err());
        assert_eq!(entry(&t, 5), Some((1, 1, 0)));
        assert_eq!(t.reduce_ref_count(2, 0, false), Ok(None));
        assert_eq!(t.get_entry(0), None);
        assert!(!t.should_block_sticky_key_hash(2, 0));
    }

    #[test]
    fn blocking_and_unblocking() {
        let mut t = DrainingHashes::new();
        t.add_entry(1, 9).unwrap();
        assert!(t.should_block_sticky_key_hash(2, 9));
        assert!(t.should_block_sticky_key_hash(3, 9));
        assert_eq!(entry(&t, 9), Some((1, 1, 2)));
        assert_eq!(t.reduce_ref_count(1, 9, false), Ok(Some(9)));
        t.add_entry(1, 9).unwrap();
        assert!(t.should_block_sticky_key_hash(2, 9));
        assert_eq!(t.reduce_ref_count(1, 9, true), Ok(None));
    }

    #[test]
    fn same_consumer_removes_the_entry() {
        let mut t = DrainingHashes::new();
        t.add_entry(1, 9).unwrap();
        t.add_entry(1, 9).unwrap();
        assert!(!t.should_block_sticky_key_hash(1, 9));
        assert!(t.is_empty());
        let stats = t.consumer_stats(1);
        assert_eq!(stats.draining_hashes_cleared_total, 1);
        assert_eq!(stats.draining_hashes_unacked_messages, 0);
    }

    #[test]
    fn batches_report_once() {
        let mut t = DrainingHashes::new();
        for h in [3, 4] {
            t.add_entry(1, h).unwrap();
            assert!(t.should_block_sticky_key_hash(2, h));
        }
        t.start_batch();
        t.start_batch();
        assert_eq!(t.reduce_ref_count(1, 3, false), Ok(None));
        assert_eq!(t.end_batch(), Ok(None));
        assert_eq!(t.reduce_ref_count(1, 4, false), Ok(None));
        assert_eq!(t.end_batch(), Ok(Some(UNBLOCKED_IN_BATCH)));
        assert!(t.end_batch().is_err());
        t.start_batch();
        assert_eq!(t.end_batch(), Ok(None));
    }

    #[test]
    fn batch_reduce_checks_first() {
        let mut t = DrainingHashes::new();
        t.add_entry(1, 3).unwrap();
        t.add_entry(2, 4).unwrap();
        let refused = t.reduce_ref_counts(1, &[3, 4], false);
        assert!(matches!(refused, Err(InvalidInput::Item { index: 1, .. })));
        assert_eq!(entry(&t, 3), Some((1, 1, 0)));
        assert!(t.should_block_sticky_key_hash(2, 3));
        assert_eq!(t.reduce_ref_counts(1, &[3, 5, 0], false), Ok(Some(-1)));
        let refused = t.add_entries(1, &[6, 0]);
        assert!(matches!(refused, Err(InvalidInput::Item { index: 1, .. })));
        assert_eq!(t.get_entry(6), None);
    }

    #[test]
    fn stats_follow_the_entries() {
        let mut t = DrainingHashes::new();
        for h in [300, 2, 2, 2] {
            t.add_entry(7, h).unwrap();
        }
        assert!(t.should_block_sticky_key_hash(8, 2));
        let s = t.consumer_stats(7);
        assert_eq!(s.draining_hashes_count, 2);
        assert_eq!(s.draining_hashes_unacked_messages, 4);
        assert_eq!(
            s.draining_hashes,
            vec![
                DrainingHashStat {
                    hash: 2,
                    unack_msgs: 3,
                    blocked_attempts: 1
                },
                DrainingHashStat {
                    hash: 300,
                    unack_msgs: 1,
                    blocked_attempts: 0
                },
            ]
        );
        t.reduce_ref_count(7, 300, false).unwrap();
        assert_eq!(t.consumer_stats(7).draining_hashes_cleared_total, 1);
        t.consumer_removed(7);
        assert_eq!(t.consumer_stats(7), ConsumerDrainingStats::default());
        assert_eq!(t.consumer_stats(99), ConsumerDrainingStats::default());
        t.clear();
        assert!(t.is_empty());
    }

    /// Pulsar's `consumerRemoved` drops the consumer's stats while its entries stay; stats it
    /// gets anew from a later entry list only the hashes added since (its RoaringBitmap),
    /// though a cleared old hash still counts in the cleared total.
    #[test]
    fn stats_made_anew_leave_out_earlier_hashes() {
        let mut t = DrainingHashes::new();
        t.add_entry(2, 1).unwrap();
        t.consumer_removed(2);
        assert_eq!(t.consumer_stats(2), ConsumerDrainingStats::default());
        t.add_entry(2, 2).unwrap();
        t.add_entry(2, 1).unwrap();
        let s = t.consumer_stats(2);
        assert_eq!(s.draining_hashes_count, 1);
        assert_eq!(s.draining_hashes_unacked_messages, 1);
        assert_eq!(s.draining_hashes[0].hash, 2);
        t.reduce_ref_count(2, 1, false).unwrap();
        t.reduce_ref_count(2, 1, false).unwrap();
        assert_eq!(t.consumer_stats(2).draining_hashes_cleared_total, 1);
        t.add_entry(2, 1).unwrap();
        assert_eq!(t.consumer_stats(2).draining_hashes_count, 2);
        assert!(t.unlisted.is_empty());
    }

    #[test]
    fn owners_are_reused() {
        let mut t = DrainingHashes::new();
        for c in 0..100u64 {
            t.add_entry(c, 1 + c as u16).unwrap();
            t.reduce_ref_count(c, 1 + c as u16, false).unwrap();
            t.consumer_removed(c);
        }
        assert_eq!(t.owners.len(), 1);
    }

    #[test]
    fn all_hashes_fit_in_under_a_mebibyte() {
        let mut t = DrainingHashes::new();
        for h in 1..=u16::MAX {
            t.add_entry(u64::from(h % 10), h).unwrap();
        }
        assert_eq!(t.len(), 65_535);
        assert!(t.memory_bytes() < 1 << 20, "{}", t.memory_bytes());
        for h in 1..=u16::MAX {
            t.reduce_ref_count(u64::from(h % 10), h, false).unwrap();
        }
        assert!(t.memory_bytes() < 4 << 10, "{}", t.memory_bytes());
    }
}
