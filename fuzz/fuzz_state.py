"""Coverage-guided fuzzing of the stateful kernels (atheris): the draining-hashes tracker,
pending acks wired to it, and the safe cursor, driven by random calls (valid and not)
against small Python models.

Every call either does what the model does or raises ValueError / TypeError / KeyError and
changes nothing; anything else (a panic, a divergence, state changed by a refused call) is
a finding.

    python fuzz/fuzz_state.py -runs=2000
    python fuzz/fuzz_state.py -max_total_time=600 corpus/state
"""

from __future__ import annotations

import sys
from typing import Any

import atheris
import numpy as np

with atheris.instrument_imports(include=["keyshared"]):
    import keyshared as ks

REFUSED = (ValueError, TypeError, KeyError)
BAD_INTS: list[Any] = [-1, 2**64, True, 1.5, "1", None]


def _int(fdp: atheris.FuzzedDataProvider, low: int, high: int) -> Any:
    """Usually an int in [low, high]; sometimes a value no call should take."""
    if fdp.ConsumeIntInRange(0, 15) == 0:
        return BAD_INTS[fdp.ConsumeIntInRange(0, len(BAD_INTS) - 1)]
    return fdp.ConsumeIntInRange(low, high)


def _valid(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


class TrackerModel:
    """hash -> [consumer, ref count], as PIP-379 defines the tracker."""

    def __init__(self) -> None:
        self.entries: dict[int, list[int]] = {}

    def add_entry(self, consumer: int, h: int) -> None:
        entry = self.entries.get(h)
        if h == 0 or (entry is not None and entry[0] != consumer):
            raise ValueError
        if entry is None:
            self.entries[h] = [consumer, 1]
        else:
            entry[1] += 1

    def reduce_ref_count(self, consumer: int, h: int) -> None:
        entry = self.entries.get(h)
        if entry is None:
            return
        if entry[0] != consumer:
            raise ValueError
        entry[1] -= 1
        if entry[1] == 0:
            del self.entries[h]

    def should_block(self, consumer: int, h: int) -> bool:
        entry = self.entries.get(h)
        if entry is None:
            return False
        if entry[0] == consumer:
            del self.entries[h]
            return False
        return True


def _snapshot(tracker: ks.DrainingHashesTracker, hashes: set[int]) -> dict[int, tuple[int, int]]:
    out = {}
    for h in hashes:
        entry = tracker.get_entry(h)
        if entry is not None:
            out[h] = (entry.consumer_id, entry.ref_count)
    return out


def fuzz_tracker(fdp: atheris.FuzzedDataProvider) -> None:
    tracker, model = ks.DrainingHashesTracker(), TrackerModel()
    seen: set[int] = set()
    for _ in range(fdp.ConsumeIntInRange(0, 60)):
        op = fdp.ConsumeIntInRange(0, 4)
        consumer, h = _int(fdp, 0, 3), _int(fdp, 0, 8)
        before = _snapshot(tracker, seen)
        valid = _valid(consumer, 0, 2**64 - 1) and _valid(h, 0, 0xFFFF)
        try:
            if op == 0:
                tracker.add_entry(consumer, h)
            elif op == 1:
                tracker.reduce_ref_count(consumer, h)
            elif op == 2:
                blocked = tracker.should_block_sticky_key_hash(consumer, h)
                assert valid and blocked == model.should_block(consumer, h)
            elif op == 3:
                hashes = [_int(fdp, 0, 8) for _ in range(fdp.ConsumeIntInRange(0, 5))]
                tracker.add_entries(consumer, hashes)
                assert valid or _valid(consumer, 0, 2**64 - 1)
                trial = TrackerModel()
                trial.entries = {k: list(v) for k, v in model.entries.items()}
                for x in hashes:
                    trial.add_entry(consumer, x)
                model.entries = trial.entries
                seen.update(hashes)
                continue
            else:
                tracker.clear()
                model.entries.clear()
                continue
        except REFUSED:
            assert _snapshot(tracker, seen) == before, "a refused call changed the tracker"
            if op in (0, 1) and valid:
                # The model must refuse it too.
                try:
                    (model.add_entry if op == 0 else model.reduce_ref_count)(consumer, h)
                except ValueError:
                    continue
                raise AssertionError(f"op {op}({consumer}, {h}) refused, model takes it") from None
            continue
        assert valid or op == 3, f"op {op} took ({consumer!r}, {h!r})"
        seen.add(h)
        if op == 0:
            model.add_entry(consumer, h)
        elif op == 1:
            model.reduce_ref_count(consumer, h)
        got = _snapshot(tracker, seen)
        assert got == {k: tuple(v) for k, v in model.entries.items()}, (got, model.entries)


def fuzz_cursor(fdp: atheris.FuzzedDataProvider) -> None:
    cursor = ks.SafeCursor(first_offset=0)
    acked: set[int] = set()
    position = -1
    for _ in range(fdp.ConsumeIntInRange(0, 40)):
        if fdp.ConsumeBool():
            items = [_int(fdp, 0, 40) for _ in range(fdp.ConsumeIntInRange(0, 6))]
            offsets: Any = items
            if fdp.ConsumeBool() and all(_valid(o, 0, 40) for o in items):
                offsets = np.array(items, dtype=np.uint64)
            call = lambda c=cursor, o=offsets: c.ack_many(o)  # noqa: E731
        else:
            offset = _int(fdp, 0, 40)
            call = lambda c=cursor, o=offset: c.ack(o)  # noqa: E731
            items = [offset]
        before = (cursor.position, cursor.pending)
        try:
            moved = call()
        except REFUSED:
            assert (cursor.position, cursor.pending) == before
            assert not all(_valid(o, 0, 2**63 - 1) for o in items), f"refused {items}"
            continue
        acked.update(items)
        start = position
        while position + 1 in acked:
            position += 1
        assert cursor.position == (None if position < 0 else position)
        assert moved == (position if position != start else None)


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    if fdp.ConsumeBool():
        fuzz_tracker(fdp)
    else:
        fuzz_cursor(fdp)


def main() -> None:
    # The harness's own branches (which container, which call, refused or not) guide the
    # search; the native kernels are not instrumented.
    for function in list(globals().values()):
        if getattr(function, "__module__", None) == __name__ and hasattr(function, "__code__"):
            atheris.instrument_func(function)
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
