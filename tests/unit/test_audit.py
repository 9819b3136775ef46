"""The migration audit against a per-key Python model of it: each key placed one at a time by
the scalar partitioner and the layout's scalar router, and the at-risk rules as the module
states them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keyshared import TopicLayout, create_migrated_metadata
from keyshared.routing import HashingScheme, Partitioner, choose_partition, partition
from keyshared.scalable import (
    MAX_CELLS,
    MigrationAudit,
    MigrationPlan,
    Risk,
    audit_migration,
    display_key,
)

KEY = st.one_of(st.text(max_size=16), st.binary(max_size=16), st.none())
KEYS = st.lists(KEY, max_size=60)
PARTITIONERS = st.sampled_from(list(Partitioner))


def weights_for(keys: list[Any]) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, 1000), min_size=len(keys), max_size=len(keys))


def model(
    keys: list[Any],
    weights: Sequence[float],
    source: Partitioner,
    n: int,
    target: TopicLayout | int,
) -> dict[str, Any]:
    """The audit's numbers, one key at a time."""
    if isinstance(target, TopicLayout):
        ids = [s.segment_id for s in target.active_segments()]
    else:
        ids = list(range(target))
    keys_m = np.zeros((n, len(ids)), dtype=np.int64)
    traffic = np.zeros((n, len(ids)))
    unkeyed = [0, 0.0]
    risk = [0, 0.0]
    legacy = (
        [s for s in target.segments.values() if s.is_legacy]
        if isinstance(target, TopicLayout)
        else []
    )
    for key, w in zip(keys, weights, strict=True):
        p = partition(key, n, source)
        if p is None:
            unkeyed[0] += 1
            unkeyed[1] += w
            continue
        if isinstance(target, TopicLayout):
            # A layout routes an int key by its decimal text, as a producer would send it.
            text = str(key) if isinstance(key, int) else key
            column = ids.index(target.route(b"" if text is None else text)[0])
            if legacy:
                scheme = legacy[0].legacy_hashing_scheme or HashingScheme.Murmur3_32Hash
                at_risk = partition(text, n, Partitioner(f"pulsar:{scheme.value}")) != p
            else:
                at_risk = True
        else:
            moved = partition(key, target, source)
            assert moved is not None  # keyed under n partitions, keyed under m
            column, at_risk = moved, moved != p
        keys_m[p, column] += 1
        traffic[p, column] += w
        if at_risk:
            risk[0] += 1
            risk[1] += w
    return {"keys": keys_m, "traffic": traffic, "unkeyed": unkeyed, "risk": risk}


def assert_matches(audit: MigrationAudit, want: dict[str, Any]) -> None:
    assert np.array_equal(audit.keys, want["keys"])
    assert np.allclose(audit.traffic, want["traffic"])
    assert (audit.unkeyed_keys, audit.unkeyed_traffic) == pytest.approx(tuple(want["unkeyed"]))
    assert (audit.at_risk_keys, audit.at_risk_traffic) == pytest.approx(tuple(want["risk"]))


def assert_rows_are_shares(audit: MigrationAudit) -> None:
    for matrix, shares in ((audit.keys, audit.key_shares), (audit.traffic, audit.traffic_shares)):
        totals = matrix.sum(axis=1)
        assert np.allclose(shares.sum(axis=1)[totals > 0], 1.0)
        assert np.all(shares[totals == 0] == 0)


@settings(max_examples=150, deadline=None)
@given(st.data(), KEYS, PARTITIONERS, st.integers(1, 12), st.integers(1, 12))
def test_partition_count_change_matches_the_model(
    data: st.DataObject, keys: list[Any], source: Partitioner, n: int, m: int
) -> None:
    weights = data.draw(weights_for(keys))
    audit = audit_migration(keys, source, n, m, weights=weights)
    assert_matches(audit, model(keys, weights, source, n, m))
    assert_rows_are_shares(audit)
    assert audit.risk == Risk.PARTITION_CHANGES.value and audit.total_keys == len(keys)
    assert audit.total_traffic == pytest.approx(sum(weights))


@settings(max_examples=100, deadline=None)
@given(
    st.data(),
    KEYS,
    PARTITIONERS,
    st.integers(1, 8),
    st.sampled_from([None, *HashingScheme]),
    st.booleans(),
)
def test_layout_targets_match_the_model(
    data: st.DataObject,
    keys: list[Any],
    source: Partitioner,
    n: int,
    scheme: HashingScheme | None,
    migrated: bool,
) -> None:
    weights = data.draw(weights_for(keys))
    if migrated:
        target = create_migrated_metadata("persistent://t/n/x", n, hashing_scheme=scheme)
    else:
        target = TopicLayout.initial(data.draw(st.integers(1, 8))).split_segment(0, 1)
    audit = audit_migration(keys, source, n, target, weights=weights)
    assert_matches(audit, model(keys, weights, source, n, target))
    assert_rows_are_shares(audit)
    assert audit.target_ids == tuple(s.segment_id for s in target.active_segments())
    assert audit.risk == (Risk.LEGACY_SCHEME_DIFFERS if migrated else Risk.NO_DRAIN).value


