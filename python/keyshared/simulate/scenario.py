"""The typed scenario model of the simulator, and its TOML / JSON form.

A scenario is one or more topics, each with a starting layout, an auto-scale policy,
producers (rates, key distributions, payload sizes), consumers (processing rates, joining,
leaving, slowing, stalling and failing over time), producer batching and the broker's
in-flight window. Every reader error names the offending field by its path, for example
``scenario.topics[0].producers[1].rate_msg_s must not be negative``.

Units: times and durations in ms of virtual time, rates in msg/s, sizes in bytes.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from keyshared._checks import check_int, check_keys, check_mapping, check_name, check_rate
from keyshared._core import RING_SIZE
from keyshared._reader import build, field_path, json_form, read
from keyshared.errors import ArgumentTypeError, InvalidArgument, KeysharedError, ScenarioError
from keyshared.scalable.batching import DEFAULT_MAX_BYTES, DEFAULT_MAX_MESSAGES
from keyshared.scalable.layout import TopicLayout
from keyshared.scalable.policy import AutoScalePolicy
from keyshared.simulate.controller import ASSIGNMENTS, Assignment

KeyDistribution = Literal["uniform", "zipf"]
Backoff = Literal["fixed", "exponential"]
PoisonPolicy = Literal["drop", "dead_letter", "block"]


@dataclass(frozen=True)
class KeySpec:
    """The keys a producer writes: ``count`` distinct keys ``f"{prefix}{i}"``, drawn
    uniformly or by a Zipf law (key i has weight ``1 / (i + 1) ** zipf_exponent``).
    Producers sharing a prefix share keys."""

    count: int = 10_000
    prefix: str = "key-"
    distribution: KeyDistribution = "uniform"
    zipf_exponent: float = 1.0

    def __post_init__(self) -> None:
        check_int("count", self.count, minimum=1, maximum=1_000_000)
        if not isinstance(self.prefix, str):
            raise ArgumentTypeError(
                f"prefix must be a str, got {type(self.prefix).__name__}", argument="prefix"
            )
        if self.distribution not in ("uniform", "zipf"):
            raise InvalidArgument(
                f'distribution must be "uniform" or "zipf", got {self.distribution!r}',
                argument="distribution",
            )
        check_rate("zipf_exponent", self.zipf_exponent)


@dataclass(frozen=True)
class PayloadSpec:
    """Payload sizes in bytes, uniform over ``[min_bytes, max_bytes]``."""

    min_bytes: int = 1024
    max_bytes: int = 1024

    def __post_init__(self) -> None:
        check_int("min_bytes", self.min_bytes, minimum=0)
        check_int("max_bytes", self.max_bytes, minimum=self.min_bytes)


@dataclass(frozen=True)
class ProducerSpec:
    """One producer: Poisson arrivals at ``rate_msg_s`` from ``start_ms`` until ``stop_ms``
    (None: the scenario's ``duration_ms``)."""

    name: str
    rate_msg_s: float
    start_ms: int = 0
    stop_ms: int | None = None
    keys: KeySpec = field(default_factory=KeySpec)
    payload: PayloadSpec = field(
        default_factory=PayloadSpec, metadata=json_form(read=lambda p, v: _payload(p, v))
    )

    def __post_init__(self) -> None:
        check_name("name", self.name)
        check_rate("rate_msg_s", self.rate_msg_s)
        check_int("start_ms", self.start_ms, minimum=0)
        if self.stop_ms is not None:
            check_int("stop_ms", self.stop_ms, minimum=self.start_ms)


@dataclass(frozen=True)
class RateChange:
    """From ``at_ms`` on, the consumer processes ``rate_msg_s`` (it slows down or speeds up)."""

    at_ms: int
    rate_msg_s: float

    def __post_init__(self) -> None:
        check_int("at_ms", self.at_ms, minimum=0)
        _check_positive("rate_msg_s", self.rate_msg_s)


@dataclass(frozen=True)
class Stall:
    """From ``at_ms`` the consumer stops processing and acking while staying connected, for
    ``for_ms`` (None: until it leaves). Its deliveries time out and are retried."""

    at_ms: int
    for_ms: int | None = None

    def __post_init__(self) -> None:
        check_int("at_ms", self.at_ms, minimum=0)
        if self.for_ms is not None:
            check_int("for_ms", self.for_ms, minimum=1)


@dataclass(frozen=True)
class ConsumerSpec:
    """``count`` identical consumers (named ``name`` alone, or ``name-000``, ``name-001``,
    ... when several) of the topic's one STREAM subscription. Each processes
    ``rate_msg_s`` messages per second, one entry at a time in arrival order, and acks an
    entry when done with it; it nacks an entry with probability ``nack_probability``
    instead (a processing failure: the broker retries it with backoff). It connects at
    ``join_ms`` and disconnects at ``leave_ms`` (a crash or a close: what it had not acked
    goes to the next owner)."""

    name: str
    rate_msg_s: float
    count: int = 1
    join_ms: int = 0
    leave_ms: int | None = None
    rate_changes: tuple[RateChange, ...] = ()
    stalls: tuple[Stall, ...] = ()
    nack_probability: float = 0.0

    def __post_init__(self) -> None:
        check_name("name", self.name)
        _check_positive("rate_msg_s", self.rate_msg_s)
        check_int("count", self.count, minimum=1, maximum=100_000)
        check_int("join_ms", self.join_ms, minimum=0)
        if self.leave_ms is not None:
            check_int("leave_ms", self.leave_ms, minimum=self.join_ms + 1)
        if not 0.0 <= check_rate("nack_probability", self.nack_probability) < 1.0:
            raise InvalidArgument(
                f"nack_probability must be in [0, 1), got {self.nack_probability}",
                argument="nack_probability",
            )

    def names(self) -> list[str]:
        """The names of the ``count`` consumers."""
        if self.count == 1:
            return [self.name]
        width = max(3, len(str(self.count - 1)))
        return [f"{self.name}-{i:0{width}d}" for i in range(self.count)]


@dataclass(frozen=True)
class BatchingSpec:
    """The producers' bucketed batcher: a batch closes at ``max_messages`` messages, at
    ``max_bytes`` bytes, or at the end of the tick it was opened in."""

    max_messages: int = DEFAULT_MAX_MESSAGES
    max_bytes: int = DEFAULT_MAX_BYTES

    def __post_init__(self) -> None:
        check_int("max_messages", self.max_messages, minimum=1)
        check_int("max_bytes", self.max_bytes, minimum=1)


@dataclass(frozen=True)
class WindowSpec:
    """Each segment's in-flight window (Danube's, one entry per bucket in flight, so that
    ``max_window_size`` must reach the bucket count for every bucket to flow; Danube's
    default of 10 would throttle a segment of more buckets) and subscription failure
    policy: ack timeout, redeliveries with backoff, and what becomes of an entry out of
    redeliveries (``drop``: counted done and lost; ``dead_letter``: counted done and
    published to the dead-letter topic; ``block``: it stays in flight, holding its bucket,
    until its consumer leaves and it goes to the bucket's next owner)."""

    max_window_size: int = 1024
    max_per_consumer: int = 1000
    ack_timeout_ms: int = 30_000
    max_redelivery_count: int = 5
    base_redelivery_delay_ms: int = 1_000
    max_redelivery_delay_ms: int = 60_000
    backoff_strategy: Backoff = "exponential"
    poison_policy: PoisonPolicy = "block"

    def __post_init__(self) -> None:
        check_int("max_window_size", self.max_window_size, minimum=1)
        check_int("max_per_consumer", self.max_per_consumer, minimum=1)
        check_int("ack_timeout_ms", self.ack_timeout_ms, minimum=1)
        check_int("max_redelivery_count", self.max_redelivery_count, minimum=0)
        check_int("base_redelivery_delay_ms", self.base_redelivery_delay_ms, minimum=0)
        check_int(
            "max_redelivery_delay_ms",
            self.max_redelivery_delay_ms,
            minimum=self.base_redelivery_delay_ms,
        )
        if self.backoff_strategy not in ("fixed", "exponential"):
            raise InvalidArgument(
                f'backoff_strategy must be "fixed" or "exponential", got {self.backoff_strategy!r}',
                argument="backoff_strategy",
            )
        if self.poison_policy not in ("drop", "dead_letter", "block"):
            raise InvalidArgument(
                'poison_policy must be "drop", "dead_letter" or "block",'
                f" got {self.poison_policy!r}",
                argument="poison_policy",
            )


@dataclass(frozen=True)
class TopicSpec:
    """One scalable topic, simulated ``count`` times side by side (replicas differ only in
    their random draws), with one STREAM subscription. ``assignment`` is how its consumers
    get what they read: ``"buckets"`` (PIP-486 bucket assignment across the readable
    segments) or ``"segments"`` (Pulsar's subscription coordinator: whole segments, surplus
    consumers sharing bucketed ones)."""

    name: str
    layout: TopicLayout = field(
        metadata=json_form(read=lambda p, v: _layout(p, v), missing=lambda _: {})
    )
    producers: tuple[ProducerSpec, ...]
    consumers: tuple[ConsumerSpec, ...]
    policy: AutoScalePolicy = field(default_factory=AutoScalePolicy)
    count: int = 1
    batching: BatchingSpec = field(default_factory=BatchingSpec)
    window: WindowSpec = field(default_factory=WindowSpec)
    assignment: Assignment = "buckets"

    def __post_init__(self) -> None:
        check_name("name", self.name)
        if self.assignment not in ASSIGNMENTS:
            raise InvalidArgument(
                f'assignment must be "buckets" or "segments", got {self.assignment!r}',
                argument="assignment",
            )
        if not isinstance(self.layout, TopicLayout):
            raise ArgumentTypeError(
                f"layout must be a TopicLayout, got {type(self.layout).__name__}", argument="layout"
            )
        check_int("count", self.count, minimum=1, maximum=10_000)
        _check_unique("producers", [p.name for p in self.producers])
        _check_unique("consumers", [n for c in self.consumers for n in c.names()])

    def replica_names(self) -> list[str]:
        """The names of the ``count`` replicas."""
        if self.count == 1:
            return [self.name]
        width = max(3, len(str(self.count - 1)))
        return [f"{self.name}-{i:0{width}d}" for i in range(self.count)]


@dataclass(frozen=True)
class Scenario:
    """A whole run. Producers stop at ``duration_ms`` at the latest; the run ends once every
    topic has drained after that, or at ``max_time_ms`` with what is left reported as
    backlog. ``tick_ms`` is the step of production, batching and the broker heartbeat
    (retries); the controller reads load every ``load_report_interval_ms`` (rates over the
    last ``load_rate_window_ms``, written on a material change as PIP-483's reporter does)
    and runs its periodic evaluation every ``policy_interval_ms``, besides evaluating at
    once when consumers join or leave. Time series are sampled every
    ``sample_interval_ms``."""

    name: str
    topics: tuple[TopicSpec, ...]
    duration_ms: int
    description: str = ""
    seed: int = 0
    max_time_ms: int | None = None
    tick_ms: int = 100
    policy_interval_ms: int = 60_000
    load_report_interval_ms: int = 10_000
    load_rate_window_ms: int = 60_000
    sample_interval_ms: int = 1_000

    def __post_init__(self) -> None:
        check_name("name", self.name)
        if not isinstance(self.description, str):
            raise ArgumentTypeError(
                f"description must be a str, got {type(self.description).__name__}",
                argument="description",
            )
        check_int("seed", self.seed, minimum=0, maximum=2**63 - 1)
        check_int("duration_ms", self.duration_ms, minimum=1)
        if self.max_time_ms is not None:
            check_int("max_time_ms", self.max_time_ms, minimum=self.duration_ms)
        check_int("tick_ms", self.tick_ms, minimum=1, maximum=60_000)
        for name in ("policy_interval_ms", "load_report_interval_ms", "sample_interval_ms"):
            value = check_int(name, getattr(self, name), minimum=self.tick_ms)
            if value % self.tick_ms:
                raise InvalidArgument(
                    f"{name} ({value}) must be a multiple of tick_ms ({self.tick_ms})",
                    argument=name,
                )
        check_int("load_rate_window_ms", self.load_rate_window_ms, minimum=self.tick_ms)
        if not self.topics:
            raise InvalidArgument("topics must hold at least one topic", argument="topics")
        _check_unique("topics", [n for t in self.topics for n in t.replica_names()])
        _check_times(self)

    @property
    def horizon_ms(self) -> int:
        """When the run stops at the latest: ``max_time_ms``, by default twice the duration."""
        return self.max_time_ms if self.max_time_ms is not None else 2 * self.duration_ms

    # --- reading ----------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        """A scenario from its TOML / JSON form (see the module docs); raises
        :class:`ScenarioError` naming the field at fault."""
        try:
            return read(cls, data, "scenario")
        except (TypeError, ValueError) as e:
            if isinstance(e, KeysharedError):
                # The field at fault, as the reader located it.
                raise ScenarioError(str(e), argument=e.argument, index=e.index) from None
            raise ScenarioError(str(e), argument=None) from None

    @classmethod
    def from_file(cls, path: str | Path) -> Scenario:
        """Reads a ``.toml`` or ``.json`` scenario file."""
        path = Path(path)
        try:
            text = path.read_bytes()
        except OSError as e:
            raise ScenarioError(
                f"cannot read scenario {path}: {e.strerror or e}", argument="path"
            ) from None
        suffix = path.suffix.lower()
        try:
            # "utf-8-sig": a byte-order mark, as some editors write, is not content.
            if suffix == ".toml":
                data = tomllib.loads(text.decode("utf-8-sig"))
            elif suffix == ".json":
                data = json.loads(text.decode("utf-8-sig"))
            else:
                raise ScenarioError(f"scenario {path} must end in .toml or .json", argument="path")
        except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ScenarioError(
                f"scenario {path} is not valid {suffix[1:].upper()}: {e}", argument="path"
            ) from None
        except RecursionError:
            raise ScenarioError(f"scenario {path} is nested too deeply", argument="path") from None
        if not isinstance(data, Mapping):
            raise ScenarioError(f"scenario {path} must hold an object at the top", argument="path")
        return cls.from_dict(data)


# --- field readers -----------------------------------------------------------------------


def _payload(path: str, data: object) -> PayloadSpec:
    """``bytes = n`` is short for ``min_bytes = max_bytes = n``."""
    raw = dict(check_mapping(path, data))
    if "bytes" in raw:
        if "min_bytes" in raw or "max_bytes" in raw:
            raise InvalidArgument(
                f"{path}: give bytes, or min_bytes and max_bytes, not both", argument=path
            )
        size = raw.pop("bytes")
        raw.update(min_bytes=size, max_bytes=size)
    return read(PayloadSpec, raw, path)


def _layout(path: str, data: object) -> TopicLayout:
    """``dag`` (a :meth:`TopicLayout.to_dict` form), or an initial layout of ``segments``
    segments (1) and ``bucket_budget`` buckets (4)."""
    raw = check_mapping(path, data)
    check_keys(path, raw, {"segments", "bucket_budget", "dag"})
    if "dag" in raw:
        if len(raw) > 1:
            raise InvalidArgument(
                f"{path}: give dag, or segments and bucket_budget, not both", argument=path
            )
        return TopicLayout.from_dict(raw["dag"], field_path(path, "dag"))

    def initial(segments: object = 1, bucket_budget: Any = 4) -> TopicLayout:
        # TopicLayout.initial checks num_segments, which the scenario spells segments.
        n = check_int("segments", segments, minimum=1, maximum=RING_SIZE)
        return TopicLayout.initial(n, bucket_budget)

    return build(initial, path, **raw)


def _check_times(scenario: Scenario) -> None:
    """Every timed event falls within the run."""
    horizon = scenario.horizon_ms
    for t, topic in enumerate(scenario.topics):
        for p, producer in enumerate(topic.producers):
            if producer.start_ms >= scenario.duration_ms:
                raise InvalidArgument(
                    f"topics[{t}].producers[{p}].start_ms ({producer.start_ms}) must be before"
                    f" duration_ms ({scenario.duration_ms})",
                    argument="topics",
                )
        for c, consumer in enumerate(topic.consumers):
            if consumer.join_ms >= horizon:
                raise InvalidArgument(
                    f"topics[{t}].consumers[{c}].join_ms ({consumer.join_ms}) must be before"
                    f" the end of the run ({horizon} ms)",
                    argument="topics",
                )


def _check_positive(name: str, value: object) -> float:
    number = check_rate(name, value)
    if number <= 0.0:
        raise InvalidArgument(f"{name} must be above 0, got {value}", argument=name)
    return number


def _check_unique(what: str, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidArgument(f"{what} repeat the name {name!r}", argument=what)
        seen.add(name)


__all__ = [
    "BatchingSpec",
    "ConsumerSpec",
    "KeySpec",
    "PayloadSpec",
    "ProducerSpec",
    "RateChange",
    "Scenario",
    "ScenarioError",
    "Stall",
    "TopicSpec",
    "WindowSpec",
]
