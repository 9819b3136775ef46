//! Any tiling of the segment ring with any bucket splits, under either release's rule: a
//! table is built or refused with an error, never a panic, and every key hash routes to a
//! segment covering its segment hash, one hash at a time as in batch.
#![no_main]

use keyshared_kernels::buckets::{validate_splits, HashRange};
use keyshared_kernels::hashing::SegmentHalf;
use keyshared_kernels::routing::{RoutingTable, SegmentRoute};
use libfuzzer_sys::{arbitrary, fuzz_target};

#[derive(arbitrary::Arbitrary, Debug)]
struct Input {
    cuts: Vec<u16>,
    ids: Vec<u64>,
    splits: Vec<Vec<i64>>,
    hashes: Vec<u32>,
    low_half: bool,
}

fuzz_target!(|input: Input| {
    let mut cuts: Vec<u16> = input.cuts.into_iter().filter(|&c| c > 0).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let starts = std::iter::once(0).chain(cuts.iter().copied());
    let ends = cuts.iter().map(|&c| c - 1).chain(std::iter::once(u16::MAX));
    let mut segments = Vec::new();
    for (i, (start, end)) in starts.zip(ends).enumerate() {
        let range = HashRange::new(i64::from(start), i64::from(end)).expect("a tiling range");
        let id = input.ids.get(i).copied().unwrap_or(i as u64);
        let Ok(splits) = validate_splits(input.splits.get(i).map_or(&[][..], Vec::as_slice)) else {
            return;
        };
        segments.push(SegmentRoute {
            segment_id: id,
            range,
            splits,
        });
    }
    let half = if input.low_half {
        SegmentHalf::Low
    } else {
        SegmentHalf::High
    };
    let Ok(table) = RoutingTable::new(segments, half) else {
        return;
    };
    let (ids, buckets) = table.route_hashes(&input.hashes, 2);
    for (i, &hash) in input.hashes.iter().enumerate() {
        let (id, bucket) = table.route(hash);
        assert_eq!((id as i64, bucket as i32), (ids[i], buckets[i]));
        let segment = table
            .segments()
            .iter()
            .find(|s| s.segment_id == id)
            .expect("routed");
        assert!(segment.range.contains_hash(half.segment_hash(hash)));
        assert!(bucket < half.bucket_count(&segment.splits));
    }
});
