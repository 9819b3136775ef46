"""Pulsar's modular-load-manager shedding strategies as pure functions.

Each shedder is a frozen configuration (Pulsar's broker settings, same defaults) whose
``find_bundles_for_unloading`` reads a :class:`~keyshared.loadbalance.model.LoadData`
and, for the stateful ones, the state returned by its previous call. Pulsar visits
brokers and bundles in hash-map order; here brokers go by name, and bundles with equal
load by name, so that every decision is reproducible. Only the strategies are modelled:
the load manager's own guards (at least two brokers, bundle ownership checks, anti-affinity
filters) sit around them in Pulsar and are the caller's to apply.

Every shedder takes ``pulsar_version`` (one of :data:`~keyshared.loadbalance.PULSAR_VERSIONS`):
``"4.2"``, the default, behaves as Pulsar 4.2 and master; ``"4.0"`` as the 4.0 LTS line
(4.0.7), which sheds the bundles of ``sla-monitor/host:port`` namespaces (it knows the
SLA-monitor namespace only as ``sla-monitor/cluster/host:port``) and whose
:class:`UniformLoadShedder` takes a bundle up to 1000 over what is still wanted.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeVar

from keyshared._checks import check_bool, check_int, check_name, check_names, check_real
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.loadbalance._java import java_int, java_wrap_int
from keyshared.loadbalance.model import (
    DEFAULT_PULSAR_VERSION,
    MB,
    LoadData,
    MessageRates,
    ResourceWeights,
    SheddingResult,
    Unload,
    check_pulsar_version,
)

#: Shed a little below the threshold, so that a shed broker is not left on its edge.
ADDITIONAL_THRESHOLD_PERCENT_MARGIN = 0.05
#: Lower-boundary shedding offloads half of the threshold's share of traffic.
LOWER_BOUNDARY_THRESHOLD_MARGIN = 0.5
#: A broker load of (almost) zero is read as 1.0 when dividing by it.
_EPS = 1e-6
#: Pulsar's initial "minimum" broker rates in UniformLoadShedder (``Integer.MAX_VALUE``).
_INITIAL_MIN = float(2**31 - 1)
#: How far over what is still wanted UniformLoadShedder takes a bundle, by release line
#: (msg/s or bytes/s): 4.0 allowed 1000 more, 4.2 dropped it.
_UNIFORM_DELTA = {"4.0": 1000, "4.2": 0}


#: How a shedder measures a bundle or broker: message rate or throughput, in plus out.
_Metric = Callable[[MessageRates], float]


def _msg_rate(rates: MessageRates) -> float:
    return rates.msg_rate


def _msg_throughput(rates: MessageRates) -> float:
    return rates.msg_throughput


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.2f}%"


def _mbps(bytes_per_second: float) -> str:
    return f"{bytes_per_second / MB:.2f} MB/s"


def _check_load_data(load_data: object) -> LoadData:
    if not isinstance(load_data, LoadData):
        raise ArgumentTypeError(
            f"load_data must be a LoadData, got {type(load_data).__name__}", argument="load_data"
        )
    return load_data


def _check_weights(weights: object) -> None:
    if not isinstance(weights, ResourceWeights):
        raise ArgumentTypeError(
            f"resource_weights must be a ResourceWeights, got {type(weights).__name__}",
            argument="resource_weights",
        )


def _by_load_desc(candidates: list[tuple[str, float]]) -> list[tuple[str, float]]:
    # Pulsar sorts with Double.compare(e2, e1); equal loads keep hash-map order there.
    return sorted(candidates, key=lambda entry: (-entry[1], entry[0]))


def _shed_by_throughput(
    load_data: LoadData,
    broker: str,
    minimum_throughput_to_offload: float,
    why: str,
    pulsar_version: str,
) -> tuple[list[Unload], str]:
    """Unload the broker's largest bundles until the minimum is met, at least one.

    The rule shared by OverloadShedder and ThresholdShedder: only a broker with more than
    one bundle is shed, and bundles are taken by short-term throughput, largest first.
    """
    owned = load_data.broker_data[broker].bundles
    if len(owned) == 1:
        return [], f"{broker}: {why}; its sole bundle {next(iter(owned))} is not shed"
    if not owned:
        return [], f"{broker}: {why}, despite having no bundles; nothing to shed"
    candidates = _by_load_desc(
        [
            (bundle, rates.msg_throughput)
            for bundle, rates in load_data.sheddable_bundles(broker, pulsar_version=pulsar_version)
        ]
    )
    selected: list[str] = []
    marked = 0.0
    for bundle, throughput in candidates:
        if marked < minimum_throughput_to_offload or not selected:
            selected.append(bundle)
            marked += throughput
    if not selected:
        return [], f"{broker}: {why}, but no bundle with load data is free to unload"
    reason = (
        f"{broker}: {why}; offloading at least {_mbps(minimum_throughput_to_offload)}: "
        f"unloading {', '.join(selected)} ({_mbps(marked)})"
    )
    return [Unload(broker, bundle) for bundle in selected], reason


@dataclass(frozen=True)
class OverloadShedder:
    """Shed bundles off every broker whose weighted max resource usage reaches the threshold.

    A broker is overloaded when its usage is >= ``threshold / 100`` (the weighted form
    follows PIP-358); it then sheds at least ``throughput * (usage - threshold + 0.05)``
    bytes/s, largest bundles first and at least one, if it owns more than one bundle.
    """

    load_balancer_broker_overloaded_threshold_percentage: int = 85
    resource_weights: ResourceWeights = field(default_factory=ResourceWeights)
    pulsar_version: str = DEFAULT_PULSAR_VERSION

    def __post_init__(self) -> None:
        check_int(
            "load_balancer_broker_overloaded_threshold_percentage",
            self.load_balancer_broker_overloaded_threshold_percentage,
            minimum=0,
        )
        _check_weights(self.resource_weights)
        check_pulsar_version(self.pulsar_version)

    def find_bundles_for_unloading(self, load_data: LoadData) -> SheddingResult[None]:
        """The bundles to unload, with a reason per broker; this shedder keeps no state."""
        _check_load_data(load_data)
        threshold = self.load_balancer_broker_overloaded_threshold_percentage / 100.0
        unloads: list[Unload] = []
        reasons: list[str] = []
        for broker in load_data.brokers():
            data = load_data.broker_data[broker]
            usage = data.usage.max_resource_usage_with_weight(self.resource_weights)
            if usage < threshold:
                reasons.append(
                    f"{broker}: not overloaded, max resource usage {_pct(usage)} "
                    f"< threshold {_pct(threshold)}"
                )
                continue
            percent = usage - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN
            why = f"overloaded, max resource usage {_pct(usage)} >= threshold {_pct(threshold)}"
            shed, reason = _shed_by_throughput(
                load_data, broker, data.rates.msg_throughput * percent, why, self.pulsar_version
            )
            unloads.extend(shed)
            reasons.append(reason)
        return SheddingResult(tuple(unloads), tuple(reasons), None)


@dataclass(frozen=True)
class ThresholdShedderState:
    """Each broker's smoothed resource usage (a fraction), as of the previous call."""

    broker_avg_resource_usage: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        usage = self.broker_avg_resource_usage
        if not isinstance(usage, Mapping):
            raise ArgumentTypeError(
                "broker_avg_resource_usage must be a mapping", argument="broker_avg_resource_usage"
            )
        checked = {
            check_name("broker_avg_resource_usage key", broker): check_real(
                f"broker_avg_resource_usage[{broker!r}]", value
            )
            for broker, value in usage.items()
        }
        object.__setattr__(self, "broker_avg_resource_usage", MappingProxyType(checked))


