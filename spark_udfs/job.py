"""The bulk-bucketing job: route every message's key under a topic layout on Spark and report
per segment and bucket load, skew, the hottest keys, what the auto-scale policy would decide,
and traffic-balanced bucket boundaries, as JSON, Markdown and a PNG chart.

    python -m spark_udfs.job [--input PATH [--format F] --key-column K [--size-column S]]
                             [--segments N --bucket-budget T | --layout layout.json]
                             [--pulsar-version master|5.0.0-M1]
                             [--synthetic-keys N --key-space K --zipf-s S] [--out DIR]
                             [--master URL] [--engine jvm|arrow]
                             [--audit-from PARTITIONER:N [--audit-to-partitions M]]

With no ``--input`` it generates a Zipf-skewed key set on Spark. ``--audit-from`` adds a
migration audit (:mod:`keyshared.scalable.audit`): from N partitions placed by PARTITIONER to the
layout (or to M partitions), traffic in messages, null keys unkeyed, with a heatmap. It runs
on local Spark by default, and on any cluster through ``spark-submit spark_udfs/job.py ...``.

``--pulsar-version 5.0.0-M1`` routes keys as that release does (by the low half of the key
hash) and reports its segments as one bucket each, since M1 has no entry buckets.
"""

import argparse
import json
import math
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.errors import (
    AnalysisException,
    IllegalArgumentException,
    PythonException,
    SparkRuntimeException,
)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from keyshared import AutoScalePolicy, TopicLayout
from keyshared._flags import pulsar_release
from keyshared.errors import InvalidArgument
from keyshared.routing import MIN_FIRST_SPLIT, RING_SIZE
from keyshared.scalable import DEFAULT_SAMPLE_SIZE, MAX_PARTITIONS, MigrationPlan
from keyshared.versions import SCALABLE_TOPICS, segment_half
from spark_udfs.audit import count_migration
from spark_udfs.bucketing import count_load
from spark_udfs.jvm import ENGINES, Engine, choose_engine, library_error
from spark_udfs.render import write_outputs
from spark_udfs.report import Report, build_report
from spark_udfs.session import get_session
from spark_udfs.sources import (
    FORMATS,
    KEY,
    MAX_MESSAGE_SIZE,
    FileSource,
    JobError,
    Source,
    SyntheticSource,
    check_exists,
    check_message_size,
    check_synthetic,
    read_messages,
)

#: Exit status for input the job cannot use (argparse uses the same for bad arguments).
EXIT_BAD_INPUT = 2
#: The most buckets a segment can have: bucket 0 spans at least MIN_FIRST_SPLIT hashes, each
#: other bucket at least one.
MAX_BUCKETS = RING_SIZE - MIN_FIRST_SPLIT + 1
MAX_FLOAT = sys.float_info.max
#: The most keys ``--top`` and ``--audit-sample`` name: Spark's ``max_by(..., k)`` bound.
MAX_NAMED_KEYS = 100_000


