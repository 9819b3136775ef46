"""PIP-486's entry-bucket selector and dispatcher against the pure-Python (and NumPy) code a
user would write instead: batch bucket-owner selection, and dispatch decisions per second."""

import bisect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from keyshared import EntryBucketDispatcher
from keyshared.routing import equal_width_splits
from keyshared.scalable import EntryBucketConsumerSelector

N = 1_000_000
BUCKETS = 256
CONSUMERS = 10
SPLITS = equal_width_splits(BUCKETS)


def selector() -> EntryBucketConsumerSelector:
    s = EntryBucketConsumerSelector(SPLITS)
    for i in range(CONSUMERS):
        s.add_consumer(i, f"consumer-{i}")
    return s


def python_select_many(starts: list[int], owners: list[int], hashes: list[int]) -> list[int]:
    """Owner of each hash's bucket: the number of splits at or below it, by bisection."""
    return [owners[bisect.bisect_right(starts, h) - 1] for h in hashes]


@pytest.mark.benchmark(group="entry-bucket-select-batch")
@pytest.mark.parametrize("lib", ["keyshared", "python", "numpy"])
def test_entry_bucket_select_batch(benchmark: Any, lib: str) -> None:
    hashes = np.random.default_rng(5).integers(0, 0x10000, N, dtype=np.uint16)
    s = selector()
    owners = s.bucket_owners()
    starts = [0, *SPLITS]
    want = s.select_many(hashes)
    run: Callable[[], Any]
    if lib == "keyshared":
        run = lambda: s.select_many(hashes)  # noqa: E731
    elif lib == "python":
        as_list = hashes.tolist()
        run = lambda: python_select_many(starts, owners, as_list)  # noqa: E731
    else:
        owner_array, split_array = np.array(owners, dtype=np.uint64), np.array(SPLITS)
        run = lambda: owner_array[np.searchsorted(split_array, hashes, side="right")]  # noqa: E731
    assert np.array_equal(np.asarray(run(), dtype=np.uint64), want)
    benchmark(run)


class PyEntryBucketDispatcher:
    """The entry-bucket dispatch decision as one would write it in Python: the owner of the
    entry's bucket, unless another consumer still drains the bucket."""

    def __init__(self, starts: list[int], owners: list[int]) -> None:
        self.starts, self.owners = starts, owners
        self.draining: dict[int, int] = {}
        self.pending: dict[int, dict[tuple[int, int], int]] = {c: {} for c in set(owners)}

    def dispatch(self, ledger_id: int, entry_id: int, entry_hash_min: int) -> int | None:
        bucket = bisect.bisect_right(self.starts, entry_hash_min) - 1
        canonical = max(self.starts[bucket], 1)
        consumer = self.owners[bucket]
        drainer = self.draining.get(canonical)
        if drainer is not None:
            if drainer != consumer:
                return None
            del self.draining[canonical]
        self.pending[consumer][(ledger_id, entry_id)] = canonical
        return consumer


ENTRIES = 20_000


@pytest.mark.benchmark(group="entry-bucket-dispatch")
@pytest.mark.parametrize("lib", ["keyshared", "python"])
def test_entry_bucket_dispatch_decisions(benchmark: Any, lib: str) -> None:
    hash_mins = np.random.default_rng(9).integers(0, 0x10000, ENTRIES).tolist()

    def setup() -> tuple[tuple[Any], dict[str, Any]]:
        d: Any
        if lib == "keyshared":
            d = EntryBucketDispatcher(SPLITS)
            for i in range(CONSUMERS):
                d.add_consumer(i, f"consumer-{i}")
        else:
            d = PyEntryBucketDispatcher([0, *SPLITS], selector().bucket_owners())
        return (d,), {}

    def run(d: Any) -> list[int | None]:
        if lib == "keyshared":
            return [d.dispatch(1, i, entry_hash_min=h) for i, h in enumerate(hash_mins)]
        return [d.dispatch(1, i, h) for i, h in enumerate(hash_mins)]

    (reference,), _ = setup()
    ours = EntryBucketDispatcher(SPLITS)
    for i in range(CONSUMERS):
        ours.add_consumer(i, f"consumer-{i}")
    assert run(reference) == [
        ours.dispatch(1, i, entry_hash_min=h) for i, h in enumerate(hash_mins)
    ]
    benchmark.pedantic(run, setup=setup, rounds=5, iterations=1)
    benchmark.extra_info["decisions_per_second"] = round(ENTRIES / benchmark.stats.stats.median)


@pytest.mark.benchmark(group="entry-bucket-dispatch-batch")
@pytest.mark.parametrize("lib", ["keyshared", "python"])
def test_entry_bucket_dispatch_batch(benchmark: Any, lib: str) -> None:
    hash_mins = np.random.default_rng(9).integers(0, 0x10000, ENTRIES)
    ledgers, entries = np.ones(ENTRIES, dtype=np.int64), np.arange(ENTRIES, dtype=np.int64)
    as_list = hash_mins.tolist()

    def setup() -> tuple[tuple[Any], dict[str, Any]]:
        d: Any
        if lib == "keyshared":
            d = EntryBucketDispatcher(SPLITS)
            for i in range(CONSUMERS):
                d.add_consumer(i, f"consumer-{i}")
        else:
            d = PyEntryBucketDispatcher([0, *SPLITS], selector().bucket_owners())
        return (d,), {}

    def run(d: Any) -> Any:
        if lib == "keyshared":
            return d.dispatch_many(ledgers, entries, hash_mins)
        return [d.dispatch(1, i, h) for i, h in enumerate(as_list)]

    ours = EntryBucketDispatcher(SPLITS)
    for i in range(CONSUMERS):
        ours.add_consumer(i, f"consumer-{i}")
    consumers, sent = ours.dispatch_many(ledgers, entries, hash_mins)
    reference = PyEntryBucketDispatcher([0, *SPLITS], selector().bucket_owners())
    want = [reference.dispatch(1, i, h) for i, h in enumerate(as_list)]
    assert [int(c) if s else None for c, s in zip(consumers, sent, strict=True)] == want
    benchmark.pedantic(run, setup=setup, rounds=5, iterations=1)
    benchmark.extra_info["decisions_per_second"] = round(ENTRIES / benchmark.stats.stats.median)
