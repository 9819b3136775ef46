"""One simulated topic: its producers, store, controller, per-segment dispatchers and
consumers, and the transitions between them (layout operations, segments draining and
retiring, consumers joining and leaving, bucket reassignment).

A segment may be read once every parent of it has drained and retired: that is what
carries per-key order across splits, merges and rebucket rollovers (PIP-468's DAG order).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from keyshared._core import BucketCheckpoints
from keyshared.scalable.batching import EntryBatch
from keyshared.scalable.ownership import BucketAssignment, BucketConsumer
from keyshared.simulate.controller import Controller, LoadReporter
from keyshared.simulate.dispatch import HandOff, SegmentDispatcher, TopicContext
from keyshared.simulate.invariants import EventTrail, TopicChecker
from keyshared.simulate.model import Delivery, Entry
from keyshared.simulate.scenario import Scenario, TopicSpec
from keyshared.simulate.store import TopicStore
from keyshared.simulate.workload import ConsumerSim, KeySpace, ProducerSim, Schedule

_I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class DrainRecord:
    """A sealed segment that drained and retired: its backlog when sealed (messages), how
    long it took from sealing (or from becoming readable, if later) to drain, and how many
    consumers processed its entries at once at most."""

    segment_id: int
    bucket_count: int
    sealed_at_ms: int
    readable_at_ms: int
    drained_at_ms: int
    backlog_at_seal: int
    messages: int
    max_parallel_consumers: int
    handoff_waits_ms: tuple[float, ...]


@dataclass
class TopicSeries:
    """One topic's time series, one point per sample."""

    backlog: list[int] = field(default_factory=list)
    busy_consumers: list[int] = field(default_factory=list)
    owning_consumers: list[int] = field(default_factory=list)
    connected_consumers: list[int] = field(default_factory=list)
    active_segments: list[int] = field(default_factory=list)
    readable_buckets: list[int] = field(default_factory=list)
    active_buckets: list[int] = field(default_factory=list)
    withheld_buckets: list[int] = field(default_factory=list)


