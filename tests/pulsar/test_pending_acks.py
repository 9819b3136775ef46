"""Pulsar's PendingAcksMap (SPEC 6), alone and wired to the draining-hashes tracker the way
PIP-379's dispatcher wires it."""

import threading

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from keyshared import DrainingHashesTracker, HashRange, PendingAcksMap, StickyKeyDispatcher

Ack = tuple[int, int, int, int]


def collect(call: object) -> list[Ack]:
    seen: list[Ack] = []
    call(lambda *a: seen.append(a))  # type: ignore[operator]
    return seen


def test_ordered_by_ledger_then_entry() -> None:
    m = PendingAcksMap(1)
    for ledger, entry in [(2, 1), (1, 5), (1, -1), (2, 0)]:
        assert m.add_pending_ack_if_allowed(ledger, entry, 1, 9)
    assert [a[:2] for a in m.to_list()] == [(1, -1), (1, 5), (2, 0), (2, 1)]
    assert collect(m.for_each) == m.to_list()
    assert m.size() == len(m) == 4
    assert m.contains(1, 5) and not m.contains(1, 6)
    assert m.get(1, 5) == (1, 9) and m.get(9, 9) is None


def test_add_overwrites() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 1, 9)
    m.add_pending_ack_if_allowed(1, 1, 4, 7)
    assert m.to_list() == [(1, 1, 4, 7)]


def test_remove_with_and_without_values() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 2, 9)
    assert not m.remove(1, 1, 3, 9)
    assert not m.remove(1, 1, 2, 8)
    assert m.remove(1, 1, 2, 9)
    assert not m.remove(1, 1)
    m.add_pending_ack_if_allowed(1, 1, 2, 9)
    assert m.remove_and_get(1, 1) == (2, 9)
    assert m.remove_and_get(1, 1) is None
    with pytest.raises(TypeError, match="together, or neither"):
        m.remove(1, 1, 2)


def test_remove_all_up_to_is_inclusive() -> None:
    m = PendingAcksMap(1)
    for ledger, entry in [(1, 0), (1, 9), (2, 3), (2, 4), (3, 0)]:
        m.add_pending_ack_if_allowed(ledger, entry, 1, 5)
    removed: list[Ack] = []
    assert m.remove_all_up_to(2, 3, lambda *a: removed.append(a)) == 3
    assert [a[:2] for a in removed] == [(1, 0), (1, 9), (2, 3)]
    assert [a[:2] for a in m.to_list()] == [(2, 4), (3, 0)]
    assert m.remove_all_up_to(2, -1) == 0
    assert m.remove_all_up_to(2**63 - 1, 2**63 - 1) == 2
    assert len(m) == 0


def test_for_each_and_close_refuses_later_adds() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 1, 5)
    assert collect(m.for_each_and_close) == [(1, 1, 1, 5)]
    assert m.closed
    assert not m.add_pending_ack_if_allowed(1, 2, 1, 5)
    assert len(m) == 0


def test_for_each_and_clear_keeps_adding() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 1, 5)
    assert len(collect(m.for_each_and_clear)) == 1
    assert not m.closed
    assert m.add_pending_ack_if_allowed(1, 2, 1, 5)


def test_the_processor_may_call_back_in() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 1, 5)
    m.for_each_and_clear(lambda *a: m.add_pending_ack_if_allowed(a[0], a[1] + 1, a[2], a[3]))
    assert m.to_list() == [(1, 2, 1, 5)]


def test_wired_adds_are_refused_while_another_consumer_drains() -> None:
    t = DrainingHashesTracker()
    a, b = PendingAcksMap(1, t), PendingAcksMap(2, t)
    assert a.tracker is t
    for e in range(3):
        assert a.add_pending_ack_if_allowed(1, e, 1, 7)
    assert a.register_draining_hashes([HashRange(5, 8)]) == 3
    assert (t.get_entry(7).consumer_id, t.get_entry(7).ref_count) == (1, 3)  # type: ignore[union-attr]
    assert not b.add_pending_ack_if_allowed(1, 10, 1, 7)
    assert a.add_pending_ack_if_allowed(1, 11, 1, 7)  # the draining consumer itself may
    with pytest.raises(ValueError, match="sticky key hash is missing"):
        a.add_pending_ack_if_allowed(1, 12, 1, 0)


