"""What the Spark side needs of a topic layout: its routing table.

UDFs close over the table, which pickles as its segments, so a layout crosses to the executors
once, inside the serialized function, never once per batch.
"""

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeAlias, runtime_checkable

from keyshared import HashRange, RoutingTable


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


def routing_table(layout: Layout) -> RoutingTable:
    """The routing table of ``layout``'s active segments.

    ``layout`` is a ``TopicLayout`` (or any object with ``active_segments()``), a
    ``RoutingTable``, or ``(segment_id, HashRange, splits)`` triples. Raises ValueError when the
    segments do not tile the ring or a segment's splits are invalid (the kernel's own checks).
    """
    if isinstance(layout, RoutingTable):
        return layout
    if isinstance(layout, LayoutLike):
        return RoutingTable(
            (s.segment_id, s.hash_range, s.bucket_splits) for s in layout.active_segments()
        )
    return RoutingTable(layout)
