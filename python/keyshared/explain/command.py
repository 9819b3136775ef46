"""``keyshared explain``: a Key_Shared subscription from Pulsar's topic stats (the verdict
first: who waits on whom and why; then shares, keys, held hashes, what-ifs, a picture, and
``--watch``), or a scalable topic from a 5.0 broker's admin REST (the DAG, what drains and
what waits for it, where keys go)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

import keyshared.explain.scalable_topic as explain_scalable
from keyshared import _flags
from keyshared._checks import check_int
from keyshared._text import dump as _dump
from keyshared.connection import ClusterConnection, add_arguments, from_arguments
from keyshared.errors import ClusterAccessError, InvalidArgument
from keyshared.explain.admin import (
    DEFAULT_TIMEOUT_S,
    AnswerError,
    check_timeout,
    fetch_max_unacked,
    fetch_stats,
    partition_names,
)
from keyshared.explain.answers import DEFAULT_POINTS, place_message
from keyshared.explain.explanation import Explanation, explain_subscription
from keyshared.explain.keys import load_keys
from keyshared.explain.report import print_explanation, print_scalable
from keyshared.explain.stats import KeySharedSubscription, load_stats, read_subscription
from keyshared.explain.watch import changes
from keyshared.versions import SCALABLE_TOPICS


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "stats",
        nargs="?",
        metavar="STATS.json",
        help="topic stats JSON (pulsar-admin topics stats); '-' for stdin; or give --url",
    )
    parser.add_argument(
        "--url",
        help="read the stats from the broker's admin API at this URL (http:// or https://)",
    )
    parser.add_argument("--topic", help="the topic, with --url (a bare name is in public/default)")
    parser.add_argument(
        "--all-partitions",
        action="store_true",
        help="with --url: explain each partition of a partitioned --topic",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
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
        "--key-encoding",
        choices=_flags.KEY_ENCODINGS,
        default="utf-8",
        help="how --key and the --keys sample's keys are written: as text, or their bytes in"
        " hex or base64 (utf-8)",
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
        default=DEFAULT_POINTS,
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
        metavar="RELEASE",
        help="the release of the broker and producers: key routing, assignment:"
        f" {', '.join(explain_scalable.RELEASES)}, or a release number such as 5.0.1"
        f" ({SCALABLE_TOPICS.default})",
    )
    scalable.add_argument(
        "--save", metavar="FILE", help="with --url: also write what the broker said to FILE"
    )
    add_arguments(parser)


# Replaced in tests, so that --watch runs without waiting.
_sleep = time.sleep


#: The connection flags (keyshared.connection.add_arguments), by their argparse names.
_CONNECTION_FLAGS = (
    "client_conf",
    "token",
    "token_file",
    "token_env",
    "tls_trust_certs",
    "tls_cert",
    "tls_key",
    "tls_allow_insecure",
    "tls_no_hostname_verification",
    "oauth2_issuer_url",
    "oauth2_credentials",
    "oauth2_audience",
    "oauth2_scope",
)


#: What ``--png`` draws to: matplotlib's formats.
_PNG_SUFFIXES = ("png", "svg", "pdf", "jpg", "jpeg", "webp", "tif", "tiff", "eps", "ps")


def _check_explain_args(args: argparse.Namespace) -> None:
    remote = args.url is not None or args.client_conf is not None
    if remote == (args.stats is not None):
        raise InvalidArgument("give either STATS.json or --url with --topic", argument="STATS.json")
    # Said whatever the stats turn out to be: the what-if takes it, and a wrong one is wrong.
    check_int("--points", args.points, minimum=1)
    if args.pulsar_version is not None:
        args.pulsar_version, note = _flags.pulsar_release(
            args.pulsar_version, "--pulsar-version", SCALABLE_TOPICS
        )
        if note is not None:
            print(f"keyshared: note: {note}", file=sys.stderr)
    if not remote and args.topic is not None:
        raise InvalidArgument(
            "--topic is for --url or --client-conf; a stats file holds one topic",
            argument="--topic",
        )
    if remote and not args.topic:
        flag = "--url" if args.url is not None else "--client-conf"
        raise InvalidArgument(f"{flag} needs --topic", argument=flag)
    if not remote:
        for name in _CONNECTION_FLAGS:
            if getattr(args, name) not in (None, False):
                flag = f"--{name.replace('_', '-')}"
                raise InvalidArgument(
                    f"{flag} is for --url or --client-conf, not a stats file", argument=flag
                )
    if remote and str(args.topic).startswith("topic://"):
        explain_scalable.scalable_topic_name(args.topic)
    if args.all_partitions and not remote:
        raise InvalidArgument(
            "--all-partitions needs --url and --topic", argument="--all-partitions"
        )
    check_timeout("--timeout", args.timeout)
    if args.watch is not None:
        check_timeout("--watch", args.watch)
        if args.stats == "-":
            raise InvalidArgument(
                "--watch re-reads the stats: give a file or --url, not stdin", argument="--watch"
            )
    if args.count is not None:
        if args.watch is None:
            raise InvalidArgument("--count needs --watch", argument="--count")
        check_int("--count", args.count, minimum=1)
    if args.max_unacked is not None:
        check_int("--max-unacked", args.max_unacked, minimum=0)
    if args.ring and args.png is None:
        raise InvalidArgument("--ring needs --png", argument="--ring")
    if args.png is not None and importlib.util.find_spec("matplotlib") is None:
        raise InvalidArgument(
            "--png needs matplotlib: install keyshared[simulate]", argument="--png"
        )
    # The files last: a wrong flag is said whatever the files hold.
    if not remote and args.stats != "-":
        _flags.read_input("STATS.json", args.stats)
    if args.keys is not None:
        _flags.read_input("--keys", args.keys)
    for key in args.key:
        _flags.decode_key(_flags.argv_key(key, "--key"), args.key_encoding, "--key")
    if args.key_encoding != "utf-8" and not (args.key or args.keys):
        raise InvalidArgument(
            "--key-encoding is for the keys of --key or --keys: give one", argument="--key-encoding"
        )
    if args.png is not None:
        _flags.check_output_file("--png", args.png, _PNG_SUFFIXES)
    args.cluster = _cluster(args) if remote else None


def _cluster(args: argparse.Namespace) -> ClusterConnection:
    """The admin endpoint of --url, or of --client-conf's webServiceUrl, with the
    connection flags' TLS and authentication settings."""
    cluster = from_arguments(args, admin_url=args.url, admin_url_flag="--url")
    if cluster.admin_url is None:
        raise InvalidArgument(
            f"--client-conf {args.client_conf} has no webServiceUrl: give --url",
            argument="--url",
        )
    return cluster


