"""The ``keyshared`` command line.

Subcommands are entries of :data:`COMMANDS`; adding one is adding a :class:`Command` whose
``configure`` declares its arguments and whose ``run`` returns the exit status.

* ``keyshared layout``: print a layout (an initial one, or one read from JSON);
* ``keyshared route KEY...``: route keys to (segment, bucket) under a layout;

``layout``, ``route`` and ``demo`` take ``--pulsar-version`` (``master``, the default, or
``5.0.0-M1``): the release whose routing they show.

* ``keyshared decide SNAPSHOT.json``: what the auto split/merge controller would do, and why
  (``--apply``: and the layout after it);
* ``keyshared demo``: hash and route a small sample of keys under an initial layout;
* ``keyshared simulate``: replay a scenario on virtual time and check ordering end to end;
* ``keyshared explain STATS.json``: a live Key_Shared subscription from Pulsar's topic stats:
  who waits on whom and why, who owns what, what moves if a consumer joins or leaves; or a
  scalable topic: what still drains and what waits for it (``keyshared.explain.command``);
* ``keyshared audit``: where a partitioned topic's keys and traffic go in a migration to a
  layout or another partition count, and which keys' order is at risk;
* ``keyshared verify``: run a canary Key_Shared workload on a cluster and check every delivery
  against keyshared's model of its release (``keyshared.verify.command``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TextIO

from keyshared._jsonfile import load_json
from keyshared._text import dump as _dump
from keyshared._text import percent as _percent
from keyshared._text import table as _table
from keyshared.errors import InvalidArgument
from keyshared.explain import command as explain_command
from keyshared.explain.keys import load_keys
from keyshared.routing.hashing import key_hashes
from keyshared.scalable.audit import DEFAULT_SAMPLE_SIZE, MigrationAudit, audit_migration
from keyshared.scalable.controller import apply_decision
from keyshared.scalable.layout import TopicLayout
from keyshared.scalable.policy import DecisionSnapshot
from keyshared.simulate import command as simulate_command
from keyshared.verify import command as verify_command
from keyshared.versions import SCALABLE_TOPICS, segment_half

#: Exit status for bad input (argparse uses the same for bad arguments).
EXIT_BAD_INPUT = 2


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one-line help, argument setup and body."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, TextIO], int]


def _layout_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--layout", metavar="FILE", help="layout JSON (TopicLayout.to_json); '-' for stdin"
    )
    source.add_argument(
        "--segments", type=int, default=None, help="initial layout of this many segments (1)"
    )
    parser.add_argument(
        "--budget", type=int, default=4, help="entry-bucket budget of an initial layout (4)"
    )
    _version_argument(parser)


def _version_argument(parser: argparse.ArgumentParser) -> None:
    releases = " or ".join(SCALABLE_TOPICS.accepted)
    parser.add_argument(
        "--pulsar-version",
        default=SCALABLE_TOPICS.default,
        metavar="RELEASE",
        help=f"route as this Pulsar release does: {releases} ({SCALABLE_TOPICS.default})",
    )


def _pulsar_version(args: argparse.Namespace) -> str:
    return SCALABLE_TOPICS.check(args.pulsar_version, "--pulsar-version")


def _load_layout(args: argparse.Namespace) -> TopicLayout:
    if args.layout is not None:
        return TopicLayout.from_dict(load_json(args.layout), "layout")
    return TopicLayout.initial(1 if args.segments is None else args.segments, args.budget)


# --- layout --------------------------------------------------------------------------------


def _configure_layout(parser: argparse.ArgumentParser) -> None:
    _layout_arguments(parser)
    parser.add_argument("--all", action="store_true", help="also list sealed segments")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="the whole DAG as JSON")
    form.add_argument(
        "--response", action="store_true", help="the producer's layout response as JSON"
    )


def _run_layout(args: argparse.Namespace, out: TextIO) -> int:
    version = _pulsar_version(args)
    layout = _load_layout(args)
    if args.json:
        _dump(layout.to_dict(), out)
        return 0
    if args.response:
        _dump(layout.layout_response(pulsar_version=version), out)
        return 0
    _print_layout(layout, args.all, out, version)
    return 0


def _print_layout(
    layout: TopicLayout,
    everything: bool,
    out: TextIO,
    pulsar_version: str = SCALABLE_TOPICS.default,
) -> None:
    """A header line, then one row per active segment (every segment with ``everything``):
    the buckets are those ``pulsar_version`` routes by (one per segment on 5.0.0-M1)."""
    bucketed = layout.routing_table_for(pulsar_version).bucket_count
    out.write(
        f"epoch {layout.epoch}, next segment id {layout.next_segment_id},"
        f" {len(layout.active_segments())} active segment(s),"
        f" {bucketed} bucket(s)\n"
    )
    has_buckets = segment_half(pulsar_version) == "high"
    shown = layout.segments.values() if everything else layout.active_segments()
    rows = [
        (
            s.segment_id,
            s.descriptor,
            s.state.value.lower(),
            s.bucket_count if has_buckets else 1,
            ",".join(str(x) for x in s.bucket_splits if has_buckets) or "-",
            ",".join(str(x) for x in s.parent_ids) or "-",
            ",".join(str(x) for x in s.child_ids) or "-",
            s.created_at_ms,
            s.sealed_at_ms if s.sealed_at_ms >= 0 else "-",
        )
        for s in shown
    ]
    headers = ("id", "descriptor", "state", "buckets", "splits", "parents", "children")
    _table((*headers, "created_ms", "sealed_ms"), rows, out)


# --- route ---------------------------------------------------------------------------------


def _configure_route(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("keys", nargs="*", metavar="KEY", help="keys to route (UTF-8)")
    parser.add_argument("--stdin", action="store_true", help="also read keys, one per line")
    _layout_arguments(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object per key")


def _route_rows(
    layout: TopicLayout, keys: Sequence[str], pulsar_version: str
) -> list[dict[str, Any]]:
    """One row per key. On a release without entry buckets (5.0.0-M1) the key has no
    hashB and its segment's one bucket no canonical hash: both are None."""
    table = layout.routing_table_for(pulsar_version)
    hashes = key_hashes(list(keys))
    ids, buckets = table.route_hashes(hashes)
    has_buckets = segment_half(pulsar_version) == "high"
    rows = []
    for key, h, sid, bucket in zip(
        keys, hashes.tolist(), ids.tolist(), buckets.tolist(), strict=True
    ):
        segment = layout.segments[sid]
        rows.append(
            {
                "key": key,
                "key_hash": h,
                "segment_hash": h >> 16 if has_buckets else h & 0xFFFF,
                "hash_b": h & 0xFFFF if has_buckets else None,
                "segment_id": sid,
                "descriptor": segment.descriptor,
                "bucket": bucket,
                "canonical_bucket_hash": (
                    segment.canonical_bucket_hash(bucket) if has_buckets else None
                ),
            }
        )
    return rows


