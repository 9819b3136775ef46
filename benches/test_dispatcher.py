"""Dispatcher state kernels against straightforward pure-Python implementations of the same
semantics: draining-hash memory, batch should_block, batch cursor acks, single calls; and
the sticky-key dispatcher's reads against the Python dispatcher it replaced."""

import importlib.util
import itertools
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from ratios import PAIRED

from keyshared import DrainingHashesTracker, SafeCursor, StickyKeyDispatcher

N = 1_000_000
ALL_HASHES = 65_535  # every sticky key hash; 0 means "not set"
MIB = 1 << 20


@dataclass
class Entry:
    consumer: int
    ref_count: int = 0
    blocked_count: int = 0


class PyTracker:
    """PIP-379's DrainingHashesTracker as one would write it in Python."""

    def __init__(self) -> None:
        self.entries: dict[int, Entry] = {}

    def add_entry(self, consumer: int, h: int) -> None:
        entry = self.entries.setdefault(h, Entry(consumer))
        if entry.consumer != consumer:
            raise ValueError(h)
        entry.ref_count += 1

    def should_block(self, consumer: int, h: int) -> bool:
        entry = self.entries.get(h)
        if entry is None:
            return False
        if entry.consumer == consumer:
            del self.entries[h]
            return False
        entry.blocked_count += 1
        return True

    def should_block_many(self, consumer: int, hashes: list[int]) -> list[bool]:
        return [self.should_block(consumer, h) for h in hashes]


class PyCursor:
    """The safe cursor as one would write it in Python: a set of acks past the gap."""

    def __init__(self, first: int) -> None:
        self.next = first
        self.acked: set[int] = set()

    def ack(self, offset: int) -> int | None:
        if offset < self.next or offset in self.acked:
            return None
        if offset != self.next:
            self.acked.add(offset)
            return None
        self.next += 1
        while self.next in self.acked:
            self.acked.remove(self.next)
            self.next += 1
        return self.next - 1

    def ack_many(self, offsets: list[int]) -> int | None:
        before = self.next
        for o in offsets:
            self.ack(o)
        return self.next - 1 if self.next != before else None


def shuffled_offsets(n: int, window: int, seed: int = 11) -> np.ndarray:
    """0..n-1, shuffled within consecutive windows: out-of-order acks a window apart."""
    offsets = np.arange(n, dtype=np.int64)
    rng = np.random.default_rng(seed)
    for start in range(0, n, window):
        rng.shuffle(offsets[start : start + window])
    return offsets


def draining_tracker(lib: str) -> Any:
    """10,000 hashes draining on consumers 0..9."""
    tracker: Any = DrainingHashesTracker() if lib == "keyshared" else PyTracker()
    for h in range(1, ALL_HASHES + 1, 6):
        tracker.add_entry(h % 10, h)
    return tracker


@pytest.mark.benchmark(group="draining-memory")
@pytest.mark.parametrize("lib", ["keyshared", "python"])
def test_all_hashes_draining_memory(benchmark: Any, lib: str) -> None:
    def fill() -> Any:
        tracker: Any = DrainingHashesTracker() if lib == "keyshared" else PyTracker()
        for h in range(1, ALL_HASHES + 1):
            tracker.add_entry(h % 16, h)
        return tracker

    benchmark.pedantic(fill, rounds=5, iterations=1)
    if lib == "keyshared":
        used = fill().memory_bytes()
    else:
        tracemalloc.start()
        kept = fill()
        used = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert len(kept.entries) == ALL_HASHES
    benchmark.extra_info["draining_hashes"] = ALL_HASHES
    benchmark.extra_info["memory_bytes"] = used
    benchmark.extra_info["bytes_per_hash"] = round(used / ALL_HASHES, 1)
    if lib == "keyshared":
        assert used < MIB, f"{used} bytes for {ALL_HASHES} draining hashes"


@pytest.mark.benchmark(group="should-block-batch")
@pytest.mark.parametrize("lib", ["keyshared", "python"])
def test_should_block_batch(benchmark: Any, lib: str) -> None:
    hashes = np.random.default_rng(3).integers(1, 0x10000, N, dtype=np.uint16)
    tracker = draining_tracker(lib)
    # Consumer 99 drains nothing, so every round sees the same entries.
    run: Callable[[], object]
    if lib == "keyshared":
        run = lambda: tracker.should_block_sticky_key_hashes(99, hashes)  # noqa: E731
    else:
        as_list = hashes.tolist()
        run = lambda: tracker.should_block_many(99, as_list)  # noqa: E731
    # Exactly the hashes draining_tracker added are blocked, checked before timing.
    assert np.array_equal(np.asarray(run(), dtype=bool), hashes % 6 == 1)
    blocked = benchmark(run)
    assert int(np.count_nonzero(blocked)) == int(np.count_nonzero(hashes % 6 == 1))


@pytest.mark.benchmark(group="cursor-ack-batch")
@pytest.mark.parametrize("lib", ["keyshared", "python"])
def test_cursor_ack_batch(benchmark: Any, lib: str) -> None:
    offsets = shuffled_offsets(N, 10_000)
    payload: Any = offsets if lib == "keyshared" else offsets.tolist()

    def setup() -> tuple[tuple[Any, Any], dict[str, Any]]:
        cursor: Any = SafeCursor(0) if lib == "keyshared" else PyCursor(0)
        return (cursor, payload), {}

    (cursor, _), _ = setup()
    assert cursor.ack_many(payload) == N - 1
    position = benchmark.pedantic(
        lambda cursor, offsets: cursor.ack_many(offsets), setup=setup, rounds=5, iterations=1
    )
    assert position == N - 1


CALLS = 1_000  # single calls per round, so the timer's own overhead is spread thin


