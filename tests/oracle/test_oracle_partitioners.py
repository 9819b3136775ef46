"""keyshared's partitioners of other systems against those systems' own jars, run by the oracle
(``oracle/``, ``PartitionerOps``): Kafka's producer (kafka-clients), the Pulsar Java client's
router under each hashing scheme (pulsar-client, newest and LTS releases) and Iceberg's bucket
transform (iceberg-api), all from Maven Central.

Keys are drawn by hypothesis (unicode text without lone surrogates, which have no UTF-8 form,
arbitrary bytes including invalid UTF-8, empty keys, null keys, partition counts up to
2**31 - 1) and, in bulk, 120,000 at a time from a drawn seed, each batch one oracle request.
Every partition is compared in batch form (``partitions``) and one key at a time
(``partition``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

from hypothesis import given, settings
from hypothesis import strategies as st
from support.keys import bulk_keys
from support.pulsar_oracle import NEWEST, Oracle, key_arg, record

from keyshared.routing import Partitioner, iceberg_bucket, murmur2, partition, partitions

Key = str | bytes | None

texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
keys = st.one_of(texts, st.binary(max_size=40), st.just(""), st.just(b""), st.none())
key_lists = st.lists(keys, min_size=1, max_size=200)
counts = st.one_of(st.sampled_from([1, 2, 3, 7, 16, 100, 2**31 - 1]), st.integers(1, 2**31 - 1))
ints = st.one_of(
    st.sampled_from([0, 1, -1, 34, 2**31 - 1, -(2**31)]), st.integers(-(2**31), 2**31 - 1)
)
longs = st.one_of(ints, st.sampled_from([2**63 - 1, -(2**63)]), st.integers(-(2**63), 2**63 - 1))

BULK_KEYS = 120_000
# Partition counts each bulk batch is compared at: a drawn count would be 1 in the one
# example a bulk test runs, where every key lands in partition 0.
BULK_COUNTS = (12, 1000, 2**31 - 1)
PULSAR_SCHEMES = {
    Partitioner.PULSAR_JAVA_STRING_HASH: "JavaStringHash",
    Partitioner.PULSAR_MURMUR3_32_HASH: "Murmur3_32Hash",
}


def with_nulls(batch: Sequence[Key], rng: random.Random) -> list[Key]:
    """``batch`` with a null key in about one place in a hundred."""
    return [None if rng.randrange(100) == 0 else k for k in batch]


def count_differences(
    theirs: list[int | None], batch: Sequence[Key], n: int, p: Partitioner
) -> int:
    """Differences of ``partitions`` and ``partition`` from ``theirs`` (None: no partition)."""
    many = [None if v < 0 else v for v in partitions(batch, n, p).tolist()]
    one = [partition(k, n, p) for k in batch]
    differ = sum(a != b for a, b in zip(many, theirs, strict=True))
    differ += sum(a != b for a, b in zip(one, theirs, strict=True))
    return int(differ)


def compare_kafka(oracle: Oracle, batch: list[Key], n: int) -> None:
    wire = [None if k is None else key_arg(k) for k in batch]
    theirs = oracle.call("partitioner.kafka", keys=wire, num_partitions=n)
    differ = count_differences(theirs, batch, n, Partitioner.KAFKA)
    hashes = oracle.call("partitioner.kafka_murmur2", keys=wire)
    ours = [None if k is None else murmur2(k.encode() if isinstance(k, str) else k) for k in batch]
    differ_hash = sum(a != b for a, b in zip(ours, hashes, strict=True))
    record(f"kafka-clients {Partitioner.KAFKA.value}", 2 * len(batch), differ)
    record("kafka-clients murmur2", len(batch), differ_hash)
    assert differ == 0 and differ_hash == 0


def compare_pulsar(oracle: Oracle, batch: list[Key], n: int) -> None:
    """Every key as the client routes a message with that key: the client's keys are
    strings, so a bytes key is the string ``new String(bytes, UTF_8)`` (malformed UTF-8
    becoming U+FFFD), under both schemes."""
    for p, scheme in PULSAR_SCHEMES.items():
        theirs = oracle.call(
            "partitioner.pulsar",
            keys=[None if k is None else key_arg(k) for k in batch],
            num_partitions=n,
            scheme=scheme,
        )
        differ = count_differences(theirs, batch, n, p)
        record(f"{oracle.version} pulsar-client {p.value}", 2 * len(batch), differ)
        assert differ == 0, p


def compare_iceberg(oracle: Oracle, batch: list[Key], n: int) -> None:
    """str keys as Iceberg strings, bytes keys as Iceberg binary values."""
    differ = 0
    for kind, typed in (("string", str), ("binary", bytes)):
        values = [k for k in batch if k is None or isinstance(k, typed)]
        theirs = oracle.call(
            "partitioner.iceberg_bucket",
            values=[None if k is None else key_arg(k) for k in values],
            num_buckets=n,
            type=kind,
        )
        differ += count_differences(theirs, values, n, Partitioner.ICEBERG_BUCKET)
        ours = [None if k is None else iceberg_bucket(k, n) for k in values]
        differ += sum(a != b for a, b in zip(ours, theirs, strict=True))
    record(f"iceberg-api {Partitioner.ICEBERG_BUCKET.value} (str, bytes)", 3 * len(batch), differ)
    assert differ == 0


def compare_iceberg_ints(
    oracle: Oracle, values: list[int], n: int, kind: Literal["int", "long"]
) -> None:
    theirs = oracle.call("partitioner.iceberg_bucket", values=values, num_buckets=n, type=kind)
    many = partitions(values, n, Partitioner.ICEBERG_BUCKET, key_type=kind).tolist()
    ours = [iceberg_bucket(v, n) for v in values]
    differ = sum(a != b for a, b in zip(many, theirs, strict=True))
    differ += sum(a != b for a, b in zip(ours, theirs, strict=True))
    record(f"iceberg-api {Partitioner.ICEBERG_BUCKET.value} ({kind})", 2 * len(values), differ)
    assert differ == 0, kind


def compare_all(oracle: Oracle, batch: list[Key], n: int) -> None:
    compare_kafka(oracle, batch, n)
    compare_pulsar(oracle, batch, n)
    compare_iceberg(oracle, batch, n)


def test_known_values(oracle: Oracle) -> None:
    """Kafka's UtilsTest.testMurmur2 and Iceberg's spec values, through the jars and keyshared."""
    cases = {"21": -973932308, "foobar": -790332482, "a-little-bit-long-string": -985981536}
    theirs = oracle.call("partitioner.kafka_murmur2", keys=list(cases))
    assert theirs == [murmur2(k.encode()) for k in cases] == list(cases.values())
    # Iceberg spec appendix B: the hash of 34 is 2017239379, of "iceberg" 1210000089.
    assert (
        oracle.call("partitioner.iceberg_bucket", values=[34], num_buckets=16, type="int")
        == [iceberg_bucket(34, 16)]
        == [2017239379 % 16]
    )
    assert (
        oracle.call(
            "partitioner.iceberg_bucket", values=["iceberg"], num_buckets=1000, type="string"
        )
        == [iceberg_bucket("iceberg", 1000)]
        == [1210000089 % 1000]
    )
    record("kafka-clients murmur2", len(cases))
    record(f"iceberg-api {Partitioner.ICEBERG_BUCKET.value} (int)", 2)


@settings(max_examples=60)
@given(batch=key_lists, n=counts)
def test_drawn_keys(pulsar_release: Oracle, batch: list[Key], n: int) -> None:
    # kafka-clients and iceberg-api are the same jars beside every Pulsar release.
    if pulsar_release.version == NEWEST:
        compare_kafka(pulsar_release, batch, n)
        compare_iceberg(pulsar_release, batch, n)
    compare_pulsar(pulsar_release, batch, n)


def is_utf8(key: bytes) -> bool:
    try:
        key.decode()
    except UnicodeDecodeError:
        return False
    return True


invalid_utf8 = st.binary(min_size=1, max_size=40).filter(lambda k: not is_utf8(k))


@settings(max_examples=30)
@given(batch=st.lists(invalid_utf8, min_size=1, max_size=200), n=counts)
def test_invalid_utf8_keys(pulsar_release: Oracle, batch: list[Key], n: int) -> None:
    """Malformed UTF-8 alone, where the schemes once differed: the client routes the U+FFFD
    the JDK decodes it to, under Murmur3_32Hash as under JavaStringHash."""
    compare_pulsar(pulsar_release, [b"\xff", *batch], n)
    ours = partition(b"\xff", 7, Partitioner.PULSAR_MURMUR3_32_HASH)
    theirs = pulsar_release.call(
        "partitioner.pulsar", keys=[key_arg(b"\xff")], num_partitions=7, scheme="Murmur3_32Hash"
    )
    assert [ours] == theirs == [5]


@settings(max_examples=40)
@given(
    values=st.lists(ints, min_size=1, max_size=200), wide=st.lists(longs, max_size=200), n=counts
)
def test_drawn_iceberg_ints(oracle: Oracle, values: list[int], wide: list[int], n: int) -> None:
    compare_iceberg_ints(oracle, values, n, "int")
    compare_iceberg_ints(oracle, values + wide, n, "long")


@settings(max_examples=1)
@given(seed=st.integers(0, 2**32 - 1))
def test_bulk_keys(oracle: Oracle, seed: int) -> None:
    """120,000 keys (a third unicode, a third bytes, the rest names; empty and null keys among
    them) for Kafka, both Pulsar schemes and Iceberg's string and binary buckets."""
    batch = with_nulls(bulk_keys(seed, BULK_KEYS), random.Random(seed))
    for n in BULK_COUNTS:
        compare_all(oracle, batch, n)


@settings(max_examples=1)
@given(seed=st.integers(0, 2**32 - 1))
def test_bulk_keys_lts(oracle_lts: Oracle, seed: int) -> None:
    """The Pulsar client's routing of the 4.0 LTS release, on as many keys."""
    batch = with_nulls(bulk_keys(seed, BULK_KEYS), random.Random(seed))
    for n in BULK_COUNTS:
        compare_pulsar(oracle_lts, batch, n)


@settings(max_examples=1)
@given(seed=st.integers(0, 2**32 - 1))
def test_bulk_iceberg_ints(oracle: Oracle, seed: int) -> None:
    """120,000 ints and as many longs through Iceberg's bucket transform."""
    rng = random.Random(seed)
    narrow = [rng.randrange(-(2**31), 2**31) for _ in range(BULK_KEYS)]
    wide = [rng.randrange(-(2**63), 2**63) for _ in range(BULK_KEYS)]
    for n in BULK_COUNTS:
        compare_iceberg_ints(oracle, narrow, n, "int")
        compare_iceberg_ints(oracle, wide, n, "long")
