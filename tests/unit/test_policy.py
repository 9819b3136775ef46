"""The auto split / merge / rebucket decision (SPEC 4): every rule alone and together."""

import dataclasses
import math
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

import keyshared as ks
from keyshared import AutoScalePolicy, TopicLayout, decide
from keyshared.scalable import (
    AutoScalePolicyEvaluator,
    AutoScalePolicyOverride,
    DecisionSnapshot,
    Merge,
    NoAction,
    Rebucket,
    SegmentLoadSample,
    SegmentLoadStats,
    Split,
)

P = AutoScalePolicy()
NOW = 10_000_000
OLD = NOW - P.merge_window_ms  # a sample exactly one merge window old


def sample(
    msg_in: float = 0.0,
    bytes_in: float = 0.0,
    msg_out: float = 0.0,
    bytes_out: float = 0.0,
    at: int = OLD,
) -> SegmentLoadSample:
    return SegmentLoadSample(SegmentLoadStats(msg_in, bytes_in, msg_out, bytes_out), at)


def cold(**kw: float) -> SegmentLoadSample:
    return sample(**kw)


def warm() -> SegmentLoadSample:
    """In the dead band: above every merge threshold, below every split threshold."""
    return sample(5_000, 20_000_000, 20_000, 100_000_000)


# --- policy values ---------------------------------------------------------------------------


