"""Shedders: Pulsar's rules at their edges, Pulsar's own test scenarios, and properties."""

from __future__ import annotations

import statistics
import sys
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keyshared.loadbalance import (
    DEFAULT_PULSAR_VERSION,
    MB,
    PULSAR_VERSIONS,
    AvgShedder,
    AvgShedderState,
    BrokerLoad,
    LoadData,
    MessageRates,
    OverloadShedder,
    ResourceUsage,
    ShedderInputs,
    SheddingResult,
    ThresholdShedder,
    ThresholdShedderState,
    TransferShedder,
    TransferShedderState,
    TransferSheddingResult,
    UniformLoadShedder,
    Unload,
    bundle_namespace,
    is_system_service_namespace,
    top_k_bundles,
)
from keyshared.loadbalance.transfer_shedder import TopBundles

NOW = 1_700_000_000_000


def broker(
    cpu: float = 0.0,
    bundles: Iterable[str] = (),
    *,
    rate: float = 0.0,
    throughput: float = 0.0,
    updated_at_ms: int = NOW,
    **usage: float,
) -> BrokerLoad:
    """A broker report; ``rate`` and ``throughput`` are its totals (all counted as "in")."""
    return BrokerLoad(
        usage=ResourceUsage(cpu=cpu, **usage),
        rates=MessageRates(msg_rate_in=rate, msg_throughput_in=throughput),
        bundles=frozenset(bundles),
        updated_at_ms=updated_at_ms,
    )


def load(throughput: float = 0.0, rate: float = 0.0) -> MessageRates:
    return MessageRates(msg_rate_in=rate, msg_throughput_in=throughput)


def snapshot(
    brokers: Mapping[str, BrokerLoad],
    bundles: Mapping[str, MessageRates] | None = None,
    recent: Iterable[str] = (),
) -> LoadData:
    return LoadData(brokers, bundles or {}, frozenset(recent))


def unloaded(result: SheddingResult[object]) -> list[tuple[str, str]]:
    return [(u.source_broker, u.service_unit) for u in result.unloads]


def reason_for(result: SheddingResult[object], broker_name: str) -> str:
    return next(r for r in result.reasons if r.startswith(f"{broker_name}:"))


# --- OverloadShedder ---------------------------------------------------------------------


class TestOverloadShedder:
    SHEDDER = OverloadShedder()

    def hot(self, cpu: float = 90.0, recent: Iterable[str] = ()) -> LoadData:
        sizes = {"b1": 6, "b2": 5, "b3": 4, "b4": 1}
        return snapshot(
            {"hot": broker(cpu, sizes, throughput=100 * MB), "cold": broker(10.0, ["c1", "c2"])},
            {name: load(size * MB) for name, size in sizes.items()}
            | {"c1": load(MB), "c2": load(MB)},
            recent,
        )

    def test_sheds_largest_bundles_until_the_minimum_is_reached(self) -> None:
        # 90 % - 85 % + 5 % of 100 MB/s: at least 10 MB/s, so 6 + 5 MB/s.
        result = self.SHEDDER.find_bundles_for_unloading(self.hot())
        assert unloaded(result) == [("hot", "b1"), ("hot", "b2")]
        assert "not overloaded" in reason_for(result, "cold")
        assert result.state is None

    def test_threshold_is_reached_at_exactly_85_percent(self) -> None:
        assert self.SHEDDER.find_bundles_for_unloading(self.hot(cpu=85.0)).unloads
        assert not self.SHEDDER.find_bundles_for_unloading(self.hot(cpu=84.99)).unloads

    def test_skips_recently_unloaded_bundles(self) -> None:
        result = self.SHEDDER.find_bundles_for_unloading(self.hot(recent=["b1"]))
        assert unloaded(result) == [("hot", "b2"), ("hot", "b3"), ("hot", "b4")]

    def test_all_recent_means_nothing_to_unload(self) -> None:
        result = self.SHEDDER.find_bundles_for_unloading(self.hot(recent=["b1", "b2", "b3", "b4"]))
        assert not result.unloads
        assert "no bundle with load data is free" in reason_for(result, "hot")

    def test_a_broker_with_one_bundle_is_not_shed(self) -> None:
        data = snapshot({"hot": broker(99.0, ["only"], throughput=MB)}, {"only": load(MB)})
        result = self.SHEDDER.find_bundles_for_unloading(data)
        assert not result.unloads
        assert "sole bundle only" in reason_for(result, "hot")

    def test_a_broker_without_bundles_is_not_shed(self) -> None:
        result = self.SHEDDER.find_bundles_for_unloading(snapshot({"hot": broker(99.0)}))
        assert not result.unloads
        assert "no bundles" in reason_for(result, "hot")

    def test_zero_traffic_still_sheds_one_bundle(self) -> None:
        data = snapshot({"hot": broker(95.0, ["x", "y"])}, {"x": load(), "y": load()})
        assert unloaded(self.SHEDDER.find_bundles_for_unloading(data)) == [("hot", "x")]

    def test_bundles_without_data_count_but_are_never_shed(self) -> None:
        data = snapshot({"hot": broker(95.0, ["system", "user"])}, {"user": load(MB)})
        assert unloaded(self.SHEDDER.find_bundles_for_unloading(data)) == [("hot", "user")]

    def test_resource_weights_decide_what_counts(self) -> None:
        direct = snapshot({"a": broker(0.0, ["x", "y"], direct_memory=99.0)})
        assert not self.SHEDDER.find_bundles_for_unloading(direct).unloads
        network = snapshot({"a": broker(0.0, ["x", "y"], bandwidth_out=99.0)}, {"x": load(1)})
        assert unloaded(self.SHEDDER.find_bundles_for_unloading(network)) == [("a", "x")]

    def test_equal_bundles_go_by_name(self) -> None:
        data = snapshot({"hot": broker(95.0, ["z", "a", "m"])}, {n: load(MB) for n in "zam"})
        assert unloaded(self.SHEDDER.find_bundles_for_unloading(data)) == [("hot", "a")]


def pulsar_numbered_bundles(
    broker_name: str,
    usage: ResourceUsage,
    *,
    other: str | None = None,
    count: int = 10,
) -> tuple[dict[str, BrokerLoad], dict[str, MessageRates]]:
    """The set-up of Pulsar's testBrokerWithMultipleBundles: bundle-i at i MB/s in and out.

    With ``other``, that broker owns a copy of every bundle under another name, which the
    shedder must not pick for ``broker_name``.
    """
    names = [f"bundle-{i}" for i in range(1, count + 1)]
    rates = {f"bundle-{i}": MessageRates(0, 0, i * MB, i * MB) for i in range(1, count + 1)}
    total = sum(i * MB for i in range(1, count + 1))
    brokers = {broker_name: BrokerLoad(usage, MessageRates(0, 0, total, total), frozenset(names))}
    if other is not None:
        copies = {f"{other}-bundle-{count + i}": rates[f"bundle-{i}"] for i in range(1, count + 1)}
        brokers[other] = BrokerLoad(bundles=frozenset(copies))
        rates |= copies
    return brokers, rates


#: ``new ResourceUsage(999, 1000)`` on both bandwidths: 99.9 %.
BUSY_NETWORK = ResourceUsage(bandwidth_in=99.9, bandwidth_out=99.9)
HALF_NETWORK = ResourceUsage(bandwidth_in=50.0, bandwidth_out=50.0)
SOLE_BUNDLE = {"bundle-1": MessageRates(0, 0, 1000, 1000)}


def sole_bundle_broker(usage: ResourceUsage) -> LoadData:
    return snapshot({"broker-1": BrokerLoad(usage, bundles=frozenset({"bundle-1"}))}, SOLE_BUNDLE)


class TestOverloadShedderTest:
    """Pulsar's OverloadShedderTest (threshold 85 %)."""

    SHEDDER = OverloadShedder(load_balancer_broker_overloaded_threshold_percentage=85)

    def test_no_brokers(self) -> None:
        assert not self.SHEDDER.find_bundles_for_unloading(snapshot({})).unloads

    def test_brokers_with_no_bundles(self) -> None:
        data = snapshot({"broker-1": BrokerLoad(BUSY_NETWORK)})
        assert not self.SHEDDER.find_bundles_for_unloading(data).unloads

    def test_broker_not_overloaded(self) -> None:
        result = self.SHEDDER.find_bundles_for_unloading(sole_bundle_broker(HALF_NETWORK))
        assert not result.unloads

    def test_broker_with_single_bundle(self) -> None:
        result = self.SHEDDER.find_bundles_for_unloading(sole_bundle_broker(BUSY_NETWORK))
        assert not result.unloads

    def test_broker_with_multiple_bundles(self) -> None:
        brokers, bundles = pulsar_numbered_bundles("broker-1", BUSY_NETWORK, other="another-broker")
        result = self.SHEDDER.find_bundles_for_unloading(snapshot(brokers, bundles))
        assert unloaded(result) == [("broker-1", "bundle-10"), ("broker-1", "bundle-9")]

    def test_filter_recently_unloaded(self) -> None:
        brokers, bundles = pulsar_numbered_bundles("broker-1", BUSY_NETWORK)
        data = snapshot(brokers, bundles, ["bundle-10", "bundle-9"])
        result = self.SHEDDER.find_bundles_for_unloading(data)
        assert unloaded(result) == [("broker-1", "bundle-8"), ("broker-1", "bundle-7")]


# --- ThresholdShedder --------------------------------------------------------------------


def threshold_cluster(usages: Mapping[str, float], throughput: float = 100 * MB) -> LoadData:
    brokers = {
        name: broker(cpu, [f"{name}-1", f"{name}-2", f"{name}-3"], throughput=throughput)
        for name, cpu in usages.items()
    }
    bundles = {
        f"{name}-{i}": load(size * MB) for name in usages for i, size in ((1, 10), (2, 8), (3, 5))
    }
    return snapshot(brokers, bundles)


