"""keyshared's TransferShedder against Pulsar's own (the extensible load manager's default
strategy, PIP-192), on the newest release (4.2.4) and the 4.0 LTS release (4.0.7).

Hypothesis draws a configuration and a seed; each example sends one sequence of rounds to the
oracle (``lb.transfer.run``), where one ``TransferShedder`` keeps its unload-condition hit
count and each broker's ``BrokerLoadData`` its moving averages from round to round, as
keyshared's state does. Compared per round: every unload decision (bundle, source broker,
destination broker when transferring, reason), the breakdown counter the call incremented
(``Skip`` and its reason, or ``Failure``), the load average and spread the counter records,
the spread left once the unloads are done, and the hit count.

Time: Pulsar stamps reports with the clock and compares them with the clock, where keyshared
takes ``now_ms``. The test keeps a virtual clock (a minute per round) and hands the oracle
each time as an age before the round; the oracle reads its clock once per round and sets
each ``updatedAt`` and unload time to that reading minus its age. Ages are whole seconds
plus 500 ms, so that the few milliseconds a call takes never carry a report across the TTL.

The brokers' top bundles are drawn here, mostly as keyshared's ``top_k_bundles`` reports
them, now and then in any order and with idle bundles, and handed to both sides as they are
(``TopKBundles`` itself is compared in test_oracle_loadbalance.py). The mocked context has
ownership (the service-unit channel), isolation and anti-affinity policies and a broker filter
that leaves a policed bundle its allowed brokers; the store iterates brokers by name, so that
brokers of equal load rank alike on both sides.

Where keyshared differs from Pulsar on purpose, the test asserts the difference and names
what Pulsar does: see the ``PULSAR_*`` notes.
"""

from __future__ import annotations

import math
import random
import string
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.pulsar_oracle import Oracle, record, record_kept

from keyshared.loadbalance import (
    BrokerLoad,
    LoadData,
    MessageRates,
    ResourceUsage,
    ResourceWeights,
    ShedderInputs,
    TransferShedder,
    TransferShedderState,
    top_k_bundles,
)
from keyshared.loadbalance import transfer_shedder as transfer_module

BROKERS = tuple(string.ascii_lowercase[:8])
NAMESPACES = ("tenant/ns", "t1/ns-b", "public/default", "pulsar/system")
RESOURCES = ("cpu", "direct_memory", "bandwidth_in", "bandwidth_out")
ROUND_MS = 60_000
START_MS = 1_700_000_000_000
ROUNDS = 26
SETTINGS = settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])

# PULSAR_* notes: what Pulsar does where keyshared deliberately does otherwise.
PULSAR_SWAP_RECENT = (
    "TransferShedder's swap takes back a bundle of the least loaded broker that was unloaded "
    "within the grace period (only the busy broker's bundles are checked against it); "
    "keyshared's swap passes such bundles over"
)
PULSAR_NAN_STD = (
    "equal loads can leave a variance just below 0, whose square root Pulsar records as NaN "
    "in its UnloadCounter; keyshared records 0 (no decision changes: both compare below a "
    "target of 0 or more)"
)


def kept(pulsar_release: Oracle, why: str) -> None:
    record_kept(f"{pulsar_release.version} loadbalance transfer shedder", why)


# --- Configuration -------------------------------------------------------------------------