def test_defaults_are_pulsars() -> None:
    assert (P.enabled, P.max_segments, P.min_segments, P.max_dag_depth) == (True, 64, 1, 10)
    assert (P.split_cooldown_ms, P.merge_cooldown_ms, P.merge_window_ms) == (
        60_000,
        300_000,
        300_000,
    )
    assert P.split_thresholds() == (10_000, 50_000_000, 50_000, 250_000_000)
    assert P.merge_thresholds() == (1_000, 5_000_000, 5_000, 25_000_000)
    assert (P.rebucket_cooldown_ms, P.split_vs_rebucket_min_msg_rate_in) == (60_000, 1_000)
    assert (P.max_entry_buckets_per_segment, P.entry_bucket_budget) == (1024, 4)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"split_msg_rate_in": 1_000}, ValueError, "split_msg_rate_in .* above merge_msg_rate_in"),
        ({"merge_bytes_rate_in": 6e7}, ValueError, "split_bytes_rate_in"),
        ({"merge_msg_rate_out": 50_000}, ValueError, "split_msg_rate_out"),
        ({"split_bytes_rate_out": 0}, ValueError, "split_bytes_rate_out"),
        ({"min_segments": 0}, ValueError, "min_segments"),
        (
            {"max_segments": 3, "min_segments": 4},
            ValueError,
            r"max_segments \(3\) must be >= min_segments",
        ),
        ({"split_cooldown_ms": -1}, ValueError, "split_cooldown_ms"),
        ({"merge_window_ms": -1}, ValueError, "merge_window_ms"),
        ({"rebucket_cooldown_ms": -5}, ValueError, "rebucket_cooldown_ms"),
        ({"max_dag_depth": -1}, ValueError, "max_dag_depth"),
        ({"merge_msg_rate_in": -1.0}, ValueError, "merge_msg_rate_in"),
        ({"split_msg_rate_in": math.nan}, ValueError, "split_msg_rate_in"),
        ({"split_msg_rate_in": math.inf}, ValueError, "split_msg_rate_in"),
        ({"max_entry_buckets_per_segment": 0}, ValueError, "max_entry_buckets_per_segment"),
        ({"max_entry_buckets_per_segment": 70_000}, ValueError, "max_entry_buckets_per_segment"),
        ({"entry_bucket_budget": 0}, ValueError, "entry_bucket_budget"),
        ({"enabled": 1}, TypeError, "enabled"),
        ({"max_segments": 4.0}, TypeError, "max_segments"),
        ({"split_msg_rate_in": "fast"}, TypeError, "split_msg_rate_in"),
    ],
)
def test_invalid_policies_name_the_field(changes: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        AutoScalePolicy(**changes)


def test_a_merge_threshold_of_zero_is_valid_and_means_never_merge() -> None:
    policy = AutoScalePolicy(merge_msg_rate_in=0)
    layout = TopicLayout.initial(2)
    load = {0: cold(), 1: cold()}
    assert isinstance(decide(layout, load, {}, policy, NOW), NoAction)
    assert decide(layout, load, {}, P, NOW) == Merge(0, 1, "cold")


def test_override_resolution_topic_then_namespace_then_broker() -> None:
    broker = AutoScalePolicy(max_segments=32)
    namespace = AutoScalePolicyOverride(max_segments=16, split_cooldown_ms=1_000, enabled=False)
    topic = AutoScalePolicyOverride(max_segments=8, enabled=True)
    resolved = broker.resolve(namespace, topic)
    assert (resolved.max_segments, resolved.split_cooldown_ms, resolved.enabled) == (8, 1_000, True)
    assert broker.resolve(namespace).max_segments == 16
    assert broker.resolve(None, topic).split_cooldown_ms == 60_000
    assert broker.resolve() == broker
    assert resolved.merge_window_ms == broker.merge_window_ms


def test_overrides_are_validated_once_on_the_result() -> None:
    # The namespace raises a merge threshold past the broker's split threshold; the topic
    # raises the split threshold too: only the combination is checked.
    namespace = AutoScalePolicyOverride(merge_msg_rate_in=20_000)
    topic = AutoScalePolicyOverride(split_msg_rate_in=40_000)
    assert P.resolve(namespace, topic).merge_msg_rate_in == 20_000
    with pytest.raises(ValueError, match="split_msg_rate_in"):
        P.resolve(namespace)
    with pytest.raises(ValueError, match="max_segments"):
        AutoScalePolicyOverride(max_segments=-1)
    with pytest.raises(TypeError, match="override"):
        P.resolve({"max_segments": 3})  # type: ignore[arg-type]


def test_policy_dict_round_trip_and_partial_dicts() -> None:
    assert AutoScalePolicy.from_dict(P.to_dict()) == P
    assert AutoScalePolicy.from_dict({"max_segments": 8}).max_segments == 8
    with pytest.raises(ValueError, match=r"policy has unknown field\(s\) max_segment"):
        AutoScalePolicy.from_dict({"max_segment": 8})
    with pytest.raises(ValueError, match=r"policy\.min_segments must be >= 1"):
        AutoScalePolicy.from_dict({"min_segments": 0})
    assert AutoScalePolicyOverride.from_dict({"enabled": False}).to_dict() == {"enabled": False}


def test_load_stats_validation_names_the_field() -> None:
    for name in ("msg_rate_in", "bytes_rate_in", "msg_rate_out", "bytes_rate_out"):
        with pytest.raises(ValueError, match=name):
            SegmentLoadStats(**{name: -1.0})
        with pytest.raises(ValueError, match=name):
            SegmentLoadStats(**{name: math.nan})
        with pytest.raises(TypeError, match=name):
            SegmentLoadStats(**{name: True})
    with pytest.raises(ValueError, match="modified_at_ms"):
        SegmentLoadSample(SegmentLoadStats(), -1)
    with pytest.raises(TypeError, match="stats"):
        SegmentLoadSample({"msg_rate_in": 1}, 0)  # type: ignore[arg-type]


# --- rule 1: disabled ----------------------------------------------------------------------


def test_disabled_does_nothing_and_says_so() -> None:
    policy = AutoScalePolicy(enabled=False)
    hot = {0: sample(msg_in=1e9)}
    decision = decide(TopicLayout.initial(1), hot, {"s": 50}, policy, NOW)
    assert isinstance(decision, NoAction) and "disabled" in decision.reason


# --- rule 2: consumer demand ---------------------------------------------------------------


def test_consumer_demand_is_the_largest_subscription_not_the_sum() -> None:
    layout = TopicLayout.initial(4)
    busy = {i: warm() for i in range(4)}
    decision = decide(layout, busy, {"a": 3, "b": 3, "c": 4}, P, NOW)
    assert isinstance(decision, NoAction)
    assert "demand 4 does not exceed 4" in decision.reason
    assert decide(layout, busy, {"a": 3, "b": 5}, P, NOW) == Split(0, "consumer-count")


def test_consumer_split_takes_the_busiest_segment_ties_to_the_lowest_id() -> None:
    layout = TopicLayout.initial(4)
    load = {0: sample(2_000), 1: sample(5_000), 2: sample(5_000), 3: sample(4_000)}
    assert decide(layout, load, {"s": 5}, P, NOW) == Split(1, "consumer-count")
    load = {3: sample(1_000), 2: sample(1_000)}
    assert decide(layout, load, {"s": 5}, P, NOW) == Split(2, "consumer-count")


@pytest.mark.parametrize(
    ("elapsed", "splits"), [(60_000, True), (59_999, False), (0, False), (120_000, True)]
)
def test_consumer_split_cooldown_edges(elapsed: int, splits: bool) -> None:
    layout = TopicLayout.initial(2)
    load = {0: sample(5_000), 1: sample(5_000)}
    decision = decide(layout, load, {"s": 3}, P, NOW, last_split_at_ms=NOW - elapsed)
    if splits:
        assert decision == Split(0, "consumer-count")
    else:
        assert isinstance(decision, NoAction)
        assert f"split cooldown ({60_000 - elapsed} ms left)" in decision.reason


def test_split_vs_rebucket_floor_is_inclusive() -> None:
    layout = TopicLayout.initial(2)
    at_floor = {0: sample(1_000), 1: sample(10)}
    assert decide(layout, at_floor, {"s": 3}, P, NOW) == Split(0, "consumer-count")
    below = {0: sample(999.99), 1: sample(10)}
    # 2 segments of 2 buckets cover 3 consumers: nothing to do on the bucket lane (and the
    # merge cooldown keeps the cold pair from merging).
    decision = decide(layout, below, {"s": 3}, P, NOW, last_merge_at_ms=NOW)
    assert isinstance(decision, NoAction) and "covered by 4 bucket(s)" in decision.reason
    assert "split-vs-rebucket floor" in decision.reason
    assert decide(layout, below, {"s": 5}, P, NOW) == Rebucket((0, 1), 4, "below-split-rate-floor")


def test_missing_samples_count_as_no_traffic() -> None:
    decision = decide(TopicLayout.initial(1), {}, {"s": 6}, P, NOW)
    assert decision == Rebucket((0,), 8, "below-split-rate-floor")


def test_at_max_segments_the_bucket_lane_rebuckets_every_segment_below_target() -> None:
    policy = AutoScalePolicy(max_segments=4)
    layout = TopicLayout.initial(4).rebucket_segment(2, 8, 0)  # 0, 1, 3 have 1; 4 has 8
    hot = {i: sample(50_000) for i in layout.segments}
    decision = decide(layout, hot, {"s": 13}, policy, NOW)
    # ceil(13 / 4) = 4 buckets each; the rollover segment already has 8.
    assert decision == Rebucket((0, 1, 3), 4, "at-max-segments")


def test_bucket_target_is_a_power_of_two_capped_by_the_per_segment_maximum() -> None:
    layout = TopicLayout.initial(3, bucket_budget=3)
    policy = AutoScalePolicy(max_segments=3, max_entry_buckets_per_segment=16)
    assert decide(layout, {}, {"s": 10}, policy, NOW) == Rebucket((0, 1, 2), 4, "at-max-segments")
    assert decide(layout, {}, {"s": 200}, policy, NOW) == Rebucket((0, 1, 2), 16, "at-max-segments")
    full = layout
    for sid in (0, 1, 2):
        full = full.rebucket_segment(sid, 16, 0)
    decision = decide(full, {}, {"s": 200}, policy, NOW)
    assert isinstance(decision, NoAction) and "the most allowed" in decision.reason


@pytest.mark.parametrize(("elapsed", "acts"), [(60_000, True), (59_999, False)])
def test_rebucket_cooldown_edges(elapsed: int, acts: bool) -> None:
    layout = TopicLayout.initial(1, bucket_budget=1)
    decision = decide(layout, {}, {"s": 2}, P, NOW, last_rebucket_at_ms=NOW - elapsed)
    if acts:
        assert decision == Rebucket((0,), 2, "below-split-rate-floor")
    else:
        assert isinstance(decision, NoAction) and "rebucket cooldown (1 ms left)" in decision.reason


def test_the_split_cooldown_does_not_hold_back_the_bucket_lane() -> None:
    layout = TopicLayout.initial(1, bucket_budget=1)
    decision = decide(layout, {}, {"s": 3}, P, NOW, last_split_at_ms=NOW)
    assert decision == Rebucket((0,), 4, "below-split-rate-floor")


# --- rule 3: load ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stats", "metric"),
    [
        ({"msg_in": 10_001}, "msgRateIn"),
        ({"bytes_in": 50_000_001}, "bytesRateIn"),
        ({"msg_out": 50_001}, "msgRateOut"),
        ({"bytes_out": 250_000_001}, "bytesRateOut"),
        ({"msg_in": 20_000, "bytes_in": 60_000_000}, "msgRateIn"),
        ({"msg_in": 20_000, "msg_out": 200_000}, "msgRateOut"),
    ],
)
def test_load_split_names_the_metric_with_the_highest_ratio(stats: dict, metric: str) -> None:
    layout = TopicLayout.initial(2)
    assert decide(layout, {1: sample(**stats)}, {}, P, NOW) == Split(1, metric)