class TopicSim:
    """A topic replica in a run; the engine drives it through ticks and consumer events."""

    def __init__(
        self,
        name: str,
        spec: TopicSpec,
        scenario: Scenario,
        seeds: np.random.SeedSequence,
        handoff: HandOff,
        trail: EventTrail,
        schedule: Schedule,
        first_consumer_id: int,
    ) -> None:
        self.name = name
        self.spec = spec
        self._tick_ms = scenario.tick_ms
        self.keys = KeySpace(spec.producers)
        self.store = TopicStore(self.keys.size)
        self.checker = TopicChecker(name, self.keys.size, trail)
        self.checkpoints = BucketCheckpoints()
        self.ctx = TopicContext(
            name,
            self.store,
            self.checker,
            self.checkpoints,
            handoff,
            spec.window,
            self._deliver,
            self._segment_drained,
        )
        self.controller = Controller(spec.layout, spec.policy, spec.assignment)
        self.reporter = LoadReporter(scenario.load_rate_window_ms)
        self.dispatchers: dict[int, SegmentDispatcher] = {}
        self._retired: set[int] = set()
        self.drains: list[DrainRecord] = []
        self._readable_at: dict[int, int] = {}
        self._sealed_backlog: dict[int, int] = {}
        producer_seeds, consumer_seeds = seeds.spawn(2)
        self.producers = self._producers(scenario, producer_seeds)
        self.groups = self._consumer_groups(consumer_seeds, schedule, first_consumer_id)
        self.consumers = {c.consumer_id: c for group in self.groups for c in group}
        self.next_consumer_id = first_consumer_id + len(self.consumers)
        self._owners: dict[tuple[int, int], int | None] = {}
        self._assigned_for: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        self._changed = True
        self.moves = 0
        self.series = TopicSeries()
        for segment in spec.layout.segments.values():
            self._open(segment.segment_id, 0)

    def _producers(self, scenario: Scenario, seeds: np.random.SeedSequence) -> list[ProducerSim]:
        spec = self.spec
        return [
            ProducerSim(
                producer,
                self.keys,
                spec.batching,
                spec.layout,
                np.random.default_rng(seed),
                scenario.duration_ms,
            )
            for producer, seed in zip(spec.producers, seeds.spawn(len(spec.producers)), strict=True)
        ]

    def _consumer_groups(
        self, seeds: np.random.SeedSequence, schedule: Schedule, first_id: int
    ) -> list[list[ConsumerSim]]:
        """One list of consumers per consumer spec; ids count up from ``first_id``."""
        groups = []
        next_id = first_id
        for spec, group_seed in zip(
            self.spec.consumers, seeds.spawn(len(self.spec.consumers)), strict=True
        ):
            group = []
            for name, seed in zip(spec.names(), group_seed.spawn(spec.count), strict=True):
                group.append(
                    ConsumerSim(next_id, name, spec, np.random.default_rng(seed), schedule)
                )
                next_id += 1
            groups.append(group)
        return groups

    # --- segments ---------------------------------------------------------------------

    def _open(self, segment_id: int, now_ms: int) -> None:
        segment = self.controller.layout.segment(segment_id)
        self.store.open_segment(segment_id, segment.bucket_count)
        self.dispatchers[segment_id] = SegmentDispatcher(self.ctx, segment)
        if segment.is_active:
            self.reporter.track(segment_id, now_ms)

    def _readable(self, segment_id: int) -> bool:
        parents = self.controller.layout.segment(segment_id).parent_ids
        return not any(p in self.dispatchers for p in parents)

    def _apply_layout(self, now_us: int) -> None:
        """After a layout operation: open the new segments, seal the old ones, redirect
        the producers."""
        layout = self.controller.layout
        now_ms = now_us // 1000
        for segment_id, segment in layout.segments.items():
            if segment_id not in self.dispatchers and segment_id not in self._retired:
                self._open(segment_id, now_ms)
            dispatcher = self.dispatchers.get(segment_id)
            if dispatcher is not None and not segment.is_active and not dispatcher.sealed:
                dispatcher.sealed = True
                self._sealed_backlog[segment_id] = dispatcher.backlog_messages
                self.reporter.untrack(segment_id)
                self.checker.trail.add(now_us, self.name, "seal", f"segment {segment_id}")
        for producer in self.producers:
            producer.update_layout(layout)
        self._changed = True

    def _segment_drained(self, now_us: int) -> None:
        self._changed = True
        self.refresh(now_us)

    def refresh(self, now_us: int) -> None:
        """After a change of layout, consumers or drained segments: retires drained
        segments (parents first), and reassigns buckets if the readable segments or the
        connected consumers changed. Then sends what can be sent."""
        if self._changed:
            self._changed = False
            while self._retire_one(now_us):
                pass
            readable = tuple(sid for sid in sorted(self.dispatchers) if self._readable(sid))
            for sid in readable:
                self._readable_at.setdefault(sid, now_us)
            connected = tuple(sorted(c.consumer_id for c in self.consumers.values() if c.connected))
            if (readable, connected) != self._assigned_for:
                self._assigned_for = (readable, connected)
                self._reassign(now_us, readable, connected)
        self.pump(now_us)

    def _retire_one(self, now_us: int) -> bool:
        for sid, dispatcher in sorted(self.dispatchers.items()):
            if dispatcher.drained and self._readable(sid):
                dispatcher.retire()
                del self.dispatchers[sid]
                self._retired.add(sid)
                self._record_drain(now_us, sid, dispatcher)
                self.checker.trail.add(now_us, self.name, "retire", f"segment {sid}")
                return True
        return False

    def _record_drain(self, now_us: int, sid: int, dispatcher: SegmentDispatcher) -> None:
        segment = self.controller.layout.segment(sid)
        self.drains.append(
            DrainRecord(
                segment_id=sid,
                bucket_count=segment.bucket_count,
                sealed_at_ms=segment.sealed_at_ms,
                readable_at_ms=self._readable_at.get(sid, now_us) // 1000,
                drained_at_ms=now_us // 1000,
                backlog_at_seal=self._sealed_backlog.get(sid, 0),
                messages=dispatcher.stored_messages,
                max_parallel_consumers=dispatcher.max_processing,
                handoff_waits_ms=tuple(w / 1000 for w in dispatcher.handoff_waits_us),
            )
        )

    def _reassign(self, now_us: int, readable: Sequence[int], connected: Sequence[int]) -> None:
        units = [(sid, b) for sid in readable for b in range(self.dispatchers[sid].bucket_count)]
        members = [BucketConsumer(self.consumers[c].name, c) for c in connected]
        alive = set(connected)
        previous = {u: o for u, o in self._owners.items() if o in alive}
        self._owners = self.controller.assign(units, previous, members, self._retired)
        for sid in readable:
            dispatcher = self.dispatchers[sid]
            owners = tuple(self._owners[(sid, b)] for b in range(dispatcher.bucket_count))
            self.moves += dispatcher.reassign(now_us, BucketAssignment(owners), alive)

    def pump(self, now_us: int) -> None:
        for dispatcher in self.dispatchers.values():
            dispatcher.pump(now_us)

    # --- ticks ------------------------------------------------------------------------

    def produce(self, now_us: int) -> None:
        """Stores what the producers sent during the tick starting now."""
        start_ms = now_us // 1000
        batches: list[tuple[EntryBatch, _I64]] = []
        for producer in self.producers:
            batches.extend(producer.produce(start_ms, self._tick_ms))
        if not batches:
            return
        self.checker.now_us = now_us
        by_segment: dict[int, list[Entry]] = defaultdict(list)
        for entry in self.store.store(now_us, batches):
            by_segment[entry.segment_id].append(entry)
        for sid, entries in by_segment.items():
            self.dispatchers[sid].appended(entries)

    def heartbeat(self, now_us: int) -> None:
        for dispatcher in list(self.dispatchers.values()):
            dispatcher.heartbeat(now_us)

    def report_load(self, now_us: int) -> None:
        active = {s.segment_id for s in self.controller.layout.active_segments()}
        counters = {sid: d.rates for sid, d in self.dispatchers.items() if sid in active}
        self.reporter.report(now_us // 1000, counters)

    def evaluate(self, now_us: int, trigger: str) -> None:
        """Runs the controller's policy; applies what it decides."""
        connected = sum(1 for c in self.consumers.values() if c.connected)
        changed = self.controller.evaluate(
            now_us // 1000, connected, self.reporter.samples, trigger
        )
        if changed is not None:
            decision = self.controller.decisions[-1].decision
            self.checker.trail.add(now_us, self.name, "decide", decision.to_dict())
            self._apply_layout(now_us)

    # --- consumers --------------------------------------------------------------------

    def _deliver(self, now_us: int, delivery: Delivery) -> None:
        self.consumers[delivery.consumer_id].receive(now_us, delivery)

    def join(self, now_us: int, group: int) -> None:
        for consumer in self.groups[group]:
            consumer.connect(now_us)
            self.checker.trail.add(now_us, self.name, "join", consumer.name, consumer.consumer_id)
        self._changed = True
        self.evaluate(now_us, "consumers-joined")
        self.refresh(now_us)

    def leave(self, now_us: int, group: int) -> None:
        self.checker.now_us = now_us
        for consumer in self.groups[group]:
            if not consumer.connected:
                continue
            for delivery in consumer.disconnect(now_us):
                self.checker.released(delivery, "disconnect")
            for dispatcher in self.dispatchers.values():
                dispatcher.remove_consumer(now_us, consumer.consumer_id)
            self.checker.trail.add(now_us, self.name, "leave", consumer.name, consumer.consumer_id)
        self._changed = True
        self.evaluate(now_us, "consumers-left")
        self.refresh(now_us)

    def consumer_event(
        self, now_us: int, group: int, action: Callable[[ConsumerSim, int], None]
    ) -> None:
        """Applies a timed change (rate, stall, resume) to every consumer of a group."""
        for consumer in self.groups[group]:
            action(consumer, now_us)

    # --- measurement ------------------------------------------------------------------

    def sample(self) -> None:
        """Appends one point to every time series."""
        s, layout = self.series, self.controller.layout
        connected = [c for c in self.consumers.values() if c.connected]
        readable = [d for sid, d in self.dispatchers.items() if self._readable(sid)]
        s.backlog.append(sum(d.backlog_messages for d in self.dispatchers.values()))
        s.busy_consumers.append(sum(1 for c in connected if c.busy))
        s.owning_consumers.append(len({o for o in self._owners.values() if o is not None}))
        s.connected_consumers.append(len(connected))
        s.active_segments.append(len(layout.active_segments()))
        s.readable_buckets.append(sum(d.bucket_count for d in readable))
        s.active_buckets.append(layout.total_bucket_count)
        s.withheld_buckets.append(sum(len(d.withheld) for d in self.dispatchers.values()))

    @property
    def backlog_messages(self) -> int:
        return sum(d.backlog_messages for d in self.dispatchers.values())


__all__ = ["DrainRecord", "TopicSeries", "TopicSim"]
