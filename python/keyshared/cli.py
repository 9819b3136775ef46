"""The ``keyshared`` command line.

Subcommands are entries of :data:`COMMANDS`; adding one is adding a :class:`Command` whose
``configure`` declares its arguments and whose ``run`` returns the exit status.

* ``keyshared layout``: print a layout (an initial one, or one read from JSON);
* ``keyshared route KEY...``: route keys to (segment, bucket) under a layout;
* ``keyshared decide SNAPSHOT.json``: what the auto split/merge controller would do, and why
  (``--apply``: and the layout after it);
* ``keyshared demo``: hash and route a small sample of keys under an initial layout;
* ``keyshared simulate``: replay a scenario on virtual time and check ordering end to end;
* ``keyshared explain STATS.json``: a live Key_Shared subscription from Pulsar's topic stats:
  who owns what, what is held and why, what moves if a consumer joins or leaves;
* ``keyshared audit``: where a partitioned topic's keys and traffic go in a migration to a
  layout or another partition count, and which keys' order is at risk.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

import keyshared.explain as explaining
import keyshared.explain_scalable as explain_scalable
from keyshared._checks import check_int
from keyshared.audit import DEFAULT_SAMPLE_SIZE, MigrationAudit, audit_migration
from keyshared.controller import apply_decision
from keyshared.hashing import key_hashes
from keyshared.layout import TopicLayout
from keyshared.policy import DecisionSnapshot
from keyshared.simulate import command as simulate_command

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


def _load_layout(args: argparse.Namespace) -> TopicLayout:
    if args.layout is not None:
        return TopicLayout.from_dict(_read_json(args.layout), "layout")
    return TopicLayout.initial(1 if args.segments is None else args.segments, args.budget)


def _read_json(path: str) -> Any:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8-sig")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{'stdin' if path == '-' else path}: JSON nested too deeply") from None


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]], out: TextIO) -> None:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def _dump(data: object, out: TextIO) -> None:
    out.write(json.dumps(data, indent=2) + "\n")


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
    layout = _load_layout(args)
    if args.json:
        _dump(layout.to_dict(), out)
        return 0
    if args.response:
        _dump(layout.layout_response(), out)
        return 0
    _print_layout(layout, args.all, out)
    return 0


def _print_layout(layout: TopicLayout, everything: bool, out: TextIO) -> None:
    """A header line, then one row per active segment (every segment with ``everything``)."""
    out.write(
        f"epoch {layout.epoch}, next segment id {layout.next_segment_id},"
        f" {len(layout.active_segments())} active segment(s),"
        f" {layout.total_bucket_count} bucket(s)\n"
    )
    shown = layout.segments.values() if everything else layout.active_segments()
    rows = [
        (
            s.segment_id,
            s.descriptor,
            s.state.value.lower(),
            s.bucket_count,
            ",".join(str(x) for x in s.bucket_splits) or "-",
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


def _route_rows(layout: TopicLayout, keys: Sequence[str]) -> list[dict[str, Any]]:
    hashes = key_hashes(list(keys))
    ids, buckets = layout.route_hashes(hashes)
    rows = []
    for key, h, sid, bucket in zip(
        keys, hashes.tolist(), ids.tolist(), buckets.tolist(), strict=True
    ):
        segment = layout.segments[sid]
        rows.append(
            {
                "key": key,
                "key_hash": h,
                "segment_hash": h >> 16,
                "hash_b": h & 0xFFFF,
                "segment_id": sid,
                "descriptor": segment.descriptor,
                "bucket": bucket,
                "canonical_bucket_hash": segment.canonical_bucket_hash(bucket),
            }
        )
    return rows


def _print_routes(rows: list[dict[str, Any]], out: TextIO) -> None:
    _table(
        ("key", "key_hash", "segment_hash", "hash_b", "segment", "bucket", "canonical"),
        [
            (
                r["key"],
                f"{r['key_hash']:08x}",
                f"{r['segment_hash']:04x}",
                f"{r['hash_b']:04x}",
                r["descriptor"],
                r["bucket"],
                f"{r['canonical_bucket_hash']:04x}",
            )
            for r in rows
        ],
        out,
    )


def _stdin_keys() -> list[str]:
    """One key per line of standard input; a byte order mark before the first is the
    encoding's (as Windows tools write it), not part of the key."""
    keys = [line.rstrip("\r\n") for line in sys.stdin]
    if keys:
        keys[0] = keys[0].removeprefix("\ufeff")
    return keys


