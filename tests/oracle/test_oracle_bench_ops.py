"""The oracle's benchmark loops (``BenchOps``: each system's partitioner looped over a key file,
the JVM peers of benches/) against keyshared: every task's results, and the checksum each timed
pass reports, are keyshared's answer for any keys, so that a benchmark times the same work.

Keys are drawn by hypothesis as bytes (invalid UTF-8 included: the Pulsar client's String of
them is what it hashes) and as text, written in the file format ``bench.load`` documents.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.pulsar_oracle import Oracle, record

import keyshared as ks
from keyshared._core import java_utf8
from keyshared.routing import Partitioner

keys = st.lists(
    st.one_of(
        st.binary(max_size=40), st.text(max_size=30).map(lambda t: t.encode("utf-8", "replace"))
    ),
    min_size=1,
    max_size=300,
)
PARTITIONERS = {
    "kafka": Partitioner.KAFKA,
    "pulsar_murmur3": Partitioner.PULSAR_MURMUR3_32_HASH,
    "pulsar_java_string": Partitioner.PULSAR_JAVA_STRING_HASH,
    "iceberg_bucket_string": Partitioner.ICEBERG_BUCKET,
}


def load(oracle: Oracle, path: Path, batch: list[bytes]) -> int:
    """The keys as ``bench.load`` reads them: a big-endian int32 count, the int32 lengths,
    then the bytes."""
    path.write_bytes(
        struct.pack(f">i{len(batch)}i", len(batch), *map(len, batch)) + b"".join(batch)
    )
    handle: int = oracle.call("bench.load", path=str(path))
    return handle


def results(oracle: Oracle, loop: int, path: Path) -> np.ndarray:
    """One pass's results, and a check that a timed pass reports their checksum."""
    count = oracle.call("bench.dump", handle=loop, path=str(path))
    out = np.fromfile(path, dtype="<i4")
    assert len(out) == count
    run = oracle.call("bench.run", handle=loop, rounds=2)
    assert len(run["nanos"]) == len(run["cpu_nanos"]) == 2
    assert all(n > 0 for n in run["nanos"]) and all(n >= 0 for n in run["cpu_nanos"])
    weights = np.arange(1, len(out) + 1, dtype=np.uint64)
    want = int((weights * out.astype(np.int64).view(np.uint64)).sum(dtype=np.uint64))
    assert run["checksum"] % 2**64 == want
    return out


def expected(task: str, batch: list[bytes], n: int) -> list[int]:
    """keyshared's answer to the loop of ``task``."""
    if task == "pulsar_murmur3":
        # The loop hashes the key's bytes (Murmur3Hash32.makeHash(byte[])): the client's
        # partition of the String of those bytes wherever they are valid UTF-8, as the
        # benchmark's keys are.
        valid = [i for i, k in enumerate(batch) if is_utf8(k)]
        client = ks.partitions([batch[i] for i in valid], n, Partitioner.PULSAR_MURMUR3_32_HASH)
        raw = (ks.key_hashes(batch).astype(np.int64) & 0x7FFFFFFF) % n
        assert raw[valid].tolist() == client.tolist()
        return list(raw.tolist())
    if task == "iceberg_bucket_string":
        # Iceberg is given the String the JVM makes of the bytes: invalid UTF-8 replaced as
        # the JDK replaces it (java_utf8), which is not always as Python does (b"\xed\xa0",
        # a truncated surrogate, is one U+FFFD to the JDK and two to Python).
        strings = [java_utf8(k) for k in batch]
        return list(ks.partitions(strings, n, Partitioner.ICEBERG_BUCKET).tolist())
    return list(ks.partitions(batch, n, PARTITIONERS[task]).tolist())


def is_utf8(key: bytes) -> bool:
    try:
        key.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batch=keys, n=st.sampled_from([1, 7, 12, 1000, 2**31 - 1]))
