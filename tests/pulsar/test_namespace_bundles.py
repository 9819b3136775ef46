"""NamespaceBundles and NamespaceBundle: Pulsar's NamespaceBundlesTest and NamespaceBundleTest,
with v2 names (``pulsar/ns1`` where the Java tests once used v1 ``pulsar/global/ns1`` and
``pulsar/use/ns2``: Pulsar 4.2 and master refuse v1 topic names), and TopicNameTest's
expectations on which topic names are read."""

from __future__ import annotations

import bisect

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from keyshared.errors import OutOfRange
from keyshared.loadbalance import (
    FULL_UPPER_BOUND,
    NamespaceBundle,
    NamespaceBundles,
    topic_hash,
    topic_namespace,
)

NS1 = "pulsar/ns1"
TOPIC1 = "persistent://pulsar/ns1/topic-1"


def divides_in_two(bundle: NamespaceBundle, children: tuple[NamespaceBundle, ...]) -> None:
    """NamespaceBundlesTest.assertBundleDivideInTwo."""
    lower, upper = bundle.lower_endpoint, bundle.upper_endpoint
    middle = (upper - lower) // 2 + lower
    assert [c.bundle_range for c in children] == [
        f"0x{lower:08x}_0x{middle:08x}",
        f"0x{middle:08x}_0x{upper:08x}",
    ]


def spans(parent: NamespaceBundle, children: tuple[NamespaceBundle, ...]) -> None:
    """NamespaceBundlesTest.validateSplitBundlesRange."""
    assert children[0].lower_endpoint == parent.lower_endpoint
    assert children[-1].upper_endpoint == parent.upper_endpoint


class TestNamespaceBundlesTest:
    def test_constructor(self) -> None:
        partitions = (0, 0x10000000, 0x40000000, 0xFFFFFFFF)
        bundles = NamespaceBundles("pulsar/ns2", partitions)
        assert bundles.partitions == partitions
        assert bundles.namespace == "pulsar/ns2"
        assert bundles.size() == 3
        assert bundles.bundles == (
            NamespaceBundle(0, 0x10000000, "pulsar/ns2"),
            NamespaceBundle(0x10000000, 0x40000000, "pulsar/ns2"),
            NamespaceBundle(0x40000000, 0xFFFFFFFF, "pulsar/ns2"),
        )
        assert bundles.boundaries() == ("0x00000000", "0x10000000", "0x40000000", "0xffffffff")

    def test_find_bundle(self) -> None:
        partitions = [0, 0x40000000, 0xA0000000, 0xB0000000, 0xC0000000, 0xFFFFFFFF]
        bundles = NamespaceBundles(NS1, partitions)
        bundle = bundles.find_bundle(TOPIC1)
        assert bundle.includes(TOPIC1)

        # A topic whose hash (0x4807f0dd) leaves at least two ranges above it, as the Java
        # test's v1 persistent://pulsar/use/ns2/topic-2 (0x96f239f6) did.
        other = "persistent://pulsar/ns2/topic-1"
        with pytest.raises(ValueError, match="namespace"):
            bundles.find_bundle(other)

        # Pulsar's construction: the partitions from the second one past the topic's hash.
        hash_key = topic_hash(other)
        tail = sorted({p for p in partitions if p >= hash_key} | {hash_key})
        new_partitions = [p for p in tail if p >= tail[1]]
        narrowed = NamespaceBundles("pulsar/ns2", new_partitions)
        with pytest.raises(OutOfRange) as outside:
            narrowed.find_bundle(other)
        assert str(outside.value) == (
            f"topic_name {other!r} (hash 0x{hash_key:08x}) is outside the bundles of "
            f"pulsar/ns2 [0x{new_partitions[0]:08x}, 0x{new_partitions[-1]:08x}]"
        )

    def test_split_bundles(self) -> None:
        bundles = NamespaceBundles(NS1)
        bundle = bundles.find_bundle(TOPIC1)
        split, children = bundles.split_bundle(bundle, 4)
        spans(bundles.full_bundle, children)
        assert split.size() == bundles.size() + 4 - 1

        first = split.bundles[0]
        split_first, first_children = split.split_bundle(first, 4)
        spans(first, first_children)
        assert split_first.size() == split.size() + 4 - 1

        second = split.bundles[1]
        split_second, second_children = split.split_bundle(second, 3)
        spans(second, second_children)
        assert split_second.size() == split.size() + 3 - 1

    def test_split_bundle_in_two(self) -> None:
        bundles = NamespaceBundles(NS1)
        bundle = bundles.find_bundle(TOPIC1)
        split, children = bundles.split_bundle(bundle, 2)
        divides_in_two(bundle, children)
        assert [c.bundle_range for c in children] == [
            "0x00000000_0x7fffffff",
            "0x7fffffff_0xffffffff",
        ]
        for child in children:
            twice, grandchildren = split.split_bundle(child, 2)
            divides_in_two(child, grandchildren)
            for grandchild in grandchildren:
                divides_in_two(grandchild, twice.split_bundle(grandchild, 2)[1])

    def test_split_bundle_by_fix_boundary(self) -> None:
        bundles = NamespaceBundles(NS1)
        target = bundles.bundles[0]
        for edge in (target.lower_endpoint, target.upper_endpoint):
            with pytest.raises(ValueError, match="strictly inside"):
                bundles.split_bundle(target, 0, [edge])
        fix_boundary = target.lower_endpoint + 10
        _, children = bundles.split_bundle(target, 0, [fix_boundary])
        assert children[0].lower_endpoint == target.lower_endpoint
        assert children[1].lower_endpoint == target.lower_endpoint + fix_boundary


