"""The bulk-bucketing report as JSON (everything), Markdown (for people) and a PNG chart, and
with a migration audit its heatmap.

Every file is written whole or not at all (:func:`write_atomically`): a run killed while it
writes leaves no partial report under a final name.
"""

import dataclasses
import io
import json
import os
import secrets
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from spark_udfs.report import Load, Report, Scenario, Skew

# Markdown stays readable; the JSON has every bucket and split.
MAX_TABLE_ROWS = 64
MAX_SPLITS_SHOWN = 8
LOAD_HEADERS = ("messages", "share", "bytes", "keys")


def to_json(report: Report) -> str:
    return json.dumps(dataclasses.asdict(report), indent=2, ensure_ascii=False) + "\n"


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}%" if whole else "-"


def _skew(s: Skew) -> str:
    return f"{s.max_over_mean:.2f}x max/mean, CV {s.cv:.2f}"


def _splits(splits: Sequence[int]) -> str:
    shown = ", ".join(f"{x:04x}" for x in splits[:MAX_SPLITS_SHOWN])
    more = len(splits) - MAX_SPLITS_SHOWN
    return (shown + (f", ... (+{more})" if more > 0 else "")) or "(one bucket)"


def _decision(s: Scenario) -> str:
    d = s.decision
    action = d["action"]
    if action == "split":
        return f"split segment {d['segment_id']}"
    if action == "merge":
        return f"merge segments {d['segment_id_1']} and {d['segment_id_2']}"
    if action == "rebucket":
        ids = ", ".join(str(i) for i in d["segment_ids"])
        return f"rebucket segment(s) {ids} to {d['bucket_count']} buckets"
    return "no action"


def _capped(rows: list[list[object]], what: str) -> tuple[list[list[object]], list[str]]:
    if len(rows) <= MAX_TABLE_ROWS:
        return rows, []
    return rows[:MAX_TABLE_ROWS], [
        "",
        f"({len(rows) - MAX_TABLE_ROWS} more {what} in report.json)",
    ]


def _load_cells(load: Load, total: int) -> list[object]:
    return [f"{load.messages:,}", _pct(load.messages, total), f"{load.bytes:,}", f"{load.keys:,}"]


def _key_cell(key: str | None) -> str:
    if key is None:
        return "(null)"
    # A key may hold anything; keep it on one line and out of the table syntax.
    text = key.replace("|", "\\|").replace("`", "'")
    return f"`{' '.join(text.splitlines())}`" if text else "(empty)"


def _overview(report: Report) -> list[str]:
    t = report.totals
    return [
        "# Key_Shared bulk bucketing report",
        "",
        f"- Input: {report.source}",
        f"- Messages: {t.messages:,}; bytes: {t.bytes:,}; distinct keys: {t.keys:,}",
        f"- Layout: epoch {report.layout['epoch']}, {len(report.segments)} active segments, "
        f"{len(report.buckets)} buckets",
        f"- Routing engine: {report.engine}; routed as Pulsar {report.pulsar_version}",
    ]


def _skew_section(report: Report) -> list[str]:
    rows = [
        [across, _skew(report.skew[f"{part}_messages"]), _skew(report.skew[f"{part}_bytes"])]
        for across, part in (("segments", "segment"), ("buckets", "bucket"))
    ]
    return ["## Skew", "", *_table(["across", "messages", "bytes"], rows)]


def _load_sections(report: Report) -> list[str]:
    total = report.totals.messages
    segments = [
        [s.segment_id, s.hash_range, s.bucket_count, *_load_cells(s.load, total)]
        for s in report.segments
    ]
    buckets, note = _capped(
        [
            [b.segment_id, b.bucket, b.hash_range, *_load_cells(b.load, total)]
            for b in report.buckets
        ],
        "buckets",
    )
    return [
        "## Segments",
        "",
        *_table(["segment", "hash range", "buckets", *LOAD_HEADERS], segments),
        "",
        "## Buckets",
        "",
        *_table(["segment", "bucket", "hashB range", *LOAD_HEADERS], buckets),
        *note,
    ]


def _hot_keys_section(report: Report) -> list[str]:
    total = report.totals.messages
    rows = [
        [
            _key_cell(k.key),
            f"{k.messages:,}",
            _pct(k.messages, total),
            f"{k.bytes:,}",
            k.segment_id,
            k.bucket,
        ]
        for k in report.hot_keys
    ]
    headers = ["key", "messages", "share", "bytes", "segment", "bucket"]
    return ["## Hottest keys", "", *_table(headers, rows)]


