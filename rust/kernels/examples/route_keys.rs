//! A key's way through a scalable topic, as a Rust broker or client would walk it with the
//! kernels alone: the key hash, its two halves, the segment and bucket a routing table gives
//! it, the canonical hash of that bucket, and the consumer a consistent-hashing selector
//! picks for the key's sticky key hash.
//!
//! `cargo run --example route_keys -p keyshared-kernels`. docs/guides/rust.md quotes the part
//! between the `[docs]` lines, and tests/package/test_docs.py checks that it still does.

use keyshared_kernels::buckets::{canonical_bucket_hash, equal_width_splits, HashRange};
use keyshared_kernels::error::KernelResult;
use keyshared_kernels::hashing::{
    bucket_hash, key_hash, segment_hash, sticky_key_hash, SegmentHalf, HASH_VERSION,
};
use keyshared_kernels::ring::ConsistentHashingSelector;
use keyshared_kernels::routing::{RoutingTable, SegmentRoute};

fn main() -> KernelResult<()> {
    // The pinned hash: MurmurHash3_x86_32, seed 0, of the key's bytes.
    assert_eq!(HASH_VERSION, 1);
    assert_eq!(key_hash(b"hello"), 0x248B_FA47);

    // [docs]
    // Two segments of four equal-width entry buckets, routed as Pulsar master routes: the
    // high half of the key hash picks the segment, the low half (hashB) the bucket.
    let splits = equal_width_splits(4)?;
    let segments = vec![
        SegmentRoute {
            segment_id: 1,
            range: HashRange::new(0x0000, 0x7FFF)?,
            splits: splits.clone(),
        },
        SegmentRoute {
            segment_id: 2,
            range: HashRange::new(0x8000, 0xFFFF)?,
            splits: splits.clone(),
        },
    ];
    let table = RoutingTable::new(segments, SegmentHalf::High)?;

    // Key_Shared's default selector: 100 points a consumer over the sticky key hash range
    // [1, 65535].
    let mut selector = ConsistentHashingSelector::new(100, true, 0xFFFF)?;
    selector.add_consumer(1, b"consumer-1")?;
    selector.add_consumer(2, b"consumer-2")?;

    for key in ["order-1", "order-2", "order-3"] {
        let hash = key_hash(key.as_bytes());
        let (segment_id, bucket) = table.route(hash);
        let canonical = canonical_bucket_hash(i64::from(bucket), &splits)?;
        let consumer = selector.select(sticky_key_hash(key.as_bytes()));
        println!(
            "{key}: key hash {hash:08x}, segment hash {:04x}, hashB {:04x} -> segment \
             {segment_id}, bucket {bucket} (canonical {canonical:04x}), consumer {consumer:?}",
            segment_hash(hash),
            bucket_hash(hash),
        );
    }

    // Pulsar 5.0.0-M1 routes by the low half and has no entry buckets: bucket 0 always.
    let m1 = RoutingTable::new(table.segments().to_vec(), SegmentHalf::Low)?;
    let (_, bucket) = m1.route(key_hash(b"order-1"));
    assert_eq!(bucket, 0);
    // [docs]
    Ok(())
}
