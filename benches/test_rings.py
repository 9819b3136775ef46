"""Batch consumer selection on Pulsar's consistent-hashing ring against Pulsar's own selector
(jvm: ConsistentHashingStickyKeyConsumerSelector.select from the broker's jar, looped on one
thread and timed as benches/test_partitioners.py says) and what a user would write instead: a
Python loop over a bisected point list, and NumPy's searchsorted. Each peer builds its own
ring from Pulsar's formula and must pick the same consumers for the sticky key hashes of the
same 1M keys of 23 bytes."""

import bisect
from collections.abc import Callable
from typing import Any

import mmh3
import numpy as np
import pytest
from jvm import Loop, time_beside_jvm, time_jvm
from ratios import KEYS

import keyshared as ks
from keyshared import ConsistentHashingStickyKeyConsumerSelector

CONSUMERS = 10
POINTS = 100

pytestmark = pytest.mark.usefixtures("one_thread")


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
@pytest.mark.parametrize("lib", ["keyshared", "jvm", "python", "numpy"])
def test_ring_select_batch(
    benchmark: Any, lib: str, fixed_keys: list[str], jvm_loop: Callable[..., Loop]
) -> None:
    # The hashes are made once, outside the timing: every peer times select alone (the JVM
    # makes its own with the selector's makeStickyKeyHash).
    hashes = ks.routing.sticky_key_hashes(fixed_keys)
    ring = PyRing()
    expected = np.array(ring.select_many(hashes.tolist()))
    selector = ConsistentHashingStickyKeyConsumerSelector(POINTS)
    for c in range(CONSUMERS):
        selector.add_consumer(c, f"c{c}")
    assert np.array_equal(selector.select_many(hashes), expected)
    loop = jvm_loop("selector", consumers=CONSUMERS, number_of_points=POINTS)
    if lib == "keyshared":
        time_beside_jvm(benchmark, lambda: selector.select_many(hashes), loop, len(hashes))
        return
    if lib == "jvm":
        time_jvm(benchmark, loop, expected)
        return
    if lib == "python":
        as_list = hashes.tolist()
        picked = benchmark(ring.select_many, as_list)
    else:
        points = np.array(ring.points, dtype=np.uint16)
        owners = np.array(ring.owners, dtype=np.uint64)
        picked = benchmark(
            lambda: owners[np.searchsorted(points, hashes, side="left") % len(points)]
        )
    assert np.array_equal(np.asarray(picked), expected)
    benchmark.extra_info[KEYS] = len(hashes)
