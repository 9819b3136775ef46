"""``keyshared verify``: run a canary Key_Shared workload on a cluster and check every delivery
against keyshared's model of its release; or, with ``--check``, check a saved record again.

Exit status: 0 when every rule held, 1 on a violation, 2 when the run could not be made
(bad flags, the cluster refused, a consumer could not subscribe), 130 on Ctrl-C (after
closing everything and removing the topic).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from keyshared._checks import check_int
from keyshared.connection import add_arguments, from_arguments
from keyshared.errors import InvalidArgument
from keyshared.explain.admin import check_timeout
from keyshared.verify.canary import Outcome, verify
from keyshared.verify.checker import check
from keyshared.verify.processes import ConsumerFailed
from keyshared.verify.report import format_verdict, load_record, write_report
from keyshared.verify.runner import RunFailed, VerifyOptions, Workload
from keyshared.verify.scenarios import SCENARIOS
from keyshared.versions import KNOWN_RELEASES

EXIT_PASS, EXIT_VIOLATION, EXIT_CANNOT_RUN, EXIT_INTERRUPTED = 0, 1, 2, 130
#: Above this many messages in all, verify asks first (or wants --yes).
ASK_ABOVE = 100_000


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--service-url", help="the broker's binary protocol (pulsar://, pulsar+ssl://)"
    )
    parser.add_argument("--admin-url", help="the broker's admin REST (http://, https://)")
    add_arguments(parser)
    parser.add_argument(
        "--scenario",
        action="append",
        choices=[*SCENARIOS, "all"],
        metavar="NAME",
        help=f"a scenario to run (repeatable): {', '.join(SCENARIOS)}, or all (steady)",
    )
    where = parser.add_argument_group("where")
    where.add_argument(
        "--namespace", default="public/default", help="for the new topic (%(default)s)"
    )
    where.add_argument("--topic", help="a persistent topic to use instead of a new one")
    where.add_argument(
        "--existing-topic",
        action="store_true",
        help="let --topic be a topic that exists (verify then adds and removes only its own"
        " subscriptions)",
    )
    where.add_argument(
        "--partitions", type=int, default=0, help="make the new topic partitioned (0)"
    )
    where.add_argument("--keep", action="store_true", help="keep the topic at the end")
    load = parser.add_argument_group("workload")
    load.add_argument(
        "--messages", type=int, default=600, help="messages per scenario (%(default)s)"
    )
    load.add_argument("--keys", type=int, default=60, help="distinct keys (%(default)s)")
    load.add_argument(
        "--consumers", type=int, default=3, help="consumers per scenario (%(default)s)"
    )
    load.add_argument(
        "--rate", type=float, default=0.0, help="messages a second (0: as fast as taken)"
    )
    load.add_argument("--seed", type=int, default=1, help="the workload's seed (%(default)s)")
    load.add_argument(
        "--duration", type=float, default=120.0, help="seconds each scenario may take (%(default)s)"
    )
    load.add_argument(
        "--yes", action="store_true", help=f"run above {ASK_ABOVE} messages without asking"
    )
    model = parser.add_argument_group("model")
    model.add_argument(
        "--pulsar-version",
        metavar="RELEASE",
        help=f"check against this release ({', '.join(KNOWN_RELEASES)}); default: the broker's",
    )
    model.add_argument(
        "--keep-alive",
        type=float,
        default=30.0,
        help="the broker's keepAliveIntervalSeconds, which the stall scenario waits out"
        " (%(default)s)",
    )
    model.add_argument(
        "--points",
        type=int,
        default=100,
        help="the broker's subscriptionKeySharedConsistentHashingReplicaPoints (%(default)s)",
    )
    model.add_argument(
        "--allow-out-of-order",
        action="store_true",
        help="subscribe with allowOutOfOrderDelivery=true, which gives up per-key order: to see"
        " verify catch it",
    )
    output = parser.add_argument_group("output")
    output.add_argument(
        "--json", action="store_true", help="print the whole record and verdict as JSON"
    )
    output.add_argument(
        "--report", metavar="DIR", help="write a report (timeline, record, replayable scenario)"
    )
    output.add_argument(
        "--check", metavar="RECORD.json", help="check a saved record again; no cluster"
    )


def _options(args: argparse.Namespace) -> VerifyOptions:
    scenarios = args.scenario or ["steady"]
    names = tuple(SCENARIOS) if "all" in scenarios else tuple(dict.fromkeys(scenarios))
    if args.pulsar_version is not None and args.pulsar_version not in KNOWN_RELEASES:
        raise InvalidArgument(
            f"--pulsar-version must be one of {', '.join(KNOWN_RELEASES)},"
            f" got {args.pulsar_version!r}",
            argument="--pulsar-version",
        )
    workload = Workload(
        messages=check_int("--messages", args.messages, minimum=2),
        keys=check_int("--keys", args.keys, minimum=1),
        consumers=check_int("--consumers", args.consumers, minimum=2),
        rate=_rate(args.rate),
        seed=check_int("--seed", args.seed),
    )
    options = VerifyOptions(
        scenarios=names,
        namespace=args.namespace,
        topic=args.topic,
        partitions=check_int("--partitions", args.partitions, minimum=0),
        existing_topic=args.existing_topic,
        keep=args.keep,
        workload=workload,
        duration_s=check_timeout("--duration", args.duration),
        keep_alive_s=check_timeout("--keep-alive", args.keep_alive),
        pulsar_version=args.pulsar_version,
        allow_out_of_order=args.allow_out_of_order,
        points=check_int("--points", args.points, minimum=1),
    )
    options.topic_name()  # refuses a topic verify cannot run on, before any connection
    return options


def _rate(value: float) -> float:
    if not value >= 0 or value == float("inf"):
        raise InvalidArgument(
            f"--rate must be a number of messages a second >= 0, got {value}", argument="--rate"
        )
    return value


def _confirm(options: VerifyOptions, yes: bool) -> None:
    total = options.total_messages()
    if total <= ASK_ABOVE or yes:
        return
    if not sys.stdin.isatty():
        raise InvalidArgument(
            f"this run sends {total} messages; pass --yes to run it without a terminal to ask",
            argument="--yes",
        )
    answer = input(f"keyshared verify: send {total} messages to the cluster? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise InvalidArgument("not confirmed: nothing was sent", argument="--yes")


def _check_writable(directory: Path) -> None:
    """Refuses a report folder that cannot be written before the run sends anything."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        raise InvalidArgument(
            f"--report {directory}: cannot write there ({e.strerror or e})", argument="--report"
        ) from None


