"""Release profiles of scalable-topic routing: ``pulsar_version="5.0.0-M1"`` routes a key by
the low half of its hash into a segment's one bucket, master (the default) by the high half
and its buckets by the low half; every entry point agrees with the others and with that rule,
and refuses any other release by naming ``pulsar_version``."""

from __future__ import annotations

import pickle

import mmh3
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import keyshared as ks
from keyshared import HashRange, RoutingTable, SegmentRouter, TopicLayout
from keyshared.routing import ActiveSegment
from keyshared.versions import KNOWN_RELEASES, LOAD_BALANCER, SCALABLE_TOPICS, segment_half

M1 = "5.0.0-M1"
PROFILES = ("master", M1)


@st.composite
def layouts(draw: st.DrawFn) -> TopicLayout:
    """A layout after random splits, merges and rebuckets, so that ranges are uneven."""
    layout = TopicLayout.initial(draw(st.integers(1, 5)), draw(st.sampled_from([1, 4, 8])))
    for now in range(draw(st.integers(0, 6))):
        active = layout.active_segments()
        i = draw(st.integers(0, len(active) - 1))
        seg, action = active[i], draw(st.sampled_from(["split", "merge", "rebucket"]))
        if action == "merge" and i + 1 < len(active):
            layout = layout.merge_segments(seg.segment_id, active[i + 1].segment_id, now)
        elif action == "rebucket" and seg.bucket_count != 3:
            layout = layout.rebucket_segment(seg.segment_id, 3, now)
        elif seg.hash_range.size > 1:
            layout = layout.split_segment(seg.segment_id, now)
    return layout


def expected(layout: TopicLayout, key: str | bytes, pulsar_version: str) -> tuple[int, int]:
    """The rule, written out: M1 takes ``makeHash(key) & 0xFFFF`` and has one bucket."""
    h = mmh3.hash(key, 0, signed=False)
    if pulsar_version == M1:
        return layout.find_active_segment((h & 0x7FFFFFFF) & 0xFFFF).segment_id, 0
    seg = layout.find_active_segment(h >> 16)
    return seg.segment_id, ks.bucket_index(h & 0xFFFF, seg.bucket_splits)


keys = st.one_of(st.text(max_size=24), st.binary(max_size=24))


@given(layouts(), st.lists(keys, min_size=1, max_size=30), st.sampled_from(PROFILES))
def test_every_entry_point_routes_by_the_release_rule(
    layout: TopicLayout, batch: list[str | bytes], version: str
) -> None:
    want = [expected(layout, k, version) for k in batch]
    assert [layout.route(k, pulsar_version=version) for k in batch] == want
    texts = [k for k in batch if isinstance(k, str)]
    ids, buckets = layout.route_keys(texts, pulsar_version=version)
    assert list(zip(ids.tolist(), buckets.tolist(), strict=True)) == [
        expected(layout, k, version) for k in texts
    ]
    hashes = np.array([mmh3.hash(k, 0, signed=False) for k in batch], dtype=np.uint32)
    ids, buckets = layout.route_hashes(hashes, pulsar_version=version)
    assert list(zip(ids.tolist(), buckets.tolist(), strict=True)) == want
    table = layout.routing_table_for(version)
    assert [table.route_hash(int(h)) for h in hashes] == want
    router = SegmentRouter(pulsar_version=version)
    assert [router.route(k, layout.active_segments()) for k in batch] == [w[0] for w in want]
    active = [
        ActiveSegment(s.segment_id, s.hash_range, f"segment://t/n/x/{s.descriptor}")
        for s in layout.active_segments()
    ]
    assert [router.route(k, active) for k in batch] == [w[0] for w in want]


@given(keys)
def test_the_segment_hash_is_the_high_half_on_master_and_the_low_half_on_m1(
    key: str | bytes,
) -> None:
    h = mmh3.hash(key, 0, signed=False)
    assert SegmentRouter().hash(key) == ks.routing.segment_hash(key) == h >> 16
    assert (
        SegmentRouter(M1).hash(key) == ks.routing.segment_hash(key, pulsar_version=M1) == h & 0xFFFF
    )


def test_m1_has_one_bucket_per_segment() -> None:
    layout = TopicLayout.initial(1, bucket_budget=8).split_segment(0, 1)
    table = layout.routing_table_for(M1)
    assert (table.bucket_count, layout.routing_table.bucket_count) == (2, 8)
    hashes = np.arange(0, 2**32, 7919, dtype=np.uint32)
    ids, buckets = table.route_hashes(hashes)
    assert not buckets.any()
    ordinals = table.bucket_ordinals(hashes)
    assert np.array_equal(ordinals, np.where(ids == 1, 0, 1))


