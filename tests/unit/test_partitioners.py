"""keyshared.routing.partitioners against the real implementations: kafka-python's partitioner,
librdkafka (through confluent-kafka's mock cluster), the JDK's String.hashCode, pyiceberg's
bucket transform, mmh3, zlib's CRC-32, fnvhash, and Spark's own hash and pmod. Each
differential runs over 100,000 random keys: unicode text (astral characters too), empty
keys, arbitrary bytes (malformed UTF-8 too) and nulls."""

from __future__ import annotations

import random
import subprocess
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mmh3
import numpy as np
import pyarrow as pa
import pytest
from confluent_kafka import Producer
from fnvhash import fnv1a_32 as fnvhash_fnv1a_32
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import DefaultPartitioner
from kafka.partitioner.default import murmur2 as kafka_python_murmur2
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import BinaryType, IntegerType, LongType, StringType
from support.keys import list_items

import keyshared
from keyshared import _core
from keyshared._core import java_utf8
from keyshared.errors import InvalidArgument
from keyshared.routing import (
    Partitioner,
    fnv1a_32,
    iceberg_bucket,
    java_string_hash_code,
    murmur2,
    partition,
    partitions,
    spark_bucket,
    spark_hash,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KEYS = 100_000
COUNTS = [1, 2, 3, 7, 12, 1000, 2**31 - 1]

Key = str | bytes | None

# Pieces of UTF-8 that decoders disagree on: encoded surrogates, truncated and overlong
# sequences, code points past U+10FFFF, lone continuation bytes.
MALFORMED = [
    b"\xed\xa0\x80",
    b"\xed\xbf\xbf",
    b"\xf0\x9f\x98",
    b"\xe2\x82",
    b"\xc3",
    b"\xc0\xaf",
    b"\xe0\x80\xaf",
    b"\xf0\x80\x80\xaf",
    b"\xf4\x90\x80\x80",
    b"\xf5\x80\x80\x80",
    b"\x80",
    b"\xbf",
    b"\xfe\xff",
]
# Text from every UTF-8 length class, astral characters included (never a surrogate).
ALPHABET = "az09-_ é߿ࠀ名前€\uffef\ufffd" + "".join(map(chr, [0x10000, 0x1F600, 0x1F9FF, 0x10FFFF]))


def random_key(rng: random.Random) -> Key:
    kind = rng.random()
    if kind < 0.05:
        return None
    if kind < 0.10:
        return "" if rng.random() < 0.5 else b""
    if kind < 0.55:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 24)))
    if kind < 0.75:
        return rng.randbytes(rng.randint(1, 24))
    # Valid text cut anywhere, and malformed pieces, end to end.
    parts = [
        rng.choice(MALFORMED)
        if rng.random() < 0.4
        else "".join(rng.choice(ALPHABET) for _ in range(3)).encode()[: rng.randint(0, 9)]
        for _ in range(rng.randint(1, 5))
    ]
    return b"".join(parts)


def random_keys(seed: int) -> list[Key]:
    rng = random.Random(seed)
    return [random_key(rng) for _ in range(KEYS)]


@pytest.fixture(scope="module")
def keys() -> list[Key]:
    return random_keys(2026)


def utf8(key: str | bytes) -> bytes:
    return key.encode() if isinstance(key, str) else key


def differences(got: Sequence[Any], want: Sequence[Any], keys: Sequence[Any]) -> list[Any]:
    """The (key, got, want) of every key where the two answers differ: none, when they agree."""
    assert len(got) == len(want) == len(keys)
    return [(k, g, w) for k, g, w in zip(keys, got, want, strict=True) if g != w]


