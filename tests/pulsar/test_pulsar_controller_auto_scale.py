"""Pulsar's ScalableTopicControllerAutoScaleTest, ported to its pure decision core: a small
controller model resolves the policy (:func:`resolve_auto_scale_config`), decides
(:func:`decide`), applies (:func:`apply_decision`) and advances the cooldown clocks
(:meth:`LastOperationTimes.after`), on virtual time; a new leader recovers the clocks from the
layout (:func:`last_operation_times`). The follow-up evaluations Pulsar schedules after a
split or rollover are run when their time comes. Also: apply_decision's own rules, and the
resolution of invalid policies."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keyshared import AutoScalePolicy, Decision, TopicLayout, apply_decision, decide
from keyshared.routing import equal_width_splits
from keyshared.scalable import (
    AutoScalePolicyOverride,
    InvalidPolicy,
    LastOperationTimes,
    Merge,
    NoAction,
    Rebucket,
    SegmentLoadSample,
    SegmentLoadStats,
    Split,
    last_operation_times,
    resolve_auto_scale_config,
)

NOW = 1_700_000_000_000
#: The broker configuration of Pulsar's test: no cooldowns or windows, 64 segments at most.
BROKER = AutoScalePolicyOverride(
    enabled=True,
    max_segments=64,
    min_segments=1,
    split_cooldown_ms=0,
    merge_cooldown_ms=0,
    merge_window_ms=0,
    split_msg_rate_in=10_000.0,
)


class InjectedFailure(RuntimeError):
    pass


@dataclass
class Controller:
    """The controller's auto-scale loop around the pure functions."""

    layout: TopicLayout
    broker: AutoScalePolicyOverride = BROKER
    namespace_override: AutoScalePolicyOverride | None = None
    topic_override: AutoScalePolicyOverride | None = None
    clocks: LastOperationTimes = field(default_factory=LastOperationTimes)
    consumers: dict[str, int] = field(default_factory=dict)
    load: dict[int, SegmentLoadSample] = field(default_factory=dict)
    now: int = NOW
    fail_next_apply: bool = False
    follow_up_at: int | None = None

    @classmethod
    def start(cls, segments: int, **kwargs: object) -> Controller:
        layout = TopicLayout.initial(segments, 4, now_ms=NOW - 1)
        return cls(layout, **kwargs)  # type: ignore[arg-type]

    def failover(self) -> Controller:
        """A new leader: same stored state, clocks recovered from the layout."""
        return Controller(
            self.layout,
            self.broker,
            self.namespace_override,
            self.topic_override,
            last_operation_times(self.layout),
            dict(self.consumers),
            dict(self.load),
            self.now,
        )

    @property
    def policy(self) -> AutoScalePolicy | InvalidPolicy:
        return resolve_auto_scale_config(self.broker, self.namespace_override, self.topic_override)

    def active_count(self) -> int:
        return len(self.layout.active_segments())

    def sole_bucket_count(self) -> int:
        (segment,) = self.layout.active_segments()
        return segment.bucket_count

    def report(self, segment_id: int, msg_rate_in: float) -> None:
        self.load[segment_id] = SegmentLoadSample(SegmentLoadStats(msg_rate_in), self.now)

    def evaluate(self) -> Decision:
        policy = self.policy
        active = {s.segment_id for s in self.layout.active_segments()}
        samples = {sid: s for sid, s in self.load.items() if sid in active}
        decision = decide(
            self.layout,
            samples,
            {"sub": len(self.consumers)} if self.consumers else {},
            policy,
            self.now,
            **self.clocks.to_dict(),
        )
        if isinstance(decision, NoAction):
            return decision
        assert isinstance(policy, AutoScalePolicy)
        # Like Pulsar, a follow-up is scheduled after a split or rollover whether or not
        # the operation went through, once the matching cooldown ends.
        if isinstance(decision, Split):
            self.follow_up_at = self.now + policy.split_cooldown_ms + 1
        elif isinstance(decision, Rebucket):
            self.follow_up_at = self.now + policy.rebucket_cooldown_ms + 1
        if self.fail_next_apply:
            self.fail_next_apply = False
            raise InjectedFailure(decision)
        self.layout = apply_decision(self.layout, decision, policy, self.now)
        self.clocks = self.clocks.after(decision, self.now)
        return decision

    def register(self, name: str) -> None:
        self.consumers[name] = len(self.consumers)
        self.evaluate()

    def advance(self, ms: int) -> None:
        """Virtual time passes; due follow-up evaluations run (each may schedule another)."""
        end = self.now + ms
        while self.follow_up_at is not None and self.follow_up_at <= end:
            self.now, self.follow_up_at = self.follow_up_at, None
            with contextlib.suppress(InjectedFailure):
                self.evaluate()
        self.now = end


