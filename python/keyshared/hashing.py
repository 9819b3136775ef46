"""The pinned key hash (MurmurHash3_x86_32, seed 0), its split into segment and bucket
halves, and Pulsar's sticky key hash over a key hash range. ``HASH_VERSION`` changes only
if the hash ever does; routing depends on it."""

from keyshared._core import (
    HASH_VERSION,
    bucket_hash,
    get_num_threads,
    key_hash,
    key_hashes,
    make_sticky_key_hash,
    make_sticky_key_hashes,
    segment_hash,
    set_num_threads,
    split_hashes,
    sticky_key_hash,
    sticky_key_hashes,
)

__all__ = [
    "HASH_VERSION",
    "bucket_hash",
    "get_num_threads",
    "key_hash",
    "key_hashes",
    "make_sticky_key_hash",
    "make_sticky_key_hashes",
    "segment_hash",
    "set_num_threads",
    "split_hashes",
    "sticky_key_hash",
    "sticky_key_hashes",
]