# A key the JDK and Python decode to different strings.
@example(batch=[b"\xed\xa0"], n=7)
def test_partitioner_loops_give_keyshareds_partitions(
    oracle: Oracle, tmp_path: Path, batch: list[bytes], n: int
) -> None:
    handle = load(oracle, tmp_path / "keys.bin", batch)
    try:
        for task in PARTITIONERS:
            loop = oracle.call("bench.loop", keys=handle, task=task, num_partitions=n)
            theirs = results(oracle, loop, tmp_path / "out.bin")
            oracle.call("close", handle=loop)
            assert theirs.tolist() == expected(task, batch, n), task
    finally:
        oracle.call("close", handle=handle)
    record(
        "4.2.4 bench loops (kafka-clients, pulsar-client, iceberg-api)",
        len(batch) * len(PARTITIONERS),
    )


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batch=keys, consumers=st.integers(1, 12), points=st.sampled_from([1, 20, 100]))
def test_selector_loop_gives_keyshareds_consumers(
    oracle: Oracle, tmp_path: Path, batch: list[bytes], consumers: int, points: int
) -> None:
    handle = load(oracle, tmp_path / "keys.bin", batch)
    try:
        loop = oracle.call(
            "bench.loop", keys=handle, task="selector", consumers=consumers, number_of_points=points
        )
        theirs = results(oracle, loop, tmp_path / "out.bin")
        oracle.call("close", handle=loop)
    finally:
        oracle.call("close", handle=handle)
    selector = ks.ConsistentHashingStickyKeyConsumerSelector(points)
    for c in range(consumers):
        selector.add_consumer(c, f"c{c}")
    assert theirs.tolist() == selector.select_many(ks.routing.sticky_key_hashes(batch)).tolist()
    record("4.2.4 bench selector loop", len(batch))


@settings(max_examples=10, deadline=None)
@given(rounds=st.integers(1, 5), ops=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_scalable_bench_ops_give_keyshareds_answers(
    oracle_milestone: Oracle, rounds: int, ops: int, seed: int
) -> None:
    """The 5.0.0-M1 oracle's timed layout, decide and assign loops (benches/test_layout_sizes.py)
    answer what keyshared does with M1's rules, and time every round."""
    layout = ks.TopicLayout.initial(1 + seed % 5)
    for _ in range(rounds):
        for seg in layout.active_segments():
            layout = layout.split_segment(seg.segment_id, 7)
    active = layout.active_segments()
    # Distinct segments, spread over the ring: a split seals the segment it splits.
    picks = sorted({i * len(active) // ops for i in range(ops)})
    chain = [["split", active[i].segment_id, 9] for i in picks]
    done = layout
    for _, sid, now in chain:
        done = done.split_segment(sid, now)
    timing = {"calls": 2, "warmup": 1, "rounds": 3}
    got = oracle_milestone.call(
        "scalable.bench_layout", layout=layout.to_dict(), ops=chain, **timing
    )
    assert got["active"] == sorted(s.segment_id for s in done.active_segments())
    assert len(got["nanos"]) == len(got["cpu_nanos"]) == 3
    names = [f"c{i}" for i in range(seed % 7)]
    sealed = [s.segment_id for s in layout.segments.values() if s.is_sealed]
    case = {
        "layout": layout.to_dict(),
        "topic": "topic://t/n/x",
        "consumers": names,
        "drain_checker": True,
        "drained": sealed,
    }
    got = oracle_milestone.call("scalable.bench_assign", case=case, **timing)
    ours = ks.compute_assignment(
        layout, ks.TopicName.get("topic://t/n/x"), names, sealed, pulsar_version="5.0.0-M1"
    )
    assert got["last"] == {
        name: {
            "layout_epoch": a.layout_epoch,
            "segments": [
                [s.segment_id, [s.hash_range.start, s.hash_range.end], s.segment_topic_name]
                for s in a.assigned_segments
            ],
        }
        for name, a in ours.items()
    }
    record("5.0.0-M1 bench loops (layout, assign)", 2)
