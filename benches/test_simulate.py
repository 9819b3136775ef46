"""The scenario simulator on the drain-backlog scenario: simulated messages per second of wall
time (every message produced, batched, stored, dispatched, processed, acked and checked)."""

from typing import Any

import pytest

from keyshared.simulate import builtin_scenario, simulate

#: The full scenario: 1.2 million messages, a few seconds a round.
SCALE = 1.0


@pytest.mark.benchmark(group="simulate-drain")
def test_simulate_drain_backlog(benchmark: Any) -> None:
    scenario = builtin_scenario("drain-backlog", SCALE)
    result = benchmark.pedantic(simulate, args=(scenario,), rounds=3, iterations=1)
    assert result.ended == "drained"
    messages = sum(topic.store.messages for topic in result.topics)
    entries = sum(len(log) for topic in result.topics for log in topic.store.logs.values())
    benchmark.extra_info["scale"] = SCALE
    benchmark.extra_info["simulated_messages"] = messages
    benchmark.extra_info["entries"] = entries
    benchmark.extra_info["messages_per_second"] = round(messages / benchmark.stats.stats.median)
    benchmark.extra_info["entries_per_second"] = round(entries / benchmark.stats.stats.median)
