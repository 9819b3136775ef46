"""Explaining a scalable topic (PIP-483, PIP-486) from a 5.0 broker's admin REST.

A scalable topic ``topic://tenant/ns/name`` is a DAG of segments: active ones tile the
16-bit hash ring, sealed ones were split or merged away. The broker says:

- ``GET /admin/v2/scalable/{tenant}/{ns}/{topic}``: the layout (``epoch``,
  ``nextSegmentId``, ``segments`` by id, each with ``hashRange`` ``{start, end}``,
  ``state``, ``parentIds``, ``childIds``, created and sealed epochs and times,
  ``legacyTopicName``), read into :class:`keyshared.scalable.layout.TopicLayout`;
- ``GET .../stats``: the subscriptions and their consumer counts (not their names);
- ``GET /admin/v2/segments/{tenant}/{ns}/{topic}/{descriptor}/subscription/{sub}/backlog``:
  the entries a subscription has left in one segment; a sealed segment with none left has
  drained.

From these, :func:`explain_scalable` answers: the DAG; which sealed segments still drain
for the subscription and which segments wait for them (a segment is handed to a consumer
only once every parent still in the layout drained, so that no key is read out of order:
:func:`keyshared.scalable.coordinator.is_assignable`); which segment a key goes to (the release's
routing: master routes by the key hash's high half, 5.0.0-M1 by its low half); and, given
the consumers' names (the stats count them only), which consumer reads each segment
(:func:`keyshared.scalable.coordinator.compute_assignment`, with the drained sealed segments).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from keyshared._checks import check_int, check_mapping
from keyshared._core import HashRange
from keyshared.connection import DEFAULT_TIMEOUT_S, ClusterConnection, HttpStatusError
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.explain.keys import check_key_encoding, check_keys, hashed_key
from keyshared.explain.stats import shown
from keyshared.routing.hashing import key_hash
from keyshared.routing.router import SegmentRouter
from keyshared.scalable.coordinator import compute_assignment, is_assignable
from keyshared.scalable.layout import Segment, SegmentState, TopicLayout
from keyshared.scalable.topic_name import TopicDomain, TopicName
from keyshared.versions import MASTER, SCALABLE_TOPICS

#: The releases whose scalable topics explain reproduces: master's (the default) and 5.0.0-M1.
RELEASES = SCALABLE_TOPICS.accepted


def scalable_topic_name(topic: str) -> TopicName:
    """``topic`` parsed; a ValueError unless it is a ``topic://`` name."""
    name = TopicName.get(topic)
    if name.domain is not TopicDomain.topic:
        raise InvalidArgument(
            f"--topic {topic!r} is not a scalable topic (topic://tenant/ns/name)",
            argument="--topic",
        )
    return name


# --- reading the broker's JSON -------------------------------------------------------------


def read_layout(data: object, path: str = "layout") -> TopicLayout:
    """The layout of the broker's ``ScalableTopicMetadata`` JSON, validated as a
    :class:`TopicLayout` is; errors name the field (``layout.segments['3'].hashRange``)."""
    layout = check_mapping(path, data)
    segments = check_mapping(f"{path}.segments", _field(layout, path, "segments"))
    converted = [_segment(f"{path}.segments[{k!r}]", v) for k, v in segments.items()]
    return TopicLayout.from_dict(
        {
            "epoch": _field(layout, path, "epoch"),
            "next_segment_id": _field(layout, path, "nextSegmentId"),
            "segments": converted,
        },
        path,
    )


def _segment(path: str, data: object) -> dict[str, Any]:
    seg = check_mapping(path, data)
    hash_range = check_mapping(f"{path}.hashRange", _field(seg, path, "hashRange"))
    where = f"{path}.hashRange"
    start = check_int(f"{where}.start", _field(hash_range, where, "start"), minimum=0)
    end = check_int(f"{where}.end", _field(hash_range, where, "end"), minimum=start, maximum=0xFFFF)
    return {
        "segment_id": _field(seg, path, "segmentId"),
        "hash_range": HashRange(start, end).to_hex(),
        "state": _field(seg, path, "state"),
        "parent_ids": seg.get("parentIds") or [],
        "child_ids": seg.get("childIds") or [],
        "created_at_ms": seg.get("createdAtMs", 0),
        "sealed_at_ms": seg.get("sealedAtMs", -1),
        "created_at_epoch": seg.get("createdAtEpoch", 0),
        "sealed_at_epoch": seg.get("sealedAtEpoch", -1),
        "legacy_topic_name": seg.get("legacyTopicName") or None,
    }


def _field(data: Mapping[str, Any], path: str, name: str) -> Any:
    if data.get(name) is None:
        raise InvalidArgument(f"{path}.{name} is missing", argument=path)
    return data[name]


