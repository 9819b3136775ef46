"""The Spark UDFs give the library's answers for the same keys, through DataFrames and SQL."""

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from pyspark.errors import SparkRuntimeException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import keyshared as ks
from keyshared import HashRange, RoutingTable
from spark_udfs import (
    bucket_hash_udf,
    key_hash_udf,
    register,
    route_udf,
    segment_hash_udf,
    with_routing,
)

KEYS = [
    "",
    "hello",
    "The quick brown fox jumps over the lazy dog",
    "é",
    "日本語のキー",
    "emoji-🙂-key",
    "x" * 1000,
    *(f"order-{i:05d}" for i in range(200)),
]
LAYOUT = [
    (7, HashRange(0x0000, 0x3FFF), [0x1000, 0x9000, 0xF000]),
    (3, HashRange(0x4000, 0xBFFF), ks.routing.equal_width_splits(5)),
    (12, HashRange(0xC000, 0xFFFF), []),
]


@pytest.fixture(autouse=True)
def small_batches(spark: SparkSession) -> Iterator[None]:
    """Batches of 16 rows, so every UDF sees many batches, most of them slices of a buffer."""
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "16")
    yield
    spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def frame(spark: SparkSession, keys: list[str] | list[bytes], kind: str) -> DataFrame:
    return spark.createDataFrame(list(enumerate(keys)), f"i int, k {kind}")


def by_row(df: DataFrame, column: str) -> list[Any]:
    return [row[column] for row in df.orderBy("i").collect()]


@pytest.mark.parametrize("large", [False, True], ids=["string", "large-string"])
def test_hash_udfs_match_the_library_on_strings(spark: SparkSession, large: bool) -> None:
    spark.conf.set("spark.sql.execution.arrow.useLargeVarTypes", str(large).lower())
    try:
        df = frame(spark, KEYS, "string").select(
            "i",
            key_hash_udf()("k").alias("h"),
            segment_hash_udf()("k").alias("s"),
            bucket_hash_udf()("k").alias("b"),
        )
        rows = df.orderBy("i").collect()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.useLargeVarTypes")
    want = ks.key_hashes(KEYS)
    assert [r.h for r in rows] == want.tolist()
    assert [r.s for r in rows] == (want >> 16).tolist()
    assert [r.b for r in rows] == (want & 0xFFFF).tolist()


def test_hash_udfs_match_the_library_on_binary(spark: SparkSession) -> None:
    keys = [k.encode() for k in KEYS] + [b"\xff\xfe\x00", bytes(range(256))]
    df = frame(spark, keys, "binary").select("i", key_hash_udf()("k").alias("h"))
    assert by_row(df, "h") == ks.key_hashes(keys).tolist()


def test_route_udf_matches_the_routing_table(spark: SparkSession) -> None:
    df = frame(spark, KEYS, "string").select("i", route_udf(LAYOUT)("k").alias("r"))
    segment_ids, buckets = RoutingTable(LAYOUT).route_keys(KEYS)
    got = [(r.segment_id, r.bucket) for r in by_row(df, "r")]
    assert got == list(zip(segment_ids.tolist(), buckets.tolist(), strict=True))


