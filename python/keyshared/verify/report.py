"""``keyshared verify``'s outputs: the verdict as text, and the files of a run.

:func:`format_verdict` puts the verdict first (``PASS``, or ``FAIL`` with the first violation
by moment: its rule, key, messages, consumers, moment and the promise it breaks), then one
table per scenario. :func:`write_report` writes a run's folder: ``record.json`` (the record,
:func:`load_record` reads it back), ``verdict.json``, ``report.md``, ``timeline.png`` (one
lane per consumer: deliveries, membership changes, violations in red) and, for each failed
scenario, ``simulate-<scenario>.json``, the scenario as a file ``keyshared simulate`` runs
(:func:`simulate_scenario`). Every file is written under a temporary name and renamed, so a
reader never sees half of one.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import secrets
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keyshared._jsonfile import load_json
from keyshared._text import table
from keyshared.explain.stats import shown
from keyshared.verify.checker import RULES, ScenarioResult, Verdict, Violation
from keyshared.verify.record import Kind, RunRecord, ScenarioRecord

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: Violations a scenario's table lists; the rest are counted.
SHOWN_VIOLATIONS = 20

#: Time bins of a consumer's lane in the timeline: its deliveries are drawn one mark a bin
#: that holds any, so a million deliveries draw as fast as a thousand.
TIMELINE_BINS = 800

#: The simulator's tick (ms): a scenario's producer runs at least this long, so that its
#: Poisson arrivals have a tick to fall in.
_SIM_TICK_MS = 100

#: The events the timeline marks on a consumer's lane.
_MEMBERSHIP = frozenset({Kind.JOIN, Kind.LEAVE, Kind.STALL, Kind.RESUME})

#: Membership marks in the timeline, by name (a leave's by how): marker and color.
_MARKS = {
    "join": (">", "tab:green"),
    "close": ("s", "black"),
    "crash": ("D", "tab:purple"),
    "timeout": ("s", "tab:gray"),
    "stall": ("|", "tab:orange"),
    "resume": ("|", "tab:green"),
}


def load_record(path: str | Path) -> RunRecord:
    """The record in the JSON file ``path`` (``-``: standard input), as
    :meth:`RunRecord.dumps` wrote it; InvalidArgument naming the file or the field."""
    return RunRecord.from_json(load_json(path))


def run_start_ms(record: RunRecord) -> float:
    """When the run started, in ms since the epoch: its earliest scenario's first event
    (0.0 for a record without events)."""
    return min((s.events[0][1] for s in record.scenarios if s.events), default=0.0)


def iso_moment(ms: float) -> str:
    """``ms`` since the epoch as an ISO 8601 UTC time to the millisecond."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --- the text ------------------------------------------------------------------------------


def format_verdict(record: RunRecord, verdict: Verdict) -> str:
    """The verdict, then a table per scenario, as text for a terminal."""
    lines = [_headline(record, verdict)]
    if verdict.first is not None:
        lines += _first(record, verdict.first)
    if verdict.cause is not None:
        lines.append(f"  likely cause: {verdict.cause}")
    out = io.StringIO()
    out.write("\n".join(lines) + "\n")
    start = run_start_ms(record)
    for result in verdict.scenarios:
        out.write("\n")
        _scenario_table(result, start, out)
    return out.getvalue()


def _headline(record: RunRecord, verdict: Verdict) -> str:
    sent = sum(r.sent for r in verdict.scenarios)
    what = (
        f"{len(verdict.scenarios)} scenario(s), {sent:,} messages on {shown(record.topic, 80)}"
        f" against keyshared's model of {record.pulsar_version}"
    )
    if verdict.passed:
        return f"PASS: {what}: every rule held ({', '.join(RULES)})"
    broken = sum(sum(r.counts.values()) for r in verdict.scenarios)
    return f"FAIL: {what}: {broken:,} violation(s)"


def _first(record: RunRecord, v: Violation) -> list[str]:
    since = v.moment_ms - run_start_ms(record)
    ids = ", ".join(_message_id(m) for m in v.message_ids) or "-"
    return [
        f"  first      {v.rule} in scenario {shown(v.scenario)}",
        f"  key        {'-' if v.key is None else shown(v.key)}",
        f"  messages   {ids}"
        + (f" (send index {', '.join(f'#{i}' for i in v.indexes)})" if v.indexes else ""),
        f"  consumers  {', '.join(shown(c) for c in v.consumers) or '-'}",
        f"  moment     {iso_moment(v.moment_ms)} ({since:,.0f} ms since the run's start)",
        f"  rule       {v.rule}: {RULES[v.rule]}",
        f"  what       {v.detail}",
    ]


