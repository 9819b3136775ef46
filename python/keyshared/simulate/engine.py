"""The discrete-event loop of the simulator, on virtual time.

Events are kept in a heap ordered by (time, insertion order), so that simultaneous events
run in the order they were scheduled and a scenario plus a seed always give the same run.
Each tick (``tick_ms``) the producers write a tick's worth of messages, every segment's
window runs its heartbeat (ack timeouts, redeliveries, poison policy), the controller reads
load and decides on its cadence, and time series are sampled; consumers' completions and
the scenario's consumer events fall between ticks, at microsecond resolution.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from keyshared.simulate.dispatch import HandOff
from keyshared.simulate.invariants import EventTrail
from keyshared.simulate.scenario import Scenario
from keyshared.simulate.topic import TopicSim
from keyshared.simulate.workload import ConsumerSim

#: ``progress(now_ms, horizon_ms)``, called once per tick.
Progress = Callable[[int, int], None]


@dataclass
class SimulationResult:
    """A finished run: ``ended`` is ``"drained"`` (production over and every entry done) or
    ``"time-limit"`` (the scenario's horizon came first); ``end_ms`` is the virtual time
    it stopped at; ``sample_times_ms`` the times of the topics' time series points."""

    scenario: Scenario
    seed: int
    ended: str
    end_ms: int
    sample_times_ms: list[int]
    topics: list[TopicSim]


class Simulation:
    """One run of a scenario. ``seed`` overrides the scenario's; ``handoff`` replaces how
    buckets change owner (tests pass a broken one to see it caught)."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        seed: int | None = None,
        handoff: HandOff | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.scenario = scenario
        self.seed = scenario.seed if seed is None else seed
        self._progress = progress
        self._heap: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._order = 0
        self.trail = EventTrail()
        replicas = [(spec, name) for spec in scenario.topics for name in spec.replica_names()]
        seeds = np.random.SeedSequence(self.seed).spawn(len(replicas))
        self.topics: list[TopicSim] = []
        next_id = 1
        for (spec, name), topic_seed in zip(replicas, seeds, strict=True):
            topic = TopicSim(
                name,
                spec,
                scenario,
                topic_seed,
                handoff if handoff is not None else HandOff(),
                self.trail,
                self.schedule,
                next_id,
            )
            next_id = topic.next_consumer_id
            self.topics.append(topic)
        self._samples: list[int] = []
        self._ended: str | None = None

    def schedule(self, time_us: int, action: Callable[..., None], args: tuple[Any, ...]) -> None:
        """Runs ``action(time_us, *args)`` at ``time_us`` (after what is already scheduled
        for that time)."""
        heapq.heappush(self._heap, (time_us, self._order, action, args))
        self._order += 1

    def run(self) -> SimulationResult:
        """Runs to the end; raises :class:`InvariantViolation` at the first violation."""
        scenario = self.scenario
        horizon_us = scenario.horizon_ms * 1000
        for topic in self.topics:
            self._schedule_consumers(topic)
        self.schedule(0, self._tick, ())
        now_us = 0
        while self._heap and self._ended is None:
            time_us, _, action, args = heapq.heappop(self._heap)
            if time_us > horizon_us:
                break
            now_us = time_us
            action(time_us, *args)
        end_us = now_us if self._ended is not None else horizon_us
        if self._ended is None:
            self._sample(end_us)
        else:
            for topic in self.topics:
                topic.checker.finished(list(topic.store.logs.values()))
        return SimulationResult(
            scenario,
            self.seed,
            self._ended or "time-limit",
            end_us // 1000,
            self._samples,
            self.topics,
        )

    def _schedule_consumers(self, topic: TopicSim) -> None:
        for group, spec in enumerate(topic.spec.consumers):
            self.schedule(spec.join_ms * 1000, topic.join, (group,))
            if spec.leave_ms is not None:
                self.schedule(spec.leave_ms * 1000, topic.leave, (group,))
            for change in spec.rate_changes:
                action = _set_rate(change.rate_msg_s)
                self.schedule(change.at_ms * 1000, topic.consumer_event, (group, action))
            for stall in spec.stalls:
                self.schedule(stall.at_ms * 1000, topic.consumer_event, (group, ConsumerSim.stall))
                if stall.for_ms is not None:
                    resume_us = (stall.at_ms + stall.for_ms) * 1000
                    self.schedule(resume_us, topic.consumer_event, (group, ConsumerSim.resume))

    def _tick(self, now_us: int) -> None:
        scenario, now_ms = self.scenario, now_us // 1000
        for topic in self.topics:
            topic.produce(now_us)
            topic.heartbeat(now_us)
        if now_ms % scenario.load_report_interval_ms == 0:
            for topic in self.topics:
                topic.report_load(now_us)
        if now_ms % scenario.policy_interval_ms == 0:
            for topic in self.topics:
                topic.evaluate(now_us, "periodic")
        for topic in self.topics:
            topic.refresh(now_us)
        if now_ms % scenario.sample_interval_ms == 0:
            self._sample(now_us)
        if self._progress is not None:
            self._progress(now_ms, scenario.horizon_ms)
        if now_ms >= scenario.duration_ms and all(t.backlog_messages == 0 for t in self.topics):
            self._ended = "drained"
            self._sample(now_us)
            return
        self.schedule(now_us + scenario.tick_ms * 1000, self._tick, ())

    def _sample(self, now_us: int) -> None:
        if self._samples and self._samples[-1] == now_us // 1000:
            return
        self._samples.append(now_us // 1000)
        for topic in self.topics:
            topic.sample()


def _set_rate(rate_msg_s: float) -> Callable[[ConsumerSim, int], None]:
    def change(consumer: ConsumerSim, _now_us: int) -> None:
        consumer.set_rate(rate_msg_s)

    return change


def simulate(
    scenario: Scenario,
    *,
    seed: int | None = None,
    handoff: HandOff | None = None,
    progress: Progress | None = None,
) -> SimulationResult:
    """Runs ``scenario`` (see :class:`Simulation`)."""
    return Simulation(scenario, seed=seed, handoff=handoff, progress=progress).run()


__all__ = ["Progress", "Simulation", "SimulationResult", "simulate"]