@given(st.lists(st.text(max_size=12), max_size=80), st.integers(1, 16), st.integers(1, 16))
def test_the_keys_at_risk_of_a_repartition_are_those_whose_partition_changes(
    keys: list[str], n: int, m: int
) -> None:
    audit = audit_migration(keys, Partitioner.KAFKA, n, m, sample_size=len(keys))
    moved = {
        k for k in keys if partition(k, n, Partitioner.KAFKA) != partition(k, m, Partitioner.KAFKA)
    }
    assert set(audit.at_risk_sample) == moved
    assert audit.at_risk_keys == sum(k in moved for k in keys)
    if n == m:
        assert audit.at_risk_keys == 0 and np.trace(audit.keys) == len(keys)


@pytest.mark.parametrize("scheme", list(HashingScheme))
def test_a_migration_recording_the_producers_scheme_puts_no_key_at_risk(
    scheme: HashingScheme,
) -> None:
    keys = [f"order-{i}" for i in range(500)]
    source = Partitioner(f"pulsar:{scheme.value}")
    layout = create_migrated_metadata("persistent://t/n/x", 6, hashing_scheme=scheme)
    audit = audit_migration(keys, source, 6, layout)
    assert audit.at_risk_keys == 0 and audit.legacy_partitioner == source.value


def test_an_unrecorded_scheme_puts_java_string_hash_keys_at_risk() -> None:
    """Pulsar's router routes legacy segments by Murmur3_32Hash; the Java client's default
    producers used JavaStringHash: the keys the two place apart are at risk."""
    keys = [f"order-{i}" for i in range(500)]
    layout = create_migrated_metadata("persistent://t/n/x", 6)
    audit = audit_migration(keys, "pulsar:JavaStringHash", 6, layout, sample_size=500)
    apart = {
        k
        for k in keys
        if choose_partition(k, 6, HashingScheme.JavaStringHash)
        != choose_partition(k, 6, HashingScheme.Murmur3_32Hash)
    }
    assert apart and set(audit.at_risk_sample) == apart and audit.at_risk_keys == len(apart)
    assert audit.legacy_partitioner == "pulsar:Murmur3_32Hash"


def test_arrow_keys_give_the_list_answer() -> None:
    keys = ["a", "b", None, "", "é", *(f"k{i}" for i in range(100))]
    weights = list(range(len(keys)))
    for target in (7, TopicLayout.initial(3)):
        from_list = audit_migration(keys, "kafka", 5, target, weights=weights)
        from_arrow = audit_migration(pa.array(keys), "kafka", 5, target, weights=weights)
        assert from_list.to_dict() == from_arrow.to_dict()
        chunked = pa.chunked_array([keys[:10], keys[10:]])
        assert audit_migration(chunked, "kafka", 5, target, weights=weights).to_dict() == (
            from_list.to_dict()
        )


def test_unkeyed_keys_are_counted_apart() -> None:
    keys = [None, "a", None, "b"]
    audit = audit_migration(keys, Partitioner.KAFKA, 4, 8, weights=[5, 1, 7, 1])
    assert (audit.unkeyed_keys, audit.unkeyed_traffic) == (2, 12.0)
    assert audit.keys.sum() == 2 and audit.traffic.sum() == 2.0
    assert "(null)" not in audit.at_risk_sample


def test_the_sample_names_the_heaviest_keys_at_risk_first() -> None:
    keys = [f"k{i}" for i in range(300)]
    weights = [(i * 7919) % 1000 for i in range(300)]
    audit = audit_migration(keys, "kafka", 3, 7, weights=weights, sample_size=5)
    risky = [
        (w, k)
        for k, w in zip(keys, weights, strict=True)
        if partition(k, 3, Partitioner.KAFKA) != partition(k, 7, Partitioner.KAFKA)
    ]
    heaviest = sorted(risky, key=lambda x: -x[0])[:5]
    assert [weights[keys.index(k)] for k in audit.at_risk_sample] == [w for w, _ in heaviest]
    assert audit_migration(keys, "kafka", 3, 7, sample_size=0).at_risk_sample == ()


