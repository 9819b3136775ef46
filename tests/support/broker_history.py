"""What a running 5.0.0-M1 broker saw and did, rebuilt from its metadata store and its log,
for the end-to-end comparisons of its scalable topics with keyshared.

The oracle's ``metadata.watch`` records every version of the records under a scalable topic
in the broker's ZooKeeper, each with the store's stat: the topic's metadata (its layout and
auto-scale override), each segment's load record (whose modification time is the sample's
age for the auto-scale evaluator, as in Pulsar's controller) and each consumer
registration. :class:`MetadataHistory` answers what those records held at any moment; the
broker's own log gives its auto-scale decisions (:func:`auto_scale_decisions`). The two
together give the events a subscription's coordinator reacted to, in order
(:func:`coordinator_events`: registrations and layouts from the store, disconnects,
evictions and drains from the log), for keyshared's ``CoordinatorStateMachine``; each V5
client's own log gives the assignments it applied (:func:`applied_assignments`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import keyshared as ks
from support.pulsar_oracle import MILESTONE

#: The auto-scale override's fields (Pulsar's ``AutoScalePolicyOverride``) with keyshared's
#: names, and the factor from the override's unit to keyshared's (seconds to ms).
OVERRIDE_FIELDS = {
    "enabled": ("enabled", None),
    "maxSegments": ("max_segments", None),
    "minSegments": ("min_segments", None),
    "maxDagDepth": ("max_dag_depth", None),
    "splitCooldownSeconds": ("split_cooldown_ms", 1000),
    "mergeCooldownSeconds": ("merge_cooldown_ms", 1000),
    "mergeWindowSeconds": ("merge_window_ms", 1000),
    "splitMsgRateInThreshold": ("split_msg_rate_in", 1.0),
    "splitBytesRateInThreshold": ("split_bytes_rate_in", 1.0),
    "splitMsgRateOutThreshold": ("split_msg_rate_out", 1.0),
    "splitBytesRateOutThreshold": ("split_bytes_rate_out", 1.0),
    "mergeMsgRateInThreshold": ("merge_msg_rate_in", 1.0),
    "mergeBytesRateInThreshold": ("merge_bytes_rate_in", 1.0),
    "mergeMsgRateOutThreshold": ("merge_msg_rate_out", 1.0),
    "mergeBytesRateOutThreshold": ("merge_bytes_rate_out", 1.0),
}


def policy_of(override: Mapping[str, Any]) -> ks.AutoScalePolicy:
    """keyshared's policy of a topic whose override sets every field (so that the broker's
    defaults play no part). The fields M1 does not have (PIP-486's) keep keyshared's
    defaults: the 5.0.0-M1 profile of :func:`keyshared.decide` does not read them."""
    missing = sorted(set(OVERRIDE_FIELDS) - set(override))
    if missing:
        raise ValueError(f"the override leaves {missing} to the broker's defaults")
    fields: dict[str, Any] = {}
    for name, (ours, factor) in OVERRIDE_FIELDS.items():
        value = override[name]
        fields[ours] = value if factor is None else type(factor)(value * factor)
    return ks.AutoScalePolicy(**fields)


def layout_of(metadata: Mapping[str, Any]) -> ks.TopicLayout:
    """A scalable topic's metadata as the broker stores it (and its admin API answers) as
    a :class:`keyshared.TopicLayout`. M1 has no entry buckets: each segment has one."""
    segments = []
    for s in metadata["segments"].values():
        r = s["hashRange"]
        segments.append(
            ks.Segment(
                s["segmentId"],
                ks.HashRange(r["start"], r["end"]),
                state=ks.SegmentState(s["state"]),
                parent_ids=tuple(s["parentIds"]),
                child_ids=tuple(s["childIds"]),
                created_at_ms=s["createdAtMs"],
                sealed_at_ms=s["sealedAtMs"],
                created_at_epoch=s["createdAtEpoch"],
                sealed_at_epoch=s["sealedAtEpoch"],
                legacy_topic_name=s.get("legacyTopicName"),
            )
        )
    return ks.TopicLayout(
        metadata["epoch"], metadata["nextSegmentId"], {s.segment_id: s for s in segments}
    )


def sample_of(record: Mapping[str, Any], modified_at_ms: int) -> ks.scalable.SegmentLoadSample:
    """A segment's load record (Pulsar's ``SegmentLoadStats`` as JSON) and its modification
    time."""
    stats = ks.scalable.SegmentLoadStats(
        record["msgRateIn"], record["bytesRateIn"], record["msgRateOut"], record["bytesRateOut"]
    )
    return ks.scalable.SegmentLoadSample(stats, modified_at_ms)


@dataclass(frozen=True)
class Inputs:
    """What the controller read at one moment: the layout and override of the latest
    metadata version, the last load record of each active segment, each subscription's
    registered consumers, and the cooldown clocks (the latest creation of a split's child
    and of a merge's child in every layout seen so far, as the controller stamps them)."""

    layout: ks.TopicLayout
    override: Mapping[str, Any]
    samples: Mapping[int, ks.scalable.SegmentLoadSample]
    consumers: Mapping[str, int]
    last_split_at_ms: int | None
    last_merge_at_ms: int | None

    def decide(self, now_ms: int, pulsar_version: str = MILESTONE) -> ks.Decision:
        """keyshared's decision on these inputs at ``now_ms`` under ``pulsar_version``'s
        rules (the broker's, 5.0.0-M1, by default); no segment was ever rebucketed."""
        return ks.decide(
            self.layout,
            self.samples,
            self.consumers,
            policy_of(self.override),
            now_ms,
            self.last_split_at_ms,
            self.last_merge_at_ms,
            pulsar_version=pulsar_version,
        )


class MetadataHistory:
    """Every version of a scalable topic's records, from ``metadata.events`` records.

    ``root`` is the topic's path (``/topics/<tenant>/<ns>/<topic>``). A record seen twice
    (read when the watch started and reported again) counts once. A version takes effect
    at its modification time; a deletion when the watch saw it."""

    def __init__(self, root: str, records: Iterable[Mapping[str, Any]]) -> None:
        self.root = root
        self._topic: list[tuple[int, dict[str, Any]]] = []
        self._loads: dict[int, list[tuple[int, ks.scalable.SegmentLoadSample | None]]] = {}
        self._consumers: dict[tuple[str, str], list[tuple[int, bool]]] = {}
        self.controller_since_ms: int | None = None
        seen: set[tuple[str, int]] = set()
        for r in records:
            if r["kind"] == "data":
                if (r["path"], r["version"]) in seen:
                    continue
                seen.add((r["path"], r["version"]))
            self._add(r)
        self.change_times = sorted(
            {t for t, _ in self._topic}
            | {t for versions in self._loads.values() for t, _ in versions}
            | {t for versions in self._consumers.values() for t, _ in versions}
        )

    def _add(self, r: Mapping[str, Any]) -> None:
        path: str = r["path"]
        if not path.startswith(self.root):
            return
        parts = path[len(self.root) :].strip("/").split("/") if path != self.root else []
        deleted = r["kind"] == "deleted"
        at = r["seen_ms"] if deleted else r["mtime_ms"]
        if not parts and not deleted:
            self._topic.append((at, json.loads(r["data"])))
        elif parts == ["controller"] and not deleted and self.controller_since_ms is None:
            self.controller_since_ms = r["ctime_ms"]
        elif len(parts) == 3 and parts[0] == "segments" and parts[2] == "load":
            sample = None if deleted else sample_of(json.loads(r["data"]), at)
            self._loads.setdefault(int(parts[1]), []).append((at, sample))
        elif len(parts) == 4 and parts[0] == "subscriptions" and parts[2] == "consumers":
            at = r["seen_ms"] if deleted else r["ctime_ms"]
            self._consumers.setdefault((parts[1], parts[3]), []).append((at, not deleted))

    def versions(self) -> list[tuple[int, dict[str, Any]]]:
        """The topic's metadata versions in order, each with its modification time."""
        return sorted(self._topic, key=lambda v: v[0])

    def at(self, t_ms: int) -> Inputs:
        """The records in force at ``t_ms`` (each version modified at or before it)."""
        versions = [md for at, md in self.versions() if at <= t_ms]
        if not versions:
            raise ValueError(f"the topic has no metadata at {t_ms}")
        layout = layout_of(versions[-1])
        samples = {}
        for sid in (s.segment_id for s in layout.active_segments()):
            current = [s for at, s in sorted(self._loads.get(sid, []), key=_time) if at <= t_ms]
            if current and current[-1] is not None:
                samples[sid] = current[-1]
        consumers: dict[str, int] = {}
        for (sub, _), changes in self._consumers.items():
            current_state = [present for at, present in sorted(changes, key=_time) if at <= t_ms]
            if current_state and current_state[-1]:
                consumers[sub] = consumers.get(sub, 0) + 1
        split, merge = _clocks(layout_of(md) for md in versions)
        return Inputs(layout, versions[-1]["autoScalePolicy"], samples, consumers, split, merge)

    def registrations(self, subscription: str) -> list[tuple[int, str]]:
        """The consumer registrations of ``subscription`` the store created, each with its
        creation time, in order (a registration deleted and created again counts twice)."""
        return sorted(
            (at, name)
            for (sub, name), changes in self._consumers.items()
            if sub == subscription
            for at, present in changes
            if present
        )

    def changed_between(self, start_ms: int, end_ms: int) -> bool:
        """Whether any record took a new value in ``(start_ms, end_ms]``."""
        return any(start_ms < t <= end_ms for t in self.change_times)


def _time(version: tuple[int, Any]) -> int:
    return version[0]


def _clocks(layouts: Iterable[ks.TopicLayout]) -> tuple[int | None, int | None]:
    """The controller's cooldown clocks: the latest creation of a segment with one parent
    (a split) and with two (a merge) in any of ``layouts`` (so that a pruned segment still
    counts)."""
    split: int | None = None
    merge: int | None = None
    for layout in layouts:
        for s in layout.segments.values():
            if len(s.parent_ids) == 1:
                split = s.created_at_ms if split is None else max(split, s.created_at_ms)
            elif len(s.parent_ids) >= 2:
                merge = s.created_at_ms if merge is None else max(merge, s.created_at_ms)
    return split, merge


@dataclass(frozen=True)
class BrokerDecision:
    """One ``Auto split`` or ``Auto merge`` line of the broker's log."""

    at_ms: int
    decision: ks.scalable.Split | ks.scalable.Merge
    trigger: str


_DECISION_LINE = re.compile(
    r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) .* ScalableTopicController - Auto (split|merge) \{(.*)\}$"
)