def per_call(benchmark: Any, run: Callable[[], object]) -> None:
    benchmark(run)
    benchmark.extra_info["calls_per_round"] = CALLS
    benchmark.extra_info["ns_per_call"] = round(benchmark.stats.stats.median / CALLS * 1e9, 1)


@pytest.mark.benchmark(group="should-block-single")
@pytest.mark.parametrize("lib", ["keyshared", "python"])
def test_should_block_single_call(benchmark: Any, lib: str) -> None:
    tracker = draining_tracker(lib)
    call = tracker.should_block_sticky_key_hash if lib == "keyshared" else tracker.should_block

    def run() -> None:
        for _ in range(CALLS):
            call(99, 7)

    per_call(benchmark, run)
    assert call(99, 7) is True


@pytest.mark.benchmark(group="cursor-ack-single")
@pytest.mark.parametrize("lib", ["keyshared", "python"])
def test_cursor_ack_single_call(benchmark: Any, lib: str) -> None:
    cursor: Any = SafeCursor(0) if lib == "keyshared" else PyCursor(0)
    offsets = itertools.count()  # in order, the common case: every ack moves the cursor
    ack = cursor.ack

    def run() -> None:
        for offset in itertools.islice(offsets, CALLS):
            ack(offset)

    per_call(benchmark, run)
    assert cursor.ack(0) is None


def python_sticky_dispatcher() -> ModuleType:
    """The Python dispatcher the kernel replaced, from the tests (its one copy)."""
    path = Path(__file__).parent.parent / "tests" / "support" / "python_sticky_dispatcher.py"
    spec = importlib.util.spec_from_file_location("python_sticky_dispatcher", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


READ = 10_000  # entries per read, as a broker's read of a busy topic
CONSUMERS = 10


STICKY_KEYS = np.random.default_rng(0).integers(1, 0x10000, 1_000)


def sticky_entries(first: int, n: int, seed: int) -> list[tuple[int, int, int, int]]:
    """n entries of the same 1,000 keys' hashes, batches of 1 to 4 messages."""
    rng = np.random.default_rng(seed)
    hashes = STICKY_KEYS[rng.integers(0, len(STICKY_KEYS), n)].tolist()
    sizes = rng.integers(1, 5, n).tolist()
    return [(7, first + i, h, s) for i, (h, s) in enumerate(zip(hashes, sizes, strict=True))]


def busy_sticky(lib: str) -> Any:
    """Ten consumers with 5,000 entries pending; an eleventh joins, so the hashes it takes
    drain on their old consumers and a read holds some entries back; then the first
    entries are acked. The timed read finds entries waiting for redelivery, and the replay
    read sends them."""
    cls = StickyKeyDispatcher if lib == "keyshared" else STICKY_PEER.PyStickyKeyDispatcher
    d = cls(flow_control=True)
    for c in range(CONSUMERS):
        d.add_consumer(c, f"consumer-{c}")
        d.flow(c, 1_000_000)
    d.dispatch_read(FIRST_READ)
    d.add_consumer(CONSUMERS, "newcomer")
    d.flow(CONSUMERS, 1_000_000)
    d.dispatch_read(SECOND_READ)
    for c in range(CONSUMERS):
        d.pending_acks(c).remove_all_up_to(*FIRST_READ[-1][:2])
    return d


STICKY_PEER = python_sticky_dispatcher()
FIRST_READ = sticky_entries(0, 5_000, seed=1)
SECOND_READ = sticky_entries(5_000, 2_000, seed=3)
TIMED_READ = sticky_entries(7_000, READ, seed=2)
BY_POSITION = {e[:2]: e for e in SECOND_READ + TIMED_READ}


def read_and_replay(d: Any) -> tuple[list[Any], list[Any]]:
    """One normal read, then a replay read of what the replay filter takes."""
    read = d.dispatch_read(TIMED_READ)
    replay = [BY_POSITION[p] for p in d.get_messages_to_replay_now(1_000)]
    return read, d.dispatch_read(replay, replay=True)


@pytest.mark.benchmark(group="sticky-dispatch-read")
@pytest.mark.parametrize("lib", ["keyshared", "python"])
def test_sticky_dispatch_read(benchmark: Any, lib: str) -> None:
    ours, peer = busy_sticky("keyshared"), busy_sticky("python")
    got, want = read_and_replay(ours), read_and_replay(peer)
    assert got == want  # the same result for every entry, checked before timing
    assert ours.redelivery.to_list() == peer.redelivery.to_list()
    held = sum(not r.delivered for r in got[0])
    assert 0 < held < READ, "the read should hold some entries back and send the rest"
    assert any(r.delivered for r in got[1]), "the replay read should send some entries"

    # Rounds are interleaved: the other variant runs before each round, so that both are
    # timed in the same stretches of a busy machine's time, and each pair gives a ratio.
    other = "python" if lib == "keyshared" else "keyshared"
    other_times: list[float] = []

    def setup() -> tuple[tuple[Any], dict[str, Any]]:
        theirs = busy_sticky(other)
        start = time.perf_counter()
        read_and_replay(theirs)
        other_times.append(time.perf_counter() - start)
        return (busy_sticky(lib),), {}

    benchmark.pedantic(read_and_replay, setup=setup, rounds=10, iterations=1)
    if lib == "keyshared":
        pairs = zip(other_times, benchmark.stats.stats.data, strict=True)
        benchmark.extra_info[PAIRED + "python"] = statistics.median(t / o for t, o in pairs)
    benchmark.extra_info["entries_per_read"] = READ
    benchmark.extra_info["held_in_read"] = held
    benchmark.extra_info["sent_in_replay"] = sum(r.delivered for r in got[1])