def test_a_rate_exactly_at_its_split_threshold_does_not_split() -> None:
    load = {0: sample(10_000, 50_000_000, 50_000, 250_000_000)}
    decision = decide(TopicLayout.initial(1), load, {}, P, NOW)
    assert isinstance(decision, NoAction)
    assert "no segment above a split threshold (highest: segment 0 at 100%" in decision.reason


def test_metric_tie_within_a_segment_goes_to_the_first_metric() -> None:
    load = {0: sample(20_000, 100_000_000, 100_000, 500_000_000)}
    assert decide(TopicLayout.initial(1), load, {}, P, NOW) == Split(0, "msgRateIn")


def test_the_hottest_segment_splits_ties_to_the_lowest_id() -> None:
    layout = TopicLayout.initial(4)
    load = {0: sample(11_000), 1: sample(30_000), 2: sample(msg_out=150_000), 3: sample(12_000)}
    assert decide(layout, load, {}, P, NOW) == Split(1, "msgRateIn")
    load[3] = sample(30_000)
    assert decide(layout, load, {}, P, NOW) == Split(1, "msgRateIn")


@pytest.mark.parametrize(("elapsed", "splits"), [(60_000, True), (59_999, False)])
def test_load_split_cooldown_edges(elapsed: int, splits: bool) -> None:
    load = {0: sample(20_000)}
    decision = decide(TopicLayout.initial(1), load, {}, P, NOW, last_split_at_ms=NOW - elapsed)
    if splits:
        assert decision == Split(0, "msgRateIn")
    else:
        assert isinstance(decision, NoAction) and "split cooldown (1 ms left)" in decision.reason


def test_no_split_at_max_segments() -> None:
    policy = AutoScalePolicy(max_segments=2)
    decision = decide(TopicLayout.initial(2), {0: sample(1e6)}, {}, policy, NOW)
    assert isinstance(decision, NoAction) and "split: at max segments (2)" in decision.reason