def test_to_json_holds_every_number() -> None:
    audit = audit_migration([f"k{i}" for i in range(50)], "kafka", 4, 6, weights=[2] * 50)
    data = json.loads(audit.to_json(indent=2))
    assert data == audit.to_dict()
    assert data["keys"] == audit.keys.tolist() and data["total_keys"] == 50
    assert data["traffic_shares"] == audit.traffic_shares.tolist()
    assert data["risk_description"] == Risk.PARTITION_CHANGES.description
    assert data["target_labels"] == [str(p) for p in range(6)]


def test_layout_columns_are_labelled_by_descriptor() -> None:
    layout = TopicLayout.initial(2).split_segment(0, 5)
    audit = audit_migration(["x"], "kafka", 2, layout)
    assert audit.target_labels == tuple(s.descriptor for s in layout.active_segments())


def test_display_key() -> None:
    assert display_key("é") == "é" and display_key("é".encode()) == "é"
    assert display_key(b"\xff\x00") == "0xff00" and display_key(None) == "(null)"
    assert display_key(5) == "5" and display_key(-7) == "-7"
    assert display_key(np.int64(10**9)) == "1000000000"


INT_KEYS = st.lists(st.one_of(st.integers(-(2**63), 2**63 - 1), st.none()), max_size=60)
INT_SOURCES = st.sampled_from([Partitioner.ICEBERG_BUCKET, Partitioner.SPARK_BUCKET])


@settings(max_examples=100, deadline=None)
@given(st.data(), INT_KEYS, INT_SOURCES, st.integers(1, 12), st.integers(1, 12), st.booleans())
def test_int_keys_match_the_model_and_are_named_in_decimal(
    data: st.DataObject,
    keys: list[int | None],
    source: Partitioner,
    n: int,
    m: int,
    to_layout: bool,
) -> None:
    """Int keys (Iceberg, Spark) are placed as ints, routed to a layout as their text, and
    named in the sample in decimal: not as bytes(key), which is key NUL bytes (a gigabyte
    for 10**9, an error for a negative key)."""
    weights = data.draw(weights_for(keys))
    target: TopicLayout | int = TopicLayout.initial(3) if to_layout else m
    audit = audit_migration(keys, source, n, target, weights=weights, sample_size=len(keys))
    assert_matches(audit, model(keys, weights, source, n, target))
    want = {
        display_key(k)
        for k in keys
        if partition(k, n, source) is not None
        and (to_layout or partition(k, n, source) != partition(k, m, source))
    }
    assert set(audit.at_risk_sample) == want


def test_the_issues_int_keys_are_named_as_numbers() -> None:
    keys = [5, 3, 7, 11, 12, 100, -5, 10**9]
    audit = audit_migration(keys, "iceberg:bucket", 4, 8, sample_size=len(keys))
    moved = [
        k for k in keys if partition(k, 4, "iceberg:bucket") != partition(k, 8, "iceberg:bucket")
    ]
    assert moved and audit.at_risk_sample == tuple(str(k) for k in moved)
    assert all("\x00" not in k for k in audit.at_risk_sample)


def test_every_kind_of_batch_gives_the_list_answer() -> None:
    """A generator, a strided or misaligned NumPy array and NumPy integer scalars are read as
    the list of the same keys."""
    ints = list(range(0, 400, 2))
    want = audit_migration(ints, "spark:bucket", 5, 9, sample_size=400).to_dict()
    wide = np.arange(0, 400, dtype=np.int64)
    packed = np.zeros(200, dtype=[("pad", "u1"), ("key", "<i8")])  # unaligned int64 field
    packed["key"] = ints
    batches = {
        "generator": (k for k in ints),
        "strided": wide[::2],
        "misaligned": packed["key"],
        "numpy scalars": [np.int64(k) for k in ints],
    }
    assert not batches["strided"].flags.c_contiguous and not packed["key"].flags.aligned
    for name, keys in batches.items():
        got = audit_migration(keys, "spark:bucket", 5, 9, sample_size=400).to_dict()
        assert got == want, name
    text = [f"k{i}" for i in range(100)]
    assert audit_migration(iter(text), "kafka", 3, 4).to_dict() == (
        audit_migration(text, "kafka", 3, 4).to_dict()
    )


