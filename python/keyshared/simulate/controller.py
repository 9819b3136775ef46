"""The scalable-topic controller of one simulated topic: PIP-483 load reporting
(:class:`keyshared.SegmentLoadReporter`), split / merge / rebucket decisions
(:func:`keyshared.decide`, applied by :func:`keyshared.apply_decision`), and the assignment
of the segments consumers may read: PIP-486 bucket assignment (``"buckets"``), or Pulsar's
``SubscriptionCoordinator`` rule (``"segments"``: whole segments, surplus consumers sharing
bucketed ones).

Times in ms of virtual time, rates in msg/s and B/s.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from keyshared.errors import InvalidArgument
from keyshared.scalable.controller import apply_decision
from keyshared.scalable.coordinator import compute_assignment
from keyshared.scalable.layout import TopicLayout
from keyshared.scalable.load_reporter import SegmentLoadReporter
from keyshared.scalable.ownership import (
    BucketAssignment,
    BucketConsumer,
    contiguous_assignment,
    sticky_assignment,
)
from keyshared.scalable.policy import (
    AutoScalePolicy,
    Decision,
    NoAction,
    SegmentLoadSample,
    SegmentLoadStats,
    decide,
    last_operation_times,
)
from keyshared.scalable.topic_name import TopicName

#: The subscription every simulated topic has; the controller counts its consumers.
SUBSCRIPTION = "sub"
#: How consumers get what they read: PIP-486 buckets, or the coordinator's segments.
Assignment = Literal["buckets", "segments"]
ASSIGNMENTS: tuple[Assignment, ...] = ("buckets", "segments")
_Counters = Sequence[int]
_Unit = tuple[int, int]
#: The coordinator names segment topics after the scalable topic; the simulator needs none.
_TOPIC = TopicName.get("topic://public/default/simulated")


class LoadReporter:
    """PIP-483's ``SegmentLoadReporter`` for a topic's active segments: on each report, a
    segment's rates over the last ``window_ms`` (or its life, if shorter) are written as its
    sample when they moved materially (more than ``threshold``, a fraction) since the last
    written sample, or when none was written yet."""

    def __init__(self, window_ms: int, threshold: float = 0.25) -> None:
        self._window_ms = window_ms
        self._writer = SegmentLoadReporter(threshold)
        self._history: dict[int, deque[tuple[int, tuple[int, ...]]]] = {}
        self.samples: dict[int, SegmentLoadSample] = {}

    def track(self, segment_id: int, created_ms: int) -> None:
        """Starts reporting a new active segment (its counters start at zero)."""
        self._history[segment_id] = deque([(created_ms, (0, 0, 0, 0))])

    def untrack(self, segment_id: int) -> None:
        """Stops reporting a sealed segment; its last sample stays in the store."""
        self._history.pop(segment_id, None)
        self._writer = self._writer.forget(SUBSCRIPTION, segment_id)

    def report(self, now_ms: int, counters: Mapping[int, _Counters]) -> None:
        """``counters``: per tracked segment, its cumulative messages in, bytes in, messages
        out and bytes out."""
        for segment_id, history in self._history.items():
            current = tuple(counters[segment_id])
            history.append((now_ms, current))
            while len(history) > 2 and history[1][0] <= now_ms - self._window_ms:
                history.popleft()
            since_ms, base = history[0]
            if now_ms <= since_ms:
                continue
            seconds = (now_ms - since_ms) / 1000
            stats = SegmentLoadStats(
                *((c - b) / seconds for c, b in zip(current, base, strict=True))
            )
            write, writer = self._writer.report_if_changed(SUBSCRIPTION, segment_id, stats)
            if write:
                self._writer = writer
                self.samples[segment_id] = SegmentLoadSample(stats, now_ms)


@dataclass(frozen=True)
class DecisionRecord:
    """A decision the controller took, with what prompted it (``periodic`` or a consumer
    change) and the layout it left (active segments and their buckets)."""

    at_ms: int
    trigger: str
    decision: Decision
    active_segments: int
    buckets: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "at_ms": self.at_ms,
            "trigger": self.trigger,
            **self.decision.to_dict(),
            "active_segments": self.active_segments,
            "buckets": self.buckets,
        }


class Controller:
    """Decides and applies layout operations for one topic. Event-driven evaluations (a
    consumer change) are all recorded, NoAction included, since they say why a new consumer
    got no segment; periodic ones are recorded when they act, and counted otherwise."""

    def __init__(
        self, layout: TopicLayout, policy: AutoScalePolicy, assignment: Assignment = "buckets"
    ) -> None:
        if assignment not in ASSIGNMENTS:
            raise InvalidArgument(
                f'assignment must be "buckets" or "segments", got {assignment!r}',
                argument="assignment",
            )
        self.layout = layout
        self.policy = policy
        self.assignment = assignment
        self.clocks = last_operation_times(layout)
        self.decisions: list[DecisionRecord] = []
        self.idle_evaluations = 0
        self.last_idle_reason: str | None = None

    def evaluate(
        self,
        now_ms: int,
        consumers: int,
        samples: Mapping[int, SegmentLoadSample],
        trigger: str,
    ) -> TopicLayout | None:
        """Runs the policy; returns the new layout when it acted."""
        active = {s.segment_id for s in self.layout.active_segments()}
        decision = decide(
            self.layout,
            {sid: sample for sid, sample in samples.items() if sid in active},
            {SUBSCRIPTION: consumers},
            self.policy,
            now_ms,
            **self.clocks.to_dict(),
        )
        if isinstance(decision, NoAction):
            self.last_idle_reason = decision.reason
            if trigger == "periodic":
                self.idle_evaluations += 1
                return None
        else:
            self.layout = apply_decision(self.layout, decision, self.policy, now_ms)
            self.clocks = self.clocks.after(decision, now_ms)
        self.decisions.append(
            DecisionRecord(
                now_ms,
                trigger,
                decision,
                len(self.layout.active_segments()),
                self.layout.total_bucket_count,
            )
        )
        return None if isinstance(decision, NoAction) else self.layout

    def assign(
        self,
        units: Sequence[_Unit],
        previous: Mapping[_Unit, int],
        consumers: Sequence[BucketConsumer],
        retired: Collection[int],
    ) -> dict[_Unit, int | None]:
        """The owner of every (segment, bucket) unit consumers may read, by this
        controller's assignment rule. ``retired``: the sealed segments that drained."""
        if self.assignment == "buckets":
            return assign_units(units, previous, consumers)
        return assign_segments(self.layout, units, consumers, retired)


