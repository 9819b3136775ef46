"""The built-in scenarios: PIP-486's three use cases for entry buckets.

* ``drain-backlog``: one segment and one consumer that falls behind; nine more consumers
  join, auto-split grows the topic, and the sealed segment's backlog drains across its
  buckets (at most its bucket count of consumers at once) before its successors are read.
* ``low-throughput``: many low-rate topics, each with more consumers than buckets; the
  policy rebuckets them (one segment, more buckets) instead of splitting, since their rate
  is below the split-vs-rebucket floor.
* ``beyond-max-segments``: 200 consumers on a topic capped at 64 segments; the policy raises
  every segment to 4 buckets (256 substreams), so all 200 consumers work.

``scale`` shrinks a scenario for quick runs and tests while keeping its shape: rates and
the policy's rate thresholds scale with it in ``drain-backlog`` (so the same decisions
fire), and the topic, segment and consumer counts do in the other two.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from keyshared.errors import InvalidArgument
from keyshared.scalable.layout import TopicLayout
from keyshared.scalable.policy import AutoScalePolicy
from keyshared.simulate.scenario import (
    ConsumerSpec,
    KeySpec,
    PayloadSpec,
    ProducerSpec,
    Scenario,
    TopicSpec,
)


def drain_backlog(scale: float = 1.0) -> Scenario:
    """Use case 1: 5,000 msg/s into one segment (4 buckets) read by one 1,000 msg/s
    consumer; at 50 s nine more join. The controller evaluates every 10 s and may split
    every 10 s, so the topic grows to 10 segments; meanwhile the sealed first segment
    drains with up to 4 consumers, one per bucket."""
    policy = _scaled_rates(
        AutoScalePolicy(
            split_cooldown_ms=10_000,
            rebucket_cooldown_ms=10_000,
            split_vs_rebucket_min_msg_rate_in=300.0,
        ),
        scale,
    )
    topic = TopicSpec(
        name="orders",
        layout=TopicLayout.initial(1, 4),
        policy=policy,
        producers=(
            ProducerSpec(
                "orders-producer",
                5_000.0 * scale,
                keys=KeySpec(count=50_000, prefix="order-"),
                payload=PayloadSpec(256, 2048),
            ),
        ),
        consumers=(
            ConsumerSpec("first", 1_000.0 * scale),
            ConsumerSpec("scale-up", 1_000.0 * scale, count=9, join_ms=50_000),
        ),
    )
    return Scenario(
        name="drain-backlog",
        description=(
            "PIP-486 use case 1: a sealed segment's backlog, after scaling from 1 to 10"
            " consumers, drains across its buckets"
        ),
        topics=(topic,),
        duration_ms=240_000,
        max_time_ms=900_000,
        policy_interval_ms=10_000,
    )


def low_throughput(scale: float = 1.0) -> Scenario:
    """Use case 2: 20 topics of 40 msg/s, each read by 8 consumers of 10 msg/s that join at
    30 s; one segment of 4 buckets each. Below the split-vs-rebucket floor, the policy
    rebuckets each topic to 8 buckets instead of splitting it into 8 segments."""
    topic = TopicSpec(
        name="tenant",
        count=max(1, round(20 * scale)),
        layout=TopicLayout.initial(1, 4),
        policy=AutoScalePolicy(),
        producers=(
            ProducerSpec(
                "events",
                40.0,
                keys=KeySpec(count=2_000, prefix="device-"),
                payload=PayloadSpec(200, 800),
            ),
        ),
        consumers=(ConsumerSpec("reader", 10.0, count=8, join_ms=30_000),),
    )
    return Scenario(
        name="low-throughput",
        description=(
            "PIP-486 use case 2: many low-throughput topics consolidated by rebucketing"
            " instead of splitting"
        ),
        topics=(topic,),
        duration_ms=180_000,
        max_time_ms=600_000,
    )


def beyond_max_segments(scale: float = 1.0) -> Scenario:
    """Use case 3: a topic at its cap of 64 segments (one bucket each) takes 12,000 msg/s;
    64 consumers of 100 msg/s read it, and 136 more join at 30 s. At the cap, the policy
    rolls every segment over to 4 buckets: 256 substreams for 200 consumers."""
    segments = max(2, round(64 * scale))
    consumers = max(segments + 1, round(200 * scale))
    topic = TopicSpec(
        name="telemetry",
        layout=TopicLayout.initial(segments, 4),
        policy=AutoScalePolicy(max_segments=segments),
        producers=(
            ProducerSpec(
                "telemetry-producer",
                12_000.0 * segments / 64,
                keys=KeySpec(count=100_000, prefix="sensor-"),
                payload=PayloadSpec(100, 400),
            ),
        ),
        consumers=(
            ConsumerSpec("early", 100.0, count=segments),
            ConsumerSpec("late", 100.0, count=consumers - segments, join_ms=30_000),
        ),
    )
    return Scenario(
        name="beyond-max-segments",
        description=(
            f"PIP-486 use case 3: {consumers} consumers on a topic capped at {segments}"
            " segments, activated by raising every segment's bucket count"
        ),
        topics=(topic,),
        duration_ms=120_000,
        max_time_ms=600_000,
    )


def _scaled_rates(policy: AutoScalePolicy, scale: float) -> AutoScalePolicy:
    """The policy with every rate threshold multiplied by ``scale``."""
    names = [
        f"{kind}_{rate}"
        for kind in ("split", "merge")
        for rate in ("msg_rate_in", "bytes_rate_in", "msg_rate_out", "bytes_rate_out")
    ]
    names.append("split_vs_rebucket_min_msg_rate_in")
    return replace(policy, **{n: getattr(policy, n) * scale for n in names})


BUILTIN: dict[str, Callable[[float], Scenario]] = {
    "drain-backlog": drain_backlog,
    "low-throughput": low_throughput,
    "beyond-max-segments": beyond_max_segments,
}


def builtin_scenario(name: str, scale: float = 1.0) -> Scenario:
    """A built-in scenario by name, shrunk (or grown) by ``scale`` (> 0)."""
    if name not in BUILTIN:
        raise InvalidArgument(
            f"no built-in scenario {name!r}; choose from {', '.join(BUILTIN)}", argument="name"
        )
    if not 0 < scale <= 100:
        raise InvalidArgument(f"scale must be in (0, 100], got {scale}", argument="scale")
    return BUILTIN[name](scale)


__all__ = ["BUILTIN", "beyond_max_segments", "builtin_scenario", "drain_backlog", "low_throughput"]