def _run_route(args: argparse.Namespace, out: TextIO) -> int:
    keys = list(args.keys)
    if args.stdin and args.layout == "-":
        raise ValueError("--stdin and --layout - cannot both read standard input")
    if args.stdin:
        keys.extend(_stdin_keys())
    if not keys:
        raise ValueError("no keys given: pass KEY arguments or --stdin")
    rows = _route_rows(_load_layout(args), keys)
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


def _run_decide(args: argparse.Namespace, out: TextIO) -> int:
    snapshot = DecisionSnapshot.from_dict(_read_json(args.snapshot))
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


def _run_demo(args: argparse.Namespace, out: TextIO) -> int:
    layout = TopicLayout.initial(args.segments, args.budget)
    if args.keys < 1:
        raise ValueError(f"--keys must be at least 1, got {args.keys}")
    keys = [f"order-{i:04d}" for i in range(args.keys)]
    rows = _route_rows(layout, keys)
    out.write(
        f"{len(keys)} keys under an initial layout of {args.segments} segment(s),"
        f" bucket budget {args.budget} ({layout.total_bucket_count} bucket(s) in all)\n\n"
    )
    _print_routes(rows, out)
    counts = Counter((r["descriptor"], r["bucket"]) for r in rows)
    out.write("\nkeys per (segment, bucket)\n")
    _table(("segment", "bucket", "keys"), [(d, b, n) for (d, b), n in sorted(counts.items())], out)
    return 0


# --- explain -------------------------------------------------------------------------------


def _configure_explain(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "stats",
        nargs="?",
        metavar="STATS.json",
        help="topic stats JSON (pulsar-admin topics stats); '-' for stdin; or give --url",
    )
    parser.add_argument("--url", help="read the stats from the broker's admin API at this URL")
    parser.add_argument("--topic", help="the topic, with --url (a bare name is in public/default)")
    parser.add_argument(
        "--all-partitions",
        action="store_true",
        help="with --url: explain each partition of a partitioned --topic",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=explaining.DEFAULT_TIMEOUT_S,
        help="seconds for each whole request to --url (%(default)s)",
    )
    parser.add_argument("--subscription", required=True, help="the Key_Shared subscription")
    parser.add_argument(
        "--keys",
        metavar="FILE",
        help="key sample: one key a line, or a .csv of key[,count] (any letter case)",
    )
    parser.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="K",
        help="a key to place (repeatable); '' explains keyless messages",
    )
    parser.add_argument(
        "--keyless",
        nargs=2,
        action="append",
        default=[],
        metavar=("PRODUCER", "SEQUENCE_ID"),
        help="place the keyless message SEQUENCE_ID of producer PRODUCER (repeatable)",
    )
    change = parser.add_mutually_exclusive_group()
    change.add_argument("--join", metavar="NAME", help="what moves if a consumer NAME joins")
    change.add_argument("--leave", metavar="NAME", help="what moves if consumer NAME leaves")
    parser.add_argument(
        "--points",
        type=int,
        default=explaining.DEFAULT_POINTS,
        help="the broker's subscriptionKeySharedConsistentHashingReplicaPoints (%(default)s)",
    )
    parser.add_argument(
        "--max-unacked",
        type=int,
        metavar="N",
        help="the consumers' maxUnackedMessagesPerConsumer (with --url: asked of the broker)",
    )
    parser.add_argument("--ranges", action="store_true", help="list every consumer's ranges")
    parser.add_argument("--json", action="store_true", help="print the answers as JSON")
    parser.add_argument(
        "--png", metavar="FILE", help="also draw the consumers (who holds, waits, is stuck)"
    )
    parser.add_argument("--ring", action="store_true", help="with --png: draw the hash ring")
    parser.add_argument(
        "--watch",
        type=float,
        metavar="SECONDS",
        help="re-read the stats every SECONDS and print what changed",
    )
    parser.add_argument(
        "--count", type=int, metavar="N", help="with --watch: stop after N re-reads"
    )
    scalable = parser.add_argument_group(
        "scalable topics (--topic topic://..., or a snapshot saved with --save)"
    )
    scalable.add_argument(
        "--consumer",
        action="append",
        default=[],
        metavar="NAME",
        help="a consumer of the subscription (repeatable): the stats count them, unnamed",
    )
    scalable.add_argument(
        "--pulsar-version",
        choices=explain_scalable.RELEASES,
        default=explain_scalable.MASTER,
        help="the producers' release, for key routing (%(default)s)",
    )
    scalable.add_argument(
        "--save", metavar="FILE", help="with --url: also write what the broker said to FILE"
    )


