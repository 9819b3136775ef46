"""The bulk-bucketing job's migration audit on local Spark: the library's numbers to the
message, in report.json and report.md, and its heatmap."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from keyshared import TopicLayout, create_migrated_metadata
from keyshared.routing import HashingScheme
from keyshared.scalable import audit_migration
from spark_udfs.audit import count_migration
from spark_udfs.job import main, migration_plan
from spark_udfs.sources import KEY, SIZE

KEYS = ["", "é", "日本語", "order-🙂", *(f"device-{i % 97}" for i in range(3000))]
PNG = b"\x89PNG\r\n\x1a\n"


def library_audit(
    keys: list[Any], source: str, n: int, target: TopicLayout | int, sample_size: int
) -> dict[str, Any]:
    counts = Counter(keys)
    audit = audit_migration(
        list(counts), source, n, target, weights=list(counts.values()), sample_size=sample_size
    )
    return audit.to_dict()


def same_numbers(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Every number equal; the sample as busy as the library's (ties may come in any order)."""
    sample_got, sample_want = got.pop("at_risk_sample"), want.pop("at_risk_sample")
    assert got == want
    counts = Counter(KEYS)
    assert [counts[k] for k in sample_got] == [counts[k] for k in sample_want]


@pytest.fixture(scope="module")
def parquet_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("audit") / "messages.parquet"
    pq.write_table(pa.table({"k": KEYS, "s": [7] * len(KEYS)}), path)
    return path


def run_job(out: Path, *args: str) -> dict[str, Any]:
    assert main([*args, "--out", str(out)]) == 0
    report: dict[str, Any] = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return report


def test_the_job_audits_a_move_to_its_layout(parquet_input: Path, tmp_path: Path) -> None:
    layout = create_migrated_metadata(
        "persistent://t/n/x", 6, hashing_scheme=HashingScheme.Murmur3_32Hash
    )
    path = tmp_path / "layout.json"
    path.write_text(layout.to_json())
    report = run_job(
        tmp_path / "out", "--input", str(parquet_input), "--key-column", "k", "--layout", str(path),
        "--audit-from", "pulsar:JavaStringHash:6", "--audit-sample", "5",
    )  # fmt: skip
    migration = report["migration"]
    same_numbers(migration, library_audit(KEYS, "pulsar:JavaStringHash", 6, layout, 5))
    assert migration["at_risk_keys"] > 0
    assert (tmp_path / "out" / "migration.png").read_bytes()[:8] == PNG
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "## Migration audit" in markdown
    assert f"Order at risk: {migration['at_risk_keys']:,} keys" in markdown


def test_the_job_audits_a_partition_count_change(parquet_input: Path, tmp_path: Path) -> None:
    report = run_job(
        tmp_path, "--input", str(parquet_input), "--key-column", "k", "--segments", "3",
        "--audit-from", "kafka:12", "--audit-to-partitions", "16",
    )  # fmt: skip
    same_numbers(report["migration"], library_audit(KEYS, "kafka", 12, 16, 20))
    assert report["migration"]["traffic"] and (tmp_path / "migration.png").exists()


def test_a_run_without_an_audit_writes_no_heatmap(parquet_input: Path, tmp_path: Path) -> None:
    report = run_job(tmp_path, "--input", str(parquet_input), "--key-column", "k")
    assert report["migration"] is None and not (tmp_path / "migration.png").exists()


def test_null_keys_are_unkeyed_and_binary_keys_are_placed(spark: SparkSession) -> None:
    keys: list[bytes | None] = [
        None,
        None,
        b"\xff\x00",
        b"a",
        b"a",
        b"",
        *(b"k%d" % i for i in range(50)),
    ]
    df = spark.createDataFrame([(k, 1) for k in keys], f"{KEY} binary, {SIZE} long")
    plan = migration_plan(_args(("librdkafka:murmur2_random", 4), 9), TopicLayout.initial(1))
    assert plan is not None
    got = count_migration(df, plan, 100).to_dict()
    counts = Counter(keys)
    want = audit_migration(
        list(counts),
        "librdkafka:murmur2_random",
        4,
        9,
        weights=list(counts.values()),
        sample_size=100,
    ).to_dict()
    assert got["unkeyed_keys"] >= 1 and got["unkeyed_traffic"] >= 2
    assert sorted(got.pop("at_risk_sample")) == sorted(want.pop("at_risk_sample"))
    assert got == want


