//! The consumers a change of hash-range assignments impacts (Pulsar's
//! `ImpactedConsumersResult`, resolved from two `ConsumerHashAssignmentsSnapshot`s): per
//! consumer, the ranges it lost and the ranges it gained. Lost ranges feed PIP-379's
//! draining hashes; gained ones let a consumer release the draining hashes it gets back.

use std::collections::BTreeMap;

use super::buckets::HashRange;
use super::error::{InvalidInput, KernelResult};

/// Ranges by consumer id (ascending), each list sorted with adjacent ranges merged.
pub type RangesByConsumer = BTreeMap<u64, Vec<HashRange>>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImpactedConsumers {
    pub removed: RangesByConsumer,
    pub added: RangesByConsumer,
}

impl ImpactedConsumers {
    /// No consumer lost a range. As in Pulsar, gains alone (the first consumer taking the
    /// whole range) leave the result empty: nothing needs draining.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty()
    }
}

/// Checks that assignments are sorted by start and do not overlap; `what` names them.
pub fn validate_assignments(assignments: &[(HashRange, u64)], what: &str) -> KernelResult<()> {
    for (i, pair) in assignments.windows(2).enumerate() {
        let (a, b) = (pair[0].0, pair[1].0);
        if a.end() >= b.start() {
            return Err(InvalidInput(format!(
                "{what} must be sorted and non-overlapping: {what}[{}] = {b} follows {a}",
                i + 1
            )));
        }
    }
    Ok(())
}

/// Per consumer, the hashes it held in `before` and not in `after` (removed) and the ones
/// it holds in `after` and did not in `before` (added). Both inputs are sorted,
/// non-overlapping `(range, consumer)` assignments; gaps are unassigned hashes.
///
/// Pulsar's `diffRanges` reports, where an old and a new range only partly overlap, just
/// the overlap as removed (its test `testResolveConsumerUpdatedHashRanges_OverlappingRanges`
/// expects `[3, 5]` removed from a consumer that held `[1, 5]` and now holds nothing). This
/// compares hash by hash instead, so every hash a consumer stops serving is reported and
/// drained; for selectors whose snapshots tile the same key hash range both agree.
pub fn impacted_consumers(
    before: &[(HashRange, u64)],
    after: &[(HashRange, u64)],
) -> ImpactedConsumers {
    let mut removed: RangesByConsumer = BTreeMap::new();
    let mut added: RangesByConsumer = BTreeMap::new();
    let (mut b, mut a) = (Cursor::new(before), Cursor::new(after));
    let mut pos = 0u32;
    while let Some(end) = segment_end(pos, &mut b, &mut a) {
        let (was, now) = (b.owner_at(pos), a.owner_at(pos));
        if was != now {
            let range = span(pos, end);
            if let Some(c) = was {
                removed.entry(c).or_default().push(range);
            }
            if let Some(c) = now {
                added.entry(c).or_default().push(range);
            }
        }
        pos = end + 1;
    }
    ImpactedConsumers {
        removed: merged(removed),
        added: merged(added),
    }
}

/// Walks one side's assignments in order.
struct Cursor<'a> {
    items: &'a [(HashRange, u64)],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(items: &'a [(HashRange, u64)]) -> Self {
        Self { items, at: 0 }
    }

    /// Skips the ranges that end before `pos`; returns the first one left.
    fn seek(&mut self, pos: u32) -> Option<(HashRange, u64)> {
        while self
            .items
            .get(self.at)
            .is_some_and(|(r, _)| u32::from(r.end()) < pos)
        {
            self.at += 1;
        }
        self.items.get(self.at).copied()
    }

    /// The consumer holding `pos`, after a `seek(pos)`.
    fn owner_at(&self, pos: u32) -> Option<u64> {
        self.items
            .get(self.at)
            .filter(|(r, _)| u32::from(r.start()) <= pos)
            .map(|&(_, c)| c)
    }
}

/// The last hash of the stretch starting at `pos` over which neither side's owner changes
/// (a side's range ends, or its next range starts); None when both sides are done.
fn segment_end(pos: u32, b: &mut Cursor<'_>, a: &mut Cursor<'_>) -> Option<u32> {
    let (next_b, next_a) = (b.seek(pos), a.seek(pos));
    [next_b, next_a]
        .into_iter()
        .flatten()
        .map(|(r, _)| {
            let (start, end) = (u32::from(r.start()), u32::from(r.end()));
            if start <= pos {
                end
            } else {
                start - 1
            }
        })
        .min()
}