def test_with_routing_adds_columns_in_one_python_pass(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    df = frame(spark, KEYS, "string").withColumn("payload", F.lit(1))
    routed = with_routing(df, "k", LAYOUT, hashes=True, engine="arrow")
    assert routed.columns == [
        "i",
        "k",
        "payload",
        "segment_id",
        "bucket",
        "key_hash",
        "segment_hash",
        "bucket_hash",
    ]
    routed.explain()
    assert capsys.readouterr().out.count("ArrowEvalPython") == 1
    rows = routed.orderBy("i").collect()
    segment_ids, buckets = RoutingTable(LAYOUT).route_keys(KEYS)
    hashes = ks.key_hashes(KEYS)
    assert [r.segment_id for r in rows] == segment_ids.tolist()
    assert [r.bucket for r in rows] == buckets.tolist()
    assert [r.key_hash for r in rows] == hashes.tolist()
    assert [r.segment_hash for r in rows] == (hashes >> 16).tolist()
    assert [r.bucket_hash for r in rows] == (hashes & 0xFFFF).tolist()
    plain = with_routing(df, F.col("k"), RoutingTable(LAYOUT), engine="arrow")
    assert plain.columns == ["i", "k", "payload", "segment_id", "bucket"]
    assert [r.bucket for r in plain.orderBy("i").collect()] == buckets.tolist()


def test_a_null_key_fails_unless_null_key_is_given(spark: SparkSession) -> None:
    """with_routing fails on a null key; the UDF itself gives a null for it (Spark evaluates
    it over rows the query may leave out)."""
    keys = ["a", None, "b"]
    df = spark.createDataFrame(list(enumerate(keys)), "i int, k string")
    assert by_row(df.select("i", key_hash_udf()("k").alias("h")), "h")[1] is None
    with pytest.raises(SparkRuntimeException, match=r"with_routing: a key is null; pass null_key="):
        with_routing(df, "k", LAYOUT, engine="arrow").collect()
    hashed = df.select("i", key_hash_udf(null_key="fallback")("k").alias("h"))
    assert by_row(hashed, "h") == ks.key_hashes(keys, null_key="fallback").tolist()
    routed = with_routing(df, "k", LAYOUT, null_key=b"", engine="arrow")
    want = RoutingTable(LAYOUT).route_keys(keys, null_key=b"")
    assert by_row(routed, "segment_id") == want[0].tolist()


@pytest.mark.parametrize("engine", ["jvm", "arrow"])
def test_sql_functions(spark: SparkSession, engine: str) -> None:
    assert register(spark, LAYOUT, engine=engine) == engine
    frame(spark, KEYS, "string").createOrReplaceTempView("keys")
    rows = spark.sql(
        "SELECT i, ks_key_hash(k) AS h, ks_segment_hash(k) AS s, ks_bucket_hash(k) AS b,"
        " ks_route(k) AS r, ks_route(k).bucket AS bucket FROM keys ORDER BY i"
    ).collect()
    hashes = ks.key_hashes(KEYS)
    segment_ids, buckets = RoutingTable(LAYOUT).route_keys(KEYS)
    assert [r.h for r in rows] == hashes.tolist()
    assert [r.s for r in rows] == (hashes >> 16).tolist()
    assert [r.b for r in rows] == (hashes & 0xFFFF).tolist()
    assert [r.r.segment_id for r in rows] == segment_ids.tolist()
    assert [r.r.bucket for r in rows] == buckets.tolist()
    assert [r.bucket for r in rows] == buckets.tolist()


@pytest.mark.parametrize("engine", ["jvm", "arrow"])
def test_sql_route_defaults_to_one_segment_of_four_buckets(
    spark: SparkSession, engine: str
) -> None:
    register(spark, engine=engine)
    row = spark.sql("SELECT ks_route('hello') AS r").collect()[0]
    assert (row.r.segment_id, row.r.bucket) == (
        0,
        ks.bucket_index(0xFA47, [0x4000, 0x8000, 0xC000]),
    )


def test_a_bad_layout_fails_on_the_driver() -> None:
    with pytest.raises(ValueError):
        route_udf([(0, HashRange(0, 0x7FFF), [])])
    with pytest.raises(ValueError):
        route_udf([(0, HashRange.full(), [5, 3])])


def test_empty_partitions_and_frames(spark: SparkSession) -> None:
    empty = spark.createDataFrame([], "i int, k string").repartition(3)
    for engine in ("jvm", "arrow"):
        assert with_routing(empty, "k", LAYOUT, hashes=True, engine=engine).collect() == []
    assert np.array_equal(ks.key_hashes([]), np.array([], dtype=np.uint32))
