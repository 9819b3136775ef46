//! One-pass routing of key hashes to (segment id, bucket index) under a set of active
//! segments and a release's [`SegmentHalf`]: the hot path of bulk bucketing.

use super::buckets::{bucket_index, HashRange, RING_SIZE};
use super::error::{Duplicate, InvalidInput, KernelResult, Tiling};
use super::hashing::{bucket_hash, segment_hash, SegmentHalf};
use super::parallel::map_pairs;

/// An active segment as routing sees it: its id, its range of segment hashes and its
/// ascending bucket split points over hashB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentRoute {
    /// The segment's id: unique among the table's segments, at most `i64::MAX`.
    pub segment_id: u64,
    /// The segment's range of segment hashes, both ends inclusive.
    pub range: HashRange,
    /// The segment's bucket split points over the bucket half of a key hash: ascending, the start
    /// of every bucket but bucket 0.
    pub splits: Vec<u16>,
}

/// Active segments that tile the whole segment ring, with a direct lookup from segment hash
/// to segment so that routing a key costs one table read and one short binary search.
/// `half` is the release's rule: which half of a key hash picks the segment, and whether
/// the other one picks a bucket (see [`SegmentHalf`]).
#[derive(Debug, Clone)]
pub struct RoutingTable {
    segments: Vec<SegmentRoute>,
    half: SegmentHalf,
    slot_by_segment_hash: Box<[u16]>,
    /// Per segment (in range order), how many buckets the segments before it hold.
    first_bucket_ordinal: Vec<u32>,
}

/// Two tables are equal when they hold the same segments under the same rule (the lookup
/// follows from them).
impl PartialEq for RoutingTable {
    fn eq(&self, other: &Self) -> bool {
        self.segments == other.segments && self.half == other.half
    }
}

impl Eq for RoutingTable {}

impl RoutingTable {
    /// A table over `segments`, given in any order, routing by `half`. Segments that do not tile
    /// `[0, 0xffff]` exactly are an error (`Tiling`: none, an overlap, a gap or a short end), and
    /// so are two segments with one id (`Duplicate::SegmentId`) and an id above `i64::MAX`
    /// (`OutOfRange`), since routes carry ids as int64.
    pub fn new(mut segments: Vec<SegmentRoute>, half: SegmentHalf) -> KernelResult<Self> {
        segments.sort_by_key(|s| s.range);
        check_tiling(&segments)?;
        check_unique_ids(&segments)?;
        let mut slots = vec![0u16; RING_SIZE as usize].into_boxed_slice();
        for (slot, seg) in segments.iter().enumerate() {
            let (start, end) = (seg.range.start() as usize, seg.range.end() as usize);
            // At most 65,536 segments tile the ring, so a slot always fits in u16.
            slots[start..=end].fill(slot as u16);
        }
        // At most 65,536 segments of at most 65,536 buckets: the count fits in u32.
        let first_bucket_ordinal = segments
            .iter()
            .scan(0u32, |next, seg| {
                let first = *next;
                *next += half.bucket_count(&seg.splits);
                Some(first)
            })
            .collect();
        Ok(Self {
            segments,
            half,
            slot_by_segment_hash: slots,
            first_bucket_ordinal,
        })
    }

    /// This table with the `count` neighbouring segments from the one whose range starts at
    /// `start` replaced by `routes`: a split, merge or rebucket of the layout it routes, made
    /// from the routes it already holds rather than from every segment again. Checked as
    /// [`RoutingTable::new`] checks a whole table: replacements that do not tile the hashes
    /// they replace are a `Tiling` error.
    pub fn replaced(
        &self,
        start: u16,
        count: usize,
        routes: Vec<SegmentRoute>,
    ) -> KernelResult<Self> {
        let at = self.segments.partition_point(|s| s.range.start() < start);
        let end = at.saturating_add(count).min(self.segments.len());
        let mut segments = Vec::with_capacity(self.segments.len() - (end - at) + routes.len());
        segments.extend_from_slice(&self.segments[..at]);
        segments.extend(routes);
        segments.extend_from_slice(&self.segments[end..]);
        Self::new(segments, self.half)
    }