def _message_id(m: tuple[int, int, int]) -> str:
    """A message id as Pulsar's ``MessageId.toString`` writes it: ledger, entry, partition
    (-1 on a non-partitioned topic)."""
    partition, ledger, entry = m
    return f"{ledger}:{entry}:{partition}"


def _scenario_table(result: ScenarioResult, start: float, out: io.StringIO) -> None:
    out.write(f"scenario {shown(result.name)}: {'PASS' if result.passed else 'FAIL'}\n")
    table(
        (
            "sent",
            "delivered",
            "acked",
            "lost",
            "redelivered",
            "dups allowed",
            "dups unexpected",
            "matched/predicted",
            "held",
        ),
        [
            (
                result.sent,
                result.delivered,
                result.acked,
                result.lost,
                result.redelivered,
                result.duplicates_allowed,
                result.duplicates_unexpected,
                f"{result.matched}/{result.predicted}",
                result.held,
            )
        ],
        out,
    )
    if result.passed:
        return
    counts = ", ".join(f"{rule} {n:,}" for rule, n in result.counts.items() if n)
    out.write(f"violations: {counts}\n")
    table(
        ("ms", "rule", "key", "messages", "consumers", "what"),
        [
            (
                f"{v.moment_ms - start:,.0f}",
                v.rule,
                "-" if v.key is None else shown(v.key, 24),
                " ".join(_message_id(m) for m in v.message_ids) or "-",
                " ".join(shown(c, 24) for c in v.consumers) or "-",
                v.detail,
            )
            for v in result.violations[:SHOWN_VIOLATIONS]
        ],
        out,
    )
    more = sum(result.counts.values()) - min(SHOWN_VIOLATIONS, len(result.violations))
    if more > 0:
        out.write(f"... and {more:,} more\n")


def format_markdown(record: RunRecord, verdict: Verdict, files: Iterable[str] = ()) -> str:
    """``report.md``: what ran, the verdict's text, and the other files of the folder."""
    lines = [
        f"# keyshared verify: {'PASS' if verdict.passed else 'FAIL'}",
        "",
        f"- topic: `{record.topic}` ({record.partitions or 'not'} partitioned)",
        f"- checked against keyshared's model of Pulsar {record.pulsar_version}; the broker"
        f" reported {record.broker_version or 'no version'}",
        f"- allowOutOfOrderDelivery: {str(record.allow_out_of_order).lower()}",
        f"- seed: {record.seed}; ring points per consumer: {record.points}",
        "",
        "```text",
        format_verdict(record, verdict).rstrip("\n"),
        "```",
    ]
    named = list(files)
    if named:
        lines += ["", "Files:", "", *(f"- [{name}]({name})" for name in named)]
    return "\n".join(lines) + "\n"


# --- the simulator's scenario --------------------------------------------------------------


def simulate_scenario(record: RunRecord, scenario: ScenarioRecord) -> dict[str, Any]:
    """``scenario`` in the JSON form of :class:`keyshared.simulate.Scenario`, as faithfully
    as that form allows: one topic with a segment per partition and a bucket per consumer
    that was ever live at once (the classic ring's ranges become buckets), auto-scaling
    off; one producer of the scenario's keys (``count`` distinct keys of their common
    prefix) at its mean rate over the span it published in; each consumer by its label,
    joining and leaving when it did (ms from the scenario's start), stalling when it
    stalled, taking messages at the rate it received them and nacking the share it nacked.
    The simulator draws arrivals and keys at random from its seed (the record's), so it
    replays the scenario's shape, not its messages."""
    start = scenario.events[0][1] if scenario.events else 0.0
    offsets = [e[1] - start for e in scenario.events]
    publishes = [o for e, o in zip(scenario.events, offsets, strict=True) if e[0] == Kind.PUBLISH]
    first_ms = math.floor(min(publishes, default=0.0))
    stop_ms = max(first_ms + _SIM_TICK_MS, math.ceil(max(publishes, default=0.0)) + 1)
    duration_ms = max(stop_ms, math.ceil(max(offsets, default=0.0)) + 1)
    consumers = _simulated_consumers(scenario, start, duration_ms)
    keys = sorted({m.key for m in scenario.messages})
    rate = len(scenario.messages) / ((stop_ms - first_ms) / 1000)
    return {
        "name": f"verify-{scenario.name}",
        "description": (
            f"scenario {scenario.name} of a keyshared verify run on {record.topic}"
            f" ({len(scenario.messages)} messages over {len(keys)} keys), replayed by the"
            " simulator on a scalable topic: partitions as segments, consumers' hash ranges"
            " as buckets, arrivals at the run's mean rate"
        ),
        "seed": record.seed,
        "duration_ms": duration_ms,
        "topics": [
            {
                "name": f"verify-{scenario.name}",
                "layout": {
                    "segments": max(1, record.partitions),
                    "bucket_budget": max(1, record.partitions) * _most_live(scenario),
                },
                "policy": {"enabled": False},
                "producers": [
                    {
                        "name": "producer",
                        "rate_msg_s": rate,
                        "start_ms": first_ms,
                        "stop_ms": stop_ms,
                        "keys": {"count": max(1, len(keys)), "prefix": _key_prefix(keys)},
                    }
                ],
                "consumers": consumers,
            }
        ],
    }