def check_batch(keys: list[Key], n: int, partitioner: Partitioner, want: list[int | None]) -> None:
    """The batch, each single-key call and the Arrow path all give ``want`` (None as -1)."""
    expected = [-1 if w is None else w for w in want]
    assert differences(list(partitions(keys, n, partitioner)), expected, keys) == []
    arrow = pa.array([utf8(k) if k is not None else None for k in keys], pa.binary())
    assert differences(list(partitions(arrow, n, partitioner)), expected, keys) == []
    sample = keys[:: len(keys) // 1000]
    singles = [partition(k, n, partitioner) for k in sample]
    assert differences(singles, want[:: len(keys) // 1000], sample) == []


# --- Kafka: kafka-python's DefaultPartitioner -------------------------------------------


class KafkaCluster:
    """The two questions kafka-python's partitioner asks of its cluster metadata."""

    def __init__(self, partitions: int) -> None:
        self.partitions = set(range(partitions))

    def topics(self) -> set[str]:
        return {"t"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions


def test_murmur2_is_kafka_pythons(keys: list[Key]) -> None:
    present = [utf8(k) for k in keys if k is not None]
    got = [murmur2(k) & 0xFFFFFFFF for k in present]
    assert differences(got, [kafka_python_murmur2(k) for k in present], present) == []
    assert all(-(2**31) <= murmur2(k) < 2**31 for k in present[:1000])


@pytest.mark.parametrize("n", [1, 3, 7, 12, 1000])
@pytest.mark.parametrize(
    "partitioner",
    [Partitioner.KAFKA, Partitioner.LIBRDKAFKA_MURMUR2, Partitioner.LIBRDKAFKA_MURMUR2_RANDOM],
)
def test_kafka_partitions_are_kafka_pythons(
    keys: list[Key], n: int, partitioner: Partitioner
) -> None:
    kafka = DefaultPartitioner()
    cluster = KafkaCluster(n)
    # kafka-python picks a random partition for a null key, where keyshared says there is
    # none; librdkafka's murmur2 hashes a null key as an empty one.
    null = b"" if partitioner is Partitioner.LIBRDKAFKA_MURMUR2 else None
    raws = [null if k is None else utf8(k) for k in keys]
    want = [None if r is None else kafka.partition("t", r, r, None, None, cluster) for r in raws]
    check_batch(keys, n, partitioner, want)


# --- librdkafka: its own partitioners, through confluent-kafka's mock cluster -----------

# The partition count of a topic the mock cluster creates on first use.
MOCK_PARTITIONS = 4


def librdkafka_partitions(keys: list[Key], partitioner: str) -> list[int]:
    """The partition librdkafka's producer gives each key, from its delivery reports."""
    producer = Producer({"test.mock.num.brokers": 1, "partitioner": partitioner, "log_level": 3})
    got: list[int] = [-2] * len(keys)

    def delivered(err: object, msg: Any) -> None:
        assert err is None, err
        got[int(msg.value())] = msg.partition()

    for i, key in enumerate(keys):
        producer.produce("t", value=str(i).encode(), key=key, on_delivery=delivered)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert producer.list_topics("t").topics["t"].partitions.keys() == set(range(4))
    return got


@pytest.mark.parametrize(
    "partitioner",
    [p for p in Partitioner if p.value.startswith("librdkafka:")],
    ids=lambda p: p.value,
)
def test_librdkafka_partitions_are_librdkafkas(keys: list[Key], partitioner: Partitioner) -> None:
    name = partitioner.value.removeprefix("librdkafka:")
    real = librdkafka_partitions(keys, name)
    ours = partitions(keys, MOCK_PARTITIONS, partitioner)
    # Where keyshared names no partition, librdkafka's sticky partitioner chose one.
    fixed = [i for i, p in enumerate(ours) if p != -1]
    assert differences([ours[i] for i in fixed], [real[i] for i in fixed], fixed) == []
    nulls = {i for i, k in enumerate(keys) if k is None}
    empties = {i for i, k in enumerate(keys) if k is not None and not k}
    random_ones = (nulls if name.endswith("_random") else set()) | (
        empties if name == "consistent_random" else set()
    )
    assert {i for i, p in enumerate(ours) if p == -1} == random_ones


@pytest.mark.parametrize("n", COUNTS)
def test_librdkafka_formulas_over_zlib_and_fnvhash(keys: list[Key], n: int) -> None:
    """The ``hash % n`` of rd_kafka_msg_partitioner_consistent and _fnv1a, for partition
    counts the mock cluster does not offer."""
    crc = [None if k is None or k in ("", b"") else zlib.crc32(utf8(k)) % n for k in keys]
    check_batch(keys, n, Partitioner.LIBRDKAFKA_CONSISTENT_RANDOM, crc)
    # rd_fnv1a takes the hash as a signed int and makes it positive with abs.
    # A null key is hashed as an empty one.
    fnv = [abs(int32(fnvhash_fnv1a_32(b"" if k is None else utf8(k)))) % n for k in keys]
    check_batch(keys, n, Partitioner.LIBRDKAFKA_FNV1A, fnv)


def test_fnv1a_32_is_fnvhashs(keys: list[Key]) -> None:
    present = [utf8(k) for k in keys if k is not None]
    got = [fnv1a_32(k) for k in present]
    assert differences(got, [fnvhash_fnv1a_32(k) for k in present], present) == []


# --- Sarama and kafka-go ---------------------------------------------------------------


def int32(value: int) -> int:
    """An unsigned 32-bit value as the signed int of the same bits."""
    return value - 2**32 if value >= 2**31 else value


def go_partition(hash32: int, n: int) -> int:
    """Sarama's hashPartitioner (kafka-go's Hash balancer copies it):
    ``int32(h) % n``, Go's remainder taking the dividend's sign, then negated if negative."""
    signed = int32(hash32)
    remainder = abs(signed) % n * (-1 if signed < 0 else 1)
    return -remainder if remainder < 0 else remainder


@pytest.mark.parametrize("n", COUNTS)
@pytest.mark.parametrize("partitioner", [Partitioner.SARAMA, Partitioner.KAFKA_GO])
def test_sarama_and_kafka_go(keys: list[Key], n: int, partitioner: Partitioner) -> None:
    want = [None if k is None else go_partition(fnvhash_fnv1a_32(utf8(k)), n) for k in keys]
    check_batch(keys, n, partitioner, want)


# --- Pulsar: the JDK's String.hashCode, and mmh3 ----------------------------------------

JAVA_STRING_HASH = """
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

public class JavaStringHash {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; ) {
            String s = new String(HexFormat.of().parseHex(line), StandardCharsets.UTF_8);
            byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
            out.append(s.hashCode()).append(' ').append(HexFormat.of().formatHex(utf8));
            out.append('\\n');
        }
        System.out.print(out);
    }
}
"""


def jdk_strings(keys: list[bytes], tmp_path: Path) -> list[tuple[int, bytes]]:
    """The string ``new String(bytes, UTF_8)`` of each key, as the JDK makes it: its
    ``hashCode()`` and its ``getBytes(UTF_8)``."""
    source = tmp_path / "JavaStringHash.java"
    source.write_text(JAVA_STRING_HASH)
    done = subprocess.run(
        ["java", str(source)],
        input="\n".join(k.hex() for k in keys) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [[*line.split(" "), ""] for line in done.stdout.splitlines()]
    return [(int(fields[0]), bytes.fromhex(fields[1])) for fields in lines]


@pytest.fixture(scope="module")
def jdk(keys: list[Key], tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, bytes]]:
    """``jdk_strings`` of every key that is not None, in order."""
    present = [utf8(k) for k in keys if k is not None]
    return jdk_strings(present, tmp_path_factory.mktemp("jdk"))


def test_java_string_hash_is_the_jdks(keys: list[Key], jdk: list[tuple[int, bytes]]) -> None:
    present = [k for k in keys if k is not None]
    want = [h for h, _ in jdk]
    got = [java_string_hash_code(k) for k in present]
    assert differences(got, want, present) == []
    batch = [w & 0x7FFFFFFF for w in want]
    for n in COUNTS:
        expected = [h % n for h in batch]
        assert (
            differences(list(partitions(present, n, "pulsar:JavaStringHash")), expected, present)
            == []
        )


def test_java_utf8_is_the_jdks(keys: list[Key], jdk: list[tuple[int, bytes]]) -> None:
    """The bytes of the string a key stands for in Java: ``new String(bytes,
    UTF_8).getBytes(UTF_8)``, malformed input replaced as the JDK replaces it."""
    present = [k for k in keys if k is not None]
    got = [java_utf8(k) for k in present]
    assert differences(got, [b for _, b in jdk], present) == []
    assert sum(utf8(k) != b for k, (_, b) in zip(present, jdk, strict=True)) > 1000


@pytest.mark.parametrize("n", COUNTS)
def test_pulsar_murmur3_is_mmh3_of_the_jdks_string(
    keys: list[Key], jdk: list[tuple[int, bytes]], n: int
) -> None:
    """The Java client hashes its key string's UTF-8 bytes: a bytes key's, decoded and
    encoded again by the JDK (malformed UTF-8 hashes as U+FFFD's bytes)."""
    strings = iter(jdk)
    want = [
        None if k is None else (mmh3.hash(next(strings)[1], 0, signed=False) & 0x7FFFFFFF) % n
        for k in keys
    ]
    check_batch(keys, n, Partitioner.PULSAR_MURMUR3_32_HASH, want)


def test_the_pulsar_schemes_are_the_routers(keys: list[Key]) -> None:
    """The partitioners route as ``choose_partition`` with the matching HashingScheme."""
    present = [k for k in keys[:5000] if k is not None]
    for partitioner, scheme in [
        (Partitioner.PULSAR_JAVA_STRING_HASH, keyshared.routing.HashingScheme.JavaStringHash),
        (Partitioner.PULSAR_MURMUR3_32_HASH, keyshared.routing.HashingScheme.Murmur3_32Hash),
    ]:
        want = [keyshared.routing.choose_partition(k, 13, scheme) for k in present]
        assert list(partitions(present, 13, partitioner)) == want


# --- Iceberg: pyiceberg's bucket transform ---------------------------------------------

INT_KEYS = 100_000


@pytest.fixture(scope="module")
def longs() -> np.ndarray:
    rng = np.random.default_rng(7)
    edges = np.array([0, 1, -1, 34, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)], np.int64)
    return np.concatenate([edges, rng.integers(-(2**63), 2**63 - 1, INT_KEYS, np.int64)])


@pytest.fixture(scope="module")
def ints(longs: np.ndarray) -> np.ndarray:
    return longs.astype(np.int32)


@pytest.mark.parametrize("n", [1, 16, 1000, 2**31 - 1])
def test_iceberg_bucket_of_strings_and_binaries_is_pyicebergs(keys: list[Key], n: int) -> None:
    transform = BucketTransform(n)
    of_string = transform.transform(StringType())
    of_binary = transform.transform(BinaryType())
    want = [
        None if k is None else of_string(k) if isinstance(k, str) else of_binary(k) for k in keys
    ]
    check_batch(keys, n, Partitioner.ICEBERG_BUCKET, want)
    sample = [k for k in keys[:2000] if k is not None]
    singles = [iceberg_bucket(k, n) for k in sample]
    assert (
        differences(
            singles,
            [w for k, w in zip(keys[:2000], want[:2000], strict=True) if k is not None],
            sample,
        )
        == []
    )


@pytest.mark.parametrize("n", [1, 16, 1000, 2**31 - 1])
def test_iceberg_bucket_of_ints_and_longs_is_pyicebergs(
    ints: np.ndarray, longs: np.ndarray, n: int
) -> None:
    transform = BucketTransform(n)
    for values, iceberg_type, key_type in [
        (ints, IntegerType(), "int"),
        (longs, LongType(), "long"),
    ]:
        of_value = transform.transform(iceberg_type)
        want = [of_value(int(v)) for v in values]
        assert differences(list(partitions(values, n, "iceberg:bucket")), want, values) == []
        typed = partitions(values.tolist(), n, "iceberg:bucket", key_type=key_type)
        assert differences(list(typed), want, values) == []
        arrow = partitions(pa.array(values), n, "iceberg:bucket")
        assert differences(list(arrow), want, values) == []
        assert [iceberg_bucket(int(v), n) for v in values[:1000]] == want[:1000]


def test_iceberg_spec_values() -> None:
    # Iceberg spec appendix B: hash(34) = 2017239379, bucket[16] therefore 3.
    assert iceberg_bucket(34, 16) == 2017239379 % 16
    assert iceberg_bucket("iceberg", 2**31 - 1) == 1210000089
    assert iceberg_bucket(b"\x00\x01\x02\x03", 2**31 - 1) == (-188683207) & 0x7FFFFFFF
    assert partition(None, 16, Partitioner.ICEBERG_BUCKET) is None


# --- Spark: its own hash() and pmod ------------------------------------------------------


@pytest.mark.parametrize("n", [7, 200])
def test_spark_bucket_of_strings_and_binaries_is_sparks(
    spark: SparkSession, keys: list[Key], n: int
) -> None:
    from pyspark.sql import functions as F

    for kind, picked in [
        ("string", [k for k in keys if k is None or isinstance(k, str)]),
        ("binary", [None if k is None else utf8(k) for k in keys]),
    ]:
        df = spark.createDataFrame([(i, k) for i, k in enumerate(picked)], f"i int, k {kind}")
        rows = df.select("i", F.hash("k"), F.pmod(F.hash("k"), F.lit(n))).orderBy("i").collect()
        hashes = [r[1] for r in rows]
        buckets = [r[2] for r in rows]
        assert differences([spark_hash(k, kind) for k in picked], hashes, picked) == []
        assert differences(list(partitions(picked, n, "spark:bucket")), buckets, picked) == []
        assert [spark_bucket(k, n, kind) for k in picked[:500]] == buckets[:500]


@pytest.mark.parametrize("n", [7, 200])
def test_spark_bucket_of_ints_and_longs_is_sparks(
    spark: SparkSession, ints: np.ndarray, longs: np.ndarray, n: int
) -> None:
    from pyspark.sql import functions as F

    for kind, values in [("int", ints), ("long", longs)]:
        df = spark.createDataFrame([(i, int(v)) for i, v in enumerate(values)], f"i int, k {kind}")
        rows = df.select("i", F.hash("k"), F.pmod(F.hash("k"), F.lit(n))).orderBy("i").collect()
        hashes = [r[1] for r in rows]
        buckets = [r[2] for r in rows]
        assert differences([spark_hash(int(v), kind) for v in values], hashes, values) == []
        assert differences(list(partitions(values, n, "spark:bucket")), buckets, values) == []
        typed = partitions(values.tolist(), n, "spark:bucket", key_type=kind)
        assert differences(list(typed), buckets, values) == []


def test_spark_null_hashes_to_the_seed(spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(None,)], "k string")
    (row,) = df.select(F.hash("k"), F.pmod(F.hash("k"), F.lit(5))).collect()
    assert (spark_hash(None), partition(None, 5, Partitioner.SPARK_BUCKET)) == (row[0], row[1])


def test_a_python_int_is_a_long_as_pyspark_infers_it() -> None:
    assert spark_hash(5) == spark_hash(5, "long") != spark_hash(5, "int")
    assert partitions([5], 9, "spark:bucket")[0] == spark_bucket(5, 9, "long")
    assert partitions(np.array([5], np.int32), 9, "spark:bucket")[0] == spark_bucket(5, 9, "int")


# --- One rule whatever the batch's form --------------------------------------------------

key_strategy = st.one_of(st.none(), st.text(), st.binary())


@given(
    st.lists(key_strategy, max_size=40),
    st.integers(1, 2**31 - 1),
    st.sampled_from(list(Partitioner)),
)
def test_every_form_of_a_batch_agrees(keys: list[Key], n: int, partitioner: Partitioner) -> None:
    want = [partition(k, n, partitioner) for k in keys]
    expected = [-1 if w is None else w for w in want]
    assert list(partitions(keys, n, partitioner)) == expected
    assert list(partitions(tuple(keys), n, partitioner.value)) == expected
    assert list(partitions(iter(keys), n, partitioner)) == expected
    as_bytes = [None if k is None else utf8(k) for k in keys]
    for arrow_type in [pa.binary(), pa.large_binary(), pa.binary_view()]:
        arrow = pa.array(as_bytes, arrow_type)
        assert list(partitions(arrow, n, partitioner)) == expected
    half = len(keys) // 2
    chunked = pa.chunked_array([as_bytes[:half], as_bytes[half:]], pa.binary())
    assert list(partitions(chunked, n, partitioner)) == expected
    for p in want:
        assert p is None or 0 <= p < n


@given(st.lists(st.one_of(st.none(), st.text()), max_size=40), st.integers(1, 1000))
def test_arrow_strings_are_their_utf8_bytes(keys: list[str | None], n: int) -> None:
    for arrow_type in [pa.string(), pa.large_string(), pa.string_view()]:
        for partitioner in Partitioner:
            want = partitions(keys, n, partitioner)
            assert list(partitions(pa.array(keys, arrow_type), n, partitioner)) == list(want)


@given(
    st.lists(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)), max_size=40),
    st.integers(1, 2**31 - 1),
    st.sampled_from([Partitioner.ICEBERG_BUCKET, Partitioner.SPARK_BUCKET]),
)
def test_int_keys_in_every_form(keys: list[int | None], n: int, partitioner: Partitioner) -> None:
    for key_type, dtype in [("int", pa.int32()), ("long", pa.int64())]:
        want = [partition(k, n, partitioner, key_type=key_type) for k in keys]
        expected = [-1 if w is None else w for w in want]
        assert list(partitions(keys, n, partitioner, key_type=key_type)) == expected
        assert list(partitions(pa.array(keys, dtype), n, partitioner)) == expected
        present = [k for k in keys if k is not None]
        numpy_keys = np.array(present, np.int32 if key_type == "int" else np.int64)
        got = partitions(numpy_keys, n, partitioner)
        assert list(got) == [w for k, w in zip(keys, expected, strict=True) if k is not None]


