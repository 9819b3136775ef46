"""Pulsar's TransferShedder, the extensible load manager's default strategy, as a pure function.

Brokers' loads are exponential moving averages (EMA) of their weighted max resource usage
(a fraction) and of their throughput (bytes/s), smoothed once per load report. While the
standard deviation of the loads is above the target, or the least loaded broker is
underloaded, or the most loaded one overloaded, and that has held on more consecutive
calls than ``load_balancer_shedding_condition_hit_count_threshold``, the shedder moves
half of the load gap from the most to the least loaded broker, pair by pair, naming the
destination of each bundle. Only each broker's top bundles are candidates: the
``load_balancer_max_number_of_bundles_in_bundle_load_report`` busiest ones with traffic,
walked least busy first, as Pulsar's ``TopKBundles`` reports them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from keyshared.loadbalance._validation import (
    check_bool,
    check_int,
    check_name,
    check_real,
    java_div,
    java_sqrt,
)
from keyshared.loadbalance.model import (
    LoadData,
    MessageRates,
    ResourceWeights,
    SheddingResult,
    Unload,
)

#: A swap stops once the busy broker's new throughput is below this share of its old one.
_SWAP_TARGET_SHARE = 0.75


@dataclass(frozen=True)
class BrokerLoadEma:
    """A broker's smoothed load as of its report at ``updated_at_ms`` (epoch ms)."""

    updated_at_ms: int
    weighted_max_ema: float
    msg_throughput_ema: float

    def __post_init__(self) -> None:
        check_int("updated_at_ms", self.updated_at_ms, minimum=0)
        for name in ("weighted_max_ema", "msg_throughput_ema"):
            object.__setattr__(self, name, check_real(name, getattr(self, name)))


@dataclass(frozen=True)
class TransferShedderState:
    """Consecutive calls on which the unload condition held, and each broker's EMAs."""

    unload_condition_hit_count: int = 0
    broker_load_ema: Mapping[str, BrokerLoadEma] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_int("unload_condition_hit_count", self.unload_condition_hit_count, minimum=0)
        if not isinstance(self.broker_load_ema, Mapping):
            raise TypeError("broker_load_ema must be a mapping")
        checked: dict[str, BrokerLoadEma] = {}
        for broker, ema in self.broker_load_ema.items():
            check_name("broker_load_ema key", broker)
            if not isinstance(ema, BrokerLoadEma):
                raise TypeError(f"broker_load_ema[{broker!r}] must be a BrokerLoadEma")
            checked[broker] = ema
        object.__setattr__(self, "broker_load_ema", MappingProxyType(checked))


@dataclass(frozen=True)
class TransferSheddingResult(SheddingResult[TransferShedderState]):
    """A :class:`SheddingResult` with Pulsar's decision labels.

    ``decision_reasons[i]`` is why ``unloads[i]`` happens (``"Overloaded"`` or
    ``"Underloaded"``); ``skip_reason`` is why nothing happens (``"NoBrokers"``,
    ``"OutDatedData"``, ``"CoolDown"``, ``"HitCount"``, ``"NoBundles"``, ``"NoLoadData"``);
    ``load_avg`` and ``load_std`` describe the loads before any unload.
    """

    decision_reasons: tuple[str, ...] = ()
    skip_reason: str | None = None
    load_avg: float = 0.0
    load_std: float = 0.0


class _LoadStats:
    """Load average and spread, and the two cursors over brokers sorted by load."""

    def __init__(self, sorted_brokers: list[str], loads: list[float], max_shedding: int) -> None:
        self.sorted_brokers = sorted_brokers
        self.count = len(loads)
        self.avg = sum(loads) / self.count
        self.sq_sum = sum(load * load for load in loads)
        self.std = java_sqrt(self.sq_sum / self.count - self.avg * self.avg)
        self.max_index = len(sorted_brokers) - 1
        self.min_index = 0
        self.shedding = 0
        self.max_shedding = max_shedding

    def peek_min_broker(self) -> str:
        return self.sorted_brokers[self.min_index]

    def peek_max_broker(self) -> str:
        return self.sorted_brokers[self.max_index]

    def poll_max_broker(self) -> str:
        self.max_index -= 1
        return self.sorted_brokers[self.max_index + 1]

    def has_transferable_brokers(self) -> bool:
        return self.shedding < self.max_shedding and self.min_index < self.max_index

    def offload(self, max_load: float, min_load: float, offload: float) -> None:
        """Account for ``offload`` moved from the max to the min broker; next min broker."""
        self.sq_sum -= max_load * max_load + min_load * min_load
        max_after = math.nan if math.isnan(offload) else max(0.0, max_load - offload)
        min_after = min_load + offload
        self.sq_sum += max_after * max_after + min_after * min_after
        self.std = java_sqrt(abs(self.sq_sum / self.count - self.avg * self.avg))
        self.shedding += 1
        self.min_index += 1


