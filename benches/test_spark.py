"""keyshared in one Spark session (local[2]).

spark-route-5m: routing 5M keys with the JVM ``ks_route`` (keyshared), the Arrow UDF
(keyshared-arrow), the transfer floor of any Python UDF (an Arrow UDF returning each key's
length), mmh3 looped in a pandas UDF, and Spark's built-in JVM ``hash()`` (a different hash, the
engine's own speed). Each round runs the whole column into Spark's no-op sink.

spark-bucket-hash-arrow: SQL's ``ks_bucket_hash`` registered on the Arrow engine (keyshared)
over 3M keys, against the transfer floor of any Python UDF on the same keys (the Arrow UDF
returning each key's length, trivial-arrow-udf). The SQL function checks each row for a null
key and takes the key as binary, so this is what those cost on top of the Python UDF.

spark-job-step: the bulk-bucketing job's "routing keys and counting load per bucket and key"
step on the Spark guide's 10M synthetic messages (keyshared: the histogram and the 20 hottest
keys), against Spark alone generating the same messages and grouping them by key
(spark-groupby).
"""

from collections.abc import Callable, Iterator
from typing import Any

import mmh3
import numpy as np
import pairing
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import arrow_udf, pandas_udf
from pyspark.sql.types import IntegerType, LongType
from ratios import KEYS, PAIRED

import keyshared as ks
from keyshared import TopicLayout
from spark_udfs import register, with_routing
from spark_udfs.bucketing import KEY, MESSAGES, count_load
from spark_udfs.session import get_session
from spark_udfs.sources import SIZE, SyntheticSource, read_messages