class TestThresholdShedder:
    def test_seed_example_sheds_only_the_broker_above_average_plus_threshold(self) -> None:
        # Seed 004: 40 %, 10 %, 10 %: average 20 %, threshold 10 %: only broker1 (40 % > 30 %).
        result = ThresholdShedder().find_bundles_for_unloading(
            threshold_cluster({"broker1": 40, "broker2": 10, "broker3": 10})
        )
        # 40 - 20 - 10 + 5 = 15 % of 100 MB/s: 10 + 8 MB/s.
        assert unloaded(result) == [("broker1", "broker1-1"), ("broker1", "broker1-2")]
        assert "not overloaded" in reason_for(result, "broker2")
        assert result.state.broker_avg_resource_usage == {
            "broker1": 0.4,
            "broker2": 0.1,
            "broker3": 0.1,
        }

    def test_usage_equal_to_average_plus_threshold_is_shed(self) -> None:
        shedder = ThresholdShedder(load_balancer_broker_threshold_shedder_percentage=25)
        data = threshold_cluster({"a": 50, "b": 0, "c": 25}, throughput=300 * MB)
        # Average 25 % + threshold 25 % == 50 %: "usage < avg + threshold" fails, so it sheds.
        assert unloaded(shedder.find_bundles_for_unloading(data))[0] == ("a", "a-1")

    def test_too_little_traffic_to_offload_is_skipped(self) -> None:
        data = threshold_cluster({"broker1": 40, "broker2": 10, "broker3": 10}, throughput=60 * MB)
        result = ThresholdShedder().find_bundles_for_unloading(data)
        assert not result.unloads
        assert "below the minimum" in reason_for(result, "broker1")

    def test_history_smooths_usage_across_calls(self) -> None:
        shedder = ThresholdShedder()
        first = shedder.find_bundles_for_unloading(threshold_cluster({"a": 40, "b": 10, "c": 10}))
        second = shedder.find_bundles_for_unloading(
            threshold_cluster({"a": 10, "b": 10, "c": 10}), first.state
        )
        assert second.state.broker_avg_resource_usage["a"] == pytest.approx(0.4 * 0.9 + 0.1 * 0.1)
        # 0.37 is still above the 0.19 average + 0.10: smoothing keeps shedding.
        assert unloaded(second)[0] == ("a", "a-1")

    def test_zero_average_usage_sheds_nothing(self) -> None:
        result = ThresholdShedder().find_bundles_for_unloading(threshold_cluster({"a": 0, "b": 0}))
        assert not result.unloads
        assert result.reasons[-1] == "average max resource usage is 0; nothing to shed"

    def test_readings_above_100_percent_count_in_full(self) -> None:
        data = snapshot({"a": broker(150.0, bandwidth_in=20.0), "b": broker(20.0)})
        result = ThresholdShedder().find_bundles_for_unloading(data)
        assert result.state.broker_avg_resource_usage["a"] == pytest.approx(1.5)

    def test_lower_boundary_shedding_moves_load_to_an_idle_broker(self) -> None:
        # Average 18.75 %: nobody reaches 28.75 %, but d is below 8.75 %.
        data = threshold_cluster({"a": 25, "b": 25, "c": 25, "d": 0}, throughput=400 * MB)
        assert not ThresholdShedder().find_bundles_for_unloading(data).unloads
        shedder = ThresholdShedder(lower_boundary_shedding_enabled=True)
        result = shedder.find_bundles_for_unloading(data)
        # Equal usage: the first broker by name; 400 MB/s * 10 % / 2 = 20 MB/s to offload.
        assert unloaded(result) == [("a", "a-1"), ("a", "a-2"), ("a", "a-3")]
        assert "lower boundary" in result.reasons[-1]

    def test_lower_boundary_pass_smooths_history_a_second_time(self) -> None:
        shedder = ThresholdShedder(lower_boundary_shedding_enabled=True)
        previous = ThresholdShedderState({"a": 0.3, "b": 0.25, "c": 0.25, "d": 0.0})
        data = threshold_cluster({"a": 25, "b": 25, "c": 25, "d": 0}, throughput=400 * MB)
        result = shedder.find_bundles_for_unloading(data, previous)
        once = 0.3 * 0.9 + 0.1 * 0.25
        assert result.state.broker_avg_resource_usage["a"] == pytest.approx(once * 0.9 + 0.025)
        assert unloaded(result)[0] == ("a", "a-1")

    def test_lower_boundary_needs_a_broker_below_the_bound(self) -> None:
        shedder = ThresholdShedder(lower_boundary_shedding_enabled=True)
        result = shedder.find_bundles_for_unloading(threshold_cluster({"a": 24, "b": 25}))
        assert not result.unloads
        assert result.reasons[-1].startswith("lower boundary: no broker is below")


def lower_boundary_cluster(
    loads: Mapping[int, float], bundle_counts: Mapping[int, int], throughput: float
) -> LoadData:
    """The set-up of Pulsar's lower-boundary tests: broker-i at loads[i] % of both bandwidths.

    Pulsar's test also lists bundle-0..9, without load data, in every broker; a bundle
    belongs to one broker here, and bundles without data are never shed, so those are
    left out: each broker keeps more than one bundle wherever Pulsar's had.
    """
    brokers: dict[str, BrokerLoad] = {}
    bundles: dict[str, MessageRates] = {}
    for i, load_pct in loads.items():
        traffic = throughput if load_pct else 0.0
        names = [f"broker-{i}-bundle-{j}" for j in range(bundle_counts[i])]
        bundles |= {n: MessageRates(0, 0, traffic, traffic) for n in names}
        brokers[f"broker-{i}"] = BrokerLoad(
            ResourceUsage(bandwidth_in=load_pct, bandwidth_out=load_pct),
            MessageRates(0, 0, traffic, traffic),
            frozenset(names),
        )
    return snapshot(brokers, bundles)


class TestThresholdShedderTest:
    """Pulsar's ThresholdShedderTest (defaults, lower-boundary shedding off unless set)."""

    SHEDDER = ThresholdShedder()
    LOWER_BOUNDARY = ThresholdShedder(lower_boundary_shedding_enabled=True)

    def test_no_brokers(self) -> None:
        assert not self.SHEDDER.find_bundles_for_unloading(snapshot({})).unloads

    def test_brokers_with_no_bundles(self) -> None:
        data = snapshot({"broker-1": BrokerLoad(BUSY_NETWORK)})
        assert not self.SHEDDER.find_bundles_for_unloading(data).unloads

    def test_broker_not_reach_threshold(self) -> None:
        result = self.SHEDDER.find_bundles_for_unloading(sole_bundle_broker(HALF_NETWORK))
        assert not result.unloads

    def test_broker_reach_threshold(self) -> None:
        # 140 % CPU is a reading to act on (apache/pulsar#18645 reverted ignoring it).
        busy = BrokerLoad(
            ResourceUsage(cpu=140, direct_memory=10, bandwidth_in=50, bandwidth_out=50),
            MessageRates(msg_throughput_in=sys.float_info.max),
            frozenset({"bundle-1", "bundle-2"}),
        )
        calm = BrokerLoad(
            ResourceUsage(cpu=10, direct_memory=10, bandwidth_in=50, bandwidth_out=50),
            bundles=frozenset({"bundle-3", "bundle-4"}),
        )
        data = snapshot(
            {"broker-2": busy, "broker-3": calm}, {"bundle-2": MessageRates(0, 0, 1000, 1000)}
        )
        result = self.SHEDDER.find_bundles_for_unloading(data)
        assert unloaded(result) == [("broker-2", "bundle-2")]

    def test_broker_with_single_bundle(self) -> None:
        result = self.SHEDDER.find_bundles_for_unloading(sole_bundle_broker(BUSY_NETWORK))
        assert not result.unloads

    def test_broker_with_multiple_bundles(self) -> None:
        brokers, bundles = pulsar_numbered_bundles("broker-1", BUSY_NETWORK, other="broker2")
        result = self.SHEDDER.find_bundles_for_unloading(snapshot(brokers, bundles))
        assert unloaded(result) == [
            ("broker-1", "bundle-10"),
            ("broker-1", "bundle-9"),
            ("broker-1", "bundle-8"),
        ]

    def test_filter_recently_unloaded(self) -> None:
        brokers, bundles = pulsar_numbered_bundles("broker-1", BUSY_NETWORK, other="broker2")
        data = snapshot(brokers, bundles, ["bundle-10", "bundle-9"])
        result = self.SHEDDER.find_bundles_for_unloading(data)
        assert unloaded(result) == [
            ("broker-1", "bundle-8"),
            ("broker-1", "bundle-7"),
            ("broker-1", "bundle-6"),
            ("broker-1", "bundle-5"),
        ]

    def test_lower_boundary_shedding(self) -> None:
        # Ten brokers at 80 %, one idle: the average 72.73 % + 10 % is reached by none.
        data = lower_boundary_cluster(
            {i: 0.0 if i == 10 else 80.0 for i in range(11)}, dict.fromkeys(range(11), 10), 100 * MB
        )
        assert not self.SHEDDER.find_bundles_for_unloading(data).unloads
        assert self.LOWER_BOUNDARY.find_bundles_for_unloading(data).unloads

    def test_lower_boundary_shedding_no_broker_to_offload(self) -> None:
        data = lower_boundary_cluster(
            dict.fromkeys(range(11), 80.0), dict.fromkeys(range(11), 10), 80 * MB
        )
        assert not self.SHEDDER.find_bundles_for_unloading(data).unloads
        assert not self.LOWER_BOUNDARY.find_bundles_for_unloading(data).unloads

    def test_lower_boundary_shedding_broker_with_one_bundle(self) -> None:
        # Only broker-3 has more than one bundle; broker-5 is idle.
        data = lower_boundary_cluster(
            {i: 0.0 if i == 5 else 80.0 for i in range(11)},
            {i: 10 if i == 3 else 1 for i in range(11)},
            100 * MB,
        )
        assert not self.SHEDDER.find_bundles_for_unloading(data).unloads
        result = self.LOWER_BOUNDARY.find_bundles_for_unloading(data)
        assert [source for source, _ in unloaded(result)] == ["broker-3"]


# --- UniformLoadShedder ------------------------------------------------------------------