def test_load_driven_split() -> None:
    c = Controller.start(2)
    assert c.active_count() == 2
    c.report(0, 20_000)
    c.evaluate()
    assert c.active_count() == 3


def test_no_split_when_under_threshold() -> None:
    c = Controller.start(2)
    c.report(0, 100)
    c.evaluate()
    assert c.active_count() == 2


def test_disabled_config_is_no_op() -> None:
    c = Controller.start(
        2, broker=AutoScalePolicyOverride(**{**BROKER.set_fields(), "enabled": False})
    )
    c.report(0, 1_000_000)
    assert c.evaluate().reason.startswith("disabled")
    assert c.active_count() == 2


def test_cold_segments_merge() -> None:
    c = Controller.start(4)
    for segment_id in range(4):
        c.report(segment_id, 1)
    assert isinstance(c.evaluate(), Merge)
    assert c.active_count() == 3


def test_consumer_driven_split() -> None:
    c = Controller.start(
        1,
        broker=AutoScalePolicyOverride(
            **{**BROKER.set_fields(), "split_vs_rebucket_min_msg_rate_in": 0.0}
        ),
    )
    c.register("c1")
    c.register("c2")
    c.advance(10_000)
    assert c.active_count() == 2


def test_namespace_override_disables_auto_scale() -> None:
    c = Controller.start(2, namespace_override=AutoScalePolicyOverride(enabled=False))
    c.report(0, 20_000)
    c.evaluate()
    assert c.active_count() == 2


def test_topic_override_wins_over_namespace() -> None:
    c = Controller.start(
        2,
        namespace_override=AutoScalePolicyOverride(enabled=False),
        topic_override=AutoScalePolicyOverride(enabled=True),
    )
    c.report(0, 20_000)
    c.evaluate()
    assert c.active_count() == 3


def test_topic_override_max_segments_caps_split() -> None:
    c = Controller.start(2, topic_override=AutoScalePolicyOverride(max_segments=2))
    c.report(0, 20_000)
    c.evaluate()
    assert c.active_count() == 2


def test_topic_override_survives_split() -> None:
    override = AutoScalePolicyOverride(max_segments=3)
    c = Controller.start(2, topic_override=override)
    c.report(0, 20_000)
    c.evaluate()
    assert c.active_count() == 3
    assert c.topic_override == override
    c.report(1, 20_000)
    c.evaluate()
    assert c.active_count() == 3


def test_invalid_override_combination_falls_back_to_disabled() -> None:
    c = Controller.start(
        2,
        namespace_override=AutoScalePolicyOverride(merge_msg_rate_in=5_000.0),
        topic_override=AutoScalePolicyOverride(split_msg_rate_in=2_000.0),
    )
    c.report(0, 20_000)
    decision = c.evaluate()
    assert isinstance(decision, NoAction)
    assert decision.reason.startswith("disabled: invalid policy: split_msg_rate_in")
    assert c.active_count() == 2


def test_invalid_broker_level_policy_disables_auto_scale() -> None:
    broker = AutoScalePolicyOverride(**{**BROKER.set_fields(), "max_entry_buckets_per_segment": 0})
    c = Controller.start(1, broker=broker)
    c.register("c1")
    c.register("c2")
    decision = c.evaluate()
    assert isinstance(decision, NoAction)
    assert "invalid policy: max_entry_buckets_per_segment" in decision.reason
    assert c.active_count() == 1


def test_consumer_burst_converges_without_ticks() -> None:
    c = Controller.start(
        1,
        broker=AutoScalePolicyOverride(
            **{**BROKER.set_fields(), "split_vs_rebucket_min_msg_rate_in": 0.0}
        ),
    )
    for i in range(1, 5):
        c.register(f"c{i}")
    c.advance(20_000)
    assert c.active_count() == 4


def test_split_cooldown_blocks_second_split() -> None:
    c = Controller.start(
        2, broker=AutoScalePolicyOverride(**{**BROKER.set_fields(), "split_cooldown_ms": 3_600_000})
    )
    c.report(0, 20_000)
    c.evaluate()
    assert c.active_count() == 3
    c.report(1, 20_000)
    c.evaluate()
    assert c.active_count() == 3


def rebucket_broker(rebucket_cooldown_ms: int) -> AutoScalePolicyOverride:
    return AutoScalePolicyOverride(
        **{
            **BROKER.set_fields(),
            "split_cooldown_ms": 3_600_000,
            "rebucket_cooldown_ms": rebucket_cooldown_ms,
        }
    )