def _hex4(value: int | None) -> str:
    return "-" if value is None else f"{value:04x}"


def _print_routes(rows: list[dict[str, Any]], out: TextIO) -> None:
    _table(
        ("key", "key_hash", "segment_hash", "hash_b", "segment", "bucket", "canonical"),
        [
            (
                r["key"],
                f"{r['key_hash']:08x}",
                _hex4(r["segment_hash"]),
                _hex4(r["hash_b"]),
                r["descriptor"],
                r["bucket"],
                _hex4(r["canonical_bucket_hash"]),
            )
            for r in rows
        ],
        out,
    )


def _stdin_keys(instead: str) -> list[str]:
    """One key per line of standard input; a byte order mark before the first is the
    encoding's (as Windows tools write it), not part of the key. ``instead`` names the
    other ways to give keys, for the error when there is no standard input to read."""
    stream = sys.stdin
    if stream is None or stream.closed:
        raise InvalidArgument(
            f"--stdin: standard input is closed, where keys were expected one a line;"
            f" give {instead}",
            argument="--stdin",
        )
    keys = [line.rstrip("\r\n") for line in stream]
    if keys:
        keys[0] = keys[0].removeprefix("\ufeff")
    return keys


def _run_route(args: argparse.Namespace, out: TextIO) -> int:
    keys = list(args.keys)
    if args.stdin and args.layout == "-":
        raise InvalidArgument(
            "--stdin and --layout - cannot both read standard input", argument="--stdin"
        )
    if args.stdin:
        keys.extend(_stdin_keys("KEY arguments"))
    if not keys:
        raise InvalidArgument("no keys given: pass KEY arguments or --stdin", argument="KEY")
    version = _pulsar_version(args)
    rows = _route_rows(_load_layout(args), keys, version)
    if args.json:
        for row in rows:
            out.write(json.dumps(row) + "\n")
    else:
        _print_routes(rows, out)
    return 0


