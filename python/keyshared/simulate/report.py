"""What a run produced: a JSON-ready summary, its text form, and PNG plots.

The summary depends on the scenario and the seed only (no wall-clock time), so the same
seed gives a byte-identical ``summary.json``. Times are ms of virtual time; utilization is
busy time over connected time (0..1).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from keyshared.simulate.engine import SimulationResult
from keyshared.simulate.topic import DrainRecord, TopicSim

_SERIES = (
    "backlog",
    "busy_consumers",
    "owning_consumers",
    "connected_consumers",
    "active_segments",
    "readable_buckets",
    "active_buckets",
    "withheld_buckets",
)


def summarize(result: SimulationResult, scale: float | None = None) -> dict[str, Any]:
    """The run as one JSON-ready dict (see the Simulator section of docs/guides/broker.md)."""
    topics = result.topics
    series = _series(result)
    return {
        "scenario": _scenario(result, scale),
        "outcome": _outcome(result, series),
        "messages": _messages(topics),
        "latency_ms": _latency(topics),
        "consumers": _consumers(result, series),
        "drains": [_drain(t, d) for t in topics for d in t.drains if d.backlog_at_seal > 0],
        "decisions": [
            {"topic": t.name, **record.to_dict()}
            for t in topics
            for record in t.controller.decisions
        ],
        "handoffs": _handoffs(topics),
        "topics": [_topic(t) for t in topics],
        "invariants": _invariants(topics),
        "series": series,
    }


def _scenario(result: SimulationResult, scale: float | None) -> dict[str, Any]:
    scenario = result.scenario
    return {
        "name": scenario.name,
        "description": scenario.description,
        "seed": result.seed,
        "scale": scale,
        "topics": len(result.topics),
        "duration_ms": scenario.duration_ms,
        "horizon_ms": scenario.horizon_ms,
        "tick_ms": scenario.tick_ms,
    }


def _outcome(result: SimulationResult, series: dict[str, list[int]]) -> dict[str, Any]:
    """The backlog's peak, and when it was cleared: the first sample after the peak at or
    below 1% of it (while producers run, what is in flight never lets it reach 0)."""
    backlog, times = series["backlog"], series["t_ms"]
    peak = max(range(len(backlog)), key=lambda i: (backlog[i], -i), default=None)
    cleared = None
    if peak is not None:
        low = backlog[peak] // 100
        cleared = next((times[i] for i in range(peak, len(backlog)) if backlog[i] <= low), None)
    return {
        "ended": result.ended,
        "end_ms": result.end_ms,
        "backlog_peak_messages": backlog[peak] if peak is not None else 0,
        "backlog_peak_at_ms": times[peak] if peak is not None else None,
        "backlog_cleared_at_ms": cleared,
        "time_to_drain_ms": cleared - times[peak]
        if cleared is not None and peak is not None
        else None,
    }


def _messages(topics: Sequence[TopicSim]) -> dict[str, int]:
    """Message counts. ``dropped`` and ``dead_lettered`` count what the poison policy gave up
    on (a late copy may still have been processed); ``given_up_unprocessed`` those never
    processed, of which the dropped ones are ``lost``. Always ``produced == processed +
    given_up_unprocessed + backlog_at_end``."""
    counts: Counter[str] = Counter()
    for topic in topics:
        counts["produced"] += topic.store.messages
        counts["produced_bytes"] += topic.store.bytes
        for log in topic.store.logs.values():
            counts["entries"] += len(log)
            for entry in log:
                n = entry.count
                if entry.processed:
                    counts["processed"] += n
                    counts["processed_twice_or_more"] += n * (entry.processed > 1)
                elif entry.given_up is not None:
                    counts["given_up_unprocessed"] += n
                    counts["lost"] += n * (entry.given_up == "drop")
                else:
                    counts["backlog_at_end"] += n
                if entry.given_up == "drop":
                    counts["dropped"] += n
                elif entry.given_up == "dead_letter":
                    counts["dead_lettered"] += n
    keys = (
        "produced",
        "produced_bytes",
        "entries",
        "processed",
        "processed_twice_or_more",
        "dropped",
        "dead_lettered",
        "given_up_unprocessed",
        "lost",
        "backlog_at_end",
    )
    return {k: counts[k] for k in keys}


def _latency(topics: Sequence[TopicSim]) -> dict[str, float | None]:
    """Per message, from being stored to being first processed (the end of its entry's
    processing): percentiles over the messages processed, in ms."""
    pairs = [
        (entry.processed_us - entry.stored_us, entry.count)
        for topic in topics
        for log in topic.store.logs.values()
        for entry in log
        if entry.processed_us >= 0
    ]
    if not pairs:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    latency, weight = np.array(pairs, dtype=np.int64).T
    order = np.argsort(latency, kind="stable")
    latency, cumulative = latency[order], np.cumsum(weight[order])
    out: dict[str, float | None] = {}
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        i = int(np.searchsorted(cumulative, q * cumulative[-1], side="left"))
        out[name] = int(latency[i]) / 1000
    out["max"] = int(latency[-1]) / 1000
    return out


def _consumers(result: SimulationResult, series: dict[str, list[int]]) -> dict[str, Any]:
    end_us = result.end_ms * 1000
    rows: list[dict[str, Any]] = []
    busy_total = connected_total = 0
    for topic in result.topics:
        for consumer in topic.consumers.values():
            connected = consumer.connected_us(end_us)
            busy = consumer.busy_total_us(end_us)
            busy_total += busy
            connected_total += connected
            rows.append(
                {
                    "topic": topic.name,
                    "name": consumer.name,
                    "consumer_id": consumer.consumer_id,
                    "joined_ms": _ms(consumer.joined_us),
                    "left_ms": _ms(consumer.left_us),
                    "busy_ms": busy / 1000,
                    "utilization": round(busy / connected, 4) if connected else None,
                    "processed_messages": consumer.processed_messages,
                    "nacks": consumer.nacks,
                }
            )
    used = [r["utilization"] for r in rows if r["utilization"] is not None]
    return {
        "count": len(rows),
        "mean_utilization": round(sum(used) / len(used), 4) if used else None,
        "fleet_utilization": round(busy_total / connected_total, 4) if connected_total else None,
        "peak_busy": max(series["busy_consumers"], default=0),
        "peak_owning": max(series["owning_consumers"], default=0),
        "per_consumer": rows,
    }


def _ms(us: int | None) -> float | None:
    return None if us is None else us / 1000


def _drain(topic: TopicSim, record: DrainRecord) -> dict[str, Any]:
    waits = record.handoff_waits_ms
    start = max(record.sealed_at_ms, record.readable_at_ms)
    return {
        "topic": topic.name,
        "segment_id": record.segment_id,
        "bucket_count": record.bucket_count,
        "sealed_at_ms": record.sealed_at_ms,
        "readable_at_ms": record.readable_at_ms,
        "drained_at_ms": record.drained_at_ms,
        "drain_ms": record.drained_at_ms - start,
        "backlog_at_seal": record.backlog_at_seal,
        "messages": record.messages,
        "max_parallel_consumers": record.max_parallel_consumers,
        "handoff_max_wait_ms": max(waits, default=None),
    }


def _handoffs(topics: Sequence[TopicSim]) -> dict[str, Any]:
    waits = [w for t in topics for d in t.drains for w in d.handoff_waits_ms]
    waits += [w / 1000 for t in topics for d in t.dispatchers.values() for w in d.handoff_waits_us]
    return {
        "bucket_moves": sum(t.moves for t in topics),
        "withheld": len(waits),
        "max_wait_ms": max(waits, default=None),
        "mean_wait_ms": round(sum(waits) / len(waits), 3) if waits else None,
    }


def _topic(topic: TopicSim) -> dict[str, Any]:
    layout = topic.controller.layout
    return {
        "name": topic.name,
        "final_layout": {
            "epoch": layout.epoch,
            "active_segments": len(layout.active_segments()),
            "buckets": layout.total_bucket_count,
            "segments_created": layout.next_segment_id,
        },
        "decisions": len(topic.controller.decisions),
        "idle_periodic_evaluations": topic.controller.idle_evaluations,
        "last_idle_reason": topic.controller.last_idle_reason,
    }


def _invariants(topics: Sequence[TopicSim]) -> dict[str, Any]:
    totals: Counter[str] = Counter()
    for topic in topics:
        totals.update(vars(topic.checker.counts))
    return {"violations": 0, "checks": dict(sorted(totals.items()))}


def _series(result: SimulationResult) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {"t_ms": list(result.sample_times_ms)}
    for name in _SERIES:
        columns = [getattr(t.series, name) for t in result.topics]
        out[name] = [sum(values) for values in zip(*columns, strict=True)]
    return out


# --- output -------------------------------------------------------------------------------


def to_json(summary: dict[str, Any]) -> str:
    """The summary as JSON, keys sorted, so that equal runs give equal bytes."""
    return json.dumps(summary, indent=2, sort_keys=True) + "\n"


def render_text(summary: dict[str, Any]) -> str:
    """A few lines for people: outcome, messages, consumers, drains and decisions."""
    s, o, m, c, lat = (
        summary[k] for k in ("scenario", "outcome", "messages", "consumers", "latency_ms")
    )
    lines = [
        f"scenario {s['name']} (seed {s['seed']}"
        + (f", scale {s['scale']:g}" if s["scale"] is not None else "")
        + f", {s['topics']} topic(s)): {o['ended']} at {_sec(o['end_ms'])} of virtual time",
        f"messages: {m['produced']:,} produced, {m['processed']:,} processed"
        f" ({m['processed_twice_or_more']:,} more than once after redelivery),"
        f" {m['dropped']:,} dropped ({m['lost']:,} of them lost),"
        f" {m['dead_lettered']:,} dead-lettered, {m['backlog_at_end']:,} left",
        f"backlog: peak {o['backlog_peak_messages']:,} msgs at {_sec(o['backlog_peak_at_ms'])},"
        f" cleared {_after(o['time_to_drain_ms'])}",
        f"latency from store to processing: p50 {_sec(lat['p50'])}, p99 {_sec(lat['p99'])},"
        f" max {_sec(lat['max'])}",
        f"consumers: {c['count']}, peak {c['peak_busy']} busy at once,"
        f" mean utilization {_pct(c['mean_utilization'])}"
        f" (fleet {_pct(c['fleet_utilization'])})",
    ]
    h = summary["handoffs"]
    lines.append(
        f"hand-offs: {h['bucket_moves']} bucket moves, {h['withheld']} withheld from the new"
        f" owner (longest {_ms_text(h['max_wait_ms'])})"
    )
    drains = summary["drains"]
    if drains:
        lines.append("sealed segments drained (backlog at seal, time, most consumers at once):")
        for d in drains[:12]:
            lines.append(
                f"  {d['topic']} segment {d['segment_id']} ({d['bucket_count']} bucket(s)):"
                f" {d['backlog_at_seal']:,} msgs in {_sec(d['drain_ms'])},"
                f" {d['max_parallel_consumers']} consumer(s)"
            )
        if len(drains) > 12:
            lines.append(f"  ... and {len(drains) - 12} more")
    lines.extend(_decision_lines(summary))
    checks = summary["invariants"]["checks"]
    lines.append(
        f"invariants held: {checks['deliveries']:,} deliveries, {checks['processings']:,}"
        f" processings, {checks['cursor_moves'] + checks['checkpoint_moves']:,} cursor moves"
        " checked"
    )
    return "\n".join(lines) + "\n"


def _decision_lines(summary: dict[str, Any]) -> list[str]:
    decisions = [d for d in summary["decisions"] if d["action"] != "none"]
    if summary["scenario"]["topics"] > 1:
        kinds = Counter((d["action"], d["reason"]) for d in decisions)
        return ["decisions (all topics):"] + [
            f"  {n} x {action} ({reason})" for (action, reason), n in sorted(kinds.items())
        ]
    lines = ["decisions:"]
    for d in decisions:
        detail = {k: v for k, v in d.items() if k not in _DECISION_META}
        text = " ".join(f"{k}={_short(v)}" for k, v in detail.items())
        lines.append(
            f"  {_sec(d['at_ms']):>8}  {d['action']} {text} ({d['reason']}, {d['trigger']})"
            f" -> {d['active_segments']} segment(s), {d['buckets']} bucket(s)"
        )
    idle = [t["last_idle_reason"] for t in summary["topics"] if t["last_idle_reason"]]
    if idle:
        lines.append(f"  last NoAction: {idle[0]}")
    return lines


_DECISION_META = frozenset(
    {"topic", "at_ms", "trigger", "action", "reason", "active_segments", "buckets"}
)


def _short(value: object) -> str:
    """A value for a line of text: long lists are cut down to their ends and length."""
    if isinstance(value, list) and len(value) > 8:
        return f"[{value[0]}, {value[1]}, ..., {value[-1]}] ({len(value)})"
    return str(value)


def _sec(ms: float | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f} s"


def _after(ms: float | None) -> str:
    return "never" if ms is None else f"{ms / 1000:.1f} s later"


def _ms_text(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:.0f} ms"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def write_plots(summary: dict[str, Any], out_dir: Path) -> list[Path]:
    """``backlog.png`` (backlog over time, layout decisions marked), ``parallelism.png``
    (busy and owning consumers against readable buckets and active segments) and
    ``utilization.png`` (each consumer's utilization)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    series = summary["series"]
    seconds = [t / 1000 for t in series["t_ms"]]
    title = summary["scenario"]["name"]
    paths = []

    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.plot(seconds, series["backlog"], color="tab:red", label="backlog (messages)")
    for d in summary["decisions"]:
        if d["action"] != "none":
            ax.axvline(d["at_ms"] / 1000, color="grey", alpha=0.3, linewidth=0.8)
    ax.set(xlabel="virtual time (s)", ylabel="messages", title=f"{title}: backlog")
    ax.legend(loc="upper right")
    paths.append(_save(fig, out_dir / "backlog.png"))

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for name, style in (
        ("busy_consumers", "-"),
        ("owning_consumers", "--"),
        ("readable_buckets", ":"),
        ("active_segments", "-."),
    ):
        ax.step(seconds, series[name], style, where="post", label=name.replace("_", " "))
    ax.set(xlabel="virtual time (s)", ylabel="count", title=f"{title}: parallelism")
    ax.legend(loc="upper left")
    paths.append(_save(fig, out_dir / "parallelism.png"))

    rows = summary["consumers"]["per_consumer"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    values = sorted((r["utilization"] or 0.0) for r in rows)
    ax.bar(range(len(values)), values, color="tab:blue")
    ax.set(
        xlabel="consumers (sorted)",
        ylabel="busy / connected",
        ylim=(0, 1),
        title=f"{title}: consumer utilization",
    )
    paths.append(_save(fig, out_dir / "utilization.png"))
    return paths


def _save(fig: Any, path: Path) -> Path:
    from matplotlib import pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_outputs(summary: dict[str, Any], out_dir: Path, *, plots: bool = True) -> list[Path]:
    """Writes ``summary.json`` and, with ``plots``, the PNGs into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "summary.json"
    path.write_text(to_json(summary), encoding="utf-8")
    return [path, *(write_plots(summary, out_dir) if plots else [])]


__all__ = ["render_text", "summarize", "to_json", "write_outputs", "write_plots"]
