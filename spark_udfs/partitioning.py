"""``ks_partition(key, num_partitions, partitioner)`` in Spark: the partition another system's
partitioner (``keyshared.routing.partitioners.Partitioner``: Kafka, librdkafka, the Pulsar client,
Iceberg, Spark's own ``bucketBy``, Sarama, kafka-go) gives each key, NULL where that system
picks no fixed partition (a null key, but under ``librdkafka:consistent``, ``murmur2`` and
``fnv1a``, which hash it as an empty one; an empty one under ``consistent_random``).

Two engines, as for the other functions: the JVM function (``io.keyshared.spark
.PartitionExpression``, native, code-generated) and an Arrow UDF over
``keyshared.routing.partitioners.partitions``. Keys are string or binary (a string as its UTF-8
bytes); ``iceberg:bucket`` and ``spark:bucket`` also take int and bigint keys, which Spark
hashes apart. The partitioner and the partition count are constants: the JVM function checks
them at analysis, the Arrow UDF when it runs, with the library's messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import arrow_udf
from pyspark.sql.types import (
    BinaryType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)

from keyshared.routing import KeyType, Partitioner, partition, partitions
from spark_udfs import jvm

if TYPE_CHECKING:
    from pyspark.sql._typing import UserDefinedFunctionLike

NAME = "ks_partition"
#: The column :func:`with_partition` adds unless told another name.
PARTITION = "partition"


def _constant(values: pa.Array, what: str) -> Any:
    """The one value of an argument column that must be a constant in SQL; the library
    checks its type and value."""
    distinct = pc.unique(values)
    if len(distinct) != 1 or not distinct[0].is_valid:
        raise ValueError(f"{NAME}: {what} must be a constant, got {distinct.to_pylist()!r}")
    return distinct[0].as_py()


def _partition_batch(keys: pa.Array, counts: pa.Array, names: pa.Array) -> pa.Array:
    # A batch with no rows cannot say what its constants were, and needs no partitions.
    if len(keys) == 0:
        return pa.array([], pa.int32())
    parts = partitions(keys, _constant(counts, "num_partitions"), _constant(names, "partitioner"))
    return pa.array(parts, type=pa.int32(), mask=parts < 0)


def partition_udf() -> UserDefinedFunctionLike:
    """The Arrow UDF ``ks_partition(key, num_partitions, partitioner)``: an int, or NULL where
    the partitioner picks no fixed partition."""
    # pyspark's stubs only type the functionType= form, which it deprecates for type hints.
    return arrow_udf(_partition_batch, IntegerType())  # type: ignore[call-overload, no-any-return]


def scheme_name(partitioner: Partitioner | str) -> str:
    """The partitioner's name, as SQL takes it."""
    return partitioner.value if isinstance(partitioner, Partitioner) else partitioner


def check(key_type: DataType, num_partitions: int, partitioner: Partitioner | str) -> None:
    """The library's refusal (TypeError or ValueError) of these arguments, on the driver: an
    unknown partitioner, a partition count outside ``[1, 2**31 - 1]``, or a key type the
    partitioner does not take."""
    # A null key's partition needs every check but the key's.
    partition(None, num_partitions, partitioner)
    if isinstance(key_type, ByteType | ShortType | IntegerType | LongType):
        # Byte and short columns hash as ints, as Spark hashes them.
        width: KeyType = "long" if isinstance(key_type, LongType) else "int"
        partitions([0], num_partitions, partitioner, key_type=width)
    elif not isinstance(key_type, StringType | BinaryType):
        raise TypeError(
            f"{NAME} takes a string or binary key (tinyint, smallint, int or bigint too for "
            f"iceberg:bucket and spark:bucket), got {key_type.simpleString()}"
        )


def with_partition(
    df: DataFrame,
    key: str | Column,
    num_partitions: int,
    partitioner: Partitioner | str,
    *,
    name: str = PARTITION,
    engine: str | None = None,
) -> DataFrame:
    """``df`` with a column ``name`` (an int, NULL where the system picks no fixed partition):
    the partition ``partitioner`` gives ``key`` among ``num_partitions``.

    ``engine`` is ``"jvm"`` (the native function; the default when the session can load the
    keyshared jar) or ``"arrow"`` (the Arrow UDF). The arguments and the key column's type are
    checked here, on the driver, by the library.
    """
    column = F.col(key) if isinstance(key, str) else key
    scheme = scheme_name(partitioner)
    check(df.select(column).schema.fields[0].dataType, num_partitions, scheme)
    if jvm.choose_engine(df.sparkSession, engine) == "jvm":
        return df.withColumn(
            name, jvm.partition_column(df.sparkSession, column, num_partitions, scheme)
        )
    udf = partition_udf()
    return df.withColumn(name, udf(column, F.lit(num_partitions), F.lit(scheme)))


def register_arrow(spark: SparkSession) -> None:
    """Registers the Arrow UDF as ``ks_partition`` for SQL in ``spark``."""
    spark.sql(f"DROP TEMPORARY FUNCTION IF EXISTS {NAME}")
    spark.udf.register(NAME, partition_udf())