# --- decide --------------------------------------------------------------------------------


def _configure_decide(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "snapshot", metavar="SNAPSHOT.json", help="decision snapshot; '-' for stdin"
    )
    parser.add_argument("--json", action="store_true", help="print the decision as JSON")
    parser.add_argument(
        "--apply",
        action="store_true",
        help="also apply the decision as the controller does and print the resulting layout"
        " (with --json: {decision, layout})",
    )
    parser.add_argument(
        "--pulsar-version",
        metavar="RELEASE",
        help="decide as this Pulsar release does: "
        f"{' or '.join(SCALABLE_TOPICS.accepted)} (default: the snapshot's pulsar_version,"
        f" else {SCALABLE_TOPICS.default})",
    )


def _run_decide(args: argparse.Namespace, out: TextIO) -> int:
    snapshot = DecisionSnapshot.from_dict(load_json(args.snapshot))
    if args.pulsar_version is not None:
        snapshot = replace(snapshot, pulsar_version=_pulsar_version(args))
    decision = snapshot.decide()
    layout = (
        apply_decision(snapshot.layout, decision, snapshot.policy, snapshot.now_ms)
        if args.apply
        else None
    )
    if args.json:
        if layout is None:
            _dump(decision.to_dict(), out)
        else:
            _dump({"decision": decision.to_dict(), "layout": layout.to_dict()}, out)
        return 0
    detail = {k: v for k, v in decision.to_dict().items() if k not in ("action", "reason")}
    action = decision.to_dict()["action"]
    out.write(action + "".join(f" {k}={v}" for k, v in detail.items()) + "\n")
    out.write(f"reason: {decision.reason}\n")
    if layout is not None:
        out.write("\n")
        _print_layout(layout, False, out)
    return 0


# --- demo ----------------------------------------------------------------------------------


def _configure_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--segments", type=int, default=4, help="segments of the layout (4)")
    parser.add_argument("--budget", type=int, default=8, help="entry-bucket budget (8)")
    parser.add_argument("--keys", type=int, default=12, help="how many sample keys (12)")
    _version_argument(parser)


def _run_demo(args: argparse.Namespace, out: TextIO) -> int:
    version = _pulsar_version(args)
    layout = TopicLayout.initial(args.segments, args.budget)
    if args.keys < 1:
        raise InvalidArgument(f"--keys must be at least 1, got {args.keys}", argument="--keys")
    keys = [f"order-{i:04d}" for i in range(args.keys)]
    rows = _route_rows(layout, keys, version)
    buckets = layout.routing_table_for(version).bucket_count
    release = "" if version == SCALABLE_TOPICS.default else f", as Pulsar {version} routes"
    out.write(
        f"{len(keys)} keys under an initial layout of {args.segments} segment(s),"
        f" bucket budget {args.budget} ({buckets} bucket(s) in all){release}\n\n"
    )
    _print_routes(rows, out)
    counts = Counter((r["descriptor"], r["bucket"]) for r in rows)
    out.write("\nkeys per (segment, bucket)\n")
    _table(("segment", "bucket", "keys"), [(d, b, n) for (d, b), n in sorted(counts.items())], out)
    return 0


# --- audit ---------------------------------------------------------------------------------


