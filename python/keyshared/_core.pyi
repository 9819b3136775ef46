"""Native kernels of keyshared (Rust). Users import them through ``keyshared``."""

from collections.abc import Iterable, Sequence
from typing import Any, Final, final

import numpy as np
import numpy.typing as npt

# Keys of a batch: a list or tuple of str/bytes (None allowed with ``null_key``), a
# one-dimensional NumPy array of str, bytes or object dtype, or any Arrow array or chunked
# array of string, large_string, binary or large_binary (Arrow PyCapsule interface).
_KeyBatch = Any
_Splits = Sequence[int] | npt.NDArray[np.integer[Any]]

__all__ = [
    "HASH_VERSION",
    "HashRange",
    "RoutingTable",
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

HASH_VERSION: Final[int]

# --- hashing ---------------------------------------------------------------------------

def key_hash(key: str | bytes) -> int:
    """MurmurHash3_x86_32 (seed 0) of the key's bytes (str as UTF-8): an int in [0, 2**32)."""

def segment_hash(key: str | bytes) -> int:
    """``key_hash(key) >> 16``: the key's place on the 16-bit segment ring."""

def bucket_hash(key: str | bytes) -> int:
    """``key_hash(key) & 0xFFFF``: PIP-486's hashB, the key's place on a bucket ring."""

def sticky_key_hash(key: str | bytes) -> int:
    """Classic Key_Shared hash: ``key_hash(key) & 0xFFFF``, with 0 mapped to 1."""

def key_hashes(
    keys: _KeyBatch, *, null_key: str | bytes | None = None, threads: int | None = None
) -> npt.NDArray[np.uint32]:
    """``key_hash`` of every key. A null key is a ValueError naming its index unless
    ``null_key`` gives the bytes to hash instead. Releases the GIL; ``threads`` (>= 1)
    overrides the process default for this call."""

def split_hashes(
    keys: _KeyBatch, *, null_key: str | bytes | None = None, threads: int | None = None
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16]]:
    """``(segment_hash, bucket_hash)`` of every key, as two uint16 arrays."""

def set_num_threads(threads: int) -> None:
    """Sets the default thread count of batch calls; 0 means one per available core."""

def get_num_threads() -> int:
    """The thread count batch calls use when not told."""

# --- hash ranges and buckets -----------------------------------------------------------

@final
class HashRange:
    """Hashes ``start..end`` of the 16-bit ring, both inclusive, ``0 <= start <= end <= 0xFFFF``."""

    def __new__(cls, start: int, end: int) -> HashRange: ...
    @staticmethod
    def full() -> HashRange:
        """``[0x0000, 0xFFFF]``."""

    @staticmethod
    def from_hex(text: str) -> HashRange:
        """Parses ``"0a0b-f0f0"``."""

    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def size(self) -> int:
        """``end - start + 1``."""

    def contains(self, item: int | HashRange) -> bool:
        """Whether a hash in ``[0, 0xFFFF]`` or a whole range lies inside."""

    def __contains__(self, item: int | HashRange, /) -> bool: ...
    def is_adjacent_to(self, other: HashRange) -> bool:
        """True when the ranges touch end to start (either order) without overlapping."""

    def split(self) -> tuple[HashRange, HashRange]:
        """``[start, mid]`` and ``[mid + 1, end]``, ``mid = start + (end - start) // 2``;
        ValueError for a range of size 1."""

    def merge(self, other: HashRange) -> HashRange:
        """The union of two adjacent ranges; ValueError otherwise."""

    def to_hex(self) -> str:
        """``"0a0b-f0f0"``."""

    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __lt__(self, other: HashRange, /) -> bool: ...
    def __le__(self, other: HashRange, /) -> bool: ...
    def __gt__(self, other: HashRange, /) -> bool: ...
    def __ge__(self, other: HashRange, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __getnewargs__(self) -> tuple[int, int]: ...

def equal_width_splits(n: int) -> list[int]:
    """``[floor(i * 65536 / n) for i in 1..n-1]``; ``[]`` for n of 0 or 1."""

def bucket_ranges(splits: _Splits) -> list[HashRange]:
    """``[0, s1-1], [s1, s2-1], ..., [s_last, 0xFFFF]`` for ascending splits."""

def bucket_index(hash_b: int, splits: _Splits) -> int:
    """How many splits are ``<= hash_b``: the bucket holding ``hash_b``."""

def bucket_indices(
    hash_b: npt.NDArray[np.integer[Any]], splits: _Splits, *, threads: int | None = None
) -> npt.NDArray[np.int32]:
    """``bucket_index`` of every hashB of a one-dimensional integer array."""

def entry_bucket(entry_hash_min: int, entry_hash_max: int, splits: _Splits) -> int:
    """The one bucket holding ``[entry_hash_min, entry_hash_max]``; ValueError if the entry
    straddles a bucket boundary."""

def canonical_bucket_hash(index: int, splits: _Splits) -> int:
    """``max(start of bucket index, 1)``: the hash that stands for the whole bucket."""

def buckets_for_budget(budget: int, segments: int) -> int:
    """``max(1, budget // segments)``."""

# --- routing ---------------------------------------------------------------------------

@final
class RoutingTable:
    """Active segments ``(segment_id, hash_range, bucket_splits)`` tiling ``[0, 0xFFFF]``,
    routing keys to ``(segment id, bucket index)`` in one pass."""

    def __new__(cls, segments: Iterable[tuple[int, HashRange, _Splits]]) -> RoutingTable: ...
    @property
    def segments(self) -> list[tuple[int, HashRange, list[int]]]: ...
    def __len__(self) -> int: ...
    def route(self, key: str | bytes) -> tuple[int, int]: ...
    def route_hash(self, key_hash: int) -> tuple[int, int]: ...
    def route_keys(
        self, keys: _KeyBatch, *, null_key: str | bytes | None = None, threads: int | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]: ...
    def route_hashes(
        self, key_hashes: npt.NDArray[np.uint32], *, threads: int | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]: ...
