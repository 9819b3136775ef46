"""The bulk-bucketing job end to end on local Spark, and its driver-side report."""

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from keyshared import TopicLayout
from keyshared.scalable import display_key
from spark_udfs.bucketing import ARROW_SQL_CONF, count_load, sql_conf
from spark_udfs.job import _spark_error, build_parser, main
from spark_udfs.report import skew_of
from spark_udfs.sources import FileSource, SyntheticSource, read_messages, zipf_rank

KEYS = ["", "é", "日本語", "order-🙂", *(f"device-{i % 97}" for i in range(3000))]
SIZES = [(i * 37) % 1500 for i in range(len(KEYS))]


def run_job(out: Path, *args: str) -> dict[str, Any]:
    assert main([*args, "--out", str(out)]) == 0
    report: dict[str, Any] = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return report


def expected_buckets(
    layout: TopicLayout, keys: list[str], sizes: list[int]
) -> dict[tuple[int, int], tuple[int, int]]:
    segment_ids, buckets = layout.route_keys(keys)
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for seg, bucket, size in zip(segment_ids.tolist(), buckets.tolist(), sizes, strict=True):
        messages, total = out.get((seg, bucket), (0, 0))
        out[(seg, bucket)] = (messages + 1, total + size)
    return out


@pytest.fixture(scope="module")
def parquet_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("input") / "messages.parquet"
    pq.write_table(pa.table({"k": KEYS, "s": SIZES, "other": list(range(len(KEYS)))}), path)
    return path


def test_synthetic_run_end_to_end(spark: SparkSession, tmp_path: Path) -> None:
    args = ["--synthetic-keys", "20000", "--key-space", "500", "--zipf-s", "1.2", "--seed", "7"]
    report = run_job(tmp_path, *args, "--segments", "3", "--bucket-budget", "12", "--top", "5")

    messages = read_messages(spark, SyntheticSource(20_000, 500, 1.2, 7, 1024))
    want = messages.agg(F.count(F.lit(1)), F.sum("size"), F.countDistinct("key")).first()
    assert want is not None
    totals = report["totals"]
    assert (totals["messages"], totals["bytes"], totals["keys"]) == tuple(want)
    for part in ("segments", "buckets"):
        assert sum(x["load"]["messages"] for x in report[part]) == 20_000
        assert sum(x["load"]["bytes"] for x in report[part]) == totals["bytes"]
    assert len(report["segments"]) == 3 and len(report["buckets"]) == 12
    hot = [k["messages"] for k in report["hot_keys"]]
    assert len(hot) == 5 and hot == sorted(hot, reverse=True)
    assert report["hot_keys"][0]["key"] == "key-1"
    assert len(report["scenarios"]) == 9
    assert {s["decision"]["action"] for s in report["scenarios"]} <= {
        "split",
        "merge",
        "rebucket",
        "none",
    }
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    for heading in ("## Skew", "## Buckets", "## Hottest keys", "## Traffic-balanced"):
        assert heading in markdown

    # The balanced layout, applied, gives the bucket skew the report predicted.
    predicted = report["balancing"]["buckets_balanced"]["max_over_mean"]
    layout = tmp_path / "balanced-layout.json"
    rerun = run_job(tmp_path / "rerun", *args, "--layout", str(layout))
    assert rerun["skew"]["bucket_messages"]["max_over_mean"] == pytest.approx(predicted)
    assert rerun["balancing"]["layout"] is None


@pytest.mark.parametrize("engine", ["jvm", "arrow"])
def test_parquet_run_counts_every_message(parquet_input: Path, tmp_path: Path, engine: str) -> None:
    report = run_job(
        tmp_path,
        "--engine",
        engine,
        "--input",
        str(parquet_input),
        "--key-column",
        "k",
        "--size-column",
        "s",
        "--segments",
        "2",
        "--bucket-budget",
        "6",
    )
    want = expected_buckets(TopicLayout.initial(2, 6), KEYS, SIZES)
    got = {
        (b["segment_id"], b["bucket"]): (b["load"]["messages"], b["load"]["bytes"])
        for b in report["buckets"]
        if b["load"]["messages"]
    }
    assert got == want
    assert report["engine"] == engine
    assert f"- Routing engine: {engine}" in (tmp_path / "report.md").read_text(encoding="utf-8")
    assert report["totals"]["messages"] == len(KEYS)
    assert report["totals"]["bytes"] == sum(SIZES)
    assert report["totals"]["keys"] == len(set(KEYS))