class Progress:
    """Step-by-step progress on the console, with the time each step took."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.timings: dict[str, float] = {}

    def note(self, message: str) -> None:
        print(f"[keyshared] {message}", file=self.out, flush=True)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        self.note(f"{name} ...")
        start = time.monotonic()
        yield
        self.timings[name] = time.monotonic() - start
        self.note(f"{name}: done in {self.timings[name]:.1f} s")


def _values(text: str, kind: type[float] | type[int]) -> list[float] | list[int]:
    try:
        values = [kind(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list: {text!r}") from None
    if not values or any(not (0 <= v < math.inf) for v in values):
        raise argparse.ArgumentTypeError(f"need one or more finite, non-negative values: {text!r}")
    return values


def _rates(text: str) -> list[float]:
    return [float(v) for v in _values(text, float)]


def _counts(text: str) -> list[int]:
    return [int(v) for v in _values(text, int)]


def _audit_source(text: str) -> tuple[str, int]:
    # A partitioner's name may hold colons itself (pulsar:JavaStringHash): the count is last.
    name, _, count = text.rpartition(":")
    if not name or not count.strip().isdigit():
        raise argparse.ArgumentTypeError(f"not PARTITIONER:N: {text!r}")
    return name, int(count)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m spark_udfs.job",
        description="Bucket a key set with Spark under a Key_Shared topic layout and report "
        "load, skew, hot keys, auto-scale decisions and balanced bucket boundaries.",
    )
    data = parser.add_argument_group("input (default: a synthetic Zipf key set)")
    data.add_argument("--input", metavar="PATH", help="Parquet, CSV or JSON file, dir or glob")
    data.add_argument("--format", choices=FORMATS, help="input format (default: from the name)")
    data.add_argument(
        "--key-column", metavar="NAME", default="key", help="column holding the key (key)"
    )
    data.add_argument(
        "--size-column", metavar="NAME", help="column holding each message's payload bytes"
    )
    data.add_argument(
        "--message-size",
        metavar="BYTES",
        type=int,
        default=1024,
        help="bytes per message without a size column; median synthetic size (1024)",
    )
    data.add_argument(
        "--null-key", metavar="TEXT", help="hash null keys as this text (default: fail on them)"
    )
    data.add_argument(
        "--synthetic-keys", metavar="N", type=int, default=10_000_000, help="messages (10M)"
    )
    data.add_argument(
        "--key-space", metavar="N", type=int, default=1_000_000, help="distinct keys (1M)"
    )
    data.add_argument("--zipf-s", metavar="S", type=float, default=1.1, help="Zipf exponent (1.1)")
    data.add_argument("--seed", metavar="N", type=int, default=42, help="synthetic data seed (42)")

    layout = parser.add_argument_group("layout")
    layout.add_argument(
        "--segments", metavar="N", type=int, default=4, help="initial layout segments (4)"
    )
    layout.add_argument(
        "--bucket-budget", metavar="T", type=int, default=16, help="bucket budget (16)"
    )
    layout.add_argument("--layout", metavar="FILE", help="layout JSON (TopicLayout.to_json)")
    layout.add_argument(
        "--pulsar-version",
        metavar="RELEASE",
        default=SCALABLE_TOPICS.default,
        help="route as this Pulsar release does: "
        f"{' or '.join(SCALABLE_TOPICS.accepted)} ({SCALABLE_TOPICS.default})",
    )

    policy = parser.add_argument_group("policy and balancing")
    policy.add_argument(
        "--msg-rate",
        metavar="RATES",
        type=_rates,
        default=[2_000.0, 20_000.0, 200_000.0],
        help="topic msg/s in to ask the policy about, comma-separated (2000,20000,200000)",
    )
    policy.add_argument(
        "--consumers",
        metavar="COUNTS",
        type=_counts,
        default=[1, 8, 64],
        help="STREAM consumers of one subscription, comma-separated (1,8,64)",
    )
    policy.add_argument(
        "--fanout", metavar="X", type=float, default=1.0, help="out rate / in rate (1)"
    )
    policy.add_argument("--policy", metavar="FILE", help="AutoScalePolicy JSON (defaults)")
    policy.add_argument(
        "--balance-buckets",
        metavar="N",
        type=int,
        help="buckets per segment for the balanced boundaries (default: the layout's)",
    )
    policy.add_argument(
        "--top", metavar="N", type=int, default=20, help="hottest keys to report (20)"
    )

    audit = parser.add_argument_group("migration audit")
    audit.add_argument(
        "--audit-from",
        metavar="PARTITIONER:N",
        type=_audit_source,
        help="audit a migration from N partitions placed by PARTITIONER (kafka:12, "
        "pulsar:JavaStringHash:8, ...) to the layout",
    )
    audit.add_argument(
        "--audit-to-partitions",
        metavar="M",
        type=int,
        help="audit the move to M partitions under the same partitioner instead",
    )
    audit.add_argument(
        "--audit-sample",
        metavar="N",
        type=int,
        default=DEFAULT_SAMPLE_SIZE,
        help=f"busiest at-risk keys to name ({DEFAULT_SAMPLE_SIZE})",
    )

    run = parser.add_argument_group("run")
    run.add_argument("--out", metavar="DIR", default="out", help="output directory (out)")
    run.add_argument(
        "--master", metavar="URL", help="Spark master (default: spark-submit's, else local[*])"
    )
    run.add_argument(
        "--engine",
        choices=ENGINES,
        help="route with the JVM functions or the Arrow UDFs (default: jvm when the session "
        "has the keyshared jar, else arrow)",
    )
    return parser


def _read_json(path: str, what: str) -> object:
    """The JSON of the file ``--{what}`` names; errors name the flag and the file."""
    flag = f"--{what}"
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise JobError(f"{flag} {path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise JobError(f"{flag} {path}: cannot be read: {e}") from None


def load_layout(args: argparse.Namespace) -> TopicLayout:
    """The layout from ``--layout``, or the initial one of ``--segments``/``--bucket-budget``."""
    if args.layout is None:
        _check_range("--segments", args.segments, 1, RING_SIZE, "a segment spans a hash at least")
        _check_range(
            "--bucket-budget", args.bucket_budget, 1, RING_SIZE, "a bucket spans a hash at least"
        )
        return TopicLayout.initial(args.segments, args.bucket_budget)
    data = _read_json(args.layout, "layout")
    try:
        if not isinstance(data, dict):
            raise InvalidArgument("a layout is a JSON object", argument="layout")
        return TopicLayout.from_dict(data, "layout")
    except (TypeError, ValueError) as e:
        raise JobError(f"--layout {args.layout}: {e}") from None


def load_policy(args: argparse.Namespace) -> AutoScalePolicy:
    if args.policy is None:
        return AutoScalePolicy()
    data = _read_json(args.policy, "policy")
    try:
        if not isinstance(data, dict):
            raise InvalidArgument("a policy is a JSON object", argument="policy")
        return AutoScalePolicy.from_dict(data)
    except (TypeError, ValueError) as e:
        raise JobError(f"--policy {args.policy}: {e}") from None


def _check_range(flag: str, value: int, low: int, high: int, why: str) -> None:
    """JobError naming ``flag`` and its bounds unless ``low <= value <= high``: a value
    beyond what Spark takes would only fail inside Spark, after the job started."""
    if not low <= value <= high:
        raise JobError(f"{flag} must be in [{low:,}, {high:,}] ({why}), got {value:,}")


def make_source(args: argparse.Namespace) -> Source:
    """The input the arguments describe, checked before Spark starts."""
    check_message_size(args.message_size)
    if args.input is None:
        source = SyntheticSource(
            args.synthetic_keys, args.key_space, args.zipf_s, args.seed, args.message_size
        )
        check_synthetic(source)
        return source
    try:
        check_exists(args.input)
    except JobError as e:
        raise JobError(f"--input: {e}") from None
    return FileSource(args.input, args.format, args.key_column, args.size_column, args.message_size)


@dataclass(frozen=True)
class Plan:
    """A run's validated inputs."""

    source: Source
    layout: TopicLayout
    policy: AutoScalePolicy
    args: argparse.Namespace
    migration: MigrationPlan | None = None