def _most_live(scenario: ScenarioRecord) -> int:
    """The most consumers live at once in the scenario (at least 1)."""
    live = most = 0
    for e in scenario.events:
        if e[0] == Kind.JOIN:
            live += 1
            most = max(most, live)
        elif e[0] == Kind.LEAVE:
            live -= 1
    return max(1, most)


def _key_prefix(keys: list[str]) -> str:
    """The keys' common prefix without a trailing run of digits (``order-`` of
    ``order-1``, ``order-20``), or ``key-`` when they share none."""
    if not keys:
        return "key-"
    # The prefix all share is the one the first and last in sorted order share.
    low, high = min(keys), max(keys)
    shared = next(
        (n for n, (a, b) in enumerate(zip(low, high, strict=False)) if a != b),
        min(len(low), len(high)),
    )
    return re.sub(r"\d+$", "", low[:shared]) or "key-"


def _simulated_consumers(
    scenario: ScenarioRecord, start: float, duration_ms: int
) -> list[dict[str, Any]]:
    spans: dict[str, dict[str, Any]] = {}
    received: dict[str, int] = {}
    nacked: dict[str, int] = {}
    stalled: dict[str, float] = {}
    for e in scenario.events:
        kind, at = e[0], max(0.0, e[1] - start)
        if kind == Kind.JOIN:
            spans[e[2]] = {"name": e[2], "join_ms": math.floor(at), "stalls": []}
        elif kind == Kind.LEAVE:
            spans[e[2]]["leave_ms"] = max(spans[e[2]]["join_ms"] + 1, math.ceil(at))
        elif kind == Kind.DELIVER:
            received[e[2]] = received.get(e[2], 0) + 1
        elif kind == Kind.NACK:
            nacked[e[2]] = nacked.get(e[2], 0) + 1
        elif kind == Kind.STALL:
            stalled[e[2]] = at
        elif kind == Kind.RESUME and e[2] in stalled:
            began = stalled.pop(e[2])
            spans[e[2]]["stalls"].append(
                {"at_ms": math.floor(began), "for_ms": max(1, math.ceil(at - began))}
            )
    for label, began in stalled.items():
        spans[label]["stalls"].append({"at_ms": math.floor(began)})
    for label, span in spans.items():
        connected_s = (span.get("leave_ms", duration_ms) - span["join_ms"]) / 1000
        span["rate_msg_s"] = max(1.0, received.get(label, 0) / max(connected_s, 0.001))
        share = nacked.get(label, 0) / max(1, received.get(label, 0))
        span["nack_probability"] = min(0.99, share)
    return list(spans.values())


# --- the files -----------------------------------------------------------------------------


def write_report(directory: str | Path, record: RunRecord, verdict: Verdict) -> list[Path]:
    """Writes the run's folder ``directory`` (made if missing): ``record.json``,
    ``verdict.json``, ``timeline.png``, a ``simulate-<scenario>.json`` per failed scenario
    and ``report.md``, which names the others. Returns their paths, in that order. The
    timeline needs matplotlib (``keyshared[simulate]``)."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [
        _write(folder / "record.json", record.dumps()),
        _write(folder / "verdict.json", json.dumps(verdict.to_json(), indent=2) + "\n"),
        _write_with(folder / "timeline.png", lambda path: plot_timeline(record, verdict, path)),
    ]
    for scenario, result in zip(record.scenarios, verdict.scenarios, strict=True):
        if not result.passed:
            name = f"simulate-{_file_safe(scenario.name)}.json"
            data = simulate_scenario(record, scenario)
            paths.append(_write(folder / name, json.dumps(data, indent=2) + "\n"))
    markdown = format_markdown(record, verdict, [p.name for p in paths])
    paths.append(_write(folder / "report.md", markdown))
    return paths


def _file_safe(name: str) -> str:
    """``name`` as part of a file name: anything but letters, digits, ``.``, ``_`` and
    ``-`` becomes ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "scenario"