@given(st.binary(), st.integers(1, 2**31 - 1))
def test_hypothesis_against_the_peers(key: bytes, n: int) -> None:
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)
    assert partition(key, n, "kafka") == (kafka_python_murmur2(key) & 0x7FFFFFFF) % n
    assert partition(key, n, "librdkafka:consistent") == zlib.crc32(key) % n
    assert fnv1a_32(key) == fnvhash_fnv1a_32(key)
    assert partition(key, n, "iceberg:bucket") == BucketTransform(n).transform(BinaryType())(key)
    assert (
        partition(key, n, "pulsar:Murmur3_32Hash")
        == (mmh3.hash(java_utf8(key), signed=False) & 0x7FFFFFFF) % n
    )


def test_partitioner_names() -> None:
    assert Partitioner("kafka") is Partitioner.KAFKA
    assert Partitioner("pulsar:JavaStringHash") is Partitioner.PULSAR_JAVA_STRING_HASH
    assert len({p.value for p in Partitioner}) == 13


# --- Bad input ---------------------------------------------------------------------------

BAD_CALLS: list[tuple[Callable[[], object], type[Exception], str]] = [
    (lambda: partition("k", 0, "kafka"), ValueError, "num_partitions"),
    (lambda: partition("k", 2**31, "kafka"), ValueError, "num_partitions"),
    (lambda: partition("k", True, "kafka"), TypeError, "num_partitions"),
    (lambda: partition("k", 3.0, "kafka"), TypeError, "num_partitions"),  # type: ignore[arg-type]
    (lambda: partition("k", 3, "Kafka"), ValueError, "partitioner"),
    (lambda: partition("k", 3, 7), TypeError, "partitioner"),  # type: ignore[arg-type]
    (lambda: partition("k", 3, "\ud800"), InvalidArgument, "partitioner must be one of"),  # type: ignore[arg-type]
    (
        lambda: _core.partition_key("k", 3, "\ud800"),
        InvalidArgument,
        "partitioner is not valid text",
    ),
    (
        lambda: partition("k", 3, "kafka", key_type="\ud800"),
        InvalidArgument,
        "key_type is not valid text",
    ),  # type: ignore[arg-type]
    (lambda: partition(3, 3, "kafka"), TypeError, "int keys"),
    (lambda: partition(3.5, 3, "kafka"), TypeError, "key"),  # type: ignore[arg-type]
    (lambda: partition("\ud800", 3, "kafka"), ValueError, "key"),
    (lambda: partition(2**31, 3, "spark:bucket", key_type="int"), ValueError, "key"),
    (lambda: partition(2**64, 3, "spark:bucket"), ValueError, "key"),
    (lambda: partition("k", 3, "spark:bucket", key_type="int"), TypeError, "key"),
    (lambda: partition(3, 3, "spark:bucket", key_type="string"), TypeError, "key"),
    (lambda: partition("k", 3, "kafka", key_type="char"), ValueError, "key_type"),  # type: ignore[arg-type]
    (lambda: partitions("abc", 3, "kafka"), TypeError, "single str"),
    (lambda: partitions(b"abc", 3, "kafka"), TypeError, "single str"),
    (lambda: partitions(3, 3, "kafka"), TypeError, "keys"),
    (lambda: partitions(["a", 1], 3, "kafka"), TypeError, "keys[1]"),
    (lambda: partitions(["a", "\udc00"], 3, "kafka"), ValueError, "keys[1]"),
    (lambda: partitions([1, "a"], 3, "iceberg:bucket"), TypeError, "keys[1]"),
    (lambda: partitions([1, True], 3, "iceberg:bucket"), TypeError, "keys[1]"),
    (lambda: partitions([1, 2**70], 3, "iceberg:bucket"), ValueError, "keys[1]"),
    (lambda: partitions([1, 2**40], 3, "spark:bucket", key_type="int"), ValueError, "keys[1]"),
    (lambda: partitions([1], 3, "kafka"), TypeError, "int keys"),
    (lambda: partitions(["a"], 3, "spark:bucket", key_type="long"), TypeError, "key_type"),
    (lambda: partitions([1], 3, "spark:bucket", key_type="binary"), TypeError, "key_type"),
    (lambda: partitions(np.zeros((2, 2), np.int64), 3, "spark:bucket"), TypeError, "dimensional"),
    (lambda: partitions(np.array([2**64 - 1], np.uint64), 3, "spark:bucket"), TypeError, "uint64"),
    (lambda: partitions(pa.array([1.5]), 3, "spark:bucket"), TypeError, "Arrow type Float64"),
    (lambda: partitions(pa.array(["a"]), 3, "spark:bucket", key_type="int"), TypeError, "key_type"),
    (lambda: murmur2(3), TypeError, "data"),  # type: ignore[arg-type]
    (lambda: iceberg_bucket("k", 0), ValueError, "num_buckets"),
    (lambda: iceberg_bucket(1.5, 3), TypeError, "value"),  # type: ignore[arg-type]
    (lambda: spark_hash(1, "float"), ValueError, "data_type"),  # type: ignore[arg-type]
    (lambda: spark_bucket(1, -1), ValueError, "num_buckets"),
]