CONFIG = st.fixed_dictionaries(
    {
        "load_balancer_broker_load_target_std": st.sampled_from((0.0, 0.05, 0.1, 0.25, 0.5)),
        "load_balancer_shedding_condition_hit_count_threshold": st.sampled_from((0, 0, 1, 3)),
        "load_balancer_transfer_enabled": st.booleans(),
        "load_balancer_max_number_of_broker_shedding_per_cycle": st.sampled_from((0, 1, 3, 8)),
        "load_balance_shedding_delay_in_seconds": st.sampled_from((0, 60, 180)),
        "load_balancer_broker_load_data_ttl_in_seconds": st.sampled_from((60, 300, 1800)),
        "load_balancer_broker_overloaded_threshold_percentage": st.sampled_from((0, 50, 85, 100)),
        "load_balancer_history_resource_percentage": st.sampled_from((0.0, 0.5, 0.9, 1.0)),
        "load_balancer_max_number_of_bundles_in_bundle_load_report": st.sampled_from((1, 3, 10)),
        "load_balancer_shedding_bundles_with_policies_enabled": st.booleans(),
    }
)
WEIGHTS = {
    "load_balancer_cpu_resource_weight": "loadBalancerCPUResourceWeight",
    "load_balancer_direct_memory_resource_weight": "loadBalancerDirectMemoryResourceWeight",
    "load_balancer_bandwidth_in_resource_weight": "loadBalancerBandwidthInResourceWeight",
    "load_balancer_bandwidth_out_resource_weight": "loadBalancerBandwidthOutResourceWeight",
}
weights = st.fixed_dictionaries({k: st.sampled_from((0.0, 0.5, 1.0, 1.0, 2.0)) for k in WEIGHTS})
# ServiceConfiguration property names that snake_case -> camelCase does not give.
PROPERTY = {
    "load_balancer_broker_load_data_ttl_in_seconds": "loadBalancerBrokerLoadDataTTLInSeconds",
}


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def pulsar_conf(config: dict[str, Any], resource_weights: dict[str, float]) -> dict[str, Any]:
    conf = {PROPERTY.get(k, camel(k)): v for k, v in config.items()}
    conf["loadBalancerDebugModeEnabled"] = False
    return conf | {WEIGHTS[k]: v for k, v in resource_weights.items()}


# --- Random rounds -------------------------------------------------------------------------


def percent(usage: float, limit: float) -> float:
    """Pulsar's ``ResourceUsage.percentUsage``: ``(float) usage / (float) limit * 100``."""
    if limit <= 0:
        return 0.0
    return float(np.float32(np.float32(usage) / np.float32(limit)) * np.float32(100))


def random_usage(rng: random.Random) -> dict[str, list[float]]:
    usage = {}
    for name in RESOURCES:
        limit = rng.choice((0.0, 100.0, 1024.0, rng.uniform(1, 1e4)))
        level = rng.choice((0.0, 0.1, 0.5, 0.85, 0.9, 1.0, 1.3, rng.random(), rng.random()))
        usage[name] = [level * limit, limit]
    return usage


def random_rates(rng: random.Random, scale: float) -> list[float]:
    if rng.random() < 0.1:
        return [0.0, 0.0, 0.0, 0.0]
    values = [
        rng.choice((0.0, rng.uniform(0, scale), float(rng.randrange(5)) * scale / 4))
        for _ in range(4)
    ]
    return values


def bundle_name(rng: random.Random, used: set[str]) -> str:
    while True:
        lower = rng.randrange(0, 0xFFFF0000)
        upper = rng.randrange(lower + 1, 0xFFFFFFFF + 1)
        name = f"{rng.choice(NAMESPACES)}/0x{lower:08x}_0x{upper:08x}"
        if name not in used:
            used.add(name)
            return name


def seconds_and_a_half(rng: random.Random, most_s: int) -> int:
    """An age in ms of whole seconds plus 500 (see the module's note on time)."""
    return rng.randrange(0, most_s) * 1000 + 500