def test_wired_removals_reduce_and_unblock() -> None:
    calls: list[int] = []
    t = DrainingHashesTracker(calls.append)
    a = PendingAcksMap(1, t)
    for e, h in [(0, 3), (1, 3), (2, 4), (3, 5)]:
        a.add_pending_ack_if_allowed(1, e, 1, h)
    a.register_draining_hashes([HashRange(0, 0xFFFF)])
    for h in (3, 4, 5):
        assert t.should_block_sticky_key_hash(2, h)
    assert a.remove(1, 0)
    assert calls == []
    assert a.remove_and_get(1, 1) == (1, 3)
    assert calls == [3]
    assert a.remove_all_up_to(1, 2) == 1
    assert calls == [3, -1]  # removals of a batch are reported once
    assert collect(a.for_each_and_close) == [(1, 3, 1, 5)]
    assert calls == [3, -1]  # closing unblocks silently
    assert len(t) == 0


def test_wired_batch_forms() -> None:
    t = DrainingHashesTracker()
    a = PendingAcksMap(1, t)
    t.add_entry(9, 7)
    added = a.add_pending_acks_if_allowed([1, 1, 1], [0, 1, 2], [1, 1, 1], [5, 7, 6])
    assert added.tolist() == [True, False, True]
    a.register_draining_hashes([HashRange(5, 6)])
    removed = a.remove_many(np.array([1, 1, 1, 2]), np.array([0, 0, 2, 0]))
    assert removed.tolist() == [True, False, True, False]
    assert len(a) == 0
    assert [t.get_entry(h) is None for h in (5, 6)] == [True, True]
    with pytest.raises(ValueError, match=r"sticky_key_hashes\[1\]: sticky key hash is missing"):
        a.add_pending_acks_if_allowed([1, 1], [5, 6], [1, 1], [3, 0])
    assert len(a) == 0
    with pytest.raises(ValueError, match=r"batch_sizes\[0\] must be in \[0, 2\*\*31 - 1\], got -1"):
        a.add_pending_acks_if_allowed([1], [5], [-1], [3])


def test_a_foreign_draining_owner_changes_nothing() -> None:
    t = DrainingHashesTracker()
    a = PendingAcksMap(1)  # unwired while adding, so it can hold a hash another drains
    a.add_pending_ack_if_allowed(1, 0, 1, 3)
    wired = PendingAcksMap(1, t)
    wired.add_pending_ack_if_allowed(1, 0, 1, 4)
    t.add_entry(2, 4)
    with pytest.raises(ValueError, match="consumer 2 is already draining hash 4"):
        wired.remove(1, 0)
    with pytest.raises(ValueError):
        wired.for_each_and_close(lambda *a: None)
    assert not wired.closed and wired.contains(1, 0)
    with pytest.raises(ValueError):
        wired.register_draining_hashes([HashRange(0, 9)])
    assert t.get_entry(4).ref_count == 1  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="needs a map created with a tracker"):
        a.register_draining_hashes([HashRange(0, 9)])


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((1, 1, -1, 5), ValueError, r"batch_size must be in \[0, 2\*\*31 - 1\], got -1"),
        ((1, 1, 2**31, 5), ValueError, r"batch_size must be in \[0, 2\*\*31 - 1\]"),
        ((2**63, 1, 1, 5), ValueError, "ledger_id = .* is outside the range of a long"),
        ((1, "1", 1, 5), TypeError, "entry_id must be an int, got str"),
        ((1, 1, 1, 0x10000), ValueError, "sticky_key_hash must be a 16-bit hash"),
    ],
)
def test_bad_adds_change_nothing(args: tuple[object, ...], error: type, message: str) -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(0, 0, 1, 1)
    with pytest.raises(error, match=message):
        m.add_pending_ack_if_allowed(*args)  # type: ignore[arg-type]
    assert m.to_list() == [(0, 0, 1, 1)]


