"""Native kernels of keyshared (Rust). Users import them through ``keyshared``.

Every mistake they refuse raises a ``keyshared.errors.KeysharedError`` carrying ``kind`` (a
stable snake_case name, one of ``keyshared.errors.KINDS``), ``argument`` (the name of the
argument that was wrong, or None) and ``index`` (the index of the wrong item of a batch
argument, or None)."""

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, final, overload

import numpy as np
import numpy.typing as npt

# Keys of a batch: a list or tuple of str/bytes (None allowed with ``null_key``), a
# one-dimensional NumPy array of str, bytes or object dtype, or any Arrow array or chunked
# array of string, large_string, binary or large_binary (Arrow PyCapsule interface).
_KeyBatch = Any
_Splits = Sequence[int] | npt.NDArray[np.integer[Any]]

__all__ = [
    "HASH_VERSION",
    "MIN_FIRST_SPLIT",
    "RING_SIZE",
    "BucketCheckpoints",
    "ConsistentHashingStickyKeyConsumerSelector",
    "ConsumerDrainingHashesStats",
    "ConsumerHashAssignmentsSnapshot",
    "DispatchResult",
    "DrainingHash",
    "DrainingHashEntry",
    "DrainingHashesTracker",
    "EntryBucketConsumerSelector",
    "EntryBucketDispatcher",
    "HashRange",
    "HoldReason",
    "ImpactedConsumersResult",
    "InFlightEntry",
    "InFlightWindow",
    "KeySharedConsumerState",
    "MessageRedeliveryController",
    "PendingAcksMap",
    "RoutingTable",
    "SafeCursor",
    "StickyKeyDispatcher",
    "SubscriptionFailurePolicy",
    "WindowAction",
    "__build_profile__",
    "__version__",
    "_checked_splits",
    "_error_kinds",
    "bucket_hash",
    "bucket_index",
    "bucket_indices",
    "bucket_ranges",
    "buckets_for_budget",
    "canonical_bucket_hash",
    "entry_bucket",
    "equal_width_splits",
    "fnv1a_32",
    "get_available_permits",
    "get_effective_look_ahead_limit",
    "get_num_threads",
    "iceberg_bucket",
    "impacted_consumers",
    "java_string_hash_code",
    "java_utf8",
    "key_hash",
    "key_hashes",
    "make_sticky_key_hash",
    "make_sticky_key_hashes",
    "murmur2",
    "partition_key",
    "partition_keys",
    "register_draining_hashes",
    "segment_hash",
    "set_num_threads",
    "spark_bucket",
    "spark_hash",
    "split_hashes",
    "sticky_key_hash",
    "sticky_key_hashes",
    "validate_bucket_boundaries",
]

__version__: Final[str]
"""The package version, as Cargo.toml gives it."""

__build_profile__: Final[Literal["release", "dev"]]
"""Which Cargo profile built this module: "release" (wheels, benchmarks) or "dev"."""

RING_SIZE: Final[int]
"""How many 16-bit hash values a ring holds (65,536): the segment ring over hashA and each
segment's bucket ring over hashB."""

MIN_FIRST_SPLIT: Final[int]
"""The smallest first bucket split (2): bucket 0 spans at least ``[0, 1]``, so that it holds
its canonical hash 1."""

HASH_VERSION: Final[int]
"""The version of ``key_hash`` (1): bumped only if the hash ever changed, which routing
depends on it never doing."""

# --- hashing ---------------------------------------------------------------------------

def key_hash(key: str | bytes) -> int:
    """MurmurHash3_x86_32 (seed 0) of the key's bytes (str as UTF-8): an int in [0, 2**32)."""

def segment_hash(key: str | bytes, *, pulsar_version: str | None = None) -> int:
    """The key's place on the 16-bit segment ring: ``key_hash(key) >> 16`` on master (the
    default), ``key_hash(key) & 0xFFFF`` on ``pulsar_version="5.0.0-M1"``."""

def bucket_hash(key: str | bytes) -> int:
    """``key_hash(key) & 0xFFFF``: PIP-486's hashB, the key's place on a bucket ring."""

def sticky_key_hash(key: str | bytes) -> int:
    """Classic Key_Shared hash of a current Pulsar broker's default selector:
    ``(key_hash(key) & 0x7FFFFFFF) % 65535 + 1``, in ``[1, 65535]``."""

def make_sticky_key_hash(key: str | bytes, hash_range: HashRange) -> int:
    """Pulsar's ``makeStickyKeyHash(key, range)``:
    ``(key_hash(key) & 0x7FFFFFFF) % hash_range.size + hash_range.start``, with 0 mapped to
    1 (0 means "not set" in PIP-379 structures)."""

def sticky_key_hashes(
    keys: _KeyBatch, *, null_key: str | bytes | None = None, threads: int | None = None
) -> npt.NDArray[np.uint16]:
    """``sticky_key_hash`` of every key (batches as for ``key_hashes``)."""

def make_sticky_key_hashes(
    keys: _KeyBatch,
    hash_range: HashRange,
    *,
    null_key: str | bytes | None = None,
    threads: int | None = None,
) -> npt.NDArray[np.uint16]:
    """``make_sticky_key_hash(key, hash_range)`` of every key (batches as for
    ``key_hashes``)."""

def key_hashes(
    keys: _KeyBatch, *, null_key: str | bytes | None = None, threads: int | None = None
) -> npt.NDArray[np.uint32]:
    """``key_hash`` of every key. A null key is a ValueError naming its index unless
    ``null_key`` gives the bytes to hash instead. Releases the GIL; ``threads`` (>= 1)
    overrides the process default for this call. A list or tuple is read 4,096 keys at a
    time and each piece hashed while it is in cache, on up to ``threads`` threads at once
    while the calling thread holds the GIL (reading Python objects needs it), letting go of
    it after every 16 pieces a thread. A list whose size another thread changes meanwhile is
    a ValueError."""

def split_hashes(
    keys: _KeyBatch, *, null_key: str | bytes | None = None, threads: int | None = None
) -> tuple[npt.NDArray[np.uint16], npt.NDArray[np.uint16]]:
    """``(segment_hash, bucket_hash)`` of every key, as two uint16 arrays."""

def set_num_threads(threads: int) -> None:
    """Sets the default thread count of batch calls; 0 means one per available core.

    A batch of 64K keys or more runs on a pool of worker threads, made on first use for each
    thread count and kept for the process (a forked child makes its own). A list or tuple of
    up to 64 keys always runs on the calling thread, with the GIL held."""

def get_num_threads() -> int:
    """The thread count batch calls use when not told."""

# --- hash ranges and buckets -----------------------------------------------------------