@dataclass
class _Cycle:
    """The decisions of one call, and why brokers could not be shed."""

    unloads: list[Unload] = field(default_factory=list)
    decision_reasons: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    brokers_without_load_data: int = 0
    brokers_with_few_bundles: int = 0

    def decide(self, unload: Unload, reason: str) -> None:
        self.unloads.append(unload)
        self.decision_reasons.append(reason)


@dataclass(frozen=True)
class TransferShedder:
    """Transfer bundles from the most to the least loaded brokers (PIP-192's TransferShedder).

    Defaults are Pulsar's broker settings. Times are in seconds, as Pulsar configures them.
    ``load_balancer_debug_mode_enabled`` matters beyond logging: in Pulsar, only with it
    on does traffic swapped back to a busy broker count against that broker's offload.
    Pulsar skips bundles under isolation or anti-affinity policies and in excluded
    namespaces; leave those out of the snapshot's bundle data. As in Pulsar, a swap of
    the idle broker's bundles back to the busy one is tried when a bundle is too large to
    move alone; unlike Pulsar, a swap never takes a recently unloaded bundle.
    """

    load_balancer_broker_load_target_std: float = 0.25
    load_balancer_shedding_condition_hit_count_threshold: int = 3
    load_balancer_transfer_enabled: bool = True
    load_balancer_max_number_of_broker_shedding_per_cycle: int = 3
    load_balance_shedding_delay_in_seconds: int = 180
    load_balancer_broker_load_data_ttl_in_seconds: int = 1800
    load_balancer_broker_overloaded_threshold_percentage: int = 85
    load_balancer_history_resource_percentage: float = 0.9
    load_balancer_max_number_of_bundles_in_bundle_load_report: int = 10
    load_balancer_debug_mode_enabled: bool = False
    resource_weights: ResourceWeights = field(default_factory=ResourceWeights)

    def __post_init__(self) -> None:
        check_real(
            "load_balancer_broker_load_target_std", self.load_balancer_broker_load_target_std
        )
        for name in (
            "load_balancer_shedding_condition_hit_count_threshold",
            "load_balancer_max_number_of_broker_shedding_per_cycle",
            "load_balance_shedding_delay_in_seconds",
            "load_balancer_broker_load_data_ttl_in_seconds",
            "load_balancer_broker_overloaded_threshold_percentage",
        ):
            check_int(name, getattr(self, name), minimum=0)
        check_int(
            "load_balancer_max_number_of_bundles_in_bundle_load_report",
            self.load_balancer_max_number_of_bundles_in_bundle_load_report,
            minimum=1,
        )
        check_bool("load_balancer_transfer_enabled", self.load_balancer_transfer_enabled)
        check_bool("load_balancer_debug_mode_enabled", self.load_balancer_debug_mode_enabled)
        history = check_real(
            "load_balancer_history_resource_percentage",
            self.load_balancer_history_resource_percentage,
        )
        if history > 1.0:
            raise ValueError(
                f"load_balancer_history_resource_percentage must be <= 1, got {history}"
            )
        if not isinstance(self.resource_weights, ResourceWeights):
            raise TypeError("resource_weights must be a ResourceWeights")

    def find_bundles_for_unloading(
        self,
        load_data: LoadData,
        state: TransferShedderState | None = None,
        *,
        now_ms: int,
        recently_unloaded_brokers: Mapping[str, int] | None = None,
    ) -> TransferSheddingResult:
        """The transfers to make at ``now_ms`` (epoch ms), and the state for the next call.

        ``recently_unloaded_brokers`` maps a broker to when a bundle was last unloaded from
        it (epoch ms); until its next report is ``load_balance_shedding_delay_in_seconds``
        newer than that, nothing is shed ("CoolDown"). Reports older than the TTL are left
        out of the load statistics.
        """
        if not isinstance(load_data, LoadData):
            raise TypeError(f"load_data must be a LoadData, got {type(load_data).__name__}")
        if state is None:
            state = TransferShedderState()
        elif not isinstance(state, TransferShedderState):
            raise TypeError(f"state must be a TransferShedderState, got {type(state).__name__}")
        check_int("now_ms", now_ms, minimum=0)
        recent_brokers = _checked_times(recently_unloaded_brokers or {})
        emas = self._updated_emas(load_data, state.broker_load_ema)
        cycle = _Cycle()
        stats_or_skip = self._load_stats(load_data, emas, now_ms, recent_brokers, cycle)
        if isinstance(stats_or_skip, str):
            state = TransferShedderState(state.unload_condition_hit_count, emas)
            return _skip(cycle, stats_or_skip, state, 0.0, 0.0)
        stats = stats_or_skip
        avg, std = stats.avg, stats.std
        cycle.reasons.append(f"load average {avg:.4f}, standard deviation {std:.4f}")
        hit_count = state.unload_condition_hit_count + 1 if self._should_unload(emas, stats) else 0
        threshold = self.load_balancer_shedding_condition_hit_count_threshold
        if hit_count <= threshold:
            cycle.reasons.append(f"unload condition hit count {hit_count} <= threshold {threshold}")
            return _skip(cycle, "HitCount", TransferShedderState(hit_count, emas), avg, std)
        self._transfer(load_data, emas, stats, cycle)
        if not cycle.unloads:
            reason = (
                "NoLoadData"
                if cycle.brokers_without_load_data
                else "NoBundles"
                if cycle.brokers_with_few_bundles
                else "HitCount"
            )
            return _skip(cycle, reason, TransferShedderState(hit_count, emas), avg, std)
        return TransferSheddingResult(
            tuple(cycle.unloads),
            tuple(cycle.reasons),
            TransferShedderState(0, emas),
            decision_reasons=tuple(cycle.decision_reasons),
            load_avg=avg,
            load_std=std,
        )

    def _updated_emas(
        self, load_data: LoadData, previous: Mapping[str, BrokerLoadEma]
    ) -> dict[str, BrokerLoadEma]:
        """Each broker's EMAs, smoothed once per new report; gone brokers are dropped."""
        percentage = self.load_balancer_history_resource_percentage
        emas: dict[str, BrokerLoadEma] = {}
        for broker in load_data.brokers():
            data = load_data.broker_data[broker]
            weighted_max = data.usage.max_resource_usage_with_weight(self.resource_weights)
            throughput = data.rates.msg_throughput
            before = previous.get(broker)
            if before is None:
                emas[broker] = BrokerLoadEma(data.updated_at_ms, weighted_max, throughput)
            elif before.updated_at_ms == data.updated_at_ms:
                emas[broker] = before
            else:
                emas[broker] = BrokerLoadEma(
                    data.updated_at_ms,
                    before.weighted_max_ema * percentage + (1 - percentage) * weighted_max,
                    before.msg_throughput_ema * percentage + (1 - percentage) * throughput,
                )
        return emas

    def _load_stats(
        self,
        load_data: LoadData,
        emas: Mapping[str, BrokerLoadEma],
        now_ms: int,
        recent_brokers: Mapping[str, int],
        cycle: _Cycle,
    ) -> _LoadStats | str:
        """The load statistics over fresh reports, or the reason to skip this call."""
        ttl_ms = self.load_balancer_broker_load_data_ttl_in_seconds * 1000
        delay_ms = self.load_balance_shedding_delay_in_seconds * 1000
        loads: list[float] = []
        outdated = False
        for broker in load_data.brokers():
            updated_at = load_data.broker_data[broker].updated_at_ms
            if now_ms - updated_at > ttl_ms:
                cycle.reasons.append(f"{broker}: load report is outdated, left out")
                outdated = True
                continue
            if broker in recent_brokers and updated_at - recent_brokers[broker] < delay_ms:
                cycle.reasons.append(f"{broker}: load report too soon after its last unload")
                return "CoolDown"
            loads.append(emas[broker].weighted_max_ema)
        if not loads:
            cycle.reasons.append("no broker has a fresh load report")
            return "OutDatedData" if outdated else "NoBrokers"
        # Stale brokers stay in the ranking, as in Pulsar; only the statistics leave them out.
        ranked = sorted(emas, key=lambda b: (emas[b].weighted_max_ema, b))
        return _LoadStats(ranked, loads, self.load_balancer_max_number_of_broker_shedding_per_cycle)

    def _should_unload(self, emas: Mapping[str, BrokerLoadEma], stats: _LoadStats) -> bool:
        return (
            stats.std > self.load_balancer_broker_load_target_std
            or self._is_under_loaded(emas, stats.peek_min_broker(), stats)
            or self._is_over_loaded(emas, stats.peek_max_broker(), stats.avg)
        )

    def _is_under_loaded(
        self, emas: Mapping[str, BrokerLoadEma], broker: str, stats: _LoadStats
    ) -> bool:
        multiplier = min(0.5, max(0.0, self.load_balancer_broker_load_target_std / 2.0))
        if emas[broker].weighted_max_ema < stats.avg * multiplier:
            return True
        busiest = emas[stats.peek_max_broker()]
        return emas[broker].msg_throughput_ema < busiest.msg_throughput_ema * multiplier

    def _is_over_loaded(self, emas: Mapping[str, BrokerLoadEma], broker: str, avg: float) -> bool:
        load = emas[broker].weighted_max_ema
        threshold = self.load_balancer_broker_overloaded_threshold_percentage / 100.0
        return load > threshold and load > avg + self.load_balancer_broker_load_target_std

    def _reason_to_continue(
        self, emas: Mapping[str, BrokerLoadEma], stats: _LoadStats, cycle: _Cycle
    ) -> str | None:
        """Pulsar's label for the next transfer, or ``None`` when the cluster is balanced."""
        target = self.load_balancer_broker_load_target_std
        if not stats.has_transferable_brokers():
            cycle.reasons.append("no more broker pairs to transfer between this cycle")
            return None
        if stats.std > target:
            return "Overloaded"
        if self._is_under_loaded(emas, stats.peek_min_broker(), stats):
            return "Underloaded"
        if self._is_over_loaded(emas, stats.peek_max_broker(), stats.avg):
            return "Overloaded"
        cycle.reasons.append(
            f"balanced: std {stats.std:.4f} <= target {target}, {stats.peek_min_broker()} "
            f"not underloaded, {stats.peek_max_broker()} not overloaded"
        )
        return None

    def _transfer(
        self,
        load_data: LoadData,
        emas: Mapping[str, BrokerLoadEma],
        stats: _LoadStats,
        cycle: _Cycle,
    ) -> None:
        while (reason := self._reason_to_continue(emas, stats, cycle)) is not None:
            max_broker = stats.poll_max_broker()
            min_broker = stats.peek_min_broker()
            top = self._top_bundles(load_data, max_broker)
            if not top:
                cycle.brokers_without_load_data += 1
                cycle.reasons.append(f"{max_broker}: no bundle with traffic reported")
                continue
            if len(top) == 1:
                cycle.brokers_with_few_bundles += 1
                cycle.reasons.append(f"{max_broker}: its sole bundle {top[0][0]} is not shed")
                continue
            max_load = emas[max_broker].weighted_max_ema
            min_load = emas[min_broker].weighted_max_ema
            max_throughput = load_data.broker_data[max_broker].rates.msg_throughput
            # Half the load gap, expressed as a share of the busy broker's throughput.
            offload_throughput = java_div(max_throughput * ((max_load - min_load) / 2), max_load)
            marked, gained = self._shed_pair(
                load_data, max_broker, min_broker, top, offload_throughput, reason, cycle
            )
            if marked > 0:
                moved = java_div((marked - gained) * max_load, max_throughput)
                stats.offload(max_load, min_load, moved)
            else:
                cycle.brokers_with_few_bundles += 1
                cycle.reasons.append(
                    f"{max_broker}: no reported bundle can move to {min_broker}; split its "
                    f"bundles or report more of them"
                )

    def _shed_pair(
        self,
        load_data: LoadData,
        max_broker: str,
        min_broker: str,
        top: list[tuple[str, MessageRates]],
        offload_throughput: float,
        reason: str,
        cycle: _Cycle,
    ) -> tuple[float, float]:
        """Move bundles from ``max_broker`` to ``min_broker``: bytes/s marked, and gained back.

        Bundles go smallest first, while the marked traffic stays within half the load gap
        (as throughput); the broker keeps at least one reported bundle. A bundle too large
        for that moves only if a swap of the idle broker's bundles balances it out.
        """
        transfer = self.load_balancer_transfer_enabled
        max_throughput = load_data.broker_data[max_broker].rates.msg_throughput
        min_throughput = load_data.broker_data[min_broker].rates.msg_throughput
        # One pass over the idle broker's bundles serves every swap of this pair, as in Pulsar.
        swap_candidates = iter(self._top_bundles(load_data, min_broker))
        remaining = len(top)
        marked = gained = 0.0
        for bundle, rates in top:
            if bundle in load_data.recently_unloaded_bundles:
                continue
            if remaining <= 1:
                break
            throughput = rates.msg_throughput
            swaps: list[str] = []
            if marked - gained + throughput > offload_throughput:
                picked = (
                    _swap(
                        swap_candidates,
                        load_data.recently_unloaded_bundles,
                        max_throughput - marked + gained - throughput,
                        min_throughput + marked - gained + throughput,
                        max_throughput,
                    )
                    if transfer
                    else None
                )
                if picked is None:
                    cycle.reasons.append(
                        f"{max_broker}: {bundle} ({throughput:.0f} B/s) would move more than "
                        f"{offload_throughput:.0f} B/s to {min_broker}; stop"
                    )
                    break
                swaps = [bundle for bundle, _ in picked]
                if self.load_balancer_debug_mode_enabled:
                    gained += sum(rates.msg_throughput for _, rates in picked)
            for swapped in swaps:
                cycle.decide(Unload(min_broker, swapped, max_broker), reason)
            cycle.decide(Unload(max_broker, bundle, min_broker if transfer else None), reason)
            destination = f" to {min_broker}" if transfer else ""
            swapped_for = f" in a swap for {', '.join(swaps)}" if swaps else ""
            cycle.reasons.append(
                f"{max_broker}: {reason}, unloading {bundle} ({throughput:.0f} B/s)"
                f"{destination}{swapped_for}"
            )
            marked += throughput
            remaining -= 1
        return marked, gained

    def _top_bundles(self, load_data: LoadData, broker: str) -> list[tuple[str, MessageRates]]:
        """The broker's k busiest bundles with traffic, least busy first (``TopKBundles``).

        Ranked by throughput in, then out, then message rate; equal ones by name.
        """
        with_traffic = [
            (bundle, load_data.bundle_data[bundle])
            for bundle in load_data.broker_data[broker].bundles
            if bundle in load_data.bundle_data and load_data.bundle_data[bundle].msg_throughput != 0
        ]
        ranked = sorted(
            with_traffic,
            key=lambda entry: (
                entry[1].msg_throughput_in,
                entry[1].msg_throughput_out,
                entry[1].msg_rate,
                entry[0],
            ),
        )
        return ranked[-self.load_balancer_max_number_of_bundles_in_bundle_load_report :]