def _explain_topics(args: argparse.Namespace) -> list[str | None]:
    """The topics to explain: None for the stats file, else the topic or its partitions."""
    if args.cluster is None:
        return [None]
    if args.all_partitions:
        return list(partition_names(args.cluster, args.topic))
    return [args.topic]


def _read_stats(args: argparse.Namespace, topic: str | None) -> tuple[Any, int | None]:
    """The stats of the file (``topic`` None) or of ``topic`` from --url, and when they
    were fetched (None for a file: its newest timestamp stands for that)."""
    if topic is None:
        return load_stats(args.stats), None
    fetched_ms = int(time.time() * 1000)
    return fetch_stats(args.cluster, topic), fetched_ms


def _read_explained(
    args: argparse.Namespace, topic: str | None, stats: Any = None, fetched_ms: int | None = None
) -> KeySharedSubscription:
    """The subscription from ``stats`` when given (already read), else read afresh."""
    if stats is None:
        stats, fetched_ms = _read_stats(args, topic)
    return read_subscription(stats, args.subscription, stats_time_ms=fetched_ms)


def _unacked_limit(args: argparse.Namespace, topic: str | None) -> int | None:
    if args.max_unacked is not None or topic is None:
        return args.max_unacked  # type: ignore[no-any-return]
    return fetch_max_unacked(args.cluster, topic)


def _is_scalable(args: argparse.Namespace) -> tuple[bool, Any]:
    """Whether the explanation is of a scalable topic, and its snapshot JSON when read from
    a file."""
    if args.cluster is not None:
        return str(args.topic).startswith("topic://"), None
    stats = load_stats(args.stats)
    return isinstance(stats, dict) and "layout" in stats and "subscriptions" not in stats, stats


def run(args: argparse.Namespace, out: TextIO) -> int:
    _check_explain_args(args)
    scalable, stats = _is_scalable(args)
    if scalable:
        return _run_explain_scalable(args, stats, out)
    for flag, given in (("--consumer", args.consumer), ("--pulsar-version", args.pulsar_version)):
        if given:
            raise InvalidArgument(
                f"{flag} is for scalable topics, not a Key_Shared subscription's stats",
                argument=flag,
            )
    if args.save is not None:
        raise InvalidArgument("--save is for scalable topics read with --url", argument="--save")
    sample = _sample(args)
    topics = _explain_topics(args)
    answers: dict[str | None, Explanation] = {}
    for i, topic in enumerate(topics):
        answer = _explain_once(args, topic, sample, stats)
        answers[topic] = answer
        if args.png is not None:
            drawn = _png_path(args.png, topic, len(topics))
            _draw(args, answer, drawn)
            # Beside the answers, or on stderr where stdout is JSON.
            print(f"wrote {drawn}", file=sys.stderr if args.json else out)
        if not args.json:
            if len(topics) > 1:
                out.write(f"{'' if i == 0 else chr(10)}== {topic} ==\n")
            print_explanation(answer, args.ranges, out)
    if args.json:
        data: Any = next(iter(answers.values())).to_dict()
        if len(topics) > 1:
            data = {str(t): a.to_dict() for t, a in answers.items()}
        _dump(data, out)
    if args.watch is not None:
        return _watch(args, topics, answers, sample, out)
    return 0