def test_bad_batches() -> None:
    m = PendingAcksMap(1)
    with pytest.raises(ValueError, match="entry_ids has 1 items but ledger_ids has 2"):
        m.remove_many([1, 2], [1])
    with pytest.raises(TypeError, match="consumer_id must be an int"):
        PendingAcksMap(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        PendingAcksMap(1, tracker="not a tracker")  # type: ignore[arg-type]


def test_threads_adding_and_acking() -> None:
    t = DrainingHashesTracker()
    maps = [PendingAcksMap(c, t) for c in range(4)]

    def worker(c: int) -> None:
        m = maps[c]
        for e in range(2_000):
            assert m.add_pending_ack_if_allowed(c, e, 1, 1 + c)
            if e % 100 == 99:
                m.register_draining_hashes([HashRange(1 + c, 1 + c)])
                m.remove_all_up_to(c, e)

    pool = [threading.Thread(target=worker, args=(c,)) for c in range(4)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert sum(len(m) for m in maps) == 0
    assert len(t) == 0


def test_pip_379_scenario() -> None:
    calls: list[int] = []
    d = StickyKeyDispatcher(unblocking_handler=calls.append)
    d.add_consumer(1, "c1")
    hashes = list(range(1, 0x10000, 97))
    for i, h in enumerate(hashes):
        assert d.dispatch(1, i, h).consumer_id == 1
    d.add_consumer(2, "c2")
    moved = [h for h in hashes if d.select(h) == 2]
    assert moved
    h = moved[0]
    assert d.tracker.get_entry(h).consumer_id == 1  # type: ignore[union-attr]
    assert d.dispatch(2, 0, h).draining_consumer_id == 1  # blocked: pending on consumer 1
    assert d.ack(1, 1, hashes.index(h))
    assert calls == [h]
    assert d.get_messages_to_replay_now() == [(2, 0)]
    assert d.dispatch_read([(2, 0, h, 1)], replay=True)[0].consumer_id == 2
    assert d.tracker.consumer_stats(1).draining_hashes_cleared_total == 1
    replay = d.remove_consumer(1)
    assert len(replay) == len(hashes) - 1
    assert len(d.tracker) == 0
    with pytest.raises(KeyError):
        d.remove_consumer(1)


HASHES = [i * 1637 % 0xFFFF + 1 for i in range(1, 41)]


def test_losing_a_hash_twice_still_drains() -> None:
    d = StickyKeyDispatcher()
    d.add_consumer(1, "a")
    hashes = list(range(1, 0x10000, 251))
    for i, h in enumerate(hashes):
        d.dispatch(1, i, h)
    d.add_consumer(2, "b")
    draining = len(d.tracker)
    assert draining > 0
    d.remove_consumer(2)  # consumer 1 gets its ranges back and releases its hashes
    assert len(d.tracker) == 0
    d.add_consumer(3, "b")  # same name, same slot: the same hashes move again
    assert len(d.tracker) == draining
    for i in range(len(hashes)):
        assert d.ack(1, 1, i)
    assert len(d.tracker) == 0


class DispatcherMachine(RuleBasedStateMachine):
    """Consumers come and go, entries are dispatched and acked: a hash is never pending on
    two consumers at once, and acking everything drains every hash."""

    consumers = Bundle("consumers")

    def __init__(self) -> None:
        super().__init__()
        self.d = StickyKeyDispatcher(number_of_points=8)
        self.next_entry = 0
        self.next_consumer = 0
        self.live: set[int] = set()

    @rule(target=consumers, name=st.sampled_from(["a", "b"]))
    def add(self, name: str) -> int:
        c = self.next_consumer
        self.next_consumer += 1
        self.d.add_consumer(c, name)
        self.live.add(c)
        return c

    @rule(c=consumes(consumers))
    def remove(self, c: int) -> None:
        self.d.remove_consumer(c)
        self.live.discard(c)

    @rule(h=st.sampled_from(HASHES))
    def dispatch(self, h: int) -> None:
        self.next_entry += 1
        result = self.d.dispatch(0, self.next_entry, h)
        if result.delivered:
            assert result.consumer_id is not None
            assert self.d.pending_acks(result.consumer_id).contains(0, self.next_entry)

    @rule()
    def dispatch_all(self) -> None:
        for h in HASHES:
            self.dispatch(h)

    @rule(data=st.data())
    def ack_one(self, data: st.DataObject) -> None:
        pending = [(c, a) for c in self.live for a in self.d.pending_acks(c).to_list()]
        if pending:
            c, a = data.draw(st.sampled_from(pending))
            assert self.d.ack(c, a[0], a[1])

    @invariant()
    def a_hash_is_pending_on_one_consumer_at_most(self) -> None:
        owner: dict[int, int] = {}
        for c in self.live:
            for _, _, _, h in self.d.pending_acks(c).to_list():
                assert owner.setdefault(h, c) == c

    @invariant()
    def draining_entries_count_their_pending_acks(self) -> None:
        counts: dict[tuple[int, int], int] = {}
        for c in self.live:
            for _, _, _, h in self.d.pending_acks(c).to_list():
                counts[c, h] = counts.get((c, h), 0) + 1
        for h in HASHES:
            e = self.d.tracker.get_entry(h)
            if e is not None:
                assert e.ref_count == counts.get((e.consumer_id, h), 0) >= 1

    def teardown(self) -> None:
        for c in list(self.live):
            for a in self.d.pending_acks(c).to_list():
                self.d.ack(c, a[0], a[1])
        assert len(self.d.tracker) == 0


TestDispatcher = DispatcherMachine.TestCase
TestDispatcher.settings = settings(max_examples=60, stateful_step_count=40)


# --- Pulsar's PendingAcksMapTest -------------------------------------------------------
# Pulsar's sticky key hashes are Java ints; here they are 16-bit, so its extreme values
# become the 16-bit ones with the same role: Integer.MIN_VALUE -> 0x8000, MAX_VALUE ->
# 0x7FFF, -1 -> 0xFFFF, others their low 16 bits. Pulsar's add and remove handlers are the
# draining-hashes tracker here: it refuses adds of hashes another consumer drains, and hears
# each removal (an unblocking call shows it was told, with closing false).
INT_MIN, INT_MAX, MINUS_ONE = 0x8000, 0x7FFF, 0xFFFF
NOT_FOUND = PendingAcksMap.PENDING_ACK_NOT_FOUND


def blocked_tracker(*hashes: int) -> tuple[DrainingHashesTracker, list[int]]:
    """A tracker where consumer 1 drains `hashes` (one pending message each) and consumer 2
    was blocked on each; unblocking calls land in the list."""
    calls: list[int] = []
    tracker = DrainingHashesTracker(calls.append)
    for h in hashes:
        tracker.add_entry(1, h)
        assert tracker.should_block_sticky_key_hash(2, h)
    return tracker, calls


def test_add_pending_ack_if_allowed_adds_ack_when_allowed() -> None:
    m = PendingAcksMap(1)
    assert m.add_pending_ack_if_allowed(1, 1, 1, 123)
    assert m.contains(1, 1) and m.size() == 1


def test_add_pending_ack_if_allowed_does_not_add_ack_when_not_allowed() -> None:
    tracker = DrainingHashesTracker()
    tracker.add_entry(2, 123)  # draining on another consumer: the add handler refuses
    m = PendingAcksMap(1, tracker)
    assert not m.add_pending_ack_if_allowed(1, 1, 1, 123)
    assert not m.contains(1, 1) and m.size() == 0


def test_add_pending_ack_if_allowed_does_not_add_after_closed() -> None:
    m = PendingAcksMap(1)
    m.for_each_and_close(lambda *a: None)
    assert not m.add_pending_ack_if_allowed(1, 1, 1, 123)
    assert not m.contains(1, 1) and m.size() == 0


def test_for_each_processes_all_pending_acks() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 1, 123)
    m.add_pending_ack_if_allowed(1, 2, 1, 124)
    assert [a[1] for a in collect(m.for_each)] == [1, 2]


def test_for_each_and_close_processes_and_clears_all_pending_acks() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 1, 123)
    m.add_pending_ack_if_allowed(1, 2, 1, 124)
    assert [a[1] for a in collect(m.for_each_and_close)] == [1, 2]
    assert m.size() == 0


