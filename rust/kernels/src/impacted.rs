//! The consumers a selector change impacts (Pulsar's `ImpactedConsumersResult`, computed as
//! `ConsumerHashAssignmentsSnapshot.resolveImpactedConsumers` does): per consumer, the hash
//! ranges it lost and the ranges it gained between two snapshots of range assignments.

use std::collections::BTreeMap;

use super::buckets::HashRange;
use super::error::{KernelResult, Tiling};

/// Ranges lost (`removed`) and gained (`added`) per consumer id; each list sorted, with
/// overlapping or adjacent ranges merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImpactedConsumers {
    /// Per consumer id, the ranges it lost, sorted and merged.
    pub removed: BTreeMap<u64, Vec<HashRange>>,
    /// Per consumer id, the ranges it gained, sorted and merged.
    pub added: BTreeMap<u64, Vec<HashRange>>,
}

impl ImpactedConsumers {
    /// Pulsar's `isEmpty`: no consumer lost a range (gains alone need no draining).
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty()
    }

    /// Builds a result from unsorted, unmerged range lists; empty lists are dropped.
    pub fn from_ranges(
        removed: BTreeMap<u64, Vec<HashRange>>,
        added: BTreeMap<u64, Vec<HashRange>>,
    ) -> Self {
        let tidy = |m: BTreeMap<u64, Vec<HashRange>>| {
            m.into_iter()
                .filter(|(_, r)| !r.is_empty())
                .map(|(c, r)| (c, merge_ranges(r)))
                .collect()
        };
        Self {
            removed: tidy(removed),
            added: tidy(added),
        }
    }
}

/// Checks that assignments are sorted by start and do not overlap; `what` names them.
pub fn validate_assignments(assignments: &[(HashRange, u64)], what: &str) -> KernelResult<()> {
    for (i, pair) in assignments.windows(2).enumerate() {
        let (a, b) = (pair[0].0, pair[1].0);
        if a.end() >= b.start() {
            return Err(Tiling::Overlapping {
                what: what.to_owned(),
                index: i + 1,
                range: b.into(),
                previous: a.into(),
            }
            .into());
        }
    }
    Ok(())
}

/// Diffs two sorted, non-overlapping range -> consumer assignments: every part of the ring
/// whose consumer differs is lost by its consumer before (if any) and gained by its
/// consumer after (if any).
///
/// Pulsar's `diffRanges` walks the two lists pairwise and, where a range of one list has no
/// overlap in the other, pairs it with whichever consumer the other list's current entry
/// has; that only matters for assignments with gaps (never the case for a selector, whose
/// ranges tile its key hash range). This sweep attributes every hash exactly instead.
pub fn impacted_consumers(
    before: &[(HashRange, u64)],
    after: &[(HashRange, u64)],
) -> ImpactedConsumers {
    let mut cuts: Vec<u32> = before
        .iter()
        .chain(after)
        .flat_map(|(r, _)| [u32::from(r.start()), u32::from(r.end()) + 1])
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut removed: BTreeMap<u64, Vec<HashRange>> = BTreeMap::new();
    let mut added: BTreeMap<u64, Vec<HashRange>> = BTreeMap::new();
    let (mut i, mut j) = (0, 0);
    for piece in cuts.windows(2) {
        let (start, end) = (piece[0], piece[1] - 1);
        let old = owner_at(before, &mut i, start);
        let new = owner_at(after, &mut j, start);
        if old == new {
            continue;
        }
        let Some(range) = HashRange::between(start as u16, end as u16) else {
            continue;
        };
        if let Some(c) = old {
            removed.entry(c).or_default().push(range);
        }
        if let Some(c) = new {
            added.entry(c).or_default().push(range);
        }
    }
    ImpactedConsumers::from_ranges(removed, added)
}

/// The consumer of the assignment holding `hash`, advancing the cursor `at` (hashes are
/// asked in ascending order).
fn owner_at(assignments: &[(HashRange, u64)], at: &mut usize, hash: u32) -> Option<u64> {
    while *at < assignments.len() && u32::from(assignments[*at].0.end()) < hash {
        *at += 1;
    }
    assignments
        .get(*at)
        .filter(|(r, _)| u32::from(r.start()) <= hash)
        .map(|&(_, c)| c)
}

/// Sorts ranges and joins the ones that overlap or touch.
pub fn merge_ranges(mut ranges: Vec<HashRange>) -> Vec<HashRange> {
    ranges.sort();
    let mut out: Vec<HashRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if u32::from(last.end()) + 1 >= u32::from(r.start()) => {
                let end = last.end().max(r.end());
                *last = HashRange::between(last.start(), end).unwrap_or(*last);
            }
            _ => out.push(r),
        }
    }
    out
}

