"""Pulsar's SubscriptionCoordinatorTest, ported to the immutable coordinator: the
assignment rule, parent-drain ordering, the PIP-486 fan-out of bucketed segments and the
session lifecycle (grace periods on virtual time). Two of Pulsar's tests exercise the drain
poller's timer and a close() race; they have no counterpart here, the coordinator holds no
timers (:meth:`SubscriptionCoordinator.segments_to_check` is the poller's work list).
Property tests check the rule on random layouts and consumer groups."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from keyshared import (
    HashRange,
    SubscriptionCoordinator,
    TopicLayout,
    TopicName,
    compute_assignment,
)
from keyshared.scalable import ConsumerAssignment

TOPIC = TopicName.get("topic://tenant/ns/my-topic")
GRACE_MS = 200
FULL_BUCKETS = (
    HashRange(0x0000, 0x3FFF),
    HashRange(0x4000, 0x7FFF),
    HashRange(0x8000, 0xBFFF),
    HashRange(0xC000, 0xFFFF),
)


def coordinator(layout: TopicLayout | None = None, **kwargs: object) -> SubscriptionCoordinator:
    return SubscriptionCoordinator(
        "test-sub",
        TOPIC,
        layout or TopicLayout.initial(4, 4),
        grace_period_ms=GRACE_MS,
        **kwargs,  # type: ignore[arg-type]
    )


def register(
    c: SubscriptionCoordinator, *names: str
) -> tuple[SubscriptionCoordinator, dict[str, ConsumerAssignment]]:
    result: dict[str, ConsumerAssignment] = {}
    for i, name in enumerate(names, start=1):
        c, result = c.register_consumer(name, i)
    return c, result


def ids(assignment: ConsumerAssignment) -> set[int]:
    return set(assignment.segment_ids)


def count_assigned_to(result: dict[str, ConsumerAssignment], segment_id: int) -> int:
    return sum(segment_id in a.segment_ids for a in result.values())


def count_idle(result: dict[str, ConsumerAssignment]) -> int:
    return sum(not a.assigned_segments for a in result.values())


def test_single_consumer_gets_all_segments() -> None:
    _, result = register(coordinator(), "consumer-1")
    assert len(result) == 1
    assignment = result["consumer-1"]
    assert len(assignment.assigned_segments) == 4
    assert assignment.layout_epoch == 0


def test_two_consumers_balanced() -> None:
    _, result = register(coordinator(), "consumer-1", "consumer-2")
    assert len(result) == 2
    assert len(result["consumer-1"].assigned_segments) == 2
    assert len(result["consumer-2"].assigned_segments) == 2


def test_three_consumers_with_four_segments() -> None:
    _, result = register(coordinator(), "consumer-1", "consumer-2", "consumer-3")
    assert len(result) == 3
    assigned = [sid for a in result.values() for sid in a.segment_ids]
    assert len(assigned) == 4 and len(set(assigned)) == 4


def test_unregister_consumer_rebalances() -> None:
    c, _ = register(coordinator(), "consumer-1", "consumer-2")
    _, result = c.unregister_consumer("consumer-2", 2)
    assert len(result) == 1
    assert len(result["consumer-1"].assigned_segments) == 4


def test_layout_change_rebalances() -> None:
    c, _ = register(coordinator(), "consumer-1")
    _, result = c.on_layout_change(TopicLayout.initial(4, 4).split_segment(0, 0))
    # No drain checker: every segment of the DAG, 5 active and 1 sealed.
    assert len(result) == 1
    assert len(result["consumer-1"].assigned_segments) == 6


def test_active_children_blocked_until_parent_drained() -> None:
    ordered = coordinator(drain_checker=True)
    ordered, _ = register(ordered, "consumer-1")
    ordered, result = ordered.on_layout_change(TopicLayout.initial(4, 4).split_segment(0, 0))
    assigned = ids(result["consumer-1"])
    assert {0, 1, 2, 3} <= assigned
    assert 4 not in assigned and 5 not in assigned
    assert ordered.segments_to_check() == (0,)
    ordered = ordered.mark_segments_drained({0})
    now_assigned = ids(ordered.current_assignment()["consumer-1"])
    assert {1, 2, 3, 4, 5} <= now_assigned
    assert 0 not in now_assigned
    assert ordered.segments_to_check() == ()


def test_restored_coordinator_starts_without_parent_drain_ordering() -> None:
    c, _ = coordinator().restore_consumers(["consumer-1"], now_ms=0)
    _, result = c.on_layout_change(TopicLayout.initial(4, 4).split_segment(0, 0))
    assert len(ids(result["consumer-1"])) == 6


def test_install_drain_checker_after_restore_enables_ordering() -> None:
    c, _ = register(coordinator(), "consumer-1")
    c, _ = c.on_layout_change(TopicLayout.initial(4, 4).split_segment(0, 0))
    assert len(ids(c.current_assignment()["consumer-1"])) == 6
    c = c.install_drain_checker()
    assigned = ids(c.current_assignment()["consumer-1"])
    assert {0, 1, 2, 3} <= assigned
    assert len(assigned) == 4


def test_empty_after_all_consumers_removed() -> None:
    c, _ = register(coordinator(), "consumer-1")
    c, result = c.unregister_consumer("consumer-1", 1)
    assert result == {}
    assert c.consumers == ()


def test_assignment_determinism() -> None:
    _, result1 = register(coordinator(), "consumer-a", "consumer-b")
    _, result2 = register(coordinator(), "consumer-a", "consumer-b")
    assert result1["consumer-a"].segment_ids == result2["consumer-a"].segment_ids
    assert result1["consumer-b"].segment_ids == result2["consumer-b"].segment_ids


# --- session lifecycle ------------------------------------------------------------------------


def test_reconnect_within_grace_period_preserves_assignment() -> None:
    c, before = register(coordinator(), "consumer-1", "consumer-2")
    c = c.on_consumer_disconnect("consumer-1", now_ms=1_000)
    assert len(c.consumers) == 2
    c = c.evict_expired(now_ms=1_000 + GRACE_MS - 1)
    c, result = c.register_consumer("consumer-1", 99)
    assert len(result) == 2
    assert len(result["consumer-1"].assigned_segments) == 2
    assert len(result["consumer-2"].assigned_segments) == 2
    assert result == before
    reconnected = c.sessions["consumer-1"]
    assert reconnected.is_connected and reconnected.consumer_id == 99


def test_expired_session_is_evicted_after_grace_period() -> None:
    c, _ = register(coordinator(), "consumer-1", "consumer-2")
    assert len(c.consumers) == 2
    c = c.on_consumer_disconnect("consumer-1", now_ms=1_000)
    assert len(c.evict_expired(now_ms=1_000 + GRACE_MS - 1).consumers) == 2
    c = c.evict_expired(now_ms=1_000 + GRACE_MS)
    assert [s.consumer_name for s in c.consumers] == ["consumer-2"]
    assert len(c.current_assignment()["consumer-2"].assigned_segments) == 4


def test_restore_consumers_installs_disconnected_sessions() -> None:
    c, assignments = coordinator().restore_consumers(["consumer-1", "consumer-2"], now_ms=5)
    assert len(assignments) == 2
    assert len(c.consumers) == 2
    for session in c.consumers:
        assert not session.is_connected and session.disconnected_at_ms == 5


def test_restored_consumer_resumes_assignment_on_reconnect() -> None:
    c, _ = coordinator().restore_consumers(["consumer-1", "consumer-2"], now_ms=0)
    c, result = c.register_consumer("consumer-1", 42)
    assert len(result) == 2
    assert len(result["consumer-1"].assigned_segments) == 2
    assert c.sessions["consumer-1"].is_connected


# --- PIP-486 entry-bucket assignment ------------------------------------------------------------


def bucketed() -> SubscriptionCoordinator:
    return coordinator(TopicLayout.initial(1, 4))


def test_single_bucket_segments_have_no_bucket_ranges() -> None:
    _, result = register(coordinator(), "consumer-1")
    assert all(not s.bucket_ranges for s in result["consumer-1"].assigned_segments)


def test_lone_consumer_owns_bucketed_segment_whole() -> None:
    _, result = register(bucketed(), "consumer-1")
    assignment = result["consumer-1"]
    assert len(assignment.assigned_segments) == 1
    assert assignment.assigned_segments[0].bucket_ranges == ()


def test_surplus_consumers_fan_out_bucketed_segment() -> None:
    _, result = register(bucketed(), "consumer-1", "consumer-2")
    assert len(result) == 2
    for assignment in result.values():
        assert len(assignment.assigned_segments) == 1
        segment = assignment.assigned_segments[0]
        assert segment.segment_id == 0
        assert segment.bucket_ranges == FULL_BUCKETS


def test_fan_out_caps_at_bucket_count_and_leaves_rest_idle() -> None:
    _, result = register(bucketed(), *(f"consumer-{i}" for i in range(1, 6)))
    assert len(result) == 5
    sharers = [a for a in result.values() if a.assigned_segments]
    assert count_idle(result) == 1 and len(sharers) == 4
    assert all(a.assigned_segments[0].bucket_ranges == FULL_BUCKETS for a in sharers)


def test_drained_parent_retires_from_assignment() -> None:
    base = TopicLayout.initial(1, 4)
    rolled = base.rebucket_segment(0, 8, 0)
    c = coordinator(base, drain_checker=True)
    c, _ = register(c, *(f"consumer-{i}" for i in range(1, 6)))
    c, before = c.on_layout_change(rolled)
    assert count_assigned_to(before, 0) == 4
    assert count_assigned_to(before, 1) == 0
    assert count_idle(before) == 1
    c = c.mark_segments_drained({0})
    c, after = c.on_layout_change(rolled)
    assert count_assigned_to(after, 0) == 0
    assert count_assigned_to(after, 1) == 5
    assert count_idle(after) == 0


def test_unregister_with_stale_consumer_id_keeps_rejoined_session() -> None:
    c, _ = coordinator().register_consumer("c1", 1)
    c, _ = c.register_consumer("c1", 2)
    c, _ = c.unregister_consumer("c1", 1)
    assert len(c.consumers) == 1
    c, _ = c.unregister_consumer("c1", 2)
    assert len(c.consumers) == 0


# --- beyond Pulsar's tests --------------------------------------------------------------------


def test_segment_topic_names_and_order_of_assignment() -> None:
    layout = TopicLayout.initial(2, 4)
    result = compute_assignment(layout, TOPIC, ["b", "a", "c"])
    assert result["a"].assigned_segments[0].segment_topic_name == (
        "segment://tenant/ns/my-topic/0000-7fff-0"
    )
    # 3 consumers, 2 segments of 2 buckets: a and b take one each, c shares segment 0.
    assert [result[n].segment_ids for n in "abc"] == [(0,), (1,), (0,)]
    assert result["b"].assigned_segments[0].bucket_ranges == ()


def test_a_sealed_segment_waits_for_its_own_parents() -> None:
    # 0 splits into 1 and 2; 1 is rebucketed (sealed) before 0 drained. Pulsar would hand
    # out the sealed 1 at once; here it waits for 0 like any child of 0.
    layout = TopicLayout.initial(1, 4).split_segment(0, 0).rebucket_segment(1, 4, 1)
    result = compute_assignment(layout, TOPIC, ["a"], drained_segment_ids=set())
    assert result["a"].segment_ids == (0,)
    result = compute_assignment(layout, TOPIC, ["a"], drained_segment_ids={0})
    assert set(result["a"].segment_ids) == {1, 2}


def test_a_pruned_parent_counts_as_drained() -> None:
    layout = TopicLayout.initial(1, 4).split_segment(0, 0).prune_segment(0)
    result = compute_assignment(layout, TOPIC, ["a"], drained_segment_ids=set())
    assert result["a"].segment_ids == (1, 2)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda c: c.register_consumer(5, 1), TypeError, "consumer_name must be a str"),
        (lambda c: c.register_consumer("a", -1), ValueError, "consumer_id"),
        (lambda c: c.mark_segments_drained({1}), ValueError, "not a sealed segment"),
        (lambda c: c.on_consumer_disconnect("a", -5), ValueError, "now_ms"),
        (lambda c: compute_assignment(c.layout, TOPIC, ["a", "a"]), ValueError, "repeats"),
    ],
)
def test_bad_arguments_name_themselves(call: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call(coordinator())  # type: ignore[operator]


@st.composite
def layouts(draw: st.DrawFn) -> TopicLayout:
    layout = TopicLayout.initial(draw(st.integers(1, 4)), draw(st.sampled_from([1, 4, 8, 16])))
    for step in range(draw(st.integers(0, 6))):
        active = layout.active_segments()
        seg = active[draw(st.integers(0, len(active) - 1))]
        if draw(st.booleans()) and seg.hash_range.size > 1:
            layout = layout.split_segment(seg.segment_id, step)
        elif seg.bucket_count != 8:
            layout = layout.rebucket_segment(seg.segment_id, 8, step)
    return layout


@given(layouts(), st.integers(1, 24), st.data())
def test_assignment_rule_properties(
    layout: TopicLayout, consumers: int, data: st.DataObject
) -> None:
    sealed = [s.segment_id for s in layout.segments.values() if s.is_sealed]
    drained = set(data.draw(st.lists(st.sampled_from(sealed), unique=True))) if sealed else set()
    checker = data.draw(st.booleans())
    names = [f"c{i:02d}" for i in range(consumers)]
    result = compute_assignment(layout, TOPIC, names, drained if checker else None)
    assert list(result) == names
    assignable = [
        s
        for s in layout.segments.values()
        if not checker
        or (
            not (s.is_sealed and s.segment_id in drained)
            and all(p in drained for p in s.parent_ids)
        )
    ]
    owners: dict[int, list[str]] = {}
    for name, assignment in result.items():
        assert assignment.layout_epoch == layout.epoch
        for segment in assignment.assigned_segments:
            owners.setdefault(segment.segment_id, []).append(name)
    # Every assignable segment is handed out, nothing else is.
    assert set(owners) == {s.segment_id for s in assignable}
    if consumers <= len(assignable):
        # Whole segments, dealt evenly.
        assert all(len(o) == 1 for o in owners.values())
        counts = [len(a.assigned_segments) for a in result.values()]
        assert max(counts) - min(counts) <= 1
    else:
        # Each consumer reads at most one segment; sharers stay within the bucket count;
        # a consumer idles only when every segment is full.
        assert all(len(a.assigned_segments) <= 1 for a in result.values())
        capacity = sum(s.bucket_count for s in assignable)
        for segment in assignable:
            assert len(owners[segment.segment_id]) <= segment.bucket_count
        assert count_idle(result) == max(0, consumers - capacity)
    for assignment in result.values():
        for segment in assignment.assigned_segments:
            shared = len(owners[segment.segment_id]) > 1
            expected = tuple(layout.segments[segment.segment_id].bucket_ranges())
            assert segment.bucket_ranges == (expected if shared else ())


class CoordinatorModel(RuleBasedStateMachine):
    """The immutable coordinator's events against a plain model of Pulsar's sessions."""

    def __init__(self) -> None:
        super().__init__()
        self.layout = TopicLayout.initial(2, 4).split_segment(0, 1).rebucket_segment(1, 8, 2)
        self.coordinator = SubscriptionCoordinator(
            "sub", TOPIC, self.layout, grace_period_ms=GRACE_MS
        )
        self.sessions: dict[str, tuple[int | None, int | None]] = {}
        self.drained: set[int] = set()
        self.checker = False
        self.now = 0

    names = st.sampled_from(["a", "b", "c", "d", "e"])

    @rule(name=names, consumer_id=st.integers(0, 3))
    def register(self, name: str, consumer_id: int) -> None:
        self.coordinator, result = self.coordinator.register_consumer(name, consumer_id)
        self.sessions[name] = (consumer_id, None)
        assert result == self.coordinator.current_assignment()

    @rule(name=names, consumer_id=st.integers(0, 3))
    def unregister(self, name: str, consumer_id: int) -> None:
        self.coordinator, _ = self.coordinator.unregister_consumer(name, consumer_id)
        if name in self.sessions and self.sessions[name][0] == consumer_id:
            del self.sessions[name]

    @rule(name=names, dt=st.integers(0, 150))
    def disconnect(self, name: str, dt: int) -> None:
        self.now += dt
        self.coordinator = self.coordinator.on_consumer_disconnect(name, self.now)
        if name in self.sessions and self.sessions[name][1] is None:
            self.sessions[name] = (self.sessions[name][0], self.now)

    @rule(dt=st.integers(0, 150))
    def evict(self, dt: int) -> None:
        self.now += dt
        self.coordinator = self.coordinator.evict_expired(self.now)
        self.sessions = {
            n: s for n, s in self.sessions.items() if s[1] is None or self.now - s[1] < GRACE_MS
        }

    @rule(names=st.lists(names, unique=True, max_size=3))
    def restore(self, names: list[str]) -> None:
        self.coordinator, _ = self.coordinator.restore_consumers(names, self.now)
        for name in names:
            self.sessions.setdefault(name, (None, self.now))

    @rule()
    def install_checker(self) -> None:
        self.coordinator = self.coordinator.install_drain_checker()
        self.checker = True

    @rule(pick=st.sampled_from([0, 1]))
    def drain(self, pick: int) -> None:
        self.coordinator = self.coordinator.mark_segments_drained({pick})
        self.drained.add(pick)

    @invariant()
    def agrees(self) -> None:
        sessions = {
            n: (s.consumer_id, s.disconnected_at_ms) for n, s in self.coordinator.sessions.items()
        }
        assert sessions == self.sessions
        expected = compute_assignment(
            self.layout, TOPIC, self.sessions, self.drained if self.checker else None
        )
        assert self.coordinator.current_assignment() == expected
        pending = sorted({0, 1} - self.drained) if self.checker and self.sessions else []
        assert list(self.coordinator.segments_to_check()) == pending


TestCoordinatorModel = CoordinatorModel.TestCase
TestCoordinatorModel.settings = settings(max_examples=50, stateful_step_count=30, deadline=None)