class TestNamespaceBundleTest:
    def test_constructor(self) -> None:
        for lower, upper in ((0, 0), (1, 1)):
            with pytest.raises(ValueError, match="lower_endpoint must be <"):
                NamespaceBundle(lower, upper, "pulsar/ns")
        with pytest.raises(TypeError, match="namespace"):
            NamespaceBundle(0, 1, None)  # type: ignore[arg-type]
        bundle = NamespaceBundle(0, 1, "pulsar/ns")
        assert (bundle.lower_endpoint, bundle.upper_endpoint) == (0, 1)
        assert bundle.namespace == "pulsar/ns"

    def test_get_bundle(self) -> None:
        full = NamespaceBundle(0, 0xFFFFFFFF, "pulsar/ns1")
        assert full == NamespaceBundle.full("pulsar/ns1")

    def test_compare_to(self) -> None:
        bundle = NamespaceBundle(0, 0x40000000, "pulsar/ns1")
        bundle2 = NamespaceBundle(0x20000000, 0x40000000, "pulsar/ns1")
        with pytest.raises(ValueError, match="overlapping"):
            bundle.compare_to(bundle2)
        bundle0 = NamespaceBundle(0, 0x10000000, "pulsar/ns1")
        assert bundle0.compare_to(bundle2) < 0
        assert bundle2.compare_to(bundle0) > 0
        bundle1 = NamespaceBundle(0, 0x20000000, "pulsar/ns1")
        assert bundle1.compare_to(bundle2) < 0
        bundle3 = NamespaceBundle(0, 0x40000000, "pulsar/ns1")
        assert bundle.compare_to(bundle3) == 0
        other_bundle = NamespaceBundle(0x10000000, 0x30000000, "pulsar/ns2")
        assert other_bundle.compare_to(bundle0) > 0

    def test_equals(self) -> None:
        bundle = NamespaceBundle(0, 0x40000000, "pulsar/ns1")
        assert NamespaceBundle(0x20000000, 0x40000000, "pulsar/ns1") != bundle
        assert NamespaceBundle(0, 0x40000000, "pulsar/ns1") == bundle
        assert NamespaceBundle(0, 0x40000000, "pulsar/ns2") != bundle

    def test_includes(self) -> None:
        topic = "persistent://pulsar/ns1/topic-1"
        hash_key = topic_hash(topic)
        upper = max(hash_key + 1, FULL_UPPER_BOUND)
        assert NamespaceBundle(hash_key // 2, upper, "pulsar/ns1").includes(topic)
        # The one-point bundle [0xffffffff, 0xffffffff] holds only that hash.
        one_point = NamespaceBundle(upper, FULL_UPPER_BOUND, "pulsar/ns1")
        assert not one_point.includes(topic)
        assert one_point.includes_hash(FULL_UPPER_BOUND)
        assert not NamespaceBundle(0, 0x40000000, "pulsar/ns2").includes(topic)

    def test_to_string(self) -> None:
        bundle0 = NamespaceBundle(0, 0x10000000, "pulsar/ns1")
        assert str(bundle0) == "pulsar/ns1/0x00000000_0x10000000"
        assert NamespaceBundle.from_bundle_range(bundle0.bundle_range, "pulsar/ns1") == bundle0
        bundle0 = NamespaceBundle(0x10000000, FULL_UPPER_BOUND, "pulsar/ns1")
        assert str(bundle0) == "pulsar/ns1/0x10000000_0xffffffff"


class TestTopicNamespace:
    @pytest.mark.parametrize(
        ("name", "full", "namespace"),
        [
            ("my-topic", "persistent://public/default/my-topic", "public/default"),
            ("t/ns/x", "persistent://t/ns/x", "t/ns"),
            ("non-persistent://t/ns/x", "non-persistent://t/ns/x", "t/ns"),
            ("persistent://t/ns/a:b:c", "persistent://t/ns/a:b:c", "t/ns"),
        ],
    )
    def test_reads_pulsar_topic_names(self, name: str, full: str, namespace: str) -> None:
        assert topic_namespace(name) == (full, namespace)

    @pytest.mark.parametrize(
        "name",
        [
            # TopicNameTest (master): V1 topic names are no longer supported ...
            "persistent://tenant/cluster/namespace/topic",
            "non-persistent://tenant/cluster/namespace/topic",
            # ... and V2 topic names do not allow '/' in local names (V1 did).
            "persistent://tenant/namespace/ns-abc/table/1",
            "persistent://tenant/namespace/ns-abc/table/1/",
            "persistent://tenant/namespace/$#3rpa/table/1",
        ],
    )
    def test_refuses_v1_names(self, name: str) -> None:
        with pytest.raises(ValueError, match="v1 topic names"):
            topic_namespace(name)

    @pytest.mark.parametrize(
        "name",
        [
            # TopicNameTest (master): 4-part short names, empty tenant or namespace, blank.
            "tenant/cluster/namespace/topic",
            "pulsar/cluster/namespace/test",
            "persistent:///namespace/mydest-1",
            "persistent://pulsar//mydest-1",
            " ",
        ],
    )
    def test_refuses_other_names_master_refuses(self, name: str) -> None:
        with pytest.raises(ValueError, match="topic_name"):
            topic_namespace(name)

    @pytest.mark.parametrize("name", ["http://t/ns/x", "persistent://t/x", "persistent://t//x", ""])
    def test_rejects_malformed_names(self, name: str) -> None:
        with pytest.raises(ValueError, match="topic_name"):
            topic_namespace(name)


class TestPulsar40TopicNames:
    """``pulsar_version="4.0"``: topic names as Pulsar 4.0 LTS reads them (v1 names too)."""

    @pytest.mark.parametrize(
        ("name", "full", "namespace"),
        [
            ("persistent://t/c/ns/x", "persistent://t/c/ns/x", "t/c/ns"),
            ("non-persistent://t/c/ns/x", "non-persistent://t/c/ns/x", "t/c/ns"),
            # The local name of a v1 name is all after the namespace, '/' included.
            ("persistent://t/c/ns/x/y/", "persistent://t/c/ns/x/y/", "t/c/ns"),
            ("persistent://t/ns/x", "persistent://t/ns/x", "t/ns"),
            ("my-topic", "persistent://public/default/my-topic", "public/default"),
            # Short names count their non-empty parts (StringUtils.split).
            ("x/", "persistent://public/default/x", "public/default"),
            ("//x//", "persistent://public/default/x", "public/default"),
            ("t/ns/x", "persistent://t/ns/x", "t/ns"),
            ("t/c/ns//", "persistent://t/c/ns//", "t/c/ns"),
        ],
    )
    def test_reads_v1_and_v2_names(self, name: str, full: str, namespace: str) -> None:
        assert topic_namespace(name, pulsar_version="4.0") == (full, namespace)

    @pytest.mark.parametrize(
        "name",
        [
            "t/c/ns/x",  # a short name of four parts
            "a//b",
            "/t/ns/x",  # empty tenant
            "persistent://t//ns/x",  # empty cluster
            "persistent://t/c/ns/",  # empty local name
            "persistent://t/c/ns/ ",  # blank local name
            "persistent://t/x",
            "http://t/c/ns/x",
        ],
    )
    def test_refuses_what_4_0_refuses(self, name: str) -> None:
        with pytest.raises(ValueError, match="topic_name"):
            topic_namespace(name, pulsar_version="4.0")

    def test_find_bundle_of_a_v1_name(self) -> None:
        bundles = NamespaceBundles("t/c/ns", (0, 0x40000000, FULL_UPPER_BOUND))
        topic = "persistent://t/c/ns/x"
        with pytest.raises(ValueError, match="v1 topic names"):
            bundles.find_bundle(topic)
        assert bundles.find_bundle(topic, pulsar_version="4.0") == bundles.get_bundle(
            topic_hash(topic)
        )
        with pytest.raises(ValueError, match="not 'tenant/ns'"):
            NamespaceBundles("tenant/ns").find_bundle(
                "persistent://tenant/ns/a/b", pulsar_version="4.0"
            )

    def test_the_default_is_4_2(self) -> None:
        assert topic_namespace("t/ns/x") == topic_namespace("t/ns/x", pulsar_version="4.2")
        with pytest.raises(ValueError, match="topic_name"):
            topic_namespace("x/", pulsar_version="4.2")

    @pytest.mark.parametrize("bad", ["4.1", "4", "4.0.7", "LTS"])
    def test_other_versions_are_refused_by_name(self, bad: str) -> None:
        message = rf"pulsar_version must be one of '4\.0', '4\.2', got {bad!r}"
        with pytest.raises(ValueError, match=message):
            topic_namespace("t/ns/x", pulsar_version=bad)
        with pytest.raises(ValueError, match=message):
            NamespaceBundles("t/ns").find_bundle("t/ns/x", pulsar_version=bad)
        with pytest.raises(TypeError, match="pulsar_version must be a str"):
            topic_namespace("t/ns/x", pulsar_version=None)  # type: ignore[arg-type]


class TestBadInput:
    def test_partitions(self) -> None:
        with pytest.raises(ValueError, match="at least 2"):
            NamespaceBundles(NS1, [0])
        with pytest.raises(ValueError, match=r"partitions\[2\] must be above"):
            NamespaceBundles(NS1, [0, 5, 5, FULL_UPPER_BOUND])
        with pytest.raises(ValueError, match=r"partitions\[1\] must be above"):
            NamespaceBundles(NS1, [0, FULL_UPPER_BOUND, FULL_UPPER_BOUND])
        with pytest.raises(ValueError, match=r"partitions\[1\] must be <="):
            NamespaceBundles(NS1, [0, 1 << 32])
        with pytest.raises(TypeError, match="partitions"):
            NamespaceBundles(NS1, "01")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="namespace must not be empty"):
            NamespaceBundles("", [0, 1])

    def test_validate_bundle(self) -> None:
        bundles = NamespaceBundles(NS1, [0, 0x40000000, FULL_UPPER_BOUND])
        bundles.validate_bundle(NamespaceBundle(0, 0x40000000, NS1))
        with pytest.raises(ValueError, match="not in the bundles list"):
            bundles.validate_bundle(NamespaceBundle(1, 0x40000000, NS1))
        with pytest.raises(ValueError, match="invalid upper boundary"):
            bundles.validate_bundle(NamespaceBundle(0, 0x30000000, NS1))
        with pytest.raises(ValueError, match="not of namespace"):
            bundles.validate_bundle(NamespaceBundle(0, 0x40000000, "other/ns"))
        with pytest.raises(ValueError, match="not in the bundles list"):
            bundles.split_bundle(NamespaceBundle(5, 10, NS1))

    def test_one_point_namespace_bundles(self) -> None:
        one = NamespaceBundles(NS1, [FULL_UPPER_BOUND, FULL_UPPER_BOUND])
        assert one.get_bundle(FULL_UPPER_BOUND) == NamespaceBundle(
            FULL_UPPER_BOUND, FULL_UPPER_BOUND, NS1
        )
        # The library's refusal of a bad argument, still the IndexError it was before.
        with pytest.raises(IndexError) as outside:
            one.get_bundle(0)
        assert isinstance(outside.value, OutOfRange) and isinstance(outside.value, ValueError)
        assert str(outside.value) == (
            f"hash_value 0x00000000 is outside the bundles of {NS1} [0xffffffff, 0xffffffff]"
        )


