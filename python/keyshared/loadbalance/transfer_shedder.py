"""Pulsar's TransferShedder, the extensible load manager's default strategy, as a pure function.

Brokers' loads are exponential moving averages (EMA) of their weighted max resource usage
(a fraction) and of their throughput (bytes/s), smoothed once per load report. While the
standard deviation of the loads is above the target, or the least loaded broker is
underloaded, or the most loaded one overloaded, and that has held on more consecutive
calls than ``load_balancer_shedding_condition_hit_count_threshold``, the shedder moves
half of the load gap from the most to the least loaded broker, pair by pair, naming the
destination of each bundle. Only each broker's top bundles are candidates: the
``load_balancer_max_number_of_bundles_in_bundle_load_report`` busiest ones with traffic,
walked least busy first, as Pulsar's ``TopKBundles`` reports them (:func:`top_k_bundles`).

Around the strategy, Pulsar reads the broker registry, the service-unit ownership channel
and the isolation and anti-affinity filters; here their answers are inputs, so the
decision stays a pure function of them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from keyshared._checks import (
    check_bool,
    check_int,
    check_mapping_items,
    check_name,
    check_names,
    check_real,
)
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.loadbalance._java import java_div, java_round, java_sqrt
from keyshared.loadbalance.model import (
    DEFAULT_PULSAR_VERSION,
    LoadData,
    MessageRates,
    ResourceWeights,
    SheddingResult,
    Unload,
    bundle_namespace,
    check_pulsar_version,
    check_rates,
    is_sla_or_heartbeat_namespace,
)

#: A swap stops once the busy broker's new throughput is below this share of its old one.
_SWAP_TARGET_SHARE = 0.75
#: ``NamespaceBundleStats`` ranks throughputs rounded to 100 kB/s and rates to 100 msg/s.
_THROUGHPUT_RESOLUTION = 1e5
_MSG_RATE_RESOLUTION = 100.0
#: Pulsar's system namespace; the others are the heartbeat and SLA-monitor ones.
_SYSTEM_NAMESPACE = "pulsar/system"

#: A broker's reported top bundles: (bundle name, its rates), least busy first.
TopBundles = Sequence[tuple[str, MessageRates]]


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
            raise ArgumentTypeError("broker_load_ema must be a mapping", argument="broker_load_ema")
        checked: dict[str, BrokerLoadEma] = {}
        for broker, ema in self.broker_load_ema.items():
            check_name("broker_load_ema key", broker)
            if not isinstance(ema, BrokerLoadEma):
                raise ArgumentTypeError(
                    f"broker_load_ema[{broker!r}] must be a BrokerLoadEma",
                    argument="broker_load_ema",
                )
            checked[broker] = ema
        object.__setattr__(self, "broker_load_ema", MappingProxyType(checked))


@dataclass(frozen=True)
class TransferSheddingResult(SheddingResult[TransferShedderState]):
    """A :class:`SheddingResult` with Pulsar's decision labels and load statistics.

    ``label`` is Pulsar's ``UnloadDecision.Label``: ``"Success"`` with unloads,
    ``"Skip"`` without, ``"Failure"`` when the broker registry could not be read.
    ``decision_reasons[i]`` is why ``unloads[i]`` happens (``"Overloaded"`` or
    ``"Underloaded"``); ``skip_reason`` is why nothing happens (``"NoBrokers"``,
    ``"OutDatedData"``, ``"CoolDown"``, ``"HitCount"``, ``"NoBundles"``, ``"NoLoadData"``,
    or ``"Unknown"`` on failure). ``load_avg`` and ``load_std`` describe the loads before
    any unload (Pulsar's ``UnloadCounter``); ``load_std_after`` is the spread expected once
    the unloads are done (Pulsar's ``LoadStats`` at the end of the cycle). All are 0 when
    the statistics could not be computed.
    """

    decision_reasons: tuple[str, ...] = ()
    skip_reason: str | None = None
    load_avg: float = 0.0
    load_std: float = 0.0
    load_std_after: float = 0.0
    label: str = "Success"


class _LoadStats:
    """Load average and spread, and the two cursors over brokers sorted by load."""

    def __init__(self, sorted_brokers: list[str], loads: list[float], max_shedding: int) -> None:
        self.sorted_brokers = sorted_brokers
        self.count = len(loads)
        self.avg = sum(loads) / self.count
        self.sq_sum = sum(load * load for load in loads)
        # Rounding can leave equal loads a variance just below 0, whose root Pulsar reports
        # as NaN; it is 0 here. No decision changes: NaN and 0 both compare below the target.
        self.std = java_sqrt(max(0.0, self.sq_sum / self.count - self.avg * self.avg))
        self.initial_std = self.std
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
    """One call's inputs, its decisions, and why brokers could not be shed."""

    load_data: LoadData
    inputs: ShedderInputs
    emas: Mapping[str, BrokerLoadEma]
    unloads: list[Unload] = field(default_factory=list)
    decision_reasons: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    brokers_without_load_data: int = 0
    brokers_with_few_bundles: int = 0

    @property
    def available(self) -> frozenset[str]:
        available = self.inputs.available_brokers
        return frozenset(self.load_data.broker_data) if available is None else available

    def decide(self, unload: Unload, reason: str) -> None:
        self.unloads.append(unload)
        self.decision_reasons.append(reason)


@dataclass(frozen=True)
class ShedderInputs:
    """What Pulsar's TransferShedder reads besides the load snapshot, at one call.

    ``available_brokers``: the brokers in the registry (``None``: every broker of the
    snapshot); one without a load report stops the cycle ("NoLoadData"), and no bundle
    goes to a broker outside it. ``bundle_owners``: each bundle's owner as the service-unit
    channel records it (``None``: not checked); a busy broker only sheds bundles it owns.
    ``isolation_policies``: namespace -> brokers its isolation policy allows.
    ``anti_affinity_candidates``: bundle -> brokers the anti-affinity filter leaves it.
    A bundle under either has policies: it moves only with
    ``load_balancer_shedding_bundles_with_policies_enabled``, and only to allowed brokers.
    ``top_bundles_load_data``: each broker's reported top bundles, least busy first
    (``None``: computed from the snapshot by :func:`top_k_bundles`).
    """

    available_brokers: frozenset[str] | None = None
    bundle_owners: Mapping[str, str] | None = None
    isolation_policies: Mapping[str, frozenset[str]] = field(default_factory=dict)
    anti_affinity_candidates: Mapping[str, frozenset[str]] = field(default_factory=dict)
    top_bundles_load_data: Mapping[str, TopBundles] | None = None

    def __post_init__(self) -> None:
        if self.available_brokers is not None:
            available = check_names("available_brokers", self.available_brokers)
            object.__setattr__(self, "available_brokers", available)
        if self.bundle_owners is not None:
            owners = check_mapping_items("bundle_owners", self.bundle_owners, check_name)
            object.__setattr__(self, "bundle_owners", owners)
        for name in ("isolation_policies", "anti_affinity_candidates"):
            checked = check_mapping_items(name, getattr(self, name), check_names)
            object.__setattr__(self, name, checked)
        if self.top_bundles_load_data is not None:
            tops = check_mapping_items(
                "top_bundles_load_data", self.top_bundles_load_data, _checked_top_bundles
            )
            object.__setattr__(self, "top_bundles_load_data", tops)

    def allowed_brokers(self, bundle: str) -> frozenset[str] | None:
        """The brokers ``bundle``'s policies allow, or ``None`` when it has no policy."""
        allowed: frozenset[str] | None = None
        for policy in (
            self.isolation_policies.get(bundle_namespace(check_name("bundle", bundle))),
            self.anti_affinity_candidates.get(bundle),
        ):
            if policy is not None:
                allowed = policy if allowed is None else allowed & policy
        return allowed


def is_system_service_namespace(
    namespace: str, *, pulsar_version: str = DEFAULT_PULSAR_VERSION
) -> bool:
    """Pulsar's ``NamespaceService.isSystemServiceNamespace``: system and heartbeat ones.

    ``pulsar/system``, ``pulsar/host:port``, ``pulsar/cluster/host:port`` and, on 4.2 (the
    default), ``sla-monitor/host:port``; on ``pulsar_version="4.0"``,
    ``sla-monitor/cluster/host:port`` instead (4.0 does not know the v2 SLA-monitor name).
    """
    name = check_name("namespace", namespace)
    return name == _SYSTEM_NAMESPACE or is_sla_or_heartbeat_namespace(
        name, pulsar_version=pulsar_version
    )


def top_k_bundles(
    bundle_stats: Mapping[str, MessageRates],
    topk: int,
    *,
    load_balancer_shedding_bundles_with_policies_enabled: bool = False,
    bundles_with_policies: Iterable[str] = (),
    pulsar_version: str = DEFAULT_PULSAR_VERSION,
) -> tuple[tuple[str, MessageRates], ...]:
    """Pulsar's ``TopKBundles.update``: the ``topk`` busiest bundles, least busy first.

    Bundles without throughput, in a system namespace, or (unless shedding them is
    enabled) with isolation or anti-affinity policies are not movable and not reported.
    Busier means, as ``NamespaceBundleStats.compareTo``: more throughput in, then out,
    rounded to 100 kB/s, then more messages in plus out rounded to 100 msg/s. Pulsar
    leaves bundles equal on all three in its partition sort's order; here they go by name.
    A ``topk`` of 0 reports no bundle: Pulsar's ``partitionSort`` can end on
    ``subList(0, -1)`` then and fail the whole report with an IllegalArgumentException.
    ``pulsar_version="4.0"`` reads system namespaces as Pulsar 4.0 LTS does, and so reports
    the bundles of ``sla-monitor/host:port`` (see :func:`is_system_service_namespace`).
    """
    stats = check_mapping_items("bundle_stats", bundle_stats, check_rates)
    check_int("topk", topk, minimum=0)
    check_pulsar_version(pulsar_version)
    check_bool(
        "load_balancer_shedding_bundles_with_policies_enabled",
        load_balancer_shedding_bundles_with_policies_enabled,
    )
    with_policies = check_names("bundles_with_policies", bundles_with_policies)
    movable = [
        (bundle, rates)
        for bundle, rates in stats.items()
        if rates.msg_throughput != 0
        and not is_system_service_namespace(
            bundle_namespace(bundle, pulsar_version=pulsar_version), pulsar_version=pulsar_version
        )
        and (load_balancer_shedding_bundles_with_policies_enabled or bundle not in with_policies)
    ]
    ranked = sorted(movable, key=lambda entry: (*_rank(entry[1]), entry[0]))
    return tuple(ranked[len(ranked) - min(topk, len(ranked)) :])


def _rank(rates: MessageRates) -> tuple[int, int, int]:
    return (
        java_round(rates.msg_throughput_in / _THROUGHPUT_RESOLUTION),
        java_round(rates.msg_throughput_out / _THROUGHPUT_RESOLUTION),
        java_round(rates.msg_rate / _MSG_RATE_RESOLUTION),
    )


@dataclass(frozen=True)
class TransferShedder:
    """Transfer bundles from the most to the least loaded brokers (PIP-192's TransferShedder).

    Defaults are Pulsar's broker settings. Times are in seconds, as Pulsar configures them.
    ``load_balancer_debug_mode_enabled`` matters beyond logging: in Pulsar, only with it
    on does traffic swapped back to a busy broker count against that broker's offload.
    As in Pulsar, a swap of the idle broker's bundles back to the busy one is tried when a
    bundle is too large to move alone; unlike Pulsar, a swap never takes a recently
    unloaded bundle. Pulsar ranks brokers of equal load in its store's hash order; here
    they go by name.
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
    load_balancer_shedding_bundles_with_policies_enabled: bool = False
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
        for name in (
            "load_balancer_transfer_enabled",
            "load_balancer_debug_mode_enabled",
            "load_balancer_shedding_bundles_with_policies_enabled",
        ):
            check_bool(name, getattr(self, name))
        history = check_real(
            "load_balancer_history_resource_percentage",
            self.load_balancer_history_resource_percentage,
        )
        if history > 1.0:
            raise InvalidArgument(
                f"load_balancer_history_resource_percentage must be <= 1, got {history}",
                argument="load_balancer_history_resource_percentage",
            )
        if not isinstance(self.resource_weights, ResourceWeights):
            raise ArgumentTypeError(
                "resource_weights must be a ResourceWeights", argument="resource_weights"
            )

    @staticmethod
    def failure(state: TransferShedderState | None = None) -> TransferSheddingResult:
        """The result when the broker registry cannot be read: nothing is unloaded.

        Pulsar counts it as a ``Failure`` for an ``Unknown`` reason and keeps its state.
        """
        state = _check_state(state)
        reasons = ("failed to fetch the available brokers; nothing unloaded: Unknown",)
        return TransferSheddingResult((), reasons, state, skip_reason="Unknown", label="Failure")

    def is_load_balancer_shedding_bundles_with_policies_enabled(
        self, has_isolation_policy: bool, has_anti_affinity_group_policy: bool
    ) -> bool:
        """Whether a bundle with these policies may be shed (always, without any)."""
        check_bool("has_isolation_policy", has_isolation_policy)
        check_bool("has_anti_affinity_group_policy", has_anti_affinity_group_policy)
        if has_isolation_policy or has_anti_affinity_group_policy:
            return self.load_balancer_shedding_bundles_with_policies_enabled
        return True

    def find_bundles_for_unloading(
        self,
        load_data: LoadData,
        state: TransferShedderState | None = None,
        *,
        now_ms: int,
        recently_unloaded_brokers: Mapping[str, int] | None = None,
        inputs: ShedderInputs | None = None,
    ) -> TransferSheddingResult:
        """The transfers to make at ``now_ms`` (epoch ms), and the state for the next call.

        ``recently_unloaded_brokers`` maps a broker to when a bundle was last unloaded from
        it (epoch ms); until its next report is ``load_balance_shedding_delay_in_seconds``
        newer than that, nothing is shed ("CoolDown"). Reports older than the TTL are left
        out of the load statistics. ``inputs`` carries the registry, ownership and policy
        answers (see :class:`ShedderInputs`; default: all brokers available, no checks).
        """
        if not isinstance(load_data, LoadData):
            raise ArgumentTypeError(
                f"load_data must be a LoadData, got {type(load_data).__name__}",
                argument="load_data",
            )
        state = _check_state(state)
        check_int("now_ms", now_ms, minimum=0)
        recent_brokers = _checked_times(recently_unloaded_brokers or {})
        if inputs is None:
            inputs = ShedderInputs()
        elif not isinstance(inputs, ShedderInputs):
            raise ArgumentTypeError(
                f"inputs must be a ShedderInputs, got {type(inputs).__name__}", argument="inputs"
            )
        emas = self._updated_emas(load_data, state.broker_load_ema)
        cycle = _Cycle(load_data, inputs, emas)
        stats_or_skip = self._load_stats(cycle, now_ms, recent_brokers)
        if isinstance(stats_or_skip, str):
            state = TransferShedderState(state.unload_condition_hit_count, emas)
            return _skip(cycle, stats_or_skip, state, None)
        stats = stats_or_skip
        cycle.reasons.append(f"load average {stats.avg:.4f}, standard deviation {stats.std:.4f}")
        hit_count = state.unload_condition_hit_count + 1 if self._should_unload(emas, stats) else 0
        threshold = self.load_balancer_shedding_condition_hit_count_threshold
        if hit_count <= threshold:
            cycle.reasons.append(f"unload condition hit count {hit_count} <= threshold {threshold}")
            return _skip(cycle, "HitCount", TransferShedderState(hit_count, emas), stats)
        self._transfer(stats, cycle)
        if not cycle.unloads:
            reason = (
                "NoLoadData"
                if cycle.brokers_without_load_data
                else "NoBundles"
                if cycle.brokers_with_few_bundles
                else "HitCount"
            )
            return _skip(cycle, reason, TransferShedderState(hit_count, emas), stats)
        return TransferSheddingResult(
            tuple(cycle.unloads),
            tuple(cycle.reasons),
            TransferShedderState(0, emas),
            decision_reasons=tuple(cycle.decision_reasons),
            load_avg=stats.avg,
            load_std=stats.initial_std,
            load_std_after=stats.std,
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
        self, cycle: _Cycle, now_ms: int, recent_brokers: Mapping[str, int]
    ) -> _LoadStats | str:
        """The load statistics over fresh reports, or the reason to skip this call."""
        ttl_ms = self.load_balancer_broker_load_data_ttl_in_seconds * 1000
        delay_ms = self.load_balance_shedding_delay_in_seconds * 1000
        load_data = cycle.load_data
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
            loads.append(cycle.emas[broker].weighted_max_ema)
        if not loads:
            cycle.reasons.append("no broker has a fresh load report")
            return "OutDatedData" if outdated else "NoBrokers"
        missing = sorted(cycle.available - set(load_data.broker_data))
        if missing:
            cycle.reasons.append(f"available brokers without a load report: {', '.join(missing)}")
            return "NoLoadData"
        # Stale brokers stay in the ranking, as in Pulsar; only the statistics leave them out.
        emas = cycle.emas
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

    def _reason_to_continue(self, stats: _LoadStats, cycle: _Cycle) -> str | None:
        """Pulsar's label for the next transfer, or ``None`` when the cluster is balanced."""
        target = self.load_balancer_broker_load_target_std
        emas = cycle.emas
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

    def _transfer(self, stats: _LoadStats, cycle: _Cycle) -> None:
        while (reason := self._reason_to_continue(stats, cycle)) is not None:
            max_broker = stats.poll_max_broker()
            min_broker = stats.peek_min_broker()
            top = self._top_bundles(cycle, max_broker)
            if not top:
                cycle.brokers_without_load_data += 1
                cycle.reasons.append(f"{max_broker}: no bundle with traffic reported")
                continue
            if len(top) == 1:
                cycle.brokers_with_few_bundles += 1
                cycle.reasons.append(f"{max_broker}: its sole bundle {top[0][0]} is not shed")
                continue
            max_load = cycle.emas[max_broker].weighted_max_ema
            min_load = cycle.emas[min_broker].weighted_max_ema
            max_throughput = cycle.load_data.broker_data[max_broker].rates.msg_throughput
            # Half the load gap, expressed as a share of the busy broker's throughput.
            offload_throughput = java_div(max_throughput * ((max_load - min_load) / 2), max_load)
            pair = _Pair(max_broker, min_broker, offload_throughput, reason)
            marked, gained = self._shed_pair(pair, top, cycle)
            if marked > 0:
                moved = java_div((marked - gained) * max_load, max_throughput)
                stats.offload(max_load, min_load, moved)
            else:
                cycle.brokers_with_few_bundles += 1
                cycle.reasons.append(
                    f"{max_broker}: no reported bundle can move to {min_broker}; split its "
                    f"bundles or report more of them"
                )

    def _shed_pair(self, pair: _Pair, top: TopBundles, cycle: _Cycle) -> tuple[float, float]:
        """Move bundles from the busy to the idle broker: bytes/s marked, and gained back.

        Bundles go smallest first, while the marked traffic stays within half the load gap
        (as throughput); the broker keeps at least one reported bundle. A bundle too large
        for that moves only if a swap of the idle broker's bundles balances it out. Bundles
        the busy broker does not own, recently unloaded, or whose policies forbid the move
        are passed over, as are bundles without traffic.
        """
        transfer = self.load_balancer_transfer_enabled
        max_broker, min_broker = pair.max_broker, pair.min_broker
        rates_of = cycle.load_data.broker_data
        max_throughput = rates_of[max_broker].rates.msg_throughput
        min_throughput = rates_of[min_broker].rates.msg_throughput
        # One pass over the idle broker's bundles serves every swap of this pair, as in Pulsar.
        swap_candidates = (
            (bundle, rates)
            for bundle, rates in self._top_bundles(cycle, min_broker)
            if self._is_transferable(cycle, bundle, min_broker, max_broker)
        )
        remaining = len(top)
        marked = gained = 0.0
        for bundle, rates in top:
            if not self._is_movable(cycle, bundle, max_broker, min_broker):
                continue
            if remaining <= 1:
                break
            throughput = rates.msg_throughput
            if throughput == 0:
                continue
            swaps: list[str] = []
            if marked - gained + throughput > pair.offload_throughput:
                picked = (
                    _swap(
                        swap_candidates,
                        cycle.load_data.recently_unloaded_bundles,
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
                        f"{pair.offload_throughput:.0f} B/s to {min_broker}; stop"
                    )
                    break
                swaps = [bundle for bundle, _ in picked]
                if self.load_balancer_debug_mode_enabled:
                    gained += sum(rates.msg_throughput for _, rates in picked)
            for swapped in swaps:
                cycle.decide(Unload(min_broker, swapped, max_broker), pair.reason)
            cycle.decide(Unload(max_broker, bundle, min_broker if transfer else None), pair.reason)
            destination = f" to {min_broker}" if transfer else ""
            swapped_for = f" in a swap for {', '.join(swaps)}" if swaps else ""
            cycle.reasons.append(
                f"{max_broker}: {pair.reason}, unloading {bundle} ({throughput:.0f} B/s)"
                f"{destination}{swapped_for}"
            )
            marked += throughput
            remaining -= 1
        return marked, gained

    def _is_movable(self, cycle: _Cycle, bundle: str, source: str, destination: str) -> bool:
        """Pulsar's checks on a busy broker's bundle before it is weighed."""
        owners = cycle.inputs.bundle_owners
        if owners is not None and owners.get(bundle) != source:
            cycle.reasons.append(f"{source}: {bundle} is not owned by it; skipped")
            return False
        if bundle in cycle.load_data.recently_unloaded_bundles:
            return False
        if not self._is_transferable(cycle, bundle, source, destination):
            cycle.reasons.append(
                f"{source}: {bundle} can't move to {destination} under its isolation or "
                f"anti-affinity policies; skipped"
            )
            return False
        return True

    def _is_transferable(self, cycle: _Cycle, bundle: str, source: str, destination: str) -> bool:
        """Pulsar's ``isTransferable``: the policies allow moving ``bundle`` off ``source``.

        With transfer on, ``destination`` must be a candidate; with it off, any broker
        other than ``source`` will do (the destination is picked later), but Pulsar still
        requires ``destination`` among the candidates.
        """
        allowed = cycle.inputs.allowed_brokers(bundle)
        if allowed is not None and not self.load_balancer_shedding_bundles_with_policies_enabled:
            return False
        candidates = cycle.available if allowed is None else cycle.available & allowed
        if destination not in candidates:
            return False
        return bool(candidates - {source})

    def _top_bundles(self, cycle: _Cycle, broker: str) -> TopBundles:
        """The broker's reported top bundles, least busy first (see :func:`top_k_bundles`)."""
        reported = cycle.inputs.top_bundles_load_data
        if reported is not None:
            return reported.get(broker, ())
        load_data = cycle.load_data
        owned = {
            bundle: load_data.bundle_data[bundle]
            for bundle in load_data.broker_data[broker].bundles
            if bundle in load_data.bundle_data
        }
        with_policies = [b for b in owned if cycle.inputs.allowed_brokers(b) is not None]
        return top_k_bundles(
            owned,
            self.load_balancer_max_number_of_bundles_in_bundle_load_report,
            load_balancer_shedding_bundles_with_policies_enabled=(
                self.load_balancer_shedding_bundles_with_policies_enabled
            ),
            bundles_with_policies=with_policies,
        )


@dataclass(frozen=True)
class _Pair:
    """One transfer step: from the busy to the idle broker, how much, and Pulsar's label."""

    max_broker: str
    min_broker: str
    offload_throughput: float
    reason: str


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
        throughput = rates.msg_throughput
        if bundle in recently_unloaded or throughput == 0:
            continue
        if max_new + throughput < max_throughput and min_new - throughput < max_throughput:
            picked.append((bundle, rates))
            max_new += throughput
            min_new -= throughput
            if min_new <= max_new and max_new < max_throughput * _SWAP_TARGET_SHARE:
                return picked
    return None


def _checked_top_bundles(name: str, value: object) -> tuple[tuple[str, MessageRates], ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ArgumentTypeError(
            f"{name} must be a sequence of (bundle, MessageRates) pairs", argument=name
        )
    checked = []
    for index, entry in enumerate(value):
        if not isinstance(entry, tuple) or len(entry) != 2:
            raise ArgumentTypeError(
                f"{name}[{index}] must be a (bundle, MessageRates) pair", argument=name
            )
        checked.append(
            (
                check_name(f"{name}[{index}] bundle", entry[0]),
                check_rates(f"{name}[{index}] rates", entry[1]),
            )
        )
    return tuple(checked)


def _checked_times(times: Mapping[str, int]) -> Mapping[str, int]:
    return check_mapping_items(
        "recently_unloaded_brokers", times, lambda name, at: check_int(name, at, minimum=0)
    )


def _check_state(state: object) -> TransferShedderState:
    if state is None:
        return TransferShedderState()
    if not isinstance(state, TransferShedderState):
        raise ArgumentTypeError(
            f"state must be a TransferShedderState, got {type(state).__name__}", argument="state"
        )
    return state


def _skip(
    cycle: _Cycle, reason: str, state: TransferShedderState, stats: _LoadStats | None
) -> TransferSheddingResult:
    cycle.reasons.append(f"nothing unloaded: {reason}")
    avg, std, after = (
        (0.0, 0.0, 0.0) if stats is None else (stats.avg, stats.initial_std, stats.std)
    )
    return TransferSheddingResult(
        (),
        tuple(cycle.reasons),
        state,
        skip_reason=reason,
        load_avg=avg,
        load_std=std,
        load_std_after=after,
        label="Skip",
    )


__all__ = [
    "BrokerLoadEma",
    "ShedderInputs",
    "TopBundles",
    "TransferShedder",
    "TransferShedderState",
    "TransferSheddingResult",
    "is_system_service_namespace",
    "top_k_bundles",
]