@pytest.mark.parametrize(("call", "error", "names"), BAD_CALLS)
def test_bad_input_is_refused_by_name(
    call: Callable[[], object], error: type[Exception], names: str
) -> None:
    with pytest.raises(error, match=names.replace("[", r"\[").replace("]", r"\]")):
        call()


def test_a_batch_releases_the_gil() -> None:
    """Another Python thread runs while a batch is partitioned."""
    keys = pa.array([f"key-{i}" for i in range(200_000)] * 30)
    span: list[float] = []

    def work() -> None:
        span.append(time.perf_counter())
        partitions(keys, 12, Partitioner.KAFKA)
        span.append(time.perf_counter())

    worker = threading.Thread(target=work)
    ticks: list[float] = []
    worker.start()
    while worker.is_alive():
        ticks.append(time.perf_counter())
    worker.join()
    start, end = span
    # Had the call held the GIL, this thread would have stood still for all of it.
    gaps = np.diff([start, *(t for t in ticks if start < t < end), end])
    assert gaps.max() < (end - start) / 2


# --- NumPy and Arrow integers: byte order, stride and width ------------------------------

SPARK_INT_DTYPES = ["i1", "i2", "i4", "u1", "u2"]
SPARK_LONG_DTYPES = ["i8", "u4"]