def assign_units(
    units: Sequence[tuple[int, int]],
    previous: Mapping[tuple[int, int], int],
    consumers: Sequence[BucketConsumer],
) -> dict[tuple[int, int], int | None]:
    """PIP-486's controller assignment over every (segment, bucket) consumers may read,
    as one balanced assignment (each consumer owns ``U // k`` or ``U // k + 1`` of the
    ``U`` units) that keeps as many units with their previous (connected) owner as
    possible: :func:`keyshared.sticky_assignment` over the units in order."""
    if not units:
        return {}
    before = BucketAssignment(tuple(previous.get(unit) for unit in units))
    after = sticky_assignment(before, consumers)
    return dict(zip(units, after.owners, strict=True))


def assign_segments(
    layout: TopicLayout,
    units: Sequence[_Unit],
    consumers: Sequence[BucketConsumer],
    retired: Collection[int],
) -> dict[_Unit, int | None]:
    """Pulsar's ``SubscriptionCoordinator`` rule (:func:`keyshared.compute_assignment`, with
    parent-drain ordering: a STREAM subscription) over the units' segments: a segment owned
    whole gives its owner every bucket; a shared one splits its buckets among its sharers
    as the broker's entry-bucket dispatcher does (:func:`keyshared.contiguous_assignment`)."""
    by_name = {c.name: c for c in consumers}
    assignment = compute_assignment(layout, _TOPIC, by_name, retired)
    sharers: dict[int, list[BucketConsumer]] = {}
    for name, consumer_assignment in assignment.items():
        for segment_id in consumer_assignment.segment_ids:
            sharers.setdefault(segment_id, []).append(by_name[name])
    owners: dict[int, BucketAssignment] = {
        sid: contiguous_assignment(members, layout.segment(sid).bucket_count)
        for sid, members in sharers.items()
    }
    return {
        (sid, bucket): owners[sid].owners[bucket] if sid in owners else None
        for sid, bucket in units
    }


__all__ = [
    "ASSIGNMENTS",
    "SUBSCRIPTION",
    "Assignment",
    "Controller",
    "DecisionRecord",
    "LoadReporter",
    "assign_segments",
    "assign_units",
]