# Replaced in tests, so that --watch runs without waiting.
_sleep = time.sleep


def _check_explain_args(args: argparse.Namespace) -> None:
    if (args.url is None) == (args.stats is None):
        raise ValueError("give either STATS.json or --url with --topic")
    if args.url is not None and not args.topic:
        raise ValueError("--url needs --topic")
    if args.url is not None and str(args.topic).startswith("topic://"):
        explain_scalable.scalable_topic(args.topic)
    if args.all_partitions and args.url is None:
        raise ValueError("--all-partitions needs --url and --topic")
    explaining.check_timeout("--timeout", args.timeout)
    if args.watch is not None:
        explaining.check_timeout("--watch", args.watch)
        if args.stats == "-":
            raise ValueError("--watch re-reads the stats: give a file or --url, not stdin")
    if args.count is not None:
        if args.watch is None:
            raise ValueError("--count needs --watch")
        check_int("--count", args.count, minimum=1)
    if args.max_unacked is not None:
        check_int("--max-unacked", args.max_unacked, minimum=0)
    if args.ring and args.png is None:
        raise ValueError("--ring needs --png")
    if args.png is not None and importlib.util.find_spec("matplotlib") is None:
        raise ValueError("--png needs matplotlib: install keyshared[simulate]")


def _explain_topics(args: argparse.Namespace) -> list[str | None]:
    """The topics to explain: None for the stats file, else the topic or its partitions."""
    if args.url is None:
        return [None]
    if args.all_partitions:
        return list(explaining.partition_names(args.url, args.topic, args.timeout))
    return [args.topic]


def _read_explained(
    args: argparse.Namespace, topic: str | None, stats: Any = None
) -> explaining.KeySharedSubscription:
    """The subscription from ``stats`` when given (already read), else read afresh."""
    if topic is None:
        stats = explaining.load_stats(args.stats) if stats is None else stats
        return explaining.read_subscription(stats, args.subscription)
    fetched_ms = int(time.time() * 1000)
    stats = explaining.fetch_stats(args.url, topic, args.timeout)
    return explaining.read_subscription(stats, args.subscription, stats_time_ms=fetched_ms)


def _unacked_limit(args: argparse.Namespace, topic: str | None) -> int | None:
    if args.max_unacked is not None or topic is None:
        return args.max_unacked  # type: ignore[no-any-return]
    return explaining.fetch_max_unacked(args.url, topic, args.timeout)


def _is_scalable(args: argparse.Namespace) -> tuple[bool, Any]:
    """Whether the explanation is of a scalable topic, and its snapshot JSON when read from
    a file."""
    if args.url is not None:
        return str(args.topic).startswith("topic://"), None
    stats = explaining.load_stats(args.stats)
    return isinstance(stats, dict) and "layout" in stats and "subscriptions" not in stats, stats


