//! Pulsar's consistent-hashing sticky-key consumer selector (SPEC 7), as PIP-379 left it:
//! each consumer puts `number_of_points` points on the 16-bit ring at
//! `sticky_key_hash("{name}\0{name_index}\0{i}")`, a hash is served by the first point at or
//! above it (wrapping), and every change reports the ranges each consumer lost.
//!
//! `name_index` is the lowest slot free among consumers sharing the name, so that namesakes
//! do not collide and a consumer that leaves and rejoins lands where it was. On a collision
//! the newer consumer takes the point; a consumer whose points were all taken gives up its
//! slot.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::buckets::HashRange;
use super::error::{InvalidInput, NotFound, StateResult};
use super::hashing::sticky_key_hash;

/// The most points a consumer may have: one per hash of the ring.
pub const MAX_POINTS: u32 = 1 << 16;

/// Ranges lost in one change, by consumer id (ascending), each list sorted and merged.
pub type LostRanges = BTreeMap<u64, Vec<HashRange>>;

/// Name-index slots per name, and each consumer's slot with the number of points it holds.
#[derive(Default)]
struct NameIndexTracker {
    slots: HashMap<Vec<u8>, BTreeSet<u32>>,
    entries: HashMap<u64, (u32, u32)>,
}

impl NameIndexTracker {
    fn increase(&mut self, consumer: u64, name: &[u8]) -> u32 {
        if let Some(entry) = self.entries.get_mut(&consumer) {
            entry.1 += 1;
            return entry.0;
        }
        let used = self.slots.entry(name.to_vec()).or_default();
        let index = (0..).find(|i| !used.contains(i)).unwrap_or(0);
        used.insert(index);
        self.entries.insert(consumer, (index, 1));
        index
    }

    fn decrease(&mut self, consumer: u64, name: &[u8]) {
        let Some(entry) = self.entries.get_mut(&consumer) else {
            return;
        };
        entry.1 -= 1;
        if entry.1 > 0 {
            return;
        }
        let index = entry.0;
        self.entries.remove(&consumer);
        if let Some(used) = self.slots.get_mut(name) {
            used.remove(&index);
            if used.is_empty() {
                self.slots.remove(name);
            }
        }
    }

    fn index_of(&self, consumer: u64) -> Option<u32> {
        self.entries.get(&consumer).map(|e| e.0)
    }
}

pub struct ConsistentHashingSelector {
    number_of_points: u32,
    /// `(point, consumer)`, sorted by point, one consumer per point.
    points: Vec<(u16, u64)>,
    names: HashMap<u64, Vec<u8>>,
    name_index: NameIndexTracker,
    assignments: Vec<(HashRange, u64)>,
}

impl ConsistentHashingSelector {
    pub fn new(number_of_points: i64) -> StateResult<Self> {
        let points = u32::try_from(number_of_points)
            .ok()
            .filter(|p| (1..=MAX_POINTS).contains(p))
            .ok_or_else(|| {
                InvalidInput(format!(
                    "number_of_points must be in [1, {MAX_POINTS}], got {number_of_points}"
                ))
            })?;
        Ok(Self {
            number_of_points: points,
            points: Vec::new(),
            names: HashMap::new(),
            name_index: NameIndexTracker::default(),
            assignments: Vec::new(),
        })
    }

    pub fn number_of_points(&self) -> u32 {
        self.number_of_points
    }

    /// The consumers in the ring, by id.
    pub fn consumer_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.names.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    pub fn contains(&self, consumer: u64) -> bool {
        self.names.contains_key(&consumer)
    }

    /// Adds a consumer's points; the result is the ranges other consumers lost to it.
    pub fn add_consumer(&mut self, consumer: u64, name: &[u8]) -> StateResult<LostRanges> {
        if self.names.contains_key(&consumer) {
            return Err(InvalidInput(format!("consumer {consumer} was already added")).into());
        }
        self.names.insert(consumer, name.to_vec());
        for i in 0..self.number_of_points {
            let index = self.name_index.increase(consumer, name);
            let point = point_hash(name, index, i);
            if let Some(displaced) = self.put(point, consumer) {
                let displaced_name = self.names[&displaced].clone();
                self.name_index.decrease(displaced, &displaced_name);
            }
        }
        Ok(self.refresh())
    }

    /// Removes a consumer's points; the result is the ranges each consumer lost, the removed
    /// one included. An unknown consumer is a NotFound error.
    pub fn remove_consumer(&mut self, consumer: u64) -> StateResult<LostRanges> {
        let Some(name) = self.names.get(&consumer).cloned() else {
            return Err(NotFound(format!("consumer {consumer} is not in the ring")).into());
        };
        if let Some(index) = self.name_index.index_of(consumer) {
            for i in 0..self.number_of_points {
                let point = point_hash(&name, index, i);
                if self.remove_point(point, consumer) {
                    self.name_index.decrease(consumer, &name);
                }
            }
        }
        self.names.remove(&consumer);
        Ok(self.refresh())
    }

