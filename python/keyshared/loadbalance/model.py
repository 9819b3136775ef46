"""The load snapshot the shedders read, and the decisions they return.

The shapes follow Pulsar's modular load manager: ``LoadData`` holds one ``LocalBrokerData``
per broker (here :class:`BrokerLoad`), the short-term data of every bundle that may be shed,
and the bundles unloaded within the grace period. Units: message rates in messages per
second, throughputs in bytes per second, resource usage in percent (100.0 is a resource
used to its limit; misconfigured limits can report more).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Generic, TypeVar

from keyshared._checks import (
    check_instance,
    check_int,
    check_mapping_items,
    check_names,
    check_real,
)
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.versions import LOAD_BALANCER

#: One megabyte as Pulsar's load balancer counts it (``1024 * 1024`` bytes).
MB = 1024 * 1024

StateT = TypeVar("StateT", covariant=True)

#: The Pulsar release lines whose behaviour the load-balancer policies offer, by the
#: ``pulsar_version`` argument: ``"4.2"`` (the default: Pulsar 4.2 and master, which
#: keyshared follows) and ``"4.0"`` (the 4.0 LTS line, as released up to 4.0.7). The
#: spellings are the library's (:mod:`keyshared.versions`).
PULSAR_VERSIONS = LOAD_BALANCER.accepted
#: The default profile: Pulsar 4.2 and master.
DEFAULT_PULSAR_VERSION = LOAD_BALANCER.default


def check_pulsar_version(value: object) -> str:
    """Return ``value`` if it is one of :data:`PULSAR_VERSIONS`, else raise.

    ``TypeError`` for a non-``str``, ``ValueError`` naming ``pulsar_version`` and the
    accepted values for any other string.
    """
    return LOAD_BALANCER.check(value)


#: Pulsar's heartbeat and SLA-monitor namespaces, one per broker (``host:port``), whose
#: bundles no modular-load-manager shedder unloads (``LoadData.getBundleDataForLoadShedding``),
#: by release line: each release's own patterns, matched whole. 4.2's
#: ``pulsar/([^:]+:\d+)`` and ``sla-monitor/([^:]+:\d+)`` take the v1 forms with a cluster too;
#: 4.0 knows the SLA-monitor namespace only with a cluster. Java's ``\d`` is ASCII.
SLA_OR_HEARTBEAT_NAMESPACE = {
    "4.2": re.compile(r"(?:pulsar|sla-monitor)/[^:]+:[0-9]+"),
    "4.0": re.compile(
        r"pulsar/[^/]+/[^:]+:[0-9]+|pulsar/[^:]+:[0-9]+|sla-monitor/[^/]+/[^:]+:[0-9]+"
    ),
}


#: A tenant, cluster or namespace name as Pulsar's ``NamedEntity.checkName`` takes it.
_NAMED_ENTITY = re.compile(r"[-=:.\w]+", re.ASCII)


def bundle_namespace(bundle: str, *, pulsar_version: str = DEFAULT_PULSAR_VERSION) -> str:
    """Pulsar's ``NamespaceBundle.getBundleNamespace``: the namespace before the bundle's
    last ``/`` (``tenant/ns/0x..._0x...``), or the whole bundle name when that is no
    namespace the release reads (4.2 refuses v1 names with a cluster, 4.0 takes them), so
    that an unreadable name matches no system namespace and its bundles stay sheddable."""
    check_pulsar_version(pulsar_version)
    namespace, slash, _ = bundle.rpartition("/")
    parts = namespace.split("/")
    counts = (2, 3) if pulsar_version == "4.0" else (2,)
    if slash and len(parts) in counts and all(_NAMED_ENTITY.fullmatch(p) for p in parts):
        return namespace
    return bundle


def is_sla_or_heartbeat_namespace(
    namespace: str, *, pulsar_version: str = DEFAULT_PULSAR_VERSION
) -> bool:
    """Pulsar's ``NamespaceService.isSLAOrHeartbeatNamespace`` of ``pulsar_version``.

    On 4.2 (the default), ``pulsar/host:port`` and ``sla-monitor/host:port``; on 4.0,
    ``pulsar/host:port``, ``pulsar/cluster/host:port`` and ``sla-monitor/cluster/host:port``
    (4.0 does not know ``sla-monitor/host:port``, and so sheds its bundles).
    """
    pattern = SLA_OR_HEARTBEAT_NAMESPACE[check_pulsar_version(pulsar_version)]
    return pattern.fullmatch(namespace) is not None


@dataclass(frozen=True)
class MessageRates:
    """Message rates (msg/s) and throughputs (bytes/s) of a topic, bundle or broker.

    Pulsar's ``TimeAverageMessageData`` / ``NamespaceBundleStats`` fields; all finite, >= 0.
    """

    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0

    def __post_init__(self) -> None:
        for name in ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out"):
            object.__setattr__(self, name, check_real(name, getattr(self, name)))

    @property
    def msg_rate(self) -> float:
        """Messages per second, in plus out."""
        return self.msg_rate_in + self.msg_rate_out

    @property
    def msg_throughput(self) -> float:
        """Bytes per second, in plus out."""
        return self.msg_throughput_in + self.msg_throughput_out


@dataclass(frozen=True)
class ResourceWeights:
    """Weights of each resource in a broker's load (Pulsar's ``loadBalancer*ResourceWeight``).

    Defaults are Pulsar's: CPU and both bandwidths count fully, direct memory not at all.
    JVM heap memory is no load signal: Pulsar deprecated its weight in 3.0 (default 0).
    """

    load_balancer_cpu_resource_weight: float = 1.0
    load_balancer_direct_memory_resource_weight: float = 0.0
    load_balancer_bandwidth_in_resource_weight: float = 1.0
    load_balancer_bandwidth_out_resource_weight: float = 1.0

    def __post_init__(self) -> None:
        for name in (
            "load_balancer_cpu_resource_weight",
            "load_balancer_direct_memory_resource_weight",
            "load_balancer_bandwidth_in_resource_weight",
            "load_balancer_bandwidth_out_resource_weight",
        ):
            object.__setattr__(self, name, check_real(name, getattr(self, name)))


@dataclass(frozen=True)
class ResourceUsage:
    """A broker's resource usage in percent of each limit (finite, >= 0, may exceed 100)."""

    cpu: float = 0.0
    direct_memory: float = 0.0
    bandwidth_in: float = 0.0
    bandwidth_out: float = 0.0

    def __post_init__(self) -> None:
        for name in ("cpu", "direct_memory", "bandwidth_in", "bandwidth_out"):
            object.__setattr__(self, name, check_real(name, getattr(self, name)))

    def _weighted(self, weights: ResourceWeights) -> tuple[float, float, float, float]:
        return (
            self.cpu * weights.load_balancer_cpu_resource_weight,
            self.direct_memory * weights.load_balancer_direct_memory_resource_weight,
            self.bandwidth_in * weights.load_balancer_bandwidth_in_resource_weight,
            self.bandwidth_out * weights.load_balancer_bandwidth_out_resource_weight,
        )

    def max_resource_usage_with_weight(self, weights: ResourceWeights) -> float:
        """The largest weighted usage as a fraction (1.0 is 100 %)."""
        return max(self._weighted(weights)) / 100


