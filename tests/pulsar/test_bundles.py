"""Bundle ring and split algorithms: Pulsar's formulas, seed 004's decisions, edge cases."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import ClassVar

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from keyshared.loadbalance import (
    FULL_UPPER_BOUND,
    MAX_SPLIT_BUNDLES,
    MB,
    SPLIT_ALGORITHMS,
    MessageRates,
    NamespaceBundle,
    NamespaceBundles,
    can_split_bundle,
    flow_or_qps_equally_divide,
    range_equally_divide,
    specified_positions_divide,
    split_algorithm_of,
    split_bundles,
    topic_count_equally_divide,
    topic_hash,
)

# Seed 004's flow/QPS example: six topics on [0x00000000, 0x80000000).
FLOW_HASHES = {
    "t1": 0x10000000,
    "t2": 0x15000000,
    "t3": 0x24000000,
    "t4": 0x39000000,
    "t5": 0x58000000,
    "t6": 0x76000000,
}
FLOW_STATS = {
    f"t{i}": MessageRates(msg_rate_in=100.0 * i, msg_throughput_in=10.0 * i * MB)
    for i in range(1, 7)
}
HALF_RING = NamespaceBundle(0x00000000, 0x80000000)


def hashes_of(table: dict[str, int]) -> Callable[[str], int]:
    """A hash function that looks topics up, to place them where an example says."""
    return table.__getitem__


def flow(max_rate: int, max_mbytes: int, threshold: int = 10) -> tuple[int, ...] | None:
    return flow_or_qps_equally_divide(
        HALF_RING,
        FLOW_STATS,
        load_balancer_namespace_bundle_max_msg_rate=max_rate,
        load_balancer_namespace_bundle_max_bandwidth_mbytes=max_mbytes,
        flow_or_qps_difference_threshold_percentage=threshold,
        hash_function=hashes_of(FLOW_HASHES),
    )


def sides(boundaries: tuple[int, ...], table: dict[str, int]) -> list[list[str]]:
    """The topics of each part once split at the boundaries, in hash order."""
    parts: list[list[str]] = [[] for _ in range(len(boundaries) + 1)]
    for topic, hash_value in sorted(table.items(), key=lambda item: item[1]):
        parts[sum(1 for b in boundaries if b <= hash_value)].append(topic)
    return parts


class TestTopicHash:
    @pytest.mark.parametrize(
        ("name", "expected"),
        [
            ("", 0x00000000),
            ("hello", 0x3610A686),
            ("123456789", 0xCBF43926),
            ("The quick brown fox jumps over the lazy dog", 0x414FA339),
        ],
    )
    def test_known_crc32_values(self, name: str, expected: int) -> None:
        assert topic_hash(name) == expected

    def test_utf8_encoding_is_hashed(self) -> None:
        assert topic_hash("é") == topic_hash("\u00e9") != topic_hash("e")

    def test_rejects_bytes(self) -> None:
        with pytest.raises(TypeError, match="name"):
            topic_hash(b"hello")  # type: ignore[arg-type]


class TestNamespaceBundle:
    def test_half_open_except_at_the_end_of_the_ring(self) -> None:
        first, last = NamespaceBundle(0, 0x80000000), NamespaceBundle(0x80000000, FULL_UPPER_BOUND)
        assert first.includes_hash(0x7FFFFFFF) and not first.includes_hash(0x80000000)
        assert last.includes_hash(0x80000000) and last.includes_hash(FULL_UPPER_BOUND)

    def test_bundle_range_round_trip(self) -> None:
        bundle = NamespaceBundle(0x40000000, 0x80000000)
        assert bundle.bundle_range == "0x40000000_0x80000000"
        assert NamespaceBundle.from_bundle_range(bundle.bundle_range) == bundle
        assert NamespaceBundle.full() == NamespaceBundle(0, 0xFFFFFFFF)

    def test_includes_topic_by_name(self) -> None:
        name = "persistent://public/default/my-topic"
        assert NamespaceBundle.full().includes(name)
        inside = NamespaceBundle(topic_hash(name), topic_hash(name) + 1)
        assert inside.includes(name)

    @pytest.mark.parametrize(
        ("lower", "upper", "error", "field"),
        [
            (5, 5, ValueError, "lower_endpoint must be < upper_endpoint"),
            (6, 5, ValueError, "lower_endpoint must be < upper_endpoint"),
            (-1, 5, ValueError, "lower_endpoint"),
            (0, 0x1_0000_0000, ValueError, "upper_endpoint"),
            (True, 5, TypeError, "lower_endpoint"),
            (0, 5.0, TypeError, "upper_endpoint"),
        ],
    )
    def test_rejects_bad_ranges(
        self, lower: object, upper: object, error: type, field: str
    ) -> None:
        with pytest.raises(error, match=field):
            NamespaceBundle(lower, upper)  # type: ignore[arg-type]

    @pytest.mark.parametrize("text", ["0x10", "0x10_zz", "", "0x20_0x10"])
    def test_rejects_bad_bundle_range_text(self, text: str) -> None:
        with pytest.raises(ValueError, match="bundle_range"):
            NamespaceBundle.from_bundle_range(text)

    def test_includes_hash_rejects_out_of_ring_hash(self) -> None:
        with pytest.raises(ValueError, match="hash_value"):
            NamespaceBundle.full().includes_hash(1 << 32)


class TestSplitBundles:
    def test_seed_example_splits_at_the_given_boundary(self) -> None:
        # Seed 004: partitions [0x0000, 0x8000, 0xFFFF], boundary 0x4000 on [0x0000, 0x8000),
        # on the 32-bit ring.
        parts = split_bundles(HALF_RING, split_boundaries=[0x40000000])
        assert parts == (NamespaceBundle(0, 0x40000000), NamespaceBundle(0x40000000, 0x80000000))

    def test_equal_parts_follow_pulsars_segment_size(self) -> None:
        parts = split_bundles(NamespaceBundle.full(), 4)
        seg = 0xFFFFFFFF // 4
        assert [p.lower_endpoint for p in parts] == [0, seg, 2 * seg, 3 * seg]
        assert parts[-1].upper_endpoint == FULL_UPPER_BOUND

    def test_boundaries_may_come_in_any_order(self) -> None:
        parts = split_bundles(HALF_RING, split_boundaries=[0x60000000, 0x20000000])
        assert [p.lower_endpoint for p in parts] == [0, 0x20000000, 0x60000000]

    @pytest.mark.parametrize("boundaries", [[0], [0x80000000], [0x90000000], [0x10, 0x10], []])
    def test_rejects_boundaries_not_strictly_inside(self, boundaries: list[int]) -> None:
        with pytest.raises(ValueError, match="split_boundaries"):
            split_bundles(HALF_RING, split_boundaries=boundaries)

    def test_a_one_step_bundle_cannot_split(self) -> None:
        assert not can_split_bundle(NamespaceBundle(7, 8))
        with pytest.raises(ValueError, match="can't be split further"):
            split_bundles(NamespaceBundle(7, 8))

    @pytest.mark.parametrize("num_bundles", [1, 0, 4])
    def test_rejects_part_counts_that_leave_empty_parts(self, num_bundles: int) -> None:
        with pytest.raises(ValueError, match="num_bundles"):
            split_bundles(NamespaceBundle(0, 3), num_bundles)

    @pytest.mark.parametrize("num_bundles", [2**31 - 1, 2**24, MAX_SPLIT_BUNDLES + 1])
    def test_refuses_huge_part_counts(self, num_bundles: int) -> None:
        # Pulsar runs out of heap (or array size) here; keyshared refuses before allocating.
        with pytest.raises(ValueError, match=r"num_bundles must be at most 1048576"):
            split_bundles(NamespaceBundle.full(), num_bundles)
        with pytest.raises(ValueError, match="MAX_SPLIT_BUNDLES"):
            NamespaceBundles("t/ns").split_bundle(NamespaceBundle.full("t/ns"), num_bundles)

    def test_splits_into_the_most_parts_allowed(self) -> None:
        parts = split_bundles(NamespaceBundle.full(), MAX_SPLIT_BUNDLES)
        assert len(parts) == MAX_SPLIT_BUNDLES
        assert parts[0].lower_endpoint == 0 and parts[-1].upper_endpoint == FULL_UPPER_BOUND


class TestRangeEquallyDivide:
    def test_seed_example(self) -> None:
        assert range_equally_divide(HALF_RING) == (0x40000000,)

    def test_full_ring_rounds_down(self) -> None:
        assert range_equally_divide(NamespaceBundle.full()) == (0x7FFFFFFF,)

    def test_smallest_bundles(self) -> None:
        assert range_equally_divide(NamespaceBundle(10, 12)) == (11,)
        assert range_equally_divide(NamespaceBundle(10, 11)) is None


class TestTopicCountEquallyDivide:
    # Seed 004: six topics on [0x00000000, 0x80000000); its 0x50000000 is a slip, the
    # decision (three topics each side) holds with Pulsar's formula.
    SEED: ClassVar[dict[str, int]] = {
        "topic1": 0x10000000,
        "topic2": 0x20000000,
        "topic3": 0x35000000,
        "topic4": 0x65000000,
        "topic5": 0x70000000,
        "topic6": 0x75000000,
    }

    def test_seed_example_puts_three_topics_on_each_side(self) -> None:
        boundaries = topic_count_equally_divide(HALF_RING, self.SEED, hashes_of(self.SEED))
        assert boundaries == (0x35000000 + (0x65000000 - 0x35000000) // 2,)
        assert boundaries is not None
        assert sides(boundaries, self.SEED) == [
            ["topic1", "topic2", "topic3"],
            ["topic4", "topic5", "topic6"],
        ]

    def test_odd_count_sends_the_middle_topic_right(self) -> None:
        table = {"a": 100, "b": 200, "c": 300, "d": 400, "e": 500}
        boundaries = topic_count_equally_divide(HALF_RING, table, hashes_of(table))
        assert boundaries == (250,)
        assert sides(boundaries, table) == [["a", "b"], ["c", "d", "e"]]

    def test_two_topics_one_hash_apart_both_go_right(self) -> None:
        # Pulsar's midpoint rounds down onto the lower topic, which then starts the right part.
        table = {"a": 100, "b": 101}
        boundaries = topic_count_equally_divide(HALF_RING, table, hashes_of(table))
        assert boundaries == (100,)
        assert sides(boundaries, table) == [[], ["a", "b"]]

    @pytest.mark.parametrize("topics", [[], ["only"]])
    def test_fewer_than_two_topics_do_not_split(self, topics: list[str]) -> None:
        assert topic_count_equally_divide(NamespaceBundle.full(), topics) is None

    def test_topics_all_on_the_lower_edge_do_not_split(self) -> None:
        table = {"a": 0, "b": 0}
        assert topic_count_equally_divide(HALF_RING, table, hashes_of(table)) is None

    def test_real_topic_names_use_crc32(self) -> None:
        names = [f"persistent://tenant/ns/topic-{i}" for i in range(10)]
        boundaries = topic_count_equally_divide(NamespaceBundle.full(), names)
        assert boundaries is not None
        left = [n for n in names if topic_hash(n) < boundaries[0]]
        assert len(left) == 5

    def test_rejects_topic_outside_the_bundle(self) -> None:
        table = {"inside": 5, "outside": 0x90000000}
        with pytest.raises(ValueError, match=r"'outside'.*outside bundle"):
            topic_count_equally_divide(HALF_RING, table, hashes_of(table))

    def test_rejects_duplicate_and_malformed_topics(self) -> None:
        with pytest.raises(ValueError, match="listed twice"):
            topic_count_equally_divide(NamespaceBundle.full(), ["a", "a"])
        with pytest.raises(TypeError, match="single str"):
            topic_count_equally_divide(NamespaceBundle.full(), "ab")
        with pytest.raises(TypeError, match=r"topics\[0\] must be a str, got int"):
            topic_count_equally_divide(NamespaceBundle.full(), [1, 2])  # type: ignore[list-item]


class TestSpecifiedPositionsDivide:
    def test_seed_example_separates_the_two_large_topics(self) -> None:
        # Seed 004: topic1 at 0x30000000, topic2 at 0x35000000, bundle [0, 0x40000000).
        table = {"topic1": 0x30000000, "topic2": 0x35000000}
        bundle = NamespaceBundle(0, 0x40000000)
        boundaries = specified_positions_divide(bundle, table, [0x33000000], hashes_of(table))
        assert boundaries == (0x33000000,)
        assert sides(boundaries, table) == [["topic1"], ["topic2"]]

    def test_keeps_only_positions_strictly_inside_sorted_once(self) -> None:
        table = {"a": 1, "b": 2}
        positions = [0x80000000, 0x30000000, 0, 0x10000000, 0x30000000, 0xFFFFFFFF]
        assert specified_positions_divide(HALF_RING, table, positions, hashes_of(table)) == (
            0x10000000,
            0x30000000,
        )

    def test_no_position_inside_means_no_split(self) -> None:
        table = {"a": 1, "b": 2}
        assert (
            specified_positions_divide(HALF_RING, table, [0, 0x80000000], hashes_of(table)) is None
        )

    def test_fewer_than_two_topics_do_not_split(self) -> None:
        assert specified_positions_divide(HALF_RING, {"a": 1}, [5], hashes_of({"a": 1})) is None

    def test_drops_positions_off_the_ring(self) -> None:
        table = {"a": 1, "b": 2}
        positions = [-1, 1 << 32, 0x10000000]
        assert specified_positions_divide(HALF_RING, table, positions, hashes_of(table)) == (
            0x10000000,
        )

    def test_rejects_empty_or_malformed_positions(self) -> None:
        with pytest.raises(ValueError, match="positions must not be empty"):
            specified_positions_divide(HALF_RING, [], [])
        with pytest.raises(TypeError, match=r"positions\[0\] must be an int, got float"):
            specified_positions_divide(HALF_RING, [], [1.5])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="positions must be a collection"):
            specified_positions_divide(HALF_RING, [], None)  # type: ignore[arg-type]


class TestFlowOrQpsEquallyDivide:
    """Seed 004's three cases: decisions from the seed, numbers from Pulsar's formula."""

    @staticmethod
    def between(low: str, high: str) -> int:
        a, b = FLOW_HASHES[low], FLOW_HASHES[high]
        return a + (b - a) // 2 + 1

    def test_case_1_message_rate_reaches_the_limit_first(self) -> None:
        boundaries = flow(450, 200)
        assert boundaries == (
            self.between("t2", "t3"),
            self.between("t3", "t4"),
            self.between("t4", "t5"),
            self.between("t5", "t6"),
        )
        assert boundaries == (0x1C800001, 0x2E800001, 0x48800001, 0x67000001)
        assert sides(boundaries, FLOW_HASHES) == [["t1", "t2"], ["t3"], ["t4"], ["t5"], ["t6"]]

    def test_case_2_throughput_reaches_the_limit_first(self) -> None:
        # 40 + 50 = 90 MB/s is not above 90: t4 and t5 stay together.
        boundaries = flow(1900, 90)
        assert boundaries == (self.between("t3", "t4"), self.between("t5", "t6"))
        assert sides(boundaries, FLOW_HASHES) == [["t1", "t2", "t3"], ["t4", "t5"], ["t6"]]

    def test_case_3_both_limits_agree(self) -> None:
        # 500 + 600 = 1100 msg/s and 50 + 60 = 110 MB/s equal the limits: no second split.
        boundaries = flow(1100, 110)
        assert boundaries == (self.between("t4", "t5"),) == (0x48800001,)
        assert sides(boundaries, FLOW_HASHES) == [["t1", "t2", "t3", "t4"], ["t5", "t6"]]

    def test_defaults_are_30000_msgs_and_100_mbytes(self) -> None:
        table = {"a": 10, "b": 20}
        calm = {"a": MessageRates(msg_rate_in=16000), "b": MessageRates(msg_rate_in=16000)}
        hot = {"a": MessageRates(msg_rate_in=17000), "b": MessageRates(msg_rate_in=17000)}
        heavy = {
            "a": MessageRates(msg_throughput_out=56 * MB),
            "b": MessageRates(msg_throughput_out=56 * MB),
        }
        assert flow_or_qps_equally_divide(HALF_RING, calm, hash_function=hashes_of(table)) is None
        assert flow_or_qps_equally_divide(HALF_RING, hot, hash_function=hashes_of(table)) == (16,)
        assert flow_or_qps_equally_divide(HALF_RING, heavy, hash_function=hashes_of(table)) == (16,)

    def test_bundle_below_limits_times_threshold_does_not_split(self) -> None:
        # Total 2100 msg/s; 1909 * 1.1 = 2099.9 splits, 1910 * 1.1 = 2101 does not.
        assert flow(1909, 10_000) is not None
        assert flow(1910, 10_000) is None

    def test_total_equal_to_limit_times_threshold_splits(self) -> None:
        # 1400 * 1.5 == 2100, the total rate exactly: "total < limit" fails, so it splits.
        assert flow(1400, 10_000, threshold=50) == (self.between("t4", "t5"),)
        assert flow(1401, 10_000, threshold=50) is None

    def test_fewer_than_two_loaded_topics_do_not_split(self) -> None:
        table = {"hot": 10, "idle": 20}
        stats = {"hot": MessageRates(msg_rate_in=1e9), "idle": MessageRates()}
        assert flow_or_qps_equally_divide(HALF_RING, stats, hash_function=hashes_of(table)) is None

    def test_idle_topics_do_not_move_boundaries(self) -> None:
        table = {**FLOW_HASHES, "idle": 0x30000000}
        stats = {**FLOW_STATS, "idle": MessageRates()}
        assert flow_or_qps_equally_divide(
            HALF_RING,
            stats,
            load_balancer_namespace_bundle_max_msg_rate=450,
            load_balancer_namespace_bundle_max_bandwidth_mbytes=200,
            hash_function=hashes_of(table),
        ) == flow(450, 200)

    def test_colliding_topics_move_together(self) -> None:
        table = {"a": 100, "b": 100, "c": 200}
        stats = {name: MessageRates(msg_rate_in=600) for name in table}
        boundaries = flow_or_qps_equally_divide(
            HALF_RING,
            stats,
            load_balancer_namespace_bundle_max_msg_rate=1000,
            hash_function=hashes_of(table),
        )
        assert boundaries == (151,)

    def test_boundary_on_the_last_hash_of_the_ring_means_no_split(self) -> None:
        table = {"a": 0xFFFFFFFE, "b": 0xFFFFFFFF}
        stats = {name: MessageRates(msg_rate_in=20_000) for name in table}
        bundle = NamespaceBundle(0x80000000, FULL_UPPER_BOUND)
        assert flow_or_qps_equally_divide(bundle, stats, hash_function=hashes_of(table)) is None

    def test_rejects_bad_arguments(self) -> None:
        with pytest.raises(ValueError, match="load_balancer_namespace_bundle_max_msg_rate"):
            flow(-1, 100)
        with pytest.raises(TypeError, match="topic_stats\\['t1'\\]"):
            flow_or_qps_equally_divide(HALF_RING, {"t1": 5})  # type: ignore[dict-item]
        with pytest.raises(ValueError, match="msg_rate_in"):
            MessageRates(msg_rate_in=float("nan"))


# --- Pulsar's split algorithm tests --------------------------------------------------------


class TestRangeEquallyDivideBundleSplitAlgorithmTest:
    def test_get_split_boundary_method_return_correct_result(self) -> None:
        with pytest.raises(TypeError, match="bundle must be a NamespaceBundle"):
            range_equally_divide(None)  # type: ignore[arg-type]
        lower, upper = 10, 0xFFFFFFFF
        bundle = NamespaceBundle(lower, upper, "pulsar/system")
        assert range_equally_divide(bundle) == (lower + (upper - lower) // 2,)


class TestTopicCountEquallyDivideBundleSplitAlgorithmTest:
    def test_wrong_arg(self) -> None:
        with pytest.raises(TypeError, match="bundle must be a NamespaceBundle"):
            topic_count_equally_divide(None, [])  # type: ignore[arg-type]

    def test_topics_size_less_than1(self) -> None:
        assert topic_count_equally_divide(NamespaceBundle.full(), ["a"]) is None

    def test_algorithm_return_correct_result(self) -> None:
        topics = ["a", "b", "c"]
        hashes = sorted(topic_hash(t) for t in topics)
        split_start = hashes[max(len(hashes) // 2 - 1, 0)]
        split_end = hashes[len(hashes) // 2]
        expected = split_start + (split_end - split_start) // 2
        assert topic_count_equally_divide(NamespaceBundle.full(), topics) == (expected,)


class TestSpecifiedPositionsBundleSplitAlgorithmTest:
    def test_total_topics_size_less_than1(self) -> None:
        assert specified_positions_divide(NamespaceBundle.full(), ["a"], [1, 2]) is None

    def test_specified_positions_less_than1(self) -> None:
        with pytest.raises(TypeError, match="positions"):
            specified_positions_divide(NamespaceBundle.full(), [], None)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="positions must not be empty"):
            specified_positions_divide(NamespaceBundle.full(), [], [])

    def test_algorithm_return_correct_result(self) -> None:
        # Pulsar mocks the bundle [1, 1000) and its two topics; the topics only count.
        table = {"topic": 5, "topic2": 6}
        positions = [-1, 0, 1, 100, 200, 500, 800, 1000, 1100]
        boundaries = specified_positions_divide(
            NamespaceBundle(1, 1000), table, positions, hashes_of(table)
        )
        assert boundaries == (100, 200, 500, 800)


class TestFlowOrQpsEquallyDivideBundleSplitAlgorithmTest:
    MAX_MSG_RATE = 1010
    MAX_MBYTES = 100

    def divide(self, stats: dict[str, MessageRates]) -> tuple[int, ...] | None:
        return flow_or_qps_equally_divide(
            NamespaceBundle.full(),
            stats,
            load_balancer_namespace_bundle_max_msg_rate=self.MAX_MSG_RATE,
            load_balancer_namespace_bundle_max_bandwidth_mbytes=self.MAX_MBYTES,
            flow_or_qps_difference_threshold_percentage=10,
        )

    def test_split_bundle_by_flow_or_qps(self) -> None:
        stats: dict[str, MessageRates] = {}
        for i in range(1, 13):
            rate_in = 24.5 if i < 6 else 25.5
            for j in range(20):
                name = f"persistent://test-tenant1/test-namespace1/test{i}-partition-{j}"
                stats[name] = MessageRates(rate_in, 25, 1000, 1000)
        stats["persistent://test-tenant1/test-namespace1/test695-partition-0"] = MessageRates(
            25, 35, 1000, 1000
        )
        boundaries = self.divide(stats)
        assert boundaries
        ordered = sorted(stats, key=topic_hash)
        i = 0
        for position in boundaries:
            part_rate = part_throughput = 0.0
            while topic_hash(ordered[i]) < position:
                part_rate += stats[ordered[i]].msg_rate
                part_throughput += stats[ordered[i]].msg_throughput
                i += 1
            assert part_rate < self.MAX_MSG_RATE
            assert part_throughput < self.MAX_MBYTES * MB

    def test_first_position_is_over_load(self) -> None:
        names = [f"persistent://test-tenant1/test-namespace1/test-partition-{i}" for i in range(5)]
        ordered = sorted(names, key=topic_hash)
        stats = {ordered[0]: MessageRates(1000, 1000, 1000, 1000)}
        stats |= {name: MessageRates(24.5, 25, 1000, 1000) for name in ordered[1:]}
        boundaries = self.divide(stats)
        assert boundaries is not None
        start, end = topic_hash(ordered[0]), topic_hash(ordered[1])
        assert boundaries[0] == start + (end - start) // 2 + 1


class TestNamespaceBundleSplitAlgorithmTest:
    def test_of_method_return_correct_value(self) -> None:
        assert split_algorithm_of(None) is None
        assert split_algorithm_of("whatever") is None
        assert split_algorithm_of("range_equally_divide") is range_equally_divide
        assert split_algorithm_of("topic_count_equally_divide") is topic_count_equally_divide
        assert split_algorithm_of("specified_positions_divide") is specified_positions_divide
        assert split_algorithm_of("flow_or_qps_equally_divide") is flow_or_qps_equally_divide
        assert set(SPLIT_ALGORITHMS) == {
            "range_equally_divide",
            "topic_count_equally_divide",
            "specified_positions_divide",
            "flow_or_qps_equally_divide",
        }
        with pytest.raises(TypeError, match="name must be a str or None"):
            split_algorithm_of(1)  # type: ignore[arg-type]


# --- properties -------------------------------------------------------------------------

ring_hash = st.integers(min_value=0, max_value=FULL_UPPER_BOUND)


@st.composite
def bundle_with_topics(draw: st.DrawFn) -> tuple[NamespaceBundle, dict[str, int]]:
    lower, upper = sorted(draw(st.lists(ring_hash, min_size=2, max_size=2, unique=True)))
    bundle = NamespaceBundle(lower, upper)
    top = upper if upper == FULL_UPPER_BOUND else upper - 1
    hashes = draw(st.lists(st.integers(lower, top), max_size=12))
    return bundle, {f"topic-{i}": h for i, h in enumerate(hashes)}


def assert_well_formed(bundle: NamespaceBundle, boundaries: tuple[int, ...] | None) -> None:
    if boundaries is None:
        return
    assert boundaries, "an empty split is reported as None"
    assert all(bundle.lower_endpoint < b < bundle.upper_endpoint for b in boundaries)
    assert list(boundaries) == sorted(set(boundaries))
    parts = split_bundles(bundle, split_boundaries=boundaries)
    assert parts[0].lower_endpoint == bundle.lower_endpoint
    assert parts[-1].upper_endpoint == bundle.upper_endpoint


@given(bundle_with_topics())
def test_range_and_topic_count_boundaries_are_inside_and_ascending(
    case: tuple[NamespaceBundle, dict[str, int]],
) -> None:
    bundle, table = case
    assert_well_formed(bundle, range_equally_divide(bundle))
    boundaries = topic_count_equally_divide(bundle, table, hashes_of(table))
    assert_well_formed(bundle, boundaries)
    if boundaries is not None:
        ordered = sorted(table.values())
        middle = len(ordered) // 2
        assert ordered[middle - 1] <= boundaries[0] <= ordered[middle]


@given(bundle_with_topics(), st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=6))
def test_specified_positions_are_inside_and_ascending(
    case: tuple[NamespaceBundle, dict[str, int]], positions: list[int]
) -> None:
    bundle, table = case
    assert_well_formed(
        bundle, specified_positions_divide(bundle, table, positions, hashes_of(table))
    )


rates = st.floats(min_value=0, max_value=5000, allow_nan=False)


@given(bundle_with_topics(), st.data())
def test_flow_parts_stay_within_limits(
    case: tuple[NamespaceBundle, dict[str, int]], data: st.DataObject
) -> None:
    bundle, table = case
    assume(table)
    stats = {
        name: MessageRates(msg_rate_in=data.draw(rates), msg_throughput_in=data.draw(rates) * 1024)
        for name in table
    }
    boundaries = flow_or_qps_equally_divide(
        bundle,
        stats,
        load_balancer_namespace_bundle_max_msg_rate=4000,
        load_balancer_namespace_bundle_max_bandwidth_mbytes=4,
        hash_function=hashes_of(table),
    )
    assert_well_formed(bundle, boundaries)
    assume(boundaries is not None)
    # Every part holding more than one loaded hash stays within both limits.
    loaded = {h for name, h in table.items() if stats[name].msg_rate or stats[name].msg_throughput}
    edges = [bundle.lower_endpoint, *(boundaries or ()), FULL_UPPER_BOUND + 1]
    for low, high in pairwise(edges):
        in_part = [n for n, h in table.items() if low <= h < high and h in loaded]
        if len({table[n] for n in in_part}) > 1:
            assert sum(stats[n].msg_rate for n in in_part) <= 4000 + 1e-6
            assert sum(stats[n].msg_throughput for n in in_part) <= 4 * MB + 1e-6
