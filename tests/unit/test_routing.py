"""One-pass routing of keys to (segment id, bucket index) under active segments."""

import bisect
import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import keyshared as ks
from keyshared import HashRange, RoutingTable


@st.composite
def tilings(draw: st.DrawFn) -> list[tuple[int, HashRange, list[int]]]:
    cuts = sorted(draw(st.lists(st.integers(1, 0xFFFF), unique=True, max_size=12)))
    starts, ends = [0, *cuts], [c - 1 for c in cuts] + [0xFFFF]
    ids = draw(st.permutations(range(100, 100 + len(starts))))
    split_st = st.lists(st.integers(2, 0xFFFF), unique=True, max_size=8).map(sorted)
    return [
        (ids[i], HashRange(a, b), draw(split_st))
        for i, (a, b) in enumerate(zip(starts, ends, strict=True))
    ]


def reference(segments: list[tuple[int, HashRange, list[int]]], h: int) -> tuple[int, int]:
    for seg_id, r, splits in segments:
        if h >> 16 in r:
            return seg_id, bisect.bisect_right(splits, h & 0xFFFF)
    raise AssertionError("no segment")


@given(tilings(), st.lists(st.text(max_size=12), max_size=50))
def test_routes_match_the_formula(segments: list, keys: list[str]) -> None:
    table = RoutingTable(reversed(segments))
    want = [reference(segments, ks.key_hash(k)) for k in keys]
    assert [table.route(k) for k in keys] == want
    ids, buckets = table.route_keys(keys)
    assert ids.dtype == np.int64 and buckets.dtype == np.int32
    assert list(zip(ids.tolist(), buckets.tolist(), strict=True)) == want
    ids2, buckets2 = table.route_hashes(ks.key_hashes(pa.array(keys, pa.large_string())))
    assert ids2.tolist() == ids.tolist() and buckets2.tolist() == buckets.tolist()
    assert [table.route_hash(ks.key_hash(k)) for k in keys] == want


@given(tilings(), st.lists(st.text(max_size=12), max_size=30))
def test_a_pickled_table_routes_as_the_original(segments: list, keys: list[str]) -> None:
    table = RoutingTable(segments)
    copy = pickle.loads(pickle.dumps(table))
    assert copy == table and copy is not table
    assert copy.segments == table.segments
    assert [copy.route(k) for k in keys] == [table.route(k) for k in keys]


@given(tilings(), st.lists(st.integers(0, 2**32 - 1), max_size=60))
def test_bucket_ordinals_number_buckets_in_range_order(segments: list, hashes: list[int]) -> None:
    table = RoutingTable(segments)
    numbered = [(i, b) for i, _, splits in table.segments for b in range(len(splits) + 1)]
    assert table.bucket_count == len(numbered)
    ordinals = table.bucket_ordinals(np.array(hashes, dtype=np.uint32), threads=2)
    assert ordinals.dtype == np.uint32
    assert [numbered[o] for o in ordinals.tolist()] == [table.route_hash(h) for h in hashes]


def test_tables_are_equal_when_their_segments_are() -> None:
    a = RoutingTable([(0, HashRange(0, 0x7FFF), [9]), (1, HashRange(0x8000, 0xFFFF), [])])
    b = RoutingTable([(1, HashRange(0x8000, 0xFFFF), []), (0, HashRange(0, 0x7FFF), [9])])
    c = RoutingTable([(0, HashRange(0, 0x7FFF), [10]), (1, HashRange(0x8000, 0xFFFF), [])])
    assert a == b and a != c and a != "a table"


def test_ring_size_is_the_rings_hash_count() -> None:
    assert ks.routing.RING_SIZE == 0x10000 == ks.HashRange.full().size


def test_table_exposes_its_segments_in_range_order() -> None:
    table = RoutingTable([(1, HashRange(0x8000, 0xFFFF), []), (0, HashRange(0, 0x7FFF), [9])])
    assert len(table) == 2
    assert table.segments == [(0, HashRange(0, 0x7FFF), [9]), (1, HashRange(0x8000, 0xFFFF), [])]