# --- rule 4: merge ---------------------------------------------------------------------------


def test_the_coldest_adjacent_pair_merges() -> None:
    layout = TopicLayout.initial(4)
    load = {0: cold(msg_in=500), 1: cold(msg_in=400), 2: cold(msg_in=10), 3: cold(msg_in=20)}
    assert decide(layout, load, {}, P, NOW) == Merge(2, 3, "cold")
    load[1] = cold(msg_in=1)
    # 1+2 now combines to 11, less than 2+3's 30.
    assert decide(layout, load, {}, P, NOW) == Merge(1, 2, "cold")


def test_merge_pairs_follow_range_order_not_ids() -> None:
    layout = TopicLayout.initial(2).split_segment(0, 0)  # ranges: 2, 3, 1
    load = {i: cold() for i in (1, 2, 3)}
    load[2] = cold(msg_in=5)
    assert decide(layout, load, {}, P, NOW) == Merge(3, 1, "cold")


def test_equal_pairs_tie_to_the_lowest_range() -> None:
    layout = TopicLayout.initial(3)
    assert decide(layout, {i: cold() for i in range(3)}, {}, P, NOW) == Merge(0, 1, "cold")


@pytest.mark.parametrize(("age", "merges"), [(300_000, True), (299_999, False)])
def test_merge_window_edges(age: int, merges: bool) -> None:
    load = {0: cold(at=NOW - age), 1: cold()}
    decision = decide(TopicLayout.initial(2), load, {}, P, NOW)
    assert (decision == Merge(0, 1, "cold")) is merges
    if not merges:
        assert isinstance(decision, NoAction) and "younger than the merge window" in decision.reason


@pytest.mark.parametrize(
    "rates",
    [
        {"msg_in": 1_000},
        {"bytes_in": 5_000_000},
        {"msg_out": 5_000},
        {"bytes_out": 25_000_000},
    ],
)
def test_cold_means_every_rate_strictly_below_its_merge_threshold(rates: dict) -> None:
    decision = decide(TopicLayout.initial(2), {0: cold(**rates), 1: cold()}, {}, P, NOW)
    assert isinstance(decision, NoAction) and "dead band" in decision.reason


def test_a_segment_without_a_sample_never_merges() -> None:
    decision = decide(TopicLayout.initial(2), {0: cold()}, {}, P, NOW)
    assert isinstance(decision, NoAction) and "no load sample: 0+1" in decision.reason


@pytest.mark.parametrize(("elapsed", "merges"), [(300_000, True), (299_999, False)])
def test_merge_cooldown_edges(elapsed: int, merges: bool) -> None:
    load = {0: cold(), 1: cold()}
    decision = decide(TopicLayout.initial(2), load, {}, P, NOW, last_merge_at_ms=NOW - elapsed)
    assert (decision == Merge(0, 1, "cold")) is merges
    if not merges:
        assert isinstance(decision, NoAction) and "merge cooldown (1 ms left)" in decision.reason


def test_no_merge_at_min_segments() -> None:
    policy = AutoScalePolicy(min_segments=2)
    decision = decide(TopicLayout.initial(2), {0: cold(), 1: cold()}, {}, policy, NOW)
    assert isinstance(decision, NoAction) and "merge: at min segments (2)" in decision.reason
    assert decide(TopicLayout.initial(1), {0: cold()}, {}, P, NOW).reason.endswith(
        "merge: at min segments (1)"
    )


def test_merge_depth_cap_holds_back_that_lineage_only() -> None:
    layout = TopicLayout.initial(3).merge_segments(0, 1, 0)  # segment 3, depth 1, then 2
    policy = AutoScalePolicy(max_dag_depth=1)
    decision = decide(layout, {3: cold(), 2: cold()}, {}, policy, NOW)
    assert isinstance(decision, NoAction) and "max_dag_depth (1)" in decision.reason
    assert decide(layout, {3: cold(), 2: cold()}, {}, P, NOW) == Merge(3, 2, "cold")
    wider = TopicLayout.initial(4).merge_segments(0, 1, 0)  # ranges: 4, 2, 3
    load = {4: cold(), 2: cold(), 3: cold(msg_in=900)}
    assert decide(wider, load, {}, policy, NOW) == Merge(2, 3, "cold")


def test_a_merge_must_not_leave_fewer_buckets_than_consumers_use() -> None:
    layout = TopicLayout.initial(2, bucket_budget=16)  # 8 + 8 buckets
    policy = AutoScalePolicy(max_entry_buckets_per_segment=8)
    load = {0: cold(), 1: cold()}
    # 10 consumers use 10 of the 16 buckets; merged at the ceiling there would be 8.
    decision = decide(layout, load, {"s": 2, "t": 10}, policy, NOW, last_split_at_ms=NOW)
    assert isinstance(decision, NoAction)
    assert "fewer than the 10 bucket(s) consumers use" in decision.reason
    assert decide(layout, load, {"s": 8}, policy, NOW) == Merge(0, 1, "cold")
    # Without the ceiling the merge keeps all 16 buckets.
    assert decide(layout, load, {"t": 10}, P, NOW, last_split_at_ms=NOW) == Merge(0, 1, "cold")