    /// The segments in range order.
    pub fn segments(&self) -> &[SegmentRoute] {
        &self.segments
    }

    /// The release's rule the table routes by.
    pub fn half(&self) -> SegmentHalf {
        self.half
    }

    /// (segment id, bucket index) of a 32-bit key hash.
    #[inline]
    pub fn route(&self, hash: u32) -> (u64, u32) {
        let slot = self.slot(hash);
        let seg = &self.segments[slot];
        (seg.segment_id, self.bucket_in(seg, hash))
    }

    /// The position, in range order, of the segment a key hash routes to.
    #[inline]
    fn slot(&self, hash: u32) -> usize {
        self.slot_by_segment_hash[self.half.segment_hash(hash) as usize] as usize
    }

    /// The bucket of a key hash inside its segment: 0 where the rule has no buckets.
    #[inline]
    fn bucket_in(&self, seg: &SegmentRoute, hash: u32) -> u32 {
        self.half
            .bucket_hash(hash)
            .map_or(0, |b| bucket_index(b, &seg.splits))
    }

    /// `route` of every key hash on up to `threads` threads, as the segment ids (int64, which
    /// every id fits: `new` checks) and bucket indices (int32) that NumPy and Arrow take.
    pub fn route_hashes(&self, hashes: &[u32], threads: usize) -> (Vec<i64>, Vec<i32>) {
        map_pairs(hashes.len(), threads, |i| self.route_signed(hashes[i]))
    }

    /// `route` with the segment id as int64 and the bucket as int32.
    #[inline]
    pub fn route_signed(&self, hash: u32) -> (i64, i32) {
        let (id, bucket) = self.route(hash);
        (id as i64, bucket as i32)
    }

    /// `bucket_ordinal` of every key hash, on up to `threads` threads.
    pub fn bucket_ordinals(&self, hashes: &[u32], threads: usize) -> Vec<u32> {
        map_pairs(hashes.len(), threads, |i| {
            (self.bucket_ordinal(hashes[i]), ())
        })
        .0
    }

    /// How many buckets the table holds, over all its segments.
    pub fn bucket_count(&self) -> u64 {
        self.bucket_counts().map(u64::from).sum()
    }

    /// How many buckets each segment holds under the table's rule, in range order.
    pub fn bucket_counts(&self) -> impl Iterator<Item = u32> + '_ {
        self.segments
            .iter()
            .map(|s| self.half.bucket_count(&s.splits))
    }

    /// The position of a key hash's bucket among all the table's buckets: segments in range
    /// order, each segment's buckets in order. A dense number for grouping by bucket.
    #[inline]
    pub fn bucket_ordinal(&self, hash: u32) -> u32 {
        let slot = self.slot(hash);
        self.first_bucket_ordinal[slot] + self.bucket_in(&self.segments[slot], hash)
    }
}

/// The high and the low 16 bits of every key hash (`hashing::segment_hash` and
/// `hashing::bucket_hash`), on up to `threads` threads: what `route_keys` reports beside the
/// routes, the same halves whichever of them the release routes by.
pub fn hash_halves(hashes: &[u32], threads: usize) -> (Vec<u16>, Vec<u16>) {
    map_pairs(hashes.len(), threads, |i| {
        (segment_hash(hashes[i]), bucket_hash(hashes[i]))
    })
}

fn check_tiling(segments: &[SegmentRoute]) -> KernelResult<()> {
    let mut next_start = 0u32;
    for seg in segments {
        let (start, end) = (u32::from(seg.range.start()), u32::from(seg.range.end()));
        if start != next_start {
            let (segment_id, range) = (seg.segment_id, seg.range.into());
            return Err(if start < next_start {
                Tiling::SegmentOverlaps { segment_id, range }
            } else {
                Tiling::SegmentGap { segment_id, range }
            }
            .into());
        }
        next_start = end + 1;
    }
    if segments.is_empty() {
        return Err(Tiling::NoSegments.into());
    }
    if next_start != RING_SIZE {
        return Err(Tiling::SegmentsShort {
            end: (next_start.wrapping_sub(1) & 0xFFFF) as u16,
        }
        .into());
    }
    Ok(())
}

