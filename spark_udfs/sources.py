"""Where the bulk-bucketing job's messages come from: a Parquet, CSV or JSON input, or a
synthetic Zipf-skewed key set generated on Spark.

Either way the job sees one row per message with two columns: ``key`` (string or binary) and
``size`` (payload bytes, bigint); and a third, ``int_key``, when the key column holds integers
(see :data:`INT_KEY`).
"""

import glob
import math
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegralType,
    LongType,
    MapType,
    NumericType,
    StringType,
    StructField,
    StructType,
)

from keyshared.errors import InvalidArgument

KEY = "key"
SIZE = "size"
#: The key as the integer it is, beside ``key`` (its text) when the key column holds
#: integers: what the migration audit places by under Iceberg's and Spark's partitioners,
#: which hash an int as an int. Byte and short keys widen to int, as Spark hashes them.
INT_KEY = "int_key"
FORMATS = ("parquet", "csv", "json")
_SUFFIXES = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}


#: The most rows Spark's ``range`` counts (a long).
MAX_LONG = 2**63 - 1
#: The largest synthetic key space: ranks come from doubles, which hold integers exactly up
#: to 2**53 (and key_space + 1 must not round up past a long once floored).
MAX_KEY_SPACE = 2**53
#: The most payload bytes of one message (a Pulsar message has fewer than 2**31).
MAX_MESSAGE_SIZE = 2**31 - 1


class JobError(InvalidArgument):
    """Input the job cannot use, said in words a user can act on: an
    :class:`~keyshared.errors.InvalidArgument` (a ValueError), as every refusal of keyshared's."""


@dataclass(frozen=True)
class FileSource:
    """Messages read from ``path``; each row's ``size_column`` holds its payload bytes, or
    every message counts ``message_size`` bytes when there is none."""

    path: str
    format: str | None
    key_column: str
    size_column: str | None
    message_size: int

    def describe(self) -> str:
        sizes = (
            f"sizes from column {self.size_column!r}"
            if self.size_column
            else f"{self.message_size:,} bytes per message assumed"
        )
        fmt = self.format or "format from the name"
        return f"{self.path} ({fmt}), key column {self.key_column!r}, {sizes}"


@dataclass(frozen=True)
class SyntheticSource:
    """``messages`` messages whose keys follow Zipf's law with exponent ``zipf_s`` over
    ``key_space`` keys; payload sizes are log-normal around ``message_size`` bytes."""

    messages: int
    key_space: int
    zipf_s: float
    seed: int
    message_size: int

    def describe(self) -> str:
        return (
            f"synthetic: {self.messages:,} messages, Zipf s={self.zipf_s:g} over "
            f"{self.key_space:,} keys, ~{self.message_size:,} bytes each (seed {self.seed})"
        )


Source = FileSource | SyntheticSource


def read_messages(spark: SparkSession, source: Source) -> DataFrame:
    """The messages of ``source`` as ``(key, size)`` rows; JobError for unusable input."""
    if isinstance(source, SyntheticSource):
        return synthetic_messages(spark, source)
    return _read_file(spark, source)


# --- files ------------------------------------------------------------------------------


def check_exists(path: str) -> None:
    """JobError when a local ``path`` (or glob) matches nothing; remote URIs are left to Spark."""
    scheme = path.split("://", 1)[0] if "://" in path else ""
    if scheme not in ("", "file"):
        return
    local = path.removeprefix("file://")
    if not glob.glob(local):
        raise JobError(f"input not found: {path}")


def input_format(path: str, given: str | None) -> str:
    """``given``, or the format the file name (or the names in a directory) says."""
    if given is not None:
        return given
    candidates = [Path(path)]
    if candidates[0].is_dir():
        candidates = sorted(p for p in candidates[0].iterdir() if not p.name.startswith(("_", ".")))
    for candidate in candidates:
        fmt = _SUFFIXES.get(candidate.suffix.lower())
        if fmt is not None:
            return fmt
    raise JobError(f"cannot tell the format of {path}: pass --format {'|'.join(FORMATS)}")


def _read_file(spark: SparkSession, source: FileSource) -> DataFrame:
    check_exists(source.path)
    fmt = input_format(source.path, source.format)
    reader = spark.read
    if fmt == "csv":
        # Every CSV field stays a string: a numeric-looking key must hash as the text it is.
        # A quoted "" is the empty key, a valid key; only an unquoted empty field is null,
        # which Spark's default null marker ("") would not tell apart.
        reader = reader.option("header", "true").option("nullValue", "\u0000")
    df = reader.format(fmt).load(source.path)
    if fmt == "json":
        df = _json_keys_as_text(spark, df, source)
    key = _key_column(df, source.key_column, source.path)
    if fmt != "parquet":
        key = _refuse_replaced_bytes(key, source.key_column, source.path)
    size = (
        F.lit(source.message_size).cast("bigint")
        if source.size_column is None
        else _size_column(df, source.size_column, source.path)
    )
    columns = [key.alias(KEY), size.alias(SIZE)]
    kind = _column_type(df, source.key_column, "key", source.path)
    if isinstance(kind, IntegralType):
        wide = "bigint" if isinstance(kind, LongType) else "int"
        columns.append(F.col(source.key_column).cast(wide).alias(INT_KEY))
    return df.select(*columns)