def _progress(stream: TextIO) -> Callable[[str], None]:
    tty = stream.isatty()

    def say(line: str) -> None:
        stream.write(f"\r\x1b[K[verify] {line}" if tty else f"[verify] {line}\n")
        stream.flush()

    return say


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.check is not None:
        return _recheck(args, out)
    options = _options(args)
    connection = from_arguments(args, service_url=args.service_url, admin_url=args.admin_url)
    if args.report is not None:
        _check_writable(Path(args.report))
    _confirm(options, args.yes)
    progress = _progress(sys.stderr)
    try:
        outcome = verify(connection, options, progress)
    except KeyboardInterrupt:
        sys.stderr.write(
            "\nkeyshared verify: interrupted; closed the consumers and removed the topic\n"
        )
        return EXIT_INTERRUPTED
    except (RunFailed, ConsumerFailed, OSError) as e:
        sys.stderr.write(f"\nkeyshared verify: could not run: {e}\n")
        return EXIT_CANNOT_RUN
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    return _answer(args, out, outcome)


def _recheck(args: argparse.Namespace, out: TextIO) -> int:
    record = load_record(Path(args.check))
    return _answer(args, out, Outcome(record, check(record)))


def _answer(args: argparse.Namespace, out: TextIO, outcome: Outcome) -> int:
    if args.report is not None:
        for path in write_report(Path(args.report), outcome.record, outcome.verdict):
            sys.stderr.write(f"wrote {path}\n")
    if args.json:
        data = {
            "verdict": outcome.verdict.to_json(),
            "notes": outcome.notes,
            "record": outcome.record.to_json(),
        }
        json.dump(data, out, indent=1)
        out.write("\n")
    else:
        out.write(format_verdict(outcome.record, outcome.verdict) + "\n")
        for note in outcome.notes:
            out.write(f"note: {note}\n")
    return EXIT_PASS if outcome.verdict.passed else EXIT_VIOLATION


__all__ = ["configure", "run"]
