//! Pulsar's `ConsistentHashingStickyKeyConsumerSelector` (SPEC 7), as on Pulsar master:
//! each consumer puts `number_of_points` points on the key hash range `[1, range_max]` at
//! `make_sticky_key_hash("{name}\0{name_index}\0{i}")`, and a hash is served by the first
//! point at or above it, wrapping.
//!
//! On a collision the consumer already on the point keeps it and the newcomer queues behind
//! it (Pulsar's `HashRingPointEntry`), taking the point when the owner leaves. `name_index`
//! is the lowest slot free among consumers sharing the name (Pulsar's
//! `ConsumerNameIndexTracker`), so namesakes do not collide and a consumer that leaves and
//! rejoins lands where it was. Every change can report, per consumer, the ranges it lost
//! and gained (Pulsar's `ImpactedConsumersResult`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::buckets::HashRange;
use super::error::{InvalidInput, KernelResult};
use super::hashing::{key_hash, sticky_hash_in};
use super::impacted::{impacted_consumers, merge_ranges, ImpactedConsumers};
use super::sorted_hashes::SortedHashes;

/// The most points a consumer may have: one per hash of the 16-bit ring.
pub const MAX_POINTS: u32 = 1 << 16;
/// Pulsar's default `rangeMaxValue`: `DEFAULT_RANGE_SIZE - 1`.
pub const DEFAULT_RANGE_MAX: u16 = 65_535;
/// From this many hashes on, `select_many` builds a table of all 65,536 hashes first.
const TABLE_WORTH_IT: usize = 1 << 14;
/// Key hash 0 means "not set" (Pulsar's `STICKY_KEY_HASH_NOT_SET`); ranges start above it.
const FIRST_HASH: u16 = 1;

/// The consumer serving one point, and the colliding consumers queued behind it in the
/// order they came.
struct HashRingPointEntry {
    selected: u64,
    colliding: Vec<u64>,
}

impl HashRingPointEntry {
    /// Takes `consumer` off the point: the first in the queue takes over from a leaving
    /// owner. Returns true when nobody is left and the point goes.
    fn remove_consumer(&mut self, consumer: u64) -> bool {
        if self.selected == consumer {
            if self.colliding.is_empty() {
                return true;
            }
            self.selected = self.colliding.remove(0);
        } else {
            self.colliding.retain(|&c| c != consumer);
        }
        false
    }
}

/// Per name, the slots in use; per consumer, its name and slot.
#[derive(Default)]
struct ConsumerNameIndexTracker {
    slots: HashMap<Vec<u8>, BTreeSet<u32>>,
    entries: HashMap<u64, (Vec<u8>, u32)>,
}

impl ConsumerNameIndexTracker {
    /// Gives the consumer the lowest slot free for its name. Pulsar counts one reference per
    /// point, all taken on adding and all dropped on removing, so one slot per consumer is
    /// the same thing.
    fn allocate(&mut self, consumer: u64, name: &[u8]) -> u32 {
        let used = self.slots.entry(name.to_vec()).or_default();
        let index = (0..).find(|i| !used.contains(i)).unwrap_or(0);
        used.insert(index);
        self.entries.insert(consumer, (name.to_vec(), index));
        index
    }

    fn release(&mut self, consumer: u64) {
        let Some((name, index)) = self.entries.remove(&consumer) else {
            return;
        };
        if let Some(used) = self.slots.get_mut(&name) {
            used.remove(&index);
            if used.is_empty() {
                self.slots.remove(&name);
            }
        }
    }

    fn tracked(&self, consumer: u64) -> Option<(&[u8], u32)> {
        self.entries
            .get(&consumer)
            .map(|(name, index)| (name.as_slice(), *index))
    }
}

/// Pulsar's `ConsistentHashingStickyKeyConsumerSelector`: each consumer puts `number_of_points`
/// points on the key hash range `[1, range_max_value]`, a hash goes to the owner of the first point
/// at or above it (wrapping), and a consumer that collides on a point queues behind its owner until
/// the owner leaves.
pub struct ConsistentHashingSelector {
    number_of_points: u32,
    returns_impacted: bool,
    key_hash_range: HashRange,
    ring: BTreeMap<u16, HashRingPointEntry>,
    name_index: ConsumerNameIndexTracker,
    /// The points, ascending, and each one's selected consumer: the ring as `select`
    /// reads it.
    points: SortedHashes,
    owners: Vec<u64>,
    /// The ring as sorted ranges tiling the key hash range (Pulsar's assignments snapshot).
    assignments: Vec<(HashRange, u64)>,
}