def test_remove_removes_pending_ack() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 1, 123)
    assert m.remove(1, 1)
    assert not m.contains(1, 1) and m.size() == 0


def test_remove_all_up_to_removes_all_pending_acks_up_to_specified_entry() -> None:
    m = PendingAcksMap(1)
    for ledger, entry, h in [(1, 1, 123), (1, 2, 124), (2, 1, 125)]:
        m.add_pending_ack_if_allowed(ledger, entry, 1, h)
    m.remove_all_up_to(1, 2, lambda *a: None)
    assert not m.contains(1, 1) and not m.contains(1, 2) and m.contains(2, 1)
    assert m.size() == 1


def test_remove_all_up_to_removes_all_pending_acks_up_to_specified_entry_across_multiple_ledgers() -> (  # noqa: E501
    None
):
    m = PendingAcksMap(1)
    for ledger, entry, h in [(1, 1, 123), (1, 2, 124), (2, 1, 125), (2, 2, 126), (3, 1, 127)]:
        m.add_pending_ack_if_allowed(ledger, entry, 1, h)
    m.remove_all_up_to(2, 1, lambda *a: None)
    assert [m.contains(*k) for k in [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1)]] == [
        False,
        False,
        False,
        True,
        True,
    ]
    assert m.size() == 2


def test_add_pending_ack_if_allowed_invokes_add_handler() -> None:
    tracker = DrainingHashesTracker()
    tracker.add_entry(2, 124)
    m = PendingAcksMap(1, tracker)
    # The handler is asked about this ack's hash: 123 passes while 124 drains elsewhere.
    assert m.add_pending_ack_if_allowed(1, 1, 1, 123)
    assert not m.add_pending_ack_if_allowed(1, 2, 1, 124)


