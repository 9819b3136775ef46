"""The simulator with Pulsar's subscription-coordinator assignment (``assignment =
"segments"``): order and every other invariant hold across splits, merges and rollovers, a
bucketed segment is shared by at most its bucket count of consumers, and the controller
applies decisions through :func:`keyshared.apply_decision` with one set of cooldown clocks."""

from __future__ import annotations

from typing import Any

import pytest

from keyshared import AutoScalePolicy, TopicLayout
from keyshared.scalable import BucketConsumer, LastOperationTimes
from keyshared.simulate import (
    ConsumerSpec,
    KeySpec,
    ProducerSpec,
    Scenario,
    ScenarioError,
    TopicSpec,
    simulate,
    summarize,
)
from keyshared.simulate.controller import Controller, assign_segments


def run(spec: TopicSpec, **kwargs: Any) -> dict[str, Any]:
    scenario = Scenario(name="coordinator", topics=(spec,), **kwargs)
    return summarize(simulate(scenario))


def assert_clean(summary: dict[str, Any]) -> None:
    m = summary["messages"]
    assert summary["outcome"]["ended"] == "drained"
    assert m["backlog_at_end"] == 0
    assert m["processed"] + m["given_up_unprocessed"] == m["produced"] > 0
    assert summary["invariants"]["violations"] == 0


def test_order_holds_across_splits_and_merges_with_segment_assignment() -> None:
    policy = AutoScalePolicy(
        split_msg_rate_in=1_000.0,
        merge_msg_rate_in=100.0,
        split_cooldown_ms=2_000,
        merge_cooldown_ms=2_000,
        merge_window_ms=2_000,
    )
    spec = TopicSpec(
        name="t",
        layout=TopicLayout.initial(1, 4),
        policy=policy,
        producers=(
            ProducerSpec("burst", 2_500.0, stop_ms=8_000, keys=KeySpec(count=300)),
            ProducerSpec("trickle", 20.0, start_ms=8_000, keys=KeySpec(count=300)),
        ),
        consumers=(ConsumerSpec("c", 1_500.0, count=3),),
        assignment="segments",
    )
    summary = run(
        spec,
        duration_ms=40_000,
        max_time_ms=120_000,
        tick_ms=100,
        policy_interval_ms=1_000,
        load_report_interval_ms=1_000,
        load_rate_window_ms=2_000,
    )
    assert_clean(summary)
    actions = {(d["action"], d["reason"]) for d in summary["decisions"]}
    assert ("split", "msgRateIn") in actions and ("merge", "cold") in actions


@pytest.mark.parametrize("assignment", ["buckets", "segments"])
def test_a_bucketed_segment_is_shared_by_at_most_its_bucket_count(assignment: str) -> None:
    spec = TopicSpec(
        name="t",
        layout=TopicLayout.initial(1, 4),
        policy=AutoScalePolicy(enabled=False),
        producers=(ProducerSpec("p", 400.0, stop_ms=10_000, keys=KeySpec(count=500)),),
        consumers=(ConsumerSpec("c", 150.0, count=6),),
        assignment=assignment,  # type: ignore[arg-type]
    )
    summary = run(spec, duration_ms=10_000, max_time_ms=120_000)
    assert_clean(summary)
    assert max(summary["series"]["busy_consumers"]) == 4


def test_whole_segments_go_to_one_consumer_each() -> None:
    layout = TopicLayout.initial(2, 8)
    consumers = [BucketConsumer("a", 1), BucketConsumer("b", 2)]
    units = [(sid, b) for sid in (0, 1) for b in range(4)]
    owners = assign_segments(layout, units, consumers, retired=())
    assert [owners[(0, b)] for b in range(4)] == [1, 1, 1, 1]
    assert [owners[(1, b)] for b in range(4)] == [2, 2, 2, 2]


def test_sharers_split_a_segment_like_the_entry_bucket_dispatcher() -> None:
    layout = TopicLayout.initial(1, 4)
    consumers = [BucketConsumer("b", 2), BucketConsumer("a", 1), BucketConsumer("c", 3)]
    owners = assign_segments(layout, [(0, b) for b in range(4)], consumers, retired=())
    # Three sharers of four buckets: a owns 0, b owns 1, c owns 2 and 3.
    assert [owners[(0, b)] for b in range(4)] == [1, 2, 3, 3]


def test_a_child_waits_for_its_parent_to_retire() -> None:
    layout = TopicLayout.initial(1, 2).split_segment(0, 5)
    consumers = [BucketConsumer("a", 1), BucketConsumer("b", 2)]
    units = [(0, 0), (0, 1), (1, 0), (2, 0)]
    owners = assign_segments(layout, units, consumers, retired=())
    assert owners[(1, 0)] is None and owners[(2, 0)] is None
    assert {owners[(0, 0)], owners[(0, 1)]} == {1, 2}
    owners = assign_segments(layout, units[2:], consumers, retired={0})
    assert owners == {(1, 0): 1, (2, 0): 2}


def test_the_controller_keeps_one_set_of_cooldown_clocks() -> None:
    layout = TopicLayout.initial(1, 4, now_ms=0).split_segment(0, 1_000)
    controller = Controller(layout, AutoScalePolicy())
    assert controller.clocks == LastOperationTimes(last_split_at_ms=1_000)
    with pytest.raises(ValueError, match="assignment"):
        Controller(layout, AutoScalePolicy(), "keys")  # type: ignore[arg-type]


def test_a_scenario_names_its_assignment() -> None:
    base = {
        "name": "s",
        "duration_ms": 1_000,
        "topics": [
            {
                "name": "t",
                "producers": [{"name": "p", "rate_msg_s": 10}],
                "consumers": [{"name": "c", "rate_msg_s": 10}],
            }
        ],
    }
    assert Scenario.from_dict(base).topics[0].assignment == "buckets"
    base["topics"][0]["assignment"] = "segments"  # type: ignore[index]
    assert Scenario.from_dict(base).topics[0].assignment == "segments"
    base["topics"][0]["assignment"] = "keys"  # type: ignore[index]
    with pytest.raises(ScenarioError, match="assignment"):
        Scenario.from_dict(base)