impl ConsistentHashingSelector {
    /// Pulsar's `(numberOfPoints, addOrRemoveReturnsImpactedConsumersResult,
    /// rangeMaxValue)`: points per consumer in `[1, 65536]`, the key hash range
    /// `[1, range_max_value]` with `range_max_value` in `[1, 0xFFFF]`.
    pub fn new(
        number_of_points: i64,
        returns_impacted: bool,
        range_max_value: i64,
    ) -> KernelResult<Self> {
        let points = u32::try_from(number_of_points)
            .ok()
            .filter(|p| (1..=MAX_POINTS).contains(p))
            .ok_or_else(|| InvalidInput::OutOfRange {
                what: "number_of_points".to_owned(),
                value: number_of_points.into(),
                min: 1,
                max: MAX_POINTS.into(),
            })?;
        if !(1..=i64::from(DEFAULT_RANGE_MAX)).contains(&range_max_value) {
            return Err(InvalidInput::OutOfRange {
                what: "range_max_value".to_owned(),
                value: range_max_value.into(),
                min: 1,
                max: DEFAULT_RANGE_MAX.into(),
            });
        }
        Ok(Self {
            number_of_points: points,
            returns_impacted,
            key_hash_range: HashRange::new(i64::from(FIRST_HASH), range_max_value)?,
            ring: BTreeMap::new(),
            name_index: ConsumerNameIndexTracker::default(),
            points: SortedHashes::new(Vec::new()),
            owners: Vec::new(),
            assignments: Vec::new(),
        })
    }

    /// How many points each consumer puts on the ring, in `[1, 65536]`.
    pub fn number_of_points(&self) -> u32 {
        self.number_of_points
    }

    /// Whether adding and removing a consumer report the impacted consumers (Pulsar's
    /// `addOrRemoveReturnsImpactedConsumersResult`).
    pub fn returns_impacted(&self) -> bool {
        self.returns_impacted
    }

    /// `[1, range_max_value]`: where keys and points hash to.
    pub fn key_hash_range(&self) -> HashRange {
        self.key_hash_range
    }

    /// Pulsar's `makeStickyKeyHash(key)` over this selector's key hash range.
    pub fn make_sticky_key_hash(&self, key: &[u8]) -> u16 {
        self.sticky_from_hash(key_hash(key))
    }

    /// `make_sticky_key_hash` from a key hash.
    pub fn sticky_from_hash(&self, hash: u32) -> u16 {
        let r = self.key_hash_range;
        sticky_hash_in(hash, r.start(), r.size())
    }

    /// The consumers in the ring, by id.
    pub fn consumer_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.name_index.entries.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// True when `consumer` is in the ring.
    pub fn contains(&self, consumer: u64) -> bool {
        self.name_index.entries.contains_key(&consumer)
    }

    /// How many consumers are in the ring.
    pub fn len(&self) -> usize {
        self.name_index.entries.len()
    }

    /// True when no consumer is in the ring.
    pub fn is_empty(&self) -> bool {
        self.name_index.entries.is_empty()
    }

    /// Adds a consumer's points; a point already taken queues the consumer behind its
    /// owner. An id already in the ring is an error (Pulsar would queue a consumer behind
    /// itself). Returns the impacted consumers when the selector reports them.
    pub fn add_consumer(
        &mut self,
        consumer: u64,
        name: &[u8],
    ) -> KernelResult<Option<ImpactedConsumers>> {
        if self.contains(consumer) {
            return Err(InvalidInput::ConsumerExists {
                consumer,
                status: "was already added",
            });
        }
        let index = self.name_index.allocate(consumer, name);
        for i in 0..self.number_of_points {
            let point = self.point_hash(name, index, i);
            match self.ring.get_mut(&point) {
                Some(entry) => entry.colliding.push(consumer),
                None => {
                    let entry = HashRingPointEntry {
                        selected: consumer,
                        colliding: Vec::new(),
                    };
                    self.ring.insert(point, entry);
                }
            }
        }
        Ok(self.refresh())
    }

