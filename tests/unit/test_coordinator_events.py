"""The coordinator as a state machine (keyshared.scalable.coordinator_events): the paths of
issue 48 event by event, each place where ``compute_assignment`` over what a caller sees
differs from the coordinator's state, and a stateful run against a small Python model
written from M1's Java (``ScalableTopicController`` and ``SubscriptionCoordinator``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import keyshared as ks
from keyshared.scalable import (
    BrokerRestarted,
    ConsumerDisconnected,
    ConsumerEvicted,
    ConsumerRegistered,
    ConsumerUnregistered,
    CoordinatorStateMachine,
    LayoutChanged,
    SegmentsDrained,
)

M1 = "5.0.0-M1"
TOPIC = ks.TopicName.get("topic://public/manual/orders")
# Issue 48's topic: 4 segments, segment 2 split into 4 and 5, then 2 pruned by the GC.
BASE = ks.TopicLayout.initial(4, 1)
SPLIT = BASE.split_segment(2, 1_000)
PRUNED = SPLIT.prune_segment(2)


def machine(pulsar_version: str = M1, layout: ks.TopicLayout = BASE) -> CoordinatorStateMachine:
    return CoordinatorStateMachine(
        "sub", TOPIC, layout, grace_period_ms=5_000, pulsar_version=pulsar_version
    )


def ids(assignment: dict[str, ks.scalable.ConsumerAssignment]) -> dict[str, list[int]]:
    return {n: list(a.segment_ids) for n, a in assignment.items()}


def three_consumers(m: CoordinatorStateMachine) -> None:
    for i, name in enumerate(["a0", "a1", "a2"]):
        m.apply(ConsumerRegistered(name, i))


# --- issue 48, event by event ---------------------------------------------------------------


def test_evicted_after_the_drain() -> None:
    """a2 dies just after its segment 2 is split; 2 drains within the grace period, so the
    children are dealt while a2's session still holds its share (4 and 3, read by nobody)
    and the survivors take them at the eviction."""
    m = machine()
    three_consumers(m)
    steps = [
        (LayoutChanged(SPLIT), {"a0": [0, 3], "a1": [1], "a2": [2]}),
        (ConsumerDisconnected("a2", 1_100), {"a0": [0, 3], "a1": [1], "a2": [2]}),
        (SegmentsDrained(frozenset({2})), {"a0": [0, 2], "a1": [1, 5], "a2": [4, 3]}),
        (ConsumerEvicted("a2"), {"a0": [0, 4, 5], "a1": [1, 2, 3]}),
    ]
    for event, expected in steps:
        assert ids(m.apply(event)) == expected, event
    assert ids(m.connected_assignment()) == {"a0": [0, 4, 5], "a1": [1, 2, 3]}


def test_evicted_after_the_drain_and_a_gc_prune() -> None:
    """The operator's run of issue 48: the GC pruned the drained parent between the drain
    and the eviction, so 2 is handed to nobody and the deal shifts: {a0: [0, 4, 3], a1:
    [1, 5]}, not the {a0: [0, 4, 5], a1: [1, 2, 3]} of the unpruned layout."""
    m = machine()
    three_consumers(m)
    m.replay([LayoutChanged(SPLIT), ConsumerDisconnected("a2", 1_100)])
    m.apply(SegmentsDrained(frozenset({2})))
    assert ids(m.apply(LayoutChanged(PRUNED))) == {"a0": [0, 5], "a1": [1, 3], "a2": [4]}
    assert ids(m.apply(ConsumerEvicted("a2"))) == {"a0": [0, 4, 3], "a1": [1, 5]}


def test_evicted_before_the_drain() -> None:
    """a2's parent still holds messages it never read: the eviction hands the parent to a
    survivor with the children withheld, and the drain then deals them."""
    m = machine()
    three_consumers(m)
    m.replay([LayoutChanged(SPLIT), ConsumerDisconnected("a2", 1_100)])
    assert ids(m.apply(ConsumerEvicted("a2"))) == {"a0": [0, 2], "a1": [1, 3]}
    assert ids(m.apply(SegmentsDrained(frozenset({2})))) == {"a0": [0, 4, 5], "a1": [1, 2, 3]}
    assert ids(m.apply(LayoutChanged(PRUNED))) == {"a0": [0, 4, 3], "a1": [1, 5]}


def test_both_orders_end_alike_on_one_layout() -> None:
    """The coordinator's assignment is a function of its state: drain-then-evict and
    evict-then-drain end on the same one, as long as the layout (pruned or not) is the
    same."""
    drained, evicted = SegmentsDrained(frozenset({2})), ConsumerEvicted("a2")
    finals = []
    for order in ([drained, evicted], [evicted, drained]):
        m = machine()
        three_consumers(m)
        m.replay([LayoutChanged(SPLIT), ConsumerDisconnected("a2", 1_100), *order])
        finals.append(ids(m.assignment()))
    assert finals[0] == finals[1]


def test_master_retires_the_drained_parent_on_either_path() -> None:
    """Master's rule gives the pruned layout's answer as soon as the parent drained: a GC
    prune of a drained parent moves nobody."""
    m = machine("master")
    three_consumers(m)
    m.replay([LayoutChanged(SPLIT), ConsumerDisconnected("a2", 1_100)])
    drained = {"a0": [0, 5], "a1": [1, 3], "a2": [4]}
    assert ids(m.apply(SegmentsDrained(frozenset({2})))) == drained
    assert ids(m.apply(ConsumerEvicted("a2"))) == {"a0": [0, 4, 3], "a1": [1, 5]}
    assert ids(m.apply(LayoutChanged(PRUNED))) == {"a0": [0, 4, 3], "a1": [1, 5]}


def test_a_merge_and_two_consumers_gone_at_once() -> None:
    """Segments 1 and 2 merge into 4 while b1 and b2 die; each is evicted on its own."""
    merged = BASE.merge_segments(1, 2, 2_000)
    m = machine()
    for i, name in enumerate(["b0", "b1", "b2", "b3"]):
        m.apply(ConsumerRegistered(name, i))
    assert ids(m.apply(LayoutChanged(merged))) == {"b0": [0], "b1": [1], "b2": [2], "b3": [3]}
    m.replay([ConsumerDisconnected("b1", 2_100), ConsumerDisconnected("b2", 2_100)])
    assert ids(m.apply(ConsumerEvicted("b1"))) == {"b0": [0, 3], "b2": [1], "b3": [2]}
    assert ids(m.apply(ConsumerEvicted("b2"))) == {"b0": [0, 2], "b3": [1, 3]}
    assert ids(m.apply(SegmentsDrained(frozenset({1, 2})))) == {"b0": [0, 4, 3], "b3": [1, 2]}


# --- where compute_assignment over what a caller sees differs -------------------------------


def test_a_restart_forgets_the_drains() -> None:
    """After a restart the coordinator knows no drain until its poller reports one again:
    the children of a parent drained before it are withheld, where compute_assignment over
    every drain the broker ever reported deals them. The restored coordinator computes
    without parent-drain ordering, but sends that to nobody; the first STREAM consumer back
    turns ordering on."""
    m = machine()
    three_consumers(m)
    m.replay([LayoutChanged(SPLIT), SegmentsDrained(frozenset({2}))])
    stateless = ks.compute_assignment(SPLIT, TOPIC, ["a0", "a1", "a2"], {2}, pulsar_version=M1)
    assert m.assignment() == stateless
    restored = m.apply(BrokerRestarted(SPLIT, frozenset({"a0", "a1", "a2"}), 9_000))
    assert ids(restored) == ids(stateless)
    assert m.connected_assignment() == {}
    m.apply(ConsumerRegistered("a0", 10))
    assert ids(m.connected_assignment()) == {"a0": [0, 3]}
    assert m.assignment() != stateless
    assert ids(m.apply(SegmentsDrained(frozenset({2})))) == ids(stateless)


def test_the_last_leave_forgets_the_drains_an_eviction_does_not() -> None:
    evicted, left = machine(), machine()
    for m in (evicted, left):
        m.replay(
            [ConsumerRegistered("a0", 1), LayoutChanged(SPLIT), SegmentsDrained(frozenset({2}))]
        )
    evicted.replay([ConsumerDisconnected("a0", 2_000), ConsumerEvicted("a0")])
    left.apply(ConsumerUnregistered("a0", 1))
    assert evicted.coordinator is not None and evicted.coordinator.drained_segment_ids == {2}
    assert left.coordinator is None
    assert ids(evicted.apply(ConsumerRegistered("a1", 2))) == {"a1": [0, 1, 4, 2, 5, 3]}
    assert ids(left.apply(ConsumerRegistered("a1", 2))) == {"a1": [0, 1, 2, 3]}


def test_a_disconnected_session_keeps_its_segments_through_the_grace_period() -> None:
    m = machine()
    three_consumers(m)
    held = m.apply(ConsumerDisconnected("a2", 500))
    assert ids(held) == {"a0": [0, 3], "a1": [1], "a2": [2]}
    live = ks.compute_assignment(BASE, TOPIC, ["a0", "a1"], set(), pulsar_version=M1)
    assert ids(live) == {"a0": [0, 2], "a1": [1, 3]}
    assert ids(m.connected_assignment()) == {"a0": [0, 3], "a1": [1]}


def test_a_gc_prune_is_a_layout_the_admin_did_not_make() -> None:
    """compute_assignment over a layout mirrored from the admin's splits keeps dealing the
    pruned parent (the prediction of issue 48); fed the pruned layout, it is the broker's."""
    m = machine()
    three_consumers(m)
    m.replay([LayoutChanged(SPLIT), SegmentsDrained(frozenset({2})), LayoutChanged(PRUNED)])
    names = ["a0", "a1", "a2"]
    mirrored = ks.compute_assignment(SPLIT, TOPIC, names, {2}, pulsar_version=M1)
    assert ids(mirrored) == {"a0": [0, 2], "a1": [1, 5], "a2": [4, 3]}
    assert ids(m.assignment()) == {"a0": [0, 5], "a1": [1, 3], "a2": [4]}
    assert m.assignment() == ks.compute_assignment(PRUNED, TOPIC, names, {2}, pulsar_version=M1)


