"""Spark's ks_route under the 5.0.0-M1 release profile: both engines, every way the release
reaches them (an argument, a layout JSON's field, the conf), give the library's answers, and
the job's ``--pulsar-version`` routes and reports as that release."""

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import IllegalArgumentException
from pyspark.sql import SparkSession

from keyshared import RoutingTable, TopicLayout
from spark_udfs import LAYOUT_CONF, register, route_udf, routing_table, with_routing
from spark_udfs.job import main
from spark_udfs.jvm import VERSION_CONF, layout_json

M1 = "5.0.0-M1"
LAYOUT = TopicLayout.initial(3, 12).split_segment(1, 10)
KEYS = ["", "hello", "日本語", *(f"k{i}" for i in range(300))]


def library(pulsar_version: str) -> list[tuple[int, int]]:
    ids, buckets = LAYOUT.route_keys(KEYS, pulsar_version=pulsar_version)
    return list(zip(ids.tolist(), buckets.tolist(), strict=True))


@pytest.fixture
def keys(spark: SparkSession) -> str:
    spark.createDataFrame(list(enumerate(KEYS)), "i int, k string").createOrReplaceTempView("rk")
    return "rk"


def sql_routes(spark: SparkSession, expr: str = "ks_route(k)") -> list[tuple[int, int]]:
    return [tuple(r.r) for r in spark.sql(f"SELECT {expr} AS r FROM rk ORDER BY i").collect()]


@pytest.mark.parametrize("engine", ["jvm", "arrow"])
def test_both_engines_route_as_the_library_under_m1(
    spark: SparkSession, keys: str, engine: str
) -> None:
    assert library(M1) != library("master")
    frame = spark.table(keys)
    try:
        register(spark, LAYOUT, engine=engine, pulsar_version=M1)
        assert sql_routes(spark) == library(M1)
        routed = with_routing(frame, "k", LAYOUT, engine=engine, pulsar_version=M1)
        assert [(r.segment_id, r.bucket) for r in routed.orderBy("i").collect()] == library(M1)
        table = LAYOUT.routing_table_for(M1)
        routed = with_routing(frame, "k", table, engine=engine)  # the table's own release
        assert [(r.segment_id, r.bucket) for r in routed.orderBy("i").collect()] == library(M1)
        routed = with_routing(frame, "k", table, engine=engine, pulsar_version="master")
        assert [(r.segment_id, r.bucket) for r in routed.orderBy("i").collect()] == library(
            "master"
        )
    finally:
        register(spark, engine="jvm")


def test_the_arrow_udf_takes_the_release(spark: SparkSession, keys: str) -> None:
    udf = route_udf(LAYOUT, pulsar_version=M1)
    rows = spark.table(keys).select("i", udf("k").alias("r")).orderBy("i").collect()
    assert [tuple(r.r) for r in rows] == library(M1)


@pytest.mark.parametrize("engine", ["jvm", "arrow"])
def test_sql_takes_the_release_from_the_conf_and_the_layout_json(
    spark: SparkSession, keys: str, engine: str
) -> None:
    spark.conf.set(LAYOUT_CONF, LAYOUT.to_json())
    spark.conf.set(VERSION_CONF, M1)
    try:
        assert register(spark, engine=engine) == engine
        assert sql_routes(spark) == library(M1)
        spark.conf.unset(VERSION_CONF)
        assert register(spark, engine=engine) == engine
        assert sql_routes(spark) == library("master")
        # The layout JSON's own field wins over the conf.
        spark.conf.set(VERSION_CONF, "master")
        spark.conf.set(LAYOUT_CONF, layout_json(LAYOUT.routing_table_for(M1)))
        assert register(spark, engine=engine) == engine
        assert sql_routes(spark) == library(M1)
    finally:
        spark.conf.unset(LAYOUT_CONF)
        spark.conf.unset(VERSION_CONF)
        register(spark, engine="jvm")