def test_csv_and_json_inputs(spark: SparkSession, tmp_path: Path) -> None:
    table = pa.table({"k": KEYS[:50], "s": SIZES[:50]})
    pyarrow.csv.write_csv(table, tmp_path / "m.csv")
    lines = [json.dumps(row, ensure_ascii=False) for row in table.to_pylist()]
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name in ("m.csv", "m.jsonl"):
        source = FileSource(str(tmp_path / name), None, "k", "s", 0)
        rows = read_messages(spark, source).collect()
        assert sorted((r.key, r.size) for r in rows) == sorted(
            zip(KEYS[:50], SIZES[:50], strict=True)
        )


def test_numeric_and_binary_keys(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"n": [7, 8], "b": [b"\xff\x00", b"ok"]}), path)
    numeric = read_messages(spark, FileSource(str(path), "parquet", "n", None, 100)).collect()
    assert [(r.key, r.size) for r in numeric] == [("7", 100), ("8", 100)]
    binary = read_messages(spark, FileSource(str(path), "parquet", "b", None, 0)).collect()
    assert [display_key(r.key) for r in binary] == ["0xff00", "ok"]


def test_both_engines_give_identical_reports(tmp_path: Path) -> None:
    args = ["--synthetic-keys", "30000", "--key-space", "2000", "--segments", "3", "--top", "10"]
    jvm = run_job(tmp_path / "jvm", *args, "--engine", "jvm")
    arrow = run_job(tmp_path / "arrow", *args, "--engine", "arrow")
    assert (jvm.pop("engine"), arrow.pop("engine")) == ("jvm", "arrow")

    def timeless(report: dict[str, Any]) -> str:
        # Everything but the step timings and the clock the balanced layout is stamped with.
        report.pop("timings")
        return re.sub(r'"(created|sealed)_at_ms": \d+', "", json.dumps(report, sort_keys=True))

    assert timeless(jvm) == timeless(arrow)


@pytest.mark.parametrize("engine", ["jvm", "arrow"])
def test_null_keys_need_a_null_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], engine: str
) -> None:
    path = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"key": ["a", None, "b", None]}), path)
    assert main(["--input", str(path), "--engine", engine, "--out", str(tmp_path)]) == 2
    assert "holds nulls: pass --null-key" in capsys.readouterr().err
    report = run_job(tmp_path, "--input", str(path), "--null-key", "", "--engine", engine)
    assert report["totals"]["messages"] == 4
    assert {k["key"]: k["messages"] for k in report["hot_keys"]}[None] == 2


