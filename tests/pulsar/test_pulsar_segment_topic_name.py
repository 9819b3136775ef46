"""Pulsar's SegmentTopicNameTest, ported, and round trips of topic names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keyshared import HashRange, TopicName
from keyshared.scalable import SegmentTopicName, TopicDomain


def test_from_parent() -> None:
    parent = TopicName.get("topic://tenant/ns/my-topic")
    hash_range = HashRange(0x0000, 0x7FFF)
    segment = SegmentTopicName.from_parent(parent, hash_range, 1)
    assert str(segment) == "segment://tenant/ns/my-topic/0000-7fff-1"
    assert segment.domain is TopicDomain.segment
    assert segment.tenant == "tenant"
    assert segment.namespace_portion == "ns"
    assert segment.local_name == "my-topic"
    assert segment.segment_range == hash_range
    assert segment.segment_id == 1


def test_from_parent_full_range() -> None:
    parent = TopicName.get("topic://public/default/test")
    segment = SegmentTopicName.from_parent(parent, HashRange.full(), 0)
    assert str(segment) == "segment://public/default/test/0000-ffff-0"


def test_get_parent_topic_name() -> None:
    segment = TopicName.get("segment://tenant/ns/my-topic/0000-7fff-1")
    parent = SegmentTopicName.get_parent_topic_name(segment)
    assert str(parent) == "topic://tenant/ns/my-topic"
    assert parent.domain is TopicDomain.topic


def test_get_hash_range() -> None:
    segment = TopicName.get("segment://tenant/ns/my-topic/0000-7fff-1")
    assert SegmentTopicName.get_hash_range(segment) == HashRange(0x0000, 0x7FFF)


def test_get_segment_id() -> None:
    segment = TopicName.get("segment://tenant/ns/my-topic/0000-7fff-42")
    assert SegmentTopicName.get_segment_id(segment) == 42


def test_round_trip() -> None:
    parent = TopicName.get("topic://my-tenant/my-ns/orders")
    hash_range = HashRange(0x4000, 0x7FFF)
    segment = SegmentTopicName.from_parent(parent, hash_range, 5)
    assert str(SegmentTopicName.get_parent_topic_name(segment)) == str(parent)
    assert SegmentTopicName.get_hash_range(segment) == hash_range
    assert SegmentTopicName.get_segment_id(segment) == 5


def test_from_parent_rejects_persistent_domain() -> None:
    persistent = TopicName.get("persistent://tenant/ns/my-topic")
    with pytest.raises(ValueError, match="domain 'topic'"):
        SegmentTopicName.from_parent(persistent, HashRange.full(), 0)


def test_get_parent_rejects_persistent_domain() -> None:
    persistent = TopicName.get("persistent://tenant/ns/my-topic")
    with pytest.raises(ValueError, match="segment domain"):
        SegmentTopicName.get_parent_topic_name(persistent)


def test_topic_domain_parsing() -> None:
    topic = TopicName.get("topic://t/ns/foo")
    assert topic.domain is TopicDomain.topic
    assert (topic.tenant, topic.namespace_portion, topic.local_name) == ("t", "ns", "foo")


def test_segment_domain_parsing() -> None:
    segment = TopicName.get("segment://t/ns/foo/0000-ffff-0")
    assert segment.domain is TopicDomain.segment
    assert (segment.tenant, segment.namespace_portion, segment.local_name) == ("t", "ns", "foo")
    assert segment.segment_range == HashRange.full()
    assert segment.segment_id == 0
    assert segment.is_segment


def test_format_descriptor() -> None:
    assert SegmentTopicName.format_descriptor(HashRange(0x0000, 0x7FFF), 3) == "0000-7fff-3"


# --- beyond Pulsar's tests --------------------------------------------------------------------


def test_short_names_default_like_pulsars() -> None:
    assert str(TopicName.get("orders")) == "persistent://public/default/orders"
    assert str(TopicName.get("t/ns/orders")) == "persistent://t/ns/orders"
    assert TopicName.get("persistent://t/ns/orders").namespace == "t/ns"


def test_partitions_are_named_like_pulsars() -> None:
    base = TopicName.get("persistent://t/ns/orders")
    assert str(base.get_partition(3)) == "persistent://t/ns/orders-partition-3"
    with pytest.raises(ValueError, match="no partitions"):
        TopicName.get("segment://t/ns/foo/0000-ffff-0").get_partition(0)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("kafka://t/ns/x", "unknown domain"),
        ("persistent://t/x", "not like"),
        ("segment://t/ns/x", "not like"),
        ("segment://t/ns/x/0000-ffff", "descriptor"),
        ("topic://t//x", "non-empty"),
    ],
)
def test_bad_names_say_what_is_wrong(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TopicName.get(name)


def test_other_segment_readers_refuse_other_domains() -> None:
    topic = TopicName.get("topic://t/ns/x")
    with pytest.raises(ValueError, match="segment domain"):
        SegmentTopicName.get_hash_range(topic)
    with pytest.raises(ValueError, match="segment domain"):
        SegmentTopicName.get_segment_id(topic)


_part = st.text(st.sampled_from("abcxyz-_.0189"), min_size=1, max_size=8)


@given(_part, _part, _part, st.integers(0, 0xFFFF), st.integers(0, 0xFFFF), st.integers(0, 10**9))
def test_segment_names_round_trip(
    tenant: str, ns: str, local: str, a: int, b: int, segment_id: int
) -> None:
    parent = TopicName.get(f"topic://{tenant}/{ns}/{local}")
    hash_range = HashRange(min(a, b), max(a, b))
    segment = SegmentTopicName.from_parent(parent, hash_range, segment_id)
    assert TopicName.get(str(segment)) == segment
    assert SegmentTopicName.get_parent_topic_name(segment) == parent