@final
class HashRange:
    """Hashes ``start..end`` of the 16-bit ring, both inclusive, ``0 <= start <= end <= 0xFFFF``."""

    def __new__(cls, start: int, end: int) -> HashRange: ...
    @staticmethod
    def full() -> HashRange:
        """The whole ring, ``[0x0000, 0xFFFF]``."""

    @staticmethod
    def from_hex(text: str) -> HashRange:
        """Parses the hex form ``"0a0b-f0f0"``; ValueError for any other text."""

    @property
    def start(self) -> int:
        """The first hash of the range."""

    @property
    def end(self) -> int:
        """The last hash of the range (inclusive)."""

    @property
    def size(self) -> int:
        """How many hashes the range holds: ``end - start + 1``."""

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
        """The hex form, ``"0a0b-f0f0"``."""

    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __lt__(self, other: HashRange, /) -> bool: ...
    def __le__(self, other: HashRange, /) -> bool: ...
    def __gt__(self, other: HashRange, /) -> bool: ...
    def __ge__(self, other: HashRange, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __getnewargs__(self) -> tuple[int, int]: ...

def equal_width_splits(n: int) -> list[int]:
    """``[floor(i * 65536 / n) for i in 1..n-1]``; ``[]`` for n of 0 or 1; n above 65,536 is
    clamped to 65,536. Bucket 0 keeps at least ``[0, 1]``: above 32,768 buckets the split at
    1 is left out (one bucket fewer than asked)."""

def bucket_ranges(splits: _Splits) -> list[HashRange]:
    """``[0, s1-1], [s1, s2-1], ..., [s_last, 0xFFFF]`` for ascending splits."""

def _checked_splits(splits: _Splits, name: str) -> list[int]:
    """The split points ``splits`` checked as ``bucket_ranges`` checks them, its errors
    naming them ``name``."""

def bucket_index(hash_b: int, splits: _Splits) -> int:
    """How many splits are ``<= hash_b``: the bucket holding ``hash_b``."""

def bucket_indices(
    hash_b: _Splits, splits: _Splits, *, threads: int | None = None
) -> npt.NDArray[np.int32]:
    """``bucket_index`` of every hashB (each in ``[0, 0xFFFF]``) of a one-dimensional integer
    array or sequence of ints. Releases the GIL; ``threads`` as for ``key_hashes``."""

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
    routing keys to ``(segment id, bucket index)`` in one pass under ``pulsar_version``'s
    rule: ``"master"`` (the default; segment by the high half of the key hash, bucket by
    the low half) or ``"5.0.0-M1"`` (segment by the low half; one bucket per segment, so
    every bucket index is 0)."""

    def __new__(
        cls,
        segments: Iterable[tuple[int, HashRange, _Splits]],
        pulsar_version: str | None = None,
    ) -> RoutingTable: ...
    @property
    def segments(self) -> list[tuple[int, HashRange, list[int]]]:
        """The `(segment_id, hash_range, bucket_splits)` triples, in range order."""
    @property
    def pulsar_version(self) -> str:
        """The release whose rule the table routes by."""
    def replaced(
        self, start: int, count: int, segments: Iterable[tuple[int, HashRange, _Splits]]
    ) -> RoutingTable:
        """This table with the ``count`` neighbouring segments from the one whose range
        starts at hash ``start`` replaced by ``segments``, under the same rule: the table of a
        split, merge or rebucket, made from the routes this one holds (the work of the
        change, not of every segment read again from Python). Checked as a whole table is: a
        replacement that does not tile the hashes it replaces (a gap, an overlap, a start
        that begins no segment) or repeats an id raises ValueError."""
    def __len__(self) -> int: ...
    def __getnewargs__(self) -> tuple[list[tuple[int, HashRange, list[int]]], str]: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def route(self, key: str | bytes) -> tuple[int, int]:
        """`(segment_id, bucket_index)` of one key (str or bytes)."""
    def route_hash(self, key_hash: int) -> tuple[int, int]:
        """`(segment_id, bucket_index)` of one 32-bit key hash."""
    @overload
    def route_keys(
        self,
        keys: _KeyBatch,
        *,
        null_key: str | bytes | None = None,
        threads: int | None = None,
        with_hashes: Literal[False] = False,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]: ...
    @overload
    def route_keys(
        self,
        keys: _KeyBatch,
        *,
        null_key: str | bytes | None = None,
        threads: int | None = None,
        with_hashes: Literal[True],
    ) -> tuple[
        npt.NDArray[np.int64],
        npt.NDArray[np.int32],
        npt.NDArray[np.uint32],
        npt.NDArray[np.uint16],
        npt.NDArray[np.uint16],
    ]:
        """Segment ids (int64) and bucket indices (int32) of a batch of keys, in one pass.
        With ``with_hashes=True``, also the keys' ``key_hash`` (uint32) and its halves
        ``(key_hash >> 16, key_hash & 0xFFFF)`` (two uint16 arrays, as ``split_hashes``
        gives them, whatever the table's release) from the same hashing pass: five arrays."""
    def route_hashes(
        self,
        key_hashes: Sequence[int] | npt.NDArray[np.integer[Any]],
        *,
        threads: int | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """Routes 32-bit key hashes (each in ``[0, 2**32)``); uint32 arrays are read as is."""
    @property
    def bucket_count(self) -> int:
        """How many buckets the table holds, over all its segments (one per segment on
        5.0.0-M1)."""
    @property
    def bucket_counts(self) -> list[int]:
        """How many buckets each segment holds, in range order (1 each on 5.0.0-M1)."""
    def bucket_ordinals(
        self,
        key_hashes: Sequence[int] | npt.NDArray[np.integer[Any]],
        *,
        threads: int | None = None,
    ) -> npt.NDArray[np.uint32]:
        """Each key hash's bucket ordinal: its bucket's position among all the table's
        buckets (segments in range order, then buckets in order), in ``[0, bucket_count)``."""

# --- dispatcher state: draining hashes and pending acks (PIP-379) ----------------------

_IntArray = npt.NDArray[np.integer[Any]] | Sequence[int]
_Ack = tuple[int, int, int, int]

@final
class DrainingHashEntry:
    """A draining sticky key hash: the consumer still holding its pending messages,
    ``ref_count`` of them (always >= 1), and ``blocked_count`` dispatches to other consumers
    it blocked."""

    @property
    def consumer_id(self) -> int:
        """The consumer holding the hash's pending messages."""

    @property
    def ref_count(self) -> int:
        """How many of its pending messages hold the hash (>= 1)."""

    @property
    def blocked_count(self) -> int:
        """How many dispatches of the hash to other consumers it blocked."""

    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...

@final
class DrainingHash:
    """One hash of a consumer's stats (Pulsar's ``DrainingHash``)."""

    @property
    def hash(self) -> int:
        """The sticky key hash."""

    @property
    def unack_msgs(self) -> int:
        """The consumer's pending messages of the hash (its entry's ``ref_count``)."""

    @property
    def blocked_attempts(self) -> int:
        """Dispatches of the hash to other consumers it blocked (its entry's
        ``blocked_count``)."""

    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...

@final
class ConsumerDrainingHashesStats:
    """A consumer's draining-hash stats, over the hashes it started draining since its stats
    began (reset by ``consumer_removed`` and ``clear``; as in Pulsar, hashes it still drained
    when ``consumer_removed`` was called stay out of stats made anew).
    ``draining_hashes_unacked_messages`` is the sum of those entries' ref counts;
    ``draining_hashes_cleared_total`` counts the consumer's entries that went away since."""

    @property
    def draining_hashes_count(self) -> int:
        """How many hashes ``draining_hashes`` lists."""

    @property
    def draining_hashes_cleared_total(self) -> int:
        """How many of the consumer's draining entries went away since its stats began."""

    @property
    def draining_hashes_unacked_messages(self) -> int:
        """The sum of the listed hashes' ``unack_msgs``."""

    @property
    def draining_hashes(self) -> list[DrainingHash]:
        """Per hash, ascending."""

@final
class DrainingHashesTracker:
    """PIP-379's draining hashes of one dispatcher, keyed by sticky key hash in
    ``[1, 0xFFFF]`` (0 means "not set"). Thread-safe. ``unblocking_handler(hash)`` is called
    after a change, with nothing locked (it may call back in): with the hash when an entry
    that blocked a dispatch drains outside a batch and not while closing, or once with -1
    when the outermost batch ends after such unblocking. Memory: about 3 KiB per 256-hash
    page in use; all hashes draining take about 0.75 MiB. A call that raises changes
    nothing; the handler runs after the change, so its own exceptions go to
    ``sys.unraisablehook`` and the call returns normally."""

    def __new__(
        cls, unblocking_handler: Callable[[int], object] | None = None, dispatcher_name: str = ""
    ) -> DrainingHashesTracker: ...
    @property
    def dispatcher_name(self) -> str:
        """The name given when built (empty by default)."""

    @property
    def unblocking_handler(self) -> Callable[[int], object] | None:
        """The handler given when built, or None."""

    def add_entry(self, consumer_id: int, sticky_key_hash: int) -> None:
        """One more pending message of the hash on ``consumer_id``'s entry (created at 1).
        ValueError for hash 0 or a hash another consumer is draining."""

    def add_entries(self, consumer_id: int, sticky_key_hashes: _IntArray) -> None:
        """``add_entry`` for every hash; on an error nothing is added."""

    def reduce_ref_count(
        self, consumer_id: int, sticky_key_hash: int, closing: bool = False
    ) -> None:
        """One pending message fewer; at zero the entry goes (and may unblock). Hash 0 and
        hashes not draining are ignored; a hash another consumer drains is a ValueError."""

    def reduce_ref_counts(
        self, consumer_id: int, sticky_key_hashes: _IntArray, closing: bool = False
    ) -> None:
        """``reduce_ref_count`` for every hash, as one batch; checked first, so an error
        changes nothing."""

    def should_block_sticky_key_hash(self, consumer_id: int, sticky_key_hash: int) -> bool:
        """False when the hash is not draining (or is 0). Draining on ``consumer_id`` itself:
        the entry goes, False. Draining elsewhere: ``blocked_count`` + 1, True."""

    def should_block_sticky_key_hashes(
        self, consumer_ids: int | _IntArray, sticky_key_hashes: _IntArray
    ) -> npt.NDArray[np.bool_]:
        """``should_block_sticky_key_hash`` of each hash in order, with one consumer id for
        all or one per hash. Releases the GIL."""

    def get_entry(self, sticky_key_hash: int) -> DrainingHashEntry | None:
        """The hash's entry; None for hash 0 and for hashes not draining."""

    def start_batch(self) -> None:
        """Opens a (nestable) batch: unblocking is reported once, as -1, at its end."""

    def end_batch(self) -> None:
        """Closes a batch; ValueError without a matching ``start_batch``."""

    def clear(self) -> None:
        """Drops all entries and stats; an open batch stays open."""

    def consumer_removed(self, consumer_id: int) -> None:
        """Forgets the consumer's stats; its entries stay, left out of any later stats."""

    def consumer_stats(self, consumer_id: int) -> ConsumerDrainingHashesStats:
        """The consumer's stats; zeros for a consumer without any."""

    def memory_bytes(self) -> int:
        """Bytes the tracker holds, heap and inline."""

    def __len__(self) -> int:
        """How many hashes are draining."""

@final
class PendingAcksMap:
    """One consumer's pending acks, ``(ledger_id, entry_id) -> (batch_size,
    sticky_key_hash)`` in key order (ids are signed 64-bit ints, batch sizes in
    ``[0, 2**31 - 1]``, hashes in ``[0, 0xFFFF]``). ``batch_size`` is the remaining unacked
    count, as in Pulsar: the batch size when added, lowered by partial batch acks
    (``update_remaining_unacked``). With a ``tracker`` it acts as PIP-379's
    dispatcher wires it: an add is refused while another consumer drains the hash (and hash
    0 is a ValueError), and each removal takes one reference off the hash in the tracker,
    several removals as one batch, passing ``closing`` once the map is closed. Callbacks
    run after the change with nothing locked; the tracker's unblocking handler runs last.
    A call that raises changes nothing here or in the tracker, but for a processor's or
    callback's exception, raised after the change it was told of; the unblocking handler's
    go to ``sys.unraisablehook``."""

    PENDING_ACK_NOT_FOUND: Final[int]
    """-1: what ``get_remaining_unacked`` and ``remove_and_get_remaining_unacked`` return for
    an ack not pending (Pulsar's ``PENDING_ACK_NOT_FOUND``)."""
    def __new__(
        cls, consumer_id: int, tracker: DrainingHashesTracker | None = None
    ) -> PendingAcksMap: ...
    @property
    def consumer_id(self) -> int:
        """The consumer whose pending acks the map holds."""

    @property
    def tracker(self) -> DrainingHashesTracker | None:
        """The draining-hashes tracker the map is wired to, or None."""

    @property
    def closed(self) -> bool:
        """Whether the map is closed, by ``for_each_and_close`` or by its dispatcher when the
        consumer left: adds are refused."""

    def add_pending_ack_if_allowed(
        self, ledger_id: int, entry_id: int, batch_size: int, sticky_key_hash: int
    ) -> bool:
        """Adds (or overwrites) the ack; False when the map is closed (checked first, so
        even for hash 0) or the hash drains on another consumer."""

    def add_pending_acks_if_allowed(
        self,
        ledger_ids: _IntArray,
        entry_ids: _IntArray,
        batch_sizes: _IntArray,
        sticky_key_hashes: _IntArray,
    ) -> npt.NDArray[np.bool_]:
        """``add_pending_ack_if_allowed`` for each i, in order; which were added."""

    def remove(
        self,
        ledger_id: int,
        entry_id: int,
        batch_size: int | None = None,
        sticky_key_hash: int | None = None,
    ) -> bool:
        """Removes the ack; given batch size and hash (both), only on an exact match."""

    def remove_and_get(self, ledger_id: int, entry_id: int) -> tuple[int, int] | None:
        """Removes the ack and returns its ``(batch_size, sticky_key_hash)``; None when not
        pending."""

    def remove_and_get_remaining_unacked(self, ledger_id: int, entry_id: int) -> int:
        """Removes the ack and returns its remaining unacked count, or
        ``PENDING_ACK_NOT_FOUND`` (-1)."""

    def get_remaining_unacked(self, ledger_id: int, entry_id: int) -> int:
        """The ack's remaining unacked count, or ``PENDING_ACK_NOT_FOUND`` (-1)."""

    def update_remaining_unacked(self, ledger_id: int, entry_id: int, acked_delta: int) -> bool:
        """``acked_delta`` (>= 0, else ValueError) more batch indexes of the ack were acked:
        its remaining count goes down by that much. False, changing nothing, when the ack
        is not pending or the count would go below zero."""

    def update_remaining_unacked_many(
        self, ledger_ids: _IntArray, entry_ids: _IntArray, acked_deltas: _IntArray
    ) -> npt.NDArray[np.bool_]:
        """``update_remaining_unacked`` for each i, in order; which were updated. Every
        delta is checked first, so an error changes nothing. Releases the GIL."""

    def remove_many(self, ledger_ids: _IntArray, entry_ids: _IntArray) -> npt.NDArray[np.bool_]:
        """Removes each ``(ledger_ids[i], entry_ids[i])``; which were pending."""

    def remove_all_up_to(
        self,
        ledger_id: int,
        entry_id: int,
        callback: Callable[[int, int, int, int], object] | None = None,
    ) -> int:
        """Removes every ack up to and including ``(ledger_id, entry_id)``, then calls
        ``callback(ledger_id, entry_id, batch_size, sticky_key_hash)`` for each; returns
        how many."""

    def for_each(self, processor: Callable[[int, int, int, int], object]) -> None:
        """Calls ``processor(ledger_id, entry_id, batch_size, sticky_key_hash)`` on every ack of
        a snapshot, in order."""

    def for_each_and_close(self, processor: Callable[[int, int, int, int], object]) -> None:
        """Closes the map (later adds are refused), removes every ack, then calls
        ``processor`` for each."""

    def for_each_and_clear(self, processor: Callable[[int, int, int, int], object]) -> None:
        """Removes every ack, then calls ``processor`` for each; adds stay allowed."""

    def contains(self, ledger_id: int, entry_id: int) -> bool:
        """Whether the ack is pending."""

    def get(self, ledger_id: int, entry_id: int) -> tuple[int, int] | None:
        """``(batch_size, sticky_key_hash)`` of the ack; None when not pending."""

    def size(self) -> int:
        """How many acks are pending (as ``len``)."""

    def __len__(self) -> int: ...
    def to_list(self) -> list[_Ack]:
        """Every ack as ``(ledger_id, entry_id, batch_size, sticky_key_hash)``, in order."""

    def register_draining_hashes(self, ranges: Iterable[HashRange]) -> int:
        """Registers in the tracker, as draining for this consumer, the hash of every ack in
        ``ranges`` (ranges the consumer lost); hash 0 is skipped. Returns how many acks
        matched. ValueError without a tracker or if another consumer drains one of them."""

# --- dispatcher state: redelivery queue, permits, look-ahead (Key_Shared ordering) -------

_Decision = tuple[
    Literal[
        "deliver", "blocked_in_read", "no_consumer", "no_permits", "awaiting_redelivery", "draining"
    ],
    int | None,
    int | None,
]

@final
class MessageRedeliveryController:
    """Pulsar's redelivery queue: positions ``(ledger_id, entry_id)`` (each in
    ``[0, 2**63 - 1]``) awaiting redelivery, in position order, each with its sticky key hash
    when known, counted per hash. Unless out-of-order delivery is allowed, a hash with queued
    positions holds back normal reads of that hash. Thread-safe; a call that raises changes
    nothing."""

    def __new__(cls, allow_out_of_order_delivery: bool = False) -> MessageRedeliveryController: ...
    @property
    def allow_out_of_order_delivery(self) -> bool:
        """Whether queued hashes let normal reads of the same hashes through."""

    def add(self, ledger_id: int, entry_id: int, sticky_key_hash: int | None = None) -> None:
        """Queues the position; None means the hash is not known. Hash 0 is a ValueError
        when ordering is enforced. Re-adding a position with another hash moves it."""

    def remove(self, ledger_id: int, entry_id: int) -> bool:
        """Takes the position off the queue; False when it was not queued."""

    def remove_all_up_to(self, ledger_id: int, entry_id: int) -> int:
        """Removes every position at or below the mark; returns how many."""

    def get_hash(self, ledger_id: int, entry_id: int) -> int | None:
        """The hash the queued position was added with; None when it is not queued or its hash
        is not known."""

    def contains_sticky_key_hash(self, sticky_key_hash: int) -> bool:
        """Whether a normal read of the hash must wait for queued entries of the same hash:
        always False when out-of-order delivery is allowed, and for hash 0."""

    def contains_sticky_key_hashes(self, sticky_key_hashes: Iterable[int]) -> bool:
        """``contains_sticky_key_hash`` of any of the hashes."""

    def get_first_position_in_replay(self) -> tuple[int, int] | None:
        """The first queued position; None when the queue is empty."""

    def get_messages_to_replay_now(
        self, max_messages: int, filter: Callable[[int, int], object] | None = None
    ) -> list[tuple[int, int]]:
        """Queued positions in order that ``filter(ledger_id, entry_id)`` admits, at most
        ``max_messages``; the filter runs with nothing locked."""

    def is_empty(self) -> bool:
        """Whether no position is queued."""

    def size(self) -> int:
        """How many positions are queued (as ``len``)."""

    def __len__(self) -> int: ...
    def clear(self) -> None:
        """Empties the queue."""

    def to_list(self) -> list[tuple[int, int, int | None]]:
        """``(ledger_id, entry_id, sticky_key_hash or None)`` in position order."""

    def sticky_key_hashes(self) -> list[int]:
        """The distinct known hashes of the queued positions, ascending."""

    def filter_read(
        self,
        ledger_ids: Sequence[int],
        entry_ids: Sequence[int],
        sticky_key_hashes: Sequence[int],
        consumers: Sequence[int | None],
        permits: dict[int, int],
        replay: bool = False,
        tracker: DrainingHashesTracker | None = None,
    ) -> list[_Decision]:
        """Pulsar's per-read filter: each entry's ``(kind, consumer_id, draining_consumer_id)``
        in order. ``consumers[i]`` is the consumer selected for entry i's hash, ``permits``
        each consumer's available permits for the read (absent = none), spent one per
        entry. A held hash holds its later entries in the read; held entries are queued,
        delivered entries of a replay read dequeued. Hash 0 is a ValueError. Releases the
        GIL; locks this queue, then the tracker."""

    def replay_positions(
        self,
        max_messages: int,
        consumers: dict[int, int | None],
        permits: dict[int, int],
        tracker: DrainingHashesTracker | None = None,
    ) -> list[tuple[int, int]]:
        """Pulsar's replay filter: queued positions a replay read takes now, in order, at
        most ``max_messages``; ``consumers`` maps each queued hash to its consumer. Releases
        the GIL."""

def get_available_permits(
    available_permits: int,
    max_unacked_messages: int | None = None,
    unacked_messages: int | None = None,
    avg_messages_per_entry: int | None = None,
    active: bool = True,
) -> int:
    """Pulsar's dispatcher ``getAvailablePermits``: entries the consumer may get now, its
    flow permits (negative counts as 0) capped, when ``max_unacked_messages`` > 0, by the
    room under that limit divided by the average messages per entry (rounded up; below 1
    counts as 1); 0 when not active. None takes 0, 0 and 1."""

def get_effective_look_ahead_limit(
    consumer_count: int,
    per_consumer: int | None = None,
    per_subscription: int | None = None,
    max_unacked_messages_per_consumer: int | None = None,
    max_unacked_messages_per_subscription: int | None = None,
) -> int:
    """Pulsar's ``getEffectiveLookAheadLimit``: the redelivery-queue length at which normal
    reads stop. None takes Pulsar's defaults (2000, 20000, 50000, 200000); 0 or less
    disables a setting; at most 2**31 - 1."""

# --- dispatcher state: consumer selection rings (SPEC 7) -------------------------------

@final
class ImpactedConsumersResult:
    """The consumers a change of hash-range assignments impacted (Pulsar's
    ``ImpactedConsumersResult``): per consumer id, the ranges it lost and the ranges it
    gained, each list sorted with adjacent ranges merged. Immutable; equal when both maps
    are."""

    def __new__(
        cls,
        removed_hash_ranges: Mapping[int, Iterable[HashRange]] | None = None,
        added_hash_ranges: Mapping[int, Iterable[HashRange]] | None = None,
    ) -> ImpactedConsumersResult: ...
    @property
    def removed_hash_ranges(self) -> dict[int, list[HashRange]]:
        """Per consumer id, the ranges it lost: sorted, adjacent ranges merged."""

    @property
    def added_hash_ranges(self) -> dict[int, list[HashRange]]:
        """Per consumer id, the ranges it gained: sorted, adjacent ranges merged."""

    def is_empty(self) -> bool:
        """No consumer lost a range (gains alone leave it empty, as in Pulsar)."""

    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...

@final
class ConsumerHashAssignmentsSnapshot:
    """The hash ranges assigned to each consumer at one point in time (Pulsar's
    ``ConsumerHashAssignmentsSnapshot``): ``(range, consumer_id)`` pairs sorted by range and
    not overlapping (else ValueError); gaps are unassigned hashes."""

    def __new__(
        cls, hash_range_assignments: Iterable[tuple[HashRange, int]]
    ) -> ConsumerHashAssignmentsSnapshot: ...
    @staticmethod
    def empty() -> ConsumerHashAssignmentsSnapshot:
        """A snapshot assigning no hash."""

    @property
    def hash_range_assignments(self) -> list[tuple[HashRange, int]]:
        """The ``(range, consumer_id)`` pairs, sorted by range."""

    def get_ranges_by_consumer(self) -> dict[int, list[HashRange]]:
        """Each consumer's ranges, sorted, adjacent ranges merged; consumers by id."""

    def resolve_impacted_consumers(
        self, assignments_after: ConsumerHashAssignmentsSnapshot
    ) -> ImpactedConsumersResult:
        """Per consumer, the hashes it held here and not in ``assignments_after`` (removed)
        and the reverse (added), compared hash by hash."""

    def __len__(self) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...

@final
class ConsistentHashingStickyKeyConsumerSelector:
    """Pulsar's consistent-hashing selector (master): each consumer has
    ``number_of_points`` (1 to 65536) points on the key hash range ``[1, range_max_value]``
    at ``make_sticky_key_hash(f"{name}\\0{name_index}\\0{i}")``, ``name_index`` being the
    lowest slot free among namesakes. On a collision the consumer already on the point keeps
    it and the newcomer queues behind it, taking over when the owner leaves. A hash goes to
    the first point at or above it, wrapping. Adding or removing a consumer returns the
    impacted consumers (ranges lost and gained), or None when built with
    ``add_or_remove_returns_impacted_consumers_result=False``. Thread-safe."""

    def __new__(
        cls,
        number_of_points: int = 100,
        add_or_remove_returns_impacted_consumers_result: bool = True,
        range_max_value: int = 65535,
    ) -> ConsistentHashingStickyKeyConsumerSelector: ...
    @property
    def number_of_points(self) -> int:
        """How many ring points each consumer has."""

    @property
    def add_or_remove_returns_impacted_consumers_result(self) -> bool:
        """Whether ``add_consumer`` and ``remove_consumer`` return the impacted consumers
        (else None)."""

    @property
    def key_hash_range(self) -> HashRange:
        """``[1, range_max_value]``: the range keys and ring points hash to."""

    @property
    def consumer_ids(self) -> list[int]:
        """The consumers in the ring, ascending."""

    def make_sticky_key_hash(self, key: str | bytes) -> int:
        """Pulsar's ``makeStickyKeyHash(key)`` over ``key_hash_range``."""

    def add_consumer(self, consumer_id: int, name: str | bytes) -> ImpactedConsumersResult | None:
        """ValueError for an id already added."""

    def remove_consumer(self, consumer_id: int) -> ImpactedConsumersResult | None:
        """An unknown id changes nothing (an empty result)."""

    def select(self, sticky_key_hash: int) -> int | None:
        """The consumer serving the hash; None when the ring is empty. A hash above 0xFFFF
        is a ValueError (Pulsar's selector wraps it to the first point: kept on purpose)."""

    def select_many(self, sticky_key_hashes: _IntArray) -> npt.NDArray[np.uint64]:
        """``select`` of every hash; ValueError when the ring is empty. Releases the GIL."""

    def get_consumer_key_hash_ranges(self) -> dict[int, list[HashRange]]:
        """Each consumer's ranges, sorted, adjacent ones merged; together they tile
        ``key_hash_range``."""

    def get_consumer_hash_assignments_snapshot(self) -> ConsumerHashAssignmentsSnapshot:
        """The ring's assignments now, to compare with a later snapshot
        (``resolve_impacted_consumers``)."""

    def __len__(self) -> int: ...
    def __contains__(self, consumer_id: int, /) -> bool: ...

def impacted_consumers(
    before: Mapping[int, Iterable[HashRange]], after: Mapping[int, Iterable[HashRange]]
) -> ImpactedConsumersResult:
    """The impacted consumers between two ``{consumer_id: ranges}`` snapshots (such as a
    selector's ``get_consumer_key_hash_ranges()`` before and after a change); a snapshot
    whose ranges overlap is a ValueError."""

def register_draining_hashes(
    impacted: ImpactedConsumersResult,
    pending_acks: Iterable[PendingAcksMap],
    skip_consumer: int | None = None,
) -> tuple[int, int]:
    """PIP-379's hand-off after a change of range owners (Pulsar's
    ``registerDrainingHashes``): each consumer's pending acks in ranges it lost are
    registered as draining in the maps' tracker (all maps wired to the same one), and each
    consumer releases its own draining entries in ranges it got back. ``skip_consumer`` (the
    consumer just added or removed) is left out. Returns (acks registered, references
    released); on an error nothing changes."""

def validate_bucket_boundaries(
    ranges: Iterable[HashRange | tuple[int, int]],
) -> list[HashRange]:
    """Pulsar's ``validateBucketBoundaries``: bucket ranges that are ascending, contiguous,
    start at 0, tile ``[0, 0xFFFF]`` and leave bucket 0 at least ``[0, 1]``; else
    ValueError."""

@final
class EntryBucketConsumerSelector:
    """PIP-486's entry-bucket selector (Pulsar's ``EntryBucketConsumerSelector``): a
    segment's fixed buckets (split points as SPEC 2, first split at least 2) spread over
    the consumers sorted by (name, id), consumer j of k owning buckets
    ``j*N//k .. (j+1)*N//k - 1``. Hashes are 16-bit (key hash range ``[0, 65535]``); the
    hashes it makes are canonical bucket hashes (bucket start, 1 for bucket 0).
    Thread-safe."""

    def __new__(cls, bucket_splits: _Splits | None = None) -> EntryBucketConsumerSelector: ...
    @staticmethod
    def from_bucket_ranges(
        ranges: Iterable[HashRange | tuple[int, int]],
    ) -> EntryBucketConsumerSelector:
        """From declared bucket ranges, checked as ``validate_bucket_boundaries`` does."""

    @property
    def bucket_ranges(self) -> list[HashRange]:
        """The buckets, as ranges tiling ``[0, 0xFFFF]``."""

    @property
    def bucket_splits(self) -> list[int]:
        """The split points: where each bucket but the first starts."""

    @property
    def bucket_count(self) -> int:
        """How many buckets the segment has."""

    @property
    def key_hash_range(self) -> HashRange:
        """``[0, 65535]``."""

    @property
    def consumer_ids(self) -> list[int]:
        """The connected consumers' ids, in (name, id) order."""

    def bucket_index_of_hash(self, hash: int) -> int:
        """The index of the bucket holding ``hash`` (any 16-bit hash)."""

    def canonical_hash_of_bucket(self, bucket: int) -> int:
        """The bucket's canonical hash: its start, 1 for bucket 0; ValueError for a bucket
        index out of range."""

    def canonical_hash_of(self, hash: int) -> int:
        """Any 16-bit hash as its bucket's canonical hash."""

    def make_sticky_key_hash(self, key: str | bytes) -> int:
        """The key's hashB (0 becoming 1) as its bucket's canonical hash."""

    def add_consumer(self, consumer_id: int, name: str | None = None) -> ImpactedConsumersResult:
        """Adds the consumer (ValueError for an id already connected); the impacted consumers."""

    def remove_consumer(self, consumer_id: int) -> ImpactedConsumersResult:
        """Removes the consumer; the impacted consumers. An id not connected changes nothing (an
        empty result)."""

    def select(self, hash: int) -> int | None:
        """The owner of the bucket holding ``hash``; None with no consumer."""

    def select_many(self, hashes: _IntArray) -> npt.NDArray[np.uint64]:
        """``select`` of every hash; ValueError when no consumer is connected."""

    def get_consumer_key_hash_ranges(self) -> dict[int, list[HashRange]]:
        """Each owning consumer's ranges, adjacent buckets merged."""

    def bucket_owners(self) -> list[int]:
        """The owner of each bucket; empty while no consumer is connected."""

    def __len__(self) -> int: ...
    def __contains__(self, consumer_id: int, /) -> bool: ...

@final
class EntryBucketDispatcher:
    """The pure part of Pulsar's ``PersistentEntryBucketDispatcherMultipleConsumers``
    (PIP-486): an entry goes whole to the owner of its bucket (an ``EntryBucketConsumerSelector``),
    a stamped entry by its ``entry_hash_min``, an unstamped one by its key. Each consumer's
    pending acks are a ``PendingAcksMap`` wired to ``tracker`` under canonical bucket hashes,
    so a bucket that moves is withheld from its new owner until the previous owner's acks
    drain; consumer changes hand off through ``register_draining_hashes``' rule. It keeps
    ``StickyKeyDispatcher``'s contract: the same ``add_consumer``, ``remove_consumer``,
    ``pending_acks``, ``select`` and ``ack``, and a consumer not connected is a KeyError in
    each. Thread-safe: changes and dispatches are serialized; a call that raises changes
    nothing."""

    def __new__(
        cls,
        bucket_splits: _Splits | None = None,
        *,
        unblocking_handler: Callable[[int], object] | None = None,
        dispatcher_name: str = "",
    ) -> EntryBucketDispatcher: ...
    @staticmethod
    def from_bucket_ranges(
        ranges: Iterable[HashRange | tuple[int, int]],
        *,
        unblocking_handler: Callable[[int], object] | None = None,
        dispatcher_name: str = "",
    ) -> EntryBucketDispatcher:
        """Declared bucket ranges, checked as ``validate_bucket_boundaries`` does."""

    @property
    def selector(self) -> EntryBucketConsumerSelector:
        """Read it; change consumers through the dispatcher only (its ``add_consumer`` and
        ``remove_consumer`` are a TypeError)."""

    @property
    def tracker(self) -> DrainingHashesTracker:
        """The dispatcher's draining-hashes tracker (shared, not a copy)."""
    def add_consumer(self, consumer_id: int, name: str | bytes = "") -> PendingAcksMap:
        """Connects a consumer and returns its pending-acks map. ValueError for an id
        already connected or a name that is not UTF-8. Buckets it takes from others drain
        first."""

    def remove_consumer(self, consumer_id: int) -> list[tuple[int, int, int, int]]:
        """Disconnects a consumer (KeyError, changing nothing, if it is not connected). Its
        pending acks are closed and returned, in order, as ``(ledger_id, entry_id,
        batch_size, sticky_key_hash)``, for the caller to redeliver."""

    def pending_acks(self, consumer_id: int) -> PendingAcksMap:
        """The consumer's pending-acks map (KeyError if it is not connected)."""

    def select(self, sticky_key_hash: int) -> int | None:
        """The consumer that owns the hash's bucket (``[0, 65535]``); None with no
        consumer."""

    def ack(self, consumer_id: int, ledger_id: int, entry_id: int) -> bool:
        """The consumer acked an entry (KeyError if it is not connected); False if the
        entry was not pending there."""

    def sticky_key_hash(
        self, entry_hash_min: int | None = None, key: str | bytes | None = None
    ) -> int:
        """The canonical hash of the entry's bucket (exactly one argument given)."""

    def dispatch(
        self,
        ledger_id: int,
        entry_id: int,
        *,
        entry_hash_min: int | None = None,
        key: str | bytes | None = None,
        batch_size: int = 1,
    ) -> int | None:
        """The consumer the entry goes to; None when no consumer is connected, its bucket
        drains on another consumer (withheld), or the consumer's map refuses it. ValueError,
        changing nothing, for a position pending on that consumer under another bucket."""

    def dispatch_many(
        self,
        ledger_ids: _IntArray,
        entry_ids: _IntArray,
        entry_hash_mins: _IntArray,
        batch_sizes: _IntArray | None = None,
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
        """``dispatch`` of each stamped entry in order: the selected consumer of each
        (0 with no consumer) and whether it went. Every entry is checked first, a position
        twice in the batch included (ValueError naming ``entry_ids[i]``)."""

    def withheld_buckets(self) -> tuple[int, ...]:
        """Buckets whose owner waits for another consumer's acks, ascending."""

class HoldReason(enum.Enum):
    """Why an entry was not sent; the value is the reason in snake_case."""

    NO_CONSUMER = "no_consumer"
    """No consumer serves the hash. With none connected the entry is not queued: Pulsar
    rewinds the cursor instead."""
    BLOCKED_IN_READ = "blocked_in_read"
    """An earlier entry of the same hash was held in this read, so this one waits too."""
    NO_PERMITS = "no_permits"
    """The selected consumer has no permits (flow permits or unacked-messages room)."""
    AWAITING_REDELIVERY = "awaiting_redelivery"
    """A normal read of a hash with entries in the redelivery queue: they go first."""
    DRAINING = "draining"
    """The hash drains on another consumer (PIP-379) until its pending acks are acked."""
    LOOK_AHEAD_LIMIT = "look_ahead_limit"
    """The redelivery queue is at the effective look-ahead limit: Pulsar reads no further,
    so the entry is not taken (not queued); offer it again later."""
    PENDING_ACK_REFUSED = "pending_ack_refused"
    """The consumer's pending-acks map refused the entry (the consumer is closing)."""

@final
class DispatchResult:
    """What happened to one entry. ``consumer_id`` is the consumer it went to or, when held,
    the consumer the selector picked (None when there is none or the hash was already held
    in this read); ``draining_consumer_id`` is set for ``HoldReason.DRAINING``;
    ``queued_for_redelivery`` says the dispatcher's redelivery queue now holds the entry.
    Immutable, compared and hashed by value, picklable and copyable. Built by hand, its
    parts are checked to agree as a dispatcher makes them (ValueError): a delivered entry
    (``held`` None) names its consumer and is neither draining nor queued;
    ``draining_consumer_id`` is set for ``DRAINING`` alone; ``LOOK_AHEAD_LIMIT`` names no
    consumer and is not queued; ``PENDING_ACK_REFUSED`` names one and is queued."""

    def __new__(
        cls,
        ledger_id: int,
        entry_id: int,
        sticky_key_hash: int,
        consumer_id: int | None,
        held: HoldReason | None = None,
        draining_consumer_id: int | None = None,
        queued_for_redelivery: bool = False,
    ) -> DispatchResult: ...
    @property
    def ledger_id(self) -> int:
        """The entry's ledger id."""
    @property
    def entry_id(self) -> int:
        """The entry's id in its ledger."""
    @property
    def sticky_key_hash(self) -> int:
        """The entry's sticky key hash, in ``[1, 65535]``."""
    @property
    def consumer_id(self) -> int | None:
        """The consumer the entry went to or, when held, the one the selector picked (None when
        there is none or the hash was already held in this read)."""
    @property
    def held(self) -> HoldReason | None:
        """The `HoldReason` the entry was held for; None when it was sent."""
    @property
    def draining_consumer_id(self) -> int | None:
        """The consumer the hash drains on, for ``HoldReason.DRAINING``; else None."""
    @property
    def queued_for_redelivery(self) -> bool:
        """Whether the dispatcher's redelivery queue now holds the entry."""
    @property
    def delivered(self) -> bool:
        """Whether the entry was sent (to ``consumer_id``)."""

    def __reduce__(
        self,
    ) -> tuple[
        type[DispatchResult],
        tuple[int, int, int, int | None, HoldReason | None, int | None, bool],
    ]: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class StickyKeyDispatcher:
    """Pulsar's ``PersistentStickyKeyDispatcherMultipleConsumers`` (PIP-379): a
    consistent-hashing ``selector``, a draining-hashes ``tracker``, a ``redelivery`` queue,
    one pending-acks map per consumer wired to the tracker, each consumer's permits and the
    look-ahead limit. A read's entries are decided natively, without the GIL.

    A consumer change registers, for every other consumer that lost hash ranges, the
    pending acks in those ranges as draining; a draining hash then blocks dispatch to any
    other consumer until its pending acks are acked (or its consumer leaves). A consumer
    that gets ranges back releases its own draining hashes in them. A leaving consumer's
    pending acks wait in ``redelivery`` (which empties when no consumer is left, as Pulsar
    rewinds the cursor). Without ``flow_control`` a consumer may always take 2**31 - 1
    entries under its unacked limit. A consumer not connected is a KeyError in every call
    that names one (Pulsar logs such a removal as an error; a no-op would hide the
    caller's mistake). Thread-safe: changes and reads are serialized; a call that raises
    changes nothing."""

    def __new__(
        cls,
        number_of_points: int = 100,
        *,
        unblocking_handler: Callable[[int], object] | None = None,
        dispatcher_name: str = "",
        flow_control: bool = False,
        look_ahead_per_consumer: int | None = None,
        look_ahead_per_subscription: int | None = None,
        max_unacked_messages_per_consumer: int | None = None,
        max_unacked_messages_per_subscription: int | None = None,
    ) -> StickyKeyDispatcher:
        """Look-ahead settings left None take Pulsar's defaults (2000 per consumer, 20000
        per subscription, 50000 and 200000 unacked messages)."""

    @property
    def selector(self) -> ConsistentHashingStickyKeyConsumerSelector:
        """Read it; change consumers through the dispatcher only (its ``add_consumer`` and
        ``remove_consumer`` are a TypeError)."""

    @property
    def tracker(self) -> DrainingHashesTracker:
        """The dispatcher's draining-hashes tracker (shared, not a copy)."""
    @property
    def redelivery(self) -> MessageRedeliveryController:
        """The dispatcher's redelivery queue (shared, not a copy)."""
    @property
    def flow_control(self) -> bool:
        """Whether consumer permits gate dispatch (without it a consumer may always take
        2**31 - 1 more)."""
    def add_consumer(self, consumer_id: int, name: str | bytes = "") -> PendingAcksMap:
        """Connects a consumer (on the ring, with no permits) and returns its pending-acks
        map. ValueError for an id already connected. Hashes it takes from others drain
        first."""

    def remove_consumer(self, consumer_id: int) -> list[tuple[int, int, int, int]]:
        """Disconnects a consumer (KeyError, changing nothing, if it is not connected). Its
        pending acks are closed and returned, in order, as ``(ledger_id, entry_id,
        batch_size, sticky_key_hash)``; the dispatcher also queues them in ``redelivery``
        while other consumers remain."""

    def pending_acks(self, consumer_id: int) -> PendingAcksMap:
        """The consumer's pending-acks map (KeyError if it is not connected)."""

    def select(self, sticky_key_hash: int) -> int | None:
        """The consumer the ring gives the hash (``[0, 65535]``); None with no consumer."""

    def ack(self, consumer_id: int, ledger_id: int, entry_id: int) -> bool:
        """The consumer acked an entry (KeyError if it is not connected); False if the
        entry was not pending there."""
    def dispatch(
        self, ledger_id: int, entry_id: int, sticky_key_hash: int, batch_size: int = 1
    ) -> DispatchResult:
        """A normal read of one entry (``dispatch_read`` of one)."""

    def dispatch_read(
        self, entries: Sequence[tuple[int, int, int, int]], *, replay: bool = False
    ) -> list[DispatchResult]:
        """Pulsar's ``trySendMessagesToConsumers`` for one read of ``(ledger_id, entry_id,
        sticky_key_hash, batch_size)`` entries (ids in ``[0, 2**63 - 1]``, hash in
        ``[1, 65535]``, batch size in messages), in order: one result per entry. A held
        entry is queued for redelivery (but with no consumer connected, or past the
        look-ahead limit of a normal read). A replay read (of positions from
        ``get_messages_to_replay_now``) skips the redelivery-queue check and takes
        delivered entries off the queue. Every entry is checked before anything changes: a
        position twice in the read, or pending on the consumer it goes to under another
        hash, is a ValueError naming ``entries[i]``."""

    def get_messages_to_replay_now(self, max_messages_to_read: int = 100) -> list[tuple[int, int]]:
        """Pulsar's replay filter: the queued positions a replay read takes now, in order,
        at most ``max_messages_to_read``. A hash whose consumer has no permits or drains
        elsewhere is skipped with all its later positions."""

    def flow(self, consumer_id: int, permits: int) -> None:
        """The consumer asks for ``permits`` more messages (Pulsar's ``consumerFlow``)."""

    def set_consumer_limits(
        self,
        consumer_id: int,
        *,
        max_unacked_messages: int | None = None,
        avg_messages_per_entry: int | None = None,
    ) -> None:
        """The consumer's unacked-messages limit (0 = none) and the average messages per
        entry (at least 1) its room is divided by; None leaves a setting as it is."""

    def get_available_permits(self, consumer_id: int) -> int:
        """How many entries the dispatcher may send the consumer now."""

    def get_effective_look_ahead_limit(self) -> int:
        """The redelivery-queue length at which normal reads stop, for the consumers now."""

    def is_normal_read_allowed(self) -> bool:
        """The redelivery queue is below the look-ahead limit and some consumer has
        permits."""

@final
class KeySharedConsumerState:
    """Danube's Key-Shared consumer state: 100 virtual nodes per consumer at
    ``h(f"{consumer_id}-{v}")`` (FNV-1a 64, xor-folded to 32 bits, murmur3 fmix32). A key
    goes to the only eligible consumer, else to the eligible owner of the first node at or
    above ``h(key)``, wrapping, ties to the node added first. Filters are byte-wise globs
    (``*`` any run, ``?`` one byte, no escapes); no filters accepts every key. Thread-safe."""

    def __new__(cls) -> KeySharedConsumerState: ...
    @property
    def consumer_ids(self) -> list[int]:
        """The consumers in the order added."""

    def add_consumer(
        self, consumer_id: int, key_filters: Iterable[str | bytes] | None = None
    ) -> None:
        """ValueError for an id already added or an empty filter; TypeError for a lone
        str or bytes given as ``key_filters``."""

    def remove_consumer(self, consumer_id: int) -> None:
        """KeyError for an unknown id."""

    def key_filters(self, consumer_id: int) -> list[bytes]:
        """The consumer's key filters as bytes, in the order given; KeyError for an id not in
        the state."""

    def disconnect_all(self) -> None:
        """Removes every consumer."""

    def is_empty(self) -> bool:
        """Whether no consumer is in the state."""

    def select_consumer(self, key: str | bytes) -> int | None:
        """The consumer for the key; None when no consumer accepts it."""

    def select_consumers(
        self, keys: _KeyBatch | Iterable[str | bytes]
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
        """Consumer ids (0 where none) and whether one was selected, per key: any batch
        ``key_hashes`` takes (list, NumPy, Arrow) or other iterable of str/bytes."""

    def __len__(self) -> int: ...
    def __contains__(self, consumer_id: int, /) -> bool: ...

# --- dispatcher state: safe cursor and in-flight window (SPEC 8) -----------------------

@final
class SafeCursor:
    """The last offset such that it and every offset from ``first_offset`` on are acked or
    skipped; None until ``first_offset`` is. Offsets are ints in ``[0, 2**63 - 1]``. The
    position never moves back; duplicate and already-passed acks change nothing. Memory
    follows the gap between the first offset not done and the furthest ack. Thread-safe."""

    def __new__(cls, first_offset: int) -> SafeCursor: ...
    @property
    def first_offset(self) -> int:
        """The offset the cursor starts at."""

    @property
    def position(self) -> int | None:
        """The safe position; None until ``first_offset`` is acked or skipped."""

    @property
    def pending(self) -> int:
        """Acks held beyond the first gap."""

    def ack(self, offset: int) -> int | None:
        """Marks the offset acked; the new position when it moved, else None."""

    def skip(self, offset: int) -> int | None:
        """Like ``ack``: a skipped offset counts as done."""

    def ack_many(self, offsets: _IntArray) -> int | None:
        """``ack`` of every offset (checked first); the new position if it moved. Releases
        the GIL."""

    def is_done(self, offset: int) -> bool:
        """Acked, skipped, or before the first offset."""

@final
class BucketCheckpoints:
    """One ``SafeCursor`` per ``(segment_id, bucket)``, over that bucket's own offsets
    (PIP-486 checkpoints per bucket). Unknown buckets are KeyErrors."""

    def __new__(cls) -> BucketCheckpoints: ...
    def open(self, segment_id: int, bucket: int, first_offset: int) -> None:
        """Starts tracking the bucket from ``first_offset``; ValueError if it is open already."""

    def close(self, segment_id: int, bucket: int) -> int | None:
        """Stops tracking the bucket; its final position."""

    def ack(self, segment_id: int, bucket: int, offset: int) -> int | None:
        """``SafeCursor.ack`` on the bucket's cursor."""

    def skip(self, segment_id: int, bucket: int, offset: int) -> int | None:
        """``SafeCursor.skip`` on the bucket's cursor."""

    def ack_many(
        self, segment_ids: _IntArray, buckets: _IntArray, offsets: _IntArray
    ) -> dict[tuple[int, int], int]:
        """Acks ``(segment_ids[i], buckets[i], offsets[i])`` for every i (all checked first);
        ``{(segment_id, bucket): new position}`` for the buckets whose position moved. Releases
        the GIL."""

    def position(self, segment_id: int, bucket: int) -> int | None:
        """The bucket's position (None until its first offset is done)."""

    def positions(self) -> dict[tuple[int, int], int | None]:
        """Every open bucket's position, keyed by ``(segment_id, bucket)``."""

    def __len__(self) -> int: ...
    def __contains__(self, key: object, /) -> bool: ...

_PoisonPolicy = Literal["drop", "dead_letter", "block"]

@final
class SubscriptionFailurePolicy:
    """Danube's failure policy; times in milliseconds. A message goes out of retries after
    ``max_redelivery_count`` redeliveries (``attempt > max_redelivery_count`` on a nack or
    ack timeout). The redelivery delay after attempt n is ``base`` (fixed) or
    ``base * 2**(n-1)`` (exponential), at least a requested delay, at most ``max``.
    ValueError for ``ack_timeout_ms`` of 0, ``base > max``, an unknown strategy or policy,
    or ``"dead_letter"`` without a topic."""

    def __new__(
        cls,
        max_redelivery_count: int = 5,
        ack_timeout_ms: int = 30_000,
        base_redelivery_delay_ms: int = 1_000,
        max_redelivery_delay_ms: int = 60_000,
        backoff_strategy: Literal["fixed", "exponential"] = "exponential",
        poison_policy: _PoisonPolicy = "block",
        dead_letter_topic: str | None = None,
    ) -> SubscriptionFailurePolicy: ...
    @property
    def max_redelivery_count(self) -> int:
        """Redeliveries a message may have before it is out of retries."""

    @property
    def ack_timeout_ms(self) -> int:
        """How long a delivery waits for its ack before it counts as failed."""

    @property
    def base_redelivery_delay_ms(self) -> int:
        """The redelivery delay after the first attempt."""

    @property
    def max_redelivery_delay_ms(self) -> int:
        """The longest redelivery delay."""

    @property
    def backoff_strategy(self) -> str:
        """``"fixed"`` or ``"exponential"``."""

    @property
    def poison_policy(self) -> str:
        """What happens to a message out of retries: ``"drop"``, ``"dead_letter"`` or
        ``"block"`` (it stays in flight, holding its key)."""

    @property
    def dead_letter_topic(self) -> str | None:
        """The topic ``"dead_letter"`` publishes to, as given."""

    def redelivery_delay_ms(self, attempt: int, requested_ms: int | None = None) -> int:
        """The wait before redelivery after ``attempt`` deliveries: the backoff's delay or
        ``requested_ms``, whichever is longer, capped at ``max_redelivery_delay_ms``."""

    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...

@final
class InFlightEntry:
    """A snapshot of an in-flight message. ``status`` is ``"awaiting_ack"``,
    ``"waiting_to_retry"`` or ``"retry_exhausted"``; times in milliseconds."""

    @property
    def offset(self) -> int:
        """The message's offset."""

    @property
    def key(self) -> str | bytes:
        """Its routing key, as given."""

    @property
    def consumer_id(self) -> int:
        """The consumer it was sent to."""

    @property
    def delivery_attempt(self) -> int:
        """How many times it was sent (1 for a first delivery)."""

    @property
    def status(self) -> str:
        """``"awaiting_ack"``, ``"waiting_to_retry"`` or ``"retry_exhausted"``."""

    @property
    def first_sent_at_ms(self) -> int:
        """When it was first sent."""

    @property
    def last_sent_at_ms(self) -> int:
        """When it was last sent."""

    @property
    def ack_deadline_at_ms(self) -> int:
        """When its ack times out (last sent plus the ack timeout)."""

    @property
    def next_redelivery_at_ms(self) -> int:
        """When its retry is due while ``"waiting_to_retry"``; otherwise when it was last
        sent."""

    @property
    def last_failure_reason(self) -> str | None:
        """The reason its last failure gave (``"ack timeout"`` for a timeout); None before any
        failure, or when its nack gave none."""

@final
class WindowAction:
    """What to do: ``kind`` is ``"deliver"``/``"redeliver"`` (send ``offset`` to
    ``consumer_id``), ``"skip"`` (no consumer takes the key; counted done), ``"block"``
    (queued behind its key or a full consumer), ``"drop"`` or ``"dead_letter"`` (out of
    retries; counted done; publish to ``dead_letter_topic`` for the latter) or ``"evict"``
    (consumer ``consumer_id`` evicted, its messages counted done)."""

    @property
    def kind(self) -> str:
        """What to do: one of the kinds above."""

    @property
    def offset(self) -> int | None:
        """The message's offset; None for ``"evict"``."""

    @property
    def key(self) -> str | bytes | None:
        """The message's key, as given; None for ``"evict"``."""

    @property
    def consumer_id(self) -> int | None:
        """The consumer to send to, that was picked (``"block"``), that held the message
        (``"drop"``, ``"dead_letter"``) or that was evicted; None for ``"skip"``."""

    @property
    def attempt(self) -> int:
        """The delivery attempt (1 for a first delivery); 0 for skip, block and evict."""

    @property
    def dead_letter_topic(self) -> str | None:
        """Where to publish a ``"dead_letter"`` message; None for other kinds."""

@final
class InFlightWindow:
    """Danube's in-flight window, its defects fixed. Invariants: at most one message per
    routing key in flight; later messages of a busy key wait in offset order and are
    released in that order (one taken by ``take_unblocked`` and put back returns to its
    place); the safe cursor never passes an offset not acked or skipped and never moves
    back; no consumer ever has more than ``max_per_consumer`` in flight; an ack for an
    offset not awaiting one changes nothing. Keys are str or bytes (compared by bytes, given
    back as they came); offsets ints in ``[0, 2**63 - 1]``; times ``now_ms`` in
    milliseconds. The first offset seen starts the cursor. Thread-safe; a call that raises
    changes nothing."""

    def __new__(
        cls,
        max_window_size: int = 10,
        max_per_consumer: int = 1000,
        failure_policy: SubscriptionFailurePolicy | None = None,
        inactive_eviction_ticks: int = 6,
    ) -> InFlightWindow: ...
    @property
    def max_window_size(self) -> int:
        """The most messages in flight and queued together."""

    @property
    def max_per_consumer(self) -> int:
        """The most messages one consumer may have in flight."""

    @property
    def inactive_eviction_ticks(self) -> int:
        """How many heartbeats in a row a consumer may be reported inactive before it is
        evicted."""

    @property
    def failure_policy(self) -> SubscriptionFailurePolicy:
        """The policy given when built, else the default one."""

    @property
    def in_flight_count(self) -> int:
        """Messages in flight."""

    @property
    def blocked_count(self) -> int:
        """Queued messages, a taken one included."""

    def record_polled(self, offset: int) -> None:
        """Starts the cursor at ``offset`` if nothing was seen yet."""

    def mark_dispatched(
        self, offset: int, key: str | bytes, consumer_id: int, now_ms: int = 0
    ) -> None:
        """Records a send. ValueError unless the offset is new (or the taken one, with its
        key), the key has nothing in flight or queued before it, and the consumer is under
        its cap."""

    def push_blocked(self, offset: int, key: str | bytes) -> None:
        """Queues a new message behind its key, or puts a taken one back in its place."""

    def take_unblocked(self) -> tuple[int, str | bytes] | None:
        """The first queued ``(offset, key)`` whose key is free, or None. It holds its key until
        it is dispatched (``mark_dispatched``), skipped (``on_skipped``) or put back
        (``push_blocked``, which returns it to its place)."""

    def on_ack(self, offset: int) -> tuple[str | bytes | None, int | None]:
        """``(freed key, new cursor)``; ``(None, None)`` for an offset not awaiting an ack."""

    def on_skipped(self, offset: int) -> int | None:
        """Counts an offset done without delivery; the new cursor if it moved. ValueError
        for an offset in flight or queued."""

    def on_nack(
        self, offset: int, now_ms: int, delay_ms: int | None = None, reason: str | None = None
    ) -> str | None:
        """Schedules a retry (or exhausts the message); its new status, or None for an offset
        not in flight."""

    def remove_entry(self, offset: int) -> InFlightEntry | None:
        """Takes a message out of flight (its key frees) without counting it done."""

    def drain_blocked_for_key(self, key: str | bytes) -> tuple[list[int], int | None]:
        """Removes the key's queued messages, counted done; their offsets and the cursor."""

    def remove_consumer_entries(self, consumer_id: int) -> list[str | bytes]:
        """Evicts a consumer's messages, counted done; the keys freed."""

    def get_safe_cursor(self) -> int | None:
        """The safe cursor: the last offset such that it and every offset from the first one
        seen on are acked or skipped; None until then."""

    def has_capacity(self) -> bool:
        """In flight plus queued below ``max_window_size``."""

    def consumer_has_capacity(self, consumer_id: int) -> bool:
        """Whether the consumer has fewer than ``max_per_consumer`` messages in flight."""

    def consumer_in_flight(self, consumer_id: int) -> int:
        """How many messages the consumer has in flight."""

    def is_key_active(self, key: str | bytes) -> bool:
        """Whether a new message with this key must wait."""

    def get_entry(self, offset: int) -> InFlightEntry | None:
        """The in-flight message at ``offset``, or None."""

    def in_flight_entries(self) -> list[InFlightEntry]:
        """Every in-flight message, by offset."""

    def blocked(self) -> list[tuple[int, str | bytes]]:
        """Queued messages in release order (a taken one left out)."""

    def dispatch_polled(
        self, offset: int, key: str | bytes, state: KeySharedConsumerState, now_ms: int
    ) -> tuple[WindowAction, int | None]:
        """Dispatches a newly polled message: ``"skip"`` (no consumer), ``"block"`` (key busy
        or consumer full) or ``"deliver"``; with the new cursor."""

    def handle_heartbeat(
        self,
        now_ms: int,
        state: KeySharedConsumerState,
        inactive_consumers: Iterable[int] | None = None,
    ) -> tuple[list[WindowAction], int | None]:
        """Ack timeouts, poison (drop/dead-letter; its followers stay queued), due retries,
        evictions (consumers inactive for ``inactive_eviction_ticks`` heartbeats in a row,
        removed from ``state`` too), then queued messages whose keys are free; nothing when
        ``state`` is empty. The actions and the new cursor."""

# --- partitioners of other systems ------------------------------------------------------

def partition_key(
    key: str | bytes | int | None,
    num_partitions: int,
    partitioner: str,
    key_type: Literal["string", "binary", "int", "long"] | None = None,
) -> int | None:
    """The partition a system (named as ``keyshared.partitioners.Partitioner``'s values)
    sends one key to, or None when it picks no fixed partition; ``num_partitions`` in
    ``[1, 2**31 - 1]``."""

def partition_keys(
    keys: Any,
    num_partitions: int,
    partitioner: str,
    key_type: Literal["string", "binary", "int", "long"] | None = None,
) -> npt.NDArray[np.int64]:
    """``partition_key`` of every key (a sequence of str/bytes/None or of ints and None, an
    Arrow string/binary/integer array, or a NumPy integer array in any byte order; int8 to
    int32, uint8 and uint16 are Spark ints, int64 and uint32 longs), -1 for no fixed
    partition. Releases the GIL; a list or tuple is read a piece at a time as ``key_hashes``
    reads one."""

def murmur2(data: str | bytes) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c) of the bytes (a str as UTF-8), as Java's
    signed 32-bit int."""

def fnv1a_32(data: str | bytes) -> int:
    """FNV-1a, 32 bits, of the bytes (a str as UTF-8), as an unsigned int."""

def java_string_hash_code(key: str | bytes) -> int:
    """Java's ``String.hashCode`` over the UTF-16 units of a str, or of bytes decoded as
    ``new String(bytes, UTF_8)`` decodes them; a signed 32-bit int."""

def java_utf8(key: str | bytes) -> bytes:
    """The UTF-8 bytes of the Java string a key stands for: a str's UTF-8, or of bytes
    ``new String(bytes, UTF_8).getBytes(UTF_8)``, malformed sequences replaced by U+FFFD as
    the JDK replaces them (valid UTF-8 comes back as it is)."""

def iceberg_bucket(value: str | bytes | int, num_buckets: int) -> int:
    """Iceberg's ``bucket[num_buckets]`` of a string (UTF-8), binary, or int/long value."""

def spark_hash(
    value: str | bytes | int | None,
    data_type: Literal["string", "binary", "int", "long"] | None = None,
) -> int:
    """Spark's ``hash()`` (Murmur3Hash, seed 42) of one value, a signed 32-bit int. An int
    is a long unless ``data_type`` is ``"int"``; None hashes to 42."""

def spark_bucket(
    value: str | bytes | int | None,
    num_buckets: int,
    data_type: Literal["string", "binary", "int", "long"] | None = None,
) -> int:
    """``pmod(spark_hash(value, data_type), num_buckets)``: Spark's ``bucketBy`` bucket."""

def _error_kinds() -> list[str]:
    """Every ``kind`` an error of the kernels can have: the snake_case name of the kernel's
    variant for the mistake. ``keyshared.errors.KINDS`` lists them with their meanings."""