def _run_explain(args: argparse.Namespace, out: TextIO) -> int:
    _check_explain_args(args)
    scalable, stats = _is_scalable(args)
    if scalable:
        return _run_explain_scalable(args, stats, out)
    sample = explaining.load_keys(args.keys) if args.keys else None
    topics = _explain_topics(args)
    answers: dict[str | None, explaining.Explanation] = {}
    for i, topic in enumerate(topics):
        answer = _explain_once(args, topic, sample, stats)
        answers[topic] = answer
        if args.png is not None:
            _draw(args, answer, _png_path(args.png, topic, len(topics)))
        if not args.json:
            if len(topics) > 1:
                out.write(f"{'' if i == 0 else chr(10)}== {topic} ==\n")
            _print_explanation(answer, args.ranges, out)
    if args.json:
        data: Any = next(iter(answers.values())).to_dict()
        if len(topics) > 1:
            data = {str(t): a.to_dict() for t, a in answers.items()}
        _dump(data, out)
    if args.watch is not None:
        _watch(args, topics, answers, sample, out)
    return 0


def _run_explain_scalable(args: argparse.Namespace, stats: Any, out: TextIO) -> int:
    for flag in ("keys", "join", "leave", "png", "watch", "all_partitions", "max_unacked"):
        if getattr(args, flag) not in (None, False):
            raise ValueError(
                f"--{flag.replace('_', '-')} is for Key_Shared subscriptions, not scalable topics"
            )
    if args.keyless:
        raise ValueError("--keyless is for Key_Shared subscriptions, not scalable topics")
    if stats is None:
        stats = explain_scalable.fetch_snapshot(args.url, args.topic, args.timeout)
        if args.save is not None:
            Path(args.save).write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    elif args.save is not None:
        raise ValueError("--save needs --url")
    answer = explain_scalable.explain_scalable(
        explain_scalable.read_snapshot(stats, args.stats or "snapshot"),
        args.subscription,
        consumers=args.consumer,
        keys=args.key,
        pulsar_version=args.pulsar_version,
    )
    if args.json:
        _dump(answer.to_dict(), out)
    else:
        _print_scalable(answer, out)
    return 0


def _print_scalable(e: explain_scalable.ScalableExplanation, out: TextIO) -> None:
    show = explaining.shown
    out.write("".join(f"{line}\n" for line in e.lines))
    out.write("\nsegments (the DAG)\n")
    _table(
        (
            "id",
            "range",
            "state",
            "parents",
            "children",
            "epochs",
            "backlog",
            "waits for",
            "read by",
        ),
        [
            (
                s.segment_id,
                s.hash_range,
                s.state + (" (legacy)" if s.legacy_topic_name else ""),
                _ids(s.parent_ids),
                _ids(s.child_ids),
                f"{s.created_at_epoch}-{'' if s.sealed_at_epoch < 0 else s.sealed_at_epoch}",
                "-" if s.backlog is None else s.backlog,
                _ids(s.waiting_for),
                " ".join(show(c) for c in s.consumers) or "-",
            )
            for s in e.segments
        ],
        out,
    )
    if e.keys:
        out.write(f"\nkeys (routed as {e.pulsar_version} producers do)\n")
        _table(
            ("key", "routing hash", "segment", "read by", "waits for"),
            [
                (
                    show(k.key),
                    f"{k.routing_hash:04x}",
                    k.segment_id,
                    " ".join(show(c) for c in k.consumers) or "-",
                    _ids(k.waits_for),
                )
                for k in e.keys
            ],
            out,
        )


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids) or "-"


def _explain_once(
    args: argparse.Namespace, topic: str | None, sample: dict[str, int] | None, stats: Any = None
) -> explaining.Explanation:
    sub = _read_explained(args, topic, stats)
    answer = explaining.explain_subscription(
        sub,
        sample=sample,
        keys=args.key,
        join=args.join,
        leave=args.leave,
        points=args.points,
        max_unacked_messages=_unacked_limit(args, topic),
    )
    placed = tuple(
        explaining.place_message(sub, producer_name=producer, sequence_id=_sequence_id(seq))
        for producer, seq in args.keyless
    )
    return replace(answer, keys=(*answer.keys, *placed))