# --- the 5.0.0-M1 profile ----------------------------------------------------------------------

M1 = "5.0.0-M1"


def test_m1_splits_for_consumers_whatever_the_traffic() -> None:
    """M1 predates PIP-486: no split-vs-rebucket floor, so where master rebuckets a quiet
    topic for its consumers, M1 splits its busiest segment."""
    layout = TopicLayout.initial(2)
    quiet = {0: sample(10), 1: sample(20)}
    assert decide(layout, quiet, {"s": 5}, P, NOW) == Rebucket((0, 1), 4, "below-split-rate-floor")
    assert decide(layout, quiet, {"s": 5}, P, NOW, pulsar_version=M1) == Split(1, "consumer-count")
    in_cooldown = decide(layout, quiet, {"s": 5}, P, NOW, NOW - 1, NOW, pulsar_version=M1)
    assert isinstance(in_cooldown, NoAction) and "split cooldown" in in_cooldown.reason


def test_m1_never_rebuckets_at_max_segments() -> None:
    policy = AutoScalePolicy(max_segments=2)
    layout = TopicLayout.initial(2)
    load = {i: sample(50_000) for i in layout.segments}
    assert isinstance(decide(layout, load, {"s": 9}, policy, NOW), Rebucket)
    decision = decide(layout, load, {"s": 9}, policy, NOW, pulsar_version=M1)
    assert isinstance(decision, NoAction) and "no rebucket lane" in decision.reason


def test_m1_merges_without_the_capacity_guard() -> None:
    layout = TopicLayout.initial(2, bucket_budget=16)  # 8 + 8 buckets
    policy = AutoScalePolicy(max_entry_buckets_per_segment=8)
    load = {0: cold(), 1: cold()}
    args = (layout, load, {"t": 10}, policy, NOW, NOW)
    assert isinstance(decide(*args), NoAction)
    assert decide(*args, pulsar_version=M1) == Merge(0, 1, "cold")


def test_m1_and_master_agree_on_load_splits_and_cold_merges() -> None:
    layout = TopicLayout.initial(3)
    hot = {0: sample(20_000), 1: sample(30_000), 2: sample(100)}
    assert decide(layout, hot, {}, P, NOW, pulsar_version=M1) == decide(layout, hot, {}, P, NOW)
    quiet = {i: cold() for i in layout.segments}
    assert decide(layout, quiet, {}, P, NOW, pulsar_version=M1) == Merge(0, 1, "cold")


@pytest.mark.parametrize(
    ("version", "error", "message"),
    [("4.2", ValueError, "scalable topics need Pulsar 5.0"), ("5.0", ValueError, "must be one of"),
     (5, TypeError, "pulsar_version must be a str")],
)  # fmt: skip
def test_decide_names_a_bad_pulsar_version(version: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        decide(TopicLayout.initial(1), {}, {}, P, NOW, pulsar_version=version)  # type: ignore[arg-type]


# --- rules together --------------------------------------------------------------------------


def test_split_beats_merge() -> None:
    layout = TopicLayout.initial(3)
    load = {0: cold(), 1: cold(), 2: sample(msg_in=20_000)}
    assert decide(layout, load, {}, P, NOW) == Split(2, "msgRateIn")


def test_consumer_split_beats_load_split() -> None:
    layout = TopicLayout.initial(2)
    load = {0: sample(5_000), 1: sample(msg_out=500_000)}
    assert decide(layout, load, {"s": 3}, P, NOW) == Split(0, "consumer-count")


def test_a_load_split_in_cooldown_lets_a_cold_pair_merge() -> None:
    layout = TopicLayout.initial(3)
    load = {0: cold(), 1: cold(), 2: sample(msg_in=20_000)}
    assert decide(layout, load, {}, P, NOW, last_split_at_ms=NOW - 1) == Merge(0, 1, "cold")


def test_dead_band_explains_itself_stage_by_stage() -> None:
    layout = TopicLayout.initial(2)
    decision = decide(layout, {0: warm(), 1: warm()}, {"s": 1}, P, NOW)
    assert isinstance(decision, NoAction)
    consumers, split, merge = decision.reason.split("; ")
    assert consumers.startswith("consumers: demand 1")
    assert split.startswith("split: no segment above a split threshold")
    assert merge.startswith("merge: no adjacent pair can merge") and "dead band" in merge


def test_the_evaluator_is_decide() -> None:
    args = (TopicLayout.initial(1), {0: sample(20_000)}, {}, P, NOW)
    assert AutoScalePolicyEvaluator.decide(*args) == decide(*args) == Split(0, "msgRateIn")


def test_decisions_serialise() -> None:
    assert Rebucket((1, 2), 4, "at-max-segments").to_dict() == {
        "action": "rebucket",
        "segment_ids": [1, 2],
        "bucket_count": 4,
        "reason": "at-max-segments",
    }
    assert Merge(1, 2, "cold").to_dict()["action"] == "merge"
    assert Split(1, "msgRateIn").to_dict()["segment_id"] == 1
    assert NoAction("x").to_dict() == {"action": "none", "reason": "x"}


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ({"load_by_segment": {9: sample()}}, ValueError, "load_by_segment names segment 9"),
        ({"load_by_segment": {0: SegmentLoadStats()}}, TypeError, r"load_by_segment\[0\]"),
        ({"stream_consumer_count_by_sub": {"s": -1}}, ValueError, "stream_consumer_count_by_sub"),
        ({"stream_consumer_count_by_sub": {"s": 1.5}}, TypeError, "stream_consumer_count_by_sub"),
        ({"now_ms": -1}, ValueError, "now_ms"),
        ({"last_merge_at_ms": -3}, ValueError, "last_merge_at_ms"),
        ({"policy": {"max_segments": 3}}, TypeError, "policy"),
        ({"layout": "0000-ffff-0"}, TypeError, "layout"),
    ],
)
def test_bad_decide_arguments_name_the_argument(args: dict, error: type, message: str) -> None:
    call = {
        "layout": TopicLayout.initial(1),
        "load_by_segment": {},
        "stream_consumer_count_by_sub": {},
        "policy": P,
        "now_ms": NOW,
    }
    with pytest.raises(error, match=message):
        decide(**{**call, **args})


