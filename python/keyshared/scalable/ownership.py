"""PIP-486 bucket ownership on the broker: which consumer owns each of a segment's buckets,
what moves when the consumers change, and the hand-off of a moving bucket; with Pulsar's
``EntryBucketConsumerSelector`` (native) re-exported here. The entry-bucket dispatcher is in
``keyshared.dispatch``.

One owner per bucket (a consumer may own several), so an entry, which always lies inside one
bucket, goes to exactly one consumer. Consumers are identified by integer ids; Pulsar orders
them by (name, id).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, total_ordering

import numpy as np
import numpy.typing as npt

from keyshared._checks import check_consumer_id, check_int
from keyshared._core import (
    RING_SIZE,
    EntryBucketConsumerSelector,
    HashRange,
    ImpactedConsumersResult,
    impacted_consumers,
    register_draining_hashes,
    validate_bucket_boundaries,
)
from keyshared.dispatch.draining import DrainingHashesTracker, PendingAcksMap
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.scalable.layout import Segment


@total_ordering
@dataclass(frozen=True)
class BucketConsumer:
    """A consumer as bucket assignment sees it; instances sort by (name, id) as Pulsar's
    ``EntryBucketConsumerSelector`` orders its consumers (names as Java compares strings,
    by UTF-16 code unit)."""

    name: str
    consumer_id: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ArgumentTypeError(
                f"name must be a str, got {type(self.name).__name__}", argument="name"
            )
        check_int("consumer_id", self.consumer_id, minimum=0, maximum=2**64 - 1)

    def _order(self) -> tuple[bytes, int]:
        # Big-endian UTF-16 bytes compare as Java's String.compareTo compares code units.
        return self.name.encode("utf-16-be", "surrogatepass"), self.consumer_id

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, BucketConsumer):
            return NotImplemented
        return self._order() < other._order()


def _consumers(consumers: Iterable[BucketConsumer | int]) -> list[BucketConsumer]:
    """Consumers in (name, id) order; a bare int is a consumer with an empty name."""
    if isinstance(consumers, str | bytes | bytearray):
        # Iterating text or bytes would make a consumer of each character or byte.
        raise ArgumentTypeError(
            f"consumers must be an iterable of consumers, got {type(consumers).__name__}",
            argument="consumers",
        )
    out = [c if isinstance(c, BucketConsumer) else BucketConsumer("", c) for c in consumers]
    ids = [c.consumer_id for c in out]
    if len(set(ids)) != len(ids):
        raise InvalidArgument(
            f"consumers repeat a consumer id: {sorted(ids)}", argument="consumers"
        )
    return sorted(out)


@dataclass(frozen=True)
class BucketAssignment:
    """The owner of each bucket of one segment: ``owners[i]`` is the consumer id owning bucket
    ``i``, or None while the subscription has no consumer."""

    owners: tuple[int | None, ...]

    def __post_init__(self) -> None:
        owners = tuple(self.owners)
        check_int("len(owners)", len(owners), minimum=1, maximum=RING_SIZE)
        for i, owner in enumerate(owners):
            if owner is not None:
                check_int(f"owners[{i}]", owner, minimum=0)
        object.__setattr__(self, "owners", owners)

    @property
    def bucket_count(self) -> int:
        return len(self.owners)

    def owner(self, bucket: int) -> int | None:
        """The consumer id owning ``bucket``, or None."""
        return self.owners[check_int("bucket", bucket, minimum=0, maximum=len(self.owners) - 1)]

    def buckets_of(self, consumer_id: int) -> tuple[int, ...]:
        """The buckets ``consumer_id`` owns, ascending."""
        return self.by_consumer().get(consumer_id, ())

    def by_consumer(self) -> Mapping[int, tuple[int, ...]]:
        """Each owning consumer's buckets, ascending."""
        return self._by_consumer

    @cached_property
    def _by_consumer(self) -> Mapping[int, tuple[int, ...]]:
        out: dict[int, list[int]] = {}
        for bucket, owner in enumerate(self.owners):
            if owner is not None:
                out.setdefault(owner, []).append(bucket)
        return {c: tuple(b) for c, b in out.items()}

    @cached_property
    def owner_array(self) -> npt.NDArray[np.int64]:
        """The owners as an int64 array, -1 for no owner (read-only), for batch routing."""
        arr = np.array([-1 if o is None else o for o in self.owners], dtype=np.int64)
        arr.setflags(write=False)
        return arr