@dataclass(frozen=True)
class ThresholdShedder:
    """Shed brokers whose smoothed usage is at least the cluster average plus a threshold.

    Usage is the weighted max resource usage (readings above 100 % count in full),
    smoothed as ``history * p + (1 - p) * usage`` per call. A broker at or above
    ``avg + threshold`` sheds ``throughput * (usage - avg - threshold + 0.05)`` bytes/s,
    unless that is below the minimum unload throughput (MB/s). With lower-boundary shedding
    on and nothing shed, the most-used broker with more than one bundle sheds
    ``throughput * threshold / 2`` when some broker is below ``avg - threshold``; as in
    Pulsar, that pass smooths the history a second time.
    """

    load_balancer_broker_threshold_shedder_percentage: int = 10
    load_balancer_history_resource_percentage: float = 0.9
    load_balancer_bundle_unload_min_throughput_threshold: float = 10
    lower_boundary_shedding_enabled: bool = False
    resource_weights: ResourceWeights = field(default_factory=ResourceWeights)
    pulsar_version: str = DEFAULT_PULSAR_VERSION

    def __post_init__(self) -> None:
        check_int(
            "load_balancer_broker_threshold_shedder_percentage",
            self.load_balancer_broker_threshold_shedder_percentage,
            minimum=0,
        )
        history = check_real(
            "load_balancer_history_resource_percentage",
            self.load_balancer_history_resource_percentage,
        )
        if history > 1.0:
            raise InvalidArgument(
                f"load_balancer_history_resource_percentage must be <= 1, got {history}",
                argument="load_balancer_history_resource_percentage",
            )
        check_real(
            "load_balancer_bundle_unload_min_throughput_threshold",
            self.load_balancer_bundle_unload_min_throughput_threshold,
        )
        check_bool("lower_boundary_shedding_enabled", self.lower_boundary_shedding_enabled)
        _check_weights(self.resource_weights)
        check_pulsar_version(self.pulsar_version)

    def find_bundles_for_unloading(
        self, load_data: LoadData, state: ThresholdShedderState | None = None
    ) -> SheddingResult[ThresholdShedderState]:
        """The bundles to unload, the reasons, and the smoothed usage for the next call."""
        _check_load_data(load_data)
        state = _check_state(state, ThresholdShedderState)
        history = dict(state.broker_avg_resource_usage)
        reasons: list[str] = []
        avg_usage = self._update_avg_usage(load_data, history, reasons)
        if avg_usage == 0:
            reasons.append("average max resource usage is 0; nothing to shed")
            return SheddingResult((), tuple(reasons), ThresholdShedderState(history))
        unloads = self._shed_above_average(load_data, history, avg_usage, reasons)
        if not unloads and self.lower_boundary_shedding_enabled:
            unloads = self._shed_lower_boundary(load_data, history, reasons)
        return SheddingResult(tuple(unloads), tuple(reasons), ThresholdShedderState(history))

    @property
    def _threshold(self) -> float:
        return self.load_balancer_broker_threshold_shedder_percentage / 100.0

    @property
    def _min_throughput_threshold(self) -> float:
        return self.load_balancer_bundle_unload_min_throughput_threshold * MB

    def _update_avg_usage(
        self, load_data: LoadData, history: dict[str, float], reasons: list[str]
    ) -> float:
        percentage = self.load_balancer_history_resource_percentage
        total = 0.0
        for broker in load_data.brokers():
            # Readings above 100 % count in full: a broker at 140 % CPU is overloaded, not
            # misconfigured (Pulsar reverted ignoring them in apache/pulsar#18645).
            usage = load_data.broker_data[broker].usage.max_resource_usage_with_weight(
                self.resource_weights
            )
            previous = history.get(broker)
            history[broker] = (
                usage if previous is None else previous * percentage + (1 - percentage) * usage
            )
            total += history[broker]
        count = len(load_data.broker_data)
        return total / count if count else 0.0

    def _shed_above_average(
        self,
        load_data: LoadData,
        history: Mapping[str, float],
        avg_usage: float,
        reasons: list[str],
    ) -> list[Unload]:
        threshold = self._threshold
        unloads: list[Unload] = []
        for broker in load_data.brokers():
            current = history[broker]
            if current < avg_usage + threshold:
                reasons.append(
                    f"{broker}: not overloaded, usage {_pct(current)} < average "
                    f"{_pct(avg_usage)} + threshold {_pct(threshold)}"
                )
                continue
            percent = current - avg_usage - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN
            minimum = load_data.broker_data[broker].rates.msg_throughput * percent
            if minimum < self._min_throughput_threshold:
                reasons.append(
                    f"{broker}: usage {_pct(current)} is above average + threshold, but "
                    f"{_mbps(minimum)} to offload is below the minimum "
                    f"{_mbps(self._min_throughput_threshold)}"
                )
                continue
            why = (
                f"usage {_pct(current)} >= average {_pct(avg_usage)} + threshold {_pct(threshold)}"
            )
            shed, reason = _shed_by_throughput(load_data, broker, minimum, why, self.pulsar_version)
            unloads.extend(shed)
            reasons.append(reason)
        return unloads

    def _shed_lower_boundary(
        self, load_data: LoadData, history: dict[str, float], reasons: list[str]
    ) -> list[Unload]:
        threshold = self._threshold
        avg_usage = self._update_avg_usage(load_data, history, reasons)
        lower_bound = avg_usage - threshold
        max_broker: str | None = None
        max_usage = lower_bound
        below_lower_bound = False
        for broker in load_data.brokers():
            current = history[broker]
            if current > max_usage and len(load_data.broker_data[broker].bundles) > 1:
                max_usage, max_broker = current, broker
            below_lower_bound = below_lower_bound or current < lower_bound
        if max_broker is None:
            reasons.append(
                f"lower boundary: no broker with more than one bundle is above "
                f"average - threshold {_pct(lower_bound)}"
            )
            return []
        if not below_lower_bound:
            reasons.append(
                f"lower boundary: no broker is below average - threshold {_pct(lower_bound)}"
            )
            return []
        minimum = (
            load_data.broker_data[max_broker].rates.msg_throughput
            * threshold
            * LOWER_BOUNDARY_THRESHOLD_MARGIN
        )
        if self._min_throughput_threshold > minimum:
            reasons.append(
                f"lower boundary: {max_broker} would offload {_mbps(minimum)}, below the "
                f"minimum {_mbps(self._min_throughput_threshold)}"
            )
            return []
        why = f"lower boundary: most used broker ({_pct(max_usage)}) while some are underused"
        shed, reason = _shed_by_throughput(load_data, max_broker, minimum, why, self.pulsar_version)
        reasons.append(reason)
        return shed