def _policy_section(report: Report) -> list[str]:
    rows = [
        [f"{s.msg_rate_in:,.0f}", s.consumers, _decision(s), s.decision["reason"]]
        for s in report.scenarios
    ]
    return [
        "## What the auto-scale policy would decide",
        "",
        "Each rate is spread over the segments as the input's messages are, bytes at each "
        "segment's mean message size; one subscription with the given STREAM consumers.",
        "",
        *_table(["msg/s in", "consumers", "decision", "reason"], rows),
    ]


def _balancing_section(report: Report) -> list[str]:
    b = report.balancing
    rows = [
        [
            s.segment_id,
            s.bucket_count,
            f"{s.skew_now:.2f}",
            f"{s.skew_balanced:.2f}",
            _splits(s.balanced_splits),
        ]
        for s in b.segments
    ]
    headers = ["segment", "buckets", "skew now", "skew balanced", "balanced splits (hashB)"]
    lines = [
        "## Traffic-balanced bucket boundaries",
        "",
        f"Bucket skew across the topic: now {_skew(b.buckets_now)}; "
        f"balanced {_skew(b.buckets_balanced)}.",
        "",
        *_table(headers, rows),
    ]
    if b.layout is not None:
        lines += ["", "The layout that applies them is in balanced-layout.json."]
    return lines