    /// Removes a consumer's points, promoting the consumers queued behind it. An unknown
    /// consumer changes nothing (and impacts nobody).
    pub fn remove_consumer(&mut self, consumer: u64) -> Option<ImpactedConsumers> {
        if let Some((name, index)) = self.name_index.tracked(consumer) {
            let name = name.to_vec();
            for i in 0..self.number_of_points {
                let point = self.point_hash(&name, index, i);
                let gone = self
                    .ring
                    .get_mut(&point)
                    .is_some_and(|e| e.remove_consumer(consumer));
                if gone {
                    self.ring.remove(&point);
                }
            }
            self.name_index.release(consumer);
        }
        self.refresh()
    }

    /// The consumer serving `hash`: the owner of the first point at or above it, wrapping.
    pub fn select(&self, hash: u16) -> Option<u64> {
        let at = self.points.count_below(hash);
        self.owners.get(at).or(self.owners.first()).copied()
    }

    /// `select` of every hash; None when the ring is empty and there are hashes. Large
    /// batches read a table of every hash's consumer, built once from the assignments.
    pub fn select_many(&self, hashes: &[u16]) -> Option<Vec<u64>> {
        if hashes.is_empty() {
            return Some(Vec::new());
        }
        let &first = self.owners.first()?;
        if hashes.len() < TABLE_WORTH_IT {
            return hashes.iter().map(|&h| self.select(h)).collect();
        }
        // Hash 0 and hashes above the key hash range wrap to the first point's consumer.
        let mut table = vec![first; 1 << 16];
        for &(range, consumer) in &self.assignments {
            table[usize::from(range.start())..=usize::from(range.end())].fill(consumer);
        }
        Some(hashes.iter().map(|&h| table[usize::from(h)]).collect())
    }

    /// The ring as sorted `(range, consumer)` assignments tiling the key hash range, runs
    /// of one consumer's points joined.
    pub fn assignments(&self) -> &[(HashRange, u64)] {
        &self.assignments
    }

    /// Each consumer's ranges, sorted, adjacent ranges joined; consumers by first range.
    pub fn consumer_key_hash_ranges(&self) -> Vec<(u64, Vec<HashRange>)> {
        ranges_by_consumer(&self.assignments)
    }

    fn point_hash(&self, name: &[u8], name_index: u32, point: u32) -> u16 {
        let mut key = name.to_vec();
        key.push(0);
        key.extend_from_slice(name_index.to_string().as_bytes());
        key.push(0);
        key.extend_from_slice(point.to_string().as_bytes());
        self.make_sticky_key_hash(&key)
    }

    /// Recomputes what `select` reads and the assignments, and resolves the impact.
    fn refresh(&mut self) -> Option<ImpactedConsumers> {
        self.points = SortedHashes::new(self.ring.keys().copied().collect());
        self.owners = self.ring.values().map(|e| e.selected).collect();
        let after = assignments(&self.points, &self.owners, self.key_hash_range);
        let before = std::mem::replace(&mut self.assignments, after);
        self.returns_impacted
            .then(|| impacted_consumers(&before, &self.assignments))
    }
}

/// Ranges per consumer from sorted assignments, consumers in order of their first range.
pub fn ranges_by_consumer(assignments: &[(HashRange, u64)]) -> Vec<(u64, Vec<HashRange>)> {
    let mut order = Vec::new();
    let mut by_consumer: HashMap<u64, Vec<HashRange>> = HashMap::new();
    for &(range, consumer) in assignments {
        by_consumer
            .entry(consumer)
            .or_insert_with(|| {
                order.push(consumer);
                Vec::new()
            })
            .push(range);
    }
    order
        .into_iter()
        .map(|c| (c, merge_ranges(by_consumer.remove(&c).unwrap_or_default())))
        .collect()
}

