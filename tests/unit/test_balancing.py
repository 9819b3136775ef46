"""Traffic-balanced bucket boundaries from a hashB histogram."""

from itertools import combinations, pairwise

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import keyshared as ks
from keyshared import TopicLayout
from keyshared.scalable import balanced_splits, bucket_loads, hash_b_histogram, skew


def best_max_load(weights: list[float], n: int) -> float:
    """Brute force: the smallest heaviest bucket over every way to cut the bins in n."""
    best = float("inf")
    for cuts in combinations(range(1, len(weights)), n - 1):
        edges = [0, *cuts, len(weights)]
        best = min(best, max(sum(weights[a:b]) for a, b in pairwise(edges)))
    return best


def test_uniform_traffic_keeps_equal_width_buckets() -> None:
    result = balanced_splits(np.ones(65536), 4)
    assert result.bucket_splits == (0x4000, 0x8000, 0xC000)
    assert result.skew_before == result.skew_after == 1.0
    assert result.loads_after == (16384.0,) * 4


def test_a_hot_range_gets_narrow_buckets() -> None:
    weights = np.ones(256)
    weights[:64] = 10.0  # a quarter of the ring carries most of the traffic
    result = balanced_splits(weights, 4)
    assert result.skew_before > 2.0
    assert result.skew_after < 1.2
    assert all(s % 256 == 0 for s in result.bucket_splits)
    assert result.bucket_splits[0] < 0x4000
    assert sum(result.loads_after) == pytest.approx(weights.sum())


def test_no_traffic_gives_equal_width_on_bin_edges() -> None:
    result = balanced_splits(np.zeros(16), 4)
    assert result.bucket_splits == (0x4000, 0x8000, 0xC000)
    assert result.skew_before == result.skew_after == 1.0


def test_before_is_measured_under_the_current_splits() -> None:
    weights = np.ones(65536)
    result = balanced_splits(weights, 2, current_splits=[0x1000])
    assert result.loads_before == (4096.0, 61440.0)
    assert result.skew_after == 1.0


def test_single_bucket_and_one_bucket_per_bin() -> None:
    assert balanced_splits(np.arange(8.0), 1).bucket_splits == ()
    assert balanced_splits(np.arange(8.0), 8).bucket_splits == tuple(range(8192, 65536, 8192))


@given(
    st.lists(st.integers(0, 20), min_size=8, max_size=8).map(lambda w: [float(x) for x in w]),
    st.integers(1, 8),
)
def test_the_heaviest_bucket_is_as_light_as_possible(weights: list[float], n: int) -> None:
    result = balanced_splits(np.array(weights), n)
    assert max(result.loads_after) == pytest.approx(best_max_load(weights, n))
    assert result.skew_after <= result.skew_before + 1e-9


@given(
    st.sampled_from([1, 4, 64, 1024]).flatmap(
        lambda bins: st.tuples(
            st.lists(st.floats(0, 1e6), min_size=bins, max_size=bins),
            st.integers(1, min(bins, 40)),
        )
    )
)
def test_splits_are_valid_for_a_segment(case: tuple) -> None:
    weights, n = case
    result = balanced_splits(np.array(weights), n)
    splits = list(result.bucket_splits)
    assert len(splits) == n - 1 and splits == sorted(set(splits))
    assert all(1 <= s <= 0xFFFF for s in splits)
    assert len(result.loads_after) == n
    assert sum(result.loads_after) == pytest.approx(sum(weights), rel=1e-9, abs=1e-6)
    layout = TopicLayout.initial(1, bucket_budget=1)
    if n > 1:
        layout.rebucket_segment(0, n, 0, bucket_splits=splits)


def test_histogram_from_hashes_and_weights() -> None:
    hb = np.array([0, 1, 255, 256, 0xFFFF], dtype=np.uint16)
    assert hash_b_histogram(hb, bins=256)[:2].tolist() == [3.0, 1.0]
    assert hash_b_histogram(hb, weights=[1, 2, 3, 4, 5], bins=256)[255] == 5.0
    full = hash_b_histogram(hb)
    assert full.shape == (65536,) and full[0xFFFF] == 1.0 and full.sum() == 5
    _, keys_hb = ks.split_hashes([f"k{i}" for i in range(1000)])
    assert hash_b_histogram(keys_hb, bins=16).sum() == 1000


def test_bucket_loads_and_skew() -> None:
    weights = np.arange(4.0)  # bins of 16384 hashes
    assert bucket_loads(weights, [0x8000]).tolist() == [1.0, 5.0]
    assert skew([1.0, 5.0]) == pytest.approx(5 / 3)
    assert skew([0.0, 0.0]) == 1.0


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: balanced_splits(np.ones(3), 2), ValueError, "bins must be a power of two"),
        (lambda: balanced_splits(np.ones(4), 5), ValueError, "bucket_count"),
        (lambda: balanced_splits(np.ones(4), 0), ValueError, "bucket_count"),
        (
            lambda: balanced_splits(np.array([1, np.nan, 1, 1]), 2),
            ValueError,
            r"finite \(index 1\)",
        ),
        (lambda: balanced_splits(np.array([1, 1, -1, 1]), 2), ValueError, r"negative \(index 2\)"),
        (lambda: balanced_splits(np.ones((2, 2)), 2), TypeError, "one-dimensional"),
        (lambda: balanced_splits(np.array(["a", "b"]), 2), TypeError, "array of real numbers"),
        (lambda: hash_b_histogram([1, 2], bins=3), ValueError, "bins"),
        (lambda: hash_b_histogram([1, 70000]), ValueError, "hash_b"),
        (lambda: hash_b_histogram([1.5]), TypeError, "hash_b"),
        (lambda: hash_b_histogram([1, 2], weights=[1]), ValueError, "weights"),
    ],
)
def test_bad_input_is_refused(call: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()  # type: ignore[operator]