class TestUniformLoadShedder:
    def test_max_unload_bundle_num_per_shedding(self) -> None:
        # UniformLoadShedderTest.testMaxUnloadBundleNumPerShedding.
        names = [f"bundle-{i}" for i in range(1, 21)]
        data = snapshot(
            {"broker-1": broker(bundles=names, throughput=40 * MB), "broker2": broker()},
            {n: MessageRates(msg_throughput_in=MB, msg_throughput_out=MB) for n in names},
        )
        shedder = UniformLoadShedder(max_unload_bundle_num_per_shedding=2)
        assert len(shedder.find_bundles_for_unloading(data).unloads) == 2

    def test_broker_with_multiple_bundles(self) -> None:
        # UniformLoadShedderTest.testBrokerWithMultipleBundles: 2i MB/s per bundle.
        names = [f"bundle-{i}" for i in range(1, 11)]
        data = snapshot(
            {"broker-1": broker(bundles=names, throughput=110 * MB), "broker2": broker()},
            {f"bundle-{i}": load(2 * i * MB) for i in range(1, 11)},
        )
        result = UniformLoadShedder().find_bundles_for_unloading(data)
        # (110 MB/s - 1) * 0.2 as an int is just under 22 MB/s: only the 20 MB/s bundle fits.
        assert unloaded(result) == [("broker-1", "bundle-10")]

    def test_overload_broker_select(self) -> None:
        # UniformLoadShedderTest.testOverloadBrokerSelect: five brokers of five bundles.
        rates = [50000, 60000, 70000, 10000, 20000]
        throughputs = [50 * MB, 60 * MB, 70 * MB, 80 * MB, 10 * MB]
        brokers: dict[str, BrokerLoad] = {}
        bundles: dict[str, MessageRates] = {}
        for i, (rate, throughput) in enumerate(zip(rates, throughputs, strict=True)):
            names = [f"broker-{i}-bundle-{j}" for j in range(5)]
            bundles |= {n: load(throughput / 5, rate / 5) for n in names}
            brokers[f"broker{i}"] = broker(bundles=names, rate=rate, throughput=throughput)
        data = snapshot(brokers, bundles)

        def sources(rate_threshold: float, throughput_threshold: float) -> list[str]:
            shedder = UniformLoadShedder(
                max_unload_bundle_num_per_shedding=1,
                max_unload_percentage=0.5,
                load_balancer_msg_rate_difference_shedder_threshold=rate_threshold,
                load_balancer_msg_throughput_multiplier_difference_shedder_threshold=(
                    throughput_threshold
                ),
            )
            return [u.source_broker for u in shedder.find_bundles_for_unloading(data).unloads]

        assert sources(50, 0) == ["broker2"]
        assert sources(0, 2) == ["broker3"]
        assert sources(50, 2) == ["broker2"]

    def rate_cluster(self, busy_rate: float) -> LoadData:
        return snapshot(
            {
                "busy": broker(bundles=["x", "y", "z"], rate=busy_rate),
                "idle": broker(rate=100.0),
            },
            {"x": load(rate=10.0), "y": load(rate=10.5), "z": load(rate=0.0)},
        )

    def test_rate_difference_must_be_strictly_above_the_threshold(self) -> None:
        shedder = UniformLoadShedder(min_unload_message=0)
        assert not shedder.find_bundles_for_unloading(self.rate_cluster(150.0)).unloads
        result = shedder.find_bundles_for_unloading(self.rate_cluster(151.0))
        # 51 % > 50 %: (151 - 100) * 0.2 = 10.2 truncates to 10 msg/s. The 10.5 msg/s bundle
        # does not fit; 10 does; and, as in Pulsar, the idle bundle fits too.
        assert unloaded(result) == [("busy", "x"), ("busy", "z")]

    def test_required_load_below_the_minimum_sheds_nothing(self) -> None:
        result = UniformLoadShedder().find_bundles_for_unloading(self.rate_cluster(151.0))
        assert not result.unloads
        assert "below the minimum 1000" in result.reasons[0]

    def test_a_busiest_broker_with_one_bundle_is_not_shed(self) -> None:
        data = snapshot({"busy": broker(bundles=["x"], rate=1e6), "idle": broker()}, {"x": load()})
        result = UniformLoadShedder().find_bundles_for_unloading(data)
        assert not result.unloads
        assert "at most one bundle" in result.reasons[0]

    def test_a_zero_threshold_disables_the_test(self) -> None:
        shedder = UniformLoadShedder(
            min_unload_message=0,
            load_balancer_msg_rate_difference_shedder_threshold=0,
            load_balancer_msg_throughput_multiplier_difference_shedder_threshold=0,
        )
        result = shedder.find_bundles_for_unloading(self.rate_cluster(1e6))
        assert not result.unloads
        assert result.reasons[0].startswith("balanced")

    def test_recently_unloaded_bundles_are_skipped(self) -> None:
        shedder = UniformLoadShedder(min_unload_message=0)
        data = self.rate_cluster(151.0)
        data = snapshot(data.broker_data, data.bundle_data, ["x"])
        assert unloaded(shedder.find_bundles_for_unloading(data)) == [("busy", "z")]

    def test_no_brokers(self) -> None:
        assert not UniformLoadShedder().find_bundles_for_unloading(snapshot({})).unloads


# --- AvgShedder --------------------------------------------------------------------------


def avg_cluster(
    cpus: Mapping[str, float], rates: Mapping[str, float], shed: Iterable[str]
) -> LoadData:
    """Pulsar's AvgShedderTest set-up: each shedding broker holds 11 bundles of 900 msg/s."""
    brokers: dict[str, BrokerLoad] = {}
    bundles: dict[str, MessageRates] = {}
    shedding = set(shed)
    for name, cpu in cpus.items():
        names = [f"{name}-bundle-{i}" for i in range(11)] if name in shedding else []
        brokers[name] = broker(cpu, names, rate=rates[name])
        bundles |= {n: load(rate=900.0) for n in names}
    return snapshot(brokers, bundles)


class TestAvgShedder:
    def test_hit_high_threshold(self) -> None:
        data = avg_cluster(
            {"broker1": 80, "broker2": 30, "broker3": 50},
            {"broker1": 20000, "broker2": 2000, "broker3": 10000},
            ["broker1"],
        )
        shedder = AvgShedder(max_unload_percentage=0.5)
        first = shedder.find_bundles_for_unloading(data)
        assert not first.unloads
        second = shedder.find_bundles_for_unloading(data, first.state)
        # (20000 - 2000) / 2 = 9000 msg/s: ten of the 900 msg/s bundles, all to broker2.
        assert len(second.unloads) == 10
        assert {(u.source_broker, u.dest_broker) for u in second.unloads} == {
            ("broker1", "broker2")
        }
        assert second.state.broker_hit_count_for_high == {}
        assert second.state.broker_hit_count_for_low == {}
        for unload in second.unloads:
            chosen, _ = shedder.select_broker(data.broker_data, unload.service_unit, second.state)
            assert chosen == "broker2"

    def test_hit_low_threshold(self) -> None:
        data = avg_cluster(
            {"broker1": 60, "broker2": 40, "broker3": 50},
            {"broker1": 20000, "broker2": 2000, "broker3": 10000},
            ["broker1"],
        )
        shedder = AvgShedder(
            max_unload_percentage=0.5,
            load_balancer_avg_shedder_low_threshold=20,
            load_balancer_avg_shedder_hit_count_low_threshold=6,
        )
        state = None
        for _ in range(5):
            result = shedder.find_bundles_for_unloading(data, state)
            assert not result.unloads
            state = result.state
        assert state is not None and state.broker_hit_count_for_low == {"broker1": 5, "broker2": 5}
        assert state.broker_hit_count_for_high == {}
        last = shedder.find_bundles_for_unloading(data, state)
        assert len(last.unloads) == 10
        assert {u.dest_broker for u in last.unloads} == {"broker2"}
        for unload in last.unloads:
            chosen, _ = shedder.select_broker(data.broker_data, unload.service_unit, last.state)
            assert chosen == "broker2"

    def test_shedding_multiple_pairs(self) -> None:
        data = avg_cluster(
            {"broker1": 80, "broker2": 30, "broker3": 75, "broker4": 35},
            {"broker1": 20000, "broker2": 2000, "broker3": 20000, "broker4": 2000},
            ["broker1", "broker3"],
        )
        shedder = AvgShedder(max_unload_percentage=0.5)
        second = shedder.find_bundles_for_unloading(
            data, shedder.find_bundles_for_unloading(data).state
        )
        moves = [(u.source_broker, u.dest_broker) for u in second.unloads]
        assert moves.count(("broker1", "broker2")) == 10
        assert moves.count(("broker3", "broker4")) == 10
        assert len(moves) == 20
        for unload in second.unloads:
            chosen, _ = shedder.select_broker(data.broker_data, unload.service_unit, second.state)
            assert chosen == {"broker1": "broker2", "broker3": "broker4"}[unload.source_broker]

    def test_brokers_sort_by_exact_score(self) -> None:
        # Pulsar 4.2 and master sort with Comparator.comparingDouble: d (10.0) is the lowest
        # and pairs with the 70.0 broker. (4.0's (int) (a - b) tied 10.9, 10.5 and 10.0 and
        # kept hash-map order, pairing a with b.)
        data = avg_cluster(
            {"a": 10.9, "b": 70.0, "c": 10.5, "d": 10.0},
            {"a": 0, "b": 20000, "c": 0, "d": 0},
            ["b"],
        )
        shedder = AvgShedder(load_balancer_avg_shedder_hit_count_high_threshold=1)
        result = shedder.find_bundles_for_unloading(data)
        assert result.unloads
        assert {u.source_broker for u in result.unloads} == {"b"}
        assert {u.dest_broker for u in result.unloads} == {"d"}

    def test_select_broker_falls_back_to_a_hash_of_the_bundle(self) -> None:
        shedder = AvgShedder()
        candidates = ["b3", "b1", "b2"]
        chosen, state = shedder.select_broker(candidates, "tenant/ns/0x00000000_0xffffffff")
        expected = sorted(candidates)[zlib.crc32(b"tenant/ns/0x00000000_0xffffffff") % 3]
        assert chosen == expected
        assert state.bundle_broker == {"tenant/ns/0x00000000_0xffffffff": expected}
        # Remembered while it stays a candidate; chosen again once it is gone.
        assert shedder.select_broker(candidates, "tenant/ns/0x00000000_0xffffffff", state) == (
            chosen,
            state,
        )
        others = [c for c in candidates if c != chosen]
        again, moved = shedder.select_broker(others, "tenant/ns/0x00000000_0xffffffff", state)
        assert again in others
        assert moved.bundle_broker["tenant/ns/0x00000000_0xffffffff"] == again

    def test_select_broker_rejects_bad_input(self) -> None:
        with pytest.raises(ValueError, match="candidates must not be empty"):
            AvgShedder().select_broker([], "x")
        with pytest.raises(TypeError, match="candidates"):
            AvgShedder().select_broker("abc", "x")
        with pytest.raises(ValueError, match="bundle must not be empty"):
            AvgShedder().select_broker(["a"], "")

    def test_a_gap_below_the_low_threshold_clears_that_pair(self) -> None:
        data = avg_cluster({"a": 50, "b": 40}, {"a": 0, "b": 0}, [])
        state = AvgShedderState({"a": 1, "b": 1, "gone": 1}, {"a": 3, "gone": 2})
        result = AvgShedder().find_bundles_for_unloading(data, state)
        # No pair at all: every count is cleared, even for brokers no longer reporting.
        assert result.state == AvgShedderState()

    def test_middle_broker_of_an_odd_cluster_pairs_with_itself_and_is_cleared(self) -> None:
        data = avg_cluster({"a": 90, "b": 50, "c": 10}, {"a": 0, "b": 0, "c": 0}, [])
        state = AvgShedderState({"b": 1}, {"b": 7})
        result = AvgShedder().find_bundles_for_unloading(data, state)
        assert result.state.broker_hit_count_for_low == {"a": 1, "c": 1}
        assert result.state.broker_hit_count_for_high == {"a": 1, "c": 1}

    def test_throughput_is_used_when_the_message_rate_gap_is_small(self) -> None:
        brokers = {
            "hot": broker(90.0, ["x", "y"], rate=100.0, throughput=100 * MB),
            "cold": broker(10.0, rate=100.0),
        }
        data = snapshot(brokers, {"x": load(30 * MB), "y": load(15 * MB)})
        shedder = AvgShedder(load_balancer_avg_shedder_hit_count_high_threshold=1)
        result = shedder.find_bundles_for_unloading(data)
        # 100 MB/s * 0.2 = 20 MB/s: the 30 MB/s bundle does not fit, the 15 MB/s one does.
        assert result.unloads == (Unload("hot", "y", "cold"),)

    def test_below_both_minimums_nothing_moves_but_the_hit_is_spent(self) -> None:
        data = snapshot(
            {"hot": broker(90.0, ["x", "y"], rate=10.0), "cold": broker(10.0)},
            {"x": load(rate=1.0), "y": load(rate=1.0)},
        )
        shedder = AvgShedder(load_balancer_avg_shedder_hit_count_high_threshold=1)
        result = shedder.find_bundles_for_unloading(data)
        assert not result.unloads
        assert result.state == AvgShedderState()
        assert "below the minimums" in result.reasons[-1]

    def test_a_single_bundle_can_be_shed_as_in_pulsar(self) -> None:
        data = snapshot(
            {"hot": broker(90.0, ["x"], rate=10000.0), "cold": broker(10.0)},
            {"x": load(rate=1500.0)},
        )
        shedder = AvgShedder(load_balancer_avg_shedder_hit_count_high_threshold=1)
        assert unloaded(shedder.find_bundles_for_unloading(data)) == [("hot", "x")]

    def test_recently_unloaded_and_idle_bundles_are_skipped(self) -> None:
        data = snapshot(
            {"hot": broker(90.0, ["x", "y", "z"], rate=10000.0), "cold": broker(10.0)},
            {"x": load(rate=1500.0), "y": load(rate=100.0), "z": load()},
            ["x"],
        )
        shedder = AvgShedder(load_balancer_avg_shedder_hit_count_high_threshold=1)
        assert unloaded(shedder.find_bundles_for_unloading(data)) == [("hot", "y")]