fn check_unique_ids(segments: &[SegmentRoute]) -> KernelResult<()> {
    // Routes come out as int64 segment ids (`route_signed`), so larger ids are refused.
    if let Some(seg) = segments.iter().find(|s| s.segment_id > i64::MAX as u64) {
        return Err(InvalidInput::OutOfRange {
            what: "segment id".to_owned(),
            value: i128::from(seg.segment_id),
            min: 0,
            max: i64::MAX as u64,
        });
    }
    let mut ids: Vec<u64> = segments.iter().map(|s| s.segment_id).collect();
    ids.sort_unstable();
    match ids.windows(2).find(|w| w[0] == w[1]) {
        Some(w) => Err(Duplicate::SegmentId { segment_id: w[0] }.into()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_halves_split_each_hash() {
        let hashes = [0x1234_ABCD, 0, u32::MAX];
        for threads in [1, 2] {
            let (high, low) = hash_halves(&hashes, threads);
            assert_eq!(high, [0x1234, 0, 0xFFFF]);
            assert_eq!(low, [0xABCD, 0, 0xFFFF]);
        }
    }

    fn seg(id: u64, start: i64, end: i64, splits: &[u16]) -> SegmentRoute {
        SegmentRoute {
            segment_id: id,
            range: HashRange::new(start, end).unwrap(),
            splits: splits.to_vec(),
        }
    }

    #[test]
    fn a_replaced_run_routes_as_a_table_made_whole() {
        let whole = |segs: Vec<SegmentRoute>| RoutingTable::new(segs, SegmentHalf::High).unwrap();
        let table = whole(vec![
            seg(0, 0, 0x7FFF, &[0x100]),
            seg(1, 0x8000, 0xFFFF, &[]),
        ]);
        let split = table
            .replaced(
                0x8000,
                1,
                vec![seg(3, 0xC000, 0xFFFF, &[]), seg(2, 0x8000, 0xBFFF, &[])],
            )
            .unwrap();
        let want = whole(vec![
            seg(0, 0, 0x7FFF, &[0x100]),
            seg(2, 0x8000, 0xBFFF, &[]),
            seg(3, 0xC000, 0xFFFF, &[]),
        ]);
        assert!(split == want);
        for h in [
            0u32,
            0x7FFF_FFFF,
            0x8000_0000,
            0xBFFF_FFFF,
            0xC000_0000,
            u32::MAX,
        ] {
            assert_eq!(split.route(h), want.route(h));
        }
        let merged = split
            .replaced(0, 2, vec![seg(4, 0, 0xBFFF, &[0x10])])
            .unwrap();
        assert!(
            merged
                == whole(vec![
                    seg(4, 0, 0xBFFF, &[0x10]),
                    seg(3, 0xC000, 0xFFFF, &[])
                ])
        );
        // Replacements that leave a gap, or overlap a neighbour, are refused.
        assert!(table
            .replaced(0x8000, 1, vec![seg(5, 0x8000, 0xBFFF, &[])])
            .is_err());
        assert!(table
            .replaced(0x8000, 1, vec![seg(5, 0x7000, 0xFFFF, &[])])
            .is_err());
        assert!(table
            .replaced(0x9000, 1, vec![seg(5, 0x9000, 0xFFFF, &[])])
            .is_err());
        assert!(table
            .replaced(0x8000, 1, vec![seg(0, 0x8000, 0xFFFF, &[])])
            .is_err());
    }

    #[test]
    fn batches_route_as_single_hashes_and_ids_fit_int64() {
        let table = RoutingTable::new(vec![seg(7, 0, 0xFFFF, &[0x100, 0x9000])], SegmentHalf::High)
            .unwrap();
        let hashes: Vec<u32> = (0..40_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let (ids, buckets) = table.route_hashes(&hashes, 2);
        let ordinals = table.bucket_ordinals(&hashes, 2);
        for (i, &h) in hashes.iter().enumerate() {
            assert_eq!((ids[i], buckets[i]), table.route_signed(h));
            assert_eq!(ordinals[i], table.bucket_ordinal(h));
        }
        let too_big = seg(i64::MAX as u64 + 1, 0, 0xFFFF, &[]);
        assert!(matches!(
            RoutingTable::new(vec![too_big], SegmentHalf::High),
            Err(InvalidInput::OutOfRange { .. })
        ));
    }

    #[test]
    fn bucket_ordinals_number_the_buckets_in_range_order() {
        let table = RoutingTable::new(
            vec![
                seg(9, 0x8000, 0xFFFF, &[0x8000]),
                seg(4, 0, 0x7FFF, &[0x4000, 0xC000]),
            ],
            SegmentHalf::High,
        )
        .unwrap();
        assert_eq!(table.bucket_count(), 5);
        let ordinals: Vec<u32> = [0x0000_0000, 0x0000_C000, 0x8000_0000, 0xFFFF_FFFF]
            .iter()
            .map(|&h| table.bucket_ordinal(h))
            .collect();
        assert_eq!(ordinals, vec![0, 2, 3, 4]);
    }

    #[test]
    fn routes_by_high_then_low_half() {
        let segments = vec![seg(7, 0x8000, 0xFFFF, &[0x8000]), seg(3, 0, 0x7FFF, &[])];
        let table = RoutingTable::new(segments, SegmentHalf::High).unwrap();
        assert_eq!(table.route(0x0000_FFFF), (3, 0));
        assert_eq!(table.route(0x7FFF_FFFF), (3, 0));
        assert_eq!(table.route(0x8000_7FFF), (7, 0));
        assert_eq!(table.route(0xFFFF_8000), (7, 1));
        assert_eq!(table.segments()[0].segment_id, 3);
    }

    #[test]
    fn m1_routes_by_the_low_half_into_one_bucket_per_segment() {
        let segments = vec![
            seg(7, 0x8000, 0xFFFF, &[0x8000]),
            seg(3, 0, 0x7FFF, &[0x10]),
        ];
        let m1 = RoutingTable::new(segments.clone(), SegmentHalf::Low).unwrap();
        assert_eq!(m1.route(0x0000_FFFF), (7, 0));
        assert_eq!(m1.route(0xFFFF_7FFF), (3, 0));
        assert_eq!(m1.route(0x7FFF_8000), (7, 0));
        assert_eq!(m1.bucket_count(), 2);
        assert_eq!(m1.bucket_counts().collect::<Vec<_>>(), vec![1, 1]);
        let ordinals: Vec<u32> = [0xFFFF_0000, 0x0000_FFFF]
            .iter()
            .map(|&h| m1.bucket_ordinal(h))
            .collect();
        assert_eq!(ordinals, vec![0, 1]);
        assert_ne!(m1, RoutingTable::new(segments, SegmentHalf::High).unwrap());
        assert_eq!(m1.half(), SegmentHalf::Low);
    }

    #[test]
    fn rejects_gaps_overlaps_short_tilings_and_duplicate_ids() {
        let gap = vec![seg(0, 0, 10, &[]), seg(1, 12, 0xFFFF, &[])];
        assert!(RoutingTable::new(gap, SegmentHalf::High)
            .unwrap_err()
            .to_string()
            .contains("gap"));
        let overlap = vec![seg(0, 0, 10, &[]), seg(1, 10, 0xFFFF, &[])];
        assert!(RoutingTable::new(overlap, SegmentHalf::High)
            .unwrap_err()
            .to_string()
            .contains("overlaps"));
        assert!(RoutingTable::new(vec![seg(0, 0, 10, &[])], SegmentHalf::High).is_err());
        assert!(RoutingTable::new(vec![], SegmentHalf::High).is_err());
        let dup = vec![seg(0, 0, 10, &[]), seg(0, 11, 0xFFFF, &[])];
        assert!(RoutingTable::new(dup, SegmentHalf::High)
            .unwrap_err()
            .to_string()
            .contains("more than once"));
    }
}