class Cluster:
    """The brokers' reports over the rounds, on a virtual clock."""

    def __init__(self, rng: random.Random, config: dict[str, Any]) -> None:
        self.rng = rng
        self.config = config
        self.brokers = list(BROKERS[: rng.choice((1, 2, 3, 4, 5, 8))])
        self.reports: dict[str, dict[str, Any]] = {}  # broker -> report and its time
        self.used: set[str] = set()
        self.scale = rng.choice((1e3, 1e5, 1e7))
        # Now and then every broker reports the same usage: equal loads, ranked by name on
        # both sides, whose variance can come out just below 0 (PULSAR_NAN_STD).
        self.same_usage = random_usage(rng) if rng.random() < 0.15 else None

    def round(self, index: int) -> tuple[dict[str, Any], int]:
        rng, config = self.rng, self.config
        now = START_MS + index * ROUND_MS
        ttl_s = config["load_balancer_broker_load_data_ttl_in_seconds"]
        present = self.brokers
        if rng.random() < 0.1 and len(present) > 1:
            present = sorted(rng.sample(present, rng.randrange(1, len(present))))
        self.reports = {b: r for b, r in self.reports.items() if b in present}
        brokers: dict[str, Any] = {}
        tops: dict[str, list[Any]] = {}
        for broker in present:
            previous = self.reports.get(broker)
            if previous is None or rng.random() < 0.8:
                age = (
                    seconds_and_a_half(rng, 30)
                    if rng.random() < 0.9
                    else seconds_and_a_half(rng, 2 * ttl_s)
                )
                if previous is not None and now - age <= previous["at"]:
                    age = 500
                report = {
                    "usage": self.same_usage or random_usage(rng),
                    "rates": [0.0, 0.0, 0.0, 0.0],
                    "at": now - age,
                }
                tops_of = self.top_bundles()
                totals = [sum(r[i] for _, r in tops_of) for i in range(4)]
                report["rates"] = totals if rng.random() < 0.7 else random_rates(rng, self.scale)
                report["tops"] = tops_of
                self.reports[broker] = report
                brokers[broker] = {
                    "report": {"usage": report["usage"], "rates": report["rates"]},
                    "age_ms": age,
                }
            else:
                brokers[broker] = {"report": None, "age_ms": now - previous["at"]}
            tops[broker] = self.reports[broker]["tops"]
        return self.extras(now, brokers, tops), now

    def top_bundles(self) -> list[Any]:
        rng = self.rng
        stats = {
            bundle_name(rng, self.used): random_rates(rng, self.scale)
            for _ in range(rng.choice((0, 1, 2, 3, 5, 8, 12)))
        }
        if rng.random() < 0.8:
            topk = self.config["load_balancer_max_number_of_bundles_in_bundle_load_report"]
            ranked = top_k_bundles({b: MessageRates(*r) for b, r in stats.items()}, topk)
            return [[b, stats[b]] for b, _ in ranked]
        entries = [[b, r] for b, r in stats.items()]
        rng.shuffle(entries)
        return entries

    def extras(
        self, now: int, brokers: dict[str, Any], tops: dict[str, list[Any]]
    ) -> dict[str, Any]:
        rng = self.rng
        present = sorted(brokers)
        bundles = [b for top in tops.values() for b, _ in top]
        available = present
        if rng.random() < 0.1:
            available = sorted(rng.sample(BROKERS, rng.randrange(1, len(BROKERS) + 1)))
        round_: dict[str, Any] = {
            "brokers": brokers,
            "available": available,
            "top_bundles": tops,
            "recently_unloaded_bundles": [b for b in bundles if rng.random() < 0.1],
            "recently_unloaded_brokers": {
                b: seconds_and_a_half(rng, 400) - 500 for b in present if rng.random() < 0.1
            },
        }
        if rng.random() < 0.03:
            round_["registry_fails"] = True
        if rng.random() < 0.5:
            owners = {}
            for broker, top in tops.items():
                for bundle, _ in top:
                    if rng.random() < 0.9:
                        owners[bundle] = broker
                    elif rng.random() < 0.5:
                        owners[bundle] = rng.choice(BROKERS)
            round_["owners"] = owners
        if rng.random() < 0.4:
            isolation = {
                ns: sorted(rng.sample(BROKERS, rng.randrange(0, len(BROKERS) + 1)))
                for ns in NAMESPACES
                if rng.random() < 0.3
            }
            affinity = {
                b: sorted(rng.sample(BROKERS, rng.randrange(0, len(BROKERS) + 1)))
                for b in bundles
                if rng.random() < 0.2
            }
            round_["isolation"] = isolation
            round_["anti_affinity"] = affinity
        return round_