def _amount(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def _migration_section(report: Report) -> list[str]:
    a = report.migration
    if a is None:
        return []
    what = "segments" if a["target_kind"] == "layout" else "partitions"
    total = a["total_traffic"]
    columns, note = _capped_columns(a["target_labels"])
    rows = [
        [
            p,
            f"{sum(a['keys'][p]):,}",
            _amount(sum(a["traffic"][p])),
            _pct(a["at_risk_traffic_by_partition"][p], sum(a["traffic"][p])),
            *(f"{100 * x:.1f}%" for x in a["traffic_shares"][p][: len(columns)]),
        ]
        for p in range(a["num_partitions"])
    ]
    sample = ", ".join(_key_cell(k) for k in a["at_risk_sample"]) or "(none)"
    return [
        "## Migration audit",
        "",
        f"From {a['num_partitions']} partitions placed by `{a['source']}` to "
        f"{len(a['target_ids'])} {what}. Each row: a source partition's messages, the share "
        "of them at risk, and the share going to each target (migration.png draws it).",
        "",
        *_table(["partition", "keys", "messages", "at risk", *columns], rows),
        *note,
        "",
        f"- Unkeyed (no fixed partition, not in the table): {a['unkeyed_keys']:,} keys, "
        f"{_amount(a['unkeyed_traffic'])} messages",
        f"- Order at risk: {a['at_risk_keys']:,} keys, {_amount(a['at_risk_traffic'])} messages "
        f"({_pct(a['at_risk_traffic'], total)}): {a['risk_description']}",
        f"- Busiest keys at risk: {sample}",
    ]


def _capped_columns(labels: Sequence[str]) -> tuple[list[str], list[str]]:
    if len(labels) <= MAX_SPLITS_SHOWN * 2:
        return list(labels), []
    shown = MAX_SPLITS_SHOWN * 2
    return list(labels[:shown]), ["", f"({len(labels) - shown} more targets in report.json)"]


def _timings_section(report: Report) -> list[str]:
    rows = [[step, f"{seconds:.1f}"] for step, seconds in report.timings.items()]
    return ["## Timings", "", *_table(["step", "seconds"], rows)] if rows else []


def to_markdown(report: Report) -> str:
    sections = (
        _overview,
        _skew_section,
        _load_sections,
        _hot_keys_section,
        _policy_section,
        _balancing_section,
        _migration_section,
        _timings_section,
    )
    lines = [line for section in sections for line in (*section(report), "")]
    return "\n".join(lines).rstrip("\n") + "\n"


def write_atomically(path: Path, data: str | bytes) -> None:
    """Writes ``data`` (text as UTF-8) to ``path`` so that a reader sees the file that was
    there before, or none, until ``path`` holds all of ``data``, never part of it.

    The bytes go to a temporary file beside ``path`` (``.NAME.PID.RANDOM.tmp``, hidden, in the
    same folder so that the rename stays within one file system), which is flushed to disk
    and renamed over ``path`` (``os.replace``, atomic on POSIX). A process killed before the
    rename leaves that temporary file behind and ``path`` as it was.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # "x" creates with the umask's permissions, as a plain write does (mkstemp would give 0600).
    mode, encoding = ("x", "utf-8") if isinstance(data, str) else ("xb", None)
    try:
        with open(temporary, mode, encoding=encoding) as f:
            f.write(data)
            f.flush()
            # Without it a machine crash could rename a file whose bytes never reached disk.
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def write_chart(report: Report, path: Path) -> None:
    """Messages per bucket now (coloured by segment) and under balanced boundaries."""
    now = np.array([b.load.messages for b in report.buckets], dtype=np.float64)
    balanced = np.array(
        [x for s in report.balancing.segments for x in s.loads_balanced], dtype=np.float64
    )
    colours = colormaps["tab10"]
    segment_ids = [s.segment_id for s in report.segments]
    colour_of = {sid: colours(i % 10) for i, sid in enumerate(segment_ids)}
    # A bare Figure draws without pyplot's global state or a display backend.
    fig = Figure(figsize=(11, 7), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharey=True)
    panels = [
        (
            top,
            now,
            [colour_of[b.segment_id] for b in report.buckets],
            f"Messages per bucket now: {_skew(report.balancing.buckets_now)}",
        ),
        (
            bottom,
            balanced,
            [colour_of[s.segment_id] for s in report.balancing.segments for _ in s.loads_balanced],
            f"With traffic-balanced boundaries: {_skew(report.balancing.buckets_balanced)}",
        ),
    ]
    for axes, loads, colour, title in panels:
        # Thin gaps tell neighbouring buckets apart until there are too many to see anyway.
        edge = "white" if len(loads) <= 256 else "none"
        axes.bar(np.arange(len(loads)), loads, color=colour, width=1.0, edgecolor=edge, lw=0.5)
        if len(loads):
            axes.axhline(float(loads.mean()), color="black", linewidth=1, linestyle="--")
        axes.set_title(title, fontsize=10)
        axes.set_ylabel("messages")
        axes.set_xlim(-0.5, max(len(loads), 1) - 0.5)
    bottom.set_xlabel("bucket (segments in range order, one colour each; dashed: mean)")
    fig.suptitle(f"Key_Shared bucketing: {report.totals.messages:,} messages")
    write_atomically(path, _png(fig))


def write_migration_chart(audit: dict[str, Any], path: Path) -> None:
    """A heatmap of each source partition's traffic share per target, with the share of
    each partition's traffic at risk beside its row."""
    shares = np.array(audit["traffic_shares"], dtype=np.float64)
    rows, columns = shares.shape
    fig = Figure(
        figsize=(min(4 + 0.5 * columns, 20), min(2 + 0.4 * rows, 16)), layout="constrained"
    )
    axes = fig.subplots()
    image = axes.imshow(shares, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    # Cell values stay legible up to about 16 x 16.
    if rows * columns <= 256:
        for (r, c), share in np.ndenumerate(shares):
            colour = "black" if share > 0.6 else "white"
            axes.text(c, r, f"{share:.0%}", ha="center", va="center", fontsize=7, color=colour)
    traffic = np.array(audit["traffic"], dtype=np.float64).sum(axis=1)
    at_risk = np.array(audit["at_risk_traffic_by_partition"], dtype=np.float64)
    risk = np.divide(at_risk, traffic, out=np.zeros(rows), where=traffic > 0)
    axes.set_yticks(range(rows), [f"{p}  ({r:.0%} at risk)" for p, r in enumerate(risk)])
    labels = audit["target_labels"]
    axes.set_xticks(range(columns), labels, rotation=90 if columns > 8 else 0, fontsize=8)
    what = "segment" if audit["target_kind"] == "layout" else "partition"
    axes.set_xlabel(f"target {what}")
    axes.set_ylabel(f"source partition ({audit['source']})")
    fig.colorbar(image, ax=axes, label="share of the source partition's messages")
    fig.suptitle(
        f"Migration: {audit['at_risk_keys']:,} keys at risk ({audit['risk']})", fontsize=10
    )
    write_atomically(path, _png(fig))


def write_outputs(report: Report, out_dir: Path) -> list[Path]:
    """Writes report.json, report.md, report.png, with an audit migration.png, and, when
    boundaries move, balanced-layout.json into ``out_dir``, each whole or not at all
    (:func:`write_atomically`); returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "report.json", out_dir / "report.md", out_dir / "report.png"]
    write_atomically(written[0], to_json(report))
    write_atomically(written[1], to_markdown(report))
    write_chart(report, written[2])
    if report.migration is not None:
        written.append(out_dir / "migration.png")
        write_migration_chart(report.migration, written[-1])
    if report.balancing.layout is not None:
        layout_path = out_dir / "balanced-layout.json"
        write_atomically(layout_path, json.dumps(report.balancing.layout, indent=2) + "\n")
        written.append(layout_path)
    return written