def make_plan(args: argparse.Namespace) -> Plan:
    """Checks every argument, file and layout; JobError for the first that is unusable."""
    _check_range("--top", args.top, 0, MAX_NAMED_KEYS, "Spark's max_by bound")
    if args.balance_buckets is not None and not 1 <= args.balance_buckets <= MAX_BUCKETS:
        raise JobError(
            f"--balance-buckets must be in [1, {MAX_BUCKETS}], got {args.balance_buckets}"
        )
    if not 0 <= args.fanout < math.inf:
        raise JobError(f"--fanout must be a finite, non-negative number, got {args.fanout}")
    # A scenario's bytes out are rate * message bytes * fanout, and a Pulsar message has
    # fewer than 2**31 bytes: rates beyond this would only overflow after the whole run.
    most = MAX_FLOAT / (MAX_MESSAGE_SIZE * max(1.0, args.fanout))
    if max(args.msg_rate) > most:
        raise JobError(f"--msg-rate must be at most {most:.3g} with --fanout {args.fanout:g}")
    try:
        version, note = pulsar_release(args.pulsar_version, "--pulsar-version", SCALABLE_TOPICS)
    except ValueError as e:
        raise JobError(str(e)) from None
    if note is not None:
        print(f"[keyshared] note: {note}", file=sys.stderr)
    # Every later step reads the profile, not the release number typed.
    args.pulsar_version = version
    if segment_half(version) == "low":
        if args.balance_buckets is not None:
            raise JobError(f"--balance-buckets: Pulsar {version} has no entry buckets")
        if args.audit_from is not None and args.audit_to_partitions is None:
            # The audit routes the migrated keys as master's producers do.
            raise JobError(
                f"--audit-from to a layout follows master's routing, not {version}'s:"
                " give --audit-to-partitions, or leave --pulsar-version out"
            )
    layout = release_layout(load_layout(args), version)
    plan = Plan(make_source(args), layout, load_policy(args), args, migration_plan(args, layout))
    _make_out_dir(Path(args.out))
    return plan