def contiguous_assignment(
    consumers: Iterable[BucketConsumer | int], bucket_count: int
) -> BucketAssignment:
    """Pulsar's assignment: consumers sorted by (name, id); with k consumers and N buckets
    consumer j owns buckets ``floor(j*N/k) .. floor((j+1)*N/k) - 1``. Every broker derives
    the same owners from the same membership. With more consumers than buckets, some own
    none."""
    n = check_int("bucket_count", bucket_count, minimum=1, maximum=RING_SIZE)
    ordered = _consumers(consumers)
    if not ordered:
        return BucketAssignment((None,) * n)
    k = len(ordered)
    owners: list[int | None] = [None] * n
    for j, consumer in enumerate(ordered):
        for bucket in range(j * n // k, (j + 1) * n // k):
            owners[bucket] = consumer.consumer_id
    return BucketAssignment(tuple(owners))


def sticky_assignment(
    previous: BucketAssignment, consumers: Iterable[BucketConsumer | int]
) -> BucketAssignment:
    """A balanced assignment that moves as few buckets as possible from ``previous``.

    Balanced: every consumer owns ``N // k`` or ``N // k + 1`` buckets. The larger shares go
    to the consumers already holding the most buckets (then by (name, id)); each consumer
    keeps its lowest-numbered held buckets up to its share, and the freed buckets go, in
    ascending order, to the consumers below their share in (name, id) order. Keeping
    ``min(held, share)`` per consumer with the larger shares on the larger holders keeps the
    most buckets in place of any balanced assignment.
    """
    if not isinstance(previous, BucketAssignment):
        raise ArgumentTypeError(
            f"previous must be a BucketAssignment, got {type(previous).__name__}",
            argument="previous",
        )
    ordered = _consumers(consumers)
    n = previous.bucket_count
    if not ordered:
        return BucketAssignment((None,) * n)
    held = {c.consumer_id: previous.buckets_of(c.consumer_id) for c in ordered}
    base, extra = divmod(n, len(ordered))
    by_holding = sorted(ordered, key=lambda c: (-len(held[c.consumer_id]), c))
    share = {c.consumer_id: base + (i < extra) for i, c in enumerate(by_holding)}
    owners: list[int | None] = [None] * n
    for cid, buckets in held.items():
        for bucket in buckets[: share[cid]]:
            owners[bucket] = cid
    free = iter(b for b in range(n) if owners[b] is None)
    for consumer in ordered:
        cid = consumer.consumer_id
        for _ in range(share[cid] - min(len(held[cid]), share[cid])):
            owners[next(free)] = cid
    return BucketAssignment(tuple(owners))


@dataclass(frozen=True)
class BucketMove:
    """Bucket ``bucket`` changed owner from ``from_consumer`` to ``to_consumer`` (either
    None when there was or is no owner)."""

    bucket: int
    from_consumer: int | None
    to_consumer: int | None


def moved_buckets(before: BucketAssignment, after: BucketAssignment) -> tuple[BucketMove, ...]:
    """Every bucket whose owner differs between two assignments of the same segment."""
    _check_same_segment(before, after)
    return tuple(
        BucketMove(bucket, old, new)
        for bucket, (old, new) in enumerate(zip(before.owners, after.owners, strict=True))
        if old != new
    )


def lost_buckets(before: BucketAssignment, after: BucketAssignment) -> dict[int, tuple[int, ...]]:
    """Per consumer that owned a bucket before and does not now, the buckets it lost
    (ascending): its pending messages in them must drain before the new owner gets more."""
    lost: dict[int, list[int]] = {}
    for move in moved_buckets(before, after):
        if move.from_consumer is not None:
            lost.setdefault(move.from_consumer, []).append(move.bucket)
    return {c: tuple(b) for c, b in lost.items()}


def _check_same_segment(before: BucketAssignment, after: BucketAssignment) -> None:
    for name, value in (("before", before), ("after", after)):
        if not isinstance(value, BucketAssignment):
            raise ArgumentTypeError(
                f"{name} must be a BucketAssignment, got {type(value).__name__}", argument=name
            )
    if before.bucket_count != after.bucket_count:
        raise InvalidArgument(
            f"before has {before.bucket_count} buckets and after {after.bucket_count}:"
            " a segment's bucket count never changes (a rollover is a new segment)",
            argument=None,
        )


def assignment_ranges(
    segment_ranges: Sequence[HashRange], assignment: BucketAssignment
) -> dict[int, list[HashRange]]:
    """Each owning consumer's hash ranges under ``assignment`` (a bucket per range), as a
    selector's ``get_consumer_key_hash_ranges()`` reports them."""
    out: dict[int, list[HashRange]] = {}
    for bucket, owner in enumerate(assignment.owners):
        if owner is not None:
            out.setdefault(owner, []).append(segment_ranges[bucket])
    return out


class BucketHandoff:
    """Hands buckets of one segment from consumer to consumer without ever letting two
    consumers hold unacked messages of the same bucket (PIP-486 over PIP-379).

    Each consumer's pending (dispatched, unacked) messages are a :class:`PendingAcksMap`
    wired to a :class:`DrainingHashesTracker`, each message a pending ack under its bucket's
    canonical hash. A reassignment goes through the one hand-off rule
    (:func:`register_draining_hashes`): a consumer that loses a bucket with pending
    messages has them registered as draining, and the new owner is withheld the bucket
    until the old one has acked them all; then the tracker releases it (and tells
    ``unblocking_handler`` the bucket index, or -1 for several at once, if a dispatch was
    held back meanwhile). A bucket handed back to the consumer still draining it is
    released by that consumer.

    Invariant: at most one consumer has pending messages of a bucket, and while it is not
    the owner, the tracker holds exactly its pending count under the bucket's hash. Every
    argument is checked before anything changes.
    """

    def __init__(
        self,
        segment: Segment,
        assignment: BucketAssignment | None = None,
        *,
        unblocking_handler: Callable[[int], object] | None = None,
    ) -> None:
        if not isinstance(segment, Segment):
            raise ArgumentTypeError(
                f"segment must be a Segment, got {type(segment).__name__}", argument="segment"
            )
        n = segment.bucket_count
        self._ranges = segment.bucket_ranges()
        self._hashes = [segment.canonical_bucket_hash(b) for b in range(n)]
        self._bucket_of_hash = {h: b for b, h in enumerate(self._hashes)}
        self._assignment = BucketAssignment((None,) * n)
        # bucket -> (holding consumer, first pending sequence number, next one); a pending
        # message is the ack (bucket, sequence number) in its holder's map.
        self._pending: dict[int, tuple[int, int, int]] = {}
        self._next_seq = [0] * n
        self._maps: dict[int, PendingAcksMap] = {}
        self._handler = unblocking_handler
        self.tracker = DrainingHashesTracker(
            None if unblocking_handler is None else self._unblocked, segment.descriptor
        )
        if assignment is not None:
            self.reassign(assignment)

    @property
    def assignment(self) -> BucketAssignment:
        return self._assignment

    def _unblocked(self, sticky_key_hash: int) -> None:
        assert self._handler is not None
        self._handler(self._bucket_of_hash.get(sticky_key_hash, -1))

    def _bucket(self, bucket: int) -> int:
        return check_int("bucket", bucket, minimum=0, maximum=len(self._hashes) - 1)

    def _map(self, consumer_id: int) -> PendingAcksMap:
        pending = self._maps.get(consumer_id)
        if pending is None:
            pending = self._maps[consumer_id] = PendingAcksMap(consumer_id, self.tracker)
        return pending

    def reassign(self, assignment: BucketAssignment) -> dict[int, tuple[int, ...]]:
        """Moves to new owners; returns, per consumer, the buckets it lost. A lost bucket
        with pending messages is withheld from its new owner until they are acked."""
        lost = lost_buckets(self._assignment, assignment)
        impacted = impacted_consumers(
            assignment_ranges(self._ranges, self._assignment),
            assignment_ranges(self._ranges, assignment),
        )
        self._assignment = assignment
        register_draining_hashes(impacted, list(self._maps.values()))
        return lost

    def try_dispatch(self, consumer_id: int, bucket: int, count: int = 1) -> bool:
        """Records ``count`` messages of ``bucket`` as dispatched to ``consumer_id`` if it may
        have them: it owns the bucket and no other consumer is still draining it."""
        consumer_id = check_consumer_id("consumer_id", consumer_id)
        b = self._bucket(bucket)
        check_int("count", count, minimum=1, maximum=2**31 - 1)
        if self._assignment.owners[b] != consumer_id:
            return False
        if self.tracker.should_block_sticky_key_hash(consumer_id, self._hashes[b]):
            return False
        _, first, _ = self._pending.get(b, (consumer_id, self._next_seq[b], 0))
        seq = self._next_seq[b]
        added = self._map(consumer_id).add_pending_acks_if_allowed(
            np.full(count, b, dtype=np.int64),
            np.arange(seq, seq + count, dtype=np.int64),
            np.ones(count, dtype=np.int32),
            np.full(count, self._hashes[b], dtype=np.uint16),
        )
        assert added.all(), "the owner's map refused a bucket no one else drains"
        self._next_seq[b] = seq + count
        self._pending[b] = (consumer_id, first, seq + count)
        return True

    def ack(self, consumer_id: int, bucket: int, count: int = 1) -> None:
        """``consumer_id`` acked ``count`` of its pending messages of ``bucket`` (oldest
        first); if it was draining the bucket and that was the last, the bucket goes to its
        new owner."""
        consumer_id = check_consumer_id("consumer_id", consumer_id)
        b = self._bucket(bucket)
        check_int("count", count, minimum=1)
        holder, first, end = self._pending.get(b, (None, 0, 0))
        held = end - first
        if holder != consumer_id or held < count:
            have = held if holder == consumer_id else 0
            raise InvalidArgument(
                f"consumer {consumer_id} has {have} pending message(s) of bucket {b},"
                f" cannot ack {count}",
                argument="count",
            )
        if held == count:
            del self._pending[b]
        else:
            self._pending[b] = (consumer_id, first + count, end)
        pending = self._maps[consumer_id]
        # All but the last in one batch; the last alone, so that an unblocking names the
        # bucket rather than -1.
        last = first + count - 1
        pending.remove_many(
            np.full(count - 1, b, dtype=np.int64), np.arange(first, last, dtype=np.int64)
        )
        pending.remove(b, last)

    def close_consumer(self, consumer_id: int) -> dict[int, int]:
        """``consumer_id`` disconnected: its pending messages will be redelivered, so it holds
        nothing any more. Returns how many messages of each bucket it held. Reassign its
        buckets afterwards."""
        consumer_id = check_consumer_id("consumer_id", consumer_id)
        held = {b: end - first for b, (c, first, end) in self._pending.items() if c == consumer_id}
        for b in held:
            del self._pending[b]
        pending = self._maps.pop(consumer_id, None)
        if pending is not None:
            pending.for_each_and_close(lambda *_: None)
        self.tracker.consumer_removed(consumer_id)
        return dict(sorted(held.items()))

    def pending(self, consumer_id: int, bucket: int) -> int:
        """How many messages of ``bucket`` ``consumer_id`` holds unacked."""
        consumer_id = check_consumer_id("consumer_id", consumer_id)
        holder, first, end = self._pending.get(self._bucket(bucket), (None, 0, 0))
        return end - first if holder == consumer_id else 0

    def holder(self, bucket: int) -> int | None:
        """The consumer holding unacked messages of ``bucket``, if any."""
        return self._pending.get(self._bucket(bucket), (None, 0, 0))[0]

    def withheld_buckets(self) -> tuple[int, ...]:
        """Buckets whose owner must wait for another consumer's acks (PIP-486's withheld
        gauge; one that stays non-empty means a previous owner is not acking)."""
        return tuple(
            sorted(
                b
                for b, (holder, _, _) in self._pending.items()
                if self._assignment.owners[b] != holder and self._assignment.owners[b] is not None
            )
        )


__all__ = [
    "BucketAssignment",
    "BucketConsumer",
    "BucketHandoff",
    "BucketMove",
    "EntryBucketConsumerSelector",
    "ImpactedConsumersResult",
    "assignment_ranges",
    "check_consumer_id",
    "contiguous_assignment",
    "impacted_consumers",
    "lost_buckets",
    "moved_buckets",
    "register_draining_hashes",
    "sticky_assignment",
    "validate_bucket_boundaries",
]
