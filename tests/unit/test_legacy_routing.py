"""Legacy (mod-N) routing by the hashing scheme the v4 producers used: recorded on legacy
segments, carried by the layout's JSON and layout response, and set by a migration.

Pulsar's V5 SegmentRouter always takes Murmur3_32Hash there; keyshared does too when no scheme
is recorded (tests/pulsar/test_pulsar_segment_router.py), and follows the recorded one otherwise."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keyshared import HashRange, SegmentRouter, TopicLayout, create_migrated_metadata
from keyshared.routing import ActiveSegment, HashingScheme, choose_partition, legacy_hashing_scheme
from keyshared.scalable import Segment, SegmentState

KEYS = st.one_of(st.text(max_size=24), st.binary(max_size=24))


def legacy_segments(n: int, scheme: HashingScheme | None) -> list[ActiveSegment]:
    return [
        ActiveSegment(
            i,
            HashRange.full(),
            f"segment://t/n/x/{i}",
            f"persistent://t/n/x-partition-{i}",
            legacy_hashing_scheme=scheme,
        )
        for i in range(n)
    ]


@given(KEYS, st.integers(1, 64), st.sampled_from(list(HashingScheme)))
def test_legacy_routing_follows_the_recorded_scheme(
    key: str | bytes, n: int, scheme: HashingScheme
) -> None:
    assert SegmentRouter().route(key, legacy_segments(n, scheme)) == choose_partition(
        key, n, scheme
    )


@given(KEYS, st.integers(1, 64))
def test_legacy_routing_without_a_recorded_scheme_is_pulsars_murmur3(
    key: str | bytes, n: int
) -> None:
    expected = choose_partition(key, n, HashingScheme.Murmur3_32Hash)
    assert SegmentRouter().route(key, legacy_segments(n, None)) == expected


def test_java_string_hash_producers_keep_their_partitions_only_when_recorded() -> None:
    """The case Pulsar's router gets wrong: the Java client's default scheme."""
    keys = [f"order-{i}" for i in range(200)]
    v4 = [choose_partition(k, 8) for k in keys]
    recorded = legacy_segments(8, HashingScheme.JavaStringHash)
    assert [SegmentRouter().route(k, recorded) for k in keys] == v4
    unrecorded = legacy_segments(8, None)
    assert [SegmentRouter().route(k, unrecorded) for k in keys] != v4


def test_legacy_segments_recording_different_schemes_are_refused() -> None:
    java, murmur = (legacy_segments(2, scheme) for scheme in HashingScheme)
    mixed = [java[0], murmur[1]]
    with pytest.raises(ValueError, match="different hashing schemes"):
        SegmentRouter().route("k", mixed)
    # One recorded, one not: the recorded one.
    partly = [java[0], legacy_segments(2, None)[1]]
    assert legacy_hashing_scheme(partly) is HashingScheme.JavaStringHash


def test_a_scheme_must_be_a_hashing_scheme() -> None:
    with pytest.raises(TypeError, match="legacy_hashing_scheme must be a HashingScheme"):
        ActiveSegment(0, HashRange.full(), "s", "p", legacy_hashing_scheme="JavaStringHash")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="legacy_hashing_scheme must be a HashingScheme"):
        Segment(0, HashRange.full(), legacy_hashing_scheme=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="hashing_scheme must be a HashingScheme"):
        create_migrated_metadata("persistent://t/n/x", 2, hashing_scheme="Murmur3_32Hash")  # type: ignore[arg-type]


@pytest.mark.parametrize("scheme", list(HashingScheme))
def test_a_migration_records_the_scheme_on_its_legacy_parents(scheme: HashingScheme) -> None:
    layout = create_migrated_metadata("persistent://t/n/x", 3, hashing_scheme=scheme)
    parents = [s for s in layout.segments.values() if s.is_legacy]
    assert len(parents) == 3
    assert all(s.legacy_hashing_scheme is scheme for s in parents)
    assert all(s.legacy_hashing_scheme is None for s in layout.active_segments())
    data = layout.to_dict()
    assert [s.get("legacy_hashing_scheme") for s in data["segments"]] == [scheme.value] * 3 + [
        None
    ] * 3
    assert TopicLayout.from_json(layout.to_json()) == layout


def test_an_unrecorded_scheme_leaves_the_json_as_before() -> None:
    layout = create_migrated_metadata("persistent://t/n/x", 2)
    assert all("legacy_hashing_scheme" not in s for s in layout.to_dict()["segments"])


def test_the_layout_response_carries_a_synthetic_layouts_scheme() -> None:
    """A topic not yet migrated: every active segment wraps a partition."""
    segments = {
        i: Segment(
            i,
            r,
            legacy_topic_name=f"persistent://t/n/x-partition-{i}",
            legacy_hashing_scheme=HashingScheme.JavaStringHash,
        )
        for i, r in enumerate([HashRange(0, 0x7FFF), HashRange(0x8000, 0xFFFF)])
    }
    layout = TopicLayout(0, 2, segments)
    response = layout.layout_response()
    assert [s["legacy_hashing_scheme"] for s in response["segments"]] == ["JavaStringHash"] * 2
    for key in ("a", "customer-7", "é"):
        routed = SegmentRouter().route(key, layout.active_segments())
        assert routed == choose_partition(key, 2, HashingScheme.JavaStringHash)


def test_a_bad_scheme_in_json_names_the_field() -> None:
    data = create_migrated_metadata("persistent://t/n/x", 1).to_dict()
    data["segments"][0]["legacy_hashing_scheme"] = "Fnv"
    with pytest.raises(ValueError, match=r"layout\.segments\[0\]\.legacy_hashing_scheme must be"):
        TopicLayout.from_dict(json.loads(json.dumps(data)))
    data["segments"][0]["legacy_hashing_scheme"] = None
    assert TopicLayout.from_dict(data).segments[0].legacy_hashing_scheme is None
    assert (
        Segment.from_dict(
            {
                "segment_id": 0,
                "hash_range": "0000-ffff",
                "state": SegmentState.SEALED.value,
                "sealed_at_ms": 0,
                "legacy_topic_name": "persistent://t/n/x",
                "legacy_hashing_scheme": "Murmur3_32Hash",
            }
        ).legacy_hashing_scheme
        is HashingScheme.Murmur3_32Hash
    )
