"""Pulsar's SegmentRouterTest (V5 client), ported, with its legacy (mod-N) and keyless
(round-robin) cases, and differential tests against the ``mmh3`` package."""

from __future__ import annotations

import mmh3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keyshared import HashRange, SegmentRouter, TopicLayout, create_migrated_metadata
from keyshared._core import java_utf8
from keyshared.routing import ActiveSegment, sign_safe_mod


def seg(segment_id: int, start: int, end: int) -> ActiveSegment:
    return ActiveSegment(segment_id, HashRange(start, end), f"persistent://t/n/seg-{segment_id}")


def legacy_seg(segment_id: int, start: int, end: int, underlying: str) -> ActiveSegment:
    return ActiveSegment(
        segment_id, HashRange(start, end), f"segment://t/n/x/{segment_id}", underlying
    )


def find_key_in_range(start: int, end: int) -> str:
    for i in range(100_000):
        key = f"probe-{i}"
        if start <= SegmentRouter().hash(key) <= end:
            return key
    raise AssertionError(f"no key hashes into [{start}, {end}]")


# --- route(key, ...) --------------------------------------------------------------------------


def test_route_by_key_lands_on_correct_segment() -> None:
    router = SegmentRouter()
    segments = [
        seg(0, 0x0000, 0x3FFF),
        seg(1, 0x4000, 0x7FFF),
        seg(2, 0x8000, 0xBFFF),
        seg(3, 0xC000, 0xFFFF),
    ]
    for key in ["a", "b", "c", "d", "e", "f", "g", "order-42", "customer-99"]:
        segment_id = router.route(key, segments)
        picked = next(s for s in segments if s.segment_id == segment_id)
        assert picked.hash_range.contains(SegmentRouter().hash(key)), key


def test_route_by_key_is_deterministic() -> None:
    router = SegmentRouter()
    segments = [seg(0, 0x0000, 0x7FFF), seg(1, 0x8000, 0xFFFF)]
    first = router.route("stable-key", segments)
    assert all(router.route("stable-key", segments) == first for _ in range(20))


def test_route_with_single_segment_always_returns_that_segment() -> None:
    router = SegmentRouter()
    segments = [seg(0, 0x0000, 0xFFFF)]
    for key in ["a", "b", "zzzzzz", ""]:
        assert router.route(key, segments) == 0


def test_route_with_empty_list_throws() -> None:
    with pytest.raises(ValueError, match="no active segments"):
        SegmentRouter().route("k", [])


def test_route_with_incomplete_coverage_throws_for_uncovered_hash() -> None:
    uncovered = find_key_in_range(0x8000, 0xFFFF)
    with pytest.raises(ValueError, match="no active segment covers"):
        SegmentRouter().route(uncovered, [seg(0, 0x0000, 0x7FFF)])


# --- routeRoundRobin --------------------------------------------------------------------------


def test_round_robin_cycles_through_segments() -> None:
    router = SegmentRouter()
    segments = [seg(0, 0, 0x3FFF), seg(1, 0x4000, 0x7FFF), seg(2, 0x8000, 0xBFFF)]
    counter = 0
    picks = []
    for _ in range(4):
        segment_id, counter = router.route_round_robin(segments, counter)
        picks.append(segment_id)
    assert len(set(picks[:3])) == 3
    assert picks[3] == picks[0]


def test_round_robin_with_empty_list_throws() -> None:
    with pytest.raises(ValueError, match="no active segments"):
        SegmentRouter().route_round_robin([], 0)


# --- mod-N routing for synthetic layouts (all legacy segments) ---------------------------------


def test_all_legacy_segments_route_mod_n() -> None:
    router = SegmentRouter()
    n = 4
    segments = [
        legacy_seg(0, 0x0000, 0x3FFF, "persistent://t/n/x-partition-0"),
        legacy_seg(1, 0x4000, 0x7FFF, "persistent://t/n/x-partition-1"),
        legacy_seg(2, 0x8000, 0xBFFF, "persistent://t/n/x-partition-2"),
        legacy_seg(3, 0xC000, 0xFFFF, "persistent://t/n/x-partition-3"),
    ]
    for key in ["a", "customer-1", "customer-2", "order-99", ""]:
        # Murmur3_32Hash.makeHash: the signed 32-bit hash with bit 31 cleared.
        hash32 = mmh3.hash(key.encode(), 0) & 0x7FFFFFFF
        assert router.route(key, segments) == sign_safe_mod(hash32, n), key


