"""The JVM functions (the keyshared jar) give the Rust kernels' answers bit for bit, from Python,
from SQL with a layout argument or conf, and from SQL alone in the spark-sql shell."""

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.errors import AnalysisException, IllegalArgumentException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import keyshared as ks
from keyshared import HashRange, RoutingTable, TopicLayout
from spark_udfs import (
    EXTENSIONS,
    HIVE_CLASSES,
    LAYOUT_CONF,
    jar_path,
    jvm_usable,
    key_hash_udf,
    register,
    route_udf,
    with_routing,
)
from spark_udfs.jvm import column, layout_json, partition_column, register_functions
from spark_udfs.layouts import routing_table

LAYOUT = [
    (7, HashRange(0x0000, 0x3FFF), [0x1000, 0x2000, 0x3000]),
    (3, HashRange(0x4000, 0xBFFF), ks.routing.equal_width_splits(5)),
    (12, HashRange(0xC000, 0xFFFF), []),
]
LAYOUT_JSON = layout_json(routing_table(LAYOUT))
N_KEYS = 1_000_000
FUNCTIONS = ("ks_key_hash", "ks_segment_hash", "ks_bucket_hash", "ks_sticky_key_hash")


@pytest.fixture(autouse=True)
def jvm_functions(spark: SparkSession) -> None:
    """The JVM functions under their SQL names, whatever an earlier test registered there (the
    Spark tests share one session, and registering the Arrow UDFs replaces these)."""
    register(spark, engine="jvm")


def sticky(hashes: np.ndarray) -> np.ndarray:
    """SPEC 1's sticky key hash of key hashes: (key_hash & 0x7FFFFFFF) % 65535 + 1."""
    return (hashes.astype(np.int64) & 0x7FFFFFFF) % 65535 + 1


def expected(keys: pa.Array | list[str] | list[bytes]) -> dict[str, np.ndarray]:
    """Every function's answer from the Rust kernels."""
    hashes = ks.key_hashes(keys)
    segment_ids, buckets = RoutingTable(LAYOUT).route_keys(keys)
    return {
        "ks_key_hash": hashes.astype(np.int64),
        "ks_segment_hash": (hashes >> 16).astype(np.int64),
        "ks_bucket_hash": (hashes & 0xFFFF).astype(np.int64),
        "ks_sticky_key_hash": sticky(hashes),
        "segment_id": segment_ids.astype(np.int64),
        "bucket": buckets.astype(np.int64),
    }


def jvm_answers(df: DataFrame, key: str) -> pa.Table:
    """Every JVM function of ``key``, by SQL with the layout as an argument."""
    calls = [f"{f}({key}) AS {f}" for f in FUNCTIONS]
    route = f"ks_route({key}, '{LAYOUT_JSON}')"
    return df.selectExpr(
        "i", key, *calls, f"{route}.segment_id AS segment_id", f"{route}.bucket AS bucket"
    ).toArrow()


def check(table: pa.Table, key: str) -> None:
    table = table.sort_by("i")
    want = expected(table.column(key).combine_chunks())
    for name, values in want.items():
        got = table.column(name).to_numpy().astype(np.int64)
        assert np.array_equal(got, values), name


@pytest.fixture(scope="module")
def many_keys(spark: SparkSession) -> Iterator[DataFrame]:
    """1M string keys (empty, ASCII, non-ASCII, some 3 KB long) and as many binary keys
    (with NUL bytes, of every length from 0 to 32 and longer)."""
    text = F.expr(
        "CASE id % 7"
        " WHEN 0 THEN ''"
        " WHEN 1 THEN concat('order-', id)"
        " WHEN 2 THEN concat(repeat('é日本🙂', cast(id % 9 AS int)), id)"
        " WHEN 3 THEN repeat(sha2(cast(id AS string), 256), IF(id % 1000 = 3, 50, 1))"
        " WHEN 4 THEN substring(sha2(cast(id AS string), 512), 1, cast(id % 13 AS int))"
        " WHEN 5 THEN concat(id, char(0), 'x')"
        " ELSE cast(id AS string) END"
    )
    binary = F.expr(
        "CASE id % 4"
        " WHEN 0 THEN substring(unhex(sha2(cast(id AS string), 256)), 1, cast(id % 33 AS int))"
        " WHEN 1 THEN concat(X'00', unhex(sha2(cast(id AS string), 224)), X'0000')"
        " WHEN 2 THEN X''"
        " ELSE cast(concat('ключ-', id) AS binary) END"
    )
    df = spark.range(0, N_KEYS, 1, 2).select(
        F.col("id").alias("i"), text.alias("s"), binary.alias("b")
    )
    df = df.cache()
    df.count()
    yield df
    df.unpersist()


