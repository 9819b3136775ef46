//! Hash ranges and entry buckets (SPEC 2, PIP-486).

use std::fmt;

use super::error::{InvalidInput, KernelResult, Tiling};
use super::parallel::map_pairs;

/// The largest hash of a 16-bit ring.
pub const MAX_HASH: u32 = 0xFFFF;
/// How many hashes a 16-bit ring holds.
pub const RING_SIZE: u32 = MAX_HASH + 1;

/// A range of 16-bit hashes, both ends inclusive, `start <= end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HashRange {
    start: u16,
    end: u16,
}

impl HashRange {
    /// `[start, end]`, both ends inclusive. An end outside `[0, 0xffff]` is an error
    /// (`NotRingHash`), and so is `start > end` (`ReversedRange`).
    pub fn new(start: i64, end: i64) -> KernelResult<Self> {
        let start = ring_hash(start, "start")?;
        let end = ring_hash(end, "end")?;
        if start > end {
            return Err(InvalidInput::ReversedRange {
                start: "start",
                start_hash: start,
                end: "end",
                end_hash: end,
            });
        }
        Ok(Self { start, end })
    }

    /// `[start, end]`, or None when `start > end`.
    pub fn between(start: u16, end: u16) -> Option<Self> {
        (start <= end).then_some(Self { start, end })
    }

    /// The whole ring, `[0x0000, 0xffff]`.
    pub const fn full() -> Self {
        Self {
            start: 0,
            end: u16::MAX,
        }
    }

    /// The first hash of the range, inclusive.
    pub fn start(self) -> u16 {
        self.start
    }

    /// The last hash of the range, inclusive.
    pub fn end(self) -> u16 {
        self.end
    }

    /// How many hashes the range holds, `end - start + 1`: 1 to 65,536.
    pub fn size(self) -> u32 {
        u32::from(self.end) - u32::from(self.start) + 1
    }

    /// True when `hash` is in `[start, end]`.
    pub fn contains_hash(self, hash: u16) -> bool {
        self.start <= hash && hash <= self.end
    }

    /// True when every hash of `other` is in this range.
    pub fn contains_range(self, other: Self) -> bool {
        self.start <= other.start && other.end <= self.end
    }

    /// True when the two ranges touch end to start, in either order, without overlapping.
    pub fn is_adjacent_to(self, other: Self) -> bool {
        u32::from(self.end) + 1 == u32::from(other.start)
            || u32::from(other.end) + 1 == u32::from(self.start)
    }

    /// The two halves `[start, mid]` and `[mid + 1, end]`, `mid = start + (end - start) / 2`.
    pub fn split(self) -> KernelResult<(Self, Self)> {
        if self.start == self.end {
            return Err(InvalidInput::Unsplittable { range: self.into() });
        }
        let mid = self.start + (self.end - self.start) / 2;
        Ok((
            Self {
                start: self.start,
                end: mid,
            },
            Self {
                start: mid + 1,
                end: self.end,
            },
        ))
    }

    /// The one range covering both, for ranges that are adjacent
    /// ([`is_adjacent_to`](Self::is_adjacent_to)), in either order; any other pair, overlapping
    /// ones included, is an error (`NotAdjacent`).
    pub fn merge(self, other: Self) -> KernelResult<Self> {
        if !self.is_adjacent_to(other) {
            return Err(InvalidInput::NotAdjacent {
                first: self.into(),
                second: other.into(),
            });
        }
        Ok(Self {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        })
    }

    /// Parses the hex form `"0a0b-f0f0"` (four hex digits each side, either case).
    pub fn parse_hex(text: &str) -> KernelResult<Self> {
        let bad = || InvalidInput::NotAHashRange {
            text: text.to_owned(),
        };
        let (start, end) = text.split_once('-').ok_or_else(bad)?;
        let digits = |s: &str| {
            if s.len() == 4 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
                u16::from_str_radix(s, 16).map_err(|_| bad())
            } else {
                Err(bad())
            }
        };
        Self::new(i64::from(digits(start)?), i64::from(digits(end)?))
    }
}

/// The range as an error carries it: `(start, end)`.
impl From<HashRange> for (u16, u16) {
    fn from(range: HashRange) -> Self {
        (range.start, range.end)
    }
}

impl fmt::Display for HashRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}-{:04x}", self.start, self.end)
    }
}

/// Checks that `value` is a hash of the 16-bit ring; `what` names the argument in the error.
pub fn ring_hash(value: i64, what: &str) -> KernelResult<u16> {
    u16::try_from(value).map_err(|_| InvalidInput::NotRingHash {
        what: what.to_owned(),
        value,
    })
}

