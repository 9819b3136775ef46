"""The two Spark engines (the JVM functions and the Arrow UDFs) agree with the library, and so
with each other, on every valid and invalid input: layouts, layout confs, key types and the
keys' bytes."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.errors import AnalysisException, IllegalArgumentException, SparkRuntimeException
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F
from test_spark_jvm import keyshared_sql

from keyshared import HashRange, RoutingTable, TopicLayout, key_hash, key_hashes, split_hashes
from keyshared.routing import sticky_key_hashes
from spark_udfs import (
    HIVE_CLASSES,
    LAYOUT_CONF,
    bucket_hash_udf,
    jar_path,
    key_hash_udf,
    register,
    route_udf,
    segment_hash_udf,
    sticky_key_hash_udf,
    udfs,
    with_routing,
)
from spark_udfs.udfs import key_type_error, null_key_error


@pytest.fixture(autouse=True)
def jvm_functions(spark: SparkSession) -> None:
    """The JVM functions under their SQL names, whatever an earlier test registered there."""
    register(spark, engine="jvm")


def library_refusal(segments: list[dict[str, Any]]) -> str | None:
    """Why the library refuses these segments as a routing table, or None when it accepts."""
    try:
        RoutingTable(
            (s["segment_id"], HashRange.from_hex(s["hash_range"]), s["bucket_splits"])
            for s in segments
        )
    except (TypeError, ValueError) as e:
        return str(e)
    return None


def jvm_refusal(spark: SparkSession, segments: list[dict[str, Any]]) -> str | None:
    """Why SQL's ks_route refuses these segments as its layout argument, or None."""
    text = json.dumps({"segments": segments}).replace("'", "\\'")
    try:
        spark.createDataFrame([("a",)], "k string").selectExpr(f"ks_route(k, '{text}')")
    except IllegalArgumentException as e:
        return str(e)
    return None


