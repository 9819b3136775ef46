"""Batch consumer selection on Pulsar's consistent-hashing ring against what a user would
write instead: a Python loop over a bisected point list, and NumPy's searchsorted. Each
peer builds its own ring from Pulsar's formula and must pick the same consumers."""

import bisect
from typing import Any

import mmh3
import numpy as np
import pytest

from keyshared import ConsistentHashingStickyKeyConsumerSelector

N = 1_000_000
CONSUMERS = 10
POINTS = 100


def point_hash(key: str) -> int:
    """Pulsar's makeStickyKeyHash over [1, 65535]."""
    return (mmh3.hash(key.encode(), 0, signed=False) & 0x7FFFFFFF) % 65535 + 1


class PyRing:
    """The ring as one would write it in Python: points of consumers named c0..c9 (name
    index 0), the first consumer on a point keeping it, bisect for the first point at or
    above a hash."""

    def __init__(self) -> None:
        owners: dict[int, int] = {}
        for c in range(CONSUMERS):
            for i in range(POINTS):
                owners.setdefault(point_hash(f"c{c}\0{0}\0{i}"), c)
        self.points = sorted(owners)
        self.owners = [owners[p] for p in self.points]

    def select(self, h: int) -> int:
        at = bisect.bisect_left(self.points, h)
        return self.owners[at if at < len(self.points) else 0]

    def select_many(self, hashes: list[int]) -> list[int]:
        return [self.select(h) for h in hashes]


@pytest.mark.benchmark(group="ring-select-batch")
@pytest.mark.parametrize("lib", ["keyshared", "python", "numpy"])
def test_ring_select_batch(benchmark: Any, lib: str) -> None:
    hashes = np.random.default_rng(5).integers(1, 0x10000, N, dtype=np.uint16)
    ring = PyRing()
    expected = ring.select_many(hashes.tolist())
    if lib == "keyshared":
        selector = ConsistentHashingStickyKeyConsumerSelector(POINTS)
        for c in range(CONSUMERS):
            selector.add_consumer(c, f"c{c}")
        picked = benchmark(selector.select_many, hashes)
    elif lib == "python":
        as_list = hashes.tolist()
        picked = benchmark(ring.select_many, as_list)
    else:
        points = np.array(ring.points, dtype=np.uint16)
        owners = np.array(ring.owners, dtype=np.uint64)
        picked = benchmark(
            lambda: owners[np.searchsorted(points, hashes, side="left") % len(points)]
        )
    assert np.asarray(picked).tolist() == expected
    benchmark.extra_info["hashes"] = N