/// The smallest first split: bucket 0 spans at least `[0, 1]`, so that it holds its
/// canonical hash 1 and no two buckets share a canonical hash (Pulsar rejects a narrower
/// bucket 0 at subscribe time).
pub const MIN_FIRST_SPLIT: u16 = 2;

/// Checks that bucket split points are strictly ascending, each in `[1, 0xffff]`, and the
/// first at least `MIN_FIRST_SPLIT`.
pub fn validate_splits(splits: &[i64]) -> KernelResult<Vec<u16>> {
    let mut out = Vec::with_capacity(splits.len());
    for (i, &s) in splits.iter().enumerate() {
        if !(1..=i64::from(MAX_HASH)).contains(&s) {
            return Err(Tiling::SplitOutsideRing { index: i, value: s }.into());
        }
        let s = s as u16;
        if i == 0 && s < MIN_FIRST_SPLIT {
            return Err(Tiling::FirstSplitTooLow {
                value: s,
                min: MIN_FIRST_SPLIT,
            }
            .into());
        }
        if let Some(&prev) = out.last() {
            if s <= prev {
                return Err(Tiling::SplitsNotAscending {
                    index: i,
                    value: s,
                    previous: prev,
                }
                .into());
            }
        }
        out.push(s);
    }
    Ok(out)
}

/// `[floor(i * 65536 / n) for i in 1..n]`; no splits for one bucket or none; `n` above
/// 65,536 is clamped to 65,536, as Pulsar's `EntryBucketSplits.equalWidth` caps it.
///
/// Above 32,768 buckets that formula puts the first split at 1, a bucket 0 of `[0, 0]`
/// that Pulsar's own dispatcher then rejects; here bucket 0 keeps `[0, 1]` instead (the
/// split at 1 is dropped), so such counts give one bucket fewer than asked.
pub fn equal_width_splits(n: i64) -> KernelResult<Vec<u16>> {
    if n < 0 {
        return Err(InvalidInput::TooSmall {
            what: "bucket count",
            min: 0,
            value: n,
        });
    }
    let n = n.min(i64::from(RING_SIZE));
    Ok((1..n.max(1))
        .map(|i| (i * i64::from(RING_SIZE) / n) as u16)
        .filter(|&s| s >= MIN_FIRST_SPLIT)
        .collect())
}

/// The buckets the splits describe: `[0, s1-1], [s1, s2-1], ..., [s_last, 0xffff]`.
pub fn bucket_ranges(splits: &[u16]) -> Vec<HashRange> {
    let starts = std::iter::once(0).chain(splits.iter().copied());
    let ends = splits
        .iter()
        .map(|&s| s - 1)
        .chain(std::iter::once(u16::MAX));
    starts
        .zip(ends)
        .map(|(start, end)| HashRange { start, end })
        .collect()
}

/// How many splits are `<= hash_b`: the index of the bucket holding `hash_b`.
#[inline]
pub fn bucket_index(hash_b: u16, splits: &[u16]) -> u32 {
    splits.partition_point(|&s| s <= hash_b) as u32
}

/// `bucket_index` of every hashB at once, as a table indexed by hashB: for large batches a
/// table read beats a binary search, whose branches mispredict on random hashes.
pub fn bucket_table(splits: &[u16]) -> Vec<u32> {
    let mut table = vec![0u32; RING_SIZE as usize];
    for (i, r) in bucket_ranges(splits).into_iter().enumerate() {
        table[r.start() as usize..=r.end() as usize].fill(i as u32);
    }
    table
}

/// From this many hashes on, building the 65,536-entry table of `bucket_table` pays for itself.
const TABLE_MIN_BATCH: usize = 16 * 1024;

/// `bucket_index` of every hashB, on up to `threads` threads, as int32 (which every index of
/// at most 65,536 buckets fits) for NumPy and Arrow; large batches read a table.
pub fn bucket_indices(hashes: &[u16], splits: &[u16], threads: usize) -> Vec<i32> {
    let table = (hashes.len() >= TABLE_MIN_BATCH).then(|| bucket_table(splits));
    let index = |h: u16| match &table {
        Some(t) => t[h as usize],
        None => bucket_index(h, splits),
    };
    map_pairs(hashes.len(), threads, |i| (index(hashes[i]) as i32, ())).0
}