# --- load reporting and recovery -----------------------------------------------------------


@pytest.mark.parametrize(
    ("last", "current", "material"),
    [
        ((100, 0, 0, 0), (125, 0, 0, 0), False),
        ((100, 0, 0, 0), (75, 0, 0, 0), False),
        ((100, 0, 0, 0), (125.01, 0, 0, 0), True),
        ((100, 0, 0, 0), (74.99, 0, 0, 0), True),
        ((0, 0, 0, 0), (0, 0, 0, 0), False),
        ((0, 0, 0, 0), (0, 0, 0, 1e-9), True),
        ((5, 5, 5, 5), (5, 5, 5, 0), True),
        ((10, 10, 10, 10), (11, 9, 12, 8), False),
    ],
)
def test_material_change_is_more_than_25_percent_or_off_zero(
    last: tuple, current: tuple, material: bool
) -> None:
    assert (
        ks.scalable.is_material_change(SegmentLoadStats(*last), SegmentLoadStats(*current))
        is material
    )


def test_material_change_threshold_is_settable() -> None:
    a, b = SegmentLoadStats(100), SegmentLoadStats(110)
    assert ks.scalable.is_material_change(a, b, threshold=0.05)
    assert not ks.scalable.is_material_change(a, b, threshold=0.1)
    with pytest.raises(ValueError, match="threshold"):
        ks.scalable.is_material_change(a, b, threshold=-0.1)


def test_last_operation_times_are_recovered_from_the_layout() -> None:
    layout = TopicLayout.initial(2, now_ms=1)
    assert ks.scalable.last_operation_times(layout) == ks.scalable.LastOperationTimes(
        None, None, None
    )
    layout = layout.split_segment(0, 100).merge_segments(3, 1, 200).split_segment(4, 300)
    layout = layout.rebucket_segment(2, 8, 250)
    times = ks.scalable.last_operation_times(layout)
    assert times.to_dict() == {
        "last_split_at_ms": 300,
        "last_merge_at_ms": 200,
        "last_rebucket_at_ms": 250,
    }
    # Once the merged segment is pruned its children look like roots: the evidence is gone.
    assert ks.scalable.last_operation_times(layout.prune_segment(4)).last_split_at_ms == 100


# --- snapshots -------------------------------------------------------------------------------


def snapshot(**changes: object) -> dict:
    layout = TopicLayout.initial(2, now_ms=0).split_segment(1, 1_000)
    data = {
        "layout": layout.to_dict(),
        "load_by_segment": {"0": {"msg_rate_in": 20_000, "modified_at_ms": 5}},
        "stream_consumer_count_by_sub": {"orders": 1},
        "policy": {"max_segments": 16},
        "now_ms": 61_000,
    }
    data.update(changes)
    return data


def test_snapshot_reads_and_recovers_cooldowns_from_the_layout() -> None:
    snap = DecisionSnapshot.from_dict(snapshot())
    assert snap.policy.max_segments == 16 and snap.last_split_at_ms == 1_000
    assert snap.decide() == Split(0, "msgRateIn")
    in_cooldown = DecisionSnapshot.from_dict(snapshot(now_ms=60_999))
    assert isinstance(in_cooldown.decide(), NoAction)
    forgotten = DecisionSnapshot.from_dict(snapshot(now_ms=60_999, last_split_at_ms=None))
    assert forgotten.decide() == Split(0, "msgRateIn")