def test_a_drain_the_poller_has_not_reported_withholds_the_children() -> None:
    m = machine()
    m.replay([ConsumerRegistered("a0", 1), LayoutChanged(SPLIT)])
    known = ks.compute_assignment(SPLIT, TOPIC, ["a0"], {2}, pulsar_version=M1)
    assert ids(m.assignment()) == {"a0": [0, 1, 2, 3]} != ids(known)


# --- each event's own rules -----------------------------------------------------------------


def test_a_reconnect_within_the_grace_period_moves_nobody_and_an_eviction_then_aborts() -> None:
    m = machine()
    three_consumers(m)
    before = m.apply(ConsumerDisconnected("a1", 100))
    assert m.apply(ConsumerRegistered("a1", 7)) == before
    assert m.apply(ConsumerEvicted("a1")) == before
    assert m.coordinator is not None and m.coordinator.sessions["a1"].consumer_id == 7


def test_m1_leaves_by_name_master_by_connection() -> None:
    for version, left in ((M1, True), ("master", False)):
        m = machine(version)
        m.replay([ConsumerRegistered("a0", 1), ConsumerRegistered("a1", 2)])
        m.replay([ConsumerRegistered("a1", 3), ConsumerUnregistered("a1", 2)])
        assert ("a1" not in m.assignment()) is left, version