def _sequence_id(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise ValueError(f"--keyless SEQUENCE_ID must be a decimal integer >= 0, got {text!r}")
    return int(text)


def _png_path(png: str, topic: str | None, topics: int) -> Path:
    path = Path(png)
    if topics == 1 or topic is None:
        return path
    return path.with_name(f"{path.stem}-{topic.rsplit('-', 1)[-1]}{path.suffix}")


def _draw(args: argparse.Namespace, answer: explaining.Explanation, path: Path) -> None:
    from keyshared import explain_plot

    if args.ring:
        explain_plot.plot_ring(answer, path)
    else:
        explain_plot.plot_consumers(answer, path)


def _watch(
    args: argparse.Namespace,
    topics: Sequence[str | None],
    answers: dict[str | None, explaining.Explanation],
    sample: dict[str, int] | None,
    out: TextIO,
) -> None:
    """Every --watch seconds, re-reads the stats and prints what changed (--count times)."""
    started = time.monotonic()
    reads = 0
    while args.count is None or reads < args.count:
        _sleep(args.watch)
        reads += 1
        elapsed = time.monotonic() - started
        for topic in topics:
            now = _explain_once(args, topic, sample)
            lines = explaining.changes(answers[topic], now)
            where = "" if topic is None or len(topics) == 1 else f" {topic}"
            out.write(f"\n+{elapsed:.0f} s{where}: {'no change' if not lines else ''}\n")
            for line in lines:
                out.write(f"  {line}\n")
            answers[topic] = now
        out.flush()


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{share:.1%}"


def _print_explanation(e: explaining.Explanation, all_ranges: bool, out: TextIO) -> None:
    show = explaining.shown
    if e.verdict is not None:
        out.write("".join(f"{line}\n" for line in e.verdict.lines))
    out.write(
        f"\nsubscription {show(e.subscription)} (Key_Shared,"
        f" {show(e.key_shared_mode or 'mode unknown')}): {len(e.shares)} consumer(s),"
        f" backlog {e.msg_backlog}, {e.unacked_messages} unacked, {e.msg_in_replay} in replay,"
        f" {e.draining_hashes_count} draining hash(es) holding"
        f" {e.draining_hashes_unacked_messages} unacked message(s)\n\n"
    )
    _print_consumers(e, out)
    if all_ranges:
        out.write("\nranges (inclusive)\n")
        for s in e.shares:
            out.write(
                f"  {show(s.consumer)}: {' '.join(f'[{a}, {b}]' for a, b in s.ranges) or '-'}\n"
            )
    if e.keys:
        _print_keys(e, out)
    _print_held(e.held, out)
    if e.stuck:
        out.write("\nconsumers taking no messages\n")
        for c in e.stuck:
            out.write(
                f"  {show(c.consumer)}: {', '.join(c.reasons)} (availablePermits"
                f" {c.available_permits}, {c.unacked_messages} unacked)\n"
            )
    if e.what_if is not None:
        _print_what_if(e.what_if, out)


def _largest(ranges: Sequence[tuple[int, int]]) -> str:
    if not ranges:
        return "-"
    start, end = max(ranges, key=lambda r: (r[1] - r[0], -r[0]))
    return f"[{start}, {end}]"


def _last_ack(h: explaining.ConsumerHealth) -> str:
    return "never" if h.seconds_since_ack is None else f"{h.seconds_since_ack:.0f} s ago"


def _print_consumers(e: explaining.Explanation, out: TextIO) -> None:
    health = {h.consumer: h for h in (e.verdict.consumers if e.verdict else ())}
    rows = []
    for s in e.shares:
        h = health.get(s.consumer)
        rows.append(
            (
                explaining.shown(s.consumer),
                s.hashes,
                _percent(s.hash_share),
                len(s.ranges),
                _largest(s.ranges),
                "-" if h is None else h.available_permits,
                "-" if h is None else h.unacked_messages,
                "-" if h is None else h.msg_out_counter,
                "-" if h is None else _last_ack(h),
                "-" if h is None else h.holds,
                "-" if h is None else h.waits_for,
                "-" if s.messages is None else s.messages,
                _percent(s.traffic_share),
            )
        )
    _table(
        (
            "consumer",
            "hashes",
            "hash share",
            "ranges",
            "largest range",
            "permits",
            "unacked",
            "delivered",
            "last ack",
            "holds",
            "waits for",
            "sample msgs",
            "traffic share",
        ),
        rows,
        out,
    )


def _print_keys(e: explaining.Explanation, out: TextIO) -> None:
    out.write("\nkeys\n")
    _table(
        ("key", "hash", "owner", "held by"),
        [
            (
                explaining.shown(k.key),
                k.hash,
                explaining.shown(k.owner or "-"),
                explaining.shown(k.held_by or "-"),
            )
            for k in e.keys
        ],
        out,
    )
    if any(k.keyless for k in e.keys):
        out.write(
            "  '' (no key): a message without key or ordering key has the sticky key"
            " producerName-sequenceId (Pulsar 4.0+), so keyless messages spread over every"
            " consumer by hash share (the table above); the row for '' is a key set to the"
            ' empty string (the Java client\'s key(""); the Python and C++ clients send an'
            " empty key as none). Place one message with --keyless PRODUCER SEQUENCE_ID.\n"
        )


def _print_held(held: Sequence[explaining.HeldHash], out: TextIO) -> None:
    if not held:
        out.write("\nno draining hashes: nothing is held\n")
        return
    out.write(
        f"\n{len(held)} draining hash(es): new messages of each wait until its holder acks"
        " the unacked ones\n"
    )
    show = explaining.shown
    _table(
        ("hash", "held by", "waiting consumer", "unacked", "blocked attempts", "sample keys"),
        [
            (
                h.hash,
                show(h.held_by),
                show(h.owner or "-"),
                h.unack_msgs,
                h.blocked_attempts,
                " ".join(show(k) for k in h.keys) or "-",
            )
            for h in held
        ],
        out,
    )


def _print_what_if(w: explaining.WhatIf, out: TextIO) -> None:
    show = explaining.shown
    out.write(f"\nif {show(w.consumer)} {w.change}s (ring of {w.points} points per consumer")
    if w.ring_matches:
        out.write(" rebuilt from the names: it reproduces the broker's ranges)\n")
    else:
        out.write(
            " rebuilt from the names: it does NOT reproduce the broker's ranges, so this is"
            f" what keyshared's ring would do, not necessarily the broker; {w.mismatch})\n"
        )
    out.write(f"  {len(w.moves)} range(s) move, {w.moved_share:.1%} of the hashes\n")
    _table(
        ("start", "end", "from", "to"),
        [(m.start, m.end, show(m.source or "-"), show(m.target or "-")) for m in w.moves],
        out,
    )
    if w.moved_traffic_share is not None:
        out.write(
            f"  {len(w.moved_keys)} sample key(s) move,"
            f" {w.moved_traffic_share:.1%} of the sample's messages\n"
        )
    out.write("  after:\n")
    _table(
        ("consumer", "ranges", "hash share", "traffic share"),
        [
            (show(s.consumer), len(s.ranges), _percent(s.hash_share), _percent(s.traffic_share))
            for s in w.shares_after
        ],
        out,
    )


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
        raise ValueError("--stdin and --to-layout - cannot both read standard input")
    sample: Counter[str] = Counter(args.keys)
    if args.keys_file is not None:
        sample.update(explaining.load_keys(args.keys_file))
    if args.stdin:
        sample.update(_stdin_keys())
    if not sample:
        raise ValueError("no keys given: pass KEY arguments, --keys FILE or --stdin")
    return sample


def _run_audit(args: argparse.Namespace, out: TextIO) -> int:
    sample = _audit_keys(args)
    target: TopicLayout | int = (
        args.to_partitions
        if args.to_layout is None
        else TopicLayout.from_dict(_read_json(args.to_layout), "layout")
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
        "a Key_Shared subscription from Pulsar's topic stats: owners, held hashes, what-ifs",
        _configure_explain,
        _run_explain,
    ),
    Command(
        "audit",
        "a migration's keys and traffic per source partition and target, and keys at risk",
        _configure_audit,
        _run_audit,
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
