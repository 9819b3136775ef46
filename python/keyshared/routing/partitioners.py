"""The key partitioners of other systems, bit-exact with each: which partition (or bucket)
a key lands in under Kafka's Java producer, librdkafka, the Pulsar Java client, Iceberg's
``bucket[N]`` transform, Spark's ``bucketBy``, Sarama and kafka-go.

A partition of ``None`` (``-1`` in a batch) means the system picks no fixed partition for
the key: a sticky, random or round-robin choice. That is the case of a null key everywhere
except Spark, whose ``hash()`` of a null is its seed 42, and librdkafka's ``consistent``,
``murmur2`` and ``fnv1a``, which hash a null key as an empty one (only the ``*_random``
partitioners send it to the sticky partition); and of an empty key under librdkafka's
``consistent_random``. Iceberg's bucket of a null is null, so ``None`` as well.

Keys are ``str`` (hashed as UTF-8, as every client's string serializer does), ``bytes``,
``None``, or for :attr:`Partitioner.ICEBERG_BUCKET` and :attr:`Partitioner.SPARK_BUCKET`
also ``int``. An int's type matters to Spark: an ``int`` and a ``long`` of the same value hash
apart. A Python int is a ``long`` unless told otherwise, as PySpark infers a Python int's
column type (``LongType``). NumPy and Arrow keys take the type Spark gives their column:
int8, int16 and int32 (Spark's byte, short and int, all hashed as an ``int``) and uint8 and
uint16 (which fit one) are ``int``; int64 and uint32 are ``long``; uint64 is refused. Arrays
in any byte order and stride are read by value. Iceberg hashes an int as the long of the same
value, so the type does not change its bucket.

For the Pulsar schemes a bytes key stands for the string key ``new String(bytes, UTF_8)``
(as read from a log), under both schemes: the client's keys are strings, so malformed UTF-8
routes as the U+FFFD the JDK replaces it with (``b"\xff"`` as ``"\ufffd"``). The Java
client's ``keyBytes(byte[])`` sets the key to the bytes' Base64 text and routes by that text:
pass ``base64.b64encode(key).decode()`` for keys set that way.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from keyshared._core import (
    fnv1a_32,
    iceberg_bucket,
    murmur2,
    partition_key,
    partition_keys,
    spark_bucket,
    spark_hash,
)
from keyshared.errors import ArgumentTypeError, InvalidArgument

KeyType = Literal["string", "binary", "int", "long"]
"""The type a key has in its system (Iceberg and Spark): ``string`` and ``binary`` hash the
same bytes; ``int`` and ``long`` differ in Spark."""

Key = str | bytes | int | None


class Partitioner(enum.Enum):
    """A system's key partitioner. The value is the name the CLI and the Spark functions
    take: ``Partitioner("kafka")`` is :attr:`KAFKA`."""

    KAFKA = "kafka"
    """Kafka's Java producer: ``toPositive(murmur2(key)) % n`` (``BuiltInPartitioner``)."""
    LIBRDKAFKA_CONSISTENT = "librdkafka:consistent"
    """``crc32(key) % n``; an empty or null key is hashed (to partition 0)."""
    LIBRDKAFKA_CONSISTENT_RANDOM = "librdkafka:consistent_random"
    """librdkafka's default: ``crc32(key) % n``, an empty key as well as a null one random."""
    LIBRDKAFKA_MURMUR2 = "librdkafka:murmur2"
    """Kafka's Java partitioner in librdkafka: ``(murmur2(key) & 0x7fffffff) % n``; a null
    key is hashed as an empty one."""
    LIBRDKAFKA_MURMUR2_RANDOM = "librdkafka:murmur2_random"
    """As :attr:`LIBRDKAFKA_MURMUR2`; only a null key is random."""
    LIBRDKAFKA_FNV1A = "librdkafka:fnv1a"
    """``abs(int32(fnv1a_32(key))) % n`` (``rd_fnv1a`` takes the abs to match Sarama, and
    does: the partitions are Sarama's); a null key is hashed as an empty one."""
    LIBRDKAFKA_FNV1A_RANDOM = "librdkafka:fnv1a_random"
    """As :attr:`LIBRDKAFKA_FNV1A`; only a null key is random."""
    PULSAR_JAVA_STRING_HASH = "pulsar:JavaStringHash"
    """The Pulsar Java client's default scheme: ``signSafeMod(String.hashCode(key) &
    0x7fffffff, n)`` over the key's UTF-16 units (bytes are decoded as Java's
    ``new String(bytes, UTF_8)`` decodes them)."""
    PULSAR_MURMUR3_32_HASH = "pulsar:Murmur3_32Hash"
    """``signSafeMod(murmur3_x86_32(key) & 0x7fffffff, n)`` over the key string's UTF-8
    (bytes are decoded as :attr:`PULSAR_JAVA_STRING_HASH` decodes them)."""
    ICEBERG_BUCKET = "iceberg:bucket"
    """Iceberg's ``bucket[n]``: ``(murmur3_x86_32(iceberg bytes) & Integer.MAX_VALUE) % n``."""
    SPARK_BUCKET = "spark:bucket"
    """Spark's ``bucketBy``: ``pmod(hash(key), n)``, ``hash`` being Spark's ``Murmur3Hash``
    (seed 42)."""
    SARAMA = "sarama"
    """Sarama's ``HashPartitioner``: ``int32(fnv1a_32(key)) % n``, negated if negative."""
    KAFKA_GO = "kafka-go"
    """kafka-go's ``Hash`` balancer: the same formula as Sarama's."""


