"""PIP-379's DrainingHashesTracker (SPEC 6), case by case and against a small Python model."""

import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from keyshared import DrainingHashesTracker
from keyshared.dispatch import batch


def entry(tracker: DrainingHashesTracker, h: int) -> tuple[int, int, int] | None:
    e = tracker.get_entry(h)
    return None if e is None else (e.consumer_id, e.ref_count, e.blocked_count)


def test_reference_counts() -> None:
    t = DrainingHashesTracker()
    t.add_entry(1, 7)
    t.add_entry(1, 7)
    assert entry(t, 7) == (1, 2, 0)
    assert len(t) == 1
    t.reduce_ref_count(1, 7)
    assert entry(t, 7) == (1, 1, 0)
    t.reduce_ref_count(1, 7)
    assert entry(t, 7) is None
    assert len(t) == 0
    t.reduce_ref_count(1, 7)  # not draining: ignored
    assert len(t) == 0


def test_hash_zero_means_not_set() -> None:
    t = DrainingHashesTracker()
    with pytest.raises(ValueError, match="must not be 0"):
        t.add_entry(1, 0)
    t.reduce_ref_count(1, 0)
    assert t.get_entry(0) is None
    assert not t.should_block_sticky_key_hash(1, 0)
    assert len(t) == 0


def test_another_consumers_hash_is_an_error_and_changes_nothing() -> None:
    t = DrainingHashesTracker()
    t.add_entry(1, 5)
    with pytest.raises(ValueError, match="consumer 1 is already draining hash 5"):
        t.add_entry(2, 5)
    with pytest.raises(ValueError, match="consumer 1 is already draining hash 5"):
        t.reduce_ref_count(2, 5)
    assert entry(t, 5) == (1, 1, 0)


def test_should_block() -> None:
    t = DrainingHashesTracker()
    assert not t.should_block_sticky_key_hash(2, 9)
    t.add_entry(1, 9)
    t.add_entry(1, 9)
    assert t.should_block_sticky_key_hash(2, 9)
    assert t.should_block_sticky_key_hash(3, 9)
    assert entry(t, 9) == (1, 2, 2)
    # Reassigned to the draining consumer: the entry goes, nothing is blocked.
    assert not t.should_block_sticky_key_hash(1, 9)
    assert t.get_entry(9) is None
    t.reduce_ref_count(1, 9)  # its old pending acks no longer count
    assert len(t) == 0


def test_unblocking_handler() -> None:
    calls: list[int] = []
    t = DrainingHashesTracker(calls.append, dispatcher_name="sub")
    assert t.dispatcher_name == "sub"
    assert t.unblocking_handler is not None
    t.add_entry(1, 3)
    t.reduce_ref_count(1, 3)
    assert calls == []  # it never blocked anyone
    t.add_entry(1, 3)
    t.add_entry(1, 3)
    assert t.should_block_sticky_key_hash(2, 3)
    t.reduce_ref_count(1, 3)
    assert calls == []
    t.reduce_ref_count(1, 3)
    assert calls == [3]
    t.add_entry(1, 4)
    assert t.should_block_sticky_key_hash(2, 4)
    t.reduce_ref_count(1, 4, closing=True)
    assert calls == [3]  # a closing consumer unblocks silently


def test_batches_report_once_with_minus_one() -> None:
    calls: list[int] = []
    t = DrainingHashesTracker(calls.append)
    for h in (10, 11):
        t.add_entry(1, h)
        assert t.should_block_sticky_key_hash(2, h)
    with batch(t):
        with batch(t):
            t.reduce_ref_count(1, 10)
        assert calls == []
        t.reduce_ref_count(1, 11)
        assert calls == []
    assert calls == [-1]
    with batch(t):
        pass
    assert calls == [-1]
    with pytest.raises(ValueError, match="without a matching start_batch"):
        t.end_batch()


def test_the_handler_may_call_back_in() -> None:
    t: DrainingHashesTracker
    seen: list[tuple[int, object]] = []

    def handler(h: int) -> None:
        seen.append((h, t.get_entry(h)))
        t.add_entry(5, 100)

    t = DrainingHashesTracker(handler)
    t.add_entry(1, 3)
    assert t.should_block_sticky_key_hash(2, 3)
    t.reduce_ref_count(1, 3)
    assert seen == [(3, None)]
    assert entry(t, 100) == (5, 1, 0)