def test_remove_invokes_remove_handler() -> None:
    tracker, calls = blocked_tracker(123)
    m = PendingAcksMap(1, tracker)
    m.add_pending_ack_if_allowed(1, 1, 1, 123)
    m.remove(1, 1)
    assert tracker.get_entry(123) is None and calls == [123]


def test_remove_all_up_to_invokes_remove_handler_for_each_entry() -> None:
    tracker, calls = blocked_tracker(123, 124, 125)
    m = PendingAcksMap(1, tracker)
    for ledger, entry, h in [(1, 1, 123), (1, 2, 124), (2, 1, 125)]:
        m.add_pending_ack_if_allowed(ledger, entry, 1, h)
    m.remove_all_up_to(1, 2, lambda *a: None)
    assert tracker.get_entry(123) is None and tracker.get_entry(124) is None
    assert tracker.get_entry(125) is not None
    assert calls == [-1]  # removals in one batch


def test_remove_all_up_to_with_callback_invokes_callback_for_each_removed_entry() -> None:
    m = PendingAcksMap(1)
    for ledger, entry, size, h in [(1, 1, 3, 123), (1, 2, 5, 124), (2, 1, 7, 125)]:
        m.add_pending_ack_if_allowed(ledger, entry, size, h)
    removed: list[Ack] = []
    m.remove_all_up_to(1, 2, lambda *a: removed.append(a))
    assert removed == [(1, 1, 3, 123), (1, 2, 5, 124)]
    assert not m.contains(1, 1) and not m.contains(1, 2) and m.contains(2, 1)


def test_size_returns_correct_size() -> None:
    m = PendingAcksMap(1)
    assert m.size() == 0
    for ledger, entry, h in [(1, 1, 123), (1, 2, 124), (2, 1, 125)]:
        m.add_pending_ack_if_allowed(ledger, entry, 1, h)
    assert m.size() == 3
    m.add_pending_ack_if_allowed(1, 1, 10, 123)
    m.update_remaining_unacked(1, 1, 2)
    assert m.size() == 3
    m.remove(1, 2)
    assert m.size() == 2
    m.remove_all_up_to(1, 1, lambda *a: None)
    assert m.size() == 1
    assert not m.remove(2, 1, 10, 125)
    assert m.size() == 1
    assert m.remove(2, 1, 1, 125)
    assert m.size() == 0


def test_for_each_and_clear_processes_and_clears_all_pending_acks() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 1, 123)
    m.add_pending_ack_if_allowed(1, 2, 1, 124)
    assert [a[1] for a in collect(m.for_each_and_clear)] == [1, 2]
    assert m.size() == 0


def test_for_each_and_clear_allows_adding_after_clear() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 1, 123)
    m.for_each_and_clear(lambda *a: None)
    assert m.add_pending_ack_if_allowed(1, 2, 1, 124)
    assert m.contains(1, 2)