def release_layout(layout: TopicLayout, pulsar_version: str) -> TopicLayout:
    """``layout`` as ``pulsar_version`` sees it: unchanged on master; on 5.0.0-M1, which has
    no entry buckets, every segment one bucket (its split points dropped), so that the
    report's buckets are the ones keys route to."""
    if segment_half(pulsar_version) == "high":
        return layout
    segments = {i: replace(s, bucket_splits=()) for i, s in layout.segments.items()}
    return TopicLayout(layout.epoch, layout.next_segment_id, segments)


def migration_plan(args: argparse.Namespace, layout: TopicLayout) -> MigrationPlan | None:
    """The audit ``--audit-from`` asks for, to ``--audit-to-partitions`` or the layout."""
    if args.audit_from is None:
        if args.audit_to_partitions is not None:
            raise JobError("--audit-to-partitions needs --audit-from")
        return None
    _check_range("--audit-sample", args.audit_sample, 0, MAX_NAMED_KEYS, "Spark's max_by bound")
    partitioner, count = args.audit_from
    partitions = "a partition count's bound, a Java int"
    _check_range("--audit-from N", count, 1, MAX_PARTITIONS, partitions)
    target: TopicLayout | int = layout
    if args.audit_to_partitions is not None:
        _check_range(
            "--audit-to-partitions", args.audit_to_partitions, 1, MAX_PARTITIONS, partitions
        )
        target = args.audit_to_partitions
    try:
        return MigrationPlan.of(partitioner, count, target)
    except (TypeError, ValueError) as e:
        raise JobError(f"--audit-from: {e}") from None


