"""Native kernels of keyshared (Rust). Users import them through ``keyshared``."""

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Literal, final

import numpy as np
import numpy.typing as npt

# Keys of a batch: a list or tuple of str/bytes (None allowed with ``null_key``), a
# one-dimensional NumPy array of str, bytes or object dtype, or any Arrow array or chunked
# array of string, large_string, binary or large_binary (Arrow PyCapsule interface).
_KeyBatch = Any
_Splits = Sequence[int] | npt.NDArray[np.integer[Any]]

__all__ = [
    "HASH_VERSION",
    "BucketCheckpoints",
    "ConsistentHashingStickyKeyConsumerSelector",
    "ConsumerDrainingHashesStats",
    "DrainingHash",
    "DrainingHashEntry",
    "DrainingHashesTracker",
    "HashRange",
    "InFlightEntry",
    "InFlightWindow",
    "KeySharedConsumerState",
    "PendingAcksMap",
    "RoutingTable",
    "SafeCursor",
    "SubscriptionFailurePolicy",
    "WindowAction",
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
    hash_b: _Splits, splits: _Splits, *, threads: int | None = None
) -> npt.NDArray[np.int32]:
    """``bucket_index`` of every hashB (each in ``[0, 0xFFFF]``) of a one-dimensional integer
    array or sequence of ints."""

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
        self,
        key_hashes: Sequence[int] | npt.NDArray[np.integer[Any]],
        *,
        threads: int | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """Routes 32-bit key hashes (each in ``[0, 2**32)``); uint32 arrays are read as is."""

# --- dispatcher state: draining hashes and pending acks (PIP-379) ----------------------

_IntArray = npt.NDArray[np.integer[Any]] | Sequence[int]
_Ack = tuple[int, int, int, int]

@final
class DrainingHashEntry:
    """A draining sticky key hash: the consumer still holding its pending messages,
    ``ref_count`` of them (always >= 1), and ``blocked_count`` dispatches to other consumers
    it blocked."""

    @property
    def consumer_id(self) -> int: ...
    @property
    def ref_count(self) -> int: ...
    @property
    def blocked_count(self) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...

@final
class DrainingHash:
    """One hash of a consumer's stats (Pulsar's ``DrainingHash``)."""

    @property
    def hash(self) -> int: ...
    @property
    def unack_msgs(self) -> int: ...
    @property
    def blocked_attempts(self) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...