def test_for_each_and_clear_invokes_remove_handler() -> None:
    tracker, calls = blocked_tracker(123, 124)
    m = PendingAcksMap(1, tracker)
    m.add_pending_ack_if_allowed(1, 1, 1, 123)
    m.add_pending_ack_if_allowed(1, 2, 1, 124)
    m.for_each_and_clear(lambda *a: None)
    # start_batch, two removals not closing, end_batch: one unblocking call, -1.
    assert len(tracker) == 0 and calls == [-1]


def test_remove_and_get_removes_and_returns_entry() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 5, 123)
    assert m.remove_and_get(1, 1) == (5, 123)
    assert not m.contains(1, 1)


def test_remove_and_get_returns_null_when_not_found() -> None:
    assert PendingAcksMap(1).remove_and_get(1, 1) is None


def test_remove_and_get_invokes_remove_handler() -> None:
    tracker, calls = blocked_tracker(123)
    m = PendingAcksMap(1, tracker)
    m.add_pending_ack_if_allowed(1, 1, 5, 123)
    m.remove_and_get(1, 1)
    assert calls == [123]


def test_remove_and_get_remaining_unacked_removes_and_returns_entry() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 5, 123)
    assert m.remove_and_get_remaining_unacked(1, 1) == 5
    assert not m.contains(1, 1) and m.size() == 0


def test_remove_and_get_remaining_unacked_returns_not_found_when_not_found() -> None:
    m = PendingAcksMap(1)
    assert m.remove_and_get_remaining_unacked(1, 1) == NOT_FOUND == -1
    assert m.size() == 0


def test_remove_and_get_remaining_unacked_invokes_remove_handler() -> None:
    tracker, calls = blocked_tracker(123)
    m = PendingAcksMap(1, tracker)
    m.add_pending_ack_if_allowed(1, 1, 5, 123)
    assert m.remove_and_get_remaining_unacked(1, 1) == 5
    assert m.remove_and_get_remaining_unacked(1, 1) == -1
    assert calls == [123]


def test_get_remaining_unacked_returns_stored_count() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 0, MINUS_ONE)
    m.add_pending_ack_if_allowed(1, 2, 2**31 - 1, INT_MIN)
    assert m.get_remaining_unacked(1, 1) == 0
    assert m.get_remaining_unacked(1, 2) == 2**31 - 1
    assert m.get_remaining_unacked(1, 3) == NOT_FOUND


def test_get_remaining_unacked_returns_minus_one_when_not_found() -> None:
    m = PendingAcksMap(1)
    assert m.get_remaining_unacked(1, 1) == -1
    m.add_pending_ack_if_allowed(1, 1, 0, 123)
    assert m.get_remaining_unacked(1, 1) == 0


def test_remove_and_get_remaining_unacked_removes_and_invokes_remove_handler() -> None:
    tracker, calls = blocked_tracker(INT_MIN, MINUS_ONE)
    m = PendingAcksMap(1, tracker)
    m.add_pending_ack_if_allowed(1, 1, 0, INT_MIN)
    m.add_pending_ack_if_allowed(1, 2, 2**31 - 1, MINUS_ONE)
    assert m.remove_and_get_remaining_unacked(1, 1) == 0
    assert m.remove_and_get_remaining_unacked(1, 2) == 2**31 - 1
    assert m.remove_and_get_remaining_unacked(1, 3) == NOT_FOUND
    assert calls == [INT_MIN, MINUS_ONE]  # and nothing else
    assert m.size() == 0


