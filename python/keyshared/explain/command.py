"""``keyshared explain``: a Key_Shared subscription from Pulsar's topic stats (the verdict
first: who waits on whom and why; then shares, keys, held hashes, what-ifs, a picture, and
``--watch``), or a scalable topic from a 5.0 broker's admin REST (the DAG, what drains and
what waits for it, where keys go)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

import keyshared.explain.scalable_topic as explain_scalable
import keyshared.explain.subscription as explaining
from keyshared._checks import check_int
from keyshared._text import dump as _dump
from keyshared._text import percent as _percent
from keyshared._text import table as _table
from keyshared.errors import InvalidArgument
from keyshared.versions import SCALABLE_TOPICS


def configure(parser: argparse.ArgumentParser) -> None:
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
    parser.add_argument(
        "--subscription",
        required=True,
        help="the subscription (Key_Shared, or of the scalable topic)",
    )
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
        default=SCALABLE_TOPICS.default,
        help="the release of the broker and producers: key routing, assignment (%(default)s)",
    )
    scalable.add_argument(
        "--save", metavar="FILE", help="with --url: also write what the broker said to FILE"
    )


# Replaced in tests, so that --watch runs without waiting.
_sleep = time.sleep

#: The longest --timeout or --watch, in seconds: a year. Python's waits overflow not far
#: beyond 292 years (less the machine's uptime), and no request or poll needs as long.
MAX_SECONDS = 365 * 24 * 3600


def _check_seconds(flag: str, value: float) -> None:
    explaining.check_timeout(flag, value)
    if value > MAX_SECONDS:
        raise InvalidArgument(f"{flag} must be at most {MAX_SECONDS} seconds (a year), got {value}")


def _check_explain_args(args: argparse.Namespace) -> None:
    if (args.url is None) == (args.stats is None):
        raise InvalidArgument("give either STATS.json or --url with --topic")
    if args.url is not None and not args.topic:
        raise InvalidArgument("--url needs --topic")
    if args.url is not None and str(args.topic).startswith("topic://"):
        explain_scalable.scalable_topic_name(args.topic)
    if args.all_partitions and args.url is None:
        raise InvalidArgument("--all-partitions needs --url and --topic")
    _check_seconds("--timeout", args.timeout)
    if args.watch is not None:
        _check_seconds("--watch", args.watch)
        if args.stats == "-":
            raise InvalidArgument("--watch re-reads the stats: give a file or --url, not stdin")
    if args.count is not None:
        if args.watch is None:
            raise InvalidArgument("--count needs --watch")
        check_int("--count", args.count, minimum=1)
    if args.max_unacked is not None:
        check_int("--max-unacked", args.max_unacked, minimum=0)
    if args.ring and args.png is None:
        raise InvalidArgument("--ring needs --png")
    if args.png is not None and importlib.util.find_spec("matplotlib") is None:
        raise InvalidArgument("--png needs matplotlib: install keyshared[simulate]")


def _explain_topics(args: argparse.Namespace) -> list[str | None]:
    """The topics to explain: None for the stats file, else the topic or its partitions."""
    if args.url is None:
        return [None]
    if args.all_partitions:
        return list(explaining.partition_names(args.url, args.topic, args.timeout))
    return [args.topic]


def _read_stats(args: argparse.Namespace, topic: str | None) -> tuple[Any, int | None]:
    """The stats of the file (``topic`` None) or of ``topic`` from --url, and when they
    were fetched (None for a file: its newest timestamp stands for that)."""
    if topic is None:
        return explaining.load_stats(args.stats), None
    fetched_ms = int(time.time() * 1000)
    return explaining.fetch_stats(args.url, topic, args.timeout), fetched_ms


def _read_explained(
    args: argparse.Namespace, topic: str | None, stats: Any = None, fetched_ms: int | None = None
) -> explaining.KeySharedSubscription:
    """The subscription from ``stats`` when given (already read), else read afresh."""
    if stats is None:
        stats, fetched_ms = _read_stats(args, topic)
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


def run(args: argparse.Namespace, out: TextIO) -> int:
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
        return _watch(args, topics, answers, sample, out)
    return 0


def _run_explain_scalable(args: argparse.Namespace, stats: Any, out: TextIO) -> int:
    for flag in ("keys", "join", "leave", "png", "watch", "all_partitions", "max_unacked"):
        if getattr(args, flag) not in (None, False):
            raise InvalidArgument(
                f"--{flag.replace('_', '-')} is for Key_Shared subscriptions, not scalable topics"
            )
    if args.keyless:
        raise InvalidArgument("--keyless is for Key_Shared subscriptions, not scalable topics")
    if stats is None:
        stats = explain_scalable.fetch_snapshot(args.url, args.topic, args.timeout)
        if args.save is not None:
            Path(args.save).write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    elif args.save is not None:
        raise InvalidArgument("--save needs --url")
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
    args: argparse.Namespace,
    topic: str | None,
    sample: dict[str, int] | None,
    stats: Any = None,
    fetched_ms: int | None = None,
) -> explaining.Explanation:
    sub = _read_explained(args, topic, stats, fetched_ms)
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
        raise InvalidArgument(f"--keyless SEQUENCE_ID must be a decimal integer >= 0, got {text!r}")
    return int(text)


def _png_path(png: str, topic: str | None, topics: int) -> Path:
    path = Path(png)
    if topics == 1 or topic is None:
        return path
    return path.with_name(f"{path.stem}-{topic.rsplit('-', 1)[-1]}{path.suffix}")


def _draw(args: argparse.Namespace, answer: explaining.Explanation, path: Path) -> None:
    from keyshared.explain import plot as explain_plot

    if args.ring:
        explain_plot.plot_ring(answer, path)
    else:
        explain_plot.plot_consumers(answer, path)


#: The exit status of a --watch ended by Ctrl-C (SIGINT), as a shell reports one.
EXIT_INTERRUPTED = 130


class _PollFailed(Exception):
    """A --watch re-read that gave no explanation; the message is its line. ``read``:
    whether the stats were read (and did not explain the subscription)."""

    def __init__(self, line: str, read: bool = False) -> None:
        super().__init__(line)
        self.read = read


def _watch(
    args: argparse.Namespace,
    topics: Sequence[str | None],
    answers: dict[str | None, explaining.Explanation],
    sample: dict[str, int] | None,
    out: TextIO,
) -> int:
    """Every --watch seconds, re-reads the stats and prints what changed (--count times).
    A re-read that fails is one line saying why, and watching carries on; the first good
    one after says that the stats are back and what changed since the last good one.
    Ctrl-C ends the watch quietly (EXIT_INTERRUPTED)."""
    started = time.monotonic()
    good_at = dict.fromkeys(topics, 0.0)
    # Per topic: when its failing polls began, how many there were, and whether the stats
    # were read in every one (so that what is back is the explanation, not the source).
    failing: dict[str | None, tuple[float, int, bool]] = {}
    reads = 0
    try:
        while args.count is None or reads < args.count:
            _sleep(args.watch)
            reads += 1
            for topic in topics:
                elapsed = time.monotonic() - started
                where = "" if topic is None or len(topics) == 1 else f" {topic}"
                stamp = f"\n+{_seconds(elapsed, args.watch)} s{where}:"
                try:
                    now = _poll(args, topic, sample)
                except _PollFailed as e:
                    since, count, read = failing.get(topic, (elapsed, 0, True))
                    failing[topic] = (since, count + 1, read and e.read)
                    out.write(f"{stamp} {e}\n")
                    continue
                lines = explaining.changes(answers[topic], now)
                head = ""
                if topic in failing:
                    head = _back(args, *failing.pop(topic)) + "; "
                last = f"+{_seconds(good_at[topic], args.watch)} s"
                if not lines:
                    said = f" {head}no change since the read at {last}" if head else " no change"
                else:
                    said = f" {head}what changed since the read at {last}:" if head else ""
                out.write(f"{stamp}{said}\n" + "".join(f"  {line}\n" for line in lines))
                answers[topic] = now
                good_at[topic] = elapsed
            out.flush()
    except KeyboardInterrupt:
        out.flush()
        return EXIT_INTERRUPTED
    return 0


def _poll(
    args: argparse.Namespace, topic: str | None, sample: dict[str, int] | None
) -> explaining.Explanation:
    """One re-read, explained; _PollFailed with the line that says why it is not: the
    endpoint unreachable (no connection, no answer in time), failed (an HTTP error, a
    body cut short or not JSON), or stats that do not explain the subscription."""
    source = "the admin endpoint" if topic is not None else "the stats file"
    try:
        stats, fetched_ms = _read_stats(args, topic)
    except (explaining.AnswerError, ValueError) as e:
        failed = "failed" if topic is not None else "cannot be read"
        raise _PollFailed(f"{source} {failed}: {e}") from None
    except OSError as e:
        unreachable = "is unreachable" if topic is not None else "cannot be read"
        raise _PollFailed(f"{source} {unreachable}: {e}") from None
    try:
        return _explain_once(args, topic, sample, stats, fetched_ms)
    except (ValueError, TypeError) as e:
        raise _PollFailed(f"the stats cannot be explained: {e}", read=True) from None


def _back(args: argparse.Namespace, since: float, count: int, read: bool) -> str:
    back = "the admin endpoint is back" if args.url is not None else "the stats are back"
    back = "the subscription is explained again" if read else back
    return f"{back} after {count} failed poll(s) from +{_seconds(since, args.watch)} s"


def _seconds(elapsed: float, interval: float) -> str:
    """``elapsed`` to the precision of polls every ``interval`` seconds."""
    digits = 0 if interval >= 1 else min(3, math.ceil(-math.log10(interval)))
    return f"{elapsed:.{digits}f}"


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


__all__ = [
    "configure",
    "run",
]
