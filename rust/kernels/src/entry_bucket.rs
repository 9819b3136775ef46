//! PIP-486's entry-bucket consumer selector (Pulsar's `EntryBucketConsumerSelector`): a
//! segment's fixed buckets spread over the connected consumers, sorted by (name, id),
//! consumer `j` of `k` owning the contiguous buckets `j*N/k .. (j+1)*N/k - 1`.
//!
//! Every hash it hands out is a bucket's canonical hash (the bucket's start, 1 for bucket 0),
//! so pending acks and draining work per bucket; every change reports the impacted
//! consumers (ranges lost and gained).

use std::cmp::Ordering;

use super::buckets::{bucket_ranges, HashRange, MAX_HASH, MIN_FIRST_SPLIT, RING_SIZE};
use super::draining::DrainingHashes;
use super::error::{InvalidInput, KernelResult, StateResult, Tiling};
use super::hashing::key_hash;
use super::impacted::{impacted_consumers, merge_ranges, ImpactedConsumers};
use super::pending_acks::{keeps_hash, PendingAck, PendingAcks};
use super::sorted_hashes::SortedHashes;

/// Pulsar's `validateBucketBoundaries`: ranges `(start, end)` that are ascending, contiguous,
/// start at 0, tile the 16-bit ring, and leave bucket 0 at least `[0, 1]` wide.
pub fn validate_bucket_boundaries(ranges: &[(i64, i64)]) -> KernelResult<Vec<HashRange>> {
    if ranges.is_empty() {
        return Err(Tiling::NoBuckets.into());
    }
    let mut out = Vec::with_capacity(ranges.len());
    let mut expected = 0i64;
    for (i, &(start, end)) in ranges.iter().enumerate() {
        if start != expected || end < start || end > i64::from(MAX_HASH) {
            return Err(Tiling::BoundaryMisplaced {
                index: i,
                start,
                end,
                expected,
            }
            .into());
        }
        out.extend(HashRange::new(start, end));
        expected = end + 1;
    }
    if expected != i64::from(RING_SIZE) {
        return Err(Tiling::BoundariesShort { end: expected - 1 }.into());
    }
    if out[0].end() < MIN_FIRST_SPLIT - 1 {
        return Err(Tiling::FirstBucketTooNarrow.into());
    }
    Ok(out)
}

/// A connected consumer: its name and id, ordered as Pulsar orders them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Member {
    name: String,
    id: u64,
}

impl Member {
    /// Java compares strings by UTF-16 code units; so does this, for the same order.
    fn cmp_pulsar(&self, other: &Self) -> Ordering {
        self.name
            .encode_utf16()
            .cmp(other.name.encode_utf16())
            .then(self.id.cmp(&other.id))
    }
}

/// Where a hash goes: its bucket, the bucket's canonical hash and the bucket's owner (None
/// while no consumer is connected).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketRoute {
    /// The bucket's index, counted from 0.
    pub bucket: usize,
    /// The bucket's canonical hash: its start, 1 for bucket 0.
    pub hash: u16,
    /// The consumer owning the bucket; None while no consumer is connected.
    pub owner: Option<u64>,
}

/// PIP-486's entry-bucket selector over a segment's fixed buckets: the connected consumers, sorted
/// by (name, id) as Pulsar sorts them, each own a contiguous run of buckets, and every hash it
/// hands out is a bucket's canonical hash.
pub struct EntryBucketSelector {
    ranges: Vec<HashRange>,
    /// Each bucket's start; the first is 0.
    starts: SortedHashes,
    members: Vec<Member>,
    /// Bucket index -> owning consumer id; empty while no consumer is connected.
    owners: Vec<u64>,
}

impl EntryBucketSelector {
    /// A selector over the buckets of validated split points.
    pub fn new(splits: &[u16]) -> Self {
        let ranges = bucket_ranges(splits);
        let starts = SortedHashes::new(ranges.iter().map(|r| r.start()).collect());
        Self {
            ranges,
            starts,
            members: Vec::new(),
            owners: Vec::new(),
        }
    }

