"""PIP-486 bucket ownership on the broker: which consumer owns each of a segment's buckets,
and what moves when the consumers change.

One owner per bucket (a consumer may own several), so an entry, which always lies inside one
bucket, goes to exactly one consumer. Consumers are identified by integer ids; Pulsar orders
them by (name, id).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from keyshared._checks import check_int
from keyshared.layout import RING_SIZE


@dataclass(frozen=True, order=True)
class BucketConsumer:
    """A consumer as bucket assignment sees it; instances sort by (name, id) as Pulsar's
    ``EntryBucketConsumerSelector`` orders its consumers."""

    name: str
    consumer_id: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a str, got {type(self.name).__name__}")
        check_int("consumer_id", self.consumer_id, minimum=0, maximum=2**64 - 1)


def _consumers(consumers: Iterable[BucketConsumer | int]) -> list[BucketConsumer]:
    """Consumers in (name, id) order; a bare int is a consumer with an empty name."""
    out = [c if isinstance(c, BucketConsumer) else BucketConsumer("", c) for c in consumers]
    ids = [c.consumer_id for c in out]
    if len(set(ids)) != len(ids):
        raise ValueError(f"consumers repeat a consumer id: {sorted(ids)}")
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
        raise TypeError(f"previous must be a BucketAssignment, got {type(previous).__name__}")
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
            raise TypeError(f"{name} must be a BucketAssignment, got {type(value).__name__}")
    if before.bucket_count != after.bucket_count:
        raise ValueError(
            f"before has {before.bucket_count} buckets and after {after.bucket_count}:"
            " a segment's bucket count never changes (a rollover is a new segment)"
        )


__all__ = [
    "BucketAssignment",
    "BucketConsumer",
    "BucketMove",
    "contiguous_assignment",
    "lost_buckets",
    "moved_buckets",
    "sticky_assignment",
]
