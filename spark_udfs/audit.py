"""The Spark half of the migration audit (:mod:`keyshared.scalable.audit`): count messages per key,
place each distinct key once with the library on Arrow batches, and bring back to the driver
one row per (source partition, target column) and the heaviest keys at risk.

Keys are placed by :meth:`keyshared.scalable.audit.MigrationPlan.place` inside ``mapInArrow``, so
the numbers are the library's to the message; a key the source partitioner gives no fixed
partition (a null key, for most) is counted as unkeyed, as the library counts it.
"""

from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pyspark.sql import DataFrame, Observation, Row
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StructField, StructType

from keyshared.scalable import INT_PARTITIONERS, MigrationAudit, MigrationPlan, display_key
from spark_udfs.bucketing import MESSAGES
from spark_udfs.sources import INT_KEY, KEY

SOURCE = "source_partition"
TARGET = "target_column"
AT_RISK = "at_risk"
KEYS = "keys"
RISK_KEYS = "risk_keys"
RISK_MESSAGES = "risk_messages"
SAMPLE = "at_risk_sample"


def count_migration(messages: DataFrame, plan: MigrationPlan, sample_size: int) -> MigrationAudit:
    """The audit of ``messages`` (one row a message, a ``key`` column) under ``plan``, traffic
    in messages, naming the ``sample_size`` busiest keys at risk; one pass over the input.
    Integer keys (an ``int_key`` column) are placed as the ints they are when the source
    partitioner hashes ints (Iceberg's, Spark's), as their text otherwise."""
    if INT_KEY in messages.columns and plan.source in INT_PARTITIONERS:
        messages = messages.select(F.col(INT_KEY).alias(KEY))
    per_key = messages.groupBy(KEY).agg(F.count(F.lit(1)).alias(MESSAGES))
    schema = StructType(
        [
            *per_key.schema.fields,
            StructField(SOURCE, LongType(), False),
            StructField(TARGET, LongType(), False),
            StructField(AT_RISK, BooleanType(), False),
        ]
    )
    placed = per_key.mapInArrow(_placer(plan), schema)
    sample = Observation("heaviest keys at risk")
    if sample_size:
        # At-risk keys order first, so the top ones are all at risk whenever that many are.
        order = F.struct(AT_RISK, MESSAGES)
        top = F.max_by(F.struct(KEY, MESSAGES, AT_RISK), order, sample_size).alias(SAMPLE)
        placed = placed.observe(sample, top)
    at_risk = F.col(AT_RISK)
    cells = (
        placed.groupBy(SOURCE, TARGET)
        .agg(
            F.count(F.lit(1)).alias(KEYS),
            F.sum(MESSAGES).alias(MESSAGES),
            F.sum(F.when(at_risk, 1).otherwise(0)).alias(RISK_KEYS),
            F.sum(F.when(at_risk, F.col(MESSAGES)).otherwise(0)).alias(RISK_MESSAGES),
        )
        .toArrow()
    )

    def column(name: str) -> npt.NDArray[np.int64]:
        return np.asarray(cells.column(name).to_numpy(), dtype=np.int64)

    return MigrationAudit.from_cells(
        plan,
        column(SOURCE),
        column(TARGET),
        column(KEYS),
        column(MESSAGES),
        column(RISK_KEYS),
        column(RISK_MESSAGES),
        _sample(sample.get[SAMPLE] if sample_size else []),
    )


ArrowBatches = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def _placer(plan: MigrationPlan) -> ArrowBatches:
    def place(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            # Executors already run one task per core.
            source, target, at_risk = plan.place(batch.column(KEY), threads=1)
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(source), pa.array(target), pa.array(at_risk)],
                names=[*batch.schema.names, SOURCE, TARGET, AT_RISK],
            )

    return place


def _sample(rows: list[Row] | None) -> tuple[str, ...]:
    """The observed at-risk keys, busiest first."""
    risky = [row for row in rows or [] if row[AT_RISK]]
    risky.sort(key=lambda row: row[MESSAGES], reverse=True)
    return tuple(display_key(_as_key(row[KEY])) for row in risky)


def _as_key(key: str | bytes | bytearray | int | None) -> str | bytes | int | None:
    return bytes(key) if isinstance(key, bytearray) else key