@pytest.mark.parametrize(
    ("keys", "error", "match"),
    [
        ("abc", TypeError, "keys must be a batch of keys, not a single str"),
        (np.zeros((2, 2), dtype=np.int64), TypeError, "keys must be a one-dimensional array"),
        (5, TypeError, "keys must be a sequence or iterable of keys"),
        (["a", 5], TypeError, r"keys\[1\] must be str or bytes, got int"),
    ],
)
def test_bad_keys_are_named(keys: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        audit_migration(keys, "kafka", 4, 8)


def test_a_matrix_beyond_the_limit_is_refused_before_any_allocation() -> None:
    """Refused up front, from the plan alone: no key is read (the generator is untouched)."""
    read: list[int] = []

    def keys() -> Any:
        read.append(1)
        yield "a"

    with pytest.raises(ValueError, match="beyond the audit's limit"):
        audit_migration(keys(), "kafka", 100_000, 100_000)
    assert read == []
    assert MAX_CELLS == 2**24
    audit = audit_migration(["a"], "kafka", 4096, 4096)  # exactly at the limit
    assert audit.keys.shape == (4096, 4096)


def test_partition_counts_are_any_integer_as_the_partitioners_take() -> None:
    keys = [f"k{i}" for i in range(50)]
    want = audit_migration(keys, "kafka", 4, 8)
    for n, m in [(np.int64(4), 8), (4, np.uint16(8)), (np.int32(4), np.int64(8))]:
        audit = audit_migration(keys, "kafka", n, m)
        assert type(audit.num_partitions) is int and audit.to_dict() == want.to_dict()
    plan = MigrationPlan.of("kafka", np.int64(4), np.int64(8))
    assert (plan.num_partitions, plan.target) == (4, 8) and type(plan.target) is int


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"source": "nope"}, ValueError, "source must be one of kafka"),
        ({"source": 3}, TypeError, "source must be a Partitioner or str"),
        ({"num_partitions": 0}, ValueError, "num_partitions must be >= 1"),
        ({"num_partitions": True}, TypeError, "num_partitions must be an int"),
        ({"target": 0}, ValueError, "target must be >= 1"),
        ({"target": "4"}, TypeError, "target must be a TopicLayout or an int, got str"),
        ({"num_partitions": 4.0}, TypeError, "num_partitions must be an int, got float"),
        ({"num_partitions": np.bool_(True)}, TypeError, "num_partitions must be an int, got bool"),
        (
            {"target": np.float64(8)},
            TypeError,
            "target must be a TopicLayout or an int, got float64",
        ),
        ({"target": np.bool_(True)}, TypeError, "target must be a TopicLayout or an int, got bool"),
        ({"target": np.int64(0)}, ValueError, "target must be >= 1, got 0"),
        ({"weights": [1, 2]}, ValueError, r"weights must hold one weight per key \(3\), got 2"),
        ({"weights": [1, -1, 0]}, ValueError, r"weights must not be negative \(index 1\)"),
        ({"weights": [1, float("nan"), 0]}, ValueError, r"weights must be finite \(index 1\)"),
        ({"weights": ["a", "b", "c"]}, TypeError, "weights must be a one-dimensional array of"),
        (
            {"weights": [1 + 2j, 1, 1]},
            TypeError,
            "weights must be a one-dimensional array of real numbers, got complex128 values",
        ),
        ({"num_partitions": 2**31}, ValueError, "num_partitions must be <= 2147483647"),
        ({"target": 2**31}, ValueError, "target must be <= 2147483647, got 2147483648"),
        (
            {"num_partitions": 100_000, "target": 100_000},
            ValueError,
            r"100,000 x 100,000 = 10,000,000,000 cells, beyond the audit's limit of 16,777,216",
        ),
        (
            {"num_partitions": 4, "target": 2**31 - 1},
            ValueError,
            "4 x 2,147,483,647 = 8,589,934,588 cells",
        ),
        ({"sample_size": -1}, ValueError, "sample_size must be >= 0"),
        (
            {"target": create_migrated_metadata("persistent://t/n/x", 3), "num_partitions": 4},
            ValueError,
            r"target wraps 3 legacy partition\(s\), but num_partitions is 4",
        ),
    ],
)
def test_bad_arguments_are_named(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    args: dict[str, Any] = {"source": "kafka", "num_partitions": 4, "target": 8, **kwargs}
    with pytest.raises(error, match=match):
        audit_migration(
            ["a", "b", "c"],
            args.pop("source"),
            args.pop("num_partitions"),
            args.pop("target"),
            **args,
        )


def test_a_topic_not_yet_migrated_is_no_target() -> None:
    from keyshared.scalable import Segment

    synthetic = TopicLayout(
        0,
        1,
        {
            0: Segment(
                0,
                TopicLayout.initial(1).segments[0].hash_range,
                legacy_topic_name="persistent://t/n/x",
            )
        },
    )
    with pytest.raises(ValueError, match="not yet migrated"):
        audit_migration(["a"], "kafka", 1, synthetic)