@st.composite
def partitions(draw: st.DrawFn) -> list[int]:
    inner = draw(st.sets(st.integers(1, FULL_UPPER_BOUND - 1), max_size=8))
    return [0, *sorted(inner), FULL_UPPER_BOUND]


@given(partitions(), st.integers(0, FULL_UPPER_BOUND))
def test_every_hash_has_exactly_the_bundle_that_includes_it(
    points: list[int], hash_value: int
) -> None:
    bundles = NamespaceBundles(NS1, points)
    found = bundles.get_bundle(hash_value)
    assert [b for b in bundles.bundles if b.includes_hash(hash_value)] == [found]
    for other in bundles.bundles:
        assert other.overlaps(found) == (other == found)
        assert (other.compare_to(found) == 0) == (other == found)


@given(partitions(), st.data())
def test_a_split_keeps_the_ring_tiled(points: list[int], data: st.DataObject) -> None:
    bundles = NamespaceBundles(NS1, points)
    target = data.draw(st.sampled_from(bundles.bundles))
    assume(target.upper_endpoint - target.lower_endpoint >= 2)
    parts = data.draw(st.integers(2, min(8, target.upper_endpoint - target.lower_endpoint)))
    split, children = bundles.split_bundle(target, parts)
    assert len(children) == parts
    assert split.size() == bundles.size() + parts - 1
    assert set(split.bundles) == (set(bundles.bundles) - {target}) | set(children)