def _args(audit_from: tuple[str, int], to_partitions: int | None) -> Any:
    import argparse

    return argparse.Namespace(
        audit_from=audit_from, audit_to_partitions=to_partitions, audit_sample=20
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--audit-from", "nope:4"], "--audit-from: source must be one of"),
        (["--audit-from", "kafka:0"], "--audit-from N must be in [1, 2,147,483,647]"),
        (
            ["--audit-from", "kafka:99999999999"],
            "--audit-from N must be in [1, 2,147,483,647] (a partition count's bound, a Java "
            "int), got 99,999,999,999",
        ),
        (
            ["--audit-from", "kafka:4", "--audit-to-partitions", "0"],
            "--audit-to-partitions must be in [1, 2,147,483,647]",
        ),
        (
            ["--audit-from", "kafka:4", "--audit-to-partitions", "99999999999"],
            "--audit-to-partitions must be in [1, 2,147,483,647] (a partition count's bound, a "
            "Java int), got 99,999,999,999",
        ),
        (
            ["--audit-from", "kafka:100000", "--audit-to-partitions", "100000"],
            "--audit-from: num_partitions x target columns = 100,000 x 100,000",
        ),
        (["--audit-to-partitions", "4"], "--audit-to-partitions needs --audit-from"),
        (
            ["--audit-from", "kafka:4", "--audit-sample", "-1"],
            "--audit-sample must be in [0, 100,000]",
        ),
        (
            ["--audit-from", "kafka:4", "--audit-sample", str(2**63)],
            "--audit-sample must be in [0, 100,000] (Spark's max_by bound), got "
            "9,223,372,036,854,775,808",
        ),
    ],
)
def test_bad_audit_arguments_fail_before_spark_runs(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_an_audit_source_needs_a_count(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--audit-from", "kafka"])
    assert "not PARTITIONER:N" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("arrow_type", "numpy_type", "source"),
    [(pa.int64(), np.int64, "iceberg:bucket"), (pa.int16(), np.int32, "spark:bucket")],
    ids=["bigint by Iceberg", "smallint by Spark (hashed as an int)"],
)
def test_integer_keys_are_audited_as_the_ints_they_are(
    tmp_path: Path, arrow_type: pa.DataType, numpy_type: type, source: str
) -> None:
    """Iceberg and Spark hash an int key as an int, not as its text: the job audits an
    integer key column as ints (Spark hashes byte and short columns as ints)."""
    ints = [(i * 7919) % 1000 - 500 for i in range(2000)]
    path = tmp_path / "ints.parquet"
    pq.write_table(pa.table({"k": pa.array(ints, type=arrow_type)}), path)
    report = run_job(
        tmp_path / "out", "--input", str(path), "--key-column", "k",
        "--audit-from", f"{source}:16", "--audit-to-partitions", "8", "--audit-sample", "5",
    )  # fmt: skip
    counts = Counter(ints)
    keys, weights = np.array(list(counts), dtype=numpy_type), list(counts.values())
    want = audit_migration(keys, source, 16, 8, weights=weights, sample_size=5).to_dict()
    as_text = audit_migration([str(k) for k in counts], source, 16, 8, weights=weights)
    got = report["migration"]
    sample = got.pop("at_risk_sample")
    assert [counts[int(k)] for k in sample] == [counts[int(k)] for k in want.pop("at_risk_sample")]
    assert got == want
    assert got["at_risk_keys"] != as_text.at_risk_keys