@dataclass(frozen=True)
class BrokerLoad:
    """One broker's load report (Pulsar's ``LocalBrokerData`` / ``BrokerLoadData``).

    ``bundles`` names every bundle the broker owns, including ones absent from
    :attr:`LoadData.bundle_data` (they count towards "more than one bundle" but are never
    shed). ``rates`` are the broker's totals. ``updated_at_ms`` (epoch ms) is only read by
    :class:`~keyshared.loadbalance.TransferShedder`, to skip stale reports.
    """

    usage: ResourceUsage = field(default_factory=ResourceUsage)
    rates: MessageRates = field(default_factory=MessageRates)
    bundles: frozenset[str] = frozenset()
    updated_at_ms: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.usage, ResourceUsage):
            raise ArgumentTypeError(
                f"usage must be a ResourceUsage, got {type(self.usage).__name__}", argument="usage"
            )
        if not isinstance(self.rates, MessageRates):
            raise ArgumentTypeError(
                f"rates must be a MessageRates, got {type(self.rates).__name__}", argument="rates"
            )
        object.__setattr__(self, "bundles", check_names("bundles", self.bundles))
        check_int("updated_at_ms", self.updated_at_ms, minimum=0)


@dataclass(frozen=True)
class LoadData:
    """The snapshot a modular-load-manager shedder reads (Pulsar's ``LoadData``).

    ``broker_data`` maps broker name to its report; ``bundle_data`` maps bundle name to its
    short-term rates, for the bundles that may be shed; ``recently_unloaded_bundles`` are
    those unloaded within the grace period, which no shedder picks again. Invariant: every
    bundle in ``bundle_data`` is owned by exactly one broker, and no bundle by two.
    """

    broker_data: Mapping[str, BrokerLoad]
    bundle_data: Mapping[str, MessageRates] = field(default_factory=dict)
    recently_unloaded_bundles: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        brokers = check_mapping_items(
            "broker_data", self.broker_data, lambda n, v: check_instance(n, v, BrokerLoad)
        )
        bundles = check_mapping_items("bundle_data", self.bundle_data, check_rates)
        owner: dict[str, str] = {}
        for broker in sorted(brokers):
            for bundle in sorted(brokers[broker].bundles):
                if bundle in owner:
                    raise InvalidArgument(
                        f"broker_data: bundle {bundle!r} is owned by both "
                        f"{owner[bundle]!r} and {broker!r}",
                        argument="broker_data",
                    )
                owner[bundle] = broker
        for bundle in bundles:
            if bundle not in owner:
                raise InvalidArgument(
                    f"bundle_data: bundle {bundle!r} is owned by no broker", argument="bundle_data"
                )
        recent = check_names("recently_unloaded_bundles", self.recently_unloaded_bundles)
        object.__setattr__(self, "broker_data", MappingProxyType(brokers))
        object.__setattr__(self, "bundle_data", MappingProxyType(bundles))
        object.__setattr__(self, "recently_unloaded_bundles", recent)

    def brokers(self) -> list[str]:
        """Broker names in the order every shedder visits them (by name)."""
        return sorted(self.broker_data)

    def sheddable_bundles(
        self, broker: str, *, pulsar_version: str = DEFAULT_PULSAR_VERSION
    ) -> list[tuple[str, MessageRates]]:
        """The broker's bundles that have data, were not unloaded recently and are not of a
        heartbeat or SLA-monitor namespace of ``pulsar_version``
        (:func:`is_sla_or_heartbeat_namespace`), by name."""
        check_pulsar_version(pulsar_version)
        owned = self.broker_data[broker].bundles
        return [
            (bundle, self.bundle_data[bundle])
            for bundle in sorted(owned)
            if bundle in self.bundle_data
            and bundle not in self.recently_unloaded_bundles
            and not is_sla_or_heartbeat_namespace(
                bundle_namespace(bundle, pulsar_version=pulsar_version),
                pulsar_version=pulsar_version,
            )
        ]