# --- TransferShedder ---------------------------------------------------------------------

E1 = "my-tenant/my-namespaceE/0x00000000_0x0FFFFFFF"
D1 = "my-tenant/my-namespaceD/0x00000000_0x0FFFFFFF"
C1 = "my-tenant/my-namespaceC/0x00000000_0x0FFFFFFF"
RANGES = [
    "0x00000000_0x1FFFFFFF",
    "0x1FFFFFFF_0x2FFFFFFF",
    "0x2FFFFFFF_0x3FFFFFFF",
    "0x3FFFFFFF_0x4FFFFFFF",
    "0x4FFFFFFF_0x5FFFFFFF",
]


def top_bundles(namespace: str, *loads: float) -> dict[str, MessageRates]:
    """TransferShedderTest.getTopBundlesLoad: outbound throughput per bundle."""
    ranges = ["0x00000000_0x0FFFFFFF", "0x0FFFFFFF_0xFFFFFFFF"] if len(loads) <= 2 else RANGES
    return {
        f"my-tenant/{namespace}/{r}": MessageRates(msg_throughput_out=x)
        for r, x in zip(ranges, loads, strict=False)
    }


def transfer_cluster(
    cpus: Mapping[str, float], tops: Mapping[str, dict[str, MessageRates]]
) -> LoadData:
    """TransferShedderTest.getCpuLoad: 1 B/s in, the top bundles' sum out."""
    brokers = {
        name: BrokerLoad(
            usage=ResourceUsage(cpu=cpu),
            rates=MessageRates(
                msg_rate_in=3,
                msg_rate_out=4,
                msg_throughput_in=1,
                msg_throughput_out=sum(r.msg_throughput_out for r in tops[name].values()),
            ),
            bundles=frozenset(tops[name]),
            updated_at_ms=NOW,
        )
        for name, cpu in cpus.items()
    }
    return snapshot(brokers, {b: r for top in tops.values() for b, r in top.items()})


def setup_context(**cpus: float) -> LoadData:
    """TransferShedderTest.setupContext, with CPU loads overridable."""
    tops = {
        "broker1:8080": top_bundles("my-namespaceA", 1_000_000, 2_000_000),
        "broker2:8080": top_bundles("my-namespaceB", 1_000_000, 3_000_000),
        "broker3:8080": top_bundles("my-namespaceC", 2_000_000, 4_000_000),
        "broker4:8080": top_bundles("my-namespaceD", 2_000_000, 6_000_000),
        "broker5:8080": top_bundles("my-namespaceE", 2_000_000, 7_000_000),
    }
    load_by_broker = {"broker1": 2, "broker2": 4, "broker3": 6, "broker4": 80, "broker5": 90} | cpus
    return transfer_cluster({f"{b}:8080": c for b, c in load_by_broker.items()}, tops)


# Pulsar's tests use a hit-count threshold of 0 and debug mode on.
PULSAR_TEST_SHEDDER = TransferShedder(
    load_balancer_shedding_condition_hit_count_threshold=0, load_balancer_debug_mode_enabled=True
)


def transfers(result: SheddingResult[object]) -> set[tuple[str, str, str | None]]:
    return {(u.source_broker, u.service_unit, u.dest_broker) for u in result.unloads}


SETUP_LOAD_AVG = 0.36400000000000005
SETUP_LOAD_STD = 0.3982762860126121
E2 = "my-tenant/my-namespaceE/0x0FFFFFFF_0xFFFFFFFF"
D2 = "my-tenant/my-namespaceD/0x0FFFFFFF_0xFFFFFFFF"
NAMESPACES = [f"my-tenant/my-namespace{n}" for n in "ABCDE"]
SETUP_RESULT = {("broker5:8080", E1, "broker1:8080"), ("broker4:8080", D1, "broker2:8080")}


def decisions(result: TransferSheddingResult) -> set[tuple[str, str, str | None, str]]:
    """Pulsar's UnloadDecision set: (source, bundle, destination, reason)."""
    return {
        (u.source_broker, u.service_unit, u.dest_broker, why)
        for u, why in zip(result.unloads, result.decision_reasons, strict=True)
    }


def reports(data: LoadData, **kwargs: bool) -> dict[str, TopBundles]:
    """Each broker's top-bundles report, as Pulsar's TopKBundles made it (policies allowed)."""
    return {
        name: top_k_bundles(
            {b: data.bundle_data[b] for b in report.bundles if b in data.bundle_data},
            10,
            load_balancer_shedding_bundles_with_policies_enabled=True,
            **kwargs,
        )
        for name, report in data.broker_data.items()
    }


def setup_stats(result: TransferSheddingResult) -> None:
    assert result.load_avg == pytest.approx(SETUP_LOAD_AVG)
    assert result.load_std == pytest.approx(SETUP_LOAD_STD)


def shed(
    data: LoadData,
    shedder: TransferShedder = PULSAR_TEST_SHEDDER,
    inputs: ShedderInputs | None = None,
    **kwargs: object,
) -> TransferSheddingResult:
    return shedder.find_bundles_for_unloading(data, now_ms=NOW, inputs=inputs, **kwargs)  # type: ignore[arg-type]


def skewed(loads: list[float], small: set[int]) -> LoadData:
    """TransferShedderTest.setupContextLoadSkewed*: broker i at loads[i] % CPU."""
    tops = {
        f"broker{i}:8080": top_bundles(
            f"my-namespace{i}", *((300_000, 700_000) if i in small else (30e6, 70e6))
        )
        for i in range(len(loads))
    }
    return transfer_cluster({f"broker{i}:8080": x for i, x in enumerate(loads)}, tops)