@given(
    st.lists(st.integers(0, 127), min_size=1, max_size=30),
    st.sampled_from(SPARK_INT_DTYPES + SPARK_LONG_DTYPES),
    st.sampled_from(["<", ">", "="]),
    st.integers(1, 3),
    st.integers(1, 2**31 - 1),
)
def test_numpy_ints_are_read_by_value_and_typed_as_spark_types_them(
    values: list[int], dtype: str, order: str, stride: int, n: int
) -> None:
    """Any byte order and stride gives the keys' values; byte, short and int columns (and
    the unsigned types that fit an int) hash as Spark's int, int64 and uint32 as its long."""
    kind = "int" if dtype in SPARK_INT_DTYPES else "long"
    array = np.repeat(np.array(values, order + dtype), stride)[::stride]
    assert array.dtype.str[1:] == dtype and array.tolist() == values
    want = [spark_bucket(v, n, kind) for v in values]
    assert partitions(array, n, "spark:bucket").tolist() == want
    assert partitions(array, n, "iceberg:bucket").tolist() == [iceberg_bucket(v, n) for v in values]
    arrow = pa.array(values, pa.from_numpy_dtype(np.dtype(dtype)))
    assert partitions(arrow, n, "spark:bucket").tolist() == want


def test_a_big_endian_int_is_its_value() -> None:
    for dtype in (">i4", "<i4", ">i2", ">u2", ">i8"):
        kind = "long" if dtype.endswith("i8") else "int"
        want = [spark_bucket(34, 16, kind), spark_bucket(35, 16, kind)]
        assert partitions(np.array([34, 35], dtype), 16, "spark:bucket").tolist() == want
    assert want == [12, 2]  # the longs; as ints 34 and 35 are buckets 3 and 7
    assert partitions(np.array([34, 35], ">i4"), 16, "spark:bucket").tolist() == [3, 7]