def auto_scale_decisions(
    log_lines: Iterable[str], topic: str, near_ms: int
) -> list[BrokerDecision]:
    """The broker's auto split and merge decisions on ``topic`` (``topic://...``), in log
    order. The log's times of day are the broker's local time (this machine's); each is
    placed on the day that brings it nearest ``near_ms`` (epoch ms)."""
    out = []
    for line in log_lines:
        m = _DECISION_LINE.match(line.rstrip("\n"))
        if m is None:
            continue
        attrs = dict(item.split("=", 1) for item in m.group(6).split(", "))
        if attrs.get("topic") != topic:
            continue
        h, minute, second, ms = (int(g) for g in m.groups()[:4])
        at = _epoch_ms(h, minute, second, ms, near_ms)
        decision: ks.scalable.Split | ks.scalable.Merge
        if m.group(5) == "split":
            decision = ks.scalable.Split(int(attrs["segmentId"]), attrs["reason"])
        else:
            decision = ks.scalable.Merge(
                int(attrs["segmentId1"]), int(attrs["segmentId2"]), attrs["reason"]
            )
        out.append(BrokerDecision(at, decision, attrs["trigger"]))
    return out


_LINE_TIME = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) ")


def log_line_ms(line: str, near_ms: int) -> int:
    """The epoch ms of a broker log line (its time of day, placed on the day nearest
    ``near_ms``, as :func:`auto_scale_decisions` does)."""
    m = _LINE_TIME.match(line)
    if m is None:
        raise ValueError(f"not a broker log line: {line!r}")
    h, minute, second, ms = (int(g) for g in m.groups())
    return _epoch_ms(h, minute, second, ms, near_ms)