class TestTransferShedderTest:
    """Pulsar's TransferShedderTest: hit-count threshold 0, debug mode on."""

    def test_empty_broker_load_data(self) -> None:
        result = shed(snapshot({}))
        assert not result.unloads
        assert (result.label, result.skip_reason) == ("Skip", "NoBrokers")

    def test_no_owner_load_data(self) -> None:
        result = shed(setup_context(), inputs=ShedderInputs(bundle_owners={}))
        assert result.skip_reason == "NoBundles"
        setup_stats(result)

    def test_empty_top_bundles_load_data(self) -> None:
        result = shed(setup_context(), inputs=ShedderInputs(top_bundles_load_data={}))
        assert result.skip_reason == "NoLoadData"
        setup_stats(result)

    def test_out_dated_load_data(self) -> None:
        data = setup_context()
        assert len(shed(data).unloads) == 2
        brokers = {
            name: BrokerLoad(report.usage, report.rates, report.bundles, 0)
            for name, report in data.broker_data.items()
        }
        result = shed(snapshot(brokers, data.bundle_data))
        assert not result.unloads
        assert result.skip_reason == "OutDatedData"

    def test_recently_unloaded_brokers(self) -> None:
        long_ago = {"broker1:8080": NOW - 1800 * 1001}
        result = shed(setup_context(), recently_unloaded_brokers=long_ago)
        assert decisions(result) == {(*t, "Overloaded") for t in SETUP_RESULT}
        assert result.label == "Success"
        setup_stats(result)
        cooling = shed(setup_context(), recently_unloaded_brokers={"broker1:8080": NOW})
        assert not cooling.unloads
        assert cooling.skip_reason == "CoolDown"

    def test_recently_unloaded_bundles(self) -> None:
        data = setup_context()
        result = shed(snapshot(data.broker_data, data.bundle_data, [E1, E2, D1, D2]))
        assert decisions(result) == {("broker3:8080", C1, "broker1:8080", "Overloaded")}
        setup_stats(result)

    def test_get_available_brokers_failed(self) -> None:
        state = TransferShedderState(2)
        result = TransferShedder.failure(state)
        assert (result.label, result.skip_reason) == ("Failure", "Unknown")
        assert not result.unloads
        assert (result.load_avg, result.load_std) == (0.0, 0.0)
        assert result.state is state

    def test_bundles_with_isolation_policies(self) -> None:
        data = setup_context()
        isolated = ShedderInputs(isolation_policies={"my-tenant/my-namespaceE": ["broker5:8080"]})
        with_policies = replace(
            PULSAR_TEST_SHEDDER, load_balancer_shedding_bundles_with_policies_enabled=True
        )
        result = shed(data, with_policies, isolated)
        assert decisions(result) == {("broker4:8080", D1, "broker1:8080", "Overloaded")}
        setup_stats(result)

        # Unloading without transfer: a namespace isolated to its broker still can't move.
        no_transfer = replace(with_policies, load_balancer_transfer_enabled=False)
        result = shed(data, no_transfer, isolated)
        assert decisions(result) == {("broker4:8080", D1, None, "Overloaded")}
        setup_stats(result)

        # Every namespace has policies and shedding such bundles is off.
        everywhere = ShedderInputs(
            isolation_policies={ns: ["broker5:8080"] for ns in NAMESPACES},
            top_bundles_load_data=reports(data),
        )
        for shedder in (PULSAR_TEST_SHEDDER, replace(no_transfer, **POLICIES_OFF)):
            result = shed(data, shedder, everywhere)
            assert not result.unloads
            assert result.skip_reason == "NoBundles"
            setup_stats(result)

    def test_bundles_with_anti_affinity_group(self) -> None:
        data = setup_context()
        with_policies = replace(
            PULSAR_TEST_SHEDDER, load_balancer_shedding_bundles_with_policies_enabled=True
        )
        everything = sorted(data.bundle_data)
        none_left = ShedderInputs(anti_affinity_candidates=dict.fromkeys(everything, ()))
        result = shed(data, with_policies, none_left)
        assert not result.unloads
        assert result.skip_reason == "NoBundles"
        setup_stats(result)

        only_e1 = ShedderInputs(anti_affinity_candidates={b: () for b in everything if b != E1})
        result = shed(data, with_policies, only_e1)
        assert decisions(result) == {("broker5:8080", E1, "broker1:8080", "Overloaded")}
        setup_stats(result)

    def test_filter_has_exception(self) -> None:
        # A failing filter leaves a bundle no candidate broker.
        data = setup_context()
        with_policies = replace(
            PULSAR_TEST_SHEDDER, load_balancer_shedding_bundles_with_policies_enabled=True
        )
        failed = ShedderInputs(anti_affinity_candidates=dict.fromkeys(data.bundle_data, ()))
        result = shed(data, with_policies, failed)
        assert result.skip_reason == "NoBundles"
        setup_stats(result)

    def test_is_load_balancer_shedding_bundles_with_policies_enabled(self) -> None:
        expects = [
            (True, True, True, True),
            (True, True, False, False),
            (True, False, True, True),
            (True, False, False, False),
            (False, True, True, True),
            (False, True, False, False),
            (False, False, True, True),
            (False, False, False, True),
        ]
        for isolation, anti_affinity, enabled, expected in expects:
            shedder = TransferShedder(load_balancer_shedding_bundles_with_policies_enabled=enabled)
            allowed = shedder.is_load_balancer_shedding_bundles_with_policies_enabled(
                isolation, anti_affinity
            )
            assert allowed == expected

    def test_target_std(self) -> None:
        tops = {
            "broker1:8080": top_bundles("my-namespaceA", 30, 30),
            "broker2:8080": top_bundles("my-namespaceB", 40, 40),
            "broker3:8080": top_bundles("my-namespaceC", 50, 50),
        }
        data = transfer_cluster({"broker1:8080": 10, "broker2:8080": 20, "broker3:8080": 30}, tops)
        result = shed(data)
        assert not result.unloads
        assert result.skip_reason == "HitCount"
        assert result.load_avg == pytest.approx(0.2000000063578288)
        assert result.load_std == pytest.approx(0.08164966587949089)

    def test_single_top_bundles_load_data(self) -> None:
        tops = {
            f"broker{i}:8080": top_bundles(f"my-namespace{ns}", x)
            for i, (ns, x) in enumerate(zip("ABCDE", (1, 2, 6, 10, 70), strict=True), start=1)
        }
        loads = {"broker1:8080": 2, "broker2:8080": 4, "broker3:8080": 6}
        data = transfer_cluster(loads | {"broker4:8080": 80, "broker5:8080": 90}, tops)
        result = shed(data)
        assert not result.unloads
        assert result.skip_reason == "NoBundles"
        assert "sole bundle" in " ".join(result.reasons)

    def test_bundle_throughput_larger_than_offload_threshold(self) -> None:
        data = setup_context()
        bundles = dict(data.bundle_data)
        for namespace in ("my-namespaceD", "my-namespaceE"):
            bundles |= top_bundles(namespace, 1e9, 1e9)
        result = shed(snapshot(data.broker_data, bundles))
        assert decisions(result) == {("broker3:8080", C1, "broker1:8080", "Overloaded")}
        setup_stats(result)

    def test_zero_bundle_throughput(self) -> None:
        # The reports were made with traffic, which has since dropped to zero.
        data = setup_context()
        zeroed = {
            name: tuple((bundle, MessageRates()) for bundle, _ in top)
            for name, top in reports(data).items()
        }
        result = shed(data, inputs=ShedderInputs(top_bundles_load_data=zeroed))
        assert not result.unloads
        assert result.skip_reason == "NoBundles"
        setup_stats(result)

    def test_target_std_after_transfer(self) -> None:
        result = shed(setup_context(broker4=55, broker5=65))
        assert decisions(result) == {("broker5:8080", E1, "broker1:8080", "Overloaded")}
        assert result.load_avg == pytest.approx(0.26400000000000007)
        assert result.load_std == pytest.approx(0.27644891028904417)

    def test_unload_bundles_greater_than_target_throughput(self) -> None:
        tops = {
            "broker1:8080": top_bundles("my-namespaceA", 1e6, 2e6, 3e6, 4e6, 5e6),
            "broker2:8080": top_bundles("my-namespaceB", 100e6, 180e6, 220e6, 250e6, 250e6),
        }
        data = transfer_cluster({"broker1:8080": 10, "broker2:8080": 1000}, tops)
        result = shed(data)
        a = [f"my-tenant/my-namespaceA/{r}" for r in RANGES]
        b = [f"my-tenant/my-namespaceB/{r}" for r in RANGES]
        assert decisions(result) == {
            *(("broker2:8080", x, "broker1:8080", "Overloaded") for x in b[:3]),
            *(("broker1:8080", x, "broker2:8080", "Overloaded") for x in a[:4]),
        }
        assert result.load_avg == pytest.approx(5.05)
        assert result.load_std == pytest.approx(4.95)
        assert result.load_std_after == pytest.approx(0.050000004900021836)

    def test_skip_bundles_greater_than_target_throughput_after_split(self) -> None:
        tops = {
            "broker1:8080": top_bundles("my-namespaceA", 1, 500e6),
            "broker2:8080": top_bundles("my-namespaceB", 500e6, 500e6),
        }
        data = transfer_cluster({"broker1:8080": 50, "broker2:8080": 100}, tops)
        result = shed(data, replace(PULSAR_TEST_SHEDDER, load_balancer_broker_load_target_std=0.2))
        assert not result.unloads
        assert result.skip_reason == "NoBundles"

    def test_unload_bundles_less_than_target_throughput_after_split(self) -> None:
        tops = {
            "broker1:8080": top_bundles("my-namespaceA", 1e6, 2e6, 3e6, 4e6, 5e6),
            "broker2:8080": top_bundles("my-namespaceB", 490e6, 510e6),
        }
        data = transfer_cluster({"broker1:8080": 10, "broker2:8080": 1000}, tops)
        result = shed(data)
        assert decisions(result) == {
            (
                "broker2:8080",
                "my-tenant/my-namespaceB/0x00000000_0x0FFFFFFF",
                "broker1:8080",
                "Overloaded",
            )
        }
        assert result.load_avg == pytest.approx(5.05)
        assert result.load_std == pytest.approx(4.95)
        assert result.load_std_after == pytest.approx(0.050000004900021836)

    def test_unload_bundles_greater_than_target_throughput_after_split(self) -> None:
        tops = {
            "broker1:8080": top_bundles("my-namespaceA", 2.4e6, 2.4e6),
            "broker2:8080": top_bundles("my-namespaceB", 5e6, 5e6),
        }
        data = transfer_cluster({"broker1:8080": 48, "broker2:8080": 100}, tops)
        result = shed(data)
        moves = {(u.source_broker, u.dest_broker) for u in result.unloads}
        assert moves == {("broker1:8080", "broker2:8080"), ("broker2:8080", "broker1:8080")}
        assert len(result.unloads) == 2
        assert set(result.decision_reasons) == {"Overloaded"}
        assert result.load_avg == pytest.approx(0.74)
        assert result.load_std == pytest.approx(0.26)
        assert result.load_std_after == pytest.approx(2.5809568279517847e-8, abs=1e-7)

    def test_min_broker_with_low_traffic(self) -> None:
        data = setup_context(broker4=55, broker5=65)
        slow = data.broker_data["broker2:8080"]
        brokers = dict(data.broker_data) | {
            "broker2:8080": BrokerLoad(
                slow.usage, MessageRates(msg_throughput_in=10), slow.bundles, NOW
            )
        }
        result = shed(snapshot(brokers, data.bundle_data))
        assert decisions(result) == {
            ("broker5:8080", E1, "broker1:8080", "Overloaded"),
            ("broker4:8080", D1, "broker2:8080", "Underloaded"),
        }
        assert result.load_avg == pytest.approx(0.26400000000000007)
        assert result.load_std == pytest.approx(0.27644891028904417)

    def test_min_broker_with_lower_load_than_avg(self) -> None:
        result = shed(setup_context(broker2=3, broker4=55, broker5=65))
        assert decisions(result) == {
            ("broker5:8080", E1, "broker1:8080", "Overloaded"),
            ("broker4:8080", D1, "broker2:8080", "Underloaded"),
        }
        assert result.load_avg == pytest.approx(0.262)
        assert result.load_std == pytest.approx(0.2780935094532054)

    def test_max_number_of_transfers_per_shedder_cycle(self) -> None:
        shedder = replace(
            PULSAR_TEST_SHEDDER, load_balancer_max_number_of_broker_shedding_per_cycle=10
        )
        result = shed(setup_context(), shedder)
        assert decisions(result) == {(*t, "Overloaded") for t in SETUP_RESULT}
        setup_stats(result)

    def test_load_balancer_shedding_condition_hit_count_threshold(self) -> None:
        shedder = replace(
            PULSAR_TEST_SHEDDER, load_balancer_shedding_condition_hit_count_threshold=3
        )
        state = None
        for hits in range(1, 4):
            result = shed(setup_context(), shedder, state=state)
            assert not result.unloads
            assert result.skip_reason == "HitCount"
            setup_stats(result)
            state = result.state
            assert state.unload_condition_hit_count == hits
        result = shed(setup_context(), shedder, state=state)
        assert decisions(result) == {(*t, "Overloaded") for t in SETUP_RESULT}
        assert result.state.unload_condition_hit_count == 0
        setup_stats(result)

    def test_remaining_top_bundles(self) -> None:
        data = setup_context()
        bundles = dict(data.bundle_data) | top_bundles("my-namespaceE", 2_000_000, 3_000_000)
        result = shed(snapshot(data.broker_data, bundles))
        assert decisions(result) == {(*t, "Overloaded") for t in SETUP_RESULT}
        setup_stats(result)

    def test_load_more_than100(self) -> None:
        result = shed(setup_context(broker4=200, broker5=1000))
        assert decisions(result) == {(*t, "Overloaded") for t in SETUP_RESULT}
        assert result.load_avg == pytest.approx(2.4240000000000004)
        assert result.load_std == pytest.approx(3.8633332758124816)
        assert result.load_std_after == pytest.approx(2.781643776903451)

    @settings(max_examples=25, deadline=None)
    @given(st.lists(st.integers(0, 999), min_size=10, max_size=10), st.data())
    def test_random_load(self, loads: list[int], data: st.DataObject) -> None:
        # Pulsar's setupContext(10): random loads, one bundle pair per broker.
        tops = {}
        for i, load_pct in enumerate(loads):
            bundle_load = data.draw(st.integers(0, load_pct))
            tops[f"broker{i}:8080"] = top_bundles(
                f"my-namespace{i}", bundle_load, load_pct - bundle_load
            )
        cluster = transfer_cluster({f"broker{i}:8080": x for i, x in enumerate(loads)}, tops)
        result = shed(cluster)
        exhausted = "no more broker pairs to transfer between this cycle" in result.reasons
        assert result.load_std_after <= 0.25 or exhausted

    def test_overload_outlier(self) -> None:
        result = shed(skewed([1] * 99 + [100], set(range(99))))
        (unload,) = result.unloads
        # Pulsar picks whichever idle broker its hash map yields first; here, by name.
        assert (unload.source_broker, unload.service_unit, unload.dest_broker) == (
            "broker99:8080",
            "my-tenant/my-namespace99/0x00000000_0x0FFFFFFF",
            "broker0:8080",
        )
        assert result.decision_reasons == ("Underloaded",)
        assert result.load_avg == pytest.approx(0.019900000000000008, abs=1e-5)
        assert result.load_std == pytest.approx(0.09850375627355534, abs=1e-5)

    def test_underload_outlier(self) -> None:
        result = shed(skewed([98] * 98 + [99, 1], {99}))
        assert decisions(result) == {
            (
                "broker98:8080",
                "my-tenant/my-namespace98/0x00000000_0x0FFFFFFF",
                "broker99:8080",
                "Underloaded",
            )
        }
        assert result.load_avg == pytest.approx(0.9704000000000005, abs=1e-5)
        assert result.load_std == pytest.approx(0.09652895938523735, abs=1e-5)

    @settings(max_examples=25, deadline=None)
    @given(st.lists(st.integers(0, 999), min_size=2, max_size=12))
    def test_random_load_stats(self, loads: list[int]) -> None:
        tops = {f"broker{i}:8080": top_bundles(f"my-namespace{i}", 1, 1) for i in range(len(loads))}
        cluster = transfer_cluster({f"broker{i}:8080": x for i, x in enumerate(loads)}, tops)
        result = shed(cluster)
        fractions = [x / 100 for x in loads]
        assert result.load_avg == pytest.approx(statistics.fmean(fractions), abs=1e-4)
        assert result.load_std == pytest.approx(statistics.pstdev(fractions), abs=1e-4)

    @pytest.mark.parametrize(
        ("loads", "avg", "std"),
        [
            ([1] + [100] * 16, 0.9417647058823528, 0.23294117647058868),
            (list(range(390, 400)), 3.9449999999999994, 0.028722813232795824),
        ],
        ids=["test_high_variance_load_stats", "test_low_variance_load_stats"],
    )
    def test_variance_load_stats(self, loads: list[int], avg: float, std: float) -> None:
        tops = {f"broker{i}:8080": top_bundles(f"my-namespace{i}", 1, 1) for i in range(len(loads))}
        result = shed(transfer_cluster({f"broker{i}:8080": x for i, x in enumerate(loads)}, tops))
        assert result.load_avg == pytest.approx(avg)
        assert result.load_std == pytest.approx(std)