@dataclass(frozen=True)
class ScalableSnapshot:
    """What the broker says of a scalable topic at one moment: its ``layout``, the consumer
    count of each subscription, and per subscription the backlog (entries left) of each
    sealed segment, None where the broker could not say (its segment topic not loaded)."""

    topic: str
    layout: TopicLayout
    consumer_counts: Mapping[str, int]
    backlogs: Mapping[str, Mapping[int, int | None]]


def read_snapshot(data: object, path: str = "snapshot") -> ScalableSnapshot:
    """A snapshot of the form :func:`fetch_snapshot` returns (``topic``, ``layout``,
    ``stats``, ``backlogs``: subscription -> segment id -> entries or null); errors name
    the field."""
    snap = check_mapping(path, data)
    topic = str(scalable_topic_name(_field(snap, path, "topic")))
    layout = read_layout(_field(snap, path, "layout"), f"{path}.layout")
    stats = check_mapping(f"{path}.stats", _field(snap, path, "stats"))
    subs = check_mapping(f"{path}.stats.subscriptions", stats.get("subscriptions") or {})
    counts = {
        str(name): check_int(
            f"{path}.stats.subscriptions[{name!r}].consumerCount",
            check_mapping(f"{path}.stats.subscriptions[{name!r}]", sub).get("consumerCount", 0),
            minimum=0,
        )
        for name, sub in subs.items()
    }
    backlogs: dict[str, dict[int, int | None]] = {}
    for name, per_segment in check_mapping(f"{path}.backlogs", snap.get("backlogs") or {}).items():
        where = f"{path}.backlogs[{name!r}]"
        backlogs[str(name)] = {
            _segment_id(f"{where} key", layout, k): None
            if v is None
            else check_int(f"{where}[{k!r}]", v, minimum=0)
            for k, v in check_mapping(where, per_segment).items()
        }
    return ScalableSnapshot(topic, layout, counts, backlogs)


def _segment_id(path: str, layout: TopicLayout, key: object) -> int:
    text = str(key)
    if not text.isascii() or not text.isdigit() or int(text) not in layout.segments:
        raise InvalidArgument(f"{path} {key!r} is not a segment id of the layout", argument=path)
    return int(text)


# --- fetching ------------------------------------------------------------------------------


def _scalable_path(name: TopicName, tail: str = "") -> str:
    return f"/admin/v2/scalable/{name.tenant}/{name.namespace_portion}/{name.local_name}{tail}"


def fetch_snapshot(
    url: str | ClusterConnection, topic: str, timeout_s: float = DEFAULT_TIMEOUT_S
) -> dict[str, Any]:
    """The layout, stats and every sealed segment's backlog per subscription of the
    scalable ``topic`` from the broker at ``url`` (an admin URL, or a
    :class:`~keyshared.connection.ClusterConnection` with its TLS and authentication
    settings), as JSON ready for :func:`read_snapshot` (and to save). Each request is
    bounded by ``timeout_s``; errors name the address."""
    name = scalable_topic_name(topic)
    cluster = ClusterConnection.of(url, timeout_s)
    layout_json = cluster.admin_json("GET", _scalable_path(name))
    stats_path = _scalable_path(name, "/stats")
    stats = cluster.admin_json("GET", stats_path)
    layout = read_layout(layout_json, cluster.admin_address(_scalable_path(name)))
    stats_url = cluster.admin_address(stats_path)
    subscriptions = check_mapping(f"{stats_url}: subscriptions", stats.get("subscriptions") or {})
    backlogs = {
        str(sub): {
            str(s.segment_id): _backlog(cluster, name, s, str(sub))
            for s in layout.segments.values()
            if s.is_sealed and not s.is_legacy
        }
        for sub in subscriptions
    }
    return {"topic": str(name), "layout": layout_json, "stats": stats, "backlogs": backlogs}


def _backlog(cluster: ClusterConnection, name: TopicName, seg: Segment, sub: str) -> int | None:
    path = (
        f"/admin/v2/segments/{name.tenant}/{name.namespace_portion}"
        f"/{name.local_name}/{seg.descriptor}/subscription/{sub}/backlog"
    )
    try:
        value = cluster.admin_json("GET", path)
    except HttpStatusError as e:
        if e.code == 404:  # the segment topic is not loaded: the broker cannot say
            return None
        raise
    return check_int(cluster.admin_address(path), value, minimum=0)


# --- answers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentAnswer:
    """One segment of the DAG for a subscription: ``backlog`` entries left (sealed
    segments; None: unknown or active), ``drained`` (a sealed segment with nothing left;
    None for an active one), ``waiting_for`` the parents it waits to drain before any
    consumer gets it, and ``consumers`` reading it (empty without consumer names)."""

    segment_id: int
    descriptor: str
    hash_range: str
    state: str
    parent_ids: tuple[int, ...]
    child_ids: tuple[int, ...]
    created_at_epoch: int
    sealed_at_epoch: int
    legacy_topic_name: str | None
    backlog: int | None
    drained: bool | None
    assignable: bool
    waiting_for: tuple[int, ...]
    consumers: tuple[str, ...]