def test_narrow_arrow_ints_are_sparks_ints() -> None:
    for arrow_type in (pa.int8(), pa.int16(), pa.uint8(), pa.uint16()):
        got = partitions(pa.array([34, None, 35], arrow_type), 16, "spark:bucket").tolist()
        assert got == [3, partition(None, 16, "spark:bucket"), 7]
    assert partitions(pa.array([34], pa.uint32()), 16, "spark:bucket").tolist() == [12]
    with pytest.raises(TypeError, match="keys: Arrow type UInt64"):
        partitions(pa.array([34], pa.uint64()), 16, "spark:bucket")


# --- The Pulsar schemes: a bytes key is the Java string it decodes to --------------------


@given(st.binary(max_size=24), st.integers(1, 2**31 - 1))
def test_a_bytes_key_routes_as_its_java_string(key: bytes, n: int) -> None:
    text = java_utf8(key).decode()
    for partitioner, scheme in [
        ("pulsar:JavaStringHash", keyshared.routing.HashingScheme.JavaStringHash),
        ("pulsar:Murmur3_32Hash", keyshared.routing.HashingScheme.Murmur3_32Hash),
    ]:
        want = partition(text, n, partitioner)
        assert partition(key, n, partitioner) == want
        assert partitions([key], n, partitioner).tolist() == [want]
        assert keyshared.routing.choose_partition(key, n, scheme) == want
        assert scheme.make_hash(key) == scheme.make_hash(text)