def _write(path: Path, text: str) -> Path:
    def write(temporary: Path) -> None:
        with open(temporary, "x", encoding="utf-8") as f:
            f.write(text)

    return _write_with(path, write)


def _write_with(path: Path, write: Callable[[Path], object]) -> Path:
    """Has ``write`` make the file under a hidden temporary name beside ``path`` (the same
    file system), then renames it over ``path``; a failure leaves ``path`` as it was."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


# --- the timeline --------------------------------------------------------------------------


def plot_timeline(record: RunRecord, verdict: Verdict, path: str | Path) -> None:
    """Writes the timeline PNG to ``path``: one lane per consumer (``scenario/label``, in
    the order they joined), its deliveries over seconds since the run's start, its joins,
    leaves (a mark for each of close, crash and timeout), stalls and resumes as marks, and
    every kept violation as a red cross on the lane of the consumer it names first; dotted
    lines mark where each scenario starts."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display is needed or wanted
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    start = run_start_ms(record)
    lanes = _lanes(record)
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.4 * max(1, len(lanes))))
    for scenario in record.scenarios:
        _draw_scenario(ax, scenario, lanes, start)
    _draw_violations(ax, verdict, lanes, start)
    ax.set_yticks(range(len(lanes)), [shown(f"{s}/{c}", 32) for s, c in lanes])
    ax.set_ylim(-1, max(1, len(lanes)))
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the run's start")
    handles = [
        Line2D([], [], marker="|", linestyle="", color="tab:blue", label="deliveries"),
        *(
            Line2D([], [], marker=m, linestyle="", color=c, label=name)
            for name, (m, c) in _MARKS.items()
        ),
        Line2D([], [], marker="X", linestyle="", color="red", label="violation"),
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    ax.set_title(_headline(record, verdict), loc="left", fontsize="small")
    fig.savefig(path, dpi=100, bbox_inches="tight", format="png")
    plt.close(fig)


def _lanes(record: RunRecord) -> dict[tuple[str, str], int]:
    lanes: dict[tuple[str, str], int] = {}
    for s in record.scenarios:
        for e in s.events:
            if e[0] == Kind.JOIN:
                lanes.setdefault((s.name, e[2]), len(lanes))
    return lanes


def _draw_scenario(
    ax: Axes, scenario: ScenarioRecord, lanes: dict[tuple[str, str], int], start: float
) -> None:
    import numpy as np

    if scenario.events:
        first = (scenario.events[0][1] - start) / 1000
        ax.axvline(first, color="grey", linestyle=":", linewidth=0.8)
        ax.annotate(shown(scenario.name, 24), (first, -0.6), fontsize="x-small", color="grey")
    deliveries: dict[str, list[float]] = {}
    for e in scenario.events:
        kind = e[0]
        if kind == Kind.DELIVER:
            deliveries.setdefault(e[2], []).append(e[1])
        elif kind in _MEMBERSHIP and (scenario.name, e[2]) in lanes:
            marker, color = _MARKS[e[3] if kind == Kind.LEAVE else kind]
            ax.plot([(e[1] - start) / 1000], [lanes[scenario.name, e[2]]], marker, color=color)
    for label, moments in deliveries.items():
        seconds = (np.asarray(moments) - start) / 1000
        counts, edges = np.histogram(seconds, bins=TIMELINE_BINS)
        shown_at = edges[:-1][counts > 0]
        lane = lanes.get((scenario.name, label))
        if lane is not None:
            ax.plot(shown_at, [lane] * len(shown_at), "|", color="tab:blue", markersize=8)


def _draw_violations(
    ax: Axes, verdict: Verdict, lanes: dict[tuple[str, str], int], start: float
) -> None:
    for result in verdict.scenarios:
        for v in result.violations:
            lane = next(
                (lanes[result.name, c] for c in v.consumers if (result.name, c) in lanes), None
            )
            x = (v.moment_ms - start) / 1000
            if lane is None:
                ax.axvline(x, color="red", linewidth=0.8, alpha=0.6)
            else:
                ax.plot([x], [lane], "X", color="red", markersize=8)


__all__ = [
    "SHOWN_VIOLATIONS",
    "TIMELINE_BINS",
    "format_markdown",
    "format_verdict",
    "iso_moment",
    "load_record",
    "plot_timeline",
    "run_start_ms",
    "simulate_scenario",
    "write_report",
]