/// The one bucket holding a whole entry `[entry_hash_min, entry_hash_max]`, or an error when the entry
/// straddles a bucket boundary (the relay must then re-batch it).
pub fn entry_bucket(entry_hash_min: u16, entry_hash_max: u16, splits: &[u16]) -> KernelResult<u32> {
    if entry_hash_min > entry_hash_max {
        return Err(InvalidInput::ReversedRange {
            start: "entry_hash_min",
            start_hash: entry_hash_min,
            end: "entry_hash_max",
            end_hash: entry_hash_max,
        });
    }
    let first = bucket_index(entry_hash_min, splits);
    let last = bucket_index(entry_hash_max, splits);
    if first != last {
        return Err(InvalidInput::Straddles {
            min: entry_hash_min,
            max: entry_hash_max,
            boundary: splits[first as usize],
            first,
            last,
        });
    }
    Ok(first)
}

/// The one hash standing for bucket `index`: `max(start, 1)`, since 0 means "not set".
pub fn canonical_bucket_hash(index: i64, splits: &[u16]) -> KernelResult<u16> {
    let count = splits.len() + 1;
    let i = usize::try_from(index)
        .ok()
        .filter(|&i| i < count)
        .ok_or(InvalidInput::NoSuchBucket { index, count })?;
    let start = if i == 0 { 0 } else { splits[i - 1] };
    Ok(start.max(1))
}

/// `max(1, budget // segments)`: how many buckets each segment gets from a topic budget.
pub fn buckets_for_budget(budget: i64, segments: i64) -> KernelResult<i64> {
    if budget < 0 {
        return Err(InvalidInput::TooSmall {
            what: "bucket budget",
            min: 0,
            value: budget,
        });
    }
    if segments < 1 {
        return Err(InvalidInput::TooSmall {
            what: "segment count",
            min: 1,
            value: segments,
        });
    }
    Ok((budget / segments).max(1))
}

#[cfg(test)]
mod tests {
    #[test]
    fn bucket_indices_agree_with_bucket_index_by_search_and_by_table() {
        let splits = [2, 0x4000, 0x4001, 0xFFFF];
        for n in [10, TABLE_MIN_BATCH + 3] {
            let hashes: Vec<u16> = (0..n).map(|i| (i * 7919 % 65536) as u16).collect();
            let want: Vec<i32> = hashes
                .iter()
                .map(|&h| bucket_index(h, &splits) as i32)
                .collect();
            assert_eq!(bucket_indices(&hashes, &splits, 2), want);
        }
    }

    use super::*;

    fn range(start: i64, end: i64) -> HashRange {
        HashRange::new(start, end).unwrap()
    }

    #[test]
    fn range_bounds_are_checked() {
        assert!(HashRange::new(0, 0xFFFF).is_ok());
        assert!(HashRange::new(-1, 3).is_err());
        assert!(HashRange::new(0, 0x1_0000).is_err());
        assert!(HashRange::new(5, 4).is_err());
        assert_eq!(HashRange::full().size(), 65536);
    }

    #[test]
    fn split_and_merge_are_inverse() {
        let (a, b) = HashRange::full().split().unwrap();
        assert_eq!((a, b), (range(0, 0x7FFF), range(0x8000, 0xFFFF)));
        assert_eq!(a.merge(b).unwrap(), HashRange::full());
        assert_eq!(b.merge(a).unwrap(), HashRange::full());
        assert_eq!(range(4, 6).split().unwrap(), (range(4, 5), range(6, 6)));
        assert!(range(7, 7).split().is_err());
        assert!(range(0, 3).merge(range(5, 9)).is_err());
        assert!(range(0, 3).merge(range(3, 9)).is_err());
    }

    #[test]
    fn adjacency_and_containment() {
        assert!(range(0, 3).is_adjacent_to(range(4, 9)));
        assert!(range(4, 9).is_adjacent_to(range(0, 3)));
        assert!(!range(0, 3).is_adjacent_to(range(3, 9)));
        assert!(!range(0, 0xFFFF).is_adjacent_to(range(0, 0xFFFF)));
        assert!(range(2, 9).contains_range(range(2, 9)));
        assert!(!range(2, 9).contains_range(range(1, 9)));
        assert!(range(2, 9).contains_hash(9) && !range(2, 9).contains_hash(10));
    }