def test_a_failing_handler_is_reported_as_unraisable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The change is made before the handler hears of it, so the call returns normally and
    the handler's exception goes to sys.unraisablehook (a call that raises changes
    nothing)."""
    heard: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", heard.append)

    def handler(h: int) -> None:
        raise RuntimeError(f"handler saw {h}")

    t = DrainingHashesTracker(handler)
    t.add_entry(1, 3)
    assert t.should_block_sticky_key_hash(2, 3)
    t.reduce_ref_count(1, 3)
    assert [str(u.exc_value) for u in heard] == ["handler saw 3"]
    assert t.get_entry(3) is None


def test_handler_must_be_callable() -> None:
    with pytest.raises(TypeError, match="unblocking_handler must be callable"):
        DrainingHashesTracker(42)  # type: ignore[arg-type]


def test_consumer_stats() -> None:
    t = DrainingHashesTracker()
    for h in (300, 2, 2, 2):
        t.add_entry(7, h)
    assert t.should_block_sticky_key_hash(8, 2)
    s = t.consumer_stats(7)
    assert s.draining_hashes_count == 2
    assert s.draining_hashes_unacked_messages == 4
    assert s.draining_hashes_cleared_total == 0
    details = [(d.hash, d.unack_msgs, d.blocked_attempts) for d in s.draining_hashes]
    assert details == [(2, 3, 1), (300, 1, 0)]
    t.reduce_ref_count(7, 300)
    assert not t.should_block_sticky_key_hash(7, 2)
    s = t.consumer_stats(7)
    assert (s.draining_hashes_count, s.draining_hashes_cleared_total) == (0, 2)
    assert s.draining_hashes_unacked_messages == 0
    t.consumer_removed(7)
    assert t.consumer_stats(7).draining_hashes_cleared_total == 0
    empty = t.consumer_stats(99)
    assert (empty.draining_hashes_count, empty.draining_hashes) == (0, [])


def test_clear_keeps_an_open_batch() -> None:
    calls: list[int] = []
    t = DrainingHashesTracker(calls.append)
    t.add_entry(1, 3)
    t.start_batch()
    t.clear()
    assert len(t) == 0
    assert t.consumer_stats(1).draining_hashes_count == 0
    t.end_batch()
    with pytest.raises(ValueError):
        t.end_batch()


def test_batch_forms_equal_one_at_a_time() -> None:
    rng = np.random.default_rng(1)
    hashes = rng.integers(1, 200, 5_000, dtype=np.uint16)
    consumers = rng.integers(0, 3, 5_000, dtype=np.uint64)
    one, many = DrainingHashesTracker(), DrainingHashesTracker()
    for t in (one, many):
        for h in range(1, 200, 2):
            t.add_entry(h % 3, h)
    expected = [
        one.should_block_sticky_key_hash(int(c), int(h))
        for c, h in zip(consumers, hashes, strict=True)
    ]
    got = many.should_block_sticky_key_hashes(consumers, hashes)
    assert got.dtype == np.bool_
    assert got.tolist() == expected
    assert [entry(one, h) for h in range(200)] == [entry(many, h) for h in range(200)]
    scalar = many.should_block_sticky_key_hashes(np.uint64(5), [1, 3, 5])
    assert scalar.tolist() == [many.get_entry(h) is not None for h in (1, 3, 5)]


def test_batch_reduce_and_add() -> None:
    calls: list[int] = []
    t = DrainingHashesTracker(calls.append)
    t.add_entries(1, np.array([3, 3, 4], dtype=np.int64))
    assert entry(t, 3) == (1, 2, 0)
    assert t.should_block_sticky_key_hash(2, 4)
    t.add_entry(2, 9)
    with pytest.raises(ValueError, match=r"sticky_key_hashes\[1\]: consumer 2 is already draining"):
        t.reduce_ref_counts(1, [3, 9])
    assert entry(t, 3) == (1, 2, 0)
    t.reduce_ref_counts(1, [3, 4, 3, 0, 77])
    assert calls == [-1]
    assert t.get_entry(3) is None
    with pytest.raises(ValueError, match=r"sticky_key_hashes\[1\]: sticky key hash must not be 0"):
        t.add_entries(1, [5, 0])
    assert t.get_entry(5) is None


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda t: t.add_entry(1, 0x10000), ValueError, "sticky_key_hash must be a 16-bit hash"),
        (lambda t: t.add_entry(1, -1), ValueError, "sticky_key_hash must be a 16-bit hash"),
        (lambda t: t.add_entry(-1, 5), ValueError, r"consumer_id must be in \[0, 2\*\*64 - 1\]"),
        (lambda t: t.add_entry(2**64, 5), ValueError, "consumer_id must be in"),
        (lambda t: t.add_entry("1", 5), TypeError, "consumer_id must be an int, got str"),
        (lambda t: t.add_entry(1, 5.0), TypeError, "sticky_key_hash must be an int"),
        (
            lambda t: t.should_block_sticky_key_hashes(1, [1, 70_000]),
            ValueError,
            r"sticky_key_hashes\[1\] = 70000 is outside \[0, 65535\]",
        ),
        (
            lambda t: t.should_block_sticky_key_hashes(1, np.array([1.5])),
            TypeError,
            "one-dimensional array of integers",
        ),
        (
            lambda t: t.should_block_sticky_key_hashes([1, 2], [1, 2, 3]),
            ValueError,
            "consumer_ids has 2 items but sticky_key_hashes has 3",
        ),
        (lambda t: t.should_block_sticky_key_hashes(1, "abc"), TypeError, "array of integers"),
    ],
)
def test_bad_input_changes_nothing(call: object, error: type, message: str) -> None:
    t = DrainingHashesTracker()
    t.add_entry(1, 1)
    with pytest.raises(error, match=message):
        call(t)  # type: ignore[operator]
    assert entry(t, 1) == (1, 1, 0)
    assert len(t) == 1


def test_all_hashes_draining_fit_in_under_a_mebibyte() -> None:
    t = DrainingHashesTracker()
    hashes = np.arange(1, 0x10000, dtype=np.uint16)
    for c in range(8):
        t.add_entries(c, hashes[c::8])
    assert len(t) == 65_535
    assert t.memory_bytes() < 1 << 20
    for c in range(8):
        t.reduce_ref_counts(c, hashes[c::8])
    assert len(t) == 0
    assert t.memory_bytes() < 4 << 10  # pages are freed with their last entry


def test_threads_keep_totals_consistent() -> None:
    calls: list[int] = []
    t = DrainingHashesTracker(calls.append)
    rounds, threads = 300, 6

    def worker(c: int) -> None:
        own = [1 + c * 1000 + i for i in range(50)]
        for r in range(rounds):
            h = own[r % len(own)]
            t.add_entry(c, h)
            t.add_entry(c, h)
            t.should_block_sticky_key_hash((c + 1) % threads, h)
            t.reduce_ref_count(c, h)
            if r % 7 == 0:
                t.should_block_sticky_key_hashes((c + 1) % threads, np.array(own, dtype=np.uint16))
            t.reduce_ref_count(c, h)

    pool = [threading.Thread(target=worker, args=(c,)) for c in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert len(t) == 0
    assert len(calls) == rounds * threads
    for c in range(threads):
        s = t.consumer_stats(c)
        assert s.draining_hashes_count == 0
        assert s.draining_hashes_unacked_messages == 0


@dataclass
class ModelEntry:
    consumer: int
    refs: int
    blocked: int = 0


@dataclass
class Model:
    entries: dict[int, ModelEntry] = field(default_factory=dict)
    level: int = 0
    unblocked_in_batch: bool = False
    calls: list[int] = field(default_factory=list)

    def add(self, c: int, h: int) -> None:
        e = self.entries.setdefault(h, ModelEntry(c, 0))
        e.refs += 1

    def reduce(self, c: int, h: int, closing: bool) -> None:
        e = self.entries.get(h)
        if e is None:
            return
        e.refs -= 1
        if e.refs == 0:
            del self.entries[h]
            if not closing and e.blocked > 0:
                if self.level:
                    self.unblocked_in_batch = True
                else:
                    self.calls.append(h)

    def should_block(self, c: int, h: int) -> bool:
        e = self.entries.get(h)
        if e is None:
            return False
        if e.consumer == c:
            del self.entries[h]
            return False
        e.blocked += 1
        return True


consumers = st.integers(0, 3)
small_hashes = st.integers(1, 12)


class TrackerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.model = Model()
        self.calls: list[int] = []
        self.tracker = DrainingHashesTracker(self.calls.append)

    @rule(c=consumers, h=small_hashes)
    def add(self, c: int, h: int) -> None:
        owner = self.model.entries.get(h)
        if owner is not None and owner.consumer != c:
            with pytest.raises(ValueError):
                self.tracker.add_entry(c, h)
            return
        self.tracker.add_entry(c, h)
        self.model.add(c, h)

    @rule(c=consumers, h=small_hashes, closing=st.booleans())
    def reduce(self, c: int, h: int, closing: bool) -> None:
        owner = self.model.entries.get(h)
        if owner is not None and owner.consumer != c:
            with pytest.raises(ValueError):
                self.tracker.reduce_ref_count(c, h, closing)
            return
        self.tracker.reduce_ref_count(c, h, closing)
        self.model.reduce(c, h, closing)

    @rule(c=consumers, h=small_hashes)
    def should_block(self, c: int, h: int) -> None:
        assert self.tracker.should_block_sticky_key_hash(c, h) == self.model.should_block(c, h)

    @rule()
    def start(self) -> None:
        self.tracker.start_batch()
        self.model.level += 1

    @precondition(lambda self: self.model.level > 0)
    @rule()
    def end(self) -> None:
        self.tracker.end_batch()
        self.model.level -= 1
        if self.model.level == 0 and self.model.unblocked_in_batch:
            self.model.unblocked_in_batch = False
            self.model.calls.append(-1)

    @invariant()
    def same_entries(self) -> None:
        for h in range(0, 14):
            e = self.model.entries.get(h)
            expected = None if e is None else (e.consumer, e.refs, e.blocked)
            assert entry(self.tracker, h) == expected
        assert len(self.tracker) == len(self.model.entries)
        assert all(e.refs >= 1 for e in self.model.entries.values())

    @invariant()
    def same_notifications(self) -> None:
        assert self.calls == self.model.calls

    @invariant()
    def stats_sum_the_entries(self) -> None:
        for c in range(4):
            s = self.tracker.consumer_stats(c)
            mine = [e for e in self.model.entries.values() if e.consumer == c]
            assert s.draining_hashes_count == len(mine)
            assert s.draining_hashes_unacked_messages == sum(e.refs for e in mine)


TestTracker = TrackerMachine.TestCase
TestTracker.settings = settings(max_examples=60, stateful_step_count=40)


# --- Pulsar's DrainingHashesTrackerTest --------------------------------------------------
# Consumers are ids (1 for "consumer1", 2 for "consumer2"); the unblocking handler is a
# list of the calls it got. Pulsar reads the batch level from a field; here it shows in
# how many end_batch calls pass before one fails.


def recording_tracker() -> tuple[DrainingHashesTracker, list[int]]:
    calls: list[int] = []
    return DrainingHashesTracker(calls.append, "dispatcher1"), calls


def test_add_entry_adds_new_entry() -> None:
    tracker, _ = recording_tracker()
    tracker.add_entry(1, 1)
    e = tracker.get_entry(1)
    assert e is not None and e.consumer_id == 1


def test_add_entry_throws_exception_for_zero_sticky_hash() -> None:
    tracker, _ = recording_tracker()
    with pytest.raises(ValueError):
        tracker.add_entry(1, 0)
    assert len(tracker) == 0


def test_reduce_ref_count_reduces_reference_count() -> None:
    tracker, _ = recording_tracker()
    tracker.add_entry(1, 1)
    tracker.reduce_ref_count(1, 1, False)
    assert tracker.get_entry(1) is None


def test_reduce_ref_count_does_not_reduce_for_different_consumer() -> None:
    tracker, _ = recording_tracker()
    tracker.add_entry(1, 1)
    with pytest.raises(ValueError):
        tracker.reduce_ref_count(2, 1, False)
    assert entry(tracker, 1) == (1, 1, 0)


def test_should_block_sticky_key_hash_does_not_block_for_existing_entry_when_same_consumer() -> (
    None
):
    tracker, _ = recording_tracker()
    tracker.add_entry(1, 1)
    assert not tracker.should_block_sticky_key_hash(1, 1)


def test_should_block_sticky_key_hash_blocks_for_existing_entry_when_different_consumer() -> None:
    tracker, _ = recording_tracker()
    tracker.add_entry(1, 1)
    assert tracker.should_block_sticky_key_hash(2, 1)


def test_should_block_sticky_key_hash_does_not_block_for_new_entry() -> None:
    tracker, _ = recording_tracker()
    assert not tracker.should_block_sticky_key_hash(1, 1)


def test_start_batch_increments_batch_level() -> None:
    tracker, _ = recording_tracker()
    for _ in range(3):
        tracker.start_batch()
    for _ in range(3):  # level 3: three ends pass, the fourth has no batch to close
        tracker.end_batch()
    with pytest.raises(ValueError):
        tracker.end_batch()


def test_end_batch_decrements_batch_level() -> None:
    tracker, _ = recording_tracker()
    tracker.start_batch()
    tracker.end_batch()
    with pytest.raises(ValueError):  # back at level 0
        tracker.end_batch()


def test_end_batch_invokes_unblocking_handler_when_unblocked_while_batching() -> None:
    tracker, calls = recording_tracker()
    tracker.add_entry(1, 1)
    tracker.start_batch()
    tracker.should_block_sticky_key_hash(2, 1)
    tracker.reduce_ref_count(1, 1, False)
    assert calls == []
    tracker.end_batch()
    assert calls == [-1]


def test_clear_removes_all_entries() -> None:
    tracker, _ = recording_tracker()
    tracker.add_entry(1, 1)
    tracker.clear()
    assert tracker.get_entry(1) is None


def test_unblocking_handler_invokes_sticky_key_hash_unblocked() -> None:
    tracker, calls = recording_tracker()
    tracker.add_entry(1, 1)
    tracker.should_block_sticky_key_hash(2, 1)
    tracker.reduce_ref_count(1, 1, False)
    assert calls == [1]


def test_unblocking_handler_does_not_invoke_sticky_key_hash_unblocked_when_closing() -> None:
    tracker, calls = recording_tracker()
    tracker.add_entry(1, 1)
    tracker.should_block_sticky_key_hash(2, 1)
    tracker.reduce_ref_count(1, 1, True)
    assert calls == []