@dataclass(frozen=True)
class UniformLoadShedder:
    """Move load from the busiest to the idlest broker when they differ too much.

    The message-rate test (difference in percent of the smallest rate) goes first; if it
    does not fire, the throughput test (ratio of the largest to the smallest) may. The
    shedder then wants ``(max - min) * max_unload_percentage`` (truncated to a 32-bit int,
    as Pulsar holds it) off the busiest broker, if that broker has more than one bundle and
    the amount reaches the minimum; it walks that broker's bundles largest first, taking
    each that fits in what is still wanted, up to ``max_unload_bundle_num_per_shedding``
    (``-1``: no limit). As in Pulsar, idle bundles fit and are taken.

    ``pulsar_version="4.0"`` (Pulsar 4.0 LTS) lets a bundle fit while its load is at most
    what is still wanted plus 1000 (msg/s or bytes/s, as the metric), so that bundles go
    even with ``max_unload_percentage`` 0; that sum is a 32-bit int in Pulsar, which wraps
    around past ``Integer.MAX_VALUE`` (then nothing fits). Pulsar 4.2 dropped the 1000
    (the default, ``"4.2"``). 4.0 also sheds ``sla-monitor/host:port`` bundles (see
    :meth:`LoadData.sheddable_bundles <keyshared.loadbalance.LoadData.sheddable_bundles>`).
    """

    load_balancer_msg_rate_difference_shedder_threshold: float = 50
    load_balancer_msg_throughput_multiplier_difference_shedder_threshold: float = 4
    max_unload_percentage: float = 0.2
    min_unload_message: int = 1000
    min_unload_message_throughput: int = 1 * MB
    max_unload_bundle_num_per_shedding: int = -1
    pulsar_version: str = DEFAULT_PULSAR_VERSION

    def __post_init__(self) -> None:
        check_real(
            "load_balancer_msg_rate_difference_shedder_threshold",
            self.load_balancer_msg_rate_difference_shedder_threshold,
            minimum=None,
        )
        check_real(
            "load_balancer_msg_throughput_multiplier_difference_shedder_threshold",
            self.load_balancer_msg_throughput_multiplier_difference_shedder_threshold,
            minimum=None,
        )
        check_real("max_unload_percentage", self.max_unload_percentage)
        check_int("min_unload_message", self.min_unload_message)
        check_int("min_unload_message_throughput", self.min_unload_message_throughput)
        check_int(
            "max_unload_bundle_num_per_shedding",
            self.max_unload_bundle_num_per_shedding,
            minimum=-1,
        )
        check_pulsar_version(self.pulsar_version)

    def find_bundles_for_unloading(self, load_data: LoadData) -> SheddingResult[None]:
        """The bundles to unload and why; this shedder keeps no state."""
        _check_load_data(load_data)
        rate = _Extremes.of(load_data, _msg_rate)
        throughput = _Extremes.of(load_data, _msg_throughput)
        rate_threshold = self.load_balancer_msg_rate_difference_shedder_threshold
        throughput_threshold = (
            self.load_balancer_msg_throughput_multiplier_difference_shedder_threshold
        )
        rate_difference = (rate.max_value - rate.min_value) * 100 / rate.min_value
        throughput_ratio = throughput.max_value / throughput.min_value
        if rate_threshold > 0 and rate_difference > rate_threshold:
            why = (
                f"msg rate of {rate.max_broker} is {rate_difference:.2f}% above "
                f"{rate.min_broker}'s (threshold {rate_threshold}%)"
            )
            return self._shed(load_data, rate, self.min_unload_message, _msg_rate, why)
        if throughput_threshold > 0 and throughput_ratio > throughput_threshold:
            why = (
                f"throughput of {throughput.max_broker} is {throughput_ratio:.2f} times "
                f"{throughput.min_broker}'s (threshold {throughput_threshold})"
            )
            return self._shed(
                load_data, throughput, self.min_unload_message_throughput, _msg_throughput, why
            )
        reason = (
            f"balanced: msg rate difference {rate_difference:.2f}% (threshold "
            f"{rate_threshold}%), throughput ratio {throughput_ratio:.2f} (threshold "
            f"{throughput_threshold})"
        )
        return SheddingResult((), (reason,), None)

    def _shed(
        self, load_data: LoadData, extremes: _Extremes, minimum: int, metric: _Metric, why: str
    ) -> SheddingResult[None]:
        broker = extremes.max_broker
        assert broker is not None  # a threshold can only fire with brokers present
        required = java_int((extremes.max_value - extremes.min_value) * self.max_unload_percentage)
        if len(load_data.broker_data[broker].bundles) <= 1:
            return SheddingResult((), (f"{why}; but {broker} has at most one bundle",), None)
        if required < minimum:
            reason = f"{why}; but {required} to move is below the minimum {minimum}"
            return SheddingResult((), (reason,), None)
        candidates = _by_load_desc(
            [
                (bundle, metric(rates))
                for bundle, rates in load_data.sheddable_bundles(
                    broker, pulsar_version=self.pulsar_version
                )
            ]
        )
        selected: list[str] = []
        cap = self.max_unload_bundle_num_per_shedding
        delta = _UNIFORM_DELTA[self.pulsar_version]
        for bundle, load in candidates:
            if cap != -1 and len(selected) >= cap:
                continue
            # What is still wanted plus the release's delta, an int sum in Pulsar.
            if load <= java_wrap_int(required + delta):
                required += java_int(-load)
                selected.append(bundle)
        reason = f"{why}; unloading {', '.join(selected) or 'nothing'} from {broker}"
        return SheddingResult(tuple(Unload(broker, b) for b in selected), (reason,), None)