def _json_keys_as_text(spark: SparkSession, df: DataFrame, source: FileSource) -> DataFrame:
    """``df`` read again with the key column as a string, so that numeric keys hash as the
    text the file holds: inferred as numbers, a key ``7`` would read as ``7.0`` once another
    key in the file exceeds int64."""
    fields = {f.name: f for f in df.schema.fields}
    key = fields.get(source.key_column)
    if key is None or isinstance(key.dataType, StringType):
        return df
    schema = StructType(
        [StructField(f.name, StringType()) if f.name == key.name else f for f in df.schema.fields]
    )
    return spark.read.schema(schema).json(source.path)


def _column_type(df: DataFrame, name: str, what: str, path: str) -> DataType:
    fields = {f.name: f.dataType for f in df.schema.fields}
    if name not in fields:
        raise JobError(f"{path} has no {what} column {name!r}; its columns: {', '.join(fields)}")
    return fields[name]


def _key_column(df: DataFrame, name: str, path: str) -> Column:
    kind = _column_type(df, name, "key", path)
    if isinstance(kind, StringType | BinaryType):
        return F.col(name)
    if isinstance(kind, StructType | ArrayType | MapType):
        raise JobError(f"key column {name!r} of {path} is {kind.simpleString()}, not a scalar")
    # Numbers and dates hash as their text, as a producer sending them as string keys would.
    return F.col(name).cast("string")


def _size_column(df: DataFrame, name: str, path: str) -> Column:
    kind = _column_type(df, name, "size", path)
    if not isinstance(kind, NumericType | StringType):
        raise JobError(f"size column {name!r} of {path} is {kind.simpleString()}, not a number")
    # A missing or unreadable size counts as an empty payload rather than failing the run;
    # try_cast keeps that so under ANSI mode (Spark 4's default), where cast would fail.
    size = F.coalesce(F.col(name).try_cast("bigint"), F.lit(0).cast("bigint"))
    negative = f"size column {name!r} of {path} holds a negative size"
    return F.when(size < 0, F.raise_error(F.lit(negative))).otherwise(size)


def _refuse_replaced_bytes(key: Column, name: str, path: str) -> Column:
    """``key``, failing the run on a key holding U+FFFD: Spark's text readers put it in place
    of bytes that are not UTF-8, so keys that differed in those bytes would merge silently."""
    replaced = (
        f"key column {name!r} of {path} holds U+FFFD, which Spark's reader puts in place of "
        "bytes that are not UTF-8, so distinct keys may have merged: convert the file to "
        "UTF-8, or to Parquet with binary keys"
    )
    return F.when(F.contains(key, F.lit("\ufffd")), F.raise_error(F.lit(replaced))).otherwise(key)


# --- synthetic --------------------------------------------------------------------------


def check_message_size(size: int) -> None:
    """JobError unless ``size`` (``--message-size``) is a message's bytes."""
    if not 0 <= size <= MAX_MESSAGE_SIZE:
        raise JobError(
            f"--message-size must be in [0, {MAX_MESSAGE_SIZE:,}] (a Pulsar message's bytes), "
            f"got {size:,}"
        )


def check_synthetic(source: SyntheticSource) -> None:
    """JobError for parameters that cannot make a key set."""
    # Spark's range() counts in longs; a rank is computed in doubles, exact up to 2**53.
    if not 1 <= source.messages <= MAX_LONG:
        raise JobError(
            f"--synthetic-keys must be in [1, {MAX_LONG:,}] (Spark counts rows in longs), "
            f"got {source.messages:,}"
        )
    if not 1 <= source.key_space <= MAX_KEY_SPACE:
        raise JobError(
            f"--key-space must be in [1, {MAX_KEY_SPACE:,}] (key ranks are drawn in doubles, "
            f"exact up to 2**53), got {source.key_space:,}"
        )
    if not (source.zipf_s > 0 and math.isfinite(source.zipf_s)):
        raise JobError(f"--zipf-s must be a positive number, got {source.zipf_s}")
    check_message_size(source.message_size)
    # Spark's rand and randn take a long seed; the sizes use seed + 1.
    if not -(2**63) <= source.seed <= 2**63 - 2:
        raise JobError(f"--seed must be in [-2**63, 2**63 - 2], got {source.seed}")


def zipf_rank(u: Column, key_space: int, s: float) -> Column:
    """The key rank (1 = hottest) that a uniform ``u`` in [0, 1) maps to: the inverse CDF of
    the continuous power law ``x ** -s`` on ``[1, key_space + 1)``, floored. It tracks the
    discrete Zipf law closely and needs no table, so it runs as plain Spark expressions."""
    top = float(key_space + 1)
    if math.isclose(s, 1.0):
        x = F.pow(F.lit(top), u)
    else:
        a = 1.0 - s
        x = F.pow((F.lit(top**a - 1.0) * u) + F.lit(1.0), F.lit(1.0 / a))
    return F.least(F.floor(x), F.lit(key_space)).cast("bigint")


def synthetic_messages(spark: SparkSession, source: SyntheticSource) -> DataFrame:
    """``source.messages`` rows generated on the executors, never on the driver."""
    check_synthetic(source)
    rank = zipf_rank(F.rand(source.seed), source.key_space, source.zipf_s)
    # Log-normal sizes (sigma 0.5) with median message_size: most messages near it, a tail.
    size = F.round(F.exp(F.randn(source.seed + 1) * F.lit(0.5)) * F.lit(source.message_size))
    return spark.range(source.messages).select(
        F.concat(F.lit("key-"), rank.cast("string")).alias(KEY),
        size.cast("bigint").alias(SIZE),
    )
