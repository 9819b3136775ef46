"""Routing 5M keys in one Spark session (local[2]): the keyshared routing UDF against the
transfer floor of any Python UDF (an Arrow UDF returning each key's length), mmh3 looped per
key in an Arrow UDF and in a pandas UDF, and Spark's built-in JVM ``hash()`` (a different
hash, for reference).

Each round runs the whole column through the UDF into Spark's no-op sink, so the time covers
the JVM-to-Python transfer both ways, as a real job pays it.
"""

from collections.abc import Iterator
from typing import Any

import mmh3
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import arrow_udf, pandas_udf
from pyspark.sql.types import IntegerType, LongType

from keyshared import TopicLayout
from spark_udfs import route_udf
from spark_udfs.session import get_session

N_KEYS = 5_000_000
ROUNDS = 7


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


@pytest.fixture(scope="module")
def keys(spark: SparkSession) -> Iterator[DataFrame]:
    """5M distinct keys of 20 to 30 ASCII bytes, like the other groups', cached in memory."""
    suffix = F.substring(F.sha2(F.col("id").cast("string"), 256), 1, 11)
    tail = F.expr("substring(sha2(cast(id AS string), 224), 1, cast(id % 11 AS int))")
    df = spark.range(0, N_KEYS, 1, 4).select(
        F.concat(F.lpad(F.col("id").cast("string"), 8, "0"), F.lit("-"), suffix, tail).alias("k")
    )
    df = df.cache()
    df.count()
    # Warm the JIT and start the Python workers on the same path every UDF takes, so that
    # whichever runs first does not pay for it.
    for _ in range(2):
        df.select(arrow_len(F.col("k"))).write.format("noop").mode("overwrite").save()
    yield df
    df.unpersist()


@arrow_udf(IntegerType())  # type: ignore[call-overload, misc]
def arrow_len(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
    for keys in batches:
        yield pc.binary_length(keys)


@arrow_udf(LongType())  # type: ignore[call-overload, misc]
def arrow_mmh3(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
    for keys in batches:
        yield pa.array([mmh3.hash(k, signed=False) for k in keys.to_pylist()], pa.int64())


@pandas_udf(LongType())  # type: ignore[call-overload, misc]
def pandas_mmh3(keys: pd.Series) -> pd.Series:
    return pd.Series([mmh3.hash(k, signed=False) for k in keys], dtype="int64")


def column(lib: str) -> Column:
    key = F.col("k")
    make = {
        "keyshared": lambda: route_udf(TopicLayout.initial(4, 16))(key),
        "arrow-len": lambda: arrow_len(key),
        "arrow-mmh3": lambda: arrow_mmh3(key),
        "pandas-mmh3": lambda: pandas_mmh3(key),
        "spark-hash": lambda: F.hash(key),
    }
    column: Column = make[lib]()
    return column


@pytest.mark.benchmark(group="spark-route-5m")
@pytest.mark.parametrize(
    "lib", ["keyshared", "arrow-len", "arrow-mmh3", "pandas-mmh3", "spark-hash"]
)
def test_spark_route(benchmark: Any, lib: str, keys: DataFrame) -> None:
    query = keys.select(column(lib).alias("out"))

    def run() -> None:
        query.write.format("noop").mode("overwrite").save()

    benchmark.pedantic(run, rounds=ROUNDS, iterations=1, warmup_rounds=1)