fn span(start: u32, end: u32) -> HashRange {
    HashRange::new(i64::from(start), i64::from(end)).unwrap_or(HashRange::full())
}

fn merged(by_consumer: RangesByConsumer) -> RangesByConsumer {
    by_consumer
        .into_iter()
        .map(|(c, ranges)| (c, merge_ranges(ranges)))
        .collect()
}

/// Sorts ranges and joins the ones that overlap or touch (Pulsar's
/// `mergeOverlappingRanges`).
pub fn merge_ranges(mut ranges: Vec<HashRange>) -> Vec<HashRange> {
    ranges.sort();
    let mut out: Vec<HashRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if u32::from(last.end()) + 1 >= u32::from(r.start()) => {
                *last = span(last.start().into(), last.end().max(r.end()).into());
            }
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: i64, end: i64) -> HashRange {
        HashRange::new(start, end).unwrap()
    }

    fn map(entries: &[(u64, &[HashRange])]) -> RangesByConsumer {
        entries.iter().map(|&(c, v)| (c, v.to_vec())).collect()
    }

    /// Hash-by-hash reading of the same rule.
    fn brute(before: &[(HashRange, u64)], after: &[(HashRange, u64)]) -> ImpactedConsumers {
        let owner = |side: &[(HashRange, u64)], h: u16| {
            side.iter()
                .find(|(r, _)| r.contains_hash(h))
                .map(|&(_, c)| c)
        };
        let (mut removed, mut added) = (RangesByConsumer::new(), RangesByConsumer::new());
        for h in 0..=u16::MAX {
            let (was, now) = (owner(before, h), owner(after, h));
            if was != now {
                let one = r(h.into(), h.into());
                if let Some(c) = was {
                    removed.entry(c).or_default().push(one);
                }
                if let Some(c) = now {
                    added.entry(c).or_default().push(one);
                }
            }
        }
        ImpactedConsumers {
            removed: merged(removed),
            added: merged(added),
        }
    }

    #[test]
    fn no_change_impacts_nobody() {
        let same = [(r(1, 5), 1)];
        let result = impacted_consumers(&same, &same);
        assert!(result.is_empty() && result.added.is_empty());
    }

    #[test]
    fn a_range_changing_hands() {
        let result = impacted_consumers(&[(r(1, 5), 1)], &[(r(1, 5), 2)]);
        assert_eq!(result.removed, map(&[(1, &[r(1, 5)])]));
        assert_eq!(result.added, map(&[(2, &[r(1, 5)])]));
    }

    #[test]
    fn ranges_appearing_and_disappearing() {
        let added = impacted_consumers(&[], &[(r(1, 5), 1)]);
        assert!(added.is_empty());
        assert_eq!(added.added, map(&[(1, &[r(1, 5)])]));
        let removed = impacted_consumers(&[(r(1, 5), 1)], &[]);
        assert_eq!(removed.removed, map(&[(1, &[r(1, 5)])]));
        assert!(removed.added.is_empty());
    }

    #[test]
    fn partial_overlaps_report_every_hash_lost() {
        let result = impacted_consumers(&[(r(1, 5), 1)], &[(r(3, 7), 2)]);
        assert_eq!(result.removed, map(&[(1, &[r(1, 5)])]));
        assert_eq!(result.added, map(&[(2, &[r(3, 7)])]));
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
    fn merging_and_validation() {
        assert_eq!(
            merge_ranges(vec![r(15, 20), r(1, 5), r(6, 10), r(8, 12), r(21, 25)]),
            vec![r(1, 12), r(15, 25)]
        );
        assert!(validate_assignments(&[(r(1, 5), 1), (r(6, 9), 2)], "a").is_ok());
        let err = validate_assignments(&[(r(1, 5), 1), (r(5, 9), 2)], "a").unwrap_err();
        assert!(err.0.contains("a[1]"), "{err}");
        assert!(validate_assignments(&[(r(6, 9), 1), (r(1, 5), 2)], "a").is_err());
    }
}
