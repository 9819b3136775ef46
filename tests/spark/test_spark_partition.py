"""``ks_partition``: the JVM function, the Arrow UDF, the library and, for ``spark:bucket``,
Spark's own ``pmod(hash(key), n)`` give the same partition for every key under every
partitioner, and refuse the same arguments."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.errors import AnalysisException, IllegalArgumentException, PythonException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from test_spark_jvm import keyshared_sql, spark_sql

from keyshared.routing import KeyType, Partitioner, partitions
from spark_udfs import HIVE_CLASSES, jar_path, register, with_partition
from spark_udfs.jvm import ENGINES

PARTITIONERS = list(Partitioner)
TYPED = (Partitioner.ICEBERG_BUCKET, Partitioner.SPARK_BUCKET)
N_KEYS = 100_000
COUNTS = (1, 7, 2**31 - 1)


@pytest.fixture(scope="module")
def keys(spark: SparkSession) -> Iterator[DataFrame]:
    """100k rows: string keys (empty, ASCII, non-ASCII, null, and strings holding bytes that
    are not UTF-8), binary keys (empty, with NUL bytes, null), ints and bigints (null too)."""
    text = F.expr(
        "CASE id % 6"
        " WHEN 0 THEN ''"
        " WHEN 1 THEN concat('order-', id)"
        " WHEN 2 THEN concat(repeat('é日本🙂', cast(id % 9 AS int)), id)"
        " WHEN 3 THEN cast(substring(unhex(sha2(cast(id AS string), 256)), 1, cast(id % 9 AS int))"
        "  AS string)"
        " WHEN 4 THEN IF(id % 100 = 4, NULL, cast(id AS string))"
        " ELSE substring(sha2(cast(id AS string), 512), 1, cast(id % 13 AS int)) END"
    )
    binary = F.expr(
        "CASE id % 4"
        " WHEN 0 THEN substring(unhex(sha2(cast(id AS string), 256)), 1, cast(id % 33 AS int))"
        " WHEN 1 THEN concat(X'00', unhex(sha2(cast(id AS string), 224)))"
        " WHEN 2 THEN IF(id % 100 = 2, NULL, X'')"
        " ELSE cast(concat('ключ-', id) AS binary) END"
    )
    narrow = F.expr("IF(id % 97 = 0, NULL, hash(id))")
    wide = F.expr("IF(id % 89 = 0, NULL, xxhash64(id))")
    df = spark.range(0, N_KEYS, 1, 2).select(
        F.col("id").alias("i"),
        text.alias("s"),
        binary.alias("b"),
        narrow.alias("n32"),
        wide.alias("n64"),
    )
    df = df.cache()
    df.count()
    yield df
    df.unpersist()


def column_kinds(p: Partitioner) -> tuple[str, ...]:
    return ("s", "b", "n32", "n64") if p in TYPED else ("s", "b")


def engine_answers(df: DataFrame, engine: str, n: int) -> pa.Table:
    """Every partitioner's partition of every key column on one engine."""
    out = df
    for p in PARTITIONERS:
        for c in column_kinds(p):
            out = with_partition(out, c, n, p, name=f"{c}_{p.name}", engine=engine)
    return out.toArrow().sort_by("i")


def library_answer(keys: pa.ChunkedArray, n: int, p: Partitioner) -> list[int | None]:
    parts = partitions(keys.combine_chunks(), n, p)
    return [None if v < 0 else int(v) for v in parts]


@pytest.mark.parametrize("n", COUNTS)
def test_both_engines_match_the_library_on_every_partitioner(keys: DataFrame, n: int) -> None:
    jvm, arrow = (engine_answers(keys, e, n) for e in ENGINES)
    for p in PARTITIONERS:
        for c in column_kinds(p):
            name = f"{c}_{p.name}"
            want = library_answer(jvm.column(c), n, p)
            assert jvm.column(name).to_pylist() == want, name
            assert arrow.column(name).to_pylist() == want, name


@pytest.mark.parametrize("n", COUNTS)
def test_spark_bucket_is_sparks_own_pmod_of_hash(keys: DataFrame, n: int) -> None:
    """Spark's ``pmod(hash(key), n)``, as ``bucketBy`` buckets rows, null keys included."""
    for engine in ENGINES:
        df = keys
        for c in column_kinds(Partitioner.SPARK_BUCKET):
            df = with_partition(df, c, n, "spark:bucket", name=f"ks_{c}", engine=engine)
            df = df.withColumn(f"spark_{c}", F.expr(f"pmod(hash({c}), {n})"))
        table = df.toArrow()
        for c in column_kinds(Partitioner.SPARK_BUCKET):
            assert table.column(f"ks_{c}").to_pylist() == table.column(f"spark_{c}").to_pylist()