def test_the_session_loads_the_jar(spark: SparkSession) -> None:
    assert jvm_usable(spark)
    assert jar_path().is_file()
    assert EXTENSIONS in spark.conf.get("spark.sql.extensions", "")


def test_every_function_matches_the_kernels_on_a_million_string_keys(
    many_keys: DataFrame,
) -> None:
    check(jvm_answers(many_keys, "s"), "s")


def test_every_function_matches_the_kernels_on_a_million_binary_keys(
    many_keys: DataFrame,
) -> None:
    table = jvm_answers(many_keys, "b")
    assert any(b"\x00" in k for k in table.column("b").to_pylist()[:100])
    check(table, "b")


def test_interpreted_evaluation_matches_code_generation(
    spark: SparkSession, many_keys: DataFrame
) -> None:
    spark.conf.set("spark.sql.codegen.wholeStage", "false")
    spark.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
    try:
        check(jvm_answers(many_keys.limit(20_000), "s"), "s")
    finally:
        spark.conf.unset("spark.sql.codegen.wholeStage")
        spark.conf.unset("spark.sql.codegen.factoryMode")


@settings(max_examples=20)
@given(
    st.lists(st.text(), min_size=1, max_size=40),
    st.lists(st.binary(), min_size=1, max_size=40),
)
def test_drawn_keys_match_the_kernels(
    spark: SparkSession, strings: list[str], blobs: list[bytes]
) -> None:
    for keys, kind, name in ((strings, "string", "s"), (blobs, "binary", "b")):
        df = spark.createDataFrame(list(enumerate(keys)), f"i long, {name} {kind}")
        check(jvm_answers(df, name), name)