def _partitioner(partitioner: Partitioner | str) -> str:
    if isinstance(partitioner, Partitioner):
        return partitioner.value
    if not isinstance(partitioner, str):
        raise ArgumentTypeError(
            f"partitioner must be a Partitioner or its name, got {type(partitioner).__name__}",
            argument="partitioner",
        )
    try:
        return Partitioner(partitioner).value
    except ValueError:
        names = ", ".join(repr(p.value) for p in Partitioner)
        raise InvalidArgument(
            f"partitioner must be one of {names}; got {partitioner!r}", argument="partitioner"
        ) from None


def partition(
    key: Key,
    num_partitions: int,
    partitioner: Partitioner | str,
    *,
    key_type: KeyType | None = None,
) -> int | None:
    """The partition in ``[0, num_partitions)`` the system sends ``key`` to, or ``None`` when
    it picks no fixed partition for it. ``num_partitions`` is in ``[1, 2**31 - 1]``.
    ``key_type`` (Iceberg and Spark) says how to read an int key; see the module's text."""
    return partition_key(key, num_partitions, _partitioner(partitioner), key_type)


def partitions(
    keys: Iterable[Key] | npt.NDArray[Any] | Any,
    num_partitions: int,
    partitioner: Partitioner | str,
    *,
    key_type: KeyType | None = None,
) -> npt.NDArray[np.int64]:
    """:func:`partition` of every key, as an int64 array with ``-1`` for "no fixed
    partition". ``keys``: a sequence of str/bytes/None (or of ints and None, for Iceberg and
    Spark: Python ints or NumPy integer scalars, read as Python ints); an Arrow array or
    chunked array of string, large_string, binary, large_binary (read in place), or integers
    up to int64 (pyarrow, or any object with the Arrow PyCapsule interface); or a NumPy
    integer array (ints typed as the module's text says). The work runs with the GIL
    released."""
    return partition_keys(keys, num_partitions, _partitioner(partitioner), key_type)


__all__ = [
    "Key",
    "KeyType",
    "Partitioner",
    "fnv1a_32",
    "iceberg_bucket",
    "murmur2",
    "partition",
    "partitions",
    "spark_bucket",
    "spark_hash",
]