def _make_out_dir(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise JobError(f"--out {out}: {e.strerror}") from None


def run(spark: SparkSession, plan: Plan, progress: Progress) -> Report:
    """Reads, routes and aggregates on ``spark``; builds the report on the driver."""
    args, layout = plan.args, plan.layout
    try:
        engine: Engine = choose_engine(spark, args.engine)
    except ValueError as e:
        raise JobError(str(e)) from None
    progress.note(f"input: {plan.source.describe()}")
    progress.note(f"routing engine: {engine}")
    progress.note(
        f"layout: epoch {layout.epoch}, {len(layout.active_segments())} segments, "
        f"{layout.total_bucket_count} buckets"
    )
    with progress.step("routing keys and counting load per bucket and key"):
        messages = read_messages(spark, plan.source)
        if messages.isEmpty():
            raise JobError(f"the input holds no messages: {plan.source.describe()}")
        if args.null_key is None:
            messages = _refuse_null_keys(messages, args.key_column)
        hist, hot = count_load(
            messages, layout, args.null_key, args.top, engine, args.pulsar_version
        )
    migration = None
    if plan.migration is not None:
        with progress.step("migration audit"):
            audit = count_migration(messages, plan.migration, args.audit_sample)
            migration = audit.to_dict()
    with progress.step("policy scenarios and balanced boundaries"):
        return build_report(
            plan.source.describe(),
            layout,
            hist,
            hot,
            msg_rates=args.msg_rate,
            consumer_counts=args.consumers,
            fanout=args.fanout,
            policy=plan.policy,
            balance_buckets=args.balance_buckets,
            now_ms=int(time.time() * 1000),
            timings=progress.timings,
            engine=engine,
            migration=migration,
            pulsar_version=args.pulsar_version,
        )


def _refuse_null_keys(messages: DataFrame, key_column: str) -> DataFrame:
    """``messages``, failing the run on a null key with the job's own error (Spark's
    raise_error, which :func:`_spark_error` reads by its condition), before any engine sees
    it."""
    nulls = (
        f"the key column {key_column!r} holds nulls: pass --null-key TEXT to hash them as "
        "TEXT, or filter them out first"
    )
    key = F.col(KEY)
    return messages.withColumn(
        KEY, F.when(key.isNull(), F.raise_error(F.lit(nulls))).otherwise(key)
    )


def _spark_error(e: Exception, args: argparse.Namespace) -> JobError:
    """Spark's failure as the input problem behind it."""
    refusal = library_error(e)
    if refusal is not None:
        # The jar refused an argument: its message is the input problem, as written.
        return JobError(str(refusal))
    if isinstance(e, SparkRuntimeException) and e.getCondition() == "USER_RAISED_EXCEPTION":
        # A check of the job's own (raise_error on a bad row): its message as written.
        return JobError((e.getMessageParameters() or {}).get("errorMessage", str(e)))
    text = str(e).strip()
    if isinstance(e, Py4JJavaError):
        # The Java exception's own text, without the Python side's preamble.
        text = str(e.java_exception.toString()).strip()
    first = text.splitlines()[0] if text else type(e).__name__
    if isinstance(e, AnalysisException):
        return JobError(f"Spark cannot read the input: {first}")
    if isinstance(e, Py4JJavaError):
        return JobError(f"a Spark task failed: {first}")
    return JobError(f"a Python worker failed: {first}")


def session_conf() -> dict[str, str]:
    """The job's Spark settings."""
    return {
        # Spark's progress bar only helps on a terminal; in a log it is noise.
        "spark.ui.showConsoleProgress": str(sys.stderr.isatty()).lower(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    progress = Progress(sys.stderr)
    try:
        # Bad flags, files and layouts fail here, before a JVM starts.
        plan = make_plan(args)
        # A session already running (a notebook, the tests) is borrowed, not stopped.
        owns_session = SparkSession.getActiveSession() is None
        spark = get_session(args.master, "keyshared-bucketing", session_conf())
        if owns_session:
            spark.sparkContext.setLogLevel("ERROR")
        progress.note(f"Spark {spark.version} on {spark.sparkContext.master}")
        try:
            report = run(spark, plan, progress)
        except (
            AnalysisException,
            IllegalArgumentException,
            PythonException,
            Py4JJavaError,
            SparkRuntimeException,
        ) as e:
            raise _spark_error(e, args) from None
        finally:
            if owns_session:
                spark.stop()
    except JobError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    written = write_outputs(report, Path(args.out))
    _summary(report, written, sys.stdout)
    return 0


def _summary(report: Report, written: Sequence[Path], out: TextIO) -> None:
    t, s = report.totals, report.skew
    print(f"{t.messages:,} messages, {t.bytes:,} bytes, {t.keys:,} distinct keys", file=out)
    print(
        f"bucket skew {s['bucket_messages'].max_over_mean:.2f}x max/mean "
        f"(CV {s['bucket_messages'].cv:.2f}); balanced boundaries: "
        f"{report.balancing.buckets_balanced.max_over_mean:.2f}x",
        file=out,
    )
    if report.hot_keys:
        top = report.hot_keys[0]
        print(f"hottest key {top.key!r}: {top.messages:,} messages", file=out)
    if report.migration is not None:
        m = report.migration
        print(
            f"migration audit: {m['at_risk_keys']:,} of {m['total_keys']:,} keys at risk"
            f" ({m['risk']})",
            file=out,
        )
    print("wrote " + ", ".join(str(p) for p in written), file=out)


if __name__ == "__main__":
    sys.exit(main())