def test_mixed_legacy_and_regular_still_uses_hash_routing() -> None:
    mixed = [
        legacy_seg(0, 0x0000, 0x7FFF, "persistent://t/n/x-partition-0"),
        seg(1, 0x8000, 0xFFFF),
    ]
    regular_key = find_key_in_range(0x8000, 0xFFFF)
    assert SegmentRouter().route(regular_key, mixed) == 1


def test_all_legacy_routing_is_deterministic() -> None:
    router = SegmentRouter()
    segments = [
        legacy_seg(0, 0x0000, 0x7FFF, "persistent://t/n/x-partition-0"),
        legacy_seg(1, 0x8000, 0xFFFF, "persistent://t/n/x-partition-1"),
    ]
    first = router.route("stable", segments)
    assert all(router.route("stable", segments) == first for _ in range(20))


# --- hash ------------------------------------------------------------------------------------


def test_hash_is_within16_bit_space() -> None:
    assert all(0 <= SegmentRouter().hash(f"key-{i}") <= 0xFFFF for i in range(1000))


def test_hash_is_deterministic() -> None:
    assert SegmentRouter().hash("deterministic-key") == SegmentRouter().hash("deterministic-key")
    assert SegmentRouter().hash("") == SegmentRouter().hash("")


def test_hash_string_and_bytes_agree() -> None:
    assert SegmentRouter().hash("some-key") == SegmentRouter().hash(b"some-key")


# --- beyond Pulsar's tests --------------------------------------------------------------------


def test_a_legacy_layout_without_the_partition_id_is_an_error() -> None:
    segments = [legacy_seg(5, 0, 0x7FFF, "persistent://t/n/a"), legacy_seg(6, 0x8000, 0xFFFF, "x")]
    key = next(k for k in (f"k{i}" for i in range(100)) if SegmentRouter.make_hash(k) % 2 == 0)
    with pytest.raises(ValueError, match="no segment 0"):
        SegmentRouter().route(key, segments)


def test_active_segment_attaches_to_its_legacy_topic() -> None:
    legacy = legacy_seg(0, 0, 0xFFFF, "persistent://t/n/x-partition-0")
    assert legacy.is_legacy and legacy.attach_topic_name == "persistent://t/n/x-partition-0"
    plain = ActiveSegment(0, HashRange.full(), "segment://t/n/x/0000-ffff-0", "", (0x8000,))
    assert not plain.is_legacy and plain.attach_topic_name == "segment://t/n/x/0000-ffff-0"
    assert plain.bucket_count == 2


def test_the_router_reads_layout_segments_and_agrees_with_layout_routing() -> None:
    layout = TopicLayout.initial(3, 4).split_segment(1, 5)
    active = layout.active_segments()
    for i in range(200):
        key = f"order-{i}"
        assert SegmentRouter().route(key, active) == layout.route(key)[0]


def test_a_migrated_layout_routes_by_range_once_its_children_are_active() -> None:
    layout = create_migrated_metadata("persistent://t/n/x", 4)
    for i in range(100):
        key = f"k{i}"
        assert SegmentRouter().route(key, layout.active_segments()) == layout.route(key)[0]


@given(st.binary(max_size=64), st.integers(1, 64))
def test_legacy_routing_matches_v4_partition_routing(key: bytes, n: int) -> None:
    """The client routes its string key: a bytes key is the string the JDK decodes it to
    (malformed UTF-8 as U+FFFD), hashed as that string's UTF-8 bytes."""
    segments = [legacy_seg(i, 0, 0xFFFF, f"persistent://t/n/x-partition-{i}") for i in range(n)]
    client_key = java_utf8(key)  # checked against the JDK in test_hashing_scheme
    expected = (mmh3.hash(client_key, 0) & 0x7FFFFFFF) % n
    assert SegmentRouter().route(key, segments) == expected


@given(st.binary(max_size=64))
def test_segment_hash_is_the_high_half_of_the_unmasked_hash(key: bytes) -> None:
    assert SegmentRouter().hash(key) == (mmh3.hash(key, 0, signed=False) >> 16)


@given(st.integers(1, 20), st.integers(0, 10**6))
def test_round_robin_visits_every_segment_once_per_cycle(n: int, start: int) -> None:
    segments = [seg(i, 0, 0xFFFF) for i in range(n)]
    counter, seen = start, []
    for _ in range(n):
        segment_id, counter = SegmentRouter().route_round_robin(segments, counter)
        seen.append(segment_id)
    assert sorted(seen) == list(range(n)) and counter == start + n