def test_the_jvm_layout_argument_names_its_release(spark: SparkSession, keys: str) -> None:
    text = layout_json(LAYOUT.routing_table_for(M1)).replace("'", "\\'")
    assert sql_routes(spark, f"ks_route(k, '{text}')") == library(M1)
    m1_default = RoutingTable(routing_table(TopicLayout.initial(1)).segments, M1)
    assert register(spark, engine="jvm", pulsar_version=M1) == "jvm"
    try:
        rows = sql_routes(spark)
    finally:
        register(spark, engine="jvm")
    assert rows == [m1_default.route(k) for k in KEYS] == [(0, 0)] * len(KEYS)


def bad(version: str) -> dict[str, Any]:
    return {"pulsar_version": version, **json.loads(LAYOUT.to_json())}


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("5.0", "pulsar_version must be one of 'master', '5.0.0-M1', got '5.0'"),
        ("4.0", "pulsar_version '4.0': scalable topics need Pulsar 5.0"),
    ],
)
def test_both_engines_refuse_an_unknown_release_alike(
    spark: SparkSession, version: str, message: str
) -> None:
    text = json.dumps(bad(version)).replace("'", "\\'")
    with pytest.raises(IllegalArgumentException, match=f"layout.{message}"):
        spark.createDataFrame([("a",)], "k string").selectExpr(f"ks_route(k, '{text}')")
    spark.conf.set(LAYOUT_CONF, json.dumps(bad(version)))
    try:
        for engine in ("jvm", "arrow"):
            with pytest.raises(ValueError, match=f"{LAYOUT_CONF}: layout.{message}"):
                register(spark, engine=engine)
        spark.conf.unset(LAYOUT_CONF)
        spark.conf.set(VERSION_CONF, version)
        for engine in ("jvm", "arrow"):
            with pytest.raises(ValueError, match=f"{VERSION_CONF}"):
                register(spark, engine=engine)
            with pytest.raises(ValueError, match="pulsar_version"):
                with_routing(
                    spark.createDataFrame([("a",)], "k string"),
                    "k",
                    LAYOUT,
                    engine=engine,
                    pulsar_version=version,
                )
    finally:
        spark.conf.unset(LAYOUT_CONF)
        spark.conf.unset(VERSION_CONF)
        register(spark, engine="jvm")


def test_the_job_routes_and_reports_as_m1(spark: SparkSession, tmp_path: Path) -> None:
    layout = tmp_path / "layout.json"
    layout.write_text(LAYOUT.to_json(), encoding="utf-8")
    args = ["--synthetic-keys", "3000", "--key-space", "200", "--layout", str(layout)]
    assert main([*args, "--pulsar-version", M1, "--top", "200", "--out", str(tmp_path / "m1")]) == 0
    report = json.loads((tmp_path / "m1" / "report.json").read_text(encoding="utf-8"))
    assert report["pulsar_version"] == M1
    assert all("bucket_splits" not in s for s in report["layout"]["segments"])
    assert len(report["buckets"]) == len(LAYOUT.active_segments())
    for hot in report["hot_keys"]:
        assert (hot["segment_id"], hot["bucket"]) == LAYOUT.route(hot["key"], pulsar_version=M1)
    assert "routed as Pulsar 5.0.0-M1" in (tmp_path / "m1" / "report.md").read_text("utf-8")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--pulsar-version", "4.2"], "--pulsar-version '4.2': scalable topics need Pulsar 5.0"),
        (["--pulsar-version", "m1"], "--pulsar-version 'm1' is not a Pulsar release: give one of"),
        (["--pulsar-version", M1, "--balance-buckets", "4"], "no entry buckets"),
        (["--pulsar-version", M1, "--audit-from", "kafka:4"], "--audit-to-partitions"),
    ],
)
def test_the_job_refuses_what_m1_cannot_do_before_spark_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main([*extra, "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