def test_snapshot_overrides_resolve() -> None:
    snap = DecisionSnapshot.from_dict(
        snapshot(namespace_policy={"enabled": False}, topic_policy={"split_cooldown_ms": 0})
    )
    assert not snap.policy.enabled and snap.policy.split_cooldown_ms == 0
    assert "disabled" in snap.decide().reason


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        (
            {"load_by_segment": {"7": {"modified_at_ms": 0}}},
            ValueError,
            "load_by_segment names segment 7",
        ),
        ({"load_by_segment": {"x": {"modified_at_ms": 0}}}, ValueError, "load_by_segment key 'x'"),
        (
            {"load_by_segment": {"0": {"msg_rate_in": -5, "modified_at_ms": 0}}},
            ValueError,
            r"load_by_segment\[0\]\.msg_rate_in must not be negative",
        ),
        (
            {"load_by_segment": {"0": {"bytes_rate_out": math.nan, "modified_at_ms": 0}}},
            ValueError,
            r"load_by_segment\[0\]\.bytes_rate_out must be finite",
        ),
        ({"load_by_segment": {"0": {"msg_rate_in": 1}}}, ValueError, r"modified_at_ms is missing"),
        (
            {"load_by_segment": {"00": {"modified_at_ms": 0}}},
            ValueError,
            r"load_by_segment key '00' is not a segment id",
        ),
        (
            {"load_by_segment": {"0": {"modified_at_ms": 0}, 0: {"modified_at_ms": 1}}},
            ValueError,
            "load_by_segment names segment 0 twice",
        ),
        (
            {"load_by_segment": {"0": {"msg_rate_in": 10**400, "modified_at_ms": 0}}},
            ValueError,
            r"load_by_segment\[0\]\.msg_rate_in must be finite, got an int of 1329 bits",
        ),
        ({"load_by_segment": {"0": {"msg_rate": 1, "modified_at_ms": 0}}}, ValueError, "msg_rate"),
        ({"stream_consumer_count_by_sub": {"s": -2}}, ValueError, "stream_consumer_count_by_sub"),
        ({"policy": {"split_msg_rate_in": "x"}}, TypeError, "policy.split_msg_rate_in"),
        ({"namespace_policy": {"max_segmnts": 9}}, ValueError, "namespace_policy has unknown"),
        ({"now_ms": -1}, ValueError, "now_ms"),
        ({"last_merge_at_ms": "soon"}, TypeError, "last_merge_at_ms"),
        ({"extra": 1}, ValueError, "snapshot has unknown field"),
    ],
)
def test_bad_snapshots_name_the_field(changes: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        DecisionSnapshot.from_dict(snapshot(**changes))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"policy": {"split_msg_rate_in": 10}}, "split_msg_rate_in"),
        ({"topic_policy": {"min_segments": 99}}, "max_segments"),
        ({"policy": {"max_entry_buckets_per_segment": 0}}, "max_entry_buckets_per_segment"),
    ],
)
def test_an_invalid_resolved_snapshot_policy_disables_auto_scaling(
    changes: dict, message: str
) -> None:
    snap = DecisionSnapshot.from_dict(snapshot(**changes))
    assert isinstance(snap.policy, ks.scalable.InvalidPolicy) and message in snap.policy.reason
    decision = snap.decide()
    assert isinstance(decision, NoAction)
    assert decision.reason.startswith("disabled: invalid policy: ") and message in decision.reason


def test_a_snapshot_built_in_code_is_checked_as_decide_checks_its_arguments() -> None:
    layout = TopicLayout.initial(2)
    with pytest.raises(ValueError, match="load_by_segment names segment 7"):
        DecisionSnapshot(layout, {7: sample()}, {}, AutoScalePolicy(), 0)
    with pytest.raises(TypeError, match="policy must be an AutoScalePolicy or InvalidPolicy"):
        DecisionSnapshot(layout, {}, {}, None, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="now_ms must be >= 0"):
        DecisionSnapshot(layout, {}, {}, AutoScalePolicy(), -1)


def test_inconsistent_snapshot_layouts_name_the_problem() -> None:
    data = snapshot()
    data["layout"]["segments"][3]["hash_range"] = "4000-6fff"
    with pytest.raises(ValueError, match="layout: active segments must tile 0000-ffff"):
        DecisionSnapshot.from_dict(data)
    data = snapshot()
    del data["layout"]
    with pytest.raises(ValueError, match=r"snapshot\.layout is missing"):
        DecisionSnapshot.from_dict(data)


# --- properties ------------------------------------------------------------------------------

rates = st.just(0.0) | st.floats(0, 900) | st.floats(0, 1e9)
cold_stats = st.tuples(*[st.floats(0, 900)] * 4)


@st.composite
def situations(draw: st.DrawFn) -> tuple:
    layout = TopicLayout.initial(draw(st.integers(1, 6)), draw(st.sampled_from([1, 4, 16])))
    for _ in range(draw(st.integers(0, 4))):
        active = layout.active_segments()
        if draw(st.booleans()) or len(active) == 1:
            layout = layout.split_segment(draw(st.sampled_from(active)).segment_id, 0)
        else:
            i = draw(st.integers(0, len(active) - 2))
            layout = layout.merge_segments(active[i].segment_id, active[i + 1].segment_id, 0)
    loads = {}
    for seg in layout.active_segments():
        if draw(st.booleans()):
            stats = SegmentLoadStats(*draw(cold_stats | st.tuples(rates, rates, rates, rates)))
            loads[seg.segment_id] = SegmentLoadSample(stats, draw(st.integers(0, NOW)))
    consumers = draw(st.dictionaries(st.text(max_size=3), st.integers(0, 300), max_size=4))
    max_segments = draw(st.integers(1, 12))
    policy = AutoScalePolicy(
        max_segments=max_segments,
        min_segments=draw(st.integers(1, max_segments)),
        max_dag_depth=draw(st.integers(0, 3)),
        max_entry_buckets_per_segment=draw(st.sampled_from([1, 8, 1024])),
    )
    lasts = draw(st.tuples(*[st.none() | st.integers(0, NOW)] * 3))
    return layout, loads, consumers, policy, lasts