def test_post_rebucket_follow_up_uses_rebucket_cooldown() -> None:
    c = Controller.start(1, broker=rebucket_broker(3_000))
    for i in range(1, 6):
        c.register(f"c{i}")
    assert c.sole_bucket_count() == 8
    for i in range(6, 10):
        c.register(f"c{i}")  # inside the rebucket cooldown: held back
    assert c.sole_bucket_count() == 8
    c.advance(20_000)
    assert c.sole_bucket_count() == 16


def test_mid_batch_rebucket_failure_still_schedules_follow_up() -> None:
    c = Controller(TopicLayout.initial(2, 4, now_ms=NOW - 1), broker=rebucket_broker(2_000))
    # Seven consumers join at once (their triggers coalesce into one evaluation): the cold
    # topic rolls both segments over to 4 buckets, Rebucket([0, 1] -> 4). Here applying is
    # all or nothing, so the injected failure leaves both segments (Pulsar would have rolled
    # segment 0 already); either way the follow-up must finish the job.
    c.consumers = {f"c{i}": i for i in range(1, 8)}
    c.fail_next_apply = True
    with pytest.raises(InjectedFailure):
        c.evaluate()
    assert [s.bucket_count for s in c.layout.active_segments()] == [2, 2]
    c.advance(20_000)
    assert [s.bucket_count for s in c.layout.active_segments()] == [4, 4]


def test_rebucket_cooldown_survives_leader_failover() -> None:
    c = Controller.start(1, broker=rebucket_broker(3_600_000))
    for i in range(1, 6):
        c.register(f"c{i}")
    assert c.sole_bucket_count() == 8
    c = c.failover()
    assert c.clocks.last_rebucket_at_ms == NOW and c.clocks.last_split_at_ms is None
    c.register("c9")
    c.evaluate()
    assert c.sole_bucket_count() == 8
    (successor,) = c.layout.active_segments()
    c.report(successor.segment_id, 20_000)
    c.evaluate()
    assert c.active_count() == 2


def test_split_cooldown_survives_leader_failover() -> None:
    c = Controller.start(
        2, broker=AutoScalePolicyOverride(**{**BROKER.set_fields(), "split_cooldown_ms": 3_600_000})
    )
    c.report(0, 20_000)
    c.evaluate()
    assert c.active_count() == 3
    c = c.failover()
    c.report(1, 20_000)
    c.evaluate()
    assert c.active_count() == 3


def test_failed_split_does_not_burn_cooldown() -> None:
    c = Controller.start(
        2, broker=AutoScalePolicyOverride(**{**BROKER.set_fields(), "split_cooldown_ms": 3_600_000})
    )
    c.report(0, 20_000)
    c.fail_next_apply = True
    with pytest.raises(InjectedFailure):
        c.evaluate()
    assert c.active_count() == 2
    c.evaluate()
    assert c.active_count() == 3


# --- apply_decision ------------------------------------------------------------------------------


def test_a_merge_is_clamped_to_the_policys_bucket_ceiling() -> None:
    layout = TopicLayout.initial(2, 4).rebucket_segment(0, 600, 1).rebucket_segment(1, 600, 2)
    policy = AutoScalePolicy()
    merged = apply_decision(layout, Merge(2, 3, "cold"), policy, 3)
    assert merged.segments[4].bucket_count == policy.max_entry_buckets_per_segment == 1024
    # The bare layout operation does not know the policy.
    assert layout.merge_segments(2, 3, 3).segments[4].bucket_count == 1200


def test_a_rebucket_rolls_every_listed_segment_to_equal_width_splits() -> None:
    layout = TopicLayout.initial(3, 3)
    after = apply_decision(layout, Rebucket((0, 2), 4, "at-max-segments"), AutoScalePolicy(), 9)
    assert after.epoch == 2 and after.next_segment_id == 5
    assert [s.segment_id for s in after.active_segments()] == [3, 1, 4]
    for old, new in ((0, 3), (2, 4)):
        successor = after.segments[new]
        assert successor.parent_ids == (old,)
        assert successor.hash_range == layout.segments[old].hash_range
        assert list(successor.bucket_splits) == equal_width_splits(4)
        assert successor.created_at_ms == 9
    assert after.segments[3].created_at_epoch == 1 and after.segments[4].created_at_epoch == 2


def test_a_split_is_one_more_epoch_and_no_action_is_the_same_layout() -> None:
    layout = TopicLayout.initial(1, 4)
    assert apply_decision(layout, NoAction("idle"), AutoScalePolicy(), 5) is layout
    after = apply_decision(layout, Split(0, "msgRateIn"), AutoScalePolicy(), 5)
    assert after == layout.split_segment(0, 5)


