"""Other systems' partitioners, one group each: keyshared over a Python list and over Arrow,
the system's own JVM implementation from its released jar (jvm), and the Python peers a user
would otherwise call, all over the same 1M keys of 23 bytes, on one thread.

How the JVM is timed, and why its floor compares like with like:

- One JVM (the Pulsar oracle, benches/jvm.py) serves every group. It reads the keys once from
  a file, and each task's loop runs 40 untimed passes before its group is timed, so that the
  JIT's top tier has compiled it: the JVM at its steady state, as a long-running producer
  runs it.
- The JVM times each pass itself (``System.nanoTime`` around the loop over the 1M keys,
  results written to an int array it reuses). The jvm row of the table is pytest-benchmark's
  time of the request, which adds the round trip through the pipe (well under 1% of a pass);
  the pass alone is in extra_info as ``jvm self-timed ns/key``.
- The floor (benches/ratios.py, 2x) is a paired ratio each keyshared variant records: before
  every keyshared round the JVM runs one pass, and the ratio is the median over rounds of the
  JVM's pass over keyshared's round, in process CPU time. Pairing puts the two in the same
  stretch of a machine other work also uses; CPU time leaves out the time either process
  waits for a core, which on such a machine can be most of a wall-clock pass, while both
  sides are one thread of work, so it compares like with like (the JVM's count includes the
  collector's work its loop causes). The wall-clock paired ratio is recorded beside it. What
  error is left favours the JVM: keyshared's time is what a Python caller waits for (the call,
  reading every key from the list or the Arrow array, allocating the result array), the
  JVM's is its loop alone.
- keyshared runs with ``set_num_threads(1)``; the JVM's loop runs on one thread, with the serial
  collector, whose work (the garbage of a per-key String) runs while the loop waits, never
  beside it on another core.
- What each JVM loop calls, and what it gets ready untimed (the key bytes; Strings for
  Iceberg, which holds a string column as Strings), is in oracle/.../BenchOps.java.
- Every peer must give keyshared's answer: the JVM's whole result array is compared once, then
  each timed pass by checksum.

What bounds the list rows: a Python list of 1M keys of 23 bytes is 1M objects, 64 bytes each
for bytes and 80 for str, plus the list's 8-byte pointers, where the JVM holds 40-byte arrays.
Only streaming that memory, one load per 64-byte line and no other work, takes about 6 ns a
key for bytes (7.5 for str) from memory on the machine these floors were set on, while the
JVM's Kafka loop takes 13-20 ns a key: at 2x, reading the list would leave no time for the
rest. keyshared reads each object once (rust/bindings/src/keys.rs), a piece at a time.

iceberg-bucket-long (Iceberg's bucket of 64-bit integers) has no JVM peer.
"""

from collections.abc import Callable
from typing import Any

import limits
import mmh3
import numpy as np
import pyarrow as pa
import pytest
from jvm import Loop, time_beside_jvm, time_jvm
from kafka.partitioner.default import murmur2 as kafka_murmur2
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import LongType, StringType
from ratios import KEYS

import keyshared as ks
from keyshared.routing import Partitioner

PARTITIONS = 12
#: The limit of the list rows: reading every key's bytes through the list and nothing else.
READ = "read-objects"
READ_ROUNDS = 15
#: Rounds of the per-key Python loops, whose rounds take seconds.
PYTHON_ROUNDS = 3
#: Values of the integer group, which has no JVM peer.
N_LONG = 200_000


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def key_bytes(fixed_keys: list[str]) -> list[bytes]:
    # Kafka partitions the serialized key: every peer gets the same bytes.
    return [k.encode() for k in fixed_keys]


def assert_same(got: object, expected: np.ndarray) -> None:
    assert np.array_equal(np.asarray(got), expected)


def kafka_python_loop(keys: list[bytes]) -> np.ndarray:
    # kafka-python's DefaultPartitioner, without its cluster lookups.
    return np.fromiter(
        ((kafka_murmur2(k) & 0x7FFFFFFF) % PARTITIONS for k in keys), np.int64, len(keys)
    )


def compare(
    benchmark: Any,
    lib: str,
    runs: dict[str, Callable[[], object]],
    loop: Callable[[], Loop],
    expected: np.ndarray,
    keys: list[str] | list[bytes],
) -> None:
    """Checks ``lib``'s answer against ``expected`` (keyshared's), then times it: keyshared
    beside the JVM, the JVM on its own, a Python loop over a few rounds, and the read of
    ``keys`` through their list (``READ``, the list rows' limit)."""
    runs = {**runs, READ: lambda: limits.read_objects(keys)}
    if lib == "jvm":
        time_jvm(benchmark, loop(), expected)
        return
    run = runs[lib]
    if lib == READ:
        # Not a peer but the limit: its answer is a checksum of the keys' bytes. Each round
        # runs just after a JVM pass, as keyshared's do: the pass leaves the caches to either
        # as it leaves them to the other.
        assert run() == limits.checksum(keys)
        jvm = loop()

        def jvm_pass() -> None:
            jvm.run()

        benchmark.pedantic(run, setup=jvm_pass, rounds=READ_ROUNDS, iterations=1, warmup_rounds=1)
        benchmark.extra_info[KEYS] = len(expected)
        return
    assert_same(run(), expected)
    if lib.startswith("keyshared"):
        time_beside_jvm(benchmark, run, loop(), len(expected))
    else:
        benchmark.pedantic(run, rounds=PYTHON_ROUNDS, iterations=1)
        benchmark.extra_info[KEYS] = len(expected)