@final
class ConsumerDrainingHashesStats:
    """A consumer's draining-hash stats. ``draining_hashes_unacked_messages`` is the sum of
    its entries' ref counts; ``draining_hashes_cleared_total`` counts entries that went away
    since the consumer's stats began (reset by ``consumer_removed`` and ``clear``)."""

    @property
    def draining_hashes_count(self) -> int: ...
    @property
    def draining_hashes_cleared_total(self) -> int: ...
    @property
    def draining_hashes_unacked_messages(self) -> int: ...
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
    nothing (the handler's own exceptions propagate after the change)."""

    def __new__(
        cls, unblocking_handler: Callable[[int], object] | None = None, dispatcher_name: str = ""
    ) -> DrainingHashesTracker: ...
    @property
    def dispatcher_name(self) -> str: ...
    @property
    def unblocking_handler(self) -> Callable[[int], object] | None: ...
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
        """Forgets the consumer's stats."""

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
    ``[0, 2**31 - 1]``, hashes in ``[0, 0xFFFF]``). With a ``tracker`` it acts as PIP-379's
    dispatcher wires it: an add is refused while another consumer drains the hash (and hash
    0 is a ValueError), and each removal takes one reference off the hash in the tracker,
    several removals as one batch, passing ``closing`` once the map is closed. Callbacks
    run after the change with nothing locked; the tracker's unblocking handler runs last.
    A call that raises changes nothing here or in the tracker."""

    def __new__(
        cls, consumer_id: int, tracker: DrainingHashesTracker | None = None
    ) -> PendingAcksMap: ...
    @property
    def consumer_id(self) -> int: ...
    @property
    def tracker(self) -> DrainingHashesTracker | None: ...
    @property
    def closed(self) -> bool: ...
    def add_pending_ack_if_allowed(
        self, ledger_id: int, entry_id: int, batch_size: int, sticky_key_hash: int
    ) -> bool:
        """Adds (or overwrites) the ack; False when the map is closed or the hash drains on
        another consumer."""

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
        """Removes the ack and returns its ``(batch_size, sticky_key_hash)``."""

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
        """Calls ``processor`` on every ack of a snapshot, in order."""

    def for_each_and_close(self, processor: Callable[[int, int, int, int], object]) -> None:
        """Closes the map (later adds are refused), removes every ack, then calls
        ``processor`` for each."""

    def for_each_and_clear(self, processor: Callable[[int, int, int, int], object]) -> None:
        """Removes every ack, then calls ``processor`` for each; adds stay allowed."""

    def contains(self, ledger_id: int, entry_id: int) -> bool: ...
    def get(self, ledger_id: int, entry_id: int) -> tuple[int, int] | None:
        """``(batch_size, sticky_key_hash)`` of the ack."""

    def size(self) -> int: ...
    def __len__(self) -> int: ...
    def to_list(self) -> list[_Ack]:
        """Every ack as ``(ledger_id, entry_id, batch_size, sticky_key_hash)``, in order."""

    def register_draining_hashes(self, ranges: Iterable[HashRange]) -> int:
        """Registers in the tracker, as draining for this consumer, the hash of every ack in
        ``ranges`` (ranges the consumer lost); hash 0 is skipped. Returns how many acks
        matched. ValueError without a tracker or if another consumer drains one of them."""

# --- dispatcher state: consumer selection rings (SPEC 7) -------------------------------

@final
class ConsistentHashingStickyKeyConsumerSelector:
    """Pulsar's consistent-hashing selector on the 16-bit sticky-key-hash ring: each
    consumer has ``number_of_points`` (1 to 65536) points at
    ``sticky_key_hash(f"{name}\\0{name_index}\\0{i}")``, ``name_index`` being the lowest slot
    free among namesakes; on a collision the newer consumer takes the point. A hash goes to
    the first point at or above it, wrapping. Adding or removing a consumer returns, per
    consumer id, the ranges it lost (sorted, adjacent ranges joined). Thread-safe."""

    def __new__(cls, number_of_points: int = 100) -> ConsistentHashingStickyKeyConsumerSelector: ...
    @property
    def number_of_points(self) -> int: ...
    @property
    def consumer_ids(self) -> list[int]:
        """Ascending."""

    def add_consumer(self, consumer_id: int, name: str | bytes) -> dict[int, list[HashRange]]:
        """ValueError for an id already added."""

    def remove_consumer(self, consumer_id: int) -> dict[int, list[HashRange]]:
        """The removed consumer's own ranges included; KeyError for an unknown id."""

    def select(self, sticky_key_hash: int) -> int | None:
        """The consumer serving the hash; None when the ring is empty."""

    def select_many(self, sticky_key_hashes: _IntArray) -> npt.NDArray[np.uint64]:
        """``select`` of every hash; ValueError when the ring is empty."""

    def get_consumer_key_hash_ranges(self) -> dict[int, list[HashRange]]:
        """Each consumer's ranges, together tiling ``[0, 0xFFFF]``."""

    def __len__(self) -> int: ...
    def __contains__(self, consumer_id: int, /) -> bool: ...

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
        """In the order added."""

    def add_consumer(
        self, consumer_id: int, key_filters: Iterable[str | bytes] | None = None
    ) -> None:
        """ValueError for an id already added or an empty filter; TypeError for a lone
        str or bytes given as ``key_filters``."""

    def remove_consumer(self, consumer_id: int) -> None:
        """KeyError for an unknown id."""

    def key_filters(self, consumer_id: int) -> list[bytes]: ...
    def disconnect_all(self) -> None: ...
    def is_empty(self) -> bool: ...
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
    def first_offset(self) -> int: ...
    @property
    def position(self) -> int | None: ...
    @property
    def pending(self) -> int:
        """Acks held beyond the first gap."""

    def ack(self, offset: int) -> int | None:
        """The new position when it moved, else None."""

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
        """ValueError if the bucket is open already."""

    def close(self, segment_id: int, bucket: int) -> int | None:
        """Stops tracking the bucket; its final position."""

    def ack(self, segment_id: int, bucket: int, offset: int) -> int | None: ...
    def skip(self, segment_id: int, bucket: int, offset: int) -> int | None: ...
    def ack_many(
        self, segment_ids: _IntArray, buckets: _IntArray, offsets: _IntArray
    ) -> dict[tuple[int, int], int]:
        """Acks each triple (checked first); the buckets whose position moved, with it."""

    def position(self, segment_id: int, bucket: int) -> int | None: ...
    def positions(self) -> dict[tuple[int, int], int | None]: ...
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
    def max_redelivery_count(self) -> int: ...
    @property
    def ack_timeout_ms(self) -> int: ...
    @property
    def base_redelivery_delay_ms(self) -> int: ...
    @property
    def max_redelivery_delay_ms(self) -> int: ...
    @property
    def backoff_strategy(self) -> str: ...
    @property
    def poison_policy(self) -> str: ...
    @property
    def dead_letter_topic(self) -> str | None: ...
    def redelivery_delay_ms(self, attempt: int, requested_ms: int | None = None) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...

