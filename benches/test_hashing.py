"""Hashing and bucketing kernels against the peers a user would otherwise pick."""

import bisect
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import limits
import mmh3
import numpy as np
import pairing
import polars as pl
import pyarrow as pa
import pytest
from ratios import CPU_NS, KEYS, PAIRED

import keyshared as ks

KEY_HASH_ROUNDS = 50
SPLITS = sorted({(i * 7919 * 7) % 0xFFFE + 2 for i in range(63)})  # unequal, 63 splits, all >= 2


def mmh3_split(keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    hashes = np.fromiter((mmh3.hash(k, signed=False) for k in keys), np.uint32, len(keys))
    return (hashes >> 16).astype(np.uint16), (hashes & 0xFFFF).astype(np.uint16)


def assert_same(got: object, expected: object) -> None:
    """A peer's answer equals keyshared's, array by array; checked before any timing."""
    got_parts = got if isinstance(got, tuple) else (got,)
    expected_parts = expected if isinstance(expected, tuple) else (expected,)
    assert len(got_parts) == len(expected_parts)
    for g, e in zip(got_parts, expected_parts, strict=True):
        assert np.array_equal(np.asarray(g), np.asarray(e))


@pytest.mark.benchmark(group="hash-split-arrow")
@pytest.mark.parametrize("lib", ["keyshared", "mmh3-loop", "polars"])
def test_hash_split_arrow(benchmark: Any, lib: str, key_arrow: pa.Array, key_list: list) -> None:
    series = pl.Series(key_arrow)
    run: Callable[[], object] = {
        "keyshared": lambda: ks.split_hashes(key_arrow),
        "mmh3-loop": lambda: mmh3_split(key_list),
        "polars": series.hash,
    }[lib]
    if lib == "polars":
        # polars has no MurmurHash3: it stands for "hash a column natively" and is held to
        # one 64-bit hash per key, not to keyshared's values.
        assert len(run()) == len(key_arrow)  # type: ignore[arg-type]
    else:
        assert_same(run(), ks.split_hashes(key_arrow))
    benchmark(run)


@pytest.mark.benchmark(group="hash-list")
@pytest.mark.parametrize("lib", ["keyshared", "mmh3-loop"])
def test_hash_python_list(benchmark: Any, lib: str, key_list: list[str]) -> None:
    run: Callable[[], object] = {
        "keyshared": lambda: ks.key_hashes(key_list),
        "mmh3-loop": lambda: np.fromiter(
            (mmh3.hash(k, signed=False) for k in key_list), np.uint32, len(key_list)
        ),
    }[lib]
    assert_same(run(), ks.key_hashes(key_list))
    benchmark(run)


@pytest.mark.benchmark(group="hash-numpy-unicode")
@pytest.mark.parametrize("lib", ["keyshared", "mmh3-loop"])
def test_hash_numpy_unicode(benchmark: Any, lib: str, key_list: list[str]) -> None:
    # NumPy "U" arrays hold UTF-32: keyshared encodes each item to UTF-8 natively.
    keys = np.array(key_list)
    run: Callable[[], object] = {
        "keyshared": lambda: ks.key_hashes(keys),
        "mmh3-loop": lambda: np.fromiter(
            (mmh3.hash(k, signed=False) for k in keys.tolist()), np.uint32, len(keys)
        ),
    }[lib]
    assert_same(run(), ks.key_hashes(key_list))
    benchmark(run)


@pytest.mark.benchmark(group="bucket-index")
@pytest.mark.parametrize("lib", ["keyshared", "bisect-loop", "numpy-searchsorted"])
def test_bucket_index(benchmark: Any, lib: str) -> None:
    hash_b = np.random.default_rng(3).integers(0, 0x10000, 1_000_000, dtype=np.uint16)
    as_list = hash_b.tolist()
    splits = np.array(SPLITS)
    run: Callable[[], object] = {
        "keyshared": lambda: ks.routing.bucket_indices(hash_b, SPLITS),
        "bisect-loop": lambda: [bisect.bisect_right(SPLITS, h) for h in as_list],
        "numpy-searchsorted": lambda: np.searchsorted(splits, hash_b, side="right"),
    }[lib]
    assert_same(run(), ks.routing.bucket_indices(hash_b, SPLITS))
    benchmark(run)


@pytest.mark.benchmark(group="route-arrow")
@pytest.mark.parametrize("lib", ["keyshared", "mmh3-bisect-loop"])
def test_route_arrow(benchmark: Any, lib: str, key_arrow: pa.Array, key_list: list) -> None:
    segments = [(i, ks.HashRange(i << 12, (i << 12) | 0xFFF), SPLITS[:3]) for i in range(16)]
    table = ks.RoutingTable(segments)
    starts = [r.start for _, r, _ in segments]

    def loop() -> list[tuple[int, int]]:
        out = []
        for k in key_list:
            h = mmh3.hash(k, signed=False)
            seg = bisect.bisect_right(starts, h >> 16) - 1
            out.append((seg, bisect.bisect_right(SPLITS[:3], h & 0xFFFF)))
        return out

    run: Callable[[], object] = {
        "keyshared": lambda: table.route_keys(key_arrow),
        "mmh3-bisect-loop": lambda: tuple(np.array(loop()).T),
    }[lib]
    assert_same(run(), table.route_keys(key_arrow))
    benchmark(run)


@pytest.mark.benchmark(group="key-hashes-arrow-1thread")
@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("lib", ["keyshared"])
def test_key_hashes_arrow_one_thread(benchmark: Any, lib: str, fixed_keys: list[str]) -> None:
    """key_hashes of 1M keys of 23 bytes from Arrow on one core: benches/ratios.py holds its
    median per key to a ceiling."""
    arrow = pa.array(fixed_keys, pa.string())
    expected = np.fromiter((mmh3.hash(k, signed=False) for k in fixed_keys), np.uint32)
    assert_same(ks.key_hashes(arrow), expected)
    cpu: list[int] = []

    def run() -> None:
        start = time.process_time_ns()
        ks.key_hashes(arrow)
        cpu.append(time.process_time_ns() - start)

    benchmark.pedantic(run, rounds=KEY_HASH_ROUNDS, iterations=1, warmup_rounds=2)
    benchmark.extra_info[KEYS] = len(fixed_keys)
    # The ceiling checks the CPU time, which a machine's other work does not stretch.
    benchmark.extra_info[CPU_NS] = round(statistics.median(cpu) / len(fixed_keys), 2)


#: Keys of the thread-scaling group: 16M keys of 23 bytes, 432 MB of Arrow data and offsets,
#: far more than any cache.
SCALING_KEYS = 16_000_000
#: About as long as one thread hashing SCALING_KEYS.
SPIN_STEPS = 50_000_000
#: The many-core check runs where this many cores are there to use.
MANY = 16


def thread_counts() -> list[int]:
    cores = len(os.sched_getaffinity(0))
    return [1, 2] + ([MANY] if cores >= MANY else [])


@pytest.fixture(scope="module")
def scaling_keys(fixed_keys: list[str]) -> pa.Array:
    """SCALING_KEYS keys: `fixed_keys` over and over (hashing does not care that they
    repeat; memory holds every copy)."""
    one = pa.array(fixed_keys, pa.string())
    return pa.concat_arrays([one] * (SCALING_KEYS // len(one)))


@pytest.mark.benchmark(group="key-hashes-threads")
@pytest.mark.parametrize("threads", thread_counts())
@pytest.mark.parametrize("lib", ["keyshared", "read", "spin"])
def test_key_hashes_thread_scaling(
    benchmark: Any, lib: str, threads: int, scaling_keys: pa.Array
) -> None:
    """key_hashes of 16M Arrow keys on 1, 2 and (where there are that many cores) 16
    threads, beside two limits (benches/limits.c): the memory's, a parallel read of the same
    bytes (the keys and their offsets) that hashes nothing, and the cores', a fixed amount of
    work that touches no memory split over the same threads."""

    def on(n: int) -> Callable[[], object]:
        return {
            "keyshared": lambda: ks.key_hashes(scaling_keys, threads=n),
            "read": lambda: limits.read_arrow(scaling_keys, n),
            "spin": lambda: limits.spin(SPIN_STEPS, n),
        }[lib]

    run, one = on(threads), on(1)
    # The same answer on any thread count (spin's depends on its split, and it reads nothing).
    if lib == "keyshared":
        assert_same(run(), one())
    elif lib == "read":
        assert run() == one()
    if threads == 1:
        benchmark.pedantic(run, rounds=7, iterations=1, warmup_rounds=1)
    else:
        # Each round just after a round on one thread: the speedup the floor reads is the
        # median over those pairs, which a host's slow stretch moves far less than a ratio
        # of two medians taken a minute apart.
        ratio, _ = pairing.paired(benchmark, run, one, rounds=7, warmup_rounds=1)
        benchmark.extra_info[PAIRED + f"{lib}-1-thread"] = round(ratio, 3)
    benchmark.extra_info["lib"] = f"{lib}-{threads}-thread{'s' if threads > 1 else ''}"
    benchmark.extra_info[KEYS] = len(scaling_keys)
