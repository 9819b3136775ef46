"""Danube's in-flight window (SPEC 8): its own cases, the defects SPEC 8 fixes, the failure
policy, and a stateful run against the invariants."""

import threading

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from keyshared import InFlightWindow
from keyshared.dispatch import KeySharedConsumerState, SubscriptionFailurePolicy, WindowAction


def ring(*ids: int) -> KeySharedConsumerState:
    state = KeySharedConsumerState()
    for c in ids:
        state.add_consumer(c)
    return state


def kinds(actions: list[WindowAction]) -> list[tuple[str, int | None]]:
    return [(a.kind, a.offset) for a in actions]


# --- Danube's own cases ----------------------------------------------------------------


def test_window_block_same_key() -> None:
    w = InFlightWindow(100)
    w.mark_dispatched(1, "order-123", 100)
    assert w.is_key_active("order-123")
    w.push_blocked(2, "order-123")
    assert w.blocked_count == 1


def test_window_ack_unblocks_key() -> None:
    w = InFlightWindow(100)
    w.mark_dispatched(1, "order-123", 100)
    assert w.on_ack(1) == ("order-123", 1)
    assert not w.is_key_active("order-123")


def test_safe_cursor_contiguous_and_gap() -> None:
    w = InFlightWindow(100)
    for i in (1, 2, 3):
        w.mark_dispatched(i, f"key-{i}", 100)
    assert w.on_ack(3) == ("key-3", None)
    assert w.on_ack(1) == ("key-1", 1)
    assert w.on_ack(2) == ("key-2", 3)


def test_the_spec_example() -> None:
    w = InFlightWindow(100)
    for o in range(10, 14):
        w.mark_dispatched(o, f"k{o}", 1)
    for o in (10, 12, 13):
        w.on_ack(o)
    assert w.get_safe_cursor() == 10
    assert w.on_ack(11)[1] == 13


def test_take_unblocked_is_first_free_key() -> None:
    w = InFlightWindow(100)
    w.mark_dispatched(1, "key-a", 100)
    w.push_blocked(10, "key-a")
    w.push_blocked(11, "key-b")
    assert w.take_unblocked() == (11, "key-b")
    assert w.take_unblocked() is None


def test_on_skipped_advances_cursor() -> None:
    w = InFlightWindow()
    assert w.on_skipped(1) == 1
    assert w.on_skipped(2) == 2
    assert w.on_skipped(4) is None
    assert w.on_skipped(3) == 4


def test_has_capacity_limit() -> None:
    w = InFlightWindow(2)
    assert w.max_window_size == 2 and w.max_per_consumer == 1000
    w.mark_dispatched(1, "key-1", 100)
    assert w.has_capacity()
    w.mark_dispatched(2, "key-2", 100)
    assert not w.has_capacity()
    assert InFlightWindow().max_window_size == 10


# --- defects fixed ---------------------------------------------------------------------


def test_dropping_poison_keeps_its_followers_and_the_cursor_moving() -> None:
    policy = SubscriptionFailurePolicy(max_redelivery_count=0, poison_policy="drop")
    w = InFlightWindow(100, failure_policy=policy)
    state = ring(1)
    w.mark_dispatched(10, "a", 1)
    w.push_blocked(11, "a")
    w.push_blocked(12, "a")
    assert w.on_nack(10, 0) == "retry_exhausted"
    actions, cursor = w.handle_heartbeat(0, state)
    assert kinds(actions) == [("drop", 10), ("deliver", 11)]
    assert cursor == 10
    assert [(o, k) for o, k in w.blocked()] == [(12, "a")]
    assert w.on_ack(11) == ("a", 11)
    actions, _ = w.handle_heartbeat(1, state)
    assert kinds(actions) == [("deliver", 12)]
    assert w.on_ack(12)[1] == 12


def test_a_message_put_back_keeps_its_place() -> None:
    w = InFlightWindow(100)
    w.mark_dispatched(1, "a", 1)
    for o in (2, 3):
        w.push_blocked(o, "a")
    w.on_ack(1)
    assert w.take_unblocked() == (2, "a")
    assert w.take_unblocked() is None  # the taken message holds its key
    with pytest.raises(ValueError, match="held by offset 2"):
        w.mark_dispatched(4, "a", 1)
    w.push_blocked(2, "a")  # e.g. the send failed
    assert [o for o, _ in w.blocked()] == [2, 3]
    assert w.take_unblocked() == (2, "a")
    with pytest.raises(ValueError, match="offset 2 was taken with key 'a', not 'b'"):
        w.push_blocked(2, "b")
    w.mark_dispatched(2, "a", 1)
    assert w.on_ack(2) == ("a", 2)