@final
class InFlightEntry:
    """A snapshot of an in-flight message. ``status`` is ``"awaiting_ack"``,
    ``"waiting_to_retry"`` or ``"retry_exhausted"``; times in milliseconds."""

    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> str | bytes: ...
    @property
    def consumer_id(self) -> int: ...
    @property
    def delivery_attempt(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def first_sent_at_ms(self) -> int: ...
    @property
    def last_sent_at_ms(self) -> int: ...
    @property
    def ack_deadline_at_ms(self) -> int: ...
    @property
    def next_redelivery_at_ms(self) -> int: ...
    @property
    def last_failure_reason(self) -> str | None: ...

@final
class WindowAction:
    """What to do: ``kind`` is ``"deliver"``/``"redeliver"`` (send ``offset`` to
    ``consumer_id``), ``"skip"`` (no consumer takes the key; counted done), ``"block"``
    (queued), ``"drop"`` or ``"dead_letter"`` (out of retries; counted done; publish to
    ``dead_letter_topic`` for the latter) or ``"evict"`` (consumer evicted, its messages
    counted done)."""

    @property
    def kind(self) -> str: ...
    @property
    def offset(self) -> int | None: ...
    @property
    def key(self) -> str | bytes | None: ...
    @property
    def consumer_id(self) -> int | None: ...
    @property
    def attempt(self) -> int:
        """The delivery attempt (1 for a first delivery); 0 for skip, block and evict."""

    @property
    def dead_letter_topic(self) -> str | None: ...

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
    def max_window_size(self) -> int: ...
    @property
    def max_per_consumer(self) -> int: ...
    @property
    def inactive_eviction_ticks(self) -> int: ...
    @property
    def failure_policy(self) -> SubscriptionFailurePolicy: ...
    @property
    def in_flight_count(self) -> int: ...
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
        """The first queued message whose key is free; it holds the key until dispatched,
        skipped or put back."""

    def on_ack(self, offset: int) -> tuple[str | bytes | None, int | None]:
        """``(freed key, new cursor)``; ``(None, None)`` for an offset not awaiting an ack."""

    def on_skipped(self, offset: int) -> int | None:
        """Counts an offset done without delivery; the new cursor if it moved. ValueError
        for an offset in flight or queued."""

    def on_nack(
        self, offset: int, now_ms: int, delay_ms: int | None = None, reason: str | None = None
    ) -> str | None:
        """Schedules a retry (or exhausts the message); its new status, or None."""

    def remove_entry(self, offset: int) -> InFlightEntry | None:
        """Takes a message out of flight (its key frees) without counting it done."""

    def drain_blocked_for_key(self, key: str | bytes) -> tuple[list[int], int | None]:
        """Removes the key's queued messages, counted done; their offsets and the cursor."""

    def remove_consumer_entries(self, consumer_id: int) -> list[str | bytes]:
        """Evicts a consumer's messages, counted done; the keys freed."""

    def get_safe_cursor(self) -> int | None: ...
    def has_capacity(self) -> bool:
        """In flight plus queued below ``max_window_size``."""

    def consumer_has_capacity(self, consumer_id: int) -> bool: ...
    def consumer_in_flight(self, consumer_id: int) -> int: ...
    def is_key_active(self, key: str | bytes) -> bool:
        """Whether a new message with this key must wait."""

    def get_entry(self, offset: int) -> InFlightEntry | None: ...
    def in_flight_entries(self) -> list[InFlightEntry]: ...
    def blocked(self) -> list[tuple[int, str | bytes]]:
        """Queued messages in release order."""

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
