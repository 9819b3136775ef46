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
from typing import Any, NoReturn, TextIO

from keyshared import _flags
from keyshared._text import dump as _dump
from keyshared._text import percent as _percent
from keyshared._text import table as _table
from keyshared.errors import InvalidArgument, KeysharedError
from keyshared.explain import command as explain_command
from keyshared.explain.keys import load_keys
from keyshared.routing.hashing import key_hashes
from keyshared.scalable.audit import (
    DEFAULT_SAMPLE_SIZE,
    MigrationAudit,
    MigrationPlan,
    audit_migration,
)
from keyshared.scalable.controller import apply_decision
from keyshared.scalable.layout import TopicLayout
from keyshared.scalable.policy import DecisionSnapshot
from keyshared.simulate import command as simulate_command
from keyshared.verify import command as verify_command
from keyshared.versions import SCALABLE_TOPICS, segment_half

#: Exit status for bad input (argparse uses the same for bad arguments).
EXIT_BAD_INPUT = 2

#: The most sample keys ``keyshared demo`` routes: a demo prints a row a key.
MAX_DEMO_KEYS = 100_000

#: The most segments of a layout, and buckets of a segment: one a hash of the 16-bit ring.
_RING = 65_536


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
        "--budget", type=int, default=None, help="entry-bucket budget of an initial layout (4)"
    )
    _version_argument(parser)


def _version_argument(parser: argparse.ArgumentParser) -> None:
    releases = ", ".join(SCALABLE_TOPICS.accepted)
    parser.add_argument(
        "--pulsar-version",
        default=SCALABLE_TOPICS.default,
        metavar="RELEASE",
        help=f"route as this Pulsar release does: {releases}, or a release number such as"
        f" 5.0.1 ({SCALABLE_TOPICS.default})",
    )


def _pulsar_version(args: argparse.Namespace) -> str:
    """The profile of --pulsar-version; a release named by its number that has no profile
    of its own is routed as the nearest, which a note on stderr says."""
    profile, note = _flags.pulsar_release(args.pulsar_version, "--pulsar-version", SCALABLE_TOPICS)
    if note is not None:
        print(f"keyshared: note: {note}", file=sys.stderr)
    return profile


def _check_layout_args(args: argparse.Namespace) -> None:
    _flags.check_count("--segments", args.segments, 1, _RING)
    _flags.check_count("--budget", args.budget, 1, _RING)
    if args.layout is not None and args.budget is not None:
        raise InvalidArgument(
            "--budget is for an initial layout (--segments), not --layout", argument="--budget"
        )


def layout_document(data: Any) -> Any:
    """The layout of a JSON document: a layout, or ``decide --apply --json``'s
    ``{decision, layout}``, so that one command's output is the next one's input."""
    if isinstance(data, dict) and set(data) == {"decision", "layout"}:
        return data["layout"]
    return data


def read_layout(flag: str, path: str) -> TopicLayout:
    """The layout of the JSON file (``-``: standard input) ``flag`` names; errors name both."""
    data = layout_document(_flags.read_json(flag, path))
    try:
        return TopicLayout.from_dict(data, "layout")
    except KeysharedError as e:
        raise InvalidArgument(f"{flag} {path}: {e}", argument=flag) from None


def _load_layout(args: argparse.Namespace) -> TopicLayout:
    if args.layout is not None:
        return read_layout("--layout", args.layout)
    budget = 4 if args.budget is None else args.budget
    return TopicLayout.initial(1 if args.segments is None else args.segments, budget)


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
    _check_layout_args(args)
    if args.all and (args.json or args.response):
        flag = "--json" if args.json else "--response"
        raise InvalidArgument(
            f"--all is for the table; {flag} prints every segment already", argument="--all"
        )
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
    parser.add_argument(
        "keys", nargs="*", metavar="KEY", help="keys to route (UTF-8, or --key-encoding)"
    )
    _stdin_argument(parser)
    _key_encoding_argument(parser)
    _layout_arguments(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object per key")


def _stdin_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stdin",
        action="store_true",
        help="also read keys, one a line (an empty line is the empty key)",
    )


def _key_encoding_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--key-encoding",
        choices=_flags.KEY_ENCODINGS,
        default="utf-8",
        help="how keys are written: as text, or their bytes in hex or base64 (utf-8)",
    )