class SplitMachine(RuleBasedStateMachine):
    """Repeated splits against a model: the sorted set of boundaries."""

    def __init__(self) -> None:
        super().__init__()
        self.bundles = NamespaceBundles(NS1)
        self.model = [0, FULL_UPPER_BOUND]

    @rule(data=st.data(), parts=st.integers(2, 5))
    def split_evenly(self, data: st.DataObject, parts: int) -> None:
        target = data.draw(st.sampled_from(self.bundles.bundles))
        width = target.upper_endpoint - target.lower_endpoint
        assume(width >= parts)
        self.bundles, children = self.bundles.split_bundle(target, parts)
        step = width // parts
        self.model += [target.lower_endpoint + step * i for i in range(1, parts)]
        self.model.sort()
        assert len(children) == parts

    @rule(data=st.data())
    def split_at_a_boundary(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(self.bundles.bundles))
        assume(target.upper_endpoint - target.lower_endpoint >= 2)
        point = data.draw(st.integers(target.lower_endpoint + 1, target.upper_endpoint - 1))
        self.bundles, _ = self.bundles.split_bundle(target, split_boundaries=[point])
        self.model = sorted([*self.model, point])

    @rule(data=st.data())
    def bad_split_changes_nothing(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(self.bundles.bundles))
        before = self.bundles
        with pytest.raises(ValueError, match=r"strictly inside|can't be split further"):
            self.bundles.split_bundle(target, split_boundaries=[target.lower_endpoint])
        assert self.bundles == before

    @invariant()
    def matches_the_model(self) -> None:
        assert list(self.bundles.partitions) == self.model

    @invariant()
    def a_topic_finds_the_bundle_holding_its_hash(self) -> None:
        bundle = self.bundles.find_bundle(TOPIC1)
        assert bundle.includes(TOPIC1)
        index = bisect.bisect_right(self.model, topic_hash(TOPIC1)) - 1
        assert (bundle.lower_endpoint, bundle.upper_endpoint) == tuple(
            self.model[index : index + 2]
        )


TestSplitMachine = SplitMachine.TestCase
TestSplitMachine.settings = settings(max_examples=30, stateful_step_count=15, deadline=None)