@pytest.mark.benchmark(group="kafka-partition")
@pytest.mark.parametrize("lib", ["keyshared", "keyshared-arrow", "jvm", "kafka-python-loop", READ])
def test_kafka_partition(
    benchmark: Any, lib: str, key_bytes: list[bytes], jvm_loop: Callable[..., Loop]
) -> None:
    arrow = pa.array(key_bytes, pa.binary())
    runs: dict[str, Callable[[], object]] = {
        "keyshared": lambda: ks.partitions(key_bytes, PARTITIONS, Partitioner.KAFKA),
        "keyshared-arrow": lambda: ks.partitions(arrow, PARTITIONS, Partitioner.KAFKA),
        "kafka-python-loop": lambda: kafka_python_loop(key_bytes),
    }
    expected = ks.partitions(key_bytes, PARTITIONS, Partitioner.KAFKA)
    kafka = lambda: jvm_loop("kafka", num_partitions=PARTITIONS)  # noqa: E731
    compare(benchmark, lib, runs, kafka, expected, key_bytes)


@pytest.mark.benchmark(group="murmur3-partition")
@pytest.mark.parametrize("lib", ["keyshared", "keyshared-arrow", "jvm", "mmh3-loop", READ])
def test_murmur3_partition(
    benchmark: Any, lib: str, fixed_keys: list[str], jvm_loop: Callable[..., Loop]
) -> None:
    arrow = pa.array(fixed_keys, pa.string())
    scheme = Partitioner.PULSAR_MURMUR3_32_HASH
    runs: dict[str, Callable[[], object]] = {
        "keyshared": lambda: ks.partitions(fixed_keys, PARTITIONS, scheme),
        "keyshared-arrow": lambda: ks.partitions(arrow, PARTITIONS, scheme),
        "mmh3-loop": lambda: np.fromiter(
            ((mmh3.hash(k, signed=False) & 0x7FFFFFFF) % PARTITIONS for k in fixed_keys),
            np.int64,
            len(fixed_keys),
        ),
    }
    expected = ks.partitions(fixed_keys, PARTITIONS, scheme)
    compare(
        benchmark,
        lib,
        runs,
        lambda: jvm_loop("pulsar_murmur3", num_partitions=PARTITIONS),
        expected,
        fixed_keys,
    )


@pytest.mark.benchmark(group="java-string-hash-partition")
@pytest.mark.parametrize("lib", ["keyshared", "keyshared-arrow", "jvm", READ])
def test_java_string_hash_partition(
    benchmark: Any, lib: str, key_bytes: list[bytes], jvm_loop: Callable[..., Loop]
) -> None:
    # The keys arrive as bytes: the Java client builds a String of each, keyshared reads the
    # UTF-8 as it is.
    arrow = pa.array(key_bytes, pa.binary())
    scheme = Partitioner.PULSAR_JAVA_STRING_HASH
    runs: dict[str, Callable[[], object]] = {
        "keyshared": lambda: ks.partitions(key_bytes, PARTITIONS, scheme),
        "keyshared-arrow": lambda: ks.partitions(arrow, PARTITIONS, scheme),
    }
    expected = ks.partitions(key_bytes, PARTITIONS, scheme)
    compare(
        benchmark,
        lib,
        runs,
        lambda: jvm_loop("pulsar_java_string", num_partitions=PARTITIONS),
        expected,
        key_bytes,
    )


@pytest.mark.benchmark(group="iceberg-bucket-string")
@pytest.mark.parametrize("lib", ["keyshared", "keyshared-arrow", "jvm", "pyiceberg-loop", READ])
def test_iceberg_bucket_string(
    benchmark: Any, lib: str, fixed_keys: list[str], jvm_loop: Callable[..., Loop]
) -> None:
    arrow = pa.array(fixed_keys, pa.string())
    bucket = BucketTransform(PARTITIONS).transform(StringType())
    scheme = Partitioner.ICEBERG_BUCKET
    runs: dict[str, Callable[[], object]] = {
        "keyshared": lambda: ks.partitions(fixed_keys, PARTITIONS, scheme),
        "keyshared-arrow": lambda: ks.partitions(arrow, PARTITIONS, scheme),
        "pyiceberg-loop": lambda: np.fromiter(map(bucket, fixed_keys), np.int64, len(fixed_keys)),
    }
    expected = ks.partitions(fixed_keys, PARTITIONS, scheme)
    compare(
        benchmark,
        lib,
        runs,
        lambda: jvm_loop("iceberg_bucket_string", num_partitions=PARTITIONS),
        expected,
        fixed_keys,
    )


@pytest.mark.benchmark(group="iceberg-bucket-long")
@pytest.mark.parametrize("lib", ["keyshared", "pyiceberg-loop"])
def test_iceberg_bucket_long(benchmark: Any, lib: str) -> None:
    values = np.random.default_rng(7).integers(-(2**63), 2**63 - 1, N_LONG, np.int64)
    items = values.tolist()
    bucket = BucketTransform(PARTITIONS).transform(LongType())
    run: Callable[[], object] = {
        "keyshared": lambda: ks.partitions(values, PARTITIONS, Partitioner.ICEBERG_BUCKET),
        "pyiceberg-loop": lambda: np.fromiter(map(bucket, items), np.int64, len(items)),
    }[lib]
    assert_same(run(), ks.partitions(values, PARTITIONS, Partitioner.ICEBERG_BUCKET))
    benchmark(run)