def given_keys(
    args: argparse.Namespace, typed: Sequence[str], others: str
) -> list[tuple[str, str | bytes]]:
    """The keys of KEY arguments and --stdin, each as written and as hashed (its bytes under
    --key-encoding); ``others`` names the ways to give keys but --stdin, for the errors when
    none is given. Errors name the argument and, for bytes that are not UTF-8, the byte and
    its offset."""
    written = [_flags.argv_key(key, "KEY") for key in typed]
    if args.stdin:
        written.extend(_flags.stdin_lines(others))
    elif not written:
        raise InvalidArgument(f"no keys given: pass {others} or --stdin", argument="KEY")
    source = "--stdin line" if args.stdin and not typed else "KEY"
    return [(key, _flags.decode_key(key, args.key_encoding, source)) for key in written]


def _route_rows(
    layout: TopicLayout,
    keys: Sequence[str],
    pulsar_version: str,
    hashed: Sequence[str | bytes] | None = None,
) -> list[dict[str, Any]]:
    """One row per key (as written; ``hashed``: the keys' bytes where they differ). On a
    release without entry buckets (5.0.0-M1) the key has no hashB and its segment's one
    bucket no canonical hash: both are None."""
    table = layout.routing_table_for(pulsar_version)
    hashes = key_hashes(list(keys if hashed is None else hashed))
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


def _run_route(args: argparse.Namespace, out: TextIO) -> int:
    if args.stdin and args.layout == "-":
        raise InvalidArgument(
            "--stdin and --layout - cannot both read standard input", argument="--stdin"
        )
    _check_layout_args(args)
    version = _pulsar_version(args)
    layout = _load_layout(args)
    keys = given_keys(args, args.keys, "KEY arguments")
    rows = _route_rows(layout, [k for k, _ in keys], version, [h for _, h in keys])
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
    version = None if args.pulsar_version is None else _pulsar_version(args)
    try:
        snapshot = DecisionSnapshot.from_dict(_flags.read_json("SNAPSHOT.json", args.snapshot))
    except KeysharedError as e:
        if str(e).startswith("SNAPSHOT.json"):
            raise
        raise InvalidArgument(f"SNAPSHOT.json {args.snapshot}: {e}", argument=e.argument) from None
    if version is not None:
        snapshot = replace(snapshot, pulsar_version=version)
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
    parser.add_argument(
        "--keys", type=int, default=12, help=f"how many sample keys (12, at most {MAX_DEMO_KEYS:,})"
    )
    _version_argument(parser)


def _run_demo(args: argparse.Namespace, out: TextIO) -> int:
    _flags.check_count("--segments", args.segments, 1, _RING)
    _flags.check_count("--budget", args.budget, 1, _RING)
    if not 1 <= args.keys <= MAX_DEMO_KEYS:
        # A demo prints a row a key: more is a job for `route --stdin` or Spark.
        raise InvalidArgument(
            f"--keys must be in [1, {MAX_DEMO_KEYS:,}], got {args.keys:,}; for more keys,"
            " pipe them to `keyshared route --stdin`",
            argument="--keys",
        )
    version = _pulsar_version(args)
    layout = TopicLayout.initial(args.segments, args.budget)
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
    parser.add_argument(
        "keys", nargs="*", metavar="KEY", help="keys to audit (UTF-8, or --key-encoding)"
    )
    parser.add_argument(
        "--keys", dest="keys_file", metavar="FILE", help="one key a line, or a .csv of key[,count]"
    )
    _stdin_argument(parser)
    _key_encoding_argument(parser)
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


def _audit_keys(args: argparse.Namespace) -> Counter[str | bytes]:
    """Every key given with its message count, as hashed (its bytes under --key-encoding);
    a key given twice adds up."""
    sample: Counter[str | bytes] = Counter()
    if args.keys_file is not None:
        _flags.read_input("--keys", args.keys_file)  # a missing file named by its flag
        try:
            counts = load_keys(args.keys_file)
        except KeysharedError as e:
            raise InvalidArgument(f"--keys {e}", argument="--keys") from None
        for key, count in counts.items():
            sample[_flags.decode_key(key, args.key_encoding, f"--keys {args.keys_file}:")] += count
        if not sample and not (args.keys or args.stdin):
            raise InvalidArgument(f"--keys {args.keys_file}: no keys in it", argument="--keys")
    if args.keys or args.stdin or not sample:
        others = "KEY arguments or --keys FILE"
        sample.update(hashed for _, hashed in given_keys(args, args.keys, others))
    return sample