POLICIES_OFF = {"load_balancer_shedding_bundles_with_policies_enabled": False}


class TestTransferShedderInputs:
    def test_an_available_broker_without_a_report_stops_the_cycle(self) -> None:
        inputs = ShedderInputs(available_brokers=[f"broker{i}:8080" for i in range(1, 7)])
        result = shed(setup_context(), inputs=inputs)
        assert result.skip_reason == "NoLoadData"
        assert (result.load_avg, result.load_std) == (0.0, 0.0)
        assert "broker6:8080" in result.reasons[-2]

    def test_no_bundle_goes_to_an_unavailable_broker(self) -> None:
        available = ShedderInputs(
            available_brokers=["broker2:8080", "broker3:8080", "broker4:8080", "broker5:8080"]
        )
        result = shed(setup_context(), inputs=available)
        # broker1 still reports and ranks lowest, but takes nothing.
        assert all(u.dest_broker != "broker1:8080" for u in result.unloads)

    def test_only_owned_bundles_are_shed(self) -> None:
        data = setup_context()
        owners = {b: name for name, r in data.broker_data.items() for b in r.bundles}
        owners[E1] = "broker1:8080"
        result = shed(data, inputs=ShedderInputs(bundle_owners=owners))
        assert E1 not in {u.service_unit for u in result.unloads}
        assert any(f"{E1} is not owned" in r for r in result.reasons)

    def test_top_bundles_rank_on_rounded_values(self) -> None:
        # 1.00 and 1.04 MB/s out round to the same 100 kB/s step: the message rate decides.
        stats = {
            "t/ns/a": MessageRates(msg_rate_in=500, msg_throughput_out=1_040_000),
            "t/ns/b": MessageRates(msg_rate_in=900, msg_throughput_out=1_000_000),
            "t/ns/c": MessageRates(msg_rate_in=910, msg_throughput_out=1_000_000),
        }
        assert [b for b, _ in top_k_bundles(stats, 2)] == ["t/ns/b", "t/ns/c"]
        assert [b for b, _ in top_k_bundles(stats, 3)] == ["t/ns/a", "t/ns/b", "t/ns/c"]
        # 1.05 MB/s rounds up to the next step and outranks them all.
        stats["t/ns/a"] = MessageRates(msg_rate_in=500, msg_throughput_out=1_050_000)
        assert [b for b, _ in top_k_bundles(stats, 1)] == ["t/ns/a"]

    def test_non_movable_bundles_are_not_reported(self) -> None:
        busy = MessageRates(msg_throughput_in=MB)
        stats = {
            "pulsar/system/0x00000000_0xffffffff": busy,
            "pulsar/host-1:8080/0x00000000_0xffffffff": busy,
            "t/ns/idle": MessageRates(),
            "t/isolated/0x00000000_0xffffffff": busy,
            "t/ns/0x00000000_0xffffffff": busy,
        }
        policies = ["t/isolated/0x00000000_0xffffffff"]
        reported = top_k_bundles(stats, 10, bundles_with_policies=policies)
        assert [b for b, _ in reported] == ["t/ns/0x00000000_0xffffffff"]
        allowed = top_k_bundles(
            stats,
            10,
            bundles_with_policies=policies,
            load_balancer_shedding_bundles_with_policies_enabled=True,
        )
        assert [b for b, _ in allowed] == [
            "t/isolated/0x00000000_0xffffffff",
            "t/ns/0x00000000_0xffffffff",
        ]
        assert is_system_service_namespace("pulsar/system")
        assert not is_system_service_namespace("pulsar/default")

    def test_skips_and_failures_carry_labels(self) -> None:
        assert shed(setup_context()).label == "Success"
        assert shed(snapshot({})).label == "Skip"
        assert TransferShedder.failure().label == "Failure"

    def test_bad_inputs(self) -> None:
        with pytest.raises(TypeError, match="inputs must be a ShedderInputs"):
            PULSAR_TEST_SHEDDER.find_bundles_for_unloading(
                snapshot({}),
                now_ms=NOW,
                inputs={},  # type: ignore[arg-type]
            )
        with pytest.raises(TypeError, match="available_brokers"):
            ShedderInputs(available_brokers="broker1")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"bundle_owners\['x'\] must not be empty"):
            ShedderInputs(bundle_owners={"x": ""})
        with pytest.raises(TypeError, match=r"isolation_policies\['ns'\]"):
            ShedderInputs(isolation_policies={"ns": "b1"})  # type: ignore[dict-item]
        with pytest.raises(TypeError, match=r"top_bundles_load_data\['b'\]\[0\]"):
            ShedderInputs(top_bundles_load_data={"b": [("x",)]})  # type: ignore[list-item]
        with pytest.raises(ValueError, match="topk"):
            top_k_bundles({}, -1)
        with pytest.raises(TypeError, match="has_isolation_policy"):
            TransferShedder().is_load_balancer_shedding_bundles_with_policies_enabled(
                1,
                False,  # type: ignore[arg-type]
            )
        with pytest.raises(TypeError, match="state must be a TransferShedderState"):
            TransferShedder.failure(AvgShedderState())  # type: ignore[arg-type]