def test_a_checkpoint_subscription_orders_nothing_until_a_stream_consumer_comes() -> None:
    m = machine()
    m.replay([ConsumerRegistered("a0", 1, stream=False), LayoutChanged(SPLIT)])
    assert ids(m.assignment()) == {"a0": [0, 1, 4, 2, 5, 3]}
    assert ids(m.apply(ConsumerRegistered("a1", 2))) == {"a0": [0, 2], "a1": [1, 3]}


def test_a_drain_of_a_segment_pruned_meanwhile_changes_nothing() -> None:
    m = machine()
    m.replay([ConsumerRegistered("a0", 1), LayoutChanged(SPLIT), LayoutChanged(PRUNED)])
    before = m.assignment()
    assert m.apply(SegmentsDrained(frozenset({2}))) == before
    assert m.coordinator is not None and m.coordinator.drained_segment_ids == frozenset()


def test_events_are_kept_in_order() -> None:
    m = machine()
    events = [ConsumerRegistered("a0", 1), LayoutChanged(SPLIT), ConsumerDisconnected("a0", 5)]
    assert len(m.replay(events)) == 3
    assert m.events == tuple(events)


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: ConsumerRegistered("", 1), ValueError, "consumer_name must not be empty"),
        (lambda: ConsumerRegistered("a", -1), ValueError, "consumer_id must be >= 0"),
        (lambda: ConsumerRegistered("a", 1, stream=1), TypeError, "stream must be a bool"),  # type: ignore[arg-type]
        (lambda: ConsumerDisconnected(b"a", 1), TypeError, "consumer_name must be a str"),  # type: ignore[arg-type]
        (lambda: ConsumerDisconnected("a", -5), ValueError, "at_ms must be >= 0"),
        (lambda: ConsumerEvicted(None), TypeError, "consumer_name must be a str"),  # type: ignore[arg-type]
        (lambda: ConsumerUnregistered("a", "1"), TypeError, "consumer_id must be an int"),  # type: ignore[arg-type]
        (lambda: LayoutChanged({}), TypeError, "layout must be a TopicLayout"),  # type: ignore[arg-type]
        (lambda: SegmentsDrained(frozenset()), ValueError, "segment_ids must name a segment"),
        (lambda: SegmentsDrained(2), TypeError, "segment_ids must be a collection"),  # type: ignore[arg-type]
        (lambda: SegmentsDrained([-1]), ValueError, r"segment_ids\[0\] must be >= 0"),  # type: ignore[arg-type]
        (lambda: BrokerRestarted(BASE, "ab", 0), TypeError, "consumer_names must be a coll"),  # type: ignore[arg-type]
        (lambda: BrokerRestarted(BASE, frozenset(), -1), ValueError, "at_ms must be >= 0"),
        (lambda: machine("4.2"), ValueError, "pulsar_version '4.2'"),
        (
            lambda: CoordinatorStateMachine("sub", ks.TopicName.get("persistent://a/b/c"), BASE),
            ValueError,
            "topic must be a scalable topic",
        ),
        (lambda: CoordinatorStateMachine("", TOPIC, BASE), ValueError, "subscription_name"),
        (
            lambda: CoordinatorStateMachine("s", TOPIC, BASE, grace_period_ms=-1),
            ValueError,
            "grace_period_ms must be >= 0",
        ),
    ],
)
def test_bad_events_name_the_argument(
    make: Callable[[], object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        make()


@pytest.mark.parametrize(
    ("prepare", "event", "error", "message"),
    [
        ([], SegmentsDrained(frozenset({2})), ValueError, "no coordinator polls for drains"),
        (
            [ConsumerRegistered("a0", 1), LayoutChanged(SPLIT)],
            SegmentsDrained(frozenset({2, 4})),
            ValueError,
            r"segments \[4\] are active",
        ),
        ([], "drained", TypeError, "event must be a coordinator event, got str"),
    ],
)
def test_an_event_that_cannot_apply_changes_nothing(
    prepare: list[ks.scalable.CoordinatorEvent], event: object, error: type, message: str
) -> None:
    m = machine()
    m.replay(prepare)
    state = (m.layout, m.coordinator, m.events)
    with pytest.raises(error, match=message) as raised:
        m.apply(event)  # type: ignore[arg-type]
    assert raised.value.argument == "event"  # type: ignore[attr-defined]
    assert (m.layout, m.coordinator, m.events) == state


# --- stateful, against M1's Java in a few lines of Python -----------------------------------

NAMES = ["c0", "c1", "c2"]


def m1_rule(
    layout: ks.TopicLayout, names: list[str], drained: set[int], ordering: bool
) -> dict[str, list[int]]:
    """M1's ``computeAssignment``: every sealed segment, every active one whose parents
    still in the layout all drained (everything without ordering), in (start, end, id)
    order, dealt round-robin to the names in order."""

    def assignable(s: ks.Segment) -> bool:
        if not ordering or s.is_sealed:
            return True
        return all(p not in layout.segments or p in drained for p in s.parent_ids)

    segments = sorted(
        (s for s in layout.segments.values() if assignable(s)),
        key=lambda s: (s.hash_range.start, s.hash_range.end, s.segment_id),
    )
    out: dict[str, list[int]] = {n: [] for n in sorted(names)}
    for i, s in enumerate(segments):
        out[sorted(names)[i % len(names)]].append(s.segment_id)
    return out


def master_rule(
    layout: ks.TopicLayout, names: list[str], drained: set[int], ordering: bool
) -> dict[str, list[int]]:
    return ids(ks.compute_assignment(layout, TOPIC, names, drained if ordering else None))


class JavaController:
    """The controller's coordinator map entry for one subscription and the coordinator's
    fields, moved as M1's Java moves them (master: the same, with its leave and rule)."""

    def __init__(self, layout: ks.TopicLayout, m1: bool) -> None:
        self.layout, self.m1 = layout, m1
        self.exists = False
        self.sessions: dict[str, tuple[int | None, bool]] = {}
        self.drained: set[int] = set()
        self.ordering = False

    def register(self, name: str, consumer_id: int, stream: bool) -> None:
        if not self.exists:
            self.exists, self.sessions, self.drained, self.ordering = True, {}, set(), stream
        self.ordering |= stream
        self.sessions[name] = (consumer_id, True)

    def disconnect(self, name: str) -> None:
        if name in self.sessions:
            self.sessions[name] = (self.sessions[name][0], False)

    def evict(self, name: str) -> None:
        if name in self.sessions and not self.sessions[name][1]:
            del self.sessions[name]

    def unregister(self, name: str, consumer_id: int) -> None:
        if not self.exists:
            return
        if name in self.sessions and (self.m1 or self.sessions[name][0] == consumer_id):
            del self.sessions[name]
        self.exists = bool(self.sessions)

    def drain(self, segment_ids: set[int]) -> None:
        self.drained |= segment_ids & set(self.layout.segments)

    def restart(self, names: set[str]) -> None:
        self.exists, self.drained, self.ordering = True, set(), False
        self.sessions = {n: (None, False) for n in names}

    def assignment(self) -> dict[str, list[int]]:
        if not self.exists or not self.sessions:
            return {}
        rule = m1_rule if self.m1 else master_rule
        return rule(self.layout, list(self.sessions), self.drained, self.ordering)


class CoordinatorEvents(RuleBasedStateMachine):
    """Random registrations (STREAM and CHECKPOINT), disconnects, evictions, leaves,
    splits, merges, prunes, drains and restarts: after each, the state machine's assignment
    is the Java model's, and its connected consumers are the Java model's."""

    @initialize(m1=st.booleans(), segments=st.integers(1, 3))
    def start(self, m1: bool, segments: int) -> None:
        layout = ks.TopicLayout.initial(segments, 1)
        self.machine = machine(M1 if m1 else "master", layout)
        self.java = JavaController(layout, m1)
        self.now = 0
        self.next_id = 0

    def tick(self) -> int:
        self.now += 10
        return self.now

    @rule(name=st.sampled_from(NAMES), stream=st.booleans())
    def register(self, name: str, stream: bool) -> None:
        self.next_id += 1
        self.machine.apply(ConsumerRegistered(name, self.next_id, stream))
        self.java.register(name, self.next_id, stream)

    @rule(name=st.sampled_from(NAMES))
    def disconnect(self, name: str) -> None:
        self.machine.apply(ConsumerDisconnected(name, self.tick()))
        self.java.disconnect(name)

    @rule(name=st.sampled_from(NAMES))
    def evict(self, name: str) -> None:
        self.machine.apply(ConsumerEvicted(name))
        self.java.evict(name)

    @rule(name=st.sampled_from(NAMES), back=st.integers(0, 2))
    def unregister(self, name: str, back: int) -> None:
        consumer_id = max(self.next_id - back, 0)
        self.machine.apply(ConsumerUnregistered(name, consumer_id))
        self.java.unregister(name, consumer_id)

    def relayout(self, layout: ks.TopicLayout) -> None:
        self.machine.apply(LayoutChanged(layout))
        self.java.layout = layout

    @precondition(lambda self: len(self.java.layout.segments) < 12)
    @rule(pick=st.integers(0, 100))
    def split(self, pick: int) -> None:
        active = [s.segment_id for s in self.java.layout.active_segments()]
        self.relayout(self.java.layout.split_segment(active[pick % len(active)], self.tick()))

    @precondition(lambda self: len(self.java.layout.active_segments()) > 1)
    @rule(pick=st.integers(0, 100))
    def merge(self, pick: int) -> None:
        active = [s.segment_id for s in self.java.layout.active_segments()]
        i = pick % (len(active) - 1)
        self.relayout(self.java.layout.merge_segments(active[i], active[i + 1], self.tick()))

    def sealed(self) -> list[int]:
        return sorted(i for i, s in self.java.layout.segments.items() if s.is_sealed)

    @precondition(lambda self: bool(self.sealed()))
    @rule(pick=st.integers(0, 100))
    def prune(self, pick: int) -> None:
        sealed = self.sealed()
        self.relayout(self.java.layout.prune_segment(sealed[pick % len(sealed)]))

    @precondition(lambda self: self.java.exists and bool(self.sealed()))
    @rule(data=st.data())
    def drain(self, data: st.DataObject) -> None:
        chosen = set(data.draw(st.sets(st.sampled_from(self.sealed()), min_size=1)))
        self.machine.apply(SegmentsDrained(frozenset(chosen)))
        self.java.drain(chosen)

    @rule()
    def restart(self) -> None:
        persisted = set(self.java.sessions) if self.java.exists else set()
        self.machine.apply(BrokerRestarted(self.java.layout, frozenset(persisted), self.tick()))
        self.java.restart(persisted)

    @invariant()
    def same_assignment(self) -> None:
        assert ids(self.machine.assignment()) == self.java.assignment()
        connected = {n for n, (_, up) in self.java.sessions.items() if up and self.java.exists}
        assert set(self.machine.connected_assignment()) == connected
        assert (self.machine.coordinator is not None) == self.java.exists


TestCoordinatorEvents = CoordinatorEvents.TestCase
TestCoordinatorEvents.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
