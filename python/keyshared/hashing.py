"""The pinned key hash (MurmurHash3_x86_32, seed 0) and its split into segment and bucket
halves. ``HASH_VERSION`` changes only if the hash ever does; routing depends on it."""

from keyshared._core import (
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

__all__ = [
    "HASH_VERSION",
    "bucket_hash",
    "get_num_threads",
    "key_hash",
    "key_hashes",
    "segment_hash",
    "set_num_threads",
    "split_hashes",
    "sticky_key_hash",
]