def _configure_audit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("keys", nargs="*", metavar="KEY", help="keys to audit (UTF-8)")
    parser.add_argument(
        "--keys", dest="keys_file", metavar="FILE", help="one key a line, or a .csv of key[,count]"
    )
    parser.add_argument("--stdin", action="store_true", help="also read keys, one per line")
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="PARTITIONER",
        help="the source producers' partitioner: kafka, pulsar:JavaStringHash, ...",
    )
    parser.add_argument(
        "--partitions", type=int, required=True, help="the source topic's partition count"
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-layout", metavar="FILE", help="target layout JSON; '-' for stdin")
    target.add_argument(
        "--to-partitions", type=int, metavar="M", help="target partition count (same partitioner)"
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=DEFAULT_SAMPLE_SIZE,
        help="at-risk keys to name, heaviest first (%(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print the audit as JSON")


def _audit_keys(args: argparse.Namespace) -> Counter[str]:
    """Every key given with its message count; a key given twice adds up."""
    if args.stdin and args.to_layout == "-":
        raise InvalidArgument(
            "--stdin and --to-layout - cannot both read standard input", argument="--stdin"
        )
    sample: Counter[str] = Counter(args.keys)
    if args.keys_file is not None:
        sample.update(load_keys(args.keys_file))
    if args.stdin:
        sample.update(_stdin_keys("KEY arguments or --keys FILE"))
    if not sample:
        raise InvalidArgument(
            "no keys given: pass KEY arguments, --keys FILE or --stdin", argument="KEY"
        )
    return sample


def _run_audit(args: argparse.Namespace, out: TextIO) -> int:
    sample = _audit_keys(args)
    target: TopicLayout | int = (
        args.to_partitions
        if args.to_layout is None
        else TopicLayout.from_dict(load_json(args.to_layout), "layout")
    )
    audit = audit_migration(
        list(sample),
        args.source,
        args.partitions,
        target,
        weights=list(sample.values()),
        sample_size=args.sample,
    )
    if args.json:
        _dump(audit.to_dict(), out)
    else:
        _print_audit(audit, out)
    return 0


def _amount(value: float) -> str:
    """Messages as a whole number, other weights (bytes averaged, say) with two decimals."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def _print_audit(a: MigrationAudit, out: TextIO) -> None:
    what = "segments" if a.target_kind == "layout" else "partitions"
    out.write(
        f"{a.total_keys} key(s), {_amount(a.total_traffic)} message(s):"
        f" {a.num_partitions} partition(s) by {a.source} -> {len(a.target_ids)} {what}\n"
        f"share of each source partition's messages per target (columns: {what})\n"
    )
    rows = [
        (p, a.keys[p].sum(), _amount(a.traffic[p].sum()), *map(_percent, a.traffic_shares[p]))
        for p in range(a.num_partitions)
    ]
    _table(("partition", "keys", "messages", *a.target_labels), rows, out)
    if a.unkeyed_keys:
        out.write(
            f"unkeyed (no fixed partition, not in the table): {a.unkeyed_keys} key(s),"
            f" {_amount(a.unkeyed_traffic)} message(s)\n"
        )
    share = a.at_risk_traffic / a.total_traffic if a.total_traffic else 0.0
    out.write(
        f"order at risk: {a.at_risk_keys} key(s), {_amount(a.at_risk_traffic)} message(s)"
        f" ({share:.1%}); {a.risk_description}\n"
    )
    if a.at_risk_sample:
        out.write("heaviest at risk: " + " ".join(a.at_risk_sample) + "\n")


COMMANDS: list[Command] = [
    Command("layout", "print a layout", _configure_layout, _run_layout),
    Command("route", "route keys to (segment, bucket)", _configure_route, _run_route),
    Command(
        "decide",
        "what auto split/merge/rebucket would do for a snapshot, and why",
        _configure_decide,
        _run_decide,
    ),
    Command(
        "demo", "hash and route sample keys under an initial layout", _configure_demo, _run_demo
    ),
    Command(
        "simulate",
        "replay a scenario on virtual time, checking per-key order and the other invariants",
        simulate_command.configure,
        simulate_command.run,
    ),
    Command(
        "explain",
        "why a Key_Shared subscription or scalable topic delivers as it does: who waits on"
        " whom, held hashes, what-ifs",
        explain_command.configure,
        explain_command.run,
    ),
    Command(
        "audit",
        "a migration's keys and traffic per source partition and target, and keys at risk",
        _configure_audit,
        _run_audit,
    ),
    Command(
        "verify",
        "run a canary Key_Shared workload on a cluster and check every delivery against the"
        " model of its release",
        verify_command.configure,
        verify_command.run,
    ),
]


def build_parser() -> argparse.ArgumentParser:
    from keyshared import __version__

    parser = argparse.ArgumentParser(
        prog="keyshared", description="Key_Shared routing and policy for scalable topics."
    )
    parser.add_argument("--version", action="version", version=f"keyshared {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.configure(sub.add_parser(command.name, help=command.help, description=command.help))
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Runs one subcommand; returns its exit status (2 for bad input, with the error on
    stderr)."""
    args = build_parser().parse_args(argv)
    command = next(c for c in COMMANDS if c.name == args.command)
    try:
        return command.run(args, out if out is not None else sys.stdout)
    except BrokenPipeError:
        # The reader went away (`keyshared route --stdin | head`): nothing more to say.
        # Point stdout at devnull so that the interpreter's final flush fails quietly too.
        if out is None:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ValueError, TypeError, OSError) as e:
        print(f"keyshared {command.name}: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


__all__ = [
    "COMMANDS",
    "EXIT_BAD_INPUT",
    "Command",
    "build_parser",
    "main",
]