def test_master_is_the_default_and_tables_are_kept_per_release() -> None:
    layout = TopicLayout.initial(4)
    assert layout.routing_table.pulsar_version == "master"
    assert layout.routing_table is layout.routing_table_for("master")
    assert layout.routing_table_for(M1) is layout.routing_table_for(M1)
    assert layout.routing_table_for(M1) != layout.routing_table
    assert SegmentRouter().pulsar_version == "master"
    keys = [f"k{i}" for i in range(200)]
    assert [layout.route(k) for k in keys] == [
        layout.route(k, pulsar_version="master") for k in keys
    ]
    assert [layout.route(k) for k in keys] != [layout.route(k, pulsar_version=M1) for k in keys]


def test_a_table_pickles_with_its_release() -> None:
    segments = [(0, HashRange(0, 0x7FFF), [0x100]), (1, HashRange(0x8000, 0xFFFF), [])]
    for version in PROFILES:
        table = RoutingTable(segments, pulsar_version=version)
        again = pickle.loads(pickle.dumps(table))
        assert again == table and again.pulsar_version == version
    assert RoutingTable(segments) == RoutingTable(segments, "master")
    assert RoutingTable(segments) != RoutingTable(segments, M1)


def calls(version: object) -> list[object]:
    """Every scalable-topic entry point, called with ``version``."""
    layout = TopicLayout.initial(2)
    segments = [(0, HashRange.full(), [])]
    return [
        lambda: layout.route("k", pulsar_version=version),
        lambda: layout.route_keys(["k"], pulsar_version=version),
        lambda: layout.route_hashes(np.zeros(1, np.uint32), pulsar_version=version),
        lambda: layout.routing_table_for(version),  # type: ignore[arg-type]
        lambda: RoutingTable(segments, pulsar_version=version),
        lambda: SegmentRouter(pulsar_version=version),  # type: ignore[arg-type]
        lambda: ks.routing.segment_hash("k", pulsar_version=version),
    ]


@pytest.mark.parametrize("version", ["5.0.0", "5.0.0-m1", "M1", "", "4.1", " master"])
def test_an_unknown_release_is_a_value_error_naming_pulsar_version(version: str) -> None:
    message = rf"pulsar_version must be one of 'master', '5\.0\.0-M1', got {version!r}"
    for call in calls(version):
        with pytest.raises(ValueError, match=message):
            call()  # type: ignore[operator]


@pytest.mark.parametrize("version", ["4.2", "4.0"])
def test_a_4x_release_has_no_scalable_topics(version: str) -> None:
    message = rf"pulsar_version '{version}': scalable topics need Pulsar 5\.0"
    for call in calls(version):
        with pytest.raises(ValueError, match=message):
            call()  # type: ignore[operator]


def test_a_release_must_be_a_str() -> None:
    for call in calls(5.0):
        with pytest.raises(TypeError, match="pulsar_version must be a str, got float"):
            call()  # type: ignore[operator]


def test_the_one_list_of_releases() -> None:
    assert KNOWN_RELEASES == ("master", M1, "4.2", "4.0")
    assert (SCALABLE_TOPICS.accepted, SCALABLE_TOPICS.default) == (("master", M1), "master")
    assert (LOAD_BALANCER.accepted, LOAD_BALANCER.default) == (("4.0", "4.2"), "4.2")
    assert set(SCALABLE_TOPICS.accepted + LOAD_BALANCER.accepted) <= set(KNOWN_RELEASES)
    assert [segment_half(v) for v in PROFILES] == ["high", "low"]
    with pytest.raises(ValueError, match="pulsar_version must be one of 'master', '5"):
        SegmentRouter(pulsar_version="4.2.4")  # type: ignore[arg-type]


# --- SegmentRouter's active_segments (issue: AttributeError on ints, None or a str) -----


@pytest.mark.parametrize(
    ("segments", "message"),
    [
        (None, "active_segments must be an iterable of segments, got NoneType"),
        (3, "active_segments must be an iterable of segments, got int"),
        ("0000-ffff-0", "active_segments must be an iterable of segments, got str"),
        (b"ab", "active_segments must be an iterable of segments, got bytes"),
        ([1, 2], r"active_segments\[0\] must be a segment \(ActiveSegment or Segment\), got int"),
        (
            [ActiveSegment(0, HashRange.full(), "s"), None],
            r"active_segments\[1\] must be a segment .*, got NoneType",
        ),
        (["a"], r"active_segments\[0\] must be a segment .*, got str"),
    ],
)
def test_route_names_active_segments_when_they_are_not_segments(
    segments: object, message: str
) -> None:
    for version in PROFILES:
        router = SegmentRouter(pulsar_version=version)
        with pytest.raises(TypeError, match=message):
            router.route("k", segments)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=message):
            router.route_round_robin(segments, 0)  # type: ignore[arg-type]


def test_route_still_takes_any_iterable_of_segments_once() -> None:
    layout = TopicLayout.initial(3)
    router = SegmentRouter()
    want = router.route("order-1", list(layout.active_segments()))
    assert router.route("order-1", iter(layout.active_segments())) == want
    assert router.route("order-1", (s for s in layout.active_segments())) == want