/// The ring as ranges tiling `key_range`, a point's range ending at the point, runs of one
/// consumer's points joined, and the wrap-around range given to the first point's consumer.
fn assignments(points: &[u16], owners: &[u64], key_range: HashRange) -> Vec<(HashRange, u64)> {
    let mut out: Vec<(HashRange, u64)> = Vec::new();
    let Some(&first) = owners.first() else {
        return out;
    };
    let mut start = key_range.start();
    for (&point, &consumer) in points.iter().zip(owners) {
        match out.last_mut() {
            Some((range, owner)) if *owner == consumer => *range = span(range.start(), point),
            _ => out.push((span(start, point), consumer)),
        }
        start = point.saturating_add(1);
    }
    let last = points[points.len() - 1];
    if last < key_range.end() {
        match out.last_mut() {
            Some((range, owner)) if *owner == first => {
                *range = span(range.start(), key_range.end());
            }
            _ => out.push((span(last + 1, key_range.end()), first)),
        }
    }
    out
}

fn span(start: u16, end: u16) -> HashRange {
    HashRange::new(i64::from(start), i64::from(end)).unwrap_or(HashRange::full())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring_of(points: i64, consumers: &[(u64, &str)]) -> ConsistentHashingSelector {
        let mut s = ConsistentHashingSelector::new(points, true, 65_535).unwrap();
        for &(id, name) in consumers {
            s.add_consumer(id, name.as_bytes()).unwrap();
        }
        s
    }

    fn owners(s: &ConsistentHashingSelector) -> Vec<Option<u64>> {
        (0..=u16::MAX).map(|h| s.select(h)).collect()
    }

    fn r(start: i64, end: i64) -> HashRange {
        HashRange::new(start, end).unwrap()
    }

    #[test]
    fn empty_ring_selects_nothing() {
        let s = ring_of(100, &[]);
        assert_eq!(s.select(5), None);
        assert!(s.consumer_key_hash_ranges().is_empty());
        assert_eq!(s.key_hash_range(), r(1, 65_535));
    }

    /// Pulsar's `testGetConsumerKeyHashRanges`: three consumers of three points.
    #[test]
    fn pulsars_expected_ranges() {
        let s = ring_of(3, &[(1, "consumer1"), (2, "consumer2"), (3, "consumer3")]);
        let ranges: HashMap<u64, Vec<HashRange>> =
            s.consumer_key_hash_ranges().into_iter().collect();
        assert_eq!(
            ranges[&1],
            vec![r(14359, 18366), r(29991, 39817), r(52980, 60442)]
        );
        assert_eq!(
            ranges[&2],
            vec![
                r(1, 6668),
                r(39818, 52979),
                r(60443, 63679),
                r(65184, 65535)
            ]
        );
        assert_eq!(
            ranges[&3],
            vec![r(6669, 14358), r(18367, 29990), r(63680, 65183)]
        );
    }

    #[test]
    fn ranges_tile_the_key_hash_range_and_match_select() {
        let s = ring_of(100, &[(1, "a"), (2, "b"), (3, "c")]);
        let o = owners(&s);
        let mut covered = 0u32;
        for (consumer, ranges) in s.consumer_key_hash_ranges() {
            for range in ranges {
                covered += range.size();
                for h in range.start()..=range.end() {
                    assert_eq!(o[usize::from(h)], Some(consumer));
                }
            }
        }
        assert_eq!(covered, 65_535);
        assert_eq!(o[0], Some(s.owners[0]));
    }

    #[test]
    fn select_many_with_and_without_the_table() {
        let s = ConsistentHashingSelector::new(20, true, 30_000).unwrap();
        assert_eq!(s.select_many(&[]), Some(vec![]));
        assert_eq!(s.select_many(&[5]), None);
        let mut s = s;
        for (c, name) in [(1, "a"), (2, "b"), (3, "c")] {
            s.add_consumer(c, name.as_bytes()).unwrap();
        }
        let all: Vec<u16> = (0..=u16::MAX).collect();
        let one_by_one: Vec<u64> = all.iter().map(|&h| s.select(h).unwrap()).collect();
        assert_eq!(s.select_many(&all), Some(one_by_one.clone()));
        assert_eq!(s.select_many(&all[..100]), Some(one_by_one[..100].to_vec()));
    }

    #[test]
    fn namesakes_take_the_lowest_free_slot() {
        let mut s = ring_of(100, &[(1, "same"), (2, "same")]);
        assert_eq!(s.name_index.tracked(1).map(|t| t.1), Some(0));
        assert_eq!(s.name_index.tracked(2).map(|t| t.1), Some(1));
        s.remove_consumer(1);
        s.add_consumer(3, b"same").unwrap();
        assert_eq!(s.name_index.tracked(3).map(|t| t.1), Some(0));
    }

    #[test]
    fn impacted_ranges_are_the_ownership_diff() {
        let mut s = ring_of(100, &[(1, "a"), (2, "b")]);
        let before = owners(&s);
        let impacted = s.add_consumer(3, b"c").unwrap().unwrap();
        let after = owners(&s);
        let holds = |ranges: &BTreeMap<u64, Vec<HashRange>>, c: u64, h: u16| {
            ranges
                .get(&c)
                .is_some_and(|v| v.iter().any(|r| r.contains_hash(h)))
        };
        for h in 1..=u16::MAX {
            let (b, a) = (before[usize::from(h)], after[usize::from(h)]);
            for c in 1..=3 {
                let lost = b == Some(c) && a != Some(c);
                let got = a == Some(c) && b != Some(c);
                assert_eq!(holds(&impacted.removed, c, h), lost);
                assert_eq!(holds(&impacted.added, c, h), got);
                assert!(!got || c == 3);
            }
        }
        let impacted = s.remove_consumer(3).unwrap();
        assert_eq!(owners(&s), before);
        assert_eq!(
            impacted.removed.keys().copied().collect::<Vec<_>>(),
            vec![3]
        );
        assert!(!impacted.added.contains_key(&3));
    }

    /// Two names with a colliding point, found by search so the test does not hard-code
    /// hash values.
    fn colliding_names(s: &ConsistentHashingSelector) -> (String, String, u16) {
        let mut seen: HashMap<u16, String> = HashMap::new();
        for n in 0.. {
            let name = format!("n{n}");
            for i in 0..100 {
                let p = s.point_hash(name.as_bytes(), 0, i);
                match seen.get(&p) {
                    Some(other) if *other != name => return (other.clone(), name, p),
                    _ => seen.insert(p, name.clone()),
                };
            }
        }
        unreachable!()
    }

    #[test]
    fn the_first_consumer_keeps_a_colliding_point_and_the_queue_takes_over() {
        let probe = ring_of(100, &[]);
        let (older, newer, point) = colliding_names(&probe);
        let mut s = ring_of(100, &[(1, &older), (2, &newer)]);
        assert_eq!(s.select(point), Some(1));
        s.remove_consumer(1);
        assert_eq!(s.select(point), Some(2));
        s.add_consumer(1, older.as_bytes()).unwrap();
        assert_eq!(s.select(point), Some(2));
        s.remove_consumer(2);
        s.remove_consumer(1);
        assert!(s.ring.is_empty() && s.owners.is_empty() && s.points.is_empty());
    }

    #[test]
    fn unknown_removal_and_duplicate_adds() {
        let mut s = ring_of(100, &[(1, "a")]);
        assert_eq!(s.remove_consumer(9), Some(ImpactedConsumers::default()));
        let impacted = s.remove_consumer(1).unwrap();
        assert_eq!(impacted.removed[&1], vec![r(1, 65_535)]);
        assert!(impacted.added.is_empty());
        let impacted = s.add_consumer(1, b"a").unwrap().unwrap();
        assert!(impacted.is_empty());
        assert_eq!(impacted.added[&1], vec![r(1, 65_535)]);
        assert!(s.add_consumer(1, b"a").is_err());
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn without_impact_reports_and_with_a_smaller_range() {
        let mut s = ConsistentHashingSelector::new(10, false, 1000).unwrap();
        assert_eq!(s.add_consumer(1, b"a"), Ok(None));
        assert_eq!(s.remove_consumer(2), None);
        assert!(s.points.iter().all(|p| (1..=1000).contains(p)));
        assert_eq!(s.assignments(), &[(r(1, 1000), 1)]);
        assert_eq!(
            s.make_sticky_key_hash(b"hello"),
            (0x248B_FA47 % 1000 + 1) as u16
        );
    }

    #[test]
    fn bad_arguments() {
        assert!(ConsistentHashingSelector::new(0, true, 65_535).is_err());
        assert!(ConsistentHashingSelector::new(i64::from(MAX_POINTS) + 1, true, 65_535).is_err());
        assert!(ConsistentHashingSelector::new(1, true, 0).is_err());
        assert!(ConsistentHashingSelector::new(1, true, 65_536).is_err());
        assert!(ConsistentHashingSelector::new(1, true, 1).is_ok());
    }
}
