"""The producer's segment router (Pulsar's V5 ``SegmentRouter``).

A keyed message goes to the active segment whose range holds its segment hash (the high 16
bits of the key's 32-bit hash). When every active segment is *legacy* (the synthetic layout
of a regular topic not yet migrated), keys go where a v4 partitioned producer sends them:
``signSafeMod(makeHash(key), N)`` over segment ids, ``makeHash`` being the hash with bit 31
cleared. A message without a key goes round-robin over the active segments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from keyshared._checks import check_int
from keyshared.buckets import HashRange
from keyshared.hashing import key_hash


class RoutableSegment(Protocol):
    """What the router reads of a segment: :class:`ActiveSegment` and
    :class:`keyshared.Segment` both qualify."""

    @property
    def segment_id(self) -> int: ...

    @property
    def hash_range(self) -> HashRange: ...

    @property
    def is_legacy(self) -> bool: ...


@dataclass(frozen=True)
class ActiveSegment:
    """An active segment as the client sees it (Pulsar's ``SegmentRouter.ActiveSegment``).

    ``legacy_topic_name`` is set for a legacy segment, which wraps an existing
    ``persistent://`` topic; the client attaches to :attr:`attach_topic_name`.
    ``entry_bucket_splits`` are the segment's bucket split points (producer side);
    ``owned_bucket_ranges`` the bucket ranges a consumer owns in it (empty: all of it)."""

    segment_id: int
    hash_range: HashRange
    segment_topic_name: str
    legacy_topic_name: str | None = None
    entry_bucket_splits: tuple[int, ...] = ()
    owned_bucket_ranges: tuple[HashRange, ...] = ()

    def __post_init__(self) -> None:
        check_int("segment_id", self.segment_id, minimum=0)
        if not isinstance(self.hash_range, HashRange):
            raise TypeError(f"hash_range must be a HashRange, got {type(self.hash_range).__name__}")
        object.__setattr__(self, "entry_bucket_splits", tuple(self.entry_bucket_splits))
        object.__setattr__(self, "owned_bucket_ranges", tuple(self.owned_bucket_ranges))

    @property
    def bucket_count(self) -> int:
        return len(self.entry_bucket_splits) + 1

    @property
    def is_legacy(self) -> bool:
        return bool(self.legacy_topic_name)

    @property
    def attach_topic_name(self) -> str:
        """The topic the per-segment producer or consumer attaches to."""
        return self.legacy_topic_name if self.legacy_topic_name else self.segment_topic_name


def _check_segments(active_segments: Sequence[RoutableSegment]) -> None:
    if not active_segments:
        raise ValueError("no active segments to route to")


def sign_safe_mod(dividend: int, divisor: int) -> int:
    """Pulsar's ``signSafeMod``: the remainder in ``[0, divisor)`` whatever the sign."""
    check_int("divisor", divisor, minimum=1)
    return dividend % divisor


@dataclass(frozen=True)
class SegmentRouter:
    """Routes messages to segments. Immutable: the round-robin position of keyless messages
    is passed in and handed back (``route_round_robin``), so that one router value may be
    shared across threads."""

    @staticmethod
    def hash(key: str | bytes) -> int:
        """The 16-bit segment-routing hash of a key: the high half of its 32-bit hash."""
        return key_hash(key) >> 16

    @staticmethod
    def make_hash(key: str | bytes) -> int:
        """Pulsar's ``Murmur3_32Hash.makeHash``: the 32-bit hash with bit 31 cleared."""
        return key_hash(key) & 0x7FFFFFFF

    def route(self, key: str | bytes, active_segments: Sequence[RoutableSegment]) -> int:
        """The segment id for a keyed message. ValueError when there are no active segments,
        when no segment covers the key's hash, or (all legacy) when no segment has the id
        ``makeHash(key) mod N``."""
        _check_segments(active_segments)
        if all(s.is_legacy for s in active_segments):
            return self._route_mod_n(key, active_segments)
        h = self.hash(key)
        for segment in active_segments:
            if segment.hash_range.contains(h):
                return segment.segment_id
        raise ValueError(f"no active segment covers hash {h:#06x} of key {key!r}")

    @classmethod
    def _route_mod_n(cls, key: str | bytes, active_segments: Sequence[RoutableSegment]) -> int:
        n = len(active_segments)
        partition = sign_safe_mod(cls.make_hash(key), n)
        for segment in active_segments:
            if segment.segment_id == partition:
                return partition
        raise ValueError(f"the legacy layout has no segment {partition} (N={n})")

    def route_round_robin(
        self, active_segments: Sequence[RoutableSegment], counter: int
    ) -> tuple[int, int]:
        """``(segment id, next counter)`` for a message without a key: the segment at
        ``counter mod N`` in the given order. Start ``counter`` at 0."""
        _check_segments(active_segments)
        check_int("counter", counter, minimum=0)
        return active_segments[counter % len(active_segments)].segment_id, counter + 1


__all__ = ["ActiveSegment", "RoutableSegment", "SegmentRouter", "sign_safe_mod"]