    /// A selector over validated bucket ranges (see [`validate_bucket_boundaries`]).
    pub fn from_bucket_ranges(ranges: &[HashRange]) -> Self {
        let splits: Vec<u16> = ranges[1..].iter().map(|r| r.start()).collect();
        Self::new(&splits)
    }

    /// The split points: every bucket's start but bucket 0's.
    pub fn bucket_splits(&self) -> &[u16] {
        &self.starts[1..]
    }

    /// The buckets, in ascending order; they tile `[0, 0xffff]`.
    pub fn bucket_ranges(&self) -> &[HashRange] {
        &self.ranges
    }

    /// How many buckets there are: one more than the split points.
    pub fn bucket_count(&self) -> usize {
        self.ranges.len()
    }

    /// The bucket holding a 16-bit hash.
    #[inline]
    pub fn bucket_index_of_hash(&self, hash: u16) -> usize {
        // Bucket 0 starts at 0, so at least one start lies at or below any hash.
        self.starts.count_at_most(hash) - 1
    }

    /// The bucket's start hash, 1 for bucket 0 (0 means "not set").
    pub fn canonical_hash_of_bucket(&self, bucket: i64) -> KernelResult<u16> {
        let count = self.starts.len();
        usize::try_from(bucket)
            .ok()
            .filter(|&b| b < count)
            .map(|b| self.starts[b].max(1))
            .ok_or(InvalidInput::NoSuchBucket {
                index: bucket,
                count,
            })
    }

    /// Any 16-bit hash normalized to its bucket's canonical hash.
    #[inline]
    pub fn canonical_hash_of(&self, hash: u16) -> u16 {
        self.starts[self.bucket_index_of_hash(hash)].max(1)
    }

    /// Pulsar's `makeStickyKeyHash` over the key hash range `[0, 65535]` (the key's hashB,
    /// 0 becoming 1), normalized to its bucket's canonical hash.
    pub fn make_sticky_key_hash(&self, key: &[u8]) -> u16 {
        self.canonical_hash_of(key_ring_hash(key))
    }

    /// The bucket holding `hash`, from one search, as a dispatch needs it.
    #[inline]
    pub fn route(&self, hash: u16) -> BucketRoute {
        let bucket = self.bucket_index_of_hash(hash);
        BucketRoute {
            bucket,
            hash: self.starts[bucket].max(1),
            owner: self.owners.get(bucket).copied(),
        }
    }

    /// Each bucket's owner, by bucket index; empty while no consumer is connected.
    pub fn owners(&self) -> &[u64] {
        &self.owners
    }

    /// The connected consumers' ids, in Pulsar's (name, id) order.
    pub fn consumer_ids(&self) -> Vec<u64> {
        self.members.iter().map(|m| m.id).collect()
    }

    /// True when `consumer` is connected.
    pub fn contains(&self, consumer: u64) -> bool {
        self.members.iter().any(|m| m.id == consumer)
    }

    /// Adds a consumer; an id already connected is an error.
    pub fn add_consumer(&mut self, consumer: u64, name: &str) -> StateResult<ImpactedConsumers> {
        if self.contains(consumer) {
            return Err(InvalidInput::ConsumerExists {
                consumer,
                status: "is already connected",
            }
            .into());
        }
        let member = Member {
            name: name.to_owned(),
            id: consumer,
        };
        let at = self
            .members
            .partition_point(|m| m.cmp_pulsar(&member) == Ordering::Less);
        self.members.insert(at, member);
        Ok(self.recompute())
    }

    /// Removes a consumer; one that is not connected changes nothing (as in Pulsar).
    pub fn remove_consumer(&mut self, consumer: u64) -> ImpactedConsumers {
        let before = self.members.len();
        self.members.retain(|m| m.id != consumer);
        if self.members.len() == before {
            return ImpactedConsumers::default();
        }
        self.recompute()
    }