@dataclass(frozen=True)
class ScalableKeyAnswer:
    """Where a key's new messages go: ``segment_id`` (the active segment whose range has
    the key's ``routing_hash``), the ``consumers`` reading it, and the sealed segments it
    ``waits_for`` (its messages reach no consumer until they drain)."""

    key: str
    key_hash: int
    routing_hash: int
    segment_id: int
    consumers: tuple[str, ...]
    waits_for: tuple[int, ...]


@dataclass(frozen=True)
class ScalableExplanation:
    """Every answer about one subscription of a scalable topic; ``to_dict`` is its JSON.
    Keys are named as written, in ``key_encoding`` (``utf-8``, or a binary key's bytes in
    hex or base64)."""

    topic: str
    subscription: str
    pulsar_version: str
    epoch: int
    consumer_count: int
    consumer_names: tuple[str, ...]
    lines: tuple[str, ...]
    segments: tuple[SegmentAnswer, ...]
    still_draining: tuple[int, ...]
    keys: tuple[ScalableKeyAnswer, ...]
    key_encoding: str = "utf-8"

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(self, default=_plain))  # type: ignore[no-any-return]


def _plain(value: object) -> Any:
    fields = getattr(value, "__dataclass_fields__", None)
    if fields is None:
        raise ArgumentTypeError(f"{type(value).__name__} is not JSON", argument=None)
    return {name: getattr(value, name) for name in fields}


def routing_hash(key: str | bytes, pulsar_version: str = MASTER) -> int:
    """The 16-bit hash a producer of ``pulsar_version`` routes ``key`` by to a segment:
    master (PIP-486) the high half of the key hash, 5.0.0-M1's V5 client the low half
    (:meth:`keyshared.routing.router.SegmentRouter.hash`)."""
    return SegmentRouter(pulsar_version).hash(key)


def explain_scalable(
    snapshot: ScalableSnapshot,
    subscription: str,
    *,
    consumers: Iterable[str] = (),
    keys: Sequence[str] = (),
    pulsar_version: str = MASTER,
    key_encoding: str = "utf-8",
) -> ScalableExplanation:
    """The DAG, what still drains and what waits for it, where each of ``keys`` goes, and
    with the ``consumers``' names, who reads what, as a ``pulsar_version`` broker and its
    producers have it (routing, and the assignment of
    :func:`keyshared.scalable.coordinator.compute_assignment`). The subscription must be in the
    stats; a STREAM subscription is assumed (the drain order applies). ``keys`` are written
    in ``key_encoding`` (``utf-8``, or a binary key's bytes in ``hex`` or ``base64``) and
    named as written."""
    if subscription not in snapshot.consumer_counts:
        known = ", ".join(repr(s) for s in snapshot.consumer_counts) or "none"
        raise InvalidArgument(
            f"stats.subscriptions has no {subscription!r} (it has {known})", argument="stats"
        )
    encoding = check_key_encoding(key_encoding)
    asked = check_keys(keys, encoding)
    release = SCALABLE_TOPICS.check(pulsar_version)
    names = tuple(sorted(set(check_keys(list(consumers)))))
    layout = snapshot.layout
    backlog = snapshot.backlogs.get(subscription, {})
    drained = {sid for sid, left in backlog.items() if left == 0}
    assignment = compute_assignment(
        layout, TopicName.get(snapshot.topic), names, drained, pulsar_version=release
    )
    readers: dict[int, list[str]] = {}
    for name, assigned in assignment.items():
        for sid in assigned.segment_ids:
            readers.setdefault(sid, []).append(name)
    segments = tuple(
        _segment_answer(layout, s, backlog, drained, tuple(readers.get(s.segment_id, ())), release)
        for s in sorted(layout.segments.values(), key=lambda s: s.segment_id)
    )
    by_id = {s.segment_id: s for s in segments}
    still = tuple(s.segment_id for s in segments if s.drained is False)
    answers = tuple(_key_answer(layout, k, hashed_key(k, encoding), release, by_id) for k in asked)
    return ScalableExplanation(
        topic=snapshot.topic,
        subscription=subscription,
        pulsar_version=release,
        epoch=layout.epoch,
        consumer_count=snapshot.consumer_counts[subscription],
        consumer_names=names,
        lines=_lines(snapshot, subscription, segments, names),
        segments=segments,
        still_draining=still,
        keys=answers,
        key_encoding=encoding,
    )