def test_a_new_message_waits_behind_queued_ones() -> None:
    w = InFlightWindow(100)
    w.mark_dispatched(1, "a", 1)
    w.push_blocked(2, "a")
    w.on_ack(1)
    assert w.is_key_active("a")  # 2 is still queued
    with pytest.raises(ValueError, match="older messages of key 'a' are queued"):
        w.mark_dispatched(3, "a", 1)
    action, _ = w.dispatch_polled(3, "a", ring(1), 0)
    assert action.kind == "block"
    assert [o for o, _ in w.blocked()] == [2, 3]


def test_the_per_consumer_cap_holds_on_every_path() -> None:
    w = InFlightWindow(100, max_per_consumer=1)
    state = ring(7)
    w.mark_dispatched(1, "a", 7)
    with pytest.raises(ValueError, match=r"max_per_consumer \(1\)"):
        w.mark_dispatched(2, "b", 7)
    assert w.dispatch_polled(2, "b", state, 0)[0].kind == "block"
    assert w.handle_heartbeat(1, state)[0] == []  # queued, not over the cap
    assert w.consumer_in_flight(7) == 1
    w.on_ack(1)
    assert kinds(w.handle_heartbeat(2, state)[0]) == [("deliver", 2)]


def test_a_redelivery_respects_the_cap_and_moves_its_count() -> None:
    state = ring(1, 2)
    key = next(f"k{i}" for i in range(1000) if state.select_consumer(f"k{i}") == 2)
    other = next(f"o{i}" for i in range(1000) if state.select_consumer(f"o{i}") == 2)
    w = InFlightWindow(100, max_per_consumer=1)
    w.mark_dispatched(1, key, 1)  # sent to 1, though the ring now says 2
    w.mark_dispatched(2, other, 2)
    w.on_nack(1, 0)
    assert w.handle_heartbeat(1_000, state)[0] == []  # 2 is full: it waits
    w.on_ack(2)
    actions, _ = w.handle_heartbeat(1_000, state)
    assert [(a.kind, a.offset, a.consumer_id, a.attempt) for a in actions] == [
        ("redeliver", 1, 2, 2)
    ]
    assert (w.consumer_in_flight(1), w.consumer_in_flight(2)) == (0, 1)


def test_an_unknown_ack_changes_nothing() -> None:
    w = InFlightWindow(100)
    w.mark_dispatched(4, "a", 1)
    assert w.on_ack(5) == (None, None)
    w.mark_dispatched(5, "b", 1)
    assert w.on_ack(4) == ("a", 4)  # Danube would have jumped to 5 here
    assert w.on_ack(4) == (None, None)
    assert w.get_safe_cursor() == 4


# --- retries, backoff, poison, eviction -----------------------------------------------