@pytest.mark.parametrize("width", ["tinyint", "smallint"])
def test_byte_and_short_keys_are_ints_on_both_engines(keys: DataFrame, width: str) -> None:
    """Spark hashes a byte or short column as an int, and Iceberg stores one as an int: both
    engines take them so, in SQL and from Python, as the library takes NumPy's and Arrow's."""
    narrow = keys.select("i", F.expr(f"CAST(n32 % 100 AS {width})").alias("k"))
    for engine in ENGINES:
        df = with_partition(narrow, "k", 7, "spark:bucket", name="spark", engine=engine)
        df = with_partition(df, "k", 7, "iceberg:bucket", name="iceberg", engine=engine)
        table = df.withColumn("own", F.expr("pmod(hash(k), 7)")).toArrow()
        ints = table.column("k").cast(pa.int32())
        assert table.column("spark").to_pylist() == table.column("own").to_pylist()
        for name in ("spark", "iceberg"):
            want = partitions(ints.combine_chunks(), 7, f"{name}:bucket").tolist()
            got = [-1 if v is None else v for v in table.column(name).to_pylist()]
            assert got == want, (engine, name)


def test_interpreted_evaluation_matches_code_generation(
    spark: SparkSession, keys: DataFrame
) -> None:
    sample = keys.limit(5_000)
    generated = engine_answers(sample, "jvm", 7)
    spark.conf.set("spark.sql.codegen.wholeStage", "false")
    spark.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
    try:
        assert engine_answers(sample, "jvm", 7) == generated
    finally:
        spark.conf.unset("spark.sql.codegen.wholeStage")
        spark.conf.unset("spark.sql.codegen.factoryMode")


@settings(max_examples=15)
@given(
    strings=st.lists(st.one_of(st.text(), st.none()), min_size=1, max_size=40),
    blobs=st.lists(st.one_of(st.binary(), st.none()), min_size=1, max_size=40),
    n=st.integers(1, 2**31 - 1),
)
def test_drawn_keys_and_counts(
    spark: SparkSession, strings: list[str | None], blobs: list[bytes | None], n: int
) -> None:
    size = max(len(strings), len(blobs))
    rows = [
        (i, strings[i] if i < len(strings) else None, blobs[i] if i < len(blobs) else None)
        for i in range(size)
    ]
    df = spark.createDataFrame(rows, "i long, s string, b binary")
    jvm, arrow = (_answers(df, e, n) for e in ENGINES)
    assert jvm == arrow
    for p in PARTITIONERS:
        for c in ("s", "b"):
            keys = [r[1 if c == "s" else 2] for r in rows]
            want = [None if v < 0 else int(v) for v in partitions(keys, n, p)]
            assert jvm[f"{c}_{p.name}"] == want, (p, c)


def _answers(df: DataFrame, engine: str, n: int) -> dict[str, list[int | None]]:
    out = df
    for p in PARTITIONERS:
        for c in ("s", "b"):
            out = with_partition(out, c, n, p, name=f"{c}_{p.name}", engine=engine)
    table = out.toArrow().sort_by("i")
    return {name: table.column(name).to_pylist() for name in table.column_names[3:]}


def test_sql_on_both_engines(spark: SparkSession) -> None:
    keys, values = ["a", None, "", "é"], [5, None, 2**40, 0]
    df = spark.createDataFrame(
        list(zip(range(4), keys, values, strict=True)), "i int, k string, v bigint"
    )
    df.createOrReplaceTempView("partition_keys")
    sql = (
        "SELECT ks_partition(k, 7, 'kafka') AS kafka,"
        " ks_partition(k, 7, 'librdkafka:consistent_random') AS consistent_random,"
        " ks_partition(v, 16, 'iceberg:bucket') AS iceberg,"
        " ks_partition(v, 16, 'spark:bucket') AS spark_bucket, pmod(hash(v), 16) AS spark"
        " FROM partition_keys ORDER BY i"
    )
    answers = []
    for engine in ENGINES:
        register(spark, engine=engine)
        answers.append([r.asDict() for r in spark.sql(sql).collect()])
    register(spark, engine="jvm")
    assert answers[0] == answers[1]

    def library(
        batch: list[Any], n: int, p: str, key_type: KeyType | None = None
    ) -> list[int | None]:
        return [None if v < 0 else int(v) for v in partitions(batch, n, p, key_type=key_type)]

    want = {
        "kafka": library(keys, 7, "kafka"),
        "consistent_random": library(keys, 7, "librdkafka:consistent_random"),
        "iceberg": library(values, 16, "iceberg:bucket", "long"),
        "spark_bucket": library(values, 16, "spark:bucket", "long"),
    }
    for name, column in want.items():
        assert [r[name] for r in answers[0]] == column, name
    assert [r["spark_bucket"] for r in answers[0]] == [r["spark"] for r in answers[0]]
    assert want["kafka"][1] is None and want["consistent_random"][2] is None