def _segment_answer(
    layout: TopicLayout,
    seg: Segment,
    backlog: Mapping[int, int | None],
    drained: set[int],
    readers: tuple[str, ...],
    release: str,
) -> SegmentAnswer:
    sealed = seg.state is SegmentState.SEALED
    left = backlog.get(seg.segment_id) if sealed else None
    assignable = is_assignable(seg, layout, drained, pulsar_version=release)
    # What keeps it from every consumer: its parents still draining (none once assignable).
    waiting = (
        ()
        if assignable
        else tuple(p for p in seg.parent_ids if p in layout.segments and p not in drained)
    )
    return SegmentAnswer(
        segment_id=seg.segment_id,
        descriptor=seg.descriptor,
        hash_range=seg.hash_range.to_hex(),
        state=seg.state.value,
        parent_ids=seg.parent_ids,
        child_ids=seg.child_ids,
        created_at_epoch=seg.created_at_epoch,
        sealed_at_epoch=seg.sealed_at_epoch,
        legacy_topic_name=seg.legacy_topic_name,
        backlog=left,
        drained=(left == 0) if sealed else None,
        assignable=assignable,
        waiting_for=waiting,
        consumers=readers,
    )


def _key_answer(
    layout: TopicLayout,
    key: str,
    hashed: str | bytes,
    release: str,
    by_id: Mapping[int, SegmentAnswer],
) -> ScalableKeyAnswer:
    """Where ``key`` (as written; ``hashed``: what it is hashed as) goes."""
    router = SegmentRouter(release)
    h = router.hash(hashed)
    # The router itself: it also routes a layout of legacy segments alone (PIP-475).
    seg = layout.segment(router.route(hashed, layout.active_segments()))
    return ScalableKeyAnswer(
        key=key,
        key_hash=key_hash(hashed),
        routing_hash=h,
        segment_id=seg.segment_id,
        consumers=by_id[seg.segment_id].consumers,
        waits_for=_undrained_ancestors(layout, seg.segment_id, h, by_id),
    )


def _undrained_ancestors(
    layout: TopicLayout, segment_id: int, hash_: int, by_id: Mapping[int, SegmentAnswer]
) -> tuple[int, ...]:
    """The sealed ancestors whose range holds ``hash_`` and that have not drained: the
    key's older messages may still be there, so its new ones wait."""
    out, todo, seen = [], [segment_id], set()
    while todo:
        sid = todo.pop()
        for p in layout.segment(sid).parent_ids:
            if p in seen or p not in layout.segments:
                continue
            seen.add(p)
            parent = layout.segment(p)
            if parent.hash_range.start <= hash_ <= parent.hash_range.end:
                if not by_id[p].drained:
                    out.append(p)
                todo.append(p)
    return tuple(sorted(out))


def _lines(
    snapshot: ScalableSnapshot,
    subscription: str,
    segments: Sequence[SegmentAnswer],
    names: Sequence[str],
) -> tuple[str, ...]:
    active = [s for s in segments if s.state == SegmentState.ACTIVE.value]
    sealed = [s for s in segments if s.state == SegmentState.SEALED.value]
    count = snapshot.consumer_counts[subscription]
    lines = [
        f"{snapshot.topic} epoch {snapshot.layout.epoch}: {len(active)} active,"
        f" {len(sealed)} sealed segment(s); subscription {shown(subscription)}:"
        f" {count} consumer(s)"
    ]
    waits: dict[int, list[int]] = {}
    for s in segments:
        for p in s.waiting_for:
            waits.setdefault(p, []).append(s.segment_id)
    for s in sealed:
        if s.legacy_topic_name:
            continue
        waiting = waits.get(s.segment_id, [])
        then = f"; segment(s) {_ids(waiting)} wait for it" if waiting else ""
        if s.drained:
            lines.append(f"segment {s.segment_id} ({s.hash_range}) drained")
        elif s.backlog is None:
            lines.append(
                f"segment {s.segment_id} ({s.hash_range}) may still drain: the broker did not"
                f" say (its segment topic is not loaded){then}"
            )
        else:
            lines.append(
                f"segment {s.segment_id} ({s.hash_range}) still drains: {s.backlog}"
                f" entr{'y' if s.backlog == 1 else 'ies'} of {shown(subscription)} left{then}"
            )
    if not names and count:
        lines.append(
            "the stats count the consumers but do not name them: give --consumer NAME for"
            " each to see who reads which segment"
        )
    elif names and len(names) != count:
        lines.append(f"{len(names)} consumer name(s) given, the broker counts {count}")
    return tuple(lines)


def _ids(ids: Iterable[int]) -> str:
    return ", ".join(str(i) for i in ids)


__all__ = [
    "RELEASES",
    "ScalableExplanation",
    "ScalableKeyAnswer",
    "ScalableSnapshot",
    "SegmentAnswer",
    "explain_scalable",
    "fetch_snapshot",
    "read_layout",
    "read_snapshot",
    "routing_hash",
    "scalable_topic_name",
]