def test_failure_policy_defaults_and_delays() -> None:
    p = SubscriptionFailurePolicy()
    assert (p.max_redelivery_count, p.ack_timeout_ms) == (5, 30_000)
    assert (p.base_redelivery_delay_ms, p.max_redelivery_delay_ms) == (1_000, 60_000)
    assert (p.backoff_strategy, p.poison_policy, p.dead_letter_topic) == (
        "exponential",
        "block",
        None,
    )
    assert [p.redelivery_delay_ms(a) for a in range(1, 9)] == [
        1_000,
        2_000,
        4_000,
        8_000,
        16_000,
        32_000,
        60_000,
        60_000,
    ]
    assert p.redelivery_delay_ms(1, requested_ms=2_500) == 2_500
    assert p.redelivery_delay_ms(1, requested_ms=10**6) == 60_000
    fixed = SubscriptionFailurePolicy(backoff_strategy="fixed")
    assert fixed.redelivery_delay_ms(6) == 1_000
    assert fixed != p and SubscriptionFailurePolicy() == p


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"ack_timeout_ms": 0}, ValueError, "ack_timeout_ms must be at least 1"),
        ({"max_redelivery_count": -1}, ValueError, "max_redelivery_count must be in"),
        (
            {"base_redelivery_delay_ms": 10, "max_redelivery_delay_ms": 5},
            ValueError,
            "must not exceed",
        ),
        ({"backoff_strategy": "linear"}, ValueError, "backoff_strategy must be"),
        ({"poison_policy": "ignore"}, ValueError, "poison_policy must be"),
        ({"poison_policy": "dead_letter"}, ValueError, "policy needs a topic"),
        (
            {"poison_policy": "dead_letter", "dead_letter_topic": " "},
            ValueError,
            "policy needs a topic",
        ),
        ({"ack_timeout_ms": 1.5}, TypeError, "ack_timeout_ms must be an int"),
    ],
)
def test_bad_policies(kwargs: dict[str, object], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        SubscriptionFailurePolicy(**kwargs)  # type: ignore[arg-type]


def test_ack_timeouts_retry_then_block() -> None:
    w = InFlightWindow(100)
    state = ring(1)
    w.mark_dispatched(1, "a", 1, now_ms=0)
    e = w.get_entry(1)
    assert e is not None and (e.status, e.ack_deadline_at_ms) == ("awaiting_ack", 30_000)
    assert w.handle_heartbeat(29_999, state)[0] == []
    assert w.handle_heartbeat(30_000, state)[0] == []
    e = w.get_entry(1)
    assert e is not None
    assert (e.status, e.next_redelivery_at_ms, e.last_failure_reason) == (
        "waiting_to_retry",
        31_000,
        "ack timeout",
    )
    assert w.on_ack(1) == (None, None)  # a late ack, as in Danube, is ignored
    now, attempts = 31_000, []
    for _ in range(10):
        actions, _ = w.handle_heartbeat(now, state)
        attempts += [a.attempt for a in actions]
        now += 120_000
    assert attempts == [2, 3, 4, 5, 6]
    e = w.get_entry(1)
    assert e is not None and e.status == "retry_exhausted"  # block: it stays, key held
    assert w.is_key_active("a")


def test_nacks_with_a_requested_delay_and_dead_letters() -> None:
    policy = SubscriptionFailurePolicy(
        max_redelivery_count=1, poison_policy="dead_letter", dead_letter_topic="dlq"
    )
    w = InFlightWindow(100, failure_policy=policy)
    state = ring(1)
    w.mark_dispatched(1, b"k", 1, now_ms=100)
    assert w.on_nack(1, 100, delay_ms=5_000, reason="busy") == "waiting_to_retry"
    assert w.handle_heartbeat(5_099, state)[0] == []
    assert kinds(w.handle_heartbeat(5_100, state)[0]) == [("redeliver", 1)]
    assert w.on_nack(1, 6_000) == "retry_exhausted"
    actions, cursor = w.handle_heartbeat(6_000, state)
    assert [(a.kind, a.key, a.dead_letter_topic, a.attempt) for a in actions] == [
        ("dead_letter", b"k", "dlq", 2)
    ]
    assert cursor == 1
    assert w.on_nack(1, 0) is None


def test_inactive_consumers_are_evicted_after_six_heartbeats() -> None:
    w = InFlightWindow(100)
    state = ring(1, 2)
    w.mark_dispatched(1, "a", 1)
    w.mark_dispatched(2, "b", 2)
    w.push_blocked(3, "a")
    for tick in range(5):
        assert w.handle_heartbeat(tick, state, inactive_consumers=[1])[0] == []
    w.handle_heartbeat(5, state, inactive_consumers=[])  # active again: the count restarts
    for tick in range(6, 11):
        assert w.handle_heartbeat(tick, state, inactive_consumers={1})[0] == []
    actions, cursor = w.handle_heartbeat(11, state, inactive_consumers={1})
    assert [(a.kind, a.consumer_id) for a in actions] == [("evict", 1), ("deliver", 2)]
    assert actions[1].offset == 3
    assert cursor == 1
    assert state.consumer_ids == [2]


def test_remove_consumer_entries_counts_them_done() -> None:
    w = InFlightWindow(100)
    w.mark_dispatched(1, "a", 1)
    w.mark_dispatched(2, "b", 2)
    w.mark_dispatched(3, "c", 1)
    assert sorted(w.remove_consumer_entries(1)) == ["a", "c"]
    assert w.get_safe_cursor() == 1
    assert w.on_ack(2) == ("b", 3)
    assert w.remove_consumer_entries(9) == []


def test_drain_and_remove_entry() -> None:
    w = InFlightWindow(100)
    w.mark_dispatched(1, "a", 1)
    for o, k in [(2, "a"), (3, "b"), (4, "a")]:
        w.push_blocked(o, k)
    assert w.drain_blocked_for_key("a") == ([2, 4], None)
    e = w.remove_entry(1)
    assert e is not None and (e.offset, e.key, e.consumer_id) == (1, "a", 1)
    assert w.on_skipped(1) == 2
    assert w.take_unblocked() == (3, "b")
    assert w.on_skipped(3) == 4


def test_dispatch_polled_follows_the_ring_and_filters() -> None:
    state = KeySharedConsumerState()
    state.add_consumer(1, ["pay*"])
    w = InFlightWindow(100)
    action, _ = w.dispatch_polled(1, "payment", state, 0)
    assert (action.kind, action.consumer_id, action.attempt) == ("deliver", 1, 1)
    assert w.dispatch_polled(2, "payment", state, 0)[0].kind == "block"
    action, cursor = w.dispatch_polled(3, "other", state, 0)
    assert (action.kind, action.consumer_id, cursor) == ("skip", None, None)
    with pytest.raises(ValueError, match="already acked, skipped"):
        w.dispatch_polled(3, "other", state, 0)
    state.disconnect_all()
    assert w.handle_heartbeat(10**9, state) == ([], None)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda w: w.mark_dispatched(-1, "k", 1),
            ValueError,
            r"offset must be in \[0, 2\*\*63 - 1\]",
        ),
        (lambda w: w.mark_dispatched(2**63, "k", 1), ValueError, "offset must be in"),
        (lambda w: w.mark_dispatched(9, 5, 1), TypeError, "key must be str or bytes"),
        (lambda w: w.mark_dispatched(9, "k", -1), ValueError, "consumer_id must be in"),
        (lambda w: w.mark_dispatched(9, "k", 1, now_ms=-5), ValueError, "now_ms must be in"),
        (lambda w: w.mark_dispatched(1, "k", 1), ValueError, "offset 1 is already in flight"),
        (lambda w: w.push_blocked(2, "z"), ValueError, "offset 2 is already in the blocked queue"),
        (lambda w: w.on_skipped(1), ValueError, "offset 1 is in flight"),
        (lambda w: w.on_skipped(2), ValueError, "offset 2 is queued"),
        (lambda w: w.on_ack(-3), ValueError, "offset must be in"),
        (lambda w: w.on_nack(1, -1), ValueError, "now_ms must be in"),
        (
            lambda w: w.handle_heartbeat(0, ring(1), inactive_consumers=5),
            TypeError,
            "inactive_consumers",
        ),
    ],
)
def test_bad_input_changes_nothing(call: object, error: type, message: str) -> None:
    w = InFlightWindow(100)
    w.mark_dispatched(1, "k", 1)
    w.push_blocked(2, "k")
    with pytest.raises(error, match=message):
        call(w)  # type: ignore[operator]
    assert [e.offset for e in w.in_flight_entries()] == [1]
    assert w.blocked() == [(2, "k")]
    assert w.get_safe_cursor() is None