N_KEYS = 5_000_000
ROUNDS = 7
HASH_KEYS = 3_000_000
HASH_ROUNDS = 9
LAYOUT = TopicLayout.initial(4, 16)
# The main job (README, docs/guides/spark.md): 10M messages over 1M Zipf-skewed keys.
JOB_SOURCE = SyntheticSource(10_000_000, 1_000_000, 1.1, 42, 1024)
JOB_ROUNDS = 5
JOB_TOP = 20


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = get_session(
        "local[2]",
        "keyshared-bench",
        {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "2g",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def cached_keys(spark: SparkSession, n: int) -> DataFrame:
    """n distinct keys of 20 to 30 ASCII bytes, like the other groups', cached in memory."""
    suffix = F.substring(F.sha2(F.col("id").cast("string"), 256), 1, 11)
    tail = F.expr("substring(sha2(cast(id AS string), 224), 1, cast(id % 11 AS int))")
    df = spark.range(0, n, 1, 4).select(
        F.concat(F.lpad(F.col("id").cast("string"), 8, "0"), F.lit("-"), suffix, tail).alias("k")
    )
    df = df.cache()
    df.count()
    # Warm the JIT on the paths every variant takes (the cached scan into a JVM projection,
    # and into the Python workers), so that whichever runs first does not pay for it.
    for _ in range(5):
        df.select(F.xxhash64("k")).write.format("noop").mode("overwrite").save()
    for _ in range(2):
        df.select(arrow_len(F.col("k"))).write.format("noop").mode("overwrite").save()
    return df


@pytest.fixture(scope="module")
def keys(spark: SparkSession) -> Iterator[DataFrame]:
    """N_KEYS keys, for spark-route-5m."""
    df = cached_keys(spark, N_KEYS)
    yield df
    df.unpersist()


@pytest.fixture(scope="module")
def hash_keys(spark: SparkSession) -> Iterator[DataFrame]:
    """HASH_KEYS keys, with the Arrow engine's SQL functions registered while they last."""
    df = cached_keys(spark, HASH_KEYS)
    register(spark, engine="arrow")
    yield df
    register(spark, engine="jvm")
    df.unpersist()


@arrow_udf(IntegerType())  # type: ignore[call-overload, misc]
def arrow_len(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
    for keys in batches:
        yield pc.binary_length(keys)


@pandas_udf(LongType())  # type: ignore[call-overload, misc]
def pandas_mmh3(keys: pd.Series) -> pd.Series:
    return pd.Series([mmh3.hash(k, signed=False) for k in keys], dtype="int64")


def routed(df: DataFrame, engine: str) -> DataFrame:
    """The two columns with_routing adds, as a user reads them."""
    return with_routing(df, "k", LAYOUT, engine=engine).select("segment_id", "bucket")


def column(lib: str) -> Column:
    key = F.col("k")
    make = {
        "arrow-len": lambda: arrow_len(key),
        "pandas-mmh3": lambda: pandas_mmh3(key),
        "spark-hash": lambda: F.hash(key),
    }
    column: Column = make[lib]()
    return column


def query(keys: DataFrame, lib: str) -> DataFrame:
    if lib == "keyshared":
        return routed(keys, "jvm")
    if lib == "keyshared-arrow":
        return routed(keys, "arrow")
    return keys.select(column(lib).alias("out"))


def check_same_answers(keys: DataFrame, lib: str) -> None:
    """Every peer that computes what keyshared does agrees with it on a sample."""
    sample = keys.limit(20_000)
    want = sample.toArrow().column("k").combine_chunks()
    if lib in ("keyshared", "keyshared-arrow"):
        got = query(sample, lib).toArrow()
        segment_ids, buckets = LAYOUT.route_keys(want)
        assert np.array_equal(got.column("segment_id").to_numpy(), segment_ids)
        assert np.array_equal(got.column("bucket").to_numpy(), buckets)
    elif lib == "pandas-mmh3":
        got = query(sample, lib).toArrow().column("out").to_numpy()
        assert np.array_equal(got, ks.key_hashes(want))
    elif lib == "arrow-len":
        got = query(sample, lib).toArrow().column("out").to_numpy()
        assert np.array_equal(got, pc.binary_length(want).to_numpy())


@pytest.mark.benchmark(group="spark-route-5m")
# The JVM pair whose floor compares them runs first, side by side, before any Python worker
# starts: a SQL-only user's JVM never runs one, and the two then share one stretch of the
# machine's time.
@pytest.mark.parametrize(
    "lib", ["spark-hash", "keyshared", "keyshared-arrow", "arrow-len", "pandas-mmh3"]
)
def test_spark_route(benchmark: Any, lib: str, keys: DataFrame) -> None:
    check_same_answers(keys, lib)
    plan = query(keys, lib)

    def run() -> None:
        plan.write.format("noop").mode("overwrite").save()

    # Three warm-up rounds: the JIT compiles each query's generated code over its first runs.
    benchmark.pedantic(run, rounds=ROUNDS, iterations=1, warmup_rounds=3)


def bucket_hash_column(lib: str) -> Column:
    """SQL's ks_bucket_hash as registered (null keys refused, the key taken as binary), or the
    trivial Arrow UDF, of the key column."""
    if lib == "keyshared":
        return F.expr("ks_bucket_hash(k)")
    return arrow_len(F.col("k"))


@pytest.mark.benchmark(group="spark-bucket-hash-arrow")
@pytest.mark.parametrize("lib", ["keyshared", "trivial-arrow-udf"])
def test_spark_bucket_hash_arrow(benchmark: Any, lib: str, hash_keys: DataFrame) -> None:
    peer = "trivial-arrow-udf" if lib == "keyshared" else "keyshared"
    sample = hash_keys.limit(20_000)
    for name in (lib, peer):
        got = sample.select("k", bucket_hash_column(name).alias("out")).toArrow()
        want = got.column("k").combine_chunks()
        expected = ks.split_hashes(want)[1] if name == "keyshared" else pc.binary_length(want)
        assert np.array_equal(got.column("out").to_numpy(), np.asarray(expected)), name
    ours = hash_keys.select(bucket_hash_column(lib).alias("out"))
    other = hash_keys.select(bucket_hash_column(peer).alias("out"))
    benchmark.extra_info[KEYS] = HASH_KEYS

    def run(plan: DataFrame) -> None:
        plan.write.format("noop").mode("overwrite").save()

    # Three warm-up rounds: the JIT compiles each query's generated code over its first runs.
    paired_rounds(
        benchmark, lambda: run(ours), lambda: run(other), lib, peer, HASH_ROUNDS, warmup=3
    )


def paired_rounds(
    benchmark: Any,
    ours: Callable[[], object],
    other: Callable[[], object],
    lib: str,
    peer: str,
    rounds: int,
    warmup: int,
) -> None:
    """Times `ours`, each round just after a run of `other`, so that both are timed in the
    same stretches of a noisy machine's time; keyshared's benchmark records the median over
    rounds of the other's time over its own (the floor's paired ratio vs `peer`)."""
    ratio, _ = pairing.paired(benchmark, ours, other, rounds=rounds, warmup_rounds=warmup)
    if lib == "keyshared":
        benchmark.extra_info[PAIRED + peer] = ratio


def job_step(spark: SparkSession) -> tuple[int, int]:
    """The job's routing step as run() does it: (messages, distinct keys) of the histogram."""
    hist, hot = count_load(read_messages(spark, JOB_SOURCE), LAYOUT, None, JOB_TOP, "jvm")
    assert len(hot) == JOB_TOP
    return int(hist.messages.sum()), int(hist.keys.sum())


def group_by_key(spark: SparkSession) -> tuple[int, int]:
    """Spark alone: the same messages grouped by key, as the job's first aggregation. Every
    aggregate is read, so that the optimizer cannot drop the sizes (their generation is a
    third of the work) from the floor."""
    per_key = (
        read_messages(spark, JOB_SOURCE)
        .groupBy(KEY)
        .agg(F.count(F.lit(1)).alias(MESSAGES), F.sum(SIZE).alias("bytes"))
    )
    row = per_key.agg(F.sum(MESSAGES), F.sum("bytes"), F.count(F.lit(1))).first()
    assert row is not None and row[1] > 0
    return int(row[0]), int(row[2])


@pytest.mark.benchmark(group="spark-job-step")
@pytest.mark.parametrize("lib", ["keyshared", "spark-groupby"])
def test_spark_job_step(benchmark: Any, lib: str, spark: SparkSession) -> None:
    step, other = (job_step, group_by_key) if lib == "keyshared" else (group_by_key, job_step)
    messages, distinct = step(spark)
    assert messages == JOB_SOURCE.messages
    assert (messages, distinct) == other(spark)
    benchmark.extra_info["messages"] = messages

    # One warm-up round, as the first run of each query compiles its generated code.
    peer = "spark-groupby" if lib == "keyshared" else "keyshared"
    paired_rounds(
        benchmark, lambda: step(spark), lambda: other(spark), lib, peer, JOB_ROUNDS, warmup=1
    )