@dataclass(frozen=True)
class _Extremes:
    """The busiest and idlest broker by one metric; a near-zero minimum reads as 1.0."""

    max_broker: str | None
    max_value: float
    min_broker: str | None
    min_value: float

    @classmethod
    def of(cls, load_data: LoadData, metric: _Metric) -> _Extremes:
        max_broker = min_broker = None
        max_value, min_value = -1.0, _INITIAL_MIN
        for broker in load_data.brokers():
            value = metric(load_data.broker_data[broker].rates)
            if value > max_value:
                max_broker, max_value = broker, value
            if value < min_value:
                min_broker, min_value = broker, value
        if -_EPS <= min_value <= _EPS:
            min_value = 1.0
        return cls(max_broker, max_value, min_broker, min_value)


@dataclass(frozen=True)
class AvgShedderState:
    """Consecutive hit counts per broker against the high and the low threshold, and the
    broker each bundle was shed (or assigned) to, which :meth:`AvgShedder.select_broker`
    reads."""

    broker_hit_count_for_high: Mapping[str, int] = field(default_factory=dict)
    broker_hit_count_for_low: Mapping[str, int] = field(default_factory=dict)
    bundle_broker: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.bundle_broker, Mapping):
            raise ArgumentTypeError("bundle_broker must be a mapping", argument="bundle_broker")
        targets = {
            check_name("bundle_broker key", bundle): check_name(
                f"bundle_broker[{bundle!r}]", broker
            )
            for bundle, broker in self.bundle_broker.items()
        }
        object.__setattr__(self, "bundle_broker", MappingProxyType(targets))
        for name in ("broker_hit_count_for_high", "broker_hit_count_for_low"):
            counts = getattr(self, name)
            if not isinstance(counts, Mapping):
                raise ArgumentTypeError(f"{name} must be a mapping", argument=name)
            checked = {
                check_name(f"{name} key", broker): check_int(f"{name}[{broker!r}]", n, minimum=0)
                for broker, n in counts.items()
            }
            object.__setattr__(self, name, MappingProxyType(checked))