/// Whether `hash` lies in one of `ranges` (sorted, disjoint).
pub fn contains_hash(ranges: &[HashRange], hash: u16) -> bool {
    let after = ranges.partition_point(|r| r.start() <= hash);
    after > 0 && ranges[after - 1].contains_hash(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u16, end: u16) -> HashRange {
        HashRange::between(start, end).unwrap()
    }

    #[test]
    fn a_joining_consumer_takes_ranges_from_its_neighbour() {
        let before = [(r(0, 0xFFFF), 1)];
        let after = [(r(0, 0x7FFF), 1), (r(0x8000, 0xFFFF), 2)];
        let impacted = impacted_consumers(&before, &after);
        assert_eq!(
            impacted.removed,
            BTreeMap::from([(1, vec![r(0x8000, 0xFFFF)])])
        );
        assert_eq!(
            impacted.added,
            BTreeMap::from([(2, vec![r(0x8000, 0xFFFF)])])
        );
        assert!(!impacted.is_empty());
        let back = impacted_consumers(&after, &before);
        assert_eq!(back.removed, BTreeMap::from([(2, vec![r(0x8000, 0xFFFF)])]));
        assert_eq!(back.added, BTreeMap::from([(1, vec![r(0x8000, 0xFFFF)])]));
    }

    #[test]
    fn adjacent_pieces_merge_and_unchanged_parts_are_left_out() {
        let before = [(r(0, 9), 1), (r(10, 19), 2), (r(20, 29), 1), (r(30, 39), 2)];
        let after = [(r(0, 4), 1), (r(5, 24), 3), (r(25, 39), 2)];
        let impacted = impacted_consumers(&before, &after);
        assert_eq!(
            impacted.removed,
            BTreeMap::from([(1, vec![r(5, 9), r(20, 29)]), (2, vec![r(10, 19)])])
        );
        assert_eq!(
            impacted.added,
            BTreeMap::from([(2, vec![r(25, 29)]), (3, vec![r(5, 24)])])
        );
    }

    #[test]
    fn first_and_last_consumers_gain_and_lose_everything() {
        let all = [(r(1, 0xFFFF), 7)];
        let first = impacted_consumers(&[], &all);
        assert!(first.is_empty() && first.removed.is_empty());
        assert_eq!(first.added, BTreeMap::from([(7, vec![r(1, 0xFFFF)])]));
        let last = impacted_consumers(&all, &[]);
        assert_eq!(last.removed, BTreeMap::from([(7, vec![r(1, 0xFFFF)])]));
        assert!(impacted_consumers(&all, &all) == ImpactedConsumers::default());
    }

    #[test]
    fn gaps_are_attributed_exactly() {
        let before = [(r(0, 9), 1)];
        let after = [(r(20, 29), 2)];
        let impacted = impacted_consumers(&before, &after);
        assert_eq!(impacted.removed, BTreeMap::from([(1, vec![r(0, 9)])]));
        assert_eq!(impacted.added, BTreeMap::from([(2, vec![r(20, 29)])]));
    }

    #[test]
    fn assignments_must_be_sorted_and_disjoint() {
        assert!(validate_assignments(&[(r(0, 9), 1), (r(10, 19), 2)], "a").is_ok());
        let err = validate_assignments(&[(r(0, 9), 1), (r(9, 19), 2)], "after").unwrap_err();
        assert!(err.to_string().contains("after[1]"), "{err}");
        assert!(validate_assignments(&[(r(10, 19), 1), (r(0, 9), 2)], "a").is_err());
    }

    /// The same rule read hash by hash.
    fn brute(before: &[(HashRange, u64)], after: &[(HashRange, u64)]) -> ImpactedConsumers {
        let owner = |side: &[(HashRange, u64)], h: u16| {
            side.iter()
                .find(|(r, _)| r.contains_hash(h))
                .map(|&(_, c)| c)
        };
        let (mut removed, mut added) = (BTreeMap::new(), BTreeMap::new());
        for h in 0..=u16::MAX {
            let (was, now) = (owner(before, h), owner(after, h));
            if was != now {
                if let Some(c) = was {
                    removed.entry(c).or_insert_with(Vec::new).push(r(h, h));
                }
                if let Some(c) = now {
                    added.entry(c).or_insert_with(Vec::new).push(r(h, h));
                }
            }
        }
        ImpactedConsumers::from_ranges(removed, added)
    }

    #[test]
    fn matches_the_hash_by_hash_reading() {
        let before = [
            (r(0, 9), 1),
            (r(10, 99), 2),
            (r(200, 300), 1),
            (r(301, 0xFFF0), 3),
        ];
        let after = [(r(5, 20), 2), (r(21, 250), 1), (r(400, 0xFFFF), 3)];
        assert_eq!(impacted_consumers(&before, &after), brute(&before, &after));
        assert_eq!(impacted_consumers(&after, &before), brute(&after, &before));
        let tail = [(r(0xFFFF, 0xFFFF), 9)];
        assert_eq!(impacted_consumers(&before, &tail), brute(&before, &tail));
    }

    #[test]
    fn merging_and_lookup() {
        let merged = merge_ranges(vec![r(10, 19), r(0, 9), r(30, 40), r(35, 39)]);
        assert_eq!(merged, vec![r(0, 19), r(30, 40)]);
        assert!(contains_hash(&merged, 19) && !contains_hash(&merged, 20));
        assert!(contains_hash(&merged, 0) && !contains_hash(&[], 0));
    }
}