def oracle_round(round_: dict[str, Any], inputs: ShedderInputs) -> dict[str, Any]:
    """The round as the oracle reads it: policies as the filter's allowed brokers."""
    sent = {k: v for k, v in round_.items() if k not in ("isolation", "anti_affinity")}
    sent["isolation_namespaces"] = sorted(inputs.isolation_policies)
    sent["anti_affinity_bundles"] = sorted(inputs.anti_affinity_candidates)
    allowed = {}
    for top in round_["top_bundles"].values():
        for bundle, _ in top:
            brokers = inputs.allowed_brokers(bundle)
            if brokers is not None:
                allowed[bundle] = sorted(brokers)
    sent["allowed"] = allowed
    return sent


class Reports:
    """keyshared's view of the reports: each broker's latest, with its time."""

    def __init__(self) -> None:
        self.latest: dict[str, tuple[dict[str, Any], int]] = {}

    def load(self, round_: dict[str, Any], now: int) -> LoadData:
        brokers = {}
        self.latest = {b: r for b, r in self.latest.items() if b in round_["brokers"]}
        for name, entry in round_["brokers"].items():
            if entry["report"] is not None:
                self.latest[name] = (entry["report"], now - entry["age_ms"])
            report, at = self.latest[name]
            usage = report["usage"]
            brokers[name] = BrokerLoad(
                usage=ResourceUsage(**{r: percent(*usage[r]) for r in RESOURCES}),
                rates=MessageRates(*report["rates"]),
                bundles=frozenset(b for b, _ in round_["top_bundles"][name]),
                updated_at_ms=at,
            )
        return LoadData(brokers, {}, frozenset(round_["recently_unloaded_bundles"]))


def shedder_inputs(round_: dict[str, Any]) -> ShedderInputs:
    return ShedderInputs(
        available_brokers=frozenset(round_["available"]),
        bundle_owners=round_.get("owners"),
        isolation_policies={ns: frozenset(b) for ns, b in round_.get("isolation", {}).items()},
        anti_affinity_candidates={
            bundle: frozenset(b) for bundle, b in round_.get("anti_affinity", {}).items()
        },
        top_bundles_load_data={
            broker: [(b, MessageRates(*r)) for b, r in top]
            for broker, top in round_["top_bundles"].items()
        },
    )


# --- Comparison ----------------------------------------------------------------------------


def decisions(result: Any) -> list[list[Any]]:
    rows = [
        [u.source_broker, u.service_unit, u.dest_broker, why]
        for u, why in zip(result.unloads, result.decision_reasons, strict=True)
    ]
    return sorted(rows, key=str)


def counter(result: Any) -> dict[str, str] | None:
    if result.label == "Success":
        return None
    return {"label": result.label, "reason": result.skip_reason}


def number(value: Any) -> float:
    return float(value) if isinstance(value, str) else value


def same_number(theirs: Any, ours: float) -> bool:
    theirs = number(theirs)
    if math.isnan(theirs) or math.isnan(ours):
        return math.isnan(theirs) and math.isnan(ours)
    return theirs == ours or math.isclose(theirs, ours, rel_tol=1e-12, abs_tol=1e-15)


@contextmanager
def pulsar_swap() -> Iterator[None]:
    """keyshared's shedder with Pulsar's swap, which takes recently unloaded bundles back."""
    swap = transfer_module._swap

    def taking_recent(candidates: Any, recently_unloaded: Any, *rest: Any) -> Any:
        return swap(candidates, frozenset(), *rest)

    transfer_module._swap = taking_recent  # type: ignore[assignment]
    try:
        yield
    finally:
        transfer_module._swap = swap  # type: ignore[assignment]