def _epoch_ms(h: int, m: int, s: int, ms: int, near_ms: int) -> int:
    near = datetime.fromtimestamp(near_ms / 1000).astimezone()
    candidates = []
    for days in (-1, 0, 1):
        day = near + timedelta(days=days)
        local = day.replace(hour=h, minute=m, second=s, microsecond=ms * 1000)
        candidates.append(round(local.astimezone(UTC).timestamp() * 1000))
    return min(candidates, key=lambda t: abs(t - near_ms))


_COORDINATOR_LINE = re.compile(
    r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) .* (?:SubscriptionCoordinator|ConsumerSession) - "
    r"(Sealed segments drained, rebalancing|Consumer evicted after grace period"
    r"|Consumer disconnected; starting grace period) \{(.*)\}$"
)
# A log line's fields: ``key=value``, a value being a list (``drained=[2, 5]``) or text.
_FIELD = re.compile(r"(\w+)=(\[[^\]]*\]|[^,]*)(?:, |$)")
#: Events of these kinds logged this close together (ms) are one step: sessions dropped by
#: one connection are disconnected, and evicted, together, and M1 rebalances once the
#: store answered, by when every one of them is gone.
BURST_MS = 100


def _fields(text: str) -> dict[str, str]:
    return {m[1]: m[2] for m in _FIELD.finditer(text)}