def test_errors_are_read_by_their_condition_not_their_text() -> None:
    """The job refuses null keys with its own raise_error; any other failure that happens to
    quote the engines' null-key text is reported as what it is."""
    args = build_parser().parse_args([])
    said = _spark_error(RuntimeError("ks_route: a key is null; pass null_key= ..."), args)
    assert str(said) == "a Python worker failed: ks_route: a key is null; pass null_key= ..."


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input", "no/such/file.parquet"], "--input: input not found: no/such/file.parquet"),
        (["--segments", "0"], "--segments must be in [1, 65,536]"),
        (["--bucket-budget", "0"], "--bucket-budget must be in [1, 65,536]"),
        (["--layout", "no/such/layout.json"], "--layout no/such/layout.json: no such file"),
        (["--synthetic-keys", "0"], "--synthetic-keys must be in [1, 9,223,372,036,854,775,807]"),
        (
            ["--synthetic-keys", str(2**63)],
            "--synthetic-keys must be in [1, 9,223,372,036,854,775,807] (Spark counts rows in "
            "longs), got 9,223,372,036,854,775,808",
        ),
        (["--key-space", "0"], "--key-space must be in [1, 9,007,199,254,740,992]"),
        (["--key-space", str(2**63)], "--key-space must be in [1, 9,007,199,254,740,992]"),
        (["--message-size", "-1"], "--message-size must be in [0, 2,147,483,647]"),
        (
            ["--message-size", str(2**63)],
            "--message-size must be in [0, 2,147,483,647] (a Pulsar message's bytes), got "
            "9,223,372,036,854,775,808",
        ),
        (
            ["--input", "x.csv", "--message-size", str(2**31)],
            "--message-size must be in [0, 2,147,483,647]",
        ),
        (["--top", "-1"], "--top must be in [0, 100,000] (Spark's max_by bound), got -1"),
        (["--top", str(2**63)], "--top must be in [0, 100,000] (Spark's max_by bound)"),
        (["--zipf-s", "-1"], "--zipf-s must be a positive number"),
        (["--fanout", "nan"], "--fanout must be a finite, non-negative number, got nan"),
        (["--fanout", "inf"], "--fanout must be a finite, non-negative number, got inf"),
        (["--balance-buckets", "70000"], "--balance-buckets must be in [1, 65535], got 70000"),
        (["--msg-rate", "1e306"], "--msg-rate must be at most 8.37e+298 with --fanout 1"),
        (["--msg-rate", "1e296", "--fanout", "1000"], "--msg-rate must be at most 8.37e+295"),
        (["--seed", str(2**63)], "--seed must be in [-2**63, 2**63 - 2], got 9223372036854775808"),
        (["--seed", str(2**63 - 1)], "--seed must be in [-2**63, 2**63 - 2]"),
        (["--seed", str(-(2**63) - 1)], "--seed must be in [-2**63, 2**63 - 2]"),
    ],
)
def test_bad_arguments_fail_before_spark_runs(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*args, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "report.json").exists()


