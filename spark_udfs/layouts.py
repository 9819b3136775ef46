"""What the Spark side needs of a topic layout: its active segments as small, picklable specs.

UDFs close over these specs, so a layout crosses to the executors once, inside the serialized
function, never once per batch; each Python worker then builds its routing table once.
"""

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Protocol, TypeAlias, runtime_checkable

from keyshared import HashRange, RoutingTable

# (segment id, first hash, last hash, bucket splits) of one active segment.
SegmentSpec: TypeAlias = tuple[int, int, int, tuple[int, ...]]


class ActiveSegment(Protocol):
    """The fields of a layout segment that routing reads."""

    @property
    def segment_id(self) -> int: ...
    @property
    def hash_range(self) -> HashRange: ...
    @property
    def bucket_splits(self) -> Sequence[int]: ...


@runtime_checkable
class LayoutLike(Protocol):
    """Anything with active segments, such as ``keyshared.TopicLayout``."""

    def active_segments(self) -> Sequence[ActiveSegment]: ...


Layout: TypeAlias = LayoutLike | RoutingTable | Iterable[tuple[int, HashRange, Sequence[int]]]


def segment_specs(layout: Layout) -> tuple[SegmentSpec, ...]:
    """The active segments of ``layout`` in range order.

    ``layout`` is a ``TopicLayout`` (or any object with ``active_segments()``), a
    ``RoutingTable``, or ``(segment_id, HashRange, splits)`` triples. Raises ValueError when the
    segments do not tile the ring or a segment's splits are invalid.
    """
    if isinstance(layout, LayoutLike):
        triples: Iterable[tuple[int, HashRange, Sequence[int]]] = [
            (s.segment_id, s.hash_range, s.bucket_splits) for s in layout.active_segments()
        ]
    elif isinstance(layout, RoutingTable):
        triples = layout.segments
    else:
        triples = layout
    # Building a table validates the tiling and the splits with the kernel's own checks.
    table = RoutingTable(triples)
    return tuple((i, r.start, r.end, tuple(splits)) for i, r, splits in table.segments)


@lru_cache(maxsize=16)
def routing_table(specs: tuple[SegmentSpec, ...]) -> RoutingTable:
    """The routing table of ``specs``, built once per process and reused by every batch."""
    return RoutingTable((i, HashRange(start, end), list(splits)) for i, start, end, splits in specs)
