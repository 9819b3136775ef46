"""Layout operations and the decisions over them by the layout's size, beside Pulsar
5.0.0-M1's own Java (the oracle's ``scalable.bench_*`` ops: LayoutOps and PolicyOps), on the
same layouts with the same inputs.

A layout of size N has about N segments: one root split in full rounds until it holds 63,
1,023 or 8,191 segments (32, 512 and 4,096 active; every sealed one an ancestor of active
ones), so that it carries the history a long-lived topic accumulates. Per size:

- ``layout-split`` / ``layout-merge`` / ``layout-rebucket``: one call is a chain of OPS
  operations, each on the layout the one before it made (OPS active segments spread over the
  ring split or rebucketed, OPS disjoint adjacent pairs merged), so that every operation
  starts from a layout an operation made, as a controller's or simulator's next one does;
  the time is per operation. M1 has no rebucket: that group has no Java.
- ``layout-decide``: ``decide`` with every segment sampled in the dead band between the
  split and merge thresholds but every ninth one cold, so that every rule runs to the end
  (NoAction); per call.
- ``layout-assign``: ``compute_assignment`` of active / 4 consumers with the drain checker on
  and every sealed segment drained; per call.

keyshared runs with ``pulsar_version="5.0.0-M1"`` and M1's policy where the rules differ,
and each answer is checked to be the JVM's first. Each keyshared round (process CPU time)
runs just after a JVM round of the same work (CPU time of the JVM's thread, the JVM timing
itself, warmed up first); the floor's ratio is the median over those pairs
(``PAIRED + "jvm-N"``), and every size records it. The sizes compare with each other by
``Scaling`` in ratios.py: time per unit of work (per operation; per active segment for
``decide``; per active segment and consumer for ``compute_assignment``) at 8,192 against 64.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np
import pytest
from jvm import Jvm
from ratios import CPU_NS_UNIT, PAIRED, UNITS

import keyshared as ks
from keyshared import AutoScalePolicy, TopicLayout
from keyshared.scalable import SegmentLoadSample, SegmentLoadStats

M1 = "5.0.0-M1"
#: Size label -> full rounds of splits from one root (2^(k+1) - 1 segments).
SIZES = {64: 5, 1024: 9, 8192: 12}
#: Operations per call of the layout groups.
OPS = 16
#: Timed rounds, each just after a JVM round; in BLOCKS requests to the JVM.
ROUNDS = 24
BLOCKS = 4
#: Calls per round of decide and compute_assignment, by size: rounds of some milliseconds.
CALLS = {64: 40, 1024: 4, 8192: 1}
#: Untimed JVM rounds before the first timed one, by size: enough for its JIT's top tier.
WARMUP = {64: 1500, 1024: 150, 8192: 30}
NOW = 10_000_000
TOPIC = "topic://tenant/ns/sizes"


@cache
def grown(size: int) -> TopicLayout:
    layout = TopicLayout.initial(1, bucket_budget=64)
    for _ in range(SIZES[size]):
        for seg in layout.active_segments():
            layout = layout.split_segment(seg.segment_id, 1_000 + layout.epoch)
    return layout


@pytest.fixture(scope="module")
def jvm_m1() -> Any:
    with Jvm(M1) as running:
        yield running


def spread(layout: TopicLayout, count: int) -> list[ks.Segment]:
    active = layout.active_segments()
    return [active[i * len(active) // count] for i in range(count)]


def chain(size: int, op: str) -> tuple[list[list[Any]], Callable[[], TopicLayout]]:
    """The JVM's ops and keyshared's call for one chain of OPS operations."""
    layout = grown(size)
    now = NOW
    if op == "split":
        ids = [s.segment_id for s in spread(layout, OPS)]
        ops = [["split", sid, now] for sid in ids]

        def run() -> TopicLayout:
            out = layout
            for sid in ids:
                out = out.split_segment(sid, now)
            return out

    elif op == "merge":
        active = layout.active_segments()
        pairs = [
            (active[j].segment_id, active[j + 1].segment_id)
            for j in (2 * (i * len(active) // (2 * OPS)) for i in range(OPS))
        ]
        ops = [["merge", a, b, now] for a, b in pairs]

        def run() -> TopicLayout:
            out = layout
            for a, b in pairs:
                out = out.merge_segments(a, b, now)
            return out

    else:
        targets = [(s.segment_id, s.bucket_count * 2) for s in spread(layout, OPS)]
        ops = []

        def run() -> TopicLayout:
            out = layout
            for sid, count in targets:
                out = out.rebucket_segment(sid, count, now)
            return out

    return ops, run


def decide_case(size: int) -> tuple[dict[str, Any], Callable[[], ks.Decision]]:
    layout = grown(size)
    active = layout.active_segments()
    rng = np.random.default_rng(5)
    load = {
        s.segment_id: SegmentLoadSample(
            SegmentLoadStats(*(rng.uniform(0.2, 0.9, 4) * (10_000, 5e7, 50_000, 2.5e8))),
            NOW - 400_000,
        )
        for s in active
    }
    for s in active[::9]:
        load[s.segment_id] = SegmentLoadSample(SegmentLoadStats(10, 1e3, 10, 1e3), NOW - 400_000)
    consumers = {f"sub-{i}": 1 + i % 8 for i in range(32)}
    # M1's rules: no split-vs-rebucket floor, no bucket ceiling, the rebucket lane shut.
    policy = AutoScalePolicy(
        max_segments=65_536,
        split_vs_rebucket_min_msg_rate_in=0.0,
        max_entry_buckets_per_segment=ks.routing.RING_SIZE,
    )
    m1_only = {
        "rebucket_cooldown_ms",
        "split_vs_rebucket_min_msg_rate_in",
        "max_entry_buckets_per_segment",
        "entry_bucket_budget",
    }
    config = {
        f.name: getattr(policy, f.name) for f in dataclasses.fields(policy) if f.name not in m1_only
    }
    case = {
        "layout": layout.to_dict(),
        "load": [[sid, list(s.stats.rates()), s.modified_at_ms] for sid, s in load.items()],
        "consumers": consumers,
        "config": config,
        "now_ms": NOW,
        "last_split_at_ms": NOW - 400_000,
        "last_merge_at_ms": NOW - 400_000,
    }

    def run() -> ks.Decision:
        return ks.decide(
            layout,
            load,
            consumers,
            policy,
            NOW,
            NOW - 400_000,
            NOW - 400_000,
            pulsar_version=M1,
        )

    return case, run


def assign_case(size: int) -> tuple[dict[str, Any], Callable[[], dict[str, Any]]]:
    layout = grown(size)
    names = [f"c-{i:05d}" for i in range(len(layout.active_segments()) // 4)]
    drained = [s.segment_id for s in layout.segments.values() if s.is_sealed]
    topic = ks.TopicName.get(TOPIC)
    case = {
        "layout": layout.to_dict(),
        "topic": TOPIC,
        "consumers": names,
        "drain_checker": True,
        "drained": drained,
    }

    def run() -> dict[str, Any]:
        return ks.compute_assignment(layout, topic, names, drained, pulsar_version=M1)

    return case, run


def as_oracle(assignment: dict[str, Any]) -> dict[str, Any]:
    return {
        name: {
            "layout_epoch": a.layout_epoch,
            "segments": [
                [s.segment_id, [s.hash_range.start, s.hash_range.end], s.segment_topic_name]
                for s in a.assigned_segments
            ],
        }
        for name, a in assignment.items()
    }


def beside_jvm(
    benchmark: Any,
    jvm: Jvm | None,
    op: str,
    request: dict[str, Any],
    run: Callable[[], object],
    calls: int,
    per_call: int,
    size: int,
    units: int,
) -> Any:
    """Times ``calls`` calls of ``run`` a round, each round (process CPU time) just after one
    JVM round of the same request (none without a ``jvm``); records the CPU time per
    operation (a call makes ``per_call``), the paired ratio to the JVM, and the units of work
    a round does (``units`` a call) with the CPU time per unit, for Scaling. Answers the
    JVM's last result."""
    jvm_cpu: list[int] = []
    ours_cpu: list[int] = []
    answers: list[Any] = []
    queued: list[int] = []
    per_block = ROUNDS // BLOCKS

    def jvm_round() -> None:
        if jvm is None:
            return
        if not queued:
            warm = WARMUP[size] if not jvm_cpu else 0
            got = jvm.call(op, calls=calls, warmup=warm, rounds=per_block, **request)
            queued.extend(got["cpu_nanos"])
            answers.append(got.get("last", got.get("active")))
        jvm_cpu.append(queued.pop(0))

    def ours() -> None:
        start = time.process_time_ns()
        for _ in range(calls):
            run()
        ours_cpu.append(time.process_time_ns() - start)

    # Each JVM request runs a block of rounds back to back, and each of ours runs after one
    # of them: round i of ours pairs with the JVM's round i.
    run()
    benchmark.pedantic(ours, setup=jvm_round, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    work = calls * per_call
    benchmark.extra_info[UNITS] = calls * units
    benchmark.extra_info[CPU_NS_UNIT] = round(statistics.median(ours_cpu) / (calls * units), 1)
    benchmark.extra_info["cpu us/op"] = round(statistics.median(ours_cpu) / work / 1e3, 3)
    if jvm is not None:
        benchmark.extra_info["jvm cpu us/op"] = round(statistics.median(jvm_cpu) / work / 1e3, 3)
        pairs = zip(jvm_cpu, ours_cpu, strict=True)
        benchmark.extra_info[PAIRED + f"jvm-{size}"] = round(
            statistics.median(theirs / max(mine, 1) for theirs, mine in pairs), 3
        )
    return answers[-1] if answers else None


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("op", ["split", "merge", "rebucket"])
def test_layout_operation_by_size(benchmark: Any, jvm_m1: Jvm, op: str, size: int) -> None:
    benchmark.group = f"layout-{op}"
    benchmark.extra_info["lib"] = f"keyshared-{size}"
    ops, run = chain(size, op)
    request = {"layout": grown(size).to_dict(), "ops": ops}
    jvm = jvm_m1 if op != "rebucket" else None
    theirs = beside_jvm(
        benchmark, jvm, "scalable.bench_layout", request, run, 1, OPS, size, units=OPS
    )
    ours = run()
    assert ours.epoch == grown(size).epoch + OPS
    if jvm is not None:
        assert theirs == sorted(s.segment_id for s in ours.active_segments())


@pytest.mark.parametrize("size", list(SIZES))
def test_decide_by_size(benchmark: Any, jvm_m1: Jvm, size: int) -> None:
    benchmark.group = "layout-decide"
    benchmark.extra_info["lib"] = f"keyshared-{size}"
    case, run = decide_case(size)
    active = len(grown(size).active_segments())
    theirs = beside_jvm(
        benchmark,
        jvm_m1,
        "scalable.bench_decide",
        {"case": case},
        run,
        CALLS[size],
        1,
        size,
        units=active,
    )
    decision = run()
    assert isinstance(decision, ks.NoAction) and theirs == {"action": "none"}


@pytest.mark.parametrize("size", list(SIZES))
def test_compute_assignment_by_size(benchmark: Any, jvm_m1: Jvm, size: int) -> None:
    benchmark.group = "layout-assign"
    benchmark.extra_info["lib"] = f"keyshared-{size}"
    case, run = assign_case(size)
    layout = grown(size)
    units = len(layout.active_segments()) + len(case["consumers"])
    theirs = beside_jvm(
        benchmark,
        jvm_m1,
        "scalable.bench_assign",
        {"case": case},
        run,
        CALLS[size],
        1,
        size,
        units=units,
    )
    assert theirs == as_oracle(run())
