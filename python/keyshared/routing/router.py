"""The producer's segment router (Pulsar's V5 ``SegmentRouter``).

A keyed message goes to the active segment whose range holds its segment hash: on Pulsar
master (PIP-486, the default) the high 16 bits of the key's 32-bit hash, on 5.0.0-M1
(``SegmentRouter(pulsar_version="5.0.0-M1")``) the low 16 bits. When every active segment
is *legacy* (the synthetic layout of a regular topic not yet migrated), keys go where a v4
partitioned producer sends them, on both releases: ``signSafeMod(makeHash(key), N)`` over
segment ids, ``makeHash`` being the hash with bit 31 cleared of the :class:`HashingScheme`
the legacy segments record (the v4 producers'), or ``Murmur3_32Hash`` when they record none.
A message without a key goes round-robin over the active segments.

A v4 producer itself (:func:`choose_partition`) hashes a key by its :class:`HashingScheme`:
the Java client's default is ``JavaStringHash``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from keyshared._checks import check_int
from keyshared._core import HashRange, java_string_hash_code, java_utf8, partition_key
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.routing.hashing import key_hash, segment_hash
from keyshared.versions import SCALABLE_TOPICS


@runtime_checkable
class RoutableSegment(Protocol):
    """What the router reads of a segment: :class:`ActiveSegment` and
    :class:`keyshared.Segment` both qualify."""

    @property
    def segment_id(self) -> int: ...

    @property
    def hash_range(self) -> HashRange: ...

    @property
    def is_legacy(self) -> bool: ...

    @property
    def legacy_hashing_scheme(self) -> HashingScheme | None: ...


@dataclass(frozen=True)
class ActiveSegment:
    """An active segment as the client sees it (Pulsar's ``SegmentRouter.ActiveSegment``).

    ``legacy_topic_name`` is set for a legacy segment, which wraps an existing
    ``persistent://`` topic; the client attaches to :attr:`attach_topic_name`.
    ``entry_bucket_splits`` are the segment's bucket split points (producer side);
    ``owned_bucket_ranges`` the bucket ranges a consumer owns in it (empty: all of it).
    ``legacy_hashing_scheme`` is the scheme the legacy topic's v4 producers route keys by
    (None: not recorded)."""

    segment_id: int
    hash_range: HashRange
    segment_topic_name: str
    legacy_topic_name: str | None = None
    entry_bucket_splits: tuple[int, ...] = ()
    owned_bucket_ranges: tuple[HashRange, ...] = ()
    legacy_hashing_scheme: HashingScheme | None = None

    def __post_init__(self) -> None:
        check_int("segment_id", self.segment_id, minimum=0)
        if not isinstance(self.hash_range, HashRange):
            raise ArgumentTypeError(
                f"hash_range must be a HashRange, got {type(self.hash_range).__name__}",
                argument="hash_range",
            )
        check_scheme("legacy_hashing_scheme", self.legacy_hashing_scheme)
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


def _segments(active_segments: Iterable[RoutableSegment]) -> tuple[RoutableSegment, ...]:
    # Taken whole first: an iterator read by two passes would lose what the first one read.
    if isinstance(active_segments, (str, bytes)) or not isinstance(active_segments, Iterable):
        kind = type(active_segments).__name__
        raise ArgumentTypeError(
            f"active_segments must be an iterable of segments, got {kind}",
            argument="active_segments",
        )
    segments = tuple(active_segments)
    for i, segment in enumerate(segments):
        if not isinstance(segment, RoutableSegment):
            kind = type(segment).__name__
            raise ArgumentTypeError(
                f"active_segments[{i}] must be a segment (ActiveSegment or Segment), got {kind}",
                argument="active_segments",
            )
    if not segments:
        raise InvalidArgument("no active segments to route to", argument="active_segments")
    return segments


def sign_safe_mod(dividend: int, divisor: int) -> int:
    """Pulsar's ``signSafeMod``: the remainder in ``[0, divisor)`` whatever the sign."""
    check_int("divisor", divisor, minimum=1)
    return dividend % divisor


class HashingScheme(enum.Enum):
    """Pulsar's ``HashingScheme``: the hash a v4 producer routes keyed messages by."""

    JavaStringHash = "JavaStringHash"
    Murmur3_32Hash = "Murmur3_32Hash"

    def make_hash(self, key: str | bytes) -> int:
        """The client's ``makeHash`` of its string key, with bit 31 cleared:
        ``JavaStringHash`` takes Java's ``String.hashCode``, ``Murmur3_32Hash``
        MurmurHash3_x86_32 of the string's UTF-8 bytes. A bytes key stands for the string
        ``new String(bytes, UTF_8)``, under both schemes: malformed sequences become U+FFFD
        as the JDK replaces them."""
        if self is HashingScheme.Murmur3_32Hash:
            return key_hash(java_utf8(key)) & 0x7FFFFFFF
        return java_string_hash_code(key) & 0x7FFFFFFF


def check_scheme(name: str, scheme: object) -> HashingScheme | None:
    """``scheme`` if it is a :class:`HashingScheme` or None, else TypeError naming ``name``."""
    if scheme is not None and not isinstance(scheme, HashingScheme):
        raise ArgumentTypeError(
            f"{name} must be a HashingScheme or None, got {type(scheme).__name__}", argument=name
        )
    return scheme


def choose_partition(
    key: str | bytes,
    num_partitions: int,
    hashing_scheme: HashingScheme = HashingScheme.JavaStringHash,
) -> int:
    """The partition a v4 producer's default routers (Pulsar's
    ``RoundRobinPartitionMessageRouterImpl`` and ``SinglePartitionMessageRouterImpl``) send
    a keyed message to: ``signSafeMod(makeHash(key), num_partitions)``. The default scheme
    is the Java client's. The same function as ``partition(key, num_partitions,
    "pulsar:<scheme>")``, with its checks: ``num_partitions`` in ``[1, 2**31 - 1]``, a str
    key without lone surrogates."""
    if not isinstance(hashing_scheme, HashingScheme):
        raise ArgumentTypeError(
            f"hashing_scheme must be a HashingScheme, got {type(hashing_scheme).__name__}",
            argument="hashing_scheme",
        )
    if not isinstance(key, str | bytes):
        raise ArgumentTypeError(
            f"key must be a str or bytes, got {type(key).__name__}", argument="key"
        )
    chosen = partition_key(key, num_partitions, f"pulsar:{hashing_scheme.value}", None)
    assert chosen is not None  # only a null key has no fixed partition
    return chosen


@dataclass(frozen=True)
class SegmentRouter:
    """Routes messages to segments as ``pulsar_version``'s V5 client does: ``"master"`` (the
    default) or ``"5.0.0-M1"`` (see :mod:`keyshared.versions`). Immutable: the round-robin
    position of keyless messages is passed in and handed back (``route_round_robin``), so
    that one router value may be shared across threads."""

    pulsar_version: str = SCALABLE_TOPICS.default

    def __post_init__(self) -> None:
        SCALABLE_TOPICS.check(self.pulsar_version)

    def hash(self, key: str | bytes) -> int:
        """The 16-bit segment-routing hash of a key: the high half of its 32-bit hash on
        master, the low half (``makeHash(key) & 0xFFFF``) on 5.0.0-M1."""
        return segment_hash(key, pulsar_version=self.pulsar_version)

    @staticmethod
    def make_hash(key: str | bytes) -> int:
        """Pulsar's ``Murmur3_32Hash.makeHash``: the 32-bit hash with bit 31 cleared."""
        return HashingScheme.Murmur3_32Hash.make_hash(key)

    def route(self, key: str | bytes, active_segments: Iterable[RoutableSegment]) -> int:
        """The segment id for a keyed message. ValueError when there are no active segments,
        when no segment covers the key's hash, or (all legacy) when no segment has the id
        ``makeHash(key) mod N`` or the segments record different hashing schemes."""
        segments = _segments(active_segments)
        if all(s.is_legacy for s in segments):
            return self._route_mod_n(key, segments)
        h = self.hash(key)
        for segment in segments:
            if segment.hash_range.contains(h):
                return segment.segment_id
        raise InvalidArgument(
            f"no active segment covers hash {h:#06x} of key {key!r}", argument="active_segments"
        )

    @staticmethod
    def _route_mod_n(key: str | bytes, active_segments: Sequence[RoutableSegment]) -> int:
        n = len(active_segments)
        scheme = _legacy_scheme(active_segments, "active_segments")
        partition = sign_safe_mod(scheme.make_hash(key), n)
        for segment in active_segments:
            if segment.segment_id == partition:
                return partition
        raise InvalidArgument(
            f"the legacy layout has no segment {partition} (N={n})", argument="active_segments"
        )

    def route_round_robin(
        self, active_segments: Iterable[RoutableSegment], counter: int
    ) -> tuple[int, int]:
        """``(segment id, next counter)`` for a message without a key: the segment at
        ``counter mod N`` in the given order. Start ``counter`` at 0."""
        check_int("counter", counter, minimum=0)
        segments = _segments(active_segments)
        return segments[counter % len(segments)].segment_id, counter + 1


def legacy_hashing_scheme(segments: Iterable[RoutableSegment]) -> HashingScheme:
    """The scheme keys of the legacy ``segments`` are routed by: the one they record, else
    ``Murmur3_32Hash``. ValueError when they record different ones."""
    return _legacy_scheme(segments, "segments")


def _legacy_scheme(segments: Iterable[RoutableSegment], name: str) -> HashingScheme:
    """:func:`legacy_hashing_scheme`, its error naming the caller's argument ``name``."""
    # Pulsar's SegmentRouter always takes Murmur3_32Hash here, whatever the v4 producers
    # used; keys of producers on the Java client's default JavaStringHash then land in
    # another partition than their older messages, and lose their order. Kept safer: the
    # recorded scheme wins, and Pulsar's choice stands only where none is recorded.
    recorded = {s.legacy_hashing_scheme for s in segments if s.is_legacy}
    recorded.discard(None)
    if len(recorded) > 1:
        names = sorted(s.value for s in recorded if s is not None)
        raise InvalidArgument(
            f"the legacy segments record different hashing schemes: {names}", argument=name
        )
    scheme = recorded.pop() if recorded else None
    return scheme if scheme is not None else HashingScheme.Murmur3_32Hash


__all__ = [
    "ActiveSegment",
    "HashingScheme",
    "RoutableSegment",
    "SegmentRouter",
    "check_scheme",
    "choose_partition",
    "java_string_hash_code",
    "legacy_hashing_scheme",
    "sign_safe_mod",
]