def test_an_out_path_that_is_a_file_fails_before_spark_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = tmp_path / "taken"
    taken.write_text("")
    assert main(["--synthetic-keys", "10", "--out", str(taken)]) == 2
    assert f"--out {taken}: File exists" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        (b"key,size\na,10\nb,-5\n", ["--size-column", "size"], "holds a negative size"),
        (b"key,size\n", [], "the input holds no messages"),
        (b"key\n\xff\xfe\n\xfe\xff\nok\n", [], "holds U+FFFD, which Spark's reader puts"),
    ],
    ids=["negative size", "empty", "not UTF-8"],
)
def test_unusable_rows_fail_with_the_reason(
    spark: SparkSession,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    extra: list[str],
    message: str,
) -> None:
    """Rows the report cannot use stop the run with what is wrong with them, instead of a
    Python traceback after the run or keys merged without a word."""
    path = tmp_path / "in.csv"
    path.write_bytes(content)
    assert main(["--input", str(path), *extra, "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out" / "report.json").exists()


@pytest.mark.parametrize("rates", ["nan", "inf", "1000,nan", "-1"])
def test_rates_must_be_finite(
    rates: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--msg-rate", rates, "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert "need one or more finite, non-negative values" in capsys.readouterr().err


def test_sizes_that_do_not_parse_count_as_zero(spark: SparkSession, tmp_path: Path) -> None:
    # Spark 4 runs with ANSI mode on, where a plain cast of "abc" to bigint fails the job.
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    path = tmp_path / "sizes.csv"
    path.write_text("k,s\na,10\nb,abc\nc,\nd,1e400\n", encoding="utf-8")
    rows = read_messages(spark, FileSource(str(path), None, "k", "s", 0)).collect()
    assert sorted((r.key, r.size) for r in rows) == [("a", 10), ("b", 0), ("c", 0), ("d", 0)]
    report = run_job(
        tmp_path / "out", "--input", str(path), "--key-column", "k", "--size-column", "s"
    )
    assert report["totals"]["bytes"] == 10


def test_numeric_json_keys_hash_as_their_text(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "keys.jsonl"
    path.write_text(
        '{"k": 7}\n{"k": 123456789012345678901234567890}\n{"k": "x"}\n', encoding="utf-8"
    )
    rows = read_messages(spark, FileSource(str(path), None, "k", None, 1)).collect()
    assert sorted(r.key for r in rows) == ["123456789012345678901234567890", "7", "x"]


def test_bad_layout_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    assert main(["--layout", str(broken), "--out", str(tmp_path)]) == 2
    assert f"--layout {broken}: cannot be read" in capsys.readouterr().err
    gap = TopicLayout.initial(2).to_dict()
    gap["segments"] = gap["segments"][:1]
    (tmp_path / "gap.json").write_text(json.dumps(gap), encoding="utf-8")
    assert main(["--layout", str(tmp_path / "gap.json"), "--out", str(tmp_path)]) == 2
    assert f"--layout {tmp_path / 'gap.json'}: layout" in capsys.readouterr().err


def test_a_missing_key_column_names_the_columns(
    parquet_input: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--input", str(parquet_input), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "has no key column 'key'; its columns: k, s, other" in err
    assert (
        main(
            [
                "--input",
                str(parquet_input),
                "--key-column",
                "k",
                "--size-column",
                "nope",
                "--out",
                str(tmp_path),
            ]
        )
        == 2
    )
    assert "has no size column 'nope'" in capsys.readouterr().err


def test_zipf_ranks_stay_in_the_key_space(spark: SparkSession) -> None:
    for s in (0.5, 1.0, 1.1, 3.0):
        ranks = spark.range(5000).select(zipf_rank(F.rand(1), 100, s).alias("r"))
        low, high, top = ranks.agg(
            F.min("r"), F.max("r"), F.sum((F.col("r") == 1).cast("int"))
        ).first() or (0, 0, 0)
        assert low >= 1 and high <= 100
        # Skewed: the hottest key takes more than an even share.
        assert top > 5000 / 100


def test_skew() -> None:
    assert skew_of([5, 5, 5, 5]) == skew_of([]) == skew_of([0, 0]) == skew_of([1.0]) == skew_of([3])
    s = skew_of([4, 0, 0, 0])
    assert s.max_over_mean == 4.0 and math.isclose(s.cv, math.sqrt(3))
    assert np.isclose(skew_of([1, 3]).cv, 0.5)


@pytest.mark.parametrize("engine", ["jvm", "arrow"])
def test_count_load_finds_the_hottest_keys_in_the_same_pass(
    spark: SparkSession, engine: str
) -> None:
    # Key i appears i % 7 + 1 times with size i: ties in messages are broken by bytes.
    rows = [(f"k{i}", i) for i in range(300) for _ in range(i % 7 + 1)]
    messages = spark.createDataFrame(rows, "key string, size long")
    layout = TopicLayout.initial(3, 12)
    hist, hot = count_load(messages, layout, None, 10, engine)
    per_key = {f"k{i}": (i % 7 + 1, (i % 7 + 1) * i) for i in range(300)}
    want = sorted(per_key.items(), key=lambda kv: kv[1], reverse=True)[:10]
    assert [(h.key, h.messages, h.bytes) for h in hot] == [(k, m, b) for k, (m, b) in want]
    segment_ids, buckets = layout.route_keys([h.key for h in hot])
    assert [(h.segment_id, h.bucket) for h in hot] == list(zip(segment_ids, buckets, strict=True))
    assert int(hist.messages.sum()) == len(rows) and int(hist.keys.sum()) == 300
    assert count_load(messages, layout, None, 0, engine)[1] == []
    assert len(count_load(messages, layout, None, 500, engine)[1]) == 300


def test_sql_conf_sets_and_then_restores_the_session(spark: SparkSession) -> None:
    key = "spark.sql.adaptive.coalescePartitions.parallelismFirst"
    spark.conf.unset(key)
    with pytest.raises(RuntimeError), sql_conf(spark, {key: "false"}):
        assert spark.conf.get(key) == "false"
        raise RuntimeError
    assert spark.conf.get(key, None) is None
    spark.conf.set(key, "false")
    with sql_conf(spark, {key: "true"}):
        assert spark.conf.get(key) == "true"
    assert spark.conf.get(key) == "false"
    spark.conf.unset(key)


@pytest.mark.parametrize("engine", ["jvm", "arrow"])
def test_count_load_leaves_the_session_conf_as_it_was(spark: SparkSession, engine: str) -> None:
    messages = spark.createDataFrame([("a", 1), ("b", 2)], "key string, size long")
    before = {key: spark.conf.get(key, None) for key in ARROW_SQL_CONF}
    count_load(messages, TopicLayout.initial(2), None, 1, engine)
    assert {key: spark.conf.get(key, None) for key in ARROW_SQL_CONF} == before
