"""``keyshared verify``'s checker on a recorded run of 1,000,000 messages over 10,000 keys (four
consumers, three joins and a leave, every message delivered and acked: about two million
events), against a plain Python pass over the same events that only counts them by kind.

benches/ratios.py holds the checker to 10 s of process CPU time (a ceiling of 10,000 ns a
message) and to a floor against the counting pass, their rounds paired: each round of the
checker just after a counting pass, so that both fall in the same stretch of a busy
machine's time.
"""

import statistics
import time
from collections import Counter
from typing import Any

import pytest
from ratios import CPU_NS, KEYS, PAIRED

from keyshared.verify.checker import check
from keyshared.verify.record import RunRecord
from keyshared.verify.synthetic import SyntheticWorkload, synthetic_run

#: The run: 1M messages of 10,000 keys published 1,000 at a time; consumers ack all but their
#: last 0 to 20 messages after each batch, so that joins find hashes to drain and hold
#: messages back, and the leave leaves messages to redeliver.
WORKLOAD = SyntheticWorkload(
    messages=1_000_000,
    keys=10_000,
    consumers=4,
    joins=3,
    leaves=1,
    batch=1_000,
    max_lag=20,
    seed=7,
)
ROUNDS = 3


@pytest.fixture(scope="module")
def recorded_run() -> RunRecord:
    """The run, made once (about 15 s on a 2-core VM)."""
    return synthetic_run(WORKLOAD)


def count_events(record: RunRecord) -> Counter[str]:
    """The peer: every event of every scenario read once and counted by kind, in plain
    Python; the least a checker of the log must do."""
    counts: Counter[str] = Counter()
    for scenario in record.scenarios:
        for event in scenario.events:
            counts[event[0]] += 1
    return counts


@pytest.mark.benchmark(group="verify-check")
@pytest.mark.parametrize("lib", ["keyshared", "count-events"])
def test_verify_check(benchmark: Any, lib: str, recorded_run: RunRecord) -> None:
    verdict, counts = check(recorded_run), count_events(recorded_run)
    [result] = verdict.scenarios
    assert verdict.passed, verdict.first
    # The same events, read by both: every delivery and ack, each message acked once.
    assert result.delivered == counts["deliver"] and counts["ack"] == WORKLOAD.messages
    assert result.acked == result.sent == WORKLOAD.messages
    assert result.matched == result.predicted == result.delivered

    run = {"keyshared": check, "count-events": count_events}[lib]
    other_times: list[float] = []
    cpu: list[int] = []

    def setup() -> tuple[tuple[RunRecord], dict[str, Any]]:
        # The checker's rounds each just after a counting pass: the ratio the floor reads.
        if lib == "keyshared":
            start = time.perf_counter()
            count_events(recorded_run)
            other_times.append(time.perf_counter() - start)
        return (recorded_run,), {}

    def timed(record: RunRecord) -> None:
        start = time.process_time_ns()
        run(record)
        cpu.append(time.process_time_ns() - start)

    benchmark.pedantic(timed, setup=setup, rounds=ROUNDS, iterations=1)
    benchmark.extra_info[KEYS] = WORKLOAD.messages
    benchmark.extra_info["events"] = sum(counts.values())
    benchmark.extra_info["held"] = result.held
    benchmark.extra_info["redelivered"] = result.redelivered
    if lib == "keyshared":
        # The ceiling checks the CPU time, which a machine's other work does not stretch.
        benchmark.extra_info[CPU_NS] = round(statistics.median(cpu) / WORKLOAD.messages, 2)
        pairs = zip(other_times, benchmark.stats.stats.data, strict=True)
        benchmark.extra_info[PAIRED + "count-events"] = statistics.median(t / o for t, o in pairs)