def test_with_routing_on_the_jvm_is_one_codegen_stage_and_matches_arrow(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = ["", "hello", "é", "x" * 1000, *(f"k{i}" for i in range(300))]
    df = spark.createDataFrame(list(enumerate(keys)), "i int, k string")
    routed = with_routing(df, "k", LAYOUT, hashes=True, engine="jvm")
    routed.explain()
    plan = capsys.readouterr().out
    assert "*(1) Project" in plan and "ks_route(k#" in plan and "EvalPython" not in plan
    arrow = with_routing(df, "k", LAYOUT, hashes=True, engine="arrow")
    assert routed.orderBy("i").collect() == arrow.orderBy("i").collect()
    assert with_routing(df, "k", LAYOUT).columns == [*df.columns, "segment_id", "bucket"]


def test_nulls_fail_unless_a_null_key_is_given(spark: SparkSession) -> None:
    df = spark.createDataFrame([(0, "a"), (1, None)], "i int, k string")
    for function in (*FUNCTIONS, "ks_route"):
        with pytest.raises(Py4JJavaError, match=f"{function}: a key is null; pass null_key="):
            df.selectExpr(f"{function}(k)").collect()
    with pytest.raises(Py4JJavaError, match="pass null_key="):
        with_routing(df, "k", LAYOUT, engine="jvm").collect()
    for null_key in ("fallback", b"\x00\xff"):
        want = expected(["a", null_key] if isinstance(null_key, str) else [b"a", null_key])
        literal = f"'{null_key}'" if isinstance(null_key, str) else "X'00FF'"
        calls = [f"{f}(k, {literal}) AS {f}" for f in FUNCTIONS]
        route = f"ks_route(k, '{LAYOUT_JSON}', {literal})"
        rows = df.selectExpr("i", *calls, f"{route} AS r").orderBy("i").collect()
        for f in FUNCTIONS:
            assert [r[f] for r in rows] == want[f].tolist()
        assert [tuple(r.r) for r in rows] == list(
            zip(want["segment_id"].tolist(), want["bucket"].tolist(), strict=True)
        )
        routed = with_routing(df, "k", LAYOUT, null_key=null_key, engine="jvm")
        assert [r.bucket for r in routed.orderBy("i").collect()] == want["bucket"].tolist()


def test_expressions_are_equal_by_their_arguments_as_catalyst_compares_them(
    spark: SparkSession,
) -> None:
    # Catalyst finds repeated subexpressions and compares plans by equals and hashCode, and
    # copies a tree by the product's elements, which are the constructor's arguments.
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    utils = jvm.org.apache.spark.sql.classic.ExpressionUtils
    key = F.col("k")
    table = routing_table(LAYOUT)

    def route(null_key: bytes) -> Any:
        return utils.expression(column(spark, "ks_route", key, table, null_key)._jc)

    def partition(n: int) -> Any:
        return utils.expression(partition_column(spark, key, n, "kafka")._jc)

    routed, again = route(b"\x00n"), route(b"\x00n")
    assert routed.equals(again) and routed.hashCode() == again.hashCode()
    assert not routed.equals(route(b"\x00m"))
    assert routed.productArity() == 4 and routed.productElement(0).equals(utils.expression(key._jc))
    assert bytes(routed.productElement(3)) == b"\x00n"
    assert partition(8).equals(partition(8)) and partition(8).hashCode() == partition(8).hashCode()
    assert not partition(8).equals(partition(9)) and not partition(8).equals(routed)
    assert partition(8).productArity() == 3 and partition(8).productElement(2) == 8
    with pytest.raises(Py4JJavaError, match="IndexOutOfBoundsException: 3"):
        partition(8).productElement(3)


def test_register_binds_the_layout_and_null_key_for_sql(spark: SparkSession) -> None:
    keys = ["x", None, "日本", ""]
    spark.createDataFrame(list(enumerate(keys)), "i int, k string").createOrReplaceTempView("jk")
    try:
        assert register(spark, LAYOUT, null_key="nul", engine="jvm") == "jvm"
        rows = spark.sql("SELECT ks_route(k) AS r, ks_key_hash(k) AS h FROM jk ORDER BY i")
        want = expected(["x", "nul", "日本", ""])
        got = rows.collect()
        assert [r.h for r in got] == want["ks_key_hash"].tolist()
        assert [r.r.segment_id for r in got] == want["segment_id"].tolist()
        assert [r.r.bucket for r in got] == want["bucket"].tolist()
    finally:
        register(spark, engine="jvm")


def test_sql_routes_under_the_layout_conf(spark: SparkSession) -> None:
    """The functions as the session extension adds them (no layout given) read the conf at
    each query; ``register`` fixes the layout instead (test_spark_engines)."""
    register_functions(spark, None, None)
    layout = TopicLayout.initial(4, 16).split_segment(2, 10)
    keys = [f"user-{i}" for i in range(200)]
    spark.createDataFrame(list(enumerate(keys)), "i int, k string").createOrReplaceTempView("ck")
    spark.conf.set(LAYOUT_CONF, layout.to_json())
    try:
        rows = spark.sql("SELECT ks_route(k) AS r FROM ck ORDER BY i").collect()
    finally:
        spark.conf.unset(LAYOUT_CONF)
    segment_ids, buckets = layout.route_keys(keys)
    assert [tuple(r.r) for r in rows] == list(
        zip(segment_ids.tolist(), buckets.tolist(), strict=True)
    )
    default = spark.sql("SELECT ks_route('hello') AS r").collect()[0].r
    assert tuple(default) == (0, ks.bucket_index(0xFA47, [0x4000, 0x8000, 0xC000]))


MALFORMED_LAYOUTS = [
    ("{not json", "layout is not JSON: Unexpected character"),
    (f"{LAYOUT_JSON} []", "layout is not JSON: extra data after the layout at char"),
    (f"{LAYOUT_JSON}\n{LAYOUT_JSON}", "layout is not JSON: extra data after the layout at char"),
    (f"{LAYOUT_JSON} x", "layout is not JSON: Unrecognized token 'x'"),
    ('{"segments": [{"segment_id": 0, "hash_range": "0000-7fff"}]}', "but end at 7fff"),
    ('{"segments": [], "pulsar_version": "4.0"}', "layout.pulsar_version '4.0'"),
]


@pytest.mark.parametrize(("conf", "message"), MALFORMED_LAYOUTS)
def test_a_malformed_layout_conf_fails_the_query_when_it_is_built(
    spark: SparkSession, conf: str, message: str
) -> None:
    """ks_route without a layout (the session extension's functions) reads the conf when the
    query is analysed: a malformed one fails the query there, naming the conf and what is
    wrong with its value, as register() does for both engines. A value with more after the
    layout (a second layout, a stray token) was routed by its first layout."""
    register_functions(spark, None, None)
    df = spark.createDataFrame([("a",)], "k string")
    spark.conf.set(LAYOUT_CONF, conf)
    try:
        with pytest.raises(IllegalArgumentException) as refused:
            df.selectExpr("ks_route(k) AS r")
        with pytest.raises(ValueError) as by_register:
            register(spark, engine="arrow")
    finally:
        spark.conf.unset(LAYOUT_CONF)
    said = str(refused.value)
    assert said.startswith(f"{LAYOUT_CONF}: ") and message in said, said
    assert str(by_register.value).startswith(f"{LAYOUT_CONF}: ")


@pytest.mark.parametrize(
    ("sql", "error", "message"),
    [
        (
            "ks_key_hash(1)",
            AnalysisException,
            "ks_key_hash takes a string or binary key, got int: cast the key to string or binary",
        ),
        ("ks_route(k, '{not json')", IllegalArgumentException, "layout is not JSON"),
        (
            """ks_route(k, '{"segments": [{"segment_id": 0, "hash_range": "0000-ffff"}]} []')""",
            IllegalArgumentException,
            "layout is not JSON: extra data after the layout at char 61",
        ),
        (
            """ks_route(k, '{"segments": [{"segment_id": 0, "hash_range": "0000-7fff"}]}')""",
            IllegalArgumentException,
            "must tile 0000-ffff, but end at 7fff",
        ),
        (
            """ks_route(k, '{"segments": [{"segment_id": 0, "hash_range": "0000-ffff",
            "bucket_splits": [9, 3]}]}')""",
            IllegalArgumentException,
            r"bucket_splits must be strictly ascending: \[1\] = 3 follows 9",
        ),
        ("ks_key_hash(k, k)", IllegalArgumentException, "null_key must be a constant"),
        ("ks_key_hash(k, 5)", IllegalArgumentException, "null_key must be a string or binary"),
        ("ks_route(k, NULL, 'x', 'y')", IllegalArgumentException, "takes 1 to 3 arguments"),
    ],
)
def test_bad_sql_arguments_fail_at_analysis(
    spark: SparkSession, sql: str, error: type[Exception], message: str
) -> None:
    df = spark.createDataFrame([("a",)], "k string")
    with pytest.raises(error, match=message):
        df.selectExpr(sql)


def test_the_jars_refusal_is_the_librarys_invalid_argument(spark: SparkSession) -> None:
    # The Java KeysharedException (an IllegalArgumentException) reaches Python from
    # spark_udfs as keyshared.errors.InvalidArgument, as the Arrow engine's refusals do.
    from keyshared.errors import InvalidArgument
    from spark_udfs import jvm

    with pytest.raises(InvalidArgument, match="ks_no_such"):
        jvm.column(spark, "ks_no_such", F.col("k"), None, None)
    with pytest.raises(InvalidArgument, match="no:such"):
        jvm.partition_column(spark, F.col("k"), 4, "no:such")


def test_bad_arguments_fail_on_the_driver(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1, "a")], "n int, k string")
    with pytest.raises(TypeError, match="null_key must be str, bytes or None, got int"):
        key_hash_udf(null_key=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="null_key must be str, bytes or None"):
        route_udf(LAYOUT, null_key=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="null_key must be str, bytes or None"):
        register(spark, LAYOUT, null_key=5, engine="arrow")  # type: ignore[arg-type]
    for engine in ("jvm", "arrow"):
        with pytest.raises(
            TypeError,
            match=r"with_routing takes a string or binary key, got int \(the key column 'n'\): "
            "cast the key to string or binary first",
        ):
            with_routing(df, "n", LAYOUT, engine=engine)
    with pytest.raises(ValueError, match="engine must be one of jvm, arrow"):
        with_routing(df, "k", LAYOUT, engine="scala")