def coordinator_events(
    log_lines: Iterable[str],
    history: MetadataHistory,
    topic: str,
    subscription: str,
    near_ms: int,
) -> list[tuple[int, list[ks.scalable.CoordinatorEvent]]]:
    """The events the coordinator of ``topic``'s ``subscription`` reacted to, as steps
    ``(at_ms, events)`` in the order they happened: each consumer registration the store
    created, each layout version after the first (split, merge, GC prune), and the
    coordinator's log lines of a disconnect, an eviction and a drain. A step holds one
    event, or several disconnects or evictions logged within :data:`BURST_MS` of each
    other. Log times are placed on the day nearest ``near_ms`` (:func:`auto_scale_decisions`)."""
    timed: list[tuple[int, int, ks.scalable.CoordinatorEvent]] = []
    for i, (at, name) in enumerate(history.registrations(subscription)):
        timed.append((at, len(timed), ks.scalable.ConsumerRegistered(name, i)))
    for at, metadata in history.versions()[1:]:
        timed.append((at, len(timed), ks.scalable.LayoutChanged(layout_of(metadata))))
    for line in log_lines:
        m = _COORDINATOR_LINE.match(line.rstrip("\n"))
        if m is None:
            continue
        attrs = _fields(m.group(6))
        if attrs.get("topic") != topic or attrs.get("subscription") != subscription:
            continue
        at = _epoch_ms(*(int(g) for g in m.groups()[:4]), near_ms)
        event: ks.scalable.CoordinatorEvent
        if m.group(5).startswith("Sealed"):
            ids = frozenset(int(i) for i in attrs["drained"].strip("[]").split(",") if i.strip())
            event = ks.scalable.SegmentsDrained(ids)
        elif m.group(5).startswith("Consumer evicted"):
            event = ks.scalable.ConsumerEvicted(attrs["consumer"])
        else:
            event = ks.scalable.ConsumerDisconnected(attrs["consumerName"], at)
        timed.append((at, len(timed), event))
    steps: list[tuple[int, list[ks.scalable.CoordinatorEvent]]] = []
    for at, _, event in sorted(timed, key=lambda t: (t[0], t[1])):
        if steps and _joins(steps[-1], at, event):
            steps[-1][1].append(event)
        else:
            steps.append((at, [event]))
    return steps


def _joins(
    step: tuple[int, list[ks.scalable.CoordinatorEvent]],
    at: int,
    event: ks.scalable.CoordinatorEvent,
) -> bool:
    kinds = (ks.scalable.ConsumerDisconnected, ks.scalable.ConsumerEvicted)
    last = step[1][-1]
    return isinstance(event, kinds) and type(last) is type(event) and at - step[0] <= BURST_MS


_APPLIED_LINE = re.compile(
    r"ScalableStreamConsumer@\d+\] - Stream consumer assignment applied \{(.*)\}$"
)


def applied_assignments(
    client_log: Iterable[str], topic: str, subscription: str
) -> list[frozenset[int]]:
    """The segments a V5 stream consumer of ``topic``'s ``subscription`` applied, each
    assignment it was given in turn, from its JVM's log (which must hold no other consumer
    of that subscription): M1's ``ScalableStreamConsumer`` logs the segment ids of every
    assignment it applies, the first (the subscribe's answer) included."""
    applied = []
    for line in client_log:
        m = _APPLIED_LINE.search(line.rstrip("\n"))
        if m is None:
            continue
        attrs = _fields(m.group(1))
        if attrs.get("topic") == topic and attrs.get("subscription") == subscription:
            segments = attrs["segments"].strip("[]")
            applied.append(frozenset(int(i) for i in segments.split(",") if i.strip()))
    return applied