def test_packed_pending_ack_fields_round_trip_through_public_accessors() -> None:
    m = PendingAcksMap(1)
    values = [
        (0, 0),
        (0, MINUS_ONE),
        (1, INT_MIN),
        (1, INT_MAX),
        (2**31 - 1, -123456789 & 0xFFFF),
        (123456789, INT_MIN),
        (42, 0x8001),
        (1, 123),
        (2, INT_MAX),
    ]
    for i, (remaining, h) in enumerate(values, start=1):
        m.add_pending_ack_if_allowed(1, i, remaining, h)
    expected = [(1, i, r, h) for i, (r, h) in enumerate(values, start=1)]
    assert collect(m.for_each) == expected
    for i, (remaining, h) in enumerate(values, start=1):
        assert m.get(1, i) == (remaining, h)
        assert m.get_remaining_unacked(1, i) == remaining
        assert m.remove_and_get(1, i) == (remaining, h)
        assert not m.contains(1, i)
    for h in (-1, 0x10000, -(2**31)):  # beyond 16 bits: refused, nothing stored
        with pytest.raises(ValueError, match="sticky_key_hash"):
            m.add_pending_ack_if_allowed(1, 1, 1, h)
    assert m.size() == 0


def test_remove_all_up_to_preserves_packed_fields_in_callback() -> None:
    m = PendingAcksMap(1)
    values = [(7, 0), (8, MINUS_ONE), (9, INT_MIN), (10, INT_MAX)]
    for i, (remaining, h) in enumerate(values, start=1):
        m.add_pending_ack_if_allowed(1, i, remaining, h)
    m.add_pending_ack_if_allowed(1, len(values) + 1, 11, -123 & 0xFFFF)
    removed: list[Ack] = []
    m.remove_all_up_to(1, len(values), lambda *a: removed.append(a))
    assert removed == [(1, i, r, h) for i, (r, h) in enumerate(values, start=1)]
    assert m.contains(1, len(values) + 1)


def test_update_remaining_unacked_preserves_packed_sticky_key_hash() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 100, INT_MIN)
    assert m.update_remaining_unacked(1, 1, 7)
    assert m.get(1, 1) == (93, INT_MIN)
    assert m.remove(1, 1, 93, INT_MIN)
    assert not m.contains(1, 1)


def test_update_remaining_unacked_preserves_sticky_key_hash() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 10, INT_MIN)
    assert m.update_remaining_unacked(1, 1, 4)
    assert m.to_list() == [(1, 1, 6, INT_MIN)]


def test_update_remaining_unacked_allows_zero_remaining_unacked() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 1, MINUS_ONE)
    assert m.update_remaining_unacked(1, 1, 1)
    assert m.get_remaining_unacked(1, 1) == 0
    assert m.to_list() == [(1, 1, 0, MINUS_ONE)] and m.size() == 1


def test_update_remaining_unacked_does_not_store_negative_remaining_unacked() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 1, 123)
    assert not m.update_remaining_unacked(1, 1, 2)
    assert m.to_list() == [(1, 1, 1, 123)]


def test_remove_with_value_matches_signed_packed_fields() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 2**31 - 1, MINUS_ONE)
    assert not m.remove(1, 1, 2**31 - 1, 1)
    assert m.remove(1, 1, 2**31 - 1, MINUS_ONE)
    assert not m.contains(1, 1)


def test_remove_all_up_to_removes_boundary_entries_with_unordered_inner_map() -> None:
    m = PendingAcksMap(1)
    for ledger, entry, h in [(2, 11, 111), (2, 3, 103), (2, 7, 107), (2, 1, 101), (2, 9, 109)]:
        m.add_pending_ack_if_allowed(ledger, entry, 1, h)
    m.add_pending_ack_if_allowed(3, 1, 1, 201)
    m.remove_all_up_to(2, 7, lambda *a: None)
    keys = [(2, 1), (2, 3), (2, 7), (2, 9), (2, 11), (3, 1)]
    assert [m.contains(*k) for k in keys] == [False, False, False, True, True, True]


def test_size_remains_correct_across_common_operations() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 1, 123)
    m.add_pending_ack_if_allowed(1, 1, 2, 124)
    assert m.size() == 1
    m.add_pending_ack_if_allowed(2, 1, 3, 125)
    assert m.size() == 2
    assert m.update_remaining_unacked(1, 1, 1)
    assert m.size() == 2
    assert not m.remove(1, 1, 99, 124)
    assert m.size() == 2
    assert m.remove(1, 1)
    assert m.size() == 1
    m.remove_all_up_to(2, 1, lambda *a: None)
    assert m.size() == 0
    m.add_pending_ack_if_allowed(3, 1, 1, 126)
    m.for_each_and_clear(lambda *a: None)
    assert m.size() == 0


