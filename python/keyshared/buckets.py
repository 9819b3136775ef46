"""Hash ranges on the 16-bit rings, PIP-486 entry buckets, and one-pass routing of keys to
(segment id, bucket index)."""

from keyshared._core import (
    MIN_FIRST_SPLIT,
    RING_SIZE,
    HashRange,
    RoutingTable,
    bucket_index,
    bucket_indices,
    bucket_ranges,
    buckets_for_budget,
    canonical_bucket_hash,
    entry_bucket,
    equal_width_splits,
)

__all__ = [
    "MIN_FIRST_SPLIT",
    "RING_SIZE",
    "HashRange",
    "RoutingTable",
    "bucket_index",
    "bucket_indices",
    "bucket_ranges",
    "buckets_for_budget",
    "canonical_bucket_hash",
    "entry_bucket",
    "equal_width_splits",
]