    fn recompute(&mut self) -> ImpactedConsumers {
        let before = self.assignments();
        let (n, k) = (self.ranges.len(), self.members.len());
        self.owners = vec![0; if k == 0 { 0 } else { n }];
        for (j, m) in self.members.iter().enumerate() {
            self.owners[j * n / k..(j + 1) * n / k].fill(m.id);
        }
        impacted_consumers(&before, &self.assignments())
    }

    /// The owner of the bucket holding `hash`; None while no consumer is connected.
    #[inline]
    pub fn select(&self, hash: u16) -> Option<u64> {
        (!self.owners.is_empty()).then(|| self.owners[self.bucket_index_of_hash(hash)])
    }

    /// `select` of each hash into `out`; false (and `out` untouched) with no consumer.
    pub fn select_many(&self, hashes: &[u16], out: &mut [u64]) -> bool {
        if self.owners.is_empty() {
            return false;
        }
        if hashes.len() >= 1 << 12 {
            let table = super::buckets::bucket_table(self.bucket_splits());
            for (o, &h) in out.iter_mut().zip(hashes) {
                *o = self.owners[table[usize::from(h)] as usize];
            }
        } else {
            for (o, &h) in out.iter_mut().zip(hashes) {
                *o = self.owners[self.bucket_index_of_hash(h)];
            }
        }
        true
    }

    /// Each bucket range with its owner, ascending; empty with no consumer.
    pub fn assignments(&self) -> Vec<(HashRange, u64)> {
        self.ranges
            .iter()
            .copied()
            .zip(self.owners.iter().copied())
            .collect()
    }

    /// Each owning consumer's ranges, adjacent buckets merged, by consumer id.
    pub fn consumer_key_hash_ranges(&self) -> Vec<(u64, Vec<HashRange>)> {
        let mut by: std::collections::BTreeMap<u64, Vec<HashRange>> = Default::default();
        for (r, c) in self.assignments() {
            by.entry(c).or_default().push(r);
        }
        by.into_iter().map(|(c, r)| (c, merge_ranges(r))).collect()
    }
}

/// The key's hashB over the key hash range `[0, 65535]`, 0 becoming 1 (Pulsar's
/// `makeStickyKeyHash` before the bucket's canonical hash is taken).
pub fn key_ring_hash(key: &[u8]) -> u16 {
    (((key_hash(key) & 0x7FFF_FFFF) % RING_SIZE) as u16).max(1)
}

