"""The one record reader: every JSON / TOML record names a bad field by its full path, as
``root.field``, ``root.list[index].field`` or ``root: message`` for a whole-record rule."""

import contextlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keyshared import AutoScalePolicy, TopicLayout
from keyshared.scalable import AutoScalePolicyOverride, DecisionSnapshot
from keyshared.simulate import Scenario, ScenarioError

LAYOUT = TopicLayout.initial(2).to_dict()
SPLIT_AT_1 = {**LAYOUT["segments"][1], "bucket_splits": [1, 0x8000]}
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
            lambda: TopicLayout.from_dict(
                {**LAYOUT, "segments": [LAYOUT["segments"][0], SPLIT_AT_1]}
            ),
            ValueError,
            "layout.segments[1].bucket_splits[0] = 1 leaves bucket 0 narrower than [0, 1]",
        ),
        (
            lambda: TopicLayout.from_dict(
                {
                    **LAYOUT,
                    "segments": [LAYOUT["segments"][0], {**SPLIT_AT_1, "bucket_splits": [0]}],
                }
            ),
            ValueError,
            "layout.segments[1].bucket_splits[0] = 0 is outside [1, 0xffff]",
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
            lambda: DecisionSnapshot.from_dict({"layout": LAYOUT, "now_ms": 0, "now": 1}),
            ValueError,
            "snapshot has unknown field(s) now",
        ),
        (
            lambda: DecisionSnapshot.from_dict({"layout": LAYOUT}),
            ValueError,
            "snapshot.now_ms is missing",
        ),
        (
            lambda: DecisionSnapshot.from_dict(
                {"layout": LAYOUT, "now_ms": 0, "stream_consumer_count_by_sub": {"s": -1}}
            ),
            ValueError,
            "snapshot.stream_consumer_count_by_sub['s'] must be >= 0, got -1",
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


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


def replaced(record: object, path: list[object], value: object) -> object:
    """``record`` with the item at ``path`` (keys and indices) replaced by ``value``."""
    if not path:
        return value
    head, *rest = path
    if isinstance(record, dict):
        return {**record, head: replaced(record.get(head), rest, value)}  # type: ignore[index]
    if isinstance(record, list) and isinstance(head, int) and head < len(record):
        return [replaced(r, rest, value) if i == head else r for i, r in enumerate(record)]
    return record


PATHS = [
    ["epoch"],
    ["segments"],
    ["segments", 0],
    ["segments", 1, "hash_range"],
    ["segments", 1, "state"],
    ["segments", 1, "bucket_splits"],
    ["segments", 1, "bucket_splits", 0],
    ["segments", 0, "sealed_at_epoch"],
]


@given(st.sampled_from(PATHS), JSON)
def test_a_bad_value_anywhere_is_a_type_or_value_error(path: list[object], value: object) -> None:
    data = replaced(TopicLayout.initial(2).split_segment(0, 7).to_dict(), path, value)
    try:
        TopicLayout.from_dict(data)  # type: ignore[arg-type]
    except (TypeError, ValueError) as e:
        assert str(e).startswith("layout")


@given(JSON)
def test_any_json_is_read_or_refused_with_a_type_or_value_error(data: object) -> None:
    for read in (
        TopicLayout.from_dict,
        AutoScalePolicy.from_dict,
        AutoScalePolicyOverride.from_dict,
        DecisionSnapshot.from_dict,
    ):
        with contextlib.suppress(TypeError, ValueError):
            read(data)  # type: ignore[operator]
    with contextlib.suppress(ScenarioError):
        Scenario.from_dict(data)  # type: ignore[arg-type]
