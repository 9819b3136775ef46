"""Where a key goes: the pinned key hash and its segment and bucket halves, hash ranges and
bucket lookup on the 16-bit rings, a scalable topic's producer-side segment router and the
legacy partitioned-topic schemes, and the partitioners of other systems, bit-exact with each.
"""

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
from keyshared.routing import hashing, partitioners, router
from keyshared.routing.hashing import *
from keyshared.routing.partitioners import *
from keyshared.routing.router import *

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
__all__ += hashing.__all__
__all__ += partitioners.__all__
__all__ += router.__all__