class TestTransferShedder:
    def test_without_transfer_there_is_no_destination(self) -> None:
        shedder = TransferShedder(
            load_balancer_shedding_condition_hit_count_threshold=0,
            load_balancer_transfer_enabled=False,
        )
        result = shedder.find_bundles_for_unloading(setup_context(), now_ms=NOW)
        assert transfers(result) == {("broker5:8080", E1, None), ("broker4:8080", D1, None)}

    def test_hit_count_resets_when_the_cluster_is_balanced(self) -> None:
        tops = {
            "broker1:8080": top_bundles("my-namespaceA", 30, 30),
            "broker2:8080": top_bundles("my-namespaceB", 40, 40),
        }
        balanced = transfer_cluster({"broker1:8080": 40, "broker2:8080": 50}, tops)
        state = TransferShedderState(unload_condition_hit_count=2)
        result = TransferShedder().find_bundles_for_unloading(balanced, state, now_ms=NOW)
        assert result.skip_reason == "HitCount"
        assert result.state.unload_condition_hit_count == 0

    def test_max_number_of_broker_shedding_per_cycle(self) -> None:
        shedder = TransferShedder(
            load_balancer_shedding_condition_hit_count_threshold=0,
            load_balancer_max_number_of_broker_shedding_per_cycle=1,
        )
        result = shedder.find_bundles_for_unloading(setup_context(), now_ms=NOW)
        assert transfers(result) == {("broker5:8080", E1, "broker1:8080")}

    def test_load_is_smoothed_once_per_new_report(self) -> None:
        shedder = TransferShedder()
        first = shedder.find_bundles_for_unloading(setup_context(), now_ms=NOW)
        ema = first.state.broker_load_ema["broker5:8080"]
        assert ema.weighted_max_ema == pytest.approx(0.9)
        assert ema.updated_at_ms == NOW
        same = shedder.find_bundles_for_unloading(
            setup_context(broker5=10), first.state, now_ms=NOW
        )
        assert same.state.broker_load_ema["broker5:8080"] == ema
        data = setup_context(broker5=10)
        newer = dict(data.broker_data)
        report = newer["broker5:8080"]
        newer["broker5:8080"] = BrokerLoad(report.usage, report.rates, report.bundles, NOW + 1)
        later = shedder.find_bundles_for_unloading(
            snapshot(newer, data.bundle_data), first.state, now_ms=NOW + 1
        )
        smoothed = later.state.broker_load_ema["broker5:8080"].weighted_max_ema
        assert smoothed == pytest.approx(0.9 * 0.9 + 0.1 * 0.1)

    def test_swaps_never_take_a_recently_unloaded_bundle(self) -> None:
        tops = {
            "broker1:8080": top_bundles("my-namespaceA", 1e6, 2e6, 3e6, 4e6, 5e6),
            "broker2:8080": top_bundles("my-namespaceB", 100e6, 180e6, 220e6, 250e6, 250e6),
        }
        data = transfer_cluster({"broker1:8080": 10, "broker2:8080": 1000}, tops)
        recent = [f"my-tenant/my-namespaceA/{RANGES[0]}"]
        result = PULSAR_TEST_SHEDDER.find_bundles_for_unloading(
            snapshot(data.broker_data, data.bundle_data, recent), now_ms=NOW
        )
        assert recent[0] not in {u.service_unit for u in result.unloads}

    def test_ttl_edge_and_no_brokers(self) -> None:
        empty = PULSAR_TEST_SHEDDER.find_bundles_for_unloading(snapshot({}), now_ms=NOW)
        assert empty.skip_reason == "NoBrokers"
        ttl_ms = 1800 * 1000
        assert PULSAR_TEST_SHEDDER.find_bundles_for_unloading(
            setup_context(), now_ms=NOW + ttl_ms
        ).unloads
        stale = PULSAR_TEST_SHEDDER.find_bundles_for_unloading(
            setup_context(), now_ms=NOW + ttl_ms + 1
        )
        assert stale.skip_reason == "OutDatedData"

    def test_cool_down_edges(self) -> None:
        long_ago = {"broker1:8080": NOW - 1800 * 1001}
        result = PULSAR_TEST_SHEDDER.find_bundles_for_unloading(
            setup_context(), now_ms=NOW, recently_unloaded_brokers=long_ago
        )
        assert len(result.unloads) == 2
        delay_ms = 180 * 1000
        edge = {"broker1:8080": NOW - delay_ms}
        assert PULSAR_TEST_SHEDDER.find_bundles_for_unloading(
            setup_context(), now_ms=NOW, recently_unloaded_brokers=edge
        ).unloads
        just_now = {"broker1:8080": NOW - delay_ms + 1}
        cooling = PULSAR_TEST_SHEDDER.find_bundles_for_unloading(
            setup_context(), now_ms=NOW, recently_unloaded_brokers=just_now
        )
        assert cooling.skip_reason == "CoolDown"


# --- properties shared by every shedder ------------------------------------------------


@st.composite
def load_data(draw: st.DrawFn) -> LoadData:
    names = draw(st.lists(st.sampled_from("abcdef"), min_size=0, max_size=5, unique=True))
    amount = st.floats(min_value=0, max_value=200 * MB, allow_nan=False)
    usage = st.floats(min_value=0, max_value=120, allow_nan=False)
    brokers: dict[str, BrokerLoad] = {}
    bundles: dict[str, MessageRates] = {}
    for name in names:
        owned = [f"{name}/{i}" for i in range(draw(st.integers(0, 5)))]
        with_data = [b for b in owned if draw(st.booleans()) or len(owned) < 3]
        for bundle in with_data:
            bundles[bundle] = MessageRates(
                msg_rate_in=draw(amount) / 1000, msg_throughput_in=draw(amount)
            )
        brokers[name] = BrokerLoad(
            usage=ResourceUsage(cpu=draw(usage), bandwidth_out=draw(usage)),
            rates=MessageRates(msg_rate_in=draw(amount) / 100, msg_throughput_in=draw(amount)),
            bundles=frozenset(owned),
            updated_at_ms=NOW,
        )
    owned_bundles = sorted(b for data in brokers.values() for b in data.bundles)
    recent = draw(st.lists(st.sampled_from(owned_bundles), unique=True)) if owned_bundles else []
    return LoadData(brokers, bundles, frozenset(recent))


def reordered(data: LoadData) -> LoadData:
    """The same snapshot with every mapping in reverse insertion order."""
    return LoadData(
        dict(reversed(list(data.broker_data.items()))),
        dict(reversed(list(data.bundle_data.items()))),
        data.recently_unloaded_bundles,
    )


SHEDDERS: dict[str, Callable[[LoadData], SheddingResult[object]]] = {
    "overload": lambda d: OverloadShedder(
        load_balancer_broker_overloaded_threshold_percentage=50
    ).find_bundles_for_unloading(d),
    "threshold": lambda d: ThresholdShedder(
        load_balancer_bundle_unload_min_throughput_threshold=0,
        lower_boundary_shedding_enabled=True,
    ).find_bundles_for_unloading(d),
    "uniform": lambda d: UniformLoadShedder(
        min_unload_message=0, min_unload_message_throughput=0
    ).find_bundles_for_unloading(d),
    "avg": lambda d: AvgShedder(
        load_balancer_avg_shedder_hit_count_high_threshold=1,
        load_balancer_avg_shedder_hit_count_low_threshold=1,
        min_unload_message=0,
        min_unload_message_throughput=0,
    ).find_bundles_for_unloading(d),
    "transfer": lambda d: TransferShedder(
        load_balancer_shedding_condition_hit_count_threshold=0,
        load_balancer_debug_mode_enabled=True,
    ).find_bundles_for_unloading(d, now_ms=NOW),
}


@pytest.mark.parametrize("name", sorted(SHEDDERS))
@given(data=load_data())
def test_unloads_are_owned_fresh_unique_and_deterministic(name: str, data: LoadData) -> None:
    result = SHEDDERS[name](data)
    bundles = [u.service_unit for u in result.unloads]
    assert len(bundles) == len(set(bundles)), "a bundle is unloaded at most once"
    for unload in result.unloads:
        assert unload.service_unit in data.broker_data[unload.source_broker].bundles
        assert unload.service_unit in data.bundle_data
        assert unload.service_unit not in data.recently_unloaded_bundles
        assert unload.dest_broker is None or (
            unload.dest_broker in data.broker_data and unload.dest_broker != unload.source_broker
        )
    for broker_name, report in data.broker_data.items():
        from_broker = [u for u in result.unloads if u.source_broker == broker_name]
        assert len(from_broker) <= len(report.bundles)
    assert result.reasons or not data.broker_data
    assert SHEDDERS[name](data) == result
    assert SHEDDERS[name](reordered(data)) == result


@given(
    st.lists(st.sampled_from(["b1", "b2", "b3", "b4"]), min_size=1, unique=True),
    st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=5),
)
def test_select_broker_places_every_bundle_on_a_candidate_and_keeps_it(
    candidates: list[str], bundles: list[str]
) -> None:
    shedder = AvgShedder()
    state = AvgShedderState()
    placed: dict[str, str] = {}
    for bundle in bundles:
        chosen, state = shedder.select_broker(candidates, bundle, state)
        assert chosen in candidates
        assert placed.setdefault(bundle, chosen) == chosen
        assert shedder.select_broker(reversed(candidates), bundle, state) == (chosen, state)
    assert dict(state.bundle_broker) == placed


# --- bad input ----------------------------------------------------------------------------


class TestValidation:
    @pytest.mark.parametrize(
        ("kwargs", "error", "field"),
        [
            ({"msg_rate_in": -1.0}, ValueError, "msg_rate_in"),
            ({"msg_rate_out": float("nan")}, ValueError, "msg_rate_out"),
            ({"msg_throughput_in": float("inf")}, ValueError, "msg_throughput_in"),
            ({"msg_throughput_out": True}, TypeError, "msg_throughput_out"),
            ({"msg_rate_in": "5"}, TypeError, "msg_rate_in"),
        ],
    )
    def test_bad_rates(self, kwargs: dict[str, object], error: type, field: str) -> None:
        with pytest.raises(error, match=field):
            MessageRates(**kwargs)  # type: ignore[arg-type]

    def test_bad_usage_and_reports(self) -> None:
        with pytest.raises(ValueError, match="cpu"):
            ResourceUsage(cpu=-5.0)
        with pytest.raises(TypeError, match="bundles"):
            BrokerLoad(bundles="abc")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"^bundles\[0\] must not be empty"):
            BrokerLoad(bundles=frozenset({""}))
        with pytest.raises(TypeError, match=r"^bundles\[1\] must be a str, got int"):
            BrokerLoad(bundles=("a", 1))  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="updated_at_ms"):
            BrokerLoad(updated_at_ms=-1)
        with pytest.raises(TypeError, match="usage"):
            BrokerLoad(usage=50.0)  # type: ignore[arg-type]

    def test_inconsistent_snapshots(self) -> None:
        with pytest.raises(ValueError, match="'x' is owned by both 'a' and 'b'"):
            LoadData({"a": broker(bundles=["x"]), "b": broker(bundles=["x"])})
        with pytest.raises(ValueError, match="bundle_data: bundle 'ghost' is owned by no broker"):
            LoadData({"a": broker()}, {"ghost": load()})
        with pytest.raises(TypeError, match=r"broker_data\['a'\] must be a BrokerLoad"):
            LoadData({"a": 5})  # type: ignore[dict-item]
        with pytest.raises(TypeError, match="broker_data must be a mapping"):
            LoadData([("a", broker())])  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="broker_data key"):
            LoadData({"": broker()})
        with pytest.raises(TypeError, match="recently_unloaded_bundles"):
            LoadData({}, {}, "x")  # type: ignore[arg-type]

    def test_bad_states(self) -> None:
        with pytest.raises(ValueError, match="broker_hit_count_for_high"):
            AvgShedderState({"a": -1})
        with pytest.raises(ValueError, match="broker_avg_resource_usage"):
            ThresholdShedderState({"a": float("nan")})
        with pytest.raises(ValueError, match="unload_condition_hit_count"):
            TransferShedderState(-1)
        with pytest.raises(TypeError, match="state must be a ThresholdShedderState"):
            ThresholdShedder().find_bundles_for_unloading(
                snapshot({}),
                AvgShedderState(),  # type: ignore[arg-type]
            )
        with pytest.raises(TypeError, match="load_data must be a LoadData"):
            OverloadShedder().find_bundles_for_unloading({})  # type: ignore[arg-type]

    def test_bad_configuration(self) -> None:
        with pytest.raises(ValueError, match="load_balancer_broker_overloaded_threshold"):
            OverloadShedder(load_balancer_broker_overloaded_threshold_percentage=-1)
        with pytest.raises(ValueError, match="load_balancer_history_resource_percentage"):
            ThresholdShedder(load_balancer_history_resource_percentage=1.5)
        with pytest.raises(ValueError, match="max_unload_bundle_num_per_shedding"):
            UniformLoadShedder(max_unload_bundle_num_per_shedding=-2)
        with pytest.raises(TypeError, match="load_balancer_avg_shedder_low_threshold"):
            AvgShedder(load_balancer_avg_shedder_low_threshold=1.5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="load_balancer_transfer_enabled"):
            TransferShedder(load_balancer_transfer_enabled=1)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="load_balancer_max_number_of_bundles"):
            TransferShedder(load_balancer_max_number_of_bundles_in_bundle_load_report=0)

    def test_bad_transfer_call_arguments(self) -> None:
        shedder = TransferShedder()
        with pytest.raises(ValueError, match="now_ms"):
            shedder.find_bundles_for_unloading(snapshot({}), now_ms=-1)
        with pytest.raises(ValueError, match=r"recently_unloaded_brokers\['a'\]"):
            shedder.find_bundles_for_unloading(
                snapshot({}), now_ms=NOW, recently_unloaded_brokers={"a": -5}
            )