def check_rates(name: str, value: object) -> MessageRates:
    """Return ``value`` if it is a :class:`MessageRates`, else raise ``TypeError``."""
    return check_instance(name, value, MessageRates)


@dataclass(frozen=True)
class Unload:
    """Unload ``service_unit`` (a bundle) from ``source_broker``; Pulsar's ``Unload``.

    ``dest_broker`` is set when the strategy picks where the bundle goes.
    """

    source_broker: str
    service_unit: str
    dest_broker: str | None = None


@dataclass(frozen=True)
class SheddingResult(Generic[StateT]):
    """What a shedder decided, why, and the state to pass to its next call.

    ``unloads`` are in decision order; ``reasons`` explain, line by line, why each broker
    was or was not shed (and why nothing was, when nothing was).
    """

    unloads: tuple[Unload, ...]
    reasons: tuple[str, ...]
    state: StateT


__all__ = [
    "DEFAULT_PULSAR_VERSION",
    "MB",
    "PULSAR_VERSIONS",
    "SLA_OR_HEARTBEAT_NAMESPACE",
    "BrokerLoad",
    "LoadData",
    "MessageRates",
    "ResourceUsage",
    "ResourceWeights",
    "SheddingResult",
    "Unload",
    "bundle_namespace",
    "check_pulsar_version",
    "check_rates",
    "is_sla_or_heartbeat_namespace",
]