def _sample(args: argparse.Namespace) -> dict[str, int] | None:
    """The --keys sample, its keys as written, each checked under --key-encoding."""
    if not args.keys:
        return None
    sample = load_keys(args.keys)
    for key in sample:
        _flags.decode_key(key, args.key_encoding, f"--keys {args.keys}:")
    return sample


def _run_explain_scalable(args: argparse.Namespace, stats: Any, out: TextIO) -> int:
    for flag in ("keys", "join", "leave", "png", "watch", "all_partitions", "max_unacked"):
        if getattr(args, flag) not in (None, False):
            option = f"--{flag.replace('_', '-')}"
            raise InvalidArgument(
                f"{option} is for Key_Shared subscriptions, not scalable topics", argument=option
            )
    if args.keyless:
        raise InvalidArgument(
            "--keyless is for Key_Shared subscriptions, not scalable topics", argument="--keyless"
        )
    if stats is None:
        stats = explain_scalable.fetch_snapshot(args.cluster, args.topic)
        if args.save is not None:
            Path(args.save).write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    elif args.save is not None:
        raise InvalidArgument("--save needs --url", argument="--save")
    answer = explain_scalable.explain_scalable(
        explain_scalable.read_snapshot(stats, args.stats or "snapshot"),
        args.subscription,
        consumers=args.consumer,
        keys=args.key,
        pulsar_version=args.pulsar_version or SCALABLE_TOPICS.default,
        key_encoding=args.key_encoding,
    )
    if args.json:
        _dump(answer.to_dict(), out)
    else:
        print_scalable(answer, out)
    return 0


def _explain_once(
    args: argparse.Namespace,
    topic: str | None,
    sample: dict[str, int] | None,
    stats: Any = None,
    fetched_ms: int | None = None,
) -> Explanation:
    sub = _read_explained(args, topic, stats, fetched_ms)
    answer = explain_subscription(
        sub,
        sample=sample,
        keys=args.key,
        join=args.join,
        leave=args.leave,
        points=args.points,
        max_unacked_messages=_unacked_limit(args, topic),
        key_encoding=args.key_encoding,
    )
    placed = tuple(
        place_message(sub, producer_name=producer, sequence_id=_sequence_id(seq))
        for producer, seq in args.keyless
    )
    return replace(answer, keys=(*answer.keys, *placed))


def _sequence_id(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise InvalidArgument(
            f"--keyless SEQUENCE_ID must be a decimal integer >= 0, got {text!r}",
            argument="--keyless",
        )
    return int(text)


def _png_path(png: str, topic: str | None, topics: int) -> Path:
    path = Path(png)
    if topics == 1 or topic is None:
        return path
    return path.with_name(f"{path.stem}-{topic.rsplit('-', 1)[-1]}{path.suffix}")


def _draw(args: argparse.Namespace, answer: Explanation, path: Path) -> None:
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
    answers: dict[str | None, Explanation],
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
                lines = changes(answers[topic], now)
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
) -> Explanation:
    """One re-read, explained; _PollFailed with the line that says why it is not: the
    endpoint unreachable (no connection, no answer in time), failed (an HTTP error, a
    body cut short or not JSON), or stats that do not explain the subscription."""
    source = "the admin endpoint" if topic is not None else "the stats file"
    try:
        stats, fetched_ms = _read_stats(args, topic)
    except (AnswerError, ValueError) as e:
        failed = "failed" if topic is not None else "cannot be read"
        raise _PollFailed(f"{source} {failed}: {e}") from None
    except ClusterAccessError as e:
        # A refusal (401, 403) is an answer: the endpoint is there and says no.
        state = "failed" if e.status is not None else "is unreachable"
        raise _PollFailed(f"{source} {state}: {e}") from None
    except OSError as e:
        unreachable = "is unreachable" if topic is not None else "cannot be read"
        raise _PollFailed(f"{source} {unreachable}: {e}") from None
    try:
        return _explain_once(args, topic, sample, stats, fetched_ms)
    except (ValueError, TypeError) as e:
        raise _PollFailed(f"the stats cannot be explained: {e}", read=True) from None


def _back(args: argparse.Namespace, since: float, count: int, read: bool) -> str:
    back = "the admin endpoint is back" if args.cluster is not None else "the stats are back"
    back = "the subscription is explained again" if read else back
    return f"{back} after {count} failed poll(s) from +{_seconds(since, args.watch)} s"


def _seconds(elapsed: float, interval: float) -> str:
    """``elapsed`` to the precision of polls every ``interval`` seconds."""
    digits = 0 if interval >= 1 else min(3, math.ceil(-math.log10(interval)))
    return f"{elapsed:.{digits}f}"


__all__ = [
    "configure",
    "run",
]
