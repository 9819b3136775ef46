"""The driver half of the bulk-bucketing job: from the collected histogram to the report.

Everything here is pure and small (one entry per occupied hashB at most), so it is tested
without Spark: per segment and bucket load, skew, what the auto-scale policy would decide at
given rates and consumer counts, and traffic-balanced bucket boundaries with their skew.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from keyshared import AutoScalePolicy, TopicLayout, decide
from keyshared.scalable import (
    SegmentLoadSample,
    SegmentLoadStats,
    balanced_splits,
    hash_b_histogram,
    skew,
)
from keyshared.versions import SCALABLE_TOPICS
from spark_udfs.bucketing import Histogram, HotKey

# The subscription name the policy scenarios give their consumers.
SUBSCRIPTION = "sub"


@dataclass(frozen=True)
class Skew:
    """Heaviest over mean load (1.0 is even) and coefficient of variation (std / mean)."""

    max_over_mean: float
    cv: float


def skew_of(loads: Sequence[float] | npt.NDArray[Any]) -> Skew:
    """The skew of ``loads``; an empty or all-zero set of loads counts as even."""
    arr = np.asarray(loads, dtype=np.float64)
    mean = float(arr.mean()) if arr.size else 0.0
    return Skew(skew(arr), float(arr.std()) / mean if mean else 0.0)


@dataclass(frozen=True)
class Load:
    """Messages, bytes and distinct keys of a segment or bucket."""

    messages: int
    bytes: int
    keys: int


@dataclass(frozen=True)
class SegmentReport:
    segment_id: int
    hash_range: str
    bucket_count: int
    load: Load


@dataclass(frozen=True)
class BucketReport:
    segment_id: int
    bucket: int
    hash_range: str
    load: Load


@dataclass(frozen=True)
class Scenario:
    """What ``decide`` returns at ``msg_rate_in`` msg/s into the topic (spread over segments
    as the input's messages are) with one subscription of ``consumers`` STREAM consumers."""

    msg_rate_in: float
    consumers: int
    decision: dict[str, Any]


@dataclass(frozen=True)
class BalancedSegment:
    """A segment's traffic-balanced boundaries for ``bucket_count`` buckets, and the skew
    (heaviest / mean bucket) of its message load now and under them."""

    segment_id: int
    bucket_count: int
    current_splits: tuple[int, ...]
    balanced_splits: tuple[int, ...]
    skew_now: float
    skew_balanced: float
    loads_balanced: tuple[float, ...]


@dataclass(frozen=True)
class Balancing:
    """Per-segment balanced boundaries, the layout that applies them, and the skew over every
    bucket of the topic now and with them."""

    segments: tuple[BalancedSegment, ...]
    buckets_now: Skew
    buckets_balanced: Skew
    layout: dict[str, Any] | None


@dataclass(frozen=True)
class Report:
    source: str
    layout: dict[str, Any]
    totals: Load
    segments: tuple[SegmentReport, ...]
    buckets: tuple[BucketReport, ...]
    skew: dict[str, Skew]
    hot_keys: tuple[HotKey, ...]
    scenarios: tuple[Scenario, ...]
    balancing: Balancing
    timings: dict[str, float] = field(default_factory=dict)
    #: What routed the keys: "jvm" (the native functions) or "arrow" (the Arrow UDFs).
    engine: str = "arrow"
    #: The migration audit (``MigrationAudit.to_dict``), when the run asked for one.
    migration: dict[str, Any] | None = None
    #: The Pulsar release whose routing the run followed: "master" or "5.0.0-M1".
    pulsar_version: str = SCALABLE_TOPICS.default


def _load(hist: Histogram, rows: npt.NDArray[np.bool_]) -> Load:
    return Load(
        messages=int(hist.messages[rows].sum()),
        bytes=int(hist.bytes[rows].sum()),
        keys=int(hist.keys[rows].sum()),
    )


def segment_loads(layout: TopicLayout, hist: Histogram) -> tuple[SegmentReport, ...]:
    """Every active segment's load, idle ones included, in range order."""
    return tuple(
        SegmentReport(
            s.segment_id,
            s.hash_range.to_hex(),
            s.bucket_count,
            _load(hist, hist.segment_id == s.segment_id),
        )
        for s in layout.active_segments()
    )


def bucket_loads(layout: TopicLayout, hist: Histogram) -> tuple[BucketReport, ...]:
    """Every bucket of every active segment, idle ones included: skew must count them."""
    out = []
    for s in layout.active_segments():
        in_segment = hist.segment_id == s.segment_id
        for index, bucket_range in enumerate(s.bucket_ranges()):
            rows = in_segment & (hist.bucket == index)
            out.append(BucketReport(s.segment_id, index, bucket_range.to_hex(), _load(hist, rows)))
    return tuple(out)


def skews(segments: Sequence[SegmentReport], buckets: Sequence[BucketReport]) -> dict[str, Skew]:
    """Skew of messages and bytes across segments and across all buckets."""
    return {
        "segment_messages": skew_of([s.load.messages for s in segments]),
        "segment_bytes": skew_of([s.load.bytes for s in segments]),
        "bucket_messages": skew_of([b.load.messages for b in buckets]),
        "bucket_bytes": skew_of([b.load.bytes for b in buckets]),
    }


def policy_scenarios(
    layout: TopicLayout,
    segments: Sequence[SegmentReport],
    msg_rates: Sequence[float],
    consumer_counts: Sequence[int],
    *,
    fanout: float,
    policy: AutoScalePolicy,
    now_ms: int,
) -> tuple[Scenario, ...]:
    """``decide`` at each rate and consumer count, with no recent split, merge or rebucket.

    Each segment gets the share of the rate its messages have in the input, bytes at its
    own mean message size, and ``fanout`` times both going out. The samples are a merge
    window old, as steady rates would be, so merges are considered too.
    """
    messages = sum(s.load.messages for s in segments)
    sampled_at = max(0, now_ms - policy.merge_window_ms)
    out = []
    for rate in msg_rates:
        loads = {}
        for s in segments:
            share = s.load.messages / messages if messages else 1 / len(segments)
            size = s.load.bytes / s.load.messages if s.load.messages else 0.0
            msg_in = rate * share
            stats = SegmentLoadStats(msg_in, msg_in * size, msg_in * fanout, msg_in * size * fanout)
            loads[s.segment_id] = SegmentLoadSample(stats, sampled_at)
        for consumers in consumer_counts:
            decision = decide(layout, loads, {SUBSCRIPTION: consumers}, policy, now_ms)
            out.append(Scenario(rate, consumers, decision.to_dict()))
    return tuple(out)


def hash_b_weights(hist: Histogram, segment_id: int) -> npt.NDArray[np.float64]:
    """The segment's messages per hashB value, all 65,536 of them."""
    rows = hist.segment_id == segment_id
    return hash_b_histogram(hist.bucket_hash[rows], weights=hist.messages[rows])


def balancing(
    layout: TopicLayout,
    hist: Histogram,
    buckets: Sequence[BucketReport],
    *,
    bucket_count: int | None,
    now_ms: int,
) -> Balancing:
    """Traffic-balanced boundaries for every active segment (``bucket_count`` buckets each,
    or as many as it has), and the layout that rebuckets the segments whose boundaries move."""
    chosen = []
    balanced_layout = layout
    for s in layout.active_segments():
        n = bucket_count or s.bucket_count
        result = balanced_splits(hash_b_weights(hist, s.segment_id), n, s.bucket_splits)
        chosen.append(
            BalancedSegment(
                segment_id=s.segment_id,
                bucket_count=n,
                current_splits=s.bucket_splits,
                balanced_splits=result.bucket_splits,
                skew_now=result.skew_before,
                skew_balanced=result.skew_after,
                loads_balanced=result.loads_after,
            )
        )
        if result.bucket_splits != s.bucket_splits:
            balanced_layout = balanced_layout.rebucket_segment(
                s.segment_id, n, now_ms, bucket_splits=result.bucket_splits
            )
    return Balancing(
        segments=tuple(chosen),
        buckets_now=skew_of([b.load.messages for b in buckets]),
        buckets_balanced=skew_of([x for c in chosen for x in c.loads_balanced]),
        layout=None if balanced_layout is layout else balanced_layout.to_dict(),
    )


def build_report(
    source: str,
    layout: TopicLayout,
    hist: Histogram,
    hot_keys: Sequence[HotKey],
    *,
    msg_rates: Sequence[float],
    consumer_counts: Sequence[int],
    fanout: float,
    policy: AutoScalePolicy,
    balance_buckets: int | None,
    now_ms: int,
    timings: dict[str, float],
    engine: str,
    migration: dict[str, Any] | None = None,
    pulsar_version: str = SCALABLE_TOPICS.default,
) -> Report:
    """The whole report of one run, whose keys ``pulsar_version`` routed (on 5.0.0-M1 the
    layout's segments are one bucket each: see ``spark_udfs.job.release_layout``)."""
    segments = segment_loads(layout, hist)
    buckets = bucket_loads(layout, hist)
    return Report(
        source=source,
        layout=layout.layout_response(pulsar_version=pulsar_version),
        totals=_load(hist, np.ones(len(hist.messages), dtype=np.bool_)),
        segments=segments,
        buckets=buckets,
        skew=skews(segments, buckets),
        hot_keys=tuple(hot_keys),
        scenarios=policy_scenarios(
            layout,
            segments,
            msg_rates,
            consumer_counts,
            fanout=fanout,
            policy=policy,
            now_ms=now_ms,
        ),
        balancing=balancing(layout, hist, buckets, bucket_count=balance_buckets, now_ms=now_ms),
        timings=timings,
        engine=engine,
        migration=migration,
        pulsar_version=pulsar_version,
    )