# --- partial batch acks beyond Pulsar's cases ----------------------------------------


def test_update_remaining_unacked_bad_input_changes_nothing() -> None:
    m = PendingAcksMap(1)
    m.add_pending_ack_if_allowed(1, 1, 5, 9)
    # A negative delta would raise the count in Pulsar; here it is refused.
    with pytest.raises(ValueError, match=r"acked_delta must be in \[0, 2\*\*31 - 1\], got -1"):
        m.update_remaining_unacked(1, 1, -1)
    with pytest.raises(ValueError, match=r"acked_delta must be in \[0, 2\*\*31 - 1\]"):
        m.update_remaining_unacked(1, 1, 2**31)
    with pytest.raises(TypeError, match="acked_delta must be an int"):
        m.update_remaining_unacked(1, 1, "1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"acked_deltas\[1\] must be in \[0, 2\*\*31 - 1\]"):
        m.update_remaining_unacked_many([1, 1], [1, 1], [1, -1])
    with pytest.raises(ValueError, match="acked_deltas has 1 items but ledger_ids has 2"):
        m.update_remaining_unacked_many([1, 1], [1, 1], [1])
    assert m.to_list() == [(1, 1, 5, 9)]


def test_update_remaining_unacked_many_equals_one_at_a_time() -> None:
    one, many = PendingAcksMap(1), PendingAcksMap(1)
    for m in (one, many):
        m.add_pending_acks_if_allowed([1, 1, 2], [1, 2, 1], [5, 3, 1], [9, 9, 8])
    keys = [(1, 1), (1, 1), (2, 1), (1, 2), (7, 7), (1, 1)]
    deltas = [2, 2, 1, 4, 1, 1]
    expected = [
        one.update_remaining_unacked(ledger, e, d)
        for (ledger, e), d in zip(keys, deltas, strict=True)
    ]
    got = many.update_remaining_unacked_many(
        np.array([k[0] for k in keys]), np.array([k[1] for k in keys]), np.array(deltas)
    )
    assert got.tolist() == expected == [True, True, True, False, False, True]
    assert many.to_list() == one.to_list() == [(1, 1, 0, 9), (1, 2, 3, 9), (2, 1, 0, 8)]


class RemainingUnackedMachine(RuleBasedStateMachine):
    """Adds, partial acks and removals against a dict of (remaining, hash)."""

    def __init__(self) -> None:
        super().__init__()
        self.m = PendingAcksMap(1)
        self.model: dict[tuple[int, int], tuple[int, int]] = {}

    keys = st.tuples(st.integers(0, 2), st.integers(0, 3))

    @rule(key=keys, size=st.integers(0, 5), h=st.integers(0, 0xFFFF))
    def add(self, key: tuple[int, int], size: int, h: int) -> None:
        assert self.m.add_pending_ack_if_allowed(*key, size, h)
        self.model[key] = (size, h)

    @rule(key=keys, delta=st.integers(0, 4))
    def partial_ack(self, key: tuple[int, int], delta: int) -> None:
        found = self.model.get(key)
        ok = found is not None and found[0] >= delta
        assert self.m.update_remaining_unacked(*key, delta) == ok
        if found is not None and ok:
            self.model[key] = (found[0] - delta, found[1])

    @rule(key=keys)
    def remove_and_get_remaining(self, key: tuple[int, int]) -> None:
        found = self.model.pop(key, None)
        got = self.m.remove_and_get_remaining_unacked(*key)
        assert got == (NOT_FOUND if found is None else found[0])

    @rule(key=keys, size=st.integers(0, 5))
    def remove_exact(self, key: tuple[int, int], size: int) -> None:
        found = self.model.get(key)
        h = found[1] if found is not None else 0
        removed = self.m.remove(*key, size, h)
        assert removed == (found == (size, h))
        if removed:
            del self.model[key]

    @invariant()
    def same_contents(self) -> None:
        assert self.m.to_list() == [(*k, *v) for k, v in sorted(self.model.items())]
        for key, (remaining, _) in self.model.items():
            assert self.m.get_remaining_unacked(*key) == remaining


TestRemainingUnacked = RemainingUnackedMachine.TestCase
TestRemainingUnacked.settings = settings(max_examples=40, stateful_step_count=25)