@given(situations())
def test_decisions_are_well_formed_and_apply_to_the_layout(situation: tuple) -> None:
    layout, loads, consumers, policy, lasts = situation
    decision = decide(layout, loads, consumers, policy, NOW, *lasts)
    active = {s.segment_id: s for s in layout.active_segments()}
    if isinstance(decision, NoAction):
        assert decision.reason
        assert all(stage in decision.reason for stage in ("consumers:", "split:", "merge:"))
    elif isinstance(decision, Split):
        assert decision.segment_id in active and len(active) < policy.max_segments
        layout.split_segment(decision.segment_id, NOW)
    elif isinstance(decision, Merge):
        assert len(active) > policy.min_segments
        a, b = active[decision.segment_id_1], active[decision.segment_id_2]
        assert a.hash_range.end + 1 == b.hash_range.start
        assert decision.segment_id_1 in loads and decision.segment_id_2 in loads
        layout.merge_segments(a.segment_id, b.segment_id, NOW, policy.max_entry_buckets_per_segment)
    else:
        assert isinstance(decision, Rebucket)
        assert list(decision.segment_ids) == sorted(decision.segment_ids)
        assert decision.bucket_count <= policy.max_entry_buckets_per_segment
        for sid in decision.segment_ids:
            assert active[sid].bucket_count < decision.bucket_count
            layout = layout.rebucket_segment(sid, decision.bucket_count, NOW)


@given(st.sets(st.sampled_from([f.name for f in dataclasses.fields(AutoScalePolicy)])))
def test_the_override_takes_every_policy_field_and_only_those(names: set[str]) -> None:
    policy = AutoScalePolicy(max_segments=9, min_segments=2, enabled=False)
    override = AutoScalePolicyOverride(**{n: getattr(policy, n) for n in names})
    for f in dataclasses.fields(AutoScalePolicy):
        assert getattr(override, f.name) == (getattr(policy, f.name) if f.name in names else None)
    assert list(override.set_fields()) == [
        f.name for f in dataclasses.fields(AutoScalePolicy) if f.name in names
    ]
    assert AutoScalePolicyOverride.from_dict(override.to_dict()) == override
    assert pickle.loads(pickle.dumps(override)) == override
    assert hash(override) == hash(AutoScalePolicyOverride(**override.set_fields()))
    assert AutoScalePolicy().resolve(topic_override=override) == AutoScalePolicy(
        **{**AutoScalePolicy().to_dict(), **override.set_fields()}
    )


def test_the_override_refuses_what_the_policy_refuses() -> None:
    with pytest.raises(TypeError, match=r"unknown field.*max_segmnts"):
        AutoScalePolicyOverride(max_segmnts=3)
    with pytest.raises(TypeError, match="enabled must be a bool"):
        AutoScalePolicyOverride(enabled=1)
    with pytest.raises(TypeError, match="split_msg_rate_in must be a number"):
        AutoScalePolicyOverride(split_msg_rate_in="fast")
    with pytest.raises(ValueError, match=r"topic\.merge_window_ms must be >= 0"):
        AutoScalePolicyOverride.from_dict({"merge_window_ms": -1}, "topic")
    with pytest.raises(AttributeError, match="no attribute 'max_segmnts'"):
        AutoScalePolicyOverride().max_segmnts  # noqa: B018
    override = AutoScalePolicyOverride(max_segments=3, max_dag_depth=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        override.max_segments = 4  # type: ignore[misc]
    assert repr(override) == "AutoScalePolicyOverride(max_segments=3)"
    assert AutoScalePolicyOverride.from_dict({"max_segments": None}) == AutoScalePolicyOverride()


def test_rebucket_above_32768_buckets_is_asked_for_once() -> None:
    """Rebucketing to 65,536 gives 65,535 buckets (bucket 0 keeps [0, 1]); the next decision
    must see that as done, not ask for the same rebucket again forever."""
    layout = ks.TopicLayout.initial(1, bucket_budget=4, now_ms=0)
    policy = ks.scalable.resolve_auto_scale_config(
        ks.AutoScalePolicy(max_entry_buckets_per_segment=65536, max_segments=1)
    )
    first = ks.decide(layout, {}, {"s": 70_000}, policy, 10**9)
    assert isinstance(first, ks.scalable.Rebucket) and first.bucket_count == 65536
    layout = ks.apply_decision(layout, first, policy, 10**9)
    assert [s.bucket_count for s in layout.active_segments()] == [65535]
    again = ks.decide(layout, {}, {"s": 70_000}, policy, 2 * 10**9)
    assert isinstance(again, ks.scalable.NoAction)
    assert "already has 65535 bucket(s), the most allowed" in again.reason
