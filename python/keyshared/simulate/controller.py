"""The scalable-topic controller of one simulated topic: PIP-483 load reporting and
split / merge / rebucket decisions (:func:`keyshared.decide`), and PIP-486 bucket
assignment across the segments consumers may read.

Times in ms of virtual time, rates in msg/s and B/s.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from keyshared.layout import TopicLayout
from keyshared.ownership import BucketAssignment, BucketConsumer, sticky_assignment
from keyshared.policy import (
    AutoScalePolicy,
    Decision,
    Merge,
    NoAction,
    Rebucket,
    SegmentLoadSample,
    SegmentLoadStats,
    Split,
    decide,
    is_material_change,
    last_operation_times,
)

#: The subscription every simulated topic has; the controller counts its consumers.
SUBSCRIPTION = "sub"
_Counters = Sequence[int]


class LoadReporter:
    """PIP-483's ``SegmentLoadReporter`` for a topic's active segments: on each report, a
    segment's rates over the last ``window_ms`` (or its life, if shorter) are written as its
    sample when they moved materially (more than ``threshold``, a fraction) since the last
    written sample, or when none was written yet."""

    def __init__(self, window_ms: int, threshold: float = 0.25) -> None:
        self._window_ms = window_ms
        self._threshold = threshold
        self._history: dict[int, deque[tuple[int, tuple[int, ...]]]] = {}
        self.samples: dict[int, SegmentLoadSample] = {}

    def track(self, segment_id: int, created_ms: int) -> None:
        """Starts reporting a new active segment (its counters start at zero)."""
        self._history[segment_id] = deque([(created_ms, (0, 0, 0, 0))])

    def untrack(self, segment_id: int) -> None:
        """Stops reporting a sealed segment; its last sample stays in the store."""
        self._history.pop(segment_id, None)

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
            last = self.samples.get(segment_id)
            if last is None or is_material_change(last.stats, stats, self._threshold):
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

    def __init__(self, layout: TopicLayout, policy: AutoScalePolicy) -> None:
        self.layout = layout
        self.policy = policy
        recovered = last_operation_times(layout)
        self._last = {
            "split": recovered.split_at_ms,
            "merge": recovered.merge_at_ms,
            "rebucket": recovered.rebucket_at_ms,
        }
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
            self._last["split"],
            self._last["merge"],
            self._last["rebucket"],
        )
        if isinstance(decision, NoAction):
            self.last_idle_reason = decision.reason
            if trigger == "periodic":
                self.idle_evaluations += 1
                return None
        else:
            self.layout = self._apply(decision, now_ms)
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

    def _apply(self, decision: Decision, now_ms: int) -> TopicLayout:
        layout = self.layout
        if isinstance(decision, Split):
            self._last["split"] = now_ms
            return layout.split_segment(decision.segment_id, now_ms)
        if isinstance(decision, Merge):
            self._last["merge"] = now_ms
            return layout.merge_segments(
                decision.segment_id_1,
                decision.segment_id_2,
                now_ms,
                max_buckets=self.policy.max_entry_buckets_per_segment,
            )
        assert isinstance(decision, Rebucket)
        self._last["rebucket"] = now_ms
        for segment_id in decision.segment_ids:
            layout = layout.rebucket_segment(segment_id, decision.bucket_count, now_ms)
        return layout


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


__all__ = ["SUBSCRIPTION", "Controller", "DecisionRecord", "LoadReporter", "assign_units"]