def _run_audit(args: argparse.Namespace, out: TextIO) -> int:
    if args.stdin and args.to_layout == "-":
        raise InvalidArgument(
            "--stdin and --to-layout - cannot both read standard input", argument="--stdin"
        )
    _flags.check_count("--partitions", args.partitions, 1)
    _flags.check_count("--to-partitions", args.to_partitions, 1)
    _flags.check_count("--sample", args.sample, 0)
    target: TopicLayout | int = (
        args.to_partitions if args.to_layout is None else read_layout("--to-layout", args.to_layout)
    )
    try:
        MigrationPlan.of(args.source, args.partitions, target)
    except KeysharedError as e:
        flags = {**_AUDIT_FLAGS, "target": "--to-layout" if args.to_layout else "--to-partitions"}
        raise InvalidArgument(_flags.in_words(e, flags), argument=e.argument) from None
    sample = _audit_keys(args)
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
    if not a.at_risk_keys:
        out.write(f"order at risk: none (the rule: {a.risk_description})\n")
        return
    out.write(
        f"order at risk: {a.at_risk_keys} key(s), {_amount(a.at_risk_traffic)} message(s)"
        f" ({share:.1%}); {a.risk_description}\n"
    )
    if a.at_risk_sample:
        out.write("heaviest at risk: " + " ".join(a.at_risk_sample) + "\n")


#: The library's argument names for the audit's flags.
_AUDIT_FLAGS = {
    "source": "--from",
    "num_partitions": "--partitions",
    "target": "--to-partitions",
    "sample_size": "--sample",
}

#: Per command, the flag each library argument stands for: an error the library raises
#: deeper than the commands' own checks still names what the user typed.
FLAGS: dict[str, dict[str, str]] = {
    "layout": {"num_segments": "--segments", "bucket_budget": "--budget"},
    "route": {"num_segments": "--segments", "bucket_budget": "--budget"},
    "demo": {"num_segments": "--segments", "bucket_budget": "--budget"},
    "decide": {"pulsar_version": "--pulsar-version"},
    "audit": _AUDIT_FLAGS,
    "simulate": {"scale": "--scale", "seed": "--seed", "path": "SCENARIO"},
    "explain": {
        "points": "--points",
        "pulsar_version": "--pulsar-version",
        "join": "--join",
        "leave": "--leave",
        "path": "--keys",
        "key_encoding": "--key-encoding",
    },
}

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


class _Parser(argparse.ArgumentParser):
    """argparse's refusals on one line, as every other error of the command is: the usage
    it prints first is ``--help``'s to give."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from keyshared import __version__

    parser = _Parser(
        prog="keyshared",
        description="Key_Shared routing and policy for scalable topics.",
        # --version's lines kept as written.
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=version_text(__version__))
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.configure(sub.add_parser(command.name, help=command.help, description=command.help))
    return parser


def version_text(version: str) -> str:
    """What ``keyshared --version`` says: the package's version, its key hash's version
    (which never changes within a major version) and the Pulsar releases it reproduces."""
    from keyshared import HASH_VERSION
    from keyshared.versions import KNOWN_RELEASES, LOAD_BALANCER

    return (
        f"keyshared {version}\n"
        f"key hash: HASH_VERSION {HASH_VERSION} (MurmurHash3_x86_32, seed 0)\n"
        f"Pulsar profiles: {', '.join(KNOWN_RELEASES)}"
        f" (scalable topics: {', '.join(SCALABLE_TOPICS.accepted)};"
        f" load balancer: {', '.join(LOAD_BALANCER.accepted)}); default {SCALABLE_TOPICS.default}"
    )


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
    except KeysharedError as e:
        message = _flags.in_words(e, FLAGS.get(command.name, {}))
        print(f"keyshared {command.name}: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (ValueError, TypeError, OSError) as e:
        print(f"keyshared {command.name}: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


__all__ = [
    "COMMANDS",
    "EXIT_BAD_INPUT",
    "FLAGS",
    "MAX_DEMO_KEYS",
    "Command",
    "build_parser",
    "given_keys",
    "layout_document",
    "main",
    "read_layout",
    "version_text",
]