@dataclass(frozen=True)
class AvgShedder:
    """Pair the least and most loaded brokers and even out each pair that stays apart.

    Scores are the weighted max resource usage in percent. Brokers sorted by score pair up
    from both ends (lowest with highest, then inwards). A pair whose
    score gap reaches the low threshold gets a low hit (and a high hit when it also reaches
    the high threshold); a gap below the low threshold clears both brokers' counts, and a
    round with no pair clears all counts. A pair in which a broker has ``hit_count_high``
    high hits or ``hit_count_low`` low hits sheds ``(max - min) * max_unload_percentage`` of
    message rate (if above the minimum) or else of throughput (if above its minimum), from
    the high broker's bundles, largest first, each that fits, to the low broker. As in
    Pulsar, a broker with a single bundle may still shed it. The state remembers where each
    shed bundle went, for :meth:`select_broker` to place it there.

    Brokers are ordered by exact score, as Pulsar 4.2 does, for every ``pulsar_version``:
    4.0 sorted them with ``(int) (score1 - score2)``, a comparator that is not transitive
    (scores less than one point apart compare equal) over hash-map order, a defect 4.2
    fixed, which this class does not reproduce. ``pulsar_version="4.0"`` changes only which
    bundles may be shed (4.0 sheds ``sla-monitor/host:port`` bundles).
    """

    load_balancer_avg_shedder_low_threshold: int = 15
    load_balancer_avg_shedder_high_threshold: int = 40
    load_balancer_avg_shedder_hit_count_low_threshold: int = 8
    load_balancer_avg_shedder_hit_count_high_threshold: int = 2
    min_unload_message: int = 1000
    min_unload_message_throughput: int = 1 * MB
    max_unload_percentage: float = 0.2
    resource_weights: ResourceWeights = field(default_factory=ResourceWeights)
    pulsar_version: str = DEFAULT_PULSAR_VERSION

    def __post_init__(self) -> None:
        for name in (
            "load_balancer_avg_shedder_low_threshold",
            "load_balancer_avg_shedder_high_threshold",
            "load_balancer_avg_shedder_hit_count_low_threshold",
            "load_balancer_avg_shedder_hit_count_high_threshold",
            "min_unload_message",
            "min_unload_message_throughput",
        ):
            check_int(name, getattr(self, name))
        check_real("max_unload_percentage", self.max_unload_percentage)
        _check_weights(self.resource_weights)
        check_pulsar_version(self.pulsar_version)

    def find_bundles_for_unloading(
        self, load_data: LoadData, state: AvgShedderState | None = None
    ) -> SheddingResult[AvgShedderState]:
        """The bundles to unload (each to its pair's low broker), reasons, and hit counts."""
        _check_load_data(load_data)
        state = _check_state(state, AvgShedderState)
        high = dict(state.broker_hit_count_for_high)
        low = dict(state.broker_hit_count_for_low)
        scores = {
            broker: load_data.broker_data[broker].usage.max_resource_usage_with_weight(
                self.resource_weights
            )
            * 100
            for broker in load_data.brokers()
        }
        reasons: list[str] = []
        pairs = self._find_broker_pairs(scores, high, low, reasons)
        targets = dict(state.bundle_broker)
        if not pairs:
            reasons.append("no pair of brokers is apart by the low threshold; hit counts cleared")
            return SheddingResult((), tuple(reasons), AvgShedderState({}, {}, targets))
        unloads: list[Unload] = []
        for min_broker, max_broker in pairs:
            if not self._hit(min_broker, max_broker, high, low):
                reasons.append(
                    f"{max_broker} -> {min_broker}: hit counts high "
                    f"{high.get(max_broker, 0)}/{high.get(min_broker, 0)}, low "
                    f"{low.get(max_broker, 0)}/{low.get(min_broker, 0)} not reached yet"
                )
                continue
            for broker in (min_broker, max_broker):
                high.pop(broker, None)
                low.pop(broker, None)
            selected = self._select(load_data, max_broker, min_broker, reasons)
            targets.update((unload.service_unit, min_broker) for unload in selected)
            unloads.extend(selected)
        return SheddingResult(tuple(unloads), tuple(reasons), AvgShedderState(high, low, targets))

    def select_broker(
        self, candidates: Iterable[str], bundle: str, state: AvgShedderState | None = None
    ) -> tuple[str, AvgShedderState]:
        """Pulsar's ``selectBroker``: where ``bundle`` goes, and the state remembering it.

        The broker a shedding pass chose for the bundle, if it is still a candidate;
        otherwise (a starting cluster, or that broker gone) one of the candidates sorted by
        name, picked by hash. Pulsar hashes a random number there; here the bundle name
        is hashed (CRC32), so that the choice is reproducible.
        """
        brokers = sorted(check_names("candidates", candidates))
        check_name("bundle", bundle)
        state = _check_state(state, AvgShedderState)
        if not brokers:
            raise InvalidArgument("candidates must not be empty", argument="candidates")
        chosen = state.bundle_broker.get(bundle)
        if chosen in brokers:
            assert chosen is not None
            return chosen, state
        chosen = brokers[zlib.crc32(bundle.encode("utf-8")) % len(brokers)]
        targets = dict(state.bundle_broker) | {bundle: chosen}
        new_state = AvgShedderState(
            state.broker_hit_count_for_high, state.broker_hit_count_for_low, targets
        )
        return chosen, new_state

    def _find_broker_pairs(
        self,
        scores: Mapping[str, float],
        high: dict[str, int],
        low: dict[str, int],
        reasons: list[str],
    ) -> list[tuple[str, str]]:
        # By score, as Pulsar 4.2's Comparator.comparingDouble (4.0's truncated the score
        # difference to an int, which left brokers less than one point apart unordered);
        # equal scores keep name order here, hash-map order in Pulsar.
        brokers = sorted(sorted(scores), key=lambda broker: scores[broker])
        pairs: list[tuple[str, str]] = []
        i, j = 0, len(brokers) - 1
        while i <= j:
            min_broker, max_broker = brokers[i], brokers[j]
            gap = scores[max_broker] - scores[min_broker]
            if gap < self.load_balancer_avg_shedder_low_threshold:
                for broker in (min_broker, max_broker):
                    high.pop(broker, None)
                    low.pop(broker, None)
                reasons.append(
                    f"{max_broker} ({scores[max_broker]:.2f}) vs {min_broker} "
                    f"({scores[min_broker]:.2f}): gap {gap:.2f} < low threshold; counts cleared"
                )
            else:
                pairs.append((min_broker, max_broker))
                for broker in (min_broker, max_broker):
                    low[broker] = low.get(broker, 0) + 1
                    if gap < self.load_balancer_avg_shedder_high_threshold:
                        high.pop(broker, None)
                    else:
                        high[broker] = high.get(broker, 0) + 1
                reasons.append(
                    f"{max_broker} ({scores[max_broker]:.2f}) vs {min_broker} "
                    f"({scores[min_broker]:.2f}): gap {gap:.2f} counts as a hit"
                )
            i += 1
            j -= 1
        return pairs

    def _hit(
        self, min_broker: str, max_broker: str, high: dict[str, int], low: dict[str, int]
    ) -> bool:
        hit_high = self.load_balancer_avg_shedder_hit_count_high_threshold
        hit_low = self.load_balancer_avg_shedder_hit_count_low_threshold
        return any(
            high.get(b, 0) >= hit_high or low.get(b, 0) >= hit_low for b in (min_broker, max_broker)
        )

    def _select(
        self, load_data: LoadData, max_broker: str, min_broker: str, reasons: list[str]
    ) -> list[Unload]:
        max_rates = load_data.broker_data[max_broker].rates
        min_rates = load_data.broker_data[min_broker].rates
        msg_required = (max_rates.msg_rate - min_rates.msg_rate) * self.max_unload_percentage
        throughput_required = (
            max_rates.msg_throughput - min_rates.msg_throughput
        ) * self.max_unload_percentage
        metric: _Metric
        if msg_required > self.min_unload_message:
            metric, required, what = _msg_rate, msg_required, f"{msg_required:.2f} msg/s"
        elif throughput_required > self.min_unload_message_throughput:
            metric, required, what = (
                _msg_throughput,
                throughput_required,
                _mbps(throughput_required),
            )
        else:
            reasons.append(
                f"{max_broker} -> {min_broker}: {msg_required:.2f} msg/s and "
                f"{_mbps(throughput_required)} to move are below the minimums"
            )
            return []
        candidates = _by_load_desc(
            [
                (bundle, metric(rates))
                for bundle, rates in load_data.sheddable_bundles(
                    max_broker, pulsar_version=self.pulsar_version
                )
            ]
        )
        selected: list[str] = []
        remaining = required
        for bundle, traffic in candidates:
            if 0 < traffic <= remaining:
                selected.append(bundle)
                remaining -= traffic
        reasons.append(
            f"{max_broker} -> {min_broker}: moving {what}: "
            f"unloading {', '.join(selected) or 'nothing that fits'}"
        )
        return [Unload(max_broker, bundle, min_broker) for bundle in selected]


_S = TypeVar("_S", ThresholdShedderState, AvgShedderState)


def _check_state(state: _S | None, state_type: type[_S]) -> _S:
    if state is None:
        return state_type()
    if not isinstance(state, state_type):
        raise ArgumentTypeError(
            f"state must be a {state_type.__name__}, got {type(state).__name__}", argument="state"
        )
    return state


__all__ = [
    "ADDITIONAL_THRESHOLD_PERCENT_MARGIN",
    "LOWER_BOUNDARY_THRESHOLD_MARGIN",
    "AvgShedder",
    "AvgShedderState",
    "OverloadShedder",
    "ThresholdShedder",
    "ThresholdShedderState",
    "UniformLoadShedder",
]
