"""The Spark half of the bulk-bucketing job: count messages per key, route each distinct key
once, and bring back to the driver only what the report needs.

What reaches the driver is small whatever the input: one row per (segment, bucket, hashB) that
holds any key (at most 65,536 per segment) and the hottest keys.
"""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pyspark.sql import DataFrame, Observation, Row, SparkSession
from pyspark.sql import functions as F

from keyshared.scalable import display_key
from spark_udfs.jvm import Engine, choose_engine
from spark_udfs.layouts import Layout
from spark_udfs.sources import KEY, SIZE
from spark_udfs.udfs import BUCKET, BUCKET_HASH, SEGMENT_ID, NullKey, with_routing

MESSAGES = "messages"
BYTES = "bytes"
KEYS = "keys"
HOT = "hottest"

# Each Arrow UDF task pays a Python worker round trip, so under that engine the shuffles are
# sized by data (64 MB a partition, often one task in all) rather than spread over every core
# as Spark does by default, which suits the JVM engine's cheap tasks.
ARROW_SQL_CONF = {"spark.sql.adaptive.coalescePartitions.parallelismFirst": "false"}


@dataclass(frozen=True)
class Histogram:
    """Load per (segment, bucket, hashB): parallel arrays, one entry per occupied hashB."""

    segment_id: npt.NDArray[np.int64]
    bucket: npt.NDArray[np.int64]
    bucket_hash: npt.NDArray[np.int64]
    messages: npt.NDArray[np.int64]
    bytes: npt.NDArray[np.int64]
    keys: npt.NDArray[np.int64]


@dataclass(frozen=True)
class HotKey:
    """One of the busiest keys; ``key`` is None for the null key (with ``--null-key``)."""

    key: str | None
    messages: int
    bytes: int
    segment_id: int
    bucket: int


def count_load(
    messages: DataFrame,
    layout: Layout,
    null_key: NullKey,
    top: int,
    engine: Engine | None = None,
    pulsar_version: str | None = None,
) -> tuple[Histogram, list[HotKey]]:
    """The load histogram of ``messages`` under ``layout`` and its ``top`` hottest keys (by
    messages, ties broken by bytes), in one pass: messages are counted per key, each
    distinct key is routed once, and the per-key rows are aggregated per (segment, bucket,
    hashB) while the hottest keys are picked from the same rows as Spark observed metrics,
    so the per-key table is neither cached nor read twice. ``engine`` and
    ``pulsar_version`` as in :func:`spark_udfs.with_routing`."""
    chosen = choose_engine(messages.sparkSession, engine)
    with sql_conf(messages.sparkSession, ARROW_SQL_CONF if chosen == "arrow" else {}):
        per_key = messages.groupBy(KEY).agg(
            F.count(F.lit(1)).alias(MESSAGES), F.sum(SIZE).alias(BYTES)
        )
        routed = with_routing(
            per_key,
            KEY,
            layout,
            null_key=null_key,
            hashes=True,
            engine=chosen,
            pulsar_version=pulsar_version,
        )
        hot = Observation("hottest keys")
        if top:
            row = F.struct(KEY, MESSAGES, BYTES, SEGMENT_ID, BUCKET)
            routed = routed.observe(hot, F.max_by(row, F.struct(MESSAGES, BYTES), top).alias(HOT))
        return histogram(routed), (_hot_keys(hot.get[HOT]) if top else [])


@contextmanager
def sql_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """``spark`` with ``settings`` for the queries run inside, then as it was."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def histogram(routed: DataFrame) -> Histogram:
    """Messages, bytes and distinct keys per (segment, bucket, hashB) of per-key rows."""
    table = (
        routed.groupBy(SEGMENT_ID, BUCKET, BUCKET_HASH)
        .agg(
            F.sum(MESSAGES).alias(MESSAGES),
            F.sum(BYTES).alias(BYTES),
            F.count(F.lit(1)).alias(KEYS),
        )
        .toArrow()
    )

    def column(name: str) -> npt.NDArray[np.int64]:
        return np.asarray(table.column(name).to_numpy(), dtype=np.int64)

    return Histogram(
        segment_id=column(SEGMENT_ID),
        bucket=column(BUCKET),
        bucket_hash=column(BUCKET_HASH),
        messages=column(MESSAGES),
        bytes=column(BYTES),
        keys=column(KEYS),
    )


def _hot_keys(rows: list[Row] | None) -> list[HotKey]:
    """The observed hottest keys, busiest first (None: no keys at all)."""
    busiest = sorted(rows or [], key=lambda row: (row[MESSAGES], row[BYTES]), reverse=True)
    return [
        HotKey(
            key=None if row[KEY] is None else display_key(row[KEY]),
            messages=int(row[MESSAGES]),
            bytes=int(row[BYTES]),
            segment_id=int(row[SEGMENT_ID]),
            bucket=int(row[BUCKET]),
        )
        for row in busiest
    ]
