"""Other systems' partitioners against the Python peers a user would otherwise call: the
partition of each of 200,000 keys under Kafka's murmur2 (kafka-python), Iceberg's
bucket[16] (pyiceberg) and Pulsar's Murmur3_32Hash (mmh3)."""

from collections.abc import Callable
from typing import Any

import mmh3
import numpy as np
import pyarrow as pa
import pytest
from kafka.partitioner.default import murmur2 as kafka_murmur2
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import LongType, StringType

import keyshared as ks
from keyshared.routing import Partitioner

N = 200_000
PARTITIONS = 12
BUCKETS = 16


@pytest.fixture(scope="module")
def keys(key_list: list[str]) -> list[str]:
    return key_list[:N]


@pytest.fixture(scope="module")
def key_bytes(keys: list[str]) -> list[bytes]:
    # Kafka partitions the serialized key: both sides get the same bytes.
    return [k.encode() for k in keys]


def assert_same(got: object, expected: np.ndarray) -> None:
    assert np.array_equal(np.asarray(got), expected)


def kafka_python_loop(keys: list[bytes]) -> np.ndarray:
    # kafka-python's DefaultPartitioner, without its cluster lookups.
    return np.fromiter(
        ((kafka_murmur2(k) & 0x7FFFFFFF) % PARTITIONS for k in keys), np.int64, len(keys)
    )


@pytest.mark.benchmark(group="kafka-partition")
@pytest.mark.parametrize("lib", ["keyshared", "keyshared-arrow", "kafka-python-loop"])
def test_kafka_partition(benchmark: Any, lib: str, key_bytes: list[bytes]) -> None:
    arrow = pa.array(key_bytes, pa.binary())
    run: Callable[[], object] = {
        "keyshared": lambda: ks.partitions(key_bytes, PARTITIONS, Partitioner.KAFKA),
        "keyshared-arrow": lambda: ks.partitions(arrow, PARTITIONS, Partitioner.KAFKA),
        "kafka-python-loop": lambda: kafka_python_loop(key_bytes),
    }[lib]
    assert_same(run(), ks.partitions(key_bytes, PARTITIONS, Partitioner.KAFKA))
    benchmark(run)


@pytest.mark.benchmark(group="iceberg-bucket-string")
@pytest.mark.parametrize("lib", ["keyshared", "keyshared-arrow", "pyiceberg-loop"])
def test_iceberg_bucket_string(benchmark: Any, lib: str, keys: list[str]) -> None:
    arrow = pa.array(keys, pa.string())
    bucket = BucketTransform(BUCKETS).transform(StringType())
    run: Callable[[], object] = {
        "keyshared": lambda: ks.partitions(keys, BUCKETS, Partitioner.ICEBERG_BUCKET),
        "keyshared-arrow": lambda: ks.partitions(arrow, BUCKETS, Partitioner.ICEBERG_BUCKET),
        "pyiceberg-loop": lambda: np.fromiter(map(bucket, keys), np.int64, len(keys)),
    }[lib]
    assert_same(run(), ks.partitions(keys, BUCKETS, Partitioner.ICEBERG_BUCKET))
    benchmark(run)


@pytest.mark.benchmark(group="iceberg-bucket-long")
@pytest.mark.parametrize("lib", ["keyshared", "pyiceberg-loop"])
def test_iceberg_bucket_long(benchmark: Any, lib: str) -> None:
    values = np.random.default_rng(7).integers(-(2**63), 2**63 - 1, N, np.int64)
    items = values.tolist()
    bucket = BucketTransform(BUCKETS).transform(LongType())
    run: Callable[[], object] = {
        "keyshared": lambda: ks.partitions(values, BUCKETS, Partitioner.ICEBERG_BUCKET),
        "pyiceberg-loop": lambda: np.fromiter(map(bucket, items), np.int64, len(items)),
    }[lib]
    assert_same(run(), ks.partitions(values, BUCKETS, Partitioner.ICEBERG_BUCKET))
    benchmark(run)


@pytest.mark.benchmark(group="murmur3-partition")
@pytest.mark.parametrize("lib", ["keyshared", "keyshared-arrow", "mmh3-loop"])
def test_murmur3_partition(benchmark: Any, lib: str, keys: list[str]) -> None:
    arrow = pa.array(keys, pa.string())
    scheme = Partitioner.PULSAR_MURMUR3_32_HASH
    run: Callable[[], object] = {
        "keyshared": lambda: ks.partitions(keys, PARTITIONS, scheme),
        "keyshared-arrow": lambda: ks.partitions(arrow, PARTITIONS, scheme),
        "mmh3-loop": lambda: np.fromiter(
            ((mmh3.hash(k, signed=False) & 0x7FFFFFFF) % PARTITIONS for k in keys),
            np.int64,
            len(keys),
        ),
    }[lib]
    assert_same(run(), ks.partitions(keys, PARTITIONS, scheme))
    benchmark(run)
