"""keyshared: routing and policy kernels for Key_Shared consumption of scalable topics.

The native kernels live in ``keyshared._core``; this package re-exports them by concept
(``hashing``, ``buckets``) and adds the pure-Python layers.
"""

from keyshared.buckets import (
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
from keyshared.hashing import (
    HASH_VERSION,
    bucket_hash,
    get_num_threads,
    key_hash,
    key_hashes,
    segment_hash,
    set_num_threads,
    split_hashes,
    sticky_key_hash,
)

__version__ = "0.1.0"

__all__ = [
    "HASH_VERSION",
    "HashRange",
    "RoutingTable",
    "__version__",
    "bucket_hash",
    "bucket_index",
    "bucket_indices",
    "bucket_ranges",
    "buckets_for_budget",
    "canonical_bucket_hash",
    "entry_bucket",
    "equal_width_splits",
    "get_num_threads",
    "key_hash",
    "key_hashes",
    "segment_hash",
    "set_num_threads",
    "split_hashes",
    "sticky_key_hash",
]