def compare(pulsar_release: Oracle, answer: dict[str, Any], result: Any, area: str) -> None:
    """Asserts that keyshared's round is Pulsar's, but for differences kept on purpose."""
    assert decisions(result) == answer["unloads"], (answer, result)
    assert len({(u.source_broker, u.service_unit) for u in result.unloads}) == len(result.unloads)
    assert counter(result) == answer["counter"], (answer, result)
    assert answer["hit_count"] == result.state.unload_condition_hit_count, (answer, result)
    if answer["load_avg"] is None:
        assert (
            result.skip_reason in ("NoBrokers", "OutDatedData", "CoolDown", "NoLoadData", "Unknown")
            and result.load_avg == result.load_std == 0
        )
        assert number(answer["std_after"]) == result.load_std_after == 0
        record(area, 1)
        return
    assert same_number(answer["load_avg"], result.load_avg), (answer, result)
    nan_std = answer["load_std"] == "NaN"
    if nan_std:
        assert result.load_std == 0.0, (answer, result)
        kept(pulsar_release, "PULSAR_NAN_STD")
    else:
        assert same_number(answer["load_std"], result.load_std), (answer, result)
    if answer["std_after"] == "NaN" and nan_std and not result.unloads:
        assert result.load_std_after == 0.0
    else:
        assert same_number(answer["std_after"], result.load_std_after), (answer, result)
    if not nan_std:
        record(area, 1)


@SETTINGS
@given(config=CONFIG, resource_weights=weights, seed=st.integers(0, 2**32))
def test_transfer_shedder(
    pulsar_release: Oracle, config: dict[str, Any], resource_weights: dict[str, float], seed: int
) -> None:
    rng = random.Random(seed)
    cluster = Cluster(rng, config)
    rounds = [cluster.round(i) for i in range(ROUNDS)]
    inputs = [shedder_inputs(r) for r, _ in rounds]
    sent = [oracle_round(r, i) for (r, _), i in zip(rounds, inputs, strict=True)]
    handle = pulsar_release.call("lb.transfer.new", conf=pulsar_conf(config, resource_weights))
    try:
        answers = pulsar_release.call("lb.transfer.run", handle=handle, rounds=sent)
    finally:
        pulsar_release.call("close", handle=handle)
    kwargs = {
        k: v
        for k, v in config.items()
        if k != "load_balancer_max_number_of_bundles_in_bundle_load_report"
    }
    shedder = TransferShedder(
        **kwargs,
        load_balancer_max_number_of_bundles_in_bundle_load_report=config[
            "load_balancer_max_number_of_bundles_in_bundle_load_report"
        ],
        resource_weights=ResourceWeights(**resource_weights),
    )
    reports = Reports()
    state = TransferShedderState()
    area = f"{pulsar_release.version} loadbalance transfer shedder"
    for (round_, now), shed_inputs, answer in zip(rounds, inputs, answers, strict=True):
        load = reports.load(round_, now)
        if round_.get("registry_fails"):
            # The broker registry fails before the reports are read: Pulsar's averages are
            # its brokers', which still move on; keyshared's move on at the next call.
            result = TransferShedder.failure(state)
            state = TransferShedderState(
                state.unload_condition_hit_count,
                shedder.find_bundles_for_unloading(
                    load, state, now_ms=now, inputs=shed_inputs
                ).state.broker_load_ema,
            )
            compare(pulsar_release, answer, result, area)
            continue
        recent = {b: now - age for b, age in round_["recently_unloaded_brokers"].items()}
        result = shedder.find_bundles_for_unloading(
            load, state, now_ms=now, recently_unloaded_brokers=recent, inputs=shed_inputs
        )
        if decisions(result) != answer["unloads"]:
            with pulsar_swap():
                as_pulsar = shedder.find_bundles_for_unloading(
                    load, state, now_ms=now, recently_unloaded_brokers=recent, inputs=shed_inputs
                )
            # A swap's idle broker (a destination on either side) reported a bundle unloaded
            # within the grace period: Pulsar weighs it, keyshared passes it over.
            idle = {u[2] for u in [*answer["unloads"], *decisions(result)]}
            assert any(
                bundle in round_["recently_unloaded_bundles"]
                for broker in idle
                for bundle, _ in round_["top_bundles"].get(broker, ())
            ), (answer, result)
            compare(pulsar_release, answer, as_pulsar, area)
            kept(pulsar_release, "PULSAR_SWAP_RECENT")
            state = as_pulsar.state
            continue
        compare(pulsar_release, answer, result, area)
        state = result.state
