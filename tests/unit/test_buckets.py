"""Hash ranges and entry buckets (SPEC 2) against a plain-Python reading of the formulas."""

import bisect
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import keyshared as ks
from keyshared import HashRange

hashes = st.integers(0, 0xFFFF)
# Bucket 0 spans at least [0, 1], so the first split is 2 or more (SPEC 2).
split_lists = st.lists(st.integers(2, 0xFFFF), unique=True, max_size=40).map(sorted)


@st.composite
def ranges(draw: st.DrawFn) -> HashRange:
    a, b = sorted((draw(hashes), draw(hashes)))
    return HashRange(a, b)


def test_range_basics() -> None:
    r = HashRange(0x0A0B, 0xF0F0)
    assert (r.start, r.end, r.size) == (0x0A0B, 0xF0F0, 0xF0F0 - 0x0A0B + 1)
    assert str(r) == r.to_hex() == "0a0b-f0f0"
    assert repr(r) == "HashRange(0x0a0b, 0xf0f0)"
    assert HashRange.from_hex("0A0B-F0F0") == r
    assert HashRange.full() == HashRange(0, 0xFFFF)
    assert HashRange.full().size == 65536
    assert pickle.loads(pickle.dumps(r)) == r
    assert len({r, HashRange(0x0A0B, 0xF0F0)}) == 1
    assert sorted([HashRange(5, 9), HashRange(0, 4)])[0] == HashRange(0, 4)


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (-1, 5, "start must be a 16-bit hash"),
        (0, 0x10000, "end must be a 16-bit hash"),
        (6, 5, "must not be above end"),
        (2**70, 1, "start = .* is outside the range of a long"),
    ],
)
def test_range_bounds(start: int, end: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        HashRange(start, end)


def test_range_argument_types() -> None:
    with pytest.raises(TypeError, match="start must be an int, got str"):
        HashRange("0", 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="end must be an int, got float"):
        HashRange(0, 5.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["", "0a0b", "0a0b-f0f", "0a0b-f0f0-1", "f0f0-0a0b", "0x0a-0b0c"])
def test_bad_hex(text: str) -> None:
    with pytest.raises(ValueError):
        HashRange.from_hex(text)


@given(ranges())
def test_split_halves(r: HashRange) -> None:
    if r.size == 1:
        with pytest.raises(ValueError, match="cannot be split"):
            r.split()
        return
    low, high = r.split()
    mid = r.start + (r.end - r.start) // 2
    assert (low, high) == (HashRange(r.start, mid), HashRange(mid + 1, r.end))
    assert low.is_adjacent_to(high) and high.is_adjacent_to(low)
    assert low.merge(high) == high.merge(low) == r
    assert r.contains(low) and high in r


@given(ranges(), ranges())
def test_adjacency_and_merge(a: HashRange, b: HashRange) -> None:
    adjacent = a.end + 1 == b.start or b.end + 1 == a.start
    assert a.is_adjacent_to(b) == adjacent
    if adjacent:
        assert a.merge(b) == HashRange(min(a.start, b.start), max(a.end, b.end))
    else:
        with pytest.raises(ValueError, match="not adjacent"):
            a.merge(b)


@given(ranges(), hashes)
def test_contains(r: HashRange, h: int) -> None:
    assert r.contains(h) == (r.start <= h <= r.end) == (h in r)


def test_contains_rejects_out_of_ring_hashes() -> None:
    with pytest.raises(ValueError, match="hash must be a 16-bit hash"):
        HashRange.full().contains(0x10000)


def test_equal_width_splits() -> None:
    assert ks.routing.equal_width_splits(0) == []
    assert ks.routing.equal_width_splits(1) == []
    assert ks.routing.equal_width_splits(3) == [21845, 43690]
    assert ks.routing.equal_width_splits(4) == [0x4000, 0x8000, 0xC000]
    with pytest.raises(ValueError, match="must not be negative"):
        ks.routing.equal_width_splits(-1)
    # Clamped at 65,536 buckets, with bucket 0 kept at [0, 1]: 65,535 buckets at most.
    most = ks.routing.equal_width_splits(65536)
    assert most == list(range(2, 65536))
    assert ks.routing.equal_width_splits(65537) == ks.routing.equal_width_splits(2**62) == most


@given(st.integers(2, 32768))
def test_equal_width_splits_formula(n: int) -> None:
    assert ks.routing.equal_width_splits(n) == [i * 65536 // n for i in range(1, n)]


@given(st.integers(32769, 2**40))
def test_equal_width_splits_above_32768_buckets_keep_bucket_zero_two_wide(n: int) -> None:
    formula = [i * 65536 // min(n, 65536) for i in range(1, min(n, 65536))]
    assert formula[0] == 1
    splits = ks.routing.equal_width_splits(n)
    assert splits == formula[1:]
    assert ks.routing.bucket_ranges(splits)[0] == HashRange(0, splits[0] - 1)
    assert ks.routing.canonical_bucket_hash(0, splits) != ks.routing.canonical_bucket_hash(
        1, splits
    )


@given(split_lists)
def test_bucket_ranges_tile_the_ring(splits: list[int]) -> None:
    got = ks.routing.bucket_ranges(splits)
    starts = [0, *splits]
    ends = [s - 1 for s in splits] + [0xFFFF]
    assert got == [HashRange(a, b) for a, b in zip(starts, ends, strict=True)]
    assert sum(r.size for r in got) == 65536


@given(hashes, split_lists)
def test_bucket_index_counts_splits_at_or_below(h: int, splits: list[int]) -> None:
    i = ks.bucket_index(h, splits)
    assert i == bisect.bisect_right(splits, h)
    assert h in ks.routing.bucket_ranges(splits)[i]


@given(st.lists(hashes, max_size=200), split_lists)
def test_bucket_indices_batch(hs: list[int], splits: list[int]) -> None:
    want = [bisect.bisect_right(splits, h) for h in hs]
    for dtype in (np.uint16, np.int64, np.uint32, np.int32):
        got = ks.routing.bucket_indices(np.array(hs, dtype=dtype), splits)
        assert got.dtype == np.int32
        assert got.tolist() == want
    assert (
        ks.routing.bucket_indices(np.array(hs, dtype=np.uint16), np.array(splits)).tolist() == want
    )
    assert ks.routing.bucket_indices(hs, splits).tolist() == want


def test_bucket_indices_bad_input() -> None:
    with pytest.raises(ValueError, match=r"hash_b\[1\] = 70000 is outside \[0, 65535\]"):
        ks.routing.bucket_indices(np.array([1, 70000]), [])
    with pytest.raises(ValueError, match=r"hash_b\[0\] = -1"):
        ks.routing.bucket_indices(np.array([-1]), [])
    with pytest.raises(TypeError, match=r"hash_b\[0\] must be an int, got str"):
        ks.routing.bucket_indices(["a"], [])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dtype float64"):
        ks.routing.bucket_indices(np.array([1.0]), [])
    with pytest.raises(TypeError, match="2 dimensions"):
        ks.routing.bucket_indices(np.zeros((2, 2), dtype=np.uint16), [])


@pytest.mark.parametrize(
    ("splits", "message"),
    [
        ([0], r"splits\[0\] = 0 is outside"),
        ([1], r"splits\[0\] = 1 leaves bucket 0 narrower than \[0, 1\]"),
        ([1, 0x8000], "the first split must be at least 2"),
        ([5, 0x10000], r"splits\[1\] = 65536 is outside"),
        ([5, 5], "strictly ascending"),
        ([9, 5], "strictly ascending"),
        ([-3], "outside"),
    ],
)
def test_bad_splits(splits: list[int], message: str) -> None:
    for call in (
        lambda: ks.bucket_index(1, splits),
        lambda: ks.routing.bucket_ranges(splits),
        lambda: ks.routing.entry_bucket(1, 1, splits),
        lambda: ks.routing.canonical_bucket_hash(0, splits),
        lambda: ks.routing.bucket_indices(np.array([1]), splits),
    ):
        with pytest.raises(ValueError, match=message):
            call()


def test_splits_must_be_int_sequences() -> None:
    with pytest.raises(TypeError, match="sequence of ints, got str"):
        ks.bucket_index(1, "12")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sequence of ints, got int"):
        ks.bucket_index(1, 12)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"splits\[1\] must be an int"):
        ks.bucket_index(1, [3, "4"])  # type: ignore[list-item]


def test_bucket_index_bad_hash() -> None:
    with pytest.raises(ValueError, match="hash_b must be a 16-bit hash"):
        ks.bucket_index(0x10000, [])
    with pytest.raises(TypeError, match="hash_b must be an int"):
        ks.bucket_index(None, [])  # type: ignore[arg-type]


@given(hashes, hashes, split_lists)
def test_entry_bucket(a: int, b: int, splits: list[int]) -> None:
    lo, hi = sorted((a, b))
    first, last = bisect.bisect_right(splits, lo), bisect.bisect_right(splits, hi)
    if first == last:
        assert ks.routing.entry_bucket(lo, hi, splits) == first
    else:
        with pytest.raises(ValueError, match="straddles the bucket boundary"):
            ks.routing.entry_bucket(lo, hi, splits)


def test_entry_bucket_edges() -> None:
    splits = [0x4000, 0x8000]
    assert ks.routing.entry_bucket(0x4000, 0x7FFF, splits) == 1
    with pytest.raises(ValueError, match="straddles the bucket boundary at 0x4000"):
        ks.routing.entry_bucket(0x3FFF, 0x4000, splits)
    with pytest.raises(ValueError, match="must not be above entry_hash_max"):
        ks.routing.entry_bucket(9, 8, splits)
    with pytest.raises(ValueError, match="entry_hash_max must be a 16-bit hash"):
        ks.routing.entry_bucket(0, 0x10000, splits)


def test_canonical_bucket_hash() -> None:
    splits = [0x4000, 0x8000]
    assert [ks.routing.canonical_bucket_hash(i, splits) for i in range(3)] == [1, 0x4000, 0x8000]
    assert ks.routing.canonical_bucket_hash(0, []) == 1
    for bad in (-1, 3):
        with pytest.raises(ValueError, match=r"bucket index .* is outside \[0, 2\]"):
            ks.routing.canonical_bucket_hash(bad, splits)


@given(st.integers(0, 10_000), st.integers(1, 10_000))
def test_buckets_for_budget(budget: int, segments: int) -> None:
    assert ks.routing.buckets_for_budget(budget, segments) == max(1, budget // segments)


def test_buckets_for_budget_bad_input() -> None:
    with pytest.raises(ValueError, match="budget must not be negative"):
        ks.routing.buckets_for_budget(-1, 1)
    with pytest.raises(ValueError, match="segment count must be at least 1"):
        ks.routing.buckets_for_budget(4, 0)


def test_the_first_split_is_at_least_min_first_split() -> None:
    assert ks.routing.MIN_FIRST_SPLIT == 2
    assert ks.routing.bucket_ranges([ks.routing.MIN_FIRST_SPLIT])[0] == HashRange(0, 1)
    with pytest.raises(ValueError, match="at least 2"):
        ks.routing.bucket_ranges([ks.routing.MIN_FIRST_SPLIT - 1])


def test_a_layout_refuses_a_bucket_zero_one_hash_wide() -> None:
    from keyshared import TopicLayout

    layout = TopicLayout.initial(1, bucket_budget=2)
    with pytest.raises(ValueError, match=r"^bucket_splits\[0\] = 1 leaves bucket 0"):
        layout.rebucket_segment(layout.segments[0].segment_id, 3, 1, bucket_splits=[1, 0x8000])