# --- Version profiles (pulsar_version) --------------------------------------------------------

SLA_V2 = "sla-monitor/broker-2:6650/0x00000000_0xffffffff"
SLA_V1 = "sla-monitor/c1/broker-2:6650/0x00000000_0xffffffff"
HEARTBEAT = "pulsar/broker-1:8080/0x00000000_0xffffffff"
ORDINARY = "tenant/ns/0x00000000_0x80000000"
MODULAR_SHEDDERS = (OverloadShedder, ThresholdShedder, UniformLoadShedder, AvgShedder)


class TestPulsarVersions:
    """``pulsar_version``: "4.2" (the default, Pulsar 4.2 and master) or "4.0" (4.0 LTS)."""

    def test_the_accepted_versions(self) -> None:
        assert PULSAR_VERSIONS == ("4.0", "4.2")
        assert DEFAULT_PULSAR_VERSION == "4.2"
        for shedder in MODULAR_SHEDDERS:
            assert shedder().pulsar_version == "4.2"
            assert shedder(pulsar_version="4.0").pulsar_version == "4.0"

    @pytest.mark.parametrize("bad", ["4.1", "4.0.7", "master", "", " 4.0"])
    def test_other_versions_are_refused_by_name(self, bad: str) -> None:
        message = rf"pulsar_version must be one of '4\.0', '4\.2', got {bad!r}"
        for shedder in MODULAR_SHEDDERS:
            with pytest.raises(ValueError, match=message):
                shedder(pulsar_version=bad)
        with pytest.raises(ValueError, match=message):
            top_k_bundles({ORDINARY: load(1.0)}, 1, pulsar_version=bad)
        with pytest.raises(ValueError, match=message):
            is_system_service_namespace("tenant/ns", pulsar_version=bad)
        data = snapshot({"a": broker(bundles=[ORDINARY])}, {ORDINARY: load(1.0)})
        with pytest.raises(ValueError, match=message):
            data.sheddable_bundles("a", pulsar_version=bad)

    def test_a_version_must_be_a_str(self) -> None:
        with pytest.raises(TypeError, match="pulsar_version must be a str, got float"):
            UniformLoadShedder(pulsar_version=4.0)  # type: ignore[arg-type]

    def test_sheddable_bundles_of_sla_monitor_namespaces(self) -> None:
        owned = [SLA_V2, SLA_V1, HEARTBEAT, ORDINARY]
        data = snapshot({"a": broker(bundles=owned)}, {n: load(1.0) for n in owned})
        # 4.2 knows sla-monitor/host:port, and cannot read a namespace with a cluster, so its
        # pattern never sees one; 4.0 knows only sla-monitor/cluster/host:port.
        assert [b for b, _ in data.sheddable_bundles("a")] == [SLA_V1, ORDINARY]
        assert [b for b, _ in data.sheddable_bundles("a", pulsar_version="4.0")] == [
            SLA_V2,
            ORDINARY,
        ]

    @pytest.mark.parametrize("version", PULSAR_VERSIONS)
    def test_overload_shedder_sheds_sla_monitor_bundles_on_4_0_only(self, version: str) -> None:
        bundles = {SLA_V2: load(80 * MB), HEARTBEAT: load(90 * MB), ORDINARY: load(MB)}
        data = snapshot({"a": broker(cpu=95.0, bundles=bundles, throughput=171 * MB)}, bundles)
        result = OverloadShedder(pulsar_version=version).find_bundles_for_unloading(data)
        expected = [SLA_V2] if version == "4.0" else [ORDINARY]
        assert [u.service_unit for u in result.unloads] == expected

    def uniform_cluster(self, busy_rate: float, bundles: Mapping[str, float]) -> LoadData:
        return snapshot(
            {"busy": broker(bundles=bundles, rate=busy_rate), "idle": broker()},
            {name: load(rate=rate) for name, rate in bundles.items()},
        )

    def test_uniform_shedder_takes_1000_more_on_4_0(self) -> None:
        # Nothing wanted (max_unload_percentage 0): 4.2 takes nothing busy, 4.0 a bundle of
        # up to 1000 msg/s over it, then what fits in the 1000 less what it took.
        data = self.uniform_cluster(10_000.0, {"x": 900.0, "y": 500.0, "z": 3000.0, "w": 100.0})
        config = {"max_unload_percentage": 0.0, "min_unload_message": 0}
        lts = UniformLoadShedder(**config, pulsar_version="4.0")
        assert unloaded(lts.find_bundles_for_unloading(data)) == [("busy", "x"), ("busy", "w")]
        assert not UniformLoadShedder(**config).find_bundles_for_unloading(data).unloads

    def test_uniform_shedder_4_0_sum_wraps_around_past_int_max(self) -> None:
        # (2**31 - 1 + 1) * 1.0 is Integer.MAX_VALUE wanted: 4.0's int sum with 1000 wraps
        # to a negative number and nothing fits; 4.2 takes both bundles.
        data = self.uniform_cluster(2.0**31, {"x": 1e9, "y": 1e9})
        config = {"max_unload_percentage": 1.0}
        assert unloaded(UniformLoadShedder(**config).find_bundles_for_unloading(data)) == [
            ("busy", "x"),
            ("busy", "y"),
        ]
        lts = UniformLoadShedder(**config, pulsar_version="4.0")
        assert not lts.find_bundles_for_unloading(data).unloads

    def test_avg_shedder_orders_brokers_as_4_2_on_every_profile(self) -> None:
        # Scores 20.2, 20.9 and 60: 4.0's (int) (s1 - s2) would call the first two equal.
        names = {b: [f"{b}/ns/0x0000000{i}_0x0000000{i + 1}" for i in range(3)] for b in "abc"}
        brokers = {
            "a": broker(cpu=20.9, bundles=names["a"], rate=100.0),
            "b": broker(cpu=60.0, bundles=names["b"], rate=10_000.0),
            "c": broker(cpu=20.2, bundles=names["c"], rate=50.0),
        }
        bundles = {
            n: load(rate=rate)
            for b in "abc"
            for n, rate in zip(names[b], (10, 2000, 30), strict=True)
        }
        data = snapshot(brokers, bundles)
        config = {"load_balancer_avg_shedder_hit_count_low_threshold": 1}
        default = AvgShedder(**config).find_bundles_for_unloading(data)
        lts = AvgShedder(**config, pulsar_version="4.0").find_bundles_for_unloading(data)
        assert lts == default
        # The lowest (c, not a) pairs with the highest.
        assert {(u.source_broker, u.dest_broker) for u in default.unloads} == {("b", "c")}

    def test_top_k_bundles_reports_sla_monitor_bundles_on_4_0(self) -> None:
        stats = {SLA_V2: load(5e6), SLA_V1: load(4e6), HEARTBEAT: load(3e6), ORDINARY: load(1e6)}
        assert [b for b, _ in top_k_bundles(stats, 10)] == [ORDINARY, SLA_V1]
        assert [b for b, _ in top_k_bundles(stats, 10, pulsar_version="4.0")] == [
            ORDINARY,
            SLA_V2,
        ]

    def test_bundle_namespace_is_the_whole_name_when_unreadable(self) -> None:
        """As Pulsar's getBundleNamespace: a v1 namespace is read by 4.0 only, and a name
        that is no namespace leaves the bundle name whole, matching no system namespace."""
        v1 = "pulsar/us-west/host-1:8080/0x00000000_0xffffffff"
        assert bundle_namespace(v1) == v1
        assert bundle_namespace(v1, pulsar_version="4.0") == "pulsar/us-west/host-1:8080"
        assert bundle_namespace("t/ns/0x00000000_0xffffffff") == "t/ns"
        assert bundle_namespace("t/n s/0x00000000_0xffffffff") == "t/n s/0x00000000_0xffffffff"
        busy = {v1: MessageRates(msg_throughput_in=MB)}
        assert [b for b, _ in top_k_bundles(busy, 10)] == [v1]
        assert top_k_bundles(busy, 10, pulsar_version="4.0") == ()

    def test_system_service_namespaces_by_version(self) -> None:
        for namespace in ("pulsar/system", "pulsar/h:8080", "pulsar/c1/h:8080"):
            assert is_system_service_namespace(namespace)
            assert is_system_service_namespace(namespace, pulsar_version="4.0")
        assert is_system_service_namespace("sla-monitor/h:6650")
        assert is_system_service_namespace("sla-monitor/c1/h:6650")
        assert not is_system_service_namespace("pulsar/h:٨٠")  # Java's \d is ASCII
        assert not is_system_service_namespace("sla-monitor/h:6650", pulsar_version="4.0")
        assert is_system_service_namespace("sla-monitor/c1/h:6650", pulsar_version="4.0")
        assert not is_system_service_namespace("tenant/ns", pulsar_version="4.0")
