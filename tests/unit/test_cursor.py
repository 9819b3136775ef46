"""The safe cursor and per-bucket checkpoints (SPEC 8) against a set-based model."""

import random
import threading

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from keyshared import SafeCursor
from keyshared.dispatch import BucketCheckpoints

MAX_OFFSET = 2**63 - 1


def test_the_spec_example() -> None:
    c = SafeCursor(10)
    assert c.position is None
    assert c.ack(10) == 10
    assert c.ack(12) is None
    assert c.ack(13) is None
    assert c.position == 10
    assert c.pending == 2
    assert c.ack(11) == 13
    assert c.pending == 0


def test_duplicates_and_passed_offsets_change_nothing() -> None:
    c = SafeCursor(5)
    assert c.ack(4) is None
    assert c.ack(7) is None
    assert c.ack(7) is None
    assert c.pending == 1
    assert c.skip(5) == 5
    assert c.ack(6) == 7
    assert c.ack(6) is None
    assert c.position == 7
    assert c.is_done(0) and c.is_done(7) and not c.is_done(8)
    assert c.first_offset == 5


def test_far_acks_come_back_into_reach() -> None:
    c = SafeCursor(0)
    far = 3 * (1 << 20) + 5
    assert c.ack(far) is None
    assert c.is_done(far)
    assert c.ack_many(np.arange(far, dtype=np.int64)) == far
    assert c.pending == 0


def test_top_of_the_range() -> None:
    c = SafeCursor(MAX_OFFSET - 1)
    assert c.ack(MAX_OFFSET) is None
    assert c.ack(MAX_OFFSET - 1) == MAX_OFFSET


@pytest.mark.parametrize("bad", [-1, 2**63, 2**64, 2**100])
def test_bad_offsets_change_nothing(bad: int) -> None:
    c = SafeCursor(0)
    c.ack(0)
    with pytest.raises(ValueError, match=r"offset must be in \[0, 2\*\*63 - 1\]"):
        c.ack(bad)
    with pytest.raises(ValueError, match=r"first_offset must be in"):
        SafeCursor(bad)
    assert c.position == 0 and c.pending == 0


def test_bad_batches_change_nothing() -> None:
    c = SafeCursor(0)
    with pytest.raises(ValueError, match=r"offsets\[2\] = -1 is outside"):
        c.ack_many([0, 1, -1])
    with pytest.raises(ValueError, match=r"offsets\[1\] = 9223372036854775808 is outside"):
        c.ack_many(np.array([0, 2**63], dtype=np.uint64))
    with pytest.raises(TypeError, match="one-dimensional array of integers"):
        c.ack_many(np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(TypeError, match="offset must be an int, got str"):
        c.ack("3")  # type: ignore[arg-type]
    assert c.position is None and c.pending == 0


def test_batch_equals_one_at_a_time() -> None:
    rng = np.random.default_rng(5)
    offsets = np.arange(100, 50_100, dtype=np.int64)
    for start in range(0, offsets.size, 1_000):  # shuffled within windows of 1,000
        rng.shuffle(offsets[start : start + 1_000])
    offsets = offsets[offsets != 40_000]
    one, many = SafeCursor(100), SafeCursor(100)
    positions = [one.ack(int(o)) for o in offsets]
    assert many.ack_many(offsets) == max(p for p in positions if p is not None)
    assert one.position == many.position == 39_999
    assert one.pending == many.pending == 50_099 - 40_000
    for dtype in (np.uint32, np.uint64, np.int32):
        c = SafeCursor(0)
        assert c.ack_many(np.arange(10, dtype=dtype)) == 9


class CursorMachine(RuleBasedStateMachine):
    """The cursor never passes an offset not done and never moves back."""

    def __init__(self) -> None:
        super().__init__()
        self.first = 1000
        self.cursor = SafeCursor(self.first)
        self.done: set[int] = set()
        self.last: int | None = None

    def expected(self) -> int | None:
        nxt = self.first
        while nxt in self.done:
            nxt += 1
        return nxt - 1 if nxt > self.first else None

    @rule(offset=st.integers(990, 1100))
    def ack(self, offset: int) -> None:
        before = self.expected()
        moved = self.cursor.ack(offset)
        self.done.add(offset)
        after = self.expected()
        assert moved == (after if after != before else None)

    @rule(offsets=st.lists(st.integers(990, 1100), max_size=30))
    def ack_many(self, offsets: list[int]) -> None:
        before = self.expected()
        moved = self.cursor.ack_many(offsets)
        self.done.update(offsets)
        after = self.expected()
        assert moved == (after if after != before else None)

    @invariant()
    def matches_and_never_moves_back(self) -> None:
        position = self.cursor.position
        assert position == self.expected()
        if self.last is not None:
            assert position is not None and position >= self.last
        self.last = position
        pending = {o for o in self.done if position is None or o > position}
        assert self.cursor.pending == len({o for o in pending if o >= self.first})


TestCursor = CursorMachine.TestCase
TestCursor.settings = settings(max_examples=60, stateful_step_count=40)


def test_threads_acking_disjoint_offsets() -> None:
    c = SafeCursor(0)
    per_thread, threads = 20_000, 4
    moves: list[list[int]] = [[] for _ in range(threads)]

    def worker(t: int) -> None:
        mine = list(range(t, per_thread * threads, threads))
        random.Random(t).shuffle(mine)
        for chunk in range(0, len(mine), 500):
            batch = mine[chunk : chunk + 500]
            for o in batch[:10]:
                if (p := c.ack(o)) is not None:
                    moves[t].append(p)
            if (p := c.ack_many(np.array(batch[10:]))) is not None:
                moves[t].append(p)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert c.position == per_thread * threads - 1
    assert c.pending == 0
    assert max(max(m) for m in moves if m) == c.position


def test_bucket_checkpoints() -> None:
    cp = BucketCheckpoints()
    cp.open(1, 0, 0)
    cp.open(1, 1, 10)
    with pytest.raises(ValueError, match="already open"):
        cp.open(1, 1, 3)
    assert cp.ack(1, 0, 0) == 0
    assert cp.skip(1, 0, 1) == 1
    with pytest.raises(KeyError, match="bucket 0 of segment 2 is not open"):
        cp.ack(2, 0, 0)
    with pytest.raises(KeyError):
        cp.ack_many([1, 9], [1, 9], [10, 1])
    assert cp.position(1, 1) is None  # the failed batch changed nothing
    assert cp.ack_many(np.array([1, 1, 1]), [1, 1, 0], [10, 11, 3]) == {(1, 1): 11}
    assert cp.positions() == {(1, 0): 1, (1, 1): 11}
    assert (1, 1) in cp and (5, 5) not in cp and len(cp) == 2
    assert cp.close(1, 1) == 11
    with pytest.raises(KeyError):
        cp.close(1, 1)
    with pytest.raises(ValueError, match="bucket must be in"):
        cp.open(1, -1, 0)
