"""What the Spark side needs of a topic layout: its routing table under a Pulsar release.

UDFs close over the table, which pickles as its segments and release, so a layout crosses to
the executors once, inside the serialized function, never once per batch.
"""

import json
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

from keyshared import HashRange, RoutingTable, TopicLayout
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.versions import SCALABLE_TOPICS


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


def routing_table(layout: Layout, pulsar_version: str | None = None) -> RoutingTable:
    """The routing table of ``layout``'s active segments under ``pulsar_version``
    (``"master"`` or ``"5.0.0-M1"``; None: a ``RoutingTable``'s own release, else master).

    ``layout`` is a ``TopicLayout`` (or any object with ``active_segments()``), a
    ``RoutingTable``, or ``(segment_id, HashRange, splits)`` triples. Raises ValueError when the
    segments do not tile the ring or a segment's splits are invalid (the kernel's own checks),
    or for an unknown release (naming ``pulsar_version``).
    """
    if pulsar_version is not None:
        SCALABLE_TOPICS.check(pulsar_version)
    if isinstance(layout, RoutingTable):
        if pulsar_version is None or pulsar_version == layout.pulsar_version:
            return layout
        return RoutingTable(layout.segments, pulsar_version)
    version = SCALABLE_TOPICS.default if pulsar_version is None else pulsar_version
    if isinstance(layout, LayoutLike):
        return RoutingTable(
            ((s.segment_id, s.hash_range, s.bucket_splits) for s in layout.active_segments()),
            version,
        )
    return RoutingTable(layout, version)


def routing_table_from_json(
    text: str | bytes, pulsar_version: str = SCALABLE_TOPICS.default
) -> RoutingTable:
    """The routing table of a layout JSON, as the JVM functions read it: a whole layout
    (``TopicLayout.to_json()``, checked as ``TopicLayout.from_json`` checks it) or an object
    whose ``segments`` each have ``segment_id``, ``hash_range`` like ``"0000-7fff"``,
    ``bucket_splits`` and optionally ``state`` (sealed segments are skipped). Its
    ``pulsar_version``, when it has one, names the release to route as; else
    ``pulsar_version`` does. ValueError or TypeError, from the library's checks, for a layout
    it refuses."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise InvalidArgument(f"layout is not JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("segments"), list):
        raise InvalidArgument(
            "layout must be a JSON object with a segments list (TopicLayout.to_json())"
        )
    version = data.pop("pulsar_version", None)
    if version is None:
        version = pulsar_version
    else:
        SCALABLE_TOPICS.check(version, "layout.pulsar_version")
    if "epoch" in data:
        return routing_table(TopicLayout.from_dict(data), version)
    return RoutingTable(
        (
            _active(segment, f"layout.segments[{i}]")
            for i, segment in enumerate(data["segments"])
            if _is_active(segment, f"layout.segments[{i}]")
        ),
        version,
    )


def _is_active(segment: Any, name: str) -> bool:
    if not isinstance(segment, dict):
        raise ArgumentTypeError(f"{name} must be an object")
    state = str(segment.get("state", "ACTIVE")).upper()
    if state not in ("ACTIVE", "SEALED"):
        raise InvalidArgument(f"{name}.state must be ACTIVE or SEALED, got {segment['state']!r}")
    return state == "ACTIVE"


def _active(segment: dict[str, Any], name: str) -> tuple[int, HashRange, Sequence[int]]:
    text = segment.get("hash_range")
    if not isinstance(text, str):
        raise ArgumentTypeError(f'{name}.hash_range must be a str like "0000-7fff", got {text!r}')
    try:
        hash_range = HashRange.from_hex(text)
    except ValueError as e:
        raise InvalidArgument(f"{name}.hash_range: {e}") from None
    return segment.get("segment_id"), hash_range, segment.get("bucket_splits", [])  # type: ignore[return-value]