def test_bad_limits() -> None:
    for kwargs in ({"max_window_size": 0}, {"max_per_consumer": 0}, {"inactive_eviction_ticks": 0}):
        with pytest.raises(ValueError, match="at least 1"):
            InFlightWindow(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        InFlightWindow(failure_policy="drop")  # type: ignore[arg-type]


def test_offsets_behind_the_first_one_are_passed() -> None:
    w = InFlightWindow()
    w.record_polled(100)
    with pytest.raises(ValueError, match="behind the cursor"):
        w.mark_dispatched(99, "a", 1)
    assert w.on_skipped(99) is None


class WindowMachine(RuleBasedStateMachine):
    """Messages are polled, acked, nacked and retried while consumers come and go."""

    def __init__(self) -> None:
        super().__init__()
        policy = SubscriptionFailurePolicy(
            max_redelivery_count=2,
            ack_timeout_ms=1_000,
            base_redelivery_delay_ms=100,
            max_redelivery_delay_ms=1_000,
            poison_policy="drop",
        )
        self.w = InFlightWindow(
            10_000, max_per_consumer=3, failure_policy=policy, inactive_eviction_ticks=2
        )
        self.state = ring(1, 2)
        self.next_offset = 0
        self.now = 0
        self.done: set[int] = set()
        self.last_cursor: int | None = None
        self.delivered: dict[str, list[int]] = {}
        self.next_consumer = 3

    def _apply(self, actions: list[WindowAction], cursor: int | None) -> None:
        for a in actions:
            if a.kind in ("skip", "drop", "dead_letter"):
                assert a.offset is not None
                self.done.add(a.offset)
            if a.kind == "deliver":
                assert isinstance(a.key, str) and a.offset is not None
                self.delivered.setdefault(a.key, []).append(a.offset)
        if cursor is not None:
            assert cursor == self.w.get_safe_cursor()

    @rule(key=st.sampled_from("abcdef"))
    def poll(self, key: str) -> None:
        offset = self.next_offset
        self.next_offset += 1
        action, cursor = self.w.dispatch_polled(offset, key, self.state, self.now)
        self._apply([action], cursor)

    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        awaiting = [e.offset for e in self.w.in_flight_entries() if e.status == "awaiting_ack"]
        if awaiting:
            offset = data.draw(st.sampled_from(awaiting))
            key, _ = self.w.on_ack(offset)
            assert key is not None
            self.done.add(offset)

    @rule(data=st.data())
    def nack(self, data: st.DataObject) -> None:
        flying = [e.offset for e in self.w.in_flight_entries()]
        if flying:
            self.w.on_nack(data.draw(st.sampled_from(flying)), self.now)

    @rule(step=st.integers(0, 1_500), inactive=st.sets(st.integers(1, 6), max_size=1))
    def heartbeat(self, step: int, inactive: set[int]) -> None:
        self.now += step
        before = {e.offset for e in self.w.in_flight_entries()}
        actions, cursor = self.w.handle_heartbeat(self.now, self.state, inactive)
        self.done.update(before - {e.offset for e in self.w.in_flight_entries()})
        self._apply(actions, cursor)

    @rule()
    def add_consumer(self) -> None:
        self.state.add_consumer(self.next_consumer)
        self.next_consumer += 1

    @precondition(lambda self: len(self.state) > 1)
    @rule(data=st.data())
    def remove_consumer(self, data: st.DataObject) -> None:
        c = data.draw(st.sampled_from(self.state.consumer_ids))
        gone = [e.offset for e in self.w.in_flight_entries() if e.consumer_id == c]
        self.w.remove_consumer_entries(c)
        self.state.remove_consumer(c)
        self.done.update(gone)

    @invariant()
    def one_in_flight_per_key_and_capped(self) -> None:
        entries = self.w.in_flight_entries()
        keys = [e.key for e in entries]
        assert len(keys) == len(set(keys))
        per: dict[int, int] = {}
        for e in entries:
            per[e.consumer_id] = per.get(e.consumer_id, 0) + 1
        for c, n in per.items():
            assert n == self.w.consumer_in_flight(c) <= 3

    @invariant()
    def queued_messages_follow_their_key_in_order(self) -> None:
        flying = {e.key: e.offset for e in self.w.in_flight_entries()}
        last: dict[object, int] = {}
        for offset, key in self.w.blocked():
            assert offset > flying.get(key, -1)
            assert offset > last.get(key, -1)
            last[key] = offset

    @invariant()
    def first_deliveries_of_a_key_are_in_order(self) -> None:
        for offsets in self.delivered.values():
            assert offsets == sorted(offsets)

    @invariant()
    def the_cursor_is_safe_and_monotonic(self) -> None:
        cursor = self.w.get_safe_cursor()
        if cursor is not None:
            assert all(o in self.done for o in range(cursor + 1))
            assert self.last_cursor is None or cursor >= self.last_cursor
        elif self.last_cursor is not None:
            raise AssertionError("the cursor went back to None")
        self.last_cursor = cursor

    def teardown(self) -> None:
        if len(self.state) == 0:
            self.state.add_consumer(self.next_consumer)
        for _ in range(200):
            for e in self.w.in_flight_entries():
                if e.status == "awaiting_ack":
                    self.w.on_ack(e.offset)
            self.now += 100_000
            self.w.handle_heartbeat(self.now, self.state)
            if self.w.in_flight_count == 0 and self.w.blocked_count == 0:
                break
        assert self.w.in_flight_count == 0 and self.w.blocked_count == 0
        expected = self.next_offset - 1 if self.next_offset else None
        assert self.w.get_safe_cursor() == expected


TestWindow = WindowMachine.TestCase
TestWindow.settings = settings(max_examples=60, stateful_step_count=40)


def test_threads_on_one_window() -> None:
    w = InFlightWindow(1_000_000, max_per_consumer=1_000_000)
    state = ring(1, 2, 3)
    w.record_polled(0)
    per, threads = 2_000, 4

    def worker(t: int) -> None:
        for i in range(per):
            offset = t + i * threads
            action, _ = w.dispatch_polled(offset, f"t{t}-k{i % 5}", state, 0)
            if action.kind == "deliver":
                w.on_ack(offset)
            while (taken := w.take_unblocked()) is not None:
                o, key = taken
                c = state.select_consumer(key)
                assert c is not None
                w.mark_dispatched(o, key, c)
                w.on_ack(o)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    while (taken := w.take_unblocked()) is not None:
        w.on_skipped(taken[0])
    assert w.in_flight_count == 0 and w.blocked_count == 0
    assert w.get_safe_cursor() == per * threads - 1