    /// The consumer serving `hash`: the owner of the first point at or above it, wrapping.
    pub fn select(&self, hash: u16) -> Option<u64> {
        let at = self.points.partition_point(|p| p.0 < hash);
        self.points.get(at).or(self.points.first()).map(|p| p.1)
    }

    /// Each consumer's ranges, sorted, adjacent ranges joined; consumers by first range.
    pub fn consumer_key_hash_ranges(&self) -> Vec<(u64, Vec<HashRange>)> {
        let mut order = Vec::new();
        let mut by_consumer: HashMap<u64, Vec<HashRange>> = HashMap::new();
        for &(range, consumer) in &self.assignments {
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

    /// Puts a point, returning the consumer it displaced.
    fn put(&mut self, point: u16, consumer: u64) -> Option<u64> {
        match self.points.binary_search_by_key(&point, |p| p.0) {
            Ok(at) => Some(std::mem::replace(&mut self.points[at].1, consumer)),
            Err(at) => {
                self.points.insert(at, (point, consumer));
                None
            }
        }
    }

    /// Removes a point only while `consumer` holds it.
    fn remove_point(&mut self, point: u16, consumer: u64) -> bool {
        match self.points.binary_search_by_key(&point, |p| p.0) {
            Ok(at) if self.points[at].1 == consumer => {
                self.points.remove(at);
                true
            }
            _ => false,
        }
    }

    /// Recomputes the assignments and returns what each consumer lost.
    fn refresh(&mut self) -> LostRanges {
        let after = assignments(&self.points);
        let lost = lost_ranges(&self.assignments, &after);
        self.assignments = after;
        lost
    }
}

fn point_hash(name: &[u8], name_index: u32, point: u32) -> u16 {
    let mut key = name.to_vec();
    key.push(0);
    key.extend_from_slice(name_index.to_string().as_bytes());
    key.push(0);
    key.extend_from_slice(point.to_string().as_bytes());
    sticky_key_hash(&key)
}

/// The ring as ranges tiling `[0, 0xFFFF]`, a point's range ending at the point, runs of one
/// consumer's points joined, and the wrap-around range given to the first point's consumer.
fn assignments(points: &[(u16, u64)]) -> Vec<(HashRange, u64)> {
    let mut out: Vec<(HashRange, u64)> = Vec::new();
    let Some(&(_, first)) = points.first() else {
        return out;
    };
    let mut start = 0u16;
    for &(point, consumer) in points {
        match out.last_mut() {
            Some((range, owner)) if *owner == consumer => *range = span(range.start(), point),
            _ => out.push((span(start, point), consumer)),
        }
        start = point.wrapping_add(1);
    }
    let last = points[points.len() - 1].0;
    if last != u16::MAX {
        match out.last_mut() {
            Some((range, owner)) if *owner == first => *range = span(range.start(), u16::MAX),
            _ => out.push((span(last + 1, u16::MAX), first)),
        }
    }
    out
}

fn span(start: u16, end: u16) -> HashRange {
    HashRange::new(i64::from(start), i64::from(end)).unwrap_or(HashRange::full())
}

/// Per consumer, the ranges whose owner changed away from it between two assignments.
fn lost_ranges(before: &[(HashRange, u64)], after: &[(HashRange, u64)]) -> LostRanges {
    let mut lost: BTreeMap<u64, Vec<HashRange>> = BTreeMap::new();
    if after.is_empty() {
        for &(range, owner) in before {
            lost.entry(owner).or_default().push(range);
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < before.len() && j < after.len() {
        let ((b, bc), (a, ac)) = (before[i], after[j]);
        let overlap = span(b.start().max(a.start()), b.end().min(a.end()));
        if bc != ac {
            lost.entry(bc).or_default().push(overlap);
        }
        if b.end() <= overlap.end() {
            i += 1;
        }
        if a.end() <= overlap.end() {
            j += 1;
        }
    }
    lost.into_iter()
        .map(|(c, ranges)| (c, merge_ranges(ranges)))
        .collect()
}

/// Sorts ranges and joins the ones that overlap or touch.
pub fn merge_ranges(mut ranges: Vec<HashRange>) -> Vec<HashRange> {
    ranges.sort();
    let mut out: Vec<HashRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if u32::from(last.end()) + 1 >= u32::from(r.start()) => {
                *last = span(last.start(), last.end().max(r.end()));
            }
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(consumers: &[(u64, &str)]) -> ConsistentHashingSelector {
        let mut s = ConsistentHashingSelector::new(100).unwrap();
        for &(id, name) in consumers {
            s.add_consumer(id, name.as_bytes()).unwrap();
        }
        s
    }

    fn owners(s: &ConsistentHashingSelector) -> Vec<Option<u64>> {
        (0..=u16::MAX).map(|h| s.select(h)).collect()
    }

    #[test]
    fn empty_ring_selects_nothing() {
        let s = ring(&[]);
        assert_eq!(s.select(5), None);
        assert!(s.consumer_key_hash_ranges().is_empty());
    }

    #[test]
    fn points_and_wrap_around() {
        let s = ring(&[(1, "c1"), (2, "c2")]);
        let first = s.points[0];
        let last = s.points[s.points.len() - 1];
        assert_eq!(s.select(first.0), Some(first.1));
        assert_eq!(s.select(0), Some(first.1));
        if last.0 < u16::MAX {
            assert_eq!(s.select(last.0 + 1), Some(first.1));
        }
        let expected = point_hash(b"c1", 0, 0);
        assert!(s.points.iter().any(|&(p, _)| p == expected));
    }

    #[test]
    fn ranges_tile_the_ring_and_match_select() {
        let s = ring(&[(1, "a"), (2, "b"), (3, "c")]);
        let o = owners(&s);
        let mut covered = 0u32;
        for (consumer, ranges) in s.consumer_key_hash_ranges() {
            for r in ranges {
                covered += r.size();
                for h in r.start()..=r.end() {
                    assert_eq!(o[usize::from(h)], Some(consumer));
                }
            }
        }
        assert_eq!(covered, 65_536);
    }

    #[test]
    fn namesakes_take_the_lowest_free_slot() {
        let mut s = ring(&[(1, "same"), (2, "same")]);
        assert_eq!(s.name_index.index_of(1), Some(0));
        assert_eq!(s.name_index.index_of(2), Some(1));
        s.remove_consumer(1).unwrap();
        s.add_consumer(3, b"same").unwrap();
        assert_eq!(s.name_index.index_of(3), Some(0));
    }

    #[test]
    fn a_change_moves_only_the_changed_consumers_keys() {
        let mut s = ring(&[(1, "a"), (2, "b")]);
        let before = owners(&s);
        let lost = s.add_consumer(3, b"c").unwrap();
        let after = owners(&s);
        for h in 0..=u16::MAX {
            let (b, a) = (before[usize::from(h)], after[usize::from(h)]);
            if b != a {
                assert_eq!(a, Some(3));
                let lost_by = lost[&b.unwrap()].iter().any(|r| r.contains_hash(h));
                assert!(lost_by);
            }
        }
        let lost = s.remove_consumer(3).unwrap();
        assert_eq!(owners(&s), before);
        assert!(lost.contains_key(&3));
        assert_eq!(lost.len(), 1);
    }

    /// Two names with a colliding point, found by search so the test does not hard-code
    /// hash values.
    fn colliding_names() -> (String, String, u16) {
        let mut seen: HashMap<u16, String> = HashMap::new();
        for n in 0.. {
            let name = format!("n{n}");
            for i in 0..100 {
                let p = point_hash(name.as_bytes(), 0, i);
                match seen.get(&p) {
                    Some(other) if *other != name => return (other.clone(), name, p),
                    _ => seen.insert(p, name.clone()),
                };
            }
        }
        unreachable!()
    }

    #[test]
    fn the_newer_consumer_takes_a_colliding_point() {
        let (older, newer, point) = colliding_names();
        let mut s = ring(&[(1, &older), (2, &newer)]);
        assert_eq!(s.select(point), Some(2));
        s.remove_consumer(2).unwrap();
        assert!(s.points.iter().all(|&(p, _)| p != point));
        s.remove_consumer(1).unwrap();
        assert!(s.points.is_empty());
    }

    #[test]
    fn removing_the_last_consumer_loses_everything() {
        let mut s = ring(&[(1, "a")]);
        let lost = s.remove_consumer(1).unwrap();
        assert_eq!(lost[&1], vec![HashRange::full()]);
        assert!(s.remove_consumer(1).is_err());
        assert!(s.add_consumer(1, b"a").unwrap().is_empty());
        assert!(s.add_consumer(1, b"a").is_err());
    }

    #[test]
    fn bad_point_counts() {
        assert!(ConsistentHashingSelector::new(0).is_err());
        assert!(ConsistentHashingSelector::new(i64::from(MAX_POINTS) + 1).is_err());
        assert!(ConsistentHashingSelector::new(1).is_ok());
    }

    #[test]
    fn merging() {
        let r = |a, b| HashRange::new(a, b).unwrap();
        assert_eq!(
            merge_ranges(vec![r(5, 9), r(0, 4), r(11, 12), r(12, 20)]),
            vec![r(0, 9), r(11, 20)]
        );
    }
}
