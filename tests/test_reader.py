"""The one record reader: every JSON / TOML record names a bad field by its full path, as
``root.field``, ``root.list[index].field`` or ``root: message`` for a whole-record rule."""

import re

import pytest

from keyshared import AutoScalePolicy, AutoScalePolicyOverride, DecisionSnapshot, TopicLayout
from keyshared.simulate import Scenario, ScenarioError

LAYOUT = TopicLayout.initial(2).to_dict()
SCENARIO = {
    "name": "s",
    "duration_ms": 1_000,
    "topics": [
        {
            "name": "t",
            "producers": [{"name": "p", "rate_msg_s": 10.0}],
            "consumers": [{"name": "c", "rate_msg_s": 10.0}],
        }
    ],
}


def with_topic(**changes: object) -> dict:
    return {**SCENARIO, "topics": [{**SCENARIO["topics"][0], **changes}]}  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("read", "error", "message"),
    [
        (
            lambda: AutoScalePolicy.from_dict({"max_segments": 0}),
            ValueError,
            "policy.max_segments must be >= 1, got 0",
        ),
        (
            lambda: AutoScalePolicy.from_dict({"max_segments": 2, "min_segments": 3}),
            ValueError,
            "policy.max_segments (2) must be >= min_segments (3)",
        ),
        (
            lambda: AutoScalePolicy.from_dict([]),
            TypeError,
            "policy must be a mapping (JSON object), got list",
        ),
        (
            lambda: AutoScalePolicyOverride.from_dict({"enabled": "yes"}, "topic_policy"),
            TypeError,
            "topic_policy.enabled must be a bool, got str",
        ),
        (
            lambda: TopicLayout.from_dict({**LAYOUT, "segments": [*LAYOUT["segments"][:1]]}),
            ValueError,
            "layout: active segments must tile 0000-ffff",
        ),
        (
            lambda: TopicLayout.from_dict({"epoch": 0, "segments": []}),
            ValueError,
            "layout.next_segment_id is missing",
        ),
        (
            lambda: TopicLayout.from_dict({**LAYOUT, "segments": [{"segment_id": 0}]}),
            ValueError,
            "layout.segments[0].hash_range is missing",
        ),
        (
            lambda: TopicLayout.from_dict(
                {**LAYOUT, "segments": [{**LAYOUT["segments"][1], "parent_ids": 3}]}
            ),
            TypeError,
            "layout.segments[0].parent_ids must be a list, got int",
        ),
        (
            lambda: Scenario.from_dict(with_topic(policy={"max_segments": 0})),
            ScenarioError,
            "scenario.topics[0].policy.max_segments must be >= 1, got 0",
        ),
        (
            lambda: Scenario.from_dict(with_topic(producers=[{"name": "p"}])),
            ScenarioError,
            "scenario.topics[0].producers[0].rate_msg_s is missing",
        ),
        (
            lambda: Scenario.from_dict(with_topic(layout={"segments": 2, "dag": LAYOUT})),
            ScenarioError,
            "scenario.topics[0].layout: give dag, or segments and bucket_budget",
        ),
        (
            lambda: Scenario.from_dict(with_topic(layout={"dag": {**LAYOUT, "epoch": -1}})),
            ScenarioError,
            "scenario.topics[0].layout.dag.epoch must be >= 0, got -1",
        ),
        (
            lambda: Scenario.from_dict({**SCENARIO, "topics": []}),
            ScenarioError,
            "scenario.topics must hold at least one topic",
        ),
        (
            lambda: DecisionSnapshot.from_dict(
                {"layout": LAYOUT, "now_ms": 0, "namespace_policy": {"max_dag_depth": -1}}
            ),
            ValueError,
            "snapshot.namespace_policy.max_dag_depth must be >= 0, got -1",
        ),
    ],
)
def test_errors_name_the_field_by_its_full_path(read: object, error: type, message: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}"):
        read()  # type: ignore[operator]


def test_a_record_reads_back_what_it_wrote() -> None:
    layout = TopicLayout.initial(3).split_segment(1, 5).rebucket_segment(0, 7, 6)
    assert TopicLayout.from_dict(layout.to_dict()) == layout
    policy = AutoScalePolicy(max_segments=5, split_msg_rate_in=2e4)
    assert AutoScalePolicy.from_dict(policy.to_dict()) == policy
    scenario = Scenario.from_dict(with_topic(layout={"dag": layout.to_dict()}))
    assert scenario.topics[0].layout == layout
    assert scenario.topics[0].producers[0].payload.min_bytes == 1024