/// The dispatcher's decision for an entry whose bucket `consumer` owns (the sticky key hash
/// in `ack` being the bucket's canonical hash): withheld while another consumer drains the
/// bucket (PIP-379), else recorded as pending for `consumer` if its map allows it. Returns
/// whether the entry goes. An entry pending in `pending` under another hash is an error
/// (`pending_acks::keeps_hash`), and nothing changes; the map is looked up once.
pub fn dispatch_to(
    consumer: u64,
    ack: PendingAck,
    pending: &mut PendingAcks,
    tracker: &mut DrainingHashes,
) -> KernelResult<bool> {
    let (position, hash) = ((ack.ledger_id, ack.entry_id), ack.sticky_key_hash);
    let on = pending.consumer_id();
    pending.add_pending_ack_after(ack, tracker, |held, tracker| {
        keeps_hash(position, hash, held.map(|(_, h)| h), on)?;
        Ok(!tracker.should_block_sticky_key_hash(consumer, hash))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    const FOUR: [u16; 3] = [0x4000, 0x8000, 0xC000];

    fn r(start: u16, end: u16) -> HashRange {
        HashRange::between(start, end).unwrap()
    }

    #[test]
    fn bucket_index_and_canonical_hash() {
        let s = EntryBucketSelector::new(&FOUR);
        assert_eq!(s.bucket_splits(), FOUR);
        let same = EntryBucketSelector::from_bucket_ranges(s.bucket_ranges());
        assert_eq!(same.bucket_ranges(), s.bucket_ranges());
        for (hash, bucket) in [(0, 0), (0x3FFF, 0), (0x4000, 1), (0x7FFF, 1), (0x8000, 2)] {
            assert_eq!(s.bucket_index_of_hash(hash), bucket);
        }
        assert_eq!(s.bucket_index_of_hash(0xFFFF), 3);
        let canonical: Vec<u16> = (0..4)
            .map(|b| s.canonical_hash_of_bucket(b).unwrap())
            .collect();
        assert_eq!(canonical, vec![1, 0x4000, 0x8000, 0xC000]);
        assert!(s.canonical_hash_of_bucket(4).is_err() && s.canonical_hash_of_bucket(-1).is_err());
        assert_eq!(s.canonical_hash_of(0x1234), 1);
        assert_eq!(s.canonical_hash_of(0x7FFF), 0x4000);
    }

    #[test]
    fn bucket_index_agrees_with_a_search_of_every_split() {
        let dense: Vec<u16> = (2..300).collect();
        let every: Vec<u16> = (2..=u16::MAX).collect();
        let uneven = [2, 3, 0xFF, 0x100, 0x101, 0x1FF, 0x4000, 0xFF00, 0xFFFF];
        for splits in [&[][..], &FOUR, &dense, &every, &uneven] {
            let s = EntryBucketSelector::new(splits);
            for hash in 0..=u16::MAX {
                let searched = splits.partition_point(|&split| split <= hash);
                assert_eq!(
                    s.bucket_index_of_hash(hash),
                    searched,
                    "{hash} in {splits:?}"
                );
            }
        }
    }

    #[test]
    fn spread_is_add_order_independent_and_contiguous() {
        let mut one = EntryBucketSelector::new(&FOUR);
        let mut two = EntryBucketSelector::new(&FOUR);
        one.add_consumer(1, "consumer-a").unwrap();
        one.add_consumer(2, "consumer-b").unwrap();
        two.add_consumer(2, "consumer-b").unwrap();
        two.add_consumer(1, "consumer-a").unwrap();
        for b in 0..4 {
            let h = one.canonical_hash_of_bucket(b).unwrap();
            let expected = if b < 2 { 1 } else { 2 };
            assert_eq!(
                (one.select(h), two.select(h)),
                (Some(expected), Some(expected))
            );
        }
        assert!(one.add_consumer(1, "again").is_err());
    }

    #[test]
    fn more_consumers_than_buckets_leave_some_idle() {
        let mut s = EntryBucketSelector::new(&FOUR);
        for i in 0..6 {
            s.add_consumer(i, &format!("consumer-{i}")).unwrap();
        }
        let owners: BTreeSet<u64> = (0..4)
            .map(|b| s.select(s.canonical_hash_of_bucket(b).unwrap()).unwrap())
            .collect();
        assert_eq!(owners.len(), 4);
    }

    #[test]
    fn changes_report_impacted_ranges() {
        let mut s = EntryBucketSelector::new(&FOUR);
        let first = s.add_consumer(1, "consumer-a").unwrap();
        assert!(first.is_empty());
        assert_eq!(first.added, BTreeMap::from([(1, vec![HashRange::full()])]));
        let joined = s.add_consumer(2, "consumer-b").unwrap();
        assert_eq!(
            joined.removed,
            BTreeMap::from([(1, vec![r(0x8000, 0xFFFF)])])
        );
        assert_eq!(joined.added, BTreeMap::from([(2, vec![r(0x8000, 0xFFFF)])]));
        let left = s.remove_consumer(2);
        assert_eq!(left.removed, BTreeMap::from([(2, vec![r(0x8000, 0xFFFF)])]));
        assert_eq!(s.remove_consumer(2), ImpactedConsumers::default());
        let last = s.remove_consumer(1);
        assert_eq!(last.removed, BTreeMap::from([(1, vec![HashRange::full()])]));
        assert_eq!(s.select(1), None);
    }

    #[test]
    fn snapshot_merges_contiguous_buckets() {
        let mut s = EntryBucketSelector::new(&FOUR);
        s.add_consumer(1, "consumer-a").unwrap();
        s.add_consumer(2, "consumer-b").unwrap();
        assert_eq!(
            s.consumer_key_hash_ranges(),
            vec![(1, vec![r(0, 0x7FFF)]), (2, vec![r(0x8000, 0xFFFF)])]
        );
    }

    #[test]
    fn names_order_as_java_strings() {
        let mut s = EntryBucketSelector::new(&[0x8000]);
        // U+FF61 sorts above U+1F600 in UTF-16 (a surrogate pair starts at 0xD83D).
        s.add_consumer(1, "\u{FF61}").unwrap();
        s.add_consumer(2, "\u{1F600}").unwrap();
        assert_eq!(s.select(0), Some(2));
    }

    #[test]
    fn batch_select_agrees_with_select() {
        let mut s = EntryBucketSelector::new(&[2, 0x100, 0x9000]);
        let hashes: Vec<u16> = (0..=u16::MAX).collect();
        let mut out = vec![0; hashes.len()];
        assert!(!s.select_many(&hashes, &mut out));
        for i in 0..3 {
            s.add_consumer(i, "c").unwrap();
        }
        assert!(s.select_many(&hashes, &mut out));
        assert!(hashes
            .iter()
            .zip(&out)
            .all(|(&h, &o)| s.select(h) == Some(o)));
        let mut few = vec![0; 3];
        assert!(s.select_many(&[0, 2, 0xFFFF], &mut few));
        assert_eq!(few, vec![0, 1, 2]);
    }

    #[test]
    fn sticky_key_hash_is_the_canonical_hash_of_the_key_bucket() {
        let s = EntryBucketSelector::new(&FOUR);
        for i in 0..100 {
            let key = format!("key-{i}");
            let hash_b = (key_hash(key.as_bytes()) & 0xFFFF) as u16;
            assert_eq!(
                s.make_sticky_key_hash(key.as_bytes()),
                s.canonical_hash_of(hash_b)
            );
        }
    }

    #[test]
    fn dispatch_withholds_a_bucket_draining_elsewhere() {
        let mut tracker = DrainingHashes::new();
        let (mut a, mut b) = (PendingAcks::new(1), PendingAcks::new(2));
        let ack = |entry_id| PendingAck {
            ledger_id: 1,
            entry_id,
            batch_size: 1,
            sticky_key_hash: 0x8000,
        };
        assert!(dispatch_to(1, ack(0), &mut a, &mut tracker).unwrap());
        tracker.add_entry(1, 0x8000).unwrap();
        assert!(!dispatch_to(2, ack(1), &mut b, &mut tracker).unwrap());
        assert_eq!(tracker.get_entry(0x8000).unwrap().blocked_count, 1);
        assert!(b.is_empty());
        // Its own drainer takes it back: the entry goes, and so does the draining entry.
        assert!(dispatch_to(1, ack(2), &mut a, &mut tracker).unwrap());
        assert!(tracker.is_empty() && a.len() == 2);
    }

    #[test]
    fn boundaries_are_validated_as_pulsar_does() {
        let four = [
            (0, 0x3FFF),
            (0x4000, 0x7FFF),
            (0x8000, 0xBFFF),
            (0xC000, 0xFFFF),
        ];
        assert_eq!(validate_bucket_boundaries(&four).unwrap().len(), 4);
        assert_eq!(
            validate_bucket_boundaries(&[(0, 0xFFFF)]).unwrap(),
            vec![HashRange::full()]
        );
        for bad in [
            vec![],
            vec![(1, 0xFFFF)],
            vec![(0, 0x3FFF), (0x5000, 0xFFFF)],
            vec![(0, 0x7FFF), (0x4000, 0xFFFF)],
            vec![(0, 0x3FFF), (0x4000, 0x2000)],
            vec![(0, 0x3FFF), (0x4000, 0x7FFF)],
            vec![(0, 0), (1, 0xFFFF)],
            vec![(0, 0x1_0000)],
        ] {
            assert!(validate_bucket_boundaries(&bad).is_err(), "{bad:?}");
        }
    }
}