def _swap(
    candidates: Iterator[tuple[str, MessageRates]],
    recently_unloaded: frozenset[str],
    max_new: float,
    min_new: float,
    max_throughput: float,
) -> list[tuple[str, MessageRates]] | None:
    """Idle-broker bundles to swap back so that a large bundle can move, or ``None``.

    ``max_new`` and ``min_new`` are the two brokers' throughputs (bytes/s) once the large
    bundle has moved. A candidate is taken when both stay below the busy broker's current
    throughput; the swap is done once the idle broker is no busier than the busy one and
    the busy one is under 75 % of its current throughput. Consumes ``candidates``.
    """
    picked: list[tuple[str, MessageRates]] = []
    for bundle, rates in candidates:
        if bundle in recently_unloaded:
            continue
        throughput = rates.msg_throughput
        if max_new + throughput < max_throughput and min_new - throughput < max_throughput:
            picked.append((bundle, rates))
            max_new += throughput
            min_new -= throughput
            if min_new <= max_new and max_new < max_throughput * _SWAP_TARGET_SHARE:
                return picked
    return None


def _checked_times(times: Mapping[str, int]) -> Mapping[str, int]:
    if not isinstance(times, Mapping):
        raise TypeError("recently_unloaded_brokers must be a mapping")
    return {
        check_name("recently_unloaded_brokers key", broker): check_int(
            f"recently_unloaded_brokers[{broker!r}]", at, minimum=0
        )
        for broker, at in times.items()
    }


def _skip(
    cycle: _Cycle, reason: str, state: TransferShedderState, avg: float, std: float
) -> TransferSheddingResult:
    cycle.reasons.append(f"nothing unloaded: {reason}")
    return TransferSheddingResult(
        (), tuple(cycle.reasons), state, skip_reason=reason, load_avg=avg, load_std=std
    )