    #[test]
    fn hex_round_trip() {
        let r = range(0x0A0B, 0xF0F0);
        assert_eq!(r.to_string(), "0a0b-f0f0");
        assert_eq!(HashRange::parse_hex("0A0B-F0F0").unwrap(), r);
        for bad in [
            "",
            "0a0b",
            "0a0b-f0f",
            "0a0b-f0f0-1",
            "+a0b-f0f0",
            "f0f0-0a0b",
        ] {
            assert!(HashRange::parse_hex(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn equal_width_splits_match_the_spec() {
        assert_eq!(equal_width_splits(0).unwrap(), Vec::<u16>::new());
        assert_eq!(equal_width_splits(1).unwrap(), Vec::<u16>::new());
        assert_eq!(equal_width_splits(3).unwrap(), vec![21845, 43690]);
        assert_eq!(equal_width_splits(4).unwrap(), vec![0x4000, 0x8000, 0xC000]);
        assert!(equal_width_splits(-1).is_err());
    }

    #[test]
    fn equal_width_splits_clamp_and_keep_bucket_zero_two_wide() {
        let most = equal_width_splits(65536).unwrap();
        assert_eq!(most.len(), 65534);
        assert_eq!((most[0], most[most.len() - 1]), (2, 0xFFFF));
        assert_eq!(equal_width_splits(1 << 40).unwrap(), most);
        assert_eq!(equal_width_splits(32768).unwrap()[0], 2);
        for n in [2, 3, 1000, 32768, 32769, 50000, 65535, 65536] {
            let splits = equal_width_splits(n).unwrap();
            let wide: Vec<i64> = splits.iter().map(|&s| i64::from(s)).collect();
            assert!(validate_splits(&wide).is_ok(), "{n}");
        }
    }

    #[test]
    fn bucket_ranges_tile_the_ring() {
        let splits = [10u16, 11, 0x8000];
        let ranges = bucket_ranges(&splits);
        assert_eq!(
            ranges,
            vec![
                range(0, 9),
                range(10, 10),
                range(11, 0x7FFF),
                range(0x8000, 0xFFFF)
            ]
        );
        assert_eq!(bucket_ranges(&[]), vec![HashRange::full()]);
        for (i, r) in ranges.iter().enumerate() {
            assert_eq!(bucket_index(r.start(), &splits), i as u32);
            assert_eq!(bucket_index(r.end(), &splits), i as u32);
        }
    }

    #[test]
    fn bucket_table_agrees_with_bucket_index() {
        for splits in [vec![], vec![2], vec![10u16, 11, 0x8000, 0xFFFF]] {
            let table = bucket_table(&splits);
            for h in 0..=u16::MAX {
                assert_eq!(table[h as usize], bucket_index(h, &splits));
            }
        }
    }

    #[test]
    fn splits_are_validated() {
        assert_eq!(validate_splits(&[2, 0xFFFF]).unwrap(), vec![2, 0xFFFF]);
        assert!(validate_splits(&[0]).is_err());
        let err = validate_splits(&[1, 0xFFFF]).unwrap_err();
        assert!(err.to_string().contains("splits[0]"), "{err}");
        assert!(validate_splits(&[0x1_0000]).is_err());
        assert!(validate_splits(&[5, 5]).is_err());
        assert!(validate_splits(&[6, 5]).is_err());
    }

    #[test]
    fn entry_bucket_rejects_straddling_entries() {
        let splits = [0x4000u16, 0x8000];
        assert_eq!(entry_bucket(0x4000, 0x7FFF, &splits).unwrap(), 1);
        assert_eq!(entry_bucket(5, 5, &splits).unwrap(), 0);
        let err = entry_bucket(0x3FFF, 0x4000, &splits).unwrap_err();
        assert!(err.to_string().contains("0x4000"), "{err}");
        assert!(entry_bucket(9, 8, &splits).is_err());
    }

    #[test]
    fn canonical_hash_is_bucket_start_but_never_zero() {
        let splits = [0x4000u16, 0x8000];
        assert_eq!(canonical_bucket_hash(0, &splits).unwrap(), 1);
        assert_eq!(canonical_bucket_hash(2, &splits).unwrap(), 0x8000);
        assert!(canonical_bucket_hash(3, &splits).is_err());
        assert!(canonical_bucket_hash(-1, &splits).is_err());
    }

    #[test]
    fn budget_division() {
        assert_eq!(buckets_for_budget(4, 1).unwrap(), 4);
        assert_eq!(buckets_for_budget(4, 3).unwrap(), 1);
        assert_eq!(buckets_for_budget(0, 3).unwrap(), 1);
        assert!(buckets_for_budget(4, 0).is_err());
        assert!(buckets_for_budget(-1, 1).is_err());
    }
}