def test_an_invalid_byte_routes_as_u_fffd() -> None:
    # The Java client hashes "\ufffd" (new String(b"\xff", UTF_8)): partition 5 of 7.
    assert partition(b"\xff", 7, "pulsar:Murmur3_32Hash") == 5
    assert partition("\ufffd", 7, "pulsar:Murmur3_32Hash") == 5
    assert java_utf8(b"\xed\xa0\x80a") == "\ufffda".encode()


def test_choose_partition_checks_as_partition_does() -> None:
    """One check for both: a partition count beyond a Java int and a lone surrogate."""
    for call in (
        lambda: partition("k", 2**40, "pulsar:JavaStringHash"),
        lambda: keyshared.routing.choose_partition("k", 2**40),
    ):
        with pytest.raises(ValueError, match=r"num_partitions must be in \[1, 2\*\*31 - 1\]"):
            call()
    for scheme in keyshared.routing.HashingScheme:
        with pytest.raises(ValueError, match="key"):
            partition("a\ud800", 3, f"pulsar:{scheme.value}")
        with pytest.raises(ValueError, match="key"):
            keyshared.routing.choose_partition("a\ud800", 3, scheme)
    with pytest.raises(TypeError, match="key must be a str or bytes"):
        keyshared.routing.choose_partition(None, 3)  # type: ignore[arg-type]


@pytest.mark.parametrize("partitioner", ["iceberg:bucket", "spark:bucket"])
def test_numpy_integer_scalars_are_int_keys(partitioner: str) -> None:
    """A NumPy integer scalar (what iterating a NumPy array gives) is the Python int of its
    value, alone or in a list; NumPy's bool is no int, as Python's is not."""
    values = [0, 5, -7, 2**31, -(2**63), 2**63 - 1]
    scalars = [np.int64(v) for v in values]
    assert [partition(s, 13, partitioner) for s in scalars] == [
        partition(v, 13, partitioner) for v in values
    ]
    assert partitions([*scalars, None], 13, partitioner).tolist() == (
        partitions([*values, None], 13, partitioner).tolist()
    )
    assert partition(np.uint8(200), 13, partitioner) == partition(200, 13, partitioner)
    with pytest.raises(ValueError, match=r"keys\[0\] = 18446744073709551615 is outside"):
        partitions([np.uint64(2**64 - 1)], 13, partitioner)
    with pytest.raises(TypeError, match="key must be str or bytes, got bool"):
        partition(np.True_, 13, partitioner)


def java_hash_of_units(text: str) -> int:
    """Java's ``String.hashCode`` by its definition, over the string's UTF-16 code units."""
    units = text.encode("utf-16-le", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "little")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


ascii_text = st.text(st.characters(max_codepoint=0x7F), max_size=40)
any_text = st.text(max_size=40)


@given(st.lists(st.one_of(ascii_text, any_text), max_size=60), st.integers(1, 2**31 - 1))
def test_java_string_hash_batch_is_the_java_definition(keys: list[str], n: int) -> None:
    # ASCII keys take the batch's fast path (all ASCII), mixed batches the decoding one.
    want = [(java_hash_of_units(k) & 0x7FFFFFFF) % n for k in keys]
    for batch in (keys, pa.array(keys, pa.string()), [k.encode() for k in keys]):
        got = partitions(batch, n, Partitioner.PULSAR_JAVA_STRING_HASH)
        assert got.tolist() == want
    assert [java_string_hash_code(k) for k in keys] == [java_hash_of_units(k) for k in keys]