@pytest.mark.parametrize(
    ("decision", "policy", "error", "message"),
    [
        (Split(0, "x"), InvalidPolicy("bad"), ValueError, "the policy is invalid"),
        (Rebucket((0,), 2048, "x"), AutoScalePolicy(), ValueError, "bucket_count must be <= 1024"),
        (Rebucket((0, 0), 8, "x"), AutoScalePolicy(), ValueError, "twice"),
        (Rebucket((), 8, "x"), AutoScalePolicy(), ValueError, "at least one"),
        (Rebucket((0, 1), 4, "x"), AutoScalePolicy(), ValueError, "already has 4"),
        (Merge(0, 5, "cold"), AutoScalePolicy(), ValueError, "segment 5"),
        ("split", AutoScalePolicy(), TypeError, "decision"),
        (Split(0, "x"), {"enabled": True}, TypeError, "policy"),
    ],
)
def test_apply_decision_refusals(
    decision: object, policy: object, error: type, message: str
) -> None:
    layout = TopicLayout.initial(2, 8)
    before = layout.to_json()
    with pytest.raises(error, match=message):
        apply_decision(layout, decision, policy, 1)  # type: ignore[arg-type]
    assert layout.to_json() == before


def test_clocks_advance_by_decision_kind() -> None:
    clocks = LastOperationTimes(1, 2, 3)
    assert clocks.after(Split(0, "x"), 10) == LastOperationTimes(10, 2, 3)
    assert clocks.after(Merge(0, 1, "cold"), 10) == LastOperationTimes(1, 10, 3)
    assert clocks.after(Rebucket((0,), 2, "x"), 10) == LastOperationTimes(1, 2, 10)
    assert clocks.after(NoAction("idle"), 10) is clocks
    with pytest.raises(ValueError, match="last_merge_at_ms"):
        LastOperationTimes(0, -1, 0)
    with pytest.raises(TypeError, match="decision"):
        clocks.after("split", 10)  # type: ignore[arg-type]


# --- resolution of invalid policies -------------------------------------------------------------


def test_resolution_returns_an_invalid_policy_instead_of_raising() -> None:
    assert resolve_auto_scale_config() == AutoScalePolicy()
    assert resolve_auto_scale_config(AutoScalePolicy(max_segments=8)).max_segments == 8
    bad = resolve_auto_scale_config(AutoScalePolicyOverride(min_segments=0))
    assert isinstance(bad, InvalidPolicy) and "min_segments" in bad.reason
    assert not bad.enabled
    with pytest.raises(ValueError, match="min_segments"):
        AutoScalePolicy().resolve(topic_override=AutoScalePolicyOverride(min_segments=0))
    with pytest.raises(TypeError, match="namespace_override"):
        resolve_auto_scale_config(None, {"enabled": False})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="broker"):
        resolve_auto_scale_config({"enabled": False})  # type: ignore[arg-type]


def test_decide_still_checks_its_arguments_under_an_invalid_policy() -> None:
    with pytest.raises(ValueError, match="now_ms"):
        decide(TopicLayout.initial(1), {}, {}, InvalidPolicy("x"), -1)


# --- properties ------------------------------------------------------------------------------

_rates = st.sampled_from([0.0, 10.0, 5_000.0, 20_000.0, 200_000.0])


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 6),
    st.sampled_from([1, 2, 4, 16, 64]),
    st.integers(1, 64),
    st.lists(st.tuples(st.lists(_rates, min_size=8, max_size=8), st.integers(0, 40)), max_size=12),
)
def test_decide_then_apply_keeps_every_segment_within_the_bucket_ceiling(
    segments: int, ceiling: int, budget: int, steps: list[tuple[list[float], int]]
) -> None:
    policy = AutoScalePolicy(
        max_segments=8,
        max_entry_buckets_per_segment=ceiling,
        split_cooldown_ms=0,
        merge_cooldown_ms=0,
        merge_window_ms=0,
        rebucket_cooldown_ms=0,
        split_vs_rebucket_min_msg_rate_in=5_000.0,
    )
    layout = TopicLayout.initial(segments, min(budget, ceiling * segments))
    clocks = last_operation_times(layout)
    for now, (rates, consumers) in enumerate(steps, start=1):
        active = layout.active_segments()
        load = {
            s.segment_id: SegmentLoadSample(SegmentLoadStats(rates[i % 8]), 0)
            for i, s in enumerate(active)
        }
        decision = decide(layout, load, {"s": consumers}, policy, now, **clocks.to_dict())
        layout = apply_decision(layout, decision, policy, now)
        clocks = clocks.after(decision, now)
        assert clocks == last_operation_times(layout) or isinstance(decision, NoAction)
        assert all(s.bucket_count <= ceiling for s in layout.active_segments())