@st.composite
def segments(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Segments over the ring, mostly valid: some leave gaps or overlap, repeat an id, or have
    splits out of range, unordered, or a first split below 2."""
    n = draw(st.integers(1, 4))
    cuts = sorted(draw(st.sets(st.integers(1, 0xFFFF), min_size=n - 1, max_size=n - 1)))
    bounds = [0, *cuts, 0x10000]
    out = []
    for i in range(n):
        start, end = bounds[i], bounds[i + 1] - 1
        if draw(st.integers(0, 9)) == 0:
            start = max(0, start + draw(st.integers(-2, 2)))
        if draw(st.integers(0, 9)) == 0:
            end = min(0xFFFF, max(start, end + draw(st.integers(-2, 2))))
        small = st.integers(-1, 4)
        split = st.one_of(small, st.integers(0, 0x10000), st.integers(0xFFFD, 0x10001))
        splits = sorted(draw(st.sets(split, max_size=5)))
        if draw(st.integers(0, 9)) == 0:
            splits = draw(st.lists(split, max_size=5))
        out.append(
            {
                "segment_id": draw(st.sampled_from([i, i, i, 0, 2**63 - 1])),
                "hash_range": f"{start:04x}-{end:04x}",
                "bucket_splits": splits,
            }
        )
    return out


@settings(max_examples=200)
@given(segments())
def test_the_jvm_refuses_exactly_the_layouts_the_library_refuses(
    spark: SparkSession, drawn: list[dict[str, Any]]
) -> None:
    library, jvm = library_refusal(drawn), jvm_refusal(spark, drawn)
    assert (library is None) == (jvm is None), (library, jvm)


@pytest.mark.parametrize("first", [0, 1, 2])
def test_a_first_split_below_2_is_refused_on_both_engines_alike(
    spark: SparkSession, first: int
) -> None:
    drawn = [{"segment_id": 0, "hash_range": "0000-ffff", "bucket_splits": [first, 0x8000]}]
    library, jvm = library_refusal(drawn), jvm_refusal(spark, drawn)
    if first == 2:
        assert library is None and jvm is None
    elif first == 1:
        for said in (library, jvm):
            assert said is not None
            assert (
                "= 1 leaves bucket 0 narrower than [0, 1]: the first split must be at least 2"
                in said
            )
    else:
        assert library is not None and jvm is not None
        assert "outside [1, 0xffff]" in library and "outside [1, 0xffff]" in jvm


def hive_functions() -> str:
    """SQL creating every Hive class as hive_<name> in a spark-sql run."""
    jar = jar_path()
    return "".join(
        f"CREATE OR REPLACE TEMPORARY FUNCTION hive_{name} AS '{cls}' USING JAR '{jar}';"
        for name, cls in HIVE_CLASSES.items()
    )


def test_hive_ks_route_takes_a_constant_key(tmp_path: Path) -> None:
    """A literal key makes Hive fold the call into a constant struct: it must read as the
    native function's answer, not fail with a ClassCastException."""
    layout = TopicLayout.initial(2, 8)
    sql = (
        f"{hive_functions()}"
        f"SELECT hive_ks_route('hello'), hive_ks_route('hello').bucket,"
        f" hive_ks_route('hello', '{layout.to_json()}').segment_id,"
        f" hive_ks_route('hello', '{layout.to_json()}').bucket,"
        f" hive_ks_route(CAST(NULL AS string), NULL, 'hello').bucket,"
        f" hive_ks_key_hash('hello'), ks_route('hello').bucket;"
    )
    rows = keyshared_sql(tmp_path, sql)
    default = TopicLayout.initial(1).route("hello")
    segment_id, bucket = layout.route("hello")
    want = [
        json.dumps({"segment_id": default[0], "bucket": default[1]}, separators=(",", ":")),
        str(default[1]),
        str(segment_id),
        str(bucket),
        str(default[1]),
        str(key_hash("hello")),
        str(default[1]),
    ]
    assert rows == [want]


def test_register_routes_under_the_layout_conf_on_both_engines(spark: SparkSession) -> None:
    layout = TopicLayout.initial(4, 16).split_segment(2, 10)
    keys = [f"user-{i}" for i in range(200)]
    spark.createDataFrame(list(enumerate(keys)), "i int, k string").createOrReplaceTempView("lk")
    segment_ids, buckets = layout.route_keys(keys)
    want = list(zip(segment_ids.tolist(), buckets.tolist(), strict=True))
    spark.conf.set(LAYOUT_CONF, layout.to_json())
    try:
        for engine in ("jvm", "arrow"):
            assert register(spark, engine=engine) == engine
            rows = spark.sql("SELECT ks_route(k) AS r FROM lk ORDER BY i").collect()
            assert [tuple(r.r) for r in rows] == want, engine
    finally:
        spark.conf.unset(LAYOUT_CONF)
        register(spark, engine="jvm")


def test_register_checks_the_layout_conf_with_the_library(spark: SparkSession) -> None:
    bad = {"segments": [{"segment_id": 0, "hash_range": "0000-ffff", "bucket_splits": [1]}]}
    spark.conf.set(LAYOUT_CONF, json.dumps(bad))
    try:
        for engine in ("jvm", "arrow"):
            with pytest.raises(
                ValueError, match=f"{LAYOUT_CONF}: .*first split must be at least 2"
            ):
                register(spark, engine=engine)
    finally:
        spark.conf.unset(LAYOUT_CONF)
        register(spark, engine="jvm")


@pytest.mark.parametrize("engine", ["jvm", "arrow"])
@pytest.mark.parametrize("key", ["1", "1.5", "true", "current_date()", "array('a')"])
def test_keys_neither_string_nor_binary_are_refused_at_analysis(
    spark: SparkSession, engine: str, key: str
) -> None:
    try:
        register(spark, engine=engine)
        for function in ("ks_key_hash", "ks_sticky_key_hash", "ks_route"):
            with pytest.raises(AnalysisException):
                spark.sql(f"SELECT {function}({key}) AS v")
    finally:
        register(spark, engine="jvm")


@pytest.mark.parametrize("engine", ["jvm", "arrow"])
def test_string_and_binary_keys_hash_alike_on_both_engines(
    spark: SparkSession, engine: str
) -> None:
    try:
        register(spark, engine=engine)
        row = spark.sql(
            "SELECT ks_key_hash('hello') AS s, ks_key_hash(X'68656C6C6F') AS b,"
            " ks_key_hash(CAST(X'FF00FE' AS STRING)) AS raw, ks_route(X'FF').bucket AS r"
        ).collect()[0]
    finally:
        register(spark, engine="jvm")
    assert (row.s, row.b, row.raw) == (
        key_hash("hello"),
        key_hash(b"hello"),
        key_hash(b"\xff\x00\xfe"),
    )
    assert row.r == TopicLayout.initial(1).route(b"\xff")[1]


@pytest.mark.parametrize("engine", ["jvm", "arrow"])
def test_every_hash_is_the_librarys_on_both_engines(spark: SparkSession, engine: str) -> None:
    keys = ["", "hello", "日本語", "x" * 300, *(f"k{i}" for i in range(500))]
    spark.createDataFrame(list(enumerate(keys)), "i int, k string").createOrReplaceTempView("hk")
    layout = TopicLayout.initial(3, 9)
    try:
        register(spark, layout, engine=engine)
        rows = spark.sql(
            "SELECT ks_key_hash(k) AS h, ks_segment_hash(k) AS s, ks_bucket_hash(k) AS b,"
            " ks_sticky_key_hash(k) AS st, ks_route(k) AS r FROM hk ORDER BY i"
        ).collect()
        routed = (
            with_routing(spark.table("hk"), "k", layout, hashes=True, engine=engine)
            .orderBy("i")
            .collect()
        )
    finally:
        register(spark, engine="jvm")
    segments, buckets = split_hashes(keys)
    segment_ids, bucket_ids = layout.route_keys(keys)
    want = {
        "h": key_hashes(keys).tolist(),
        "s": segments.tolist(),
        "b": buckets.tolist(),
        "st": sticky_key_hashes(keys).tolist(),
    }
    for name, values in want.items():
        assert [r[name] for r in rows] == values, name
    assert [tuple(r.r) for r in rows] == list(
        zip(segment_ids.tolist(), bucket_ids.tolist(), strict=True)
    )
    assert [r.key_hash for r in routed] == want["h"]
    assert [r.segment_hash for r in routed] == want["s"]
    assert [r.bucket_hash for r in routed] == want["b"]
    assert [(r.segment_id, r.bucket) for r in routed] == [tuple(r.r) for r in rows]


def test_hive_functions_hash_a_string_keys_bytes_as_they_are(tmp_path: Path) -> None:
    """A string cast from bytes that are not UTF-8 keeps those bytes in Spark; the Hive
    functions hash them as the native ones and the library do, not as U+FFFD."""
    blobs = [b"\xff", b"a\xfe\xffb", b"\xc3", "é".encode(), b""]
    values = ", ".join(f"({i}, X'{b.hex()}')" for i, b in enumerate(blobs))
    layout = TopicLayout.initial(2, 8)
    sql = (
        f"{hive_functions()}"
        f"SET {LAYOUT_CONF}={layout.to_json()};"
        "SELECT hive_ks_key_hash(CAST(b AS STRING)), ks_key_hash(CAST(b AS STRING)),"
        " hive_ks_route(CAST(b AS STRING)).bucket, hive_ks_sticky_key_hash(CAST(b AS STRING))"
        f" FROM VALUES {values} AS t(i, b) ORDER BY i;"
    )
    rows = keyshared_sql(tmp_path, sql)
    _, buckets = layout.route_keys(blobs)
    want = [
        [str(h), str(h), str(b), str(s)]
        for h, b, s in zip(
            key_hashes(blobs).tolist(),
            buckets.tolist(),
            sticky_key_hashes(blobs).tolist(),
            strict=True,
        )
    ]
    assert [r for r in rows if len(r) == 4] == want


NULLABLE_KEYS = ["a", None, "", "日本語", None, *(f"k{i}" for i in range(200)), None]


@pytest.mark.parametrize("function", ["ks_key_hash", "ks_segment_hash", "ks_route"])
def test_a_null_the_query_leaves_out_is_no_error_on_either_engine(
    spark: SparkSession, function: str
) -> None:
    """Spark runs an Arrow UDF over whole batches, rows a CASE leaves out included: the UDF
    gives a null there, and only a null that reaches the function fails, as on the JVM."""
    spark.createDataFrame(
        list(enumerate(NULLABLE_KEYS)), "i int, s string"
    ).createOrReplaceTempView("nk")
    guarded = f"SELECT CASE WHEN s IS NULL THEN NULL ELSE {function}(s) END AS v FROM nk ORDER BY i"
    results = {}
    try:
        for engine in ("jvm", "arrow"):
            register(spark, engine=engine)
            results[engine] = [r.v for r in spark.sql(guarded).collect()]
            with pytest.raises(Exception, match=f"{function}: a key is null; pass null_key="):
                spark.sql(f"SELECT {function}(s) AS v FROM nk").collect()
    finally:
        register(spark, engine="jvm")
    assert results["jvm"] == results["arrow"]
    assert [v is None for v in results["arrow"]] == [k is None for k in NULLABLE_KEYS]
    hashes = key_hashes([k for k in NULLABLE_KEYS if k is not None])
    if function == "ks_key_hash":
        assert [v for v in results["arrow"] if v is not None] == hashes.tolist()


def test_the_arrow_udfs_give_null_for_null_and_with_routing_refuses_it(
    spark: SparkSession,
) -> None:
    df = spark.createDataFrame(list(enumerate(NULLABLE_KEYS)), "i int, k string")
    rows = df.select(
        "i", key_hash_udf()("k").alias("h"), route_udf(TopicLayout.initial(2))("k").alias("r")
    )
    got = sorted(rows.collect())
    assert [r.h is None for r in got] == [k is None for k in NULLABLE_KEYS]
    assert [r.r is None for r in got] == [k is None for k in NULLABLE_KEYS]
    guarded = df.select(F.when(F.col("k").isNull(), None).otherwise(key_hash_udf()("k")))
    assert guarded.count() == len(NULLABLE_KEYS)
    for engine in ("jvm", "arrow"):
        with pytest.raises(Exception, match="a key is null; pass null_key="):
            with_routing(df, "k", TopicLayout.initial(2), engine=engine).collect()


SQL_FUNCTIONS = [
    "ks_key_hash",
    "ks_segment_hash",
    "ks_bucket_hash",
    "ks_sticky_key_hash",
    "ks_route",
]


def library_values(function: str, keys: list[str | None], null_key: str | None = None) -> list[Any]:
    """What the SQL function ``function`` gives for each of ``keys`` (ks_route under its
    default layout), by the library."""
    if function == "ks_route":
        segment_ids, buckets = TopicLayout.initial(1).route_keys(keys, null_key=null_key)
        return list(zip(segment_ids.tolist(), buckets.tolist(), strict=True))
    if function == "ks_sticky_key_hash":
        return list(sticky_key_hashes(keys, null_key=null_key).tolist())
    hashes = key_hashes(keys, null_key=null_key)
    halves = {
        "ks_key_hash": hashes,
        "ks_segment_hash": hashes >> 16,
        "ks_bucket_hash": hashes & 0xFFFF,
    }
    return list(halves[function].tolist())


def sql_values(spark: SparkSession, query: str) -> list[Any]:
    return [tuple(r.v) if isinstance(r.v, Row) else r.v for r in spark.sql(query).collect()]


@pytest.mark.parametrize("function", SQL_FUNCTIONS)
def test_the_arrow_sql_functions_refuse_a_null_key_only_where_it_reaches_them(
    spark: SparkSession, function: str
) -> None:
    """On the Arrow engine a null string or binary key that reaches a SQL function fails with
    Spark's own raise_error in null_key_error's words; one the query keeps from it (CASE, IF,
    a filter) is no error, though the UDF under it sees every row of the batch; with a
    null_key it hashes as those bytes."""
    spark.createDataFrame(list(enumerate(NULLABLE_KEYS)), "i int, s string").selectExpr(
        "i", "s", "CAST(s AS BINARY) AS b"
    ).createOrReplaceTempView("nk")
    present = [k for k in NULLABLE_KEYS if k is not None]
    want = iter(library_values(function, present))
    guarded_want = [None if k is None else next(want) for k in NULLABLE_KEYS]
    try:
        register(spark, engine="arrow")
        for key in ("s", "b"):
            with pytest.raises(
                SparkRuntimeException, match=re.escape(null_key_error(function))
            ) as refused:
                spark.sql(f"SELECT {function}({key}) AS v FROM nk").collect()
            assert refused.value.getCondition() == "USER_RAISED_EXCEPTION"
            call = f"{function}({key})"
            for guarded in (
                f"CASE WHEN {key} IS NULL THEN NULL ELSE {call} END",
                f"IF({key} IS NOT NULL, {call}, NULL)",
            ):
                assert sql_values(spark, f"SELECT {guarded} AS v FROM nk ORDER BY i") == (
                    guarded_want
                ), (key, guarded)
            filtered = f"SELECT {call} AS v FROM nk WHERE {key} IS NOT NULL ORDER BY i"
            assert sql_values(spark, filtered) == library_values(function, present), key
        register(spark, engine="arrow", null_key="nul")
        with_null_key = sql_values(spark, f"SELECT {function}(s) AS v FROM nk ORDER BY i")
    finally:
        register(spark, engine="jvm")
    assert with_null_key == library_values(function, NULLABLE_KEYS, null_key="nul")


def test_the_arrow_sql_functions_cast_a_string_key_as_the_udf_reads_it(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    """A string key's cast to binary is done as the Arrow UDF's input is gathered, not in a
    projection of its own before it (one more copy of every key), with or without the
    refusal of null keys."""
    spark.createDataFrame(
        list(enumerate(NULLABLE_KEYS)), "i int, s string"
    ).createOrReplaceTempView("nk")
    try:
        for null_key in (None, "nul"):
            register(spark, engine="arrow", null_key=null_key)
            for function in SQL_FUNCTIONS:
                spark.sql(f"SELECT {function}(s) AS v FROM nk").explain()
                plan = capsys.readouterr().out
                assert re.search(
                    rf"ArrowEvalPython \[{function}_arrow\(cast\(s#\d+ as binary\)\)", plan
                ), plan
    finally:
        register(spark, engine="jvm")


KEY_TYPES = [
    ("int", "CAST(id AS INT)"),
    ("bigint", "id"),
    ("date", "date_from_unix_date(CAST(id AS INT))"),
    ("double", "CAST(id AS DOUBLE)"),
]
KEY_UDFS = {
    "ks_route": lambda: route_udf(TopicLayout.initial(2)),
    "ks_key_hash": key_hash_udf,
    "ks_segment_hash": segment_hash_udf,
    "ks_bucket_hash": bucket_hash_udf,
    "ks_sticky_key_hash": sticky_key_hash_udf,
}


@pytest.mark.parametrize(("kind", "expression"), KEY_TYPES)
def test_the_arrow_udfs_refuse_other_key_types_at_analysis(
    spark: SparkSession, kind: str, expression: str
) -> None:
    """route_udf and the hash UDFs on an int, bigint, date or double column fail when the
    query is built, in keyshared's words naming the function and the type (the JVM
    functions' words), not in an executor nor in Spark's words about a crc32 check."""
    df = spark.range(3).selectExpr(f"{expression} AS k")
    for name, make in KEY_UDFS.items():
        with pytest.raises(AnalysisException) as refused:
            df.select(make()("k"))
        assert key_type_error(name, kind) in str(refused.value)
        assert "crc32" not in str(refused.value)
    strings = spark.createDataFrame([("a",), ("b",)], "k string")
    assert strings.select(route_udf(TopicLayout.initial(2))("k")).columns == ["ks_route(k)"]
    routed = strings.select(route_udf(TopicLayout.initial(2))("k").alias("r")).collect()
    assert [tuple(r.r) for r in routed] == list(
        zip(*[a.tolist() for a in TopicLayout.initial(2).route_keys(["a", "b"])], strict=True)
    )


def test_the_arrow_udfs_fall_back_to_sparks_check_without_the_jar(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the driver cannot load the keyshared jar, the UDFs still refuse another key type
    when the query is built, in Spark's words (its crc32 check of a binary argument)."""
    monkeypatch.setattr(udfs.jvm, "jvm_usable", lambda _spark: False)
    df = spark.range(3).selectExpr("CAST(id AS INT) AS k")
    with pytest.raises(AnalysisException, match='"k" has the type "INT"'):
        df.select(key_hash_udf()("k"))
    strings = spark.createDataFrame([("a",)], "k string")
    assert strings.select(key_hash_udf()("k").alias("h")).collect()[0].h == key_hash("a")


@pytest.mark.parametrize(("kind", "expression"), KEY_TYPES)
def test_sql_refuses_other_key_types_alike_on_both_engines(
    spark: SparkSession, kind: str, expression: str
) -> None:
    """Every SQL function of a key refuses an int, bigint, date or double key when the query
    is built with one message on both engines, naming the function and the type; on the
    Arrow engine not Spark's own about a cast to BINARY that the query never wrote."""
    spark.range(3).selectExpr(f"{expression} AS k").createOrReplaceTempView("typed_keys")
    said: dict[str, list[str]] = {}
    try:
        for engine in ("jvm", "arrow"):
            register(spark, engine=engine)
            said[engine] = []
            for function in SQL_FUNCTIONS:
                with pytest.raises(AnalysisException) as refused:
                    spark.sql(f"SELECT {function}(k) AS v FROM typed_keys")
                message = str(refused.value)
                assert key_type_error(function, kind) in message, (engine, message)
                said[engine].append(message.split(". SQLSTATE")[0])
    finally:
        register(spark, engine="jvm")
    assert said["arrow"] == said["jvm"]


def test_the_arrow_sql_functions_refuse_an_integer_key_without_ansi_mode(
    spark: SparkSession,
) -> None:
    """Without ANSI mode Spark casts an integer to BINARY (its big-endian bytes), so the Arrow
    engine's SQL functions, whose parameter is BINARY, hashed a key no producer sends; they
    refuse it as the JVM functions do."""
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        register(spark, engine="arrow")
        for function in SQL_FUNCTIONS:
            with pytest.raises(AnalysisException, match=re.escape(key_type_error(function, "int"))):
                spark.sql(f"SELECT {function}(CAST(7 AS INT)) AS v")
        string_key = spark.sql("SELECT ks_key_hash('7') AS v").collect()[0].v
        assert string_key == key_hash("7")
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
        register(spark, engine="jvm")


CONF_KEYS = [
    "\x00",
    *(chr(c) for c in range(1, 0x800)),
    *(f"user-{i}" for i in range(3000)),
    *("\U0001f600" * n for n in range(1, 5)),
]


@settings(max_examples=3, deadline=None)
@given(st.integers(1, 4), st.integers(1, 32), st.booleans())
def test_register_follows_the_conf_set_later_alike_on_both_engines(
    spark: SparkSession, segments: int, budget: int, set_before: bool
) -> None:
    """Differential over 5,000 keys: register(spark) told no layout routes, on both engines,
    under the layout the conf holds when each query runs: a SET after register moves both
    (it moved only the JVM's once, then neither, silently)."""
    conf_layout = TopicLayout.initial(segments, max(budget, segments)).split_segment(0, 10)
    spark.createDataFrame(list(enumerate(CONF_KEYS)), "i int, k string").createOrReplaceTempView(
        "ck"
    )
    results = {}
    try:
        for engine in ("jvm", "arrow"):
            spark.conf.unset(LAYOUT_CONF)
            if set_before:
                spark.conf.set(LAYOUT_CONF, conf_layout.to_json())
            register(spark, engine=engine)
            spark.conf.set(LAYOUT_CONF, TopicLayout.initial(3, 12).to_json())
            rows = spark.sql("SELECT ks_route(k) AS r FROM ck ORDER BY i").collect()
            results[engine] = [tuple(r.r) for r in rows]
    finally:
        spark.conf.unset(LAYOUT_CONF)
        register(spark, engine="jvm")
    later = TopicLayout.initial(3, 12)
    want = list(zip(*[a.tolist() for a in later.route_keys(CONF_KEYS)], strict=True))
    assert results["jvm"] == want
    assert results["arrow"] == want


def test_a_malformed_conf_set_after_register_fails_the_query_naming_it(
    spark: SparkSession,
) -> None:
    bad = {"segments": [{"segment_id": 0, "hash_range": "0000-ffff", "bucket_splits": [1]}]}
    try:
        for engine in ("jvm", "arrow"):
            spark.conf.unset(LAYOUT_CONF)
            register(spark, engine=engine)
            spark.conf.set(LAYOUT_CONF, json.dumps(bad))
            with pytest.raises(Exception, match=f"{LAYOUT_CONF}: .*first split must be at least 2"):
                spark.sql("SELECT ks_route('k') AS r").collect()
    finally:
        spark.conf.unset(LAYOUT_CONF)
        register(spark, engine="jvm")