@given(st.lists(st.binary(max_size=30), max_size=60))
def test_java_string_hash_of_bytes_is_that_of_the_jdk_string(keys: list[bytes]) -> None:
    # Invalid UTF-8 is replaced as the JDK replaces it, in a batch as one key at a time.
    want = [(java_string_hash_code(k) & 0x7FFFFFFF) % 12 for k in keys]
    assert partitions(keys, 12, Partitioner.PULSAR_JAVA_STRING_HASH).tolist() == want


@given(
    st.lists(st.one_of(st.none(), st.binary(max_size=30), st.text(max_size=30)), max_size=60),
    st.sampled_from(list(Partitioner)),
    st.integers(1, 2**31 - 1),
)
def test_batches_partition_as_one_key_at_a_time(
    keys: list[bytes | str | None], partitioner: Partitioner, n: int
) -> None:
    want = [partition(k, n, partitioner) for k in keys]
    got = partitions(keys, n, partitioner).tolist()
    assert got == [-1 if w is None else w for w in want]


# Those whose answer for a key (or a null) is fixed, so that two batches can be compared.
_FIXED = [
    Partitioner.KAFKA,
    Partitioner.LIBRDKAFKA_CONSISTENT,
    Partitioner.LIBRDKAFKA_MURMUR2,
    Partitioner.LIBRDKAFKA_FNV1A,
    Partitioner.PULSAR_JAVA_STRING_HASH,
    Partitioner.PULSAR_MURMUR3_32_HASH,
    Partitioner.ICEBERG_BUCKET,
    Partitioner.SPARK_BUCKET,
]


@pytest.mark.parametrize("partitioner", _FIXED)
@given(keys=st.lists(list_items, max_size=60))
def test_list_items_of_every_kind_partition_as_their_bytes(
    partitioner: Partitioner, keys: list[str | bytes | None]
) -> None:
    as_bytes = [k.encode() if isinstance(k, str) else None if k is None else bytes(k) for k in keys]
    want = partitions(pa.array(as_bytes, pa.binary()), 12, partitioner)
    for batch in (keys, tuple(keys)):
        np.testing.assert_array_equal(partitions(batch, 12, partitioner), want)


#: Keys of a list read and mapped at once (rust/bindings/src/keys.rs).
PIECE = 1 << 12


@settings(max_examples=40, deadline=None)
@given(
    spots=st.lists(st.tuples(st.integers(0, PIECE * 3), list_items), max_size=6),
    partitioner=st.sampled_from(_FIXED),
    threads=st.sampled_from([1, 2]),
)
def test_long_lists_partition_as_their_bytes(
    spots: list[tuple[int, str | bytes | None]], partitioner: Partitioner, threads: int
) -> None:
    # Lists of several pieces, str and bytes of up to 100 bytes mixed, mapped on one thread
    # or two straight into the output; a piece with any other item (text that is not ASCII,
    # a subclass, a None) is mapped on the calling thread into its place in the output.
    keys: list[str | bytes | None] = [
        f"k{i}-" + "x" * (i * 7 % 97) if i % 5 else f"b{i}".encode() for i in range(PIECE * 3 + 1)
    ]
    for i, item in spots:
        keys[i] = item
    as_bytes = [k.encode() if isinstance(k, str) else None if k is None else bytes(k) for k in keys]
    want = partitions(pa.array(as_bytes, pa.binary()), 12, partitioner)
    before = _core.get_num_threads()
    _core.set_num_threads(threads)
    try:
        for batch in (keys, tuple(keys)):
            np.testing.assert_array_equal(partitions(batch, 12, partitioner), want)
    finally:
        _core.set_num_threads(before)


@pytest.mark.parametrize(
    "keys", [[None, None, 5, 2**40], (None, 5, None), [None, "a", b"b"], (None, b"a", None)]
)
def test_int_or_byte_keys_by_the_first_key_that_is_not_none(keys: Sequence[Any]) -> None:
    got = partitions(keys, 7, Partitioner.ICEBERG_BUCKET).tolist()
    assert got == [-1 if k is None else iceberg_bucket(k, 7) for k in keys]


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ([None, 5, "a"], r"keys\[2\] must be an int, got str"),
        ((None, "a", 5), r"keys\[2\] must be str or bytes, got int"),
        (["a", b"b", 1.5], r"keys\[2\] must be str or bytes, got float"),
    ],
)
def test_a_key_of_the_other_kind_is_named_by_its_index(keys: Sequence[Any], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        partitions(keys, 7, Partitioner.ICEBERG_BUCKET)


class _Shrinking:
    """An int whose reading empties the list it is in."""

    def __init__(self, keys: list[Any], value: int) -> None:
        self.keys, self.value = keys, value

    def __index__(self) -> int:
        self.keys.clear()
        return self.value


def test_int_keys_whose_reading_changes_the_list_are_read_as_they_were() -> None:
    keys: list[Any] = []
    keys.extend([_Shrinking(keys, 3), None, _Shrinking(keys, 2**40)])
    got = partitions(keys, 7, Partitioner.ICEBERG_BUCKET).tolist()
    assert got == [iceberg_bucket(3, 7), -1, iceberg_bucket(2**40, 7)]
    assert keys == []