def test_large_batch_over_threads() -> None:
    segments = [
        (i, HashRange(i * 0x1000, i * 0x1000 + 0xFFF), ks.routing.equal_width_splits(4))
        for i in range(16)
    ]
    table = RoutingTable(segments)
    keys = pa.array([f"order-{i}" for i in range(150_000)])
    one = table.route_keys(keys, threads=1)
    two = table.route_keys(keys, threads=2)
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])


@pytest.mark.parametrize(
    ("segments", "message"),
    [
        ([], "must tile"),
        ([(0, HashRange(0, 10), [])], "they end at 000a"),
        ([(0, HashRange(0, 10), []), (1, HashRange(12, 0xFFFF), [])], "leaves a gap"),
        ([(0, HashRange(0, 10), []), (1, HashRange(10, 0xFFFF), [])], "overlaps"),
        ([(0, HashRange(0, 10), []), (0, HashRange(11, 0xFFFF), [])], "more than once"),
        ([(-1, HashRange.full(), [])], r"segments\[0\] segment_id must be in \[0, 2\*\*64 - 1\]"),
        ([(0, HashRange.full(), [3, 2])], r"segments\[0\] bucket splits: .*ascending"),
    ],
)
def test_bad_tilings(segments: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RoutingTable(segments)


def test_bad_segment_shapes() -> None:
    with pytest.raises(TypeError, match=r"segments\[0\] must be a \(segment_id, HashRange"):
        RoutingTable([(0, (0, 0xFFFF), [])])
    with pytest.raises(TypeError, match=r"segments\[1\] must be"):
        RoutingTable([(0, HashRange(0, 5), []), "x"])


def test_bad_route_inputs() -> None:
    table = RoutingTable([(0, HashRange.full(), [])])
    with pytest.raises(ValueError, match="key_hash must be in"):
        table.route_hash(2**32)
    with pytest.raises(ValueError, match=r"key_hashes\[1\] = -2 is outside"):
        table.route_hashes(np.array([1, -2]))
    with pytest.raises(TypeError, match="key_hashes must be a one-dimensional array"):
        table.route_hashes(np.array([1.5]))
    assert table.route_hashes(np.array([1, 2]))[1].tolist() == [0, 0]
    with pytest.raises(ValueError, match=r"keys\[0\] is None"):
        table.route_keys([None])
    assert table.route_keys([None], null_key="hello")[1].tolist() == [0]


def test_segment_router_reads_an_iterator_of_segments_whole() -> None:
    """An iterator of segments routes as the list does: none is lost to the legacy check."""
    segments = ks.TopicLayout.initial(4).active_segments()
    router = ks.SegmentRouter()
    keys = [f"key-{i}" for i in range(200)]
    assert [router.route(k, iter(segments)) for k in keys] == [
        router.route(k, segments) for k in keys
    ]
    assert router.route_round_robin(iter(segments), 5) == router.route_round_robin(segments, 5)


@given(
    st.lists(st.one_of(st.binary(max_size=30), st.text(max_size=30), st.none()), max_size=80),
    st.sampled_from(["master", "5.0.0-M1"]),
)
def test_route_keys_with_hashes_is_one_pass_of_the_same_hashes(
    keys: list[bytes | str | None], release: str
) -> None:
    table = RoutingTable(
        [(1, HashRange(0x0000, 0x7FFF), [0x4000]), (2, HashRange(0x8000, 0xFFFF), [])], release
    )
    ids, buckets, hashes, high, low = table.route_keys(keys, null_key=b"nk", with_hashes=True)
    want_ids, want_buckets = table.route_keys(keys, null_key=b"nk")
    assert ids.tolist() == want_ids.tolist() and buckets.tolist() == want_buckets.tolist()
    assert hashes.dtype == np.uint32
    assert hashes.tolist() == ks.key_hashes(keys, null_key=b"nk").tolist()
    want_high, want_low = ks.split_hashes(keys, null_key=b"nk")
    assert high.tolist() == want_high.tolist() and low.tolist() == want_low.tolist()
    assert (high.dtype, low.dtype) == (np.uint16, np.uint16)