def test_arrow_registration_replaces_the_extension_functions(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        assert register(spark, LAYOUT, engine="arrow") == "arrow"
        query = spark.sql("SELECT ks_route('k') AS r, ks_sticky_key_hash('k') AS s")
        query.explain()
        assert "ArrowEvalPython" in capsys.readouterr().out
        row = query.collect()[0]
        want = expected(["k"])
        assert (row.r.bucket, row.s) == (want["bucket"][0], want["ks_sticky_key_hash"][0])
    finally:
        register(spark, engine="jvm")


SPARK_GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "spark.md"


def guide_blocks(lang: str) -> list[str]:
    """The Spark guide's code blocks in ``lang``, as written."""
    text = SPARK_GUIDE.read_text(encoding="utf-8")
    fence = f"```{lang}\n"
    return [part.split("```", 1)[0] for part in text.split(fence)[1:]]


def test_the_spark_guide_python_block_runs(spark: SparkSession) -> None:
    (block,) = guide_blocks("python")
    keys = [f"order-{i % 37}" for i in range(500)]
    # The block starts from nothing: its session is the one running (getOrCreate).
    scope: dict[str, object] = {}
    try:
        exec(compile(block, "docs/guides/spark.md", "exec"), scope)
    finally:
        register(spark, engine="jvm")
    assert scope["spark"] is spark
    routed = scope["routed"]
    assert isinstance(routed, DataFrame)
    got = sorted((r.key, r.segment_id, r.bucket) for r in routed.collect())
    segment_ids, buckets = TopicLayout.initial(4, 16).route_keys(sorted(keys))
    assert got == list(zip(sorted(keys), segment_ids.tolist(), buckets.tolist(), strict=True))


def keyshared_sql(cwd: Path, sql: str) -> list[list[str]]:
    """``sql`` in the spark-sql shell with the keyshared jar and its session extension."""
    return spark_sql(
        cwd, "--jars", str(jar_path()), "--conf", f"spark.sql.extensions={EXTENSIONS}", "-e", sql
    )


def spark_sql(cwd: Path, *args: str) -> list[list[str]]:
    """Runs the spark-sql shell PySpark ships; its result rows, tab-separated."""
    import pyspark

    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "KEYSHARED_JAR": str(jar_path())}
    done = subprocess.run(
        [str(home / "bin" / "spark-sql"), "--master", "local[1]", "-S", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return [line.split("\t") for line in done.stdout.splitlines() if line]


def test_sql_alone_in_the_spark_sql_shell(tmp_path: Path) -> None:
    """No Python: the Spark guide's SQL block as written, with the extension through --jars and
    --conf, then every Hive class through CREATE FUNCTION ... USING JAR, in one spark-sql run."""
    jar = jar_path()
    (guide_sql,) = guide_blocks("sql")
    keys = ["hello", "", "日本語"]
    values = ", ".join(f"('{k}')" for k in keys)
    layout = TopicLayout.initial(3, 6)
    creates = "".join(
        f"CREATE OR REPLACE TEMPORARY FUNCTION hive_{name} AS '{cls}' USING JAR '{jar}';"
        for name, cls in HIVE_CLASSES.items()
    )
    hive_calls = ", ".join(f"hive_{f}(k)" for f in FUNCTIONS)
    native_calls = ", ".join(f"{f}(k)" for f in FUNCTIONS)
    sql = (
        f"{guide_sql}{creates}"
        f"SET {LAYOUT_CONF}={layout.to_json()};"
        f"SELECT k, {native_calls}, ks_route(k).segment_id, ks_route(k).bucket,"
        f" {hive_calls}, hive_ks_route(k).segment_id, hive_ks_route(k).bucket,"
        f" hive_ks_route(cast(k AS binary), NULL, 'n').bucket"
        f" FROM VALUES {values} AS t(k) ORDER BY k;"
    )
    rows = keyshared_sql(tmp_path, sql)

    guide_keys = ["order-1", "order-2", "日本語"]
    guide_layout = TopicLayout.from_dict(
        {
            "epoch": 0,
            "next_segment_id": 3,
            "segments": [
                {"segment_id": 1, "hash_range": "0000-7fff", "bucket_splits": [16384]},
                {"segment_id": 2, "hash_range": "8000-ffff", "bucket_splits": []},
            ],
        }
    )
    hashes = ks.key_hashes(guide_keys)
    segment_ids, buckets = guide_layout.route_keys(guide_keys)
    want_guide = [
        [k, str(h), str(s), str(b), str(b), str(int(st))]
        for k, h, s, b, st in zip(
            guide_keys,
            hashes.tolist(),
            segment_ids.tolist(),
            buckets.tolist(),
            sticky(hashes),
            strict=True,
        )
    ]
    assert [r for r in rows if len(r) == 6] == want_guide

    ordered = sorted(keys)
    hashes = ks.key_hashes(ordered)
    segment_ids, buckets = layout.route_keys(ordered)
    per_function = [hashes, hashes >> 16, hashes & 0xFFFF, sticky(hashes)]
    checked = [r for r in rows if len(r) == 14]
    assert len(checked) == len(ordered)
    for i, row in enumerate(checked):
        want = [str(int(v[i])) for v in per_function]
        route = [str(segment_ids[i]), str(buckets[i])]
        assert row == [ordered[i], *want, *route, *want, *route, str(buckets[i])]