BAD_SQL = [
    "ks_partition(k, 7, 'kafka2')",
    "ks_partition(k, 7, k)",
    "ks_partition(k, 0, 'kafka')",
    "ks_partition(k, 2147483648, 'kafka')",
    "ks_partition(k, i, 'kafka')",
    "ks_partition(k, CAST(NULL AS int), 'kafka')",
    "ks_partition(k, 7, CAST(NULL AS string))",
    "ks_partition(i, 7, 'kafka')",
    "ks_partition(k, '7', 'kafka')",
]


@pytest.mark.parametrize("call", BAD_SQL)
def test_bad_sql_arguments_are_refused_on_both_engines(spark: SparkSession, call: str) -> None:
    """The JVM function refuses at analysis. The Arrow UDF sees its arguments only as columns
    of values, so it refuses when it runs, with the library's message, and takes a column
    argument for a constant unless it varies within a batch: here it does (one partition)."""
    df = spark.createDataFrame([(1, "a"), (2, "b")], "i int, k string").coalesce(1)
    register(spark, engine="jvm")
    with pytest.raises((AnalysisException, IllegalArgumentException)):
        df.selectExpr(call)
    register(spark, engine="arrow")
    try:
        with pytest.raises((AnalysisException, PythonException)):
            df.selectExpr(call).collect()
    finally:
        register(spark, engine="jvm")


@pytest.mark.parametrize("engine", ENGINES)
def test_bad_arguments_fail_on_the_driver(spark: SparkSession, engine: str) -> None:
    df = spark.createDataFrame([(1, "a", 1.5)], "i int, k string, d double")
    with pytest.raises(ValueError, match="partitioner"):
        with_partition(df, "k", 7, "kafka2", engine=engine)
    with pytest.raises(ValueError, match="num_partitions"):
        with_partition(df, "k", 0, "kafka", engine=engine)
    with pytest.raises(TypeError):
        with_partition(df, "i", 7, "kafka", engine=engine)
    with pytest.raises(TypeError):
        with_partition(df, "d", 7, "spark:bucket", engine=engine)


def test_hive_form_in_the_spark_sql_shell(tmp_path: Path) -> None:
    """KsPartition, the Hive class, alone (no session extension) gives the library's
    partitions; with the extension its calls run as the native function."""
    keys = ["", "hello", "日本語", *(f"key-{i}" for i in range(50))]
    values = ", ".join(f"('{k}')" for k in keys)
    create = (
        "CREATE TEMPORARY FUNCTION hive_ks_partition AS "
        f"'{HIVE_CLASSES['ks_partition']}' USING JAR '{jar_path()}';"
    )
    calls = ", ".join(f"hive_ks_partition(k, 7, '{p.value}')" for p in PARTITIONERS)
    query = f"SELECT k, {calls} FROM VALUES {values} AS t(k) ORDER BY k;"
    rows = spark_sql(tmp_path, "--jars", str(jar_path()), "-e", create + query)
    ordered = sorted(keys)
    for j, p in enumerate(PARTITIONERS):
        want = [str(v) if v >= 0 else "NULL" for v in partitions(ordered, 7, p).tolist()]
        assert [r[j + 1] for r in rows] == want, p

    same = " AND ".join(
        f"ks_partition(k, 7, '{p.value}') <=> hive_ks_partition(k, 7, '{p.value}')"
        for p in PARTITIONERS
    )
    native = keyshared_sql(
        tmp_path, f"{create} SELECT count_if(NOT ({same})) FROM VALUES {values} AS t(k);"
    )
    assert native == [["0"]]
