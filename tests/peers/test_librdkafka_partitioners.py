"""keyshared's librdkafka partitioners against librdkafka's own
(``tests/support/librdkafka.py``: the library the confluent-kafka wheel bundles, its
partitioner functions called directly), at any partition count: tests/unit/test_partitioners.py
sends messages through a whole producer, on the mock cluster's topics of 4 partitions.

A key the library gives a partition must get that partition from librdkafka; a key the
library gives none (``None``, ``-1`` in a batch) must be one librdkafka partitions at random.
Keys are drawn by hypothesis (unicode, bytes, empty and null keys, partition counts up to
2**31 - 1) and, in bulk, 120,000 from a drawn seed per partitioner.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.keys import bulk_keys
from support.librdkafka import NAMES, VERSION, Librdkafka
from support.pulsar_oracle import record

from keyshared.routing import Partitioner, partition, partitions

Key = str | bytes | None
WIDEST = 2**31 - 1
BULK_KEYS = 120_000

texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
keys = st.one_of(texts, st.binary(max_size=40), st.just(""), st.just(b""), st.none())
counts = st.one_of(st.sampled_from([1, 2, 3, 7, 16, 100, WIDEST]), st.integers(1, WIDEST))


@pytest.fixture(scope="module")
def librdkafka() -> Iterator[Librdkafka]:
    with Librdkafka() as running:
        yield running


def raw(key: Key) -> bytes | None:
    return key.encode() if isinstance(key, str) else key


def is_random(rdk: Librdkafka, name: str, key: bytes | None) -> bool:
    """Whether librdkafka picks ``key``'s partition at random: two picks among 2**31 - 1
    partitions differ (a fixed partition never does; random picks coincide once in 2**31)."""
    return rdk.partition(name, key, WIDEST) != rdk.partition(name, key, WIDEST)


def compare(rdk: Librdkafka, name: str, batch: Sequence[Key], n: int) -> None:
    p = Partitioner(f"librdkafka:{name}")
    many = partitions(batch, n, p).tolist()
    differ = 0
    for key, in_batch in zip(batch, many, strict=True):
        one = partition(key, n, p)
        ours = None if in_batch < 0 else in_batch
        if ours is None:
            same = is_random(rdk, name, raw(key))
        else:
            same = rdk.partition(name, raw(key), n) == ours
        differ += (not same) + (one != ours)
    record(f"librdkafka {VERSION} {name}", 2 * len(batch), differ)
    assert differ == 0, name


def test_unittest_fnv1a(librdkafka: Librdkafka) -> None:
    """librdkafka's unittest_fnv1a: its hashes of these keys (taken positive, as Sarama
    takes its remainder), read back as partitions among 2**31 - 1."""
    cases = {
        "kafka": 0xD33C4E1,
        "giberish123456789": 0x77A58295,
        "1234": 0x23BDD03,
        "234": 0x2DEA3CD2,
        "34": 0x740FA83E,
        "4": 0x310CA263,
        "PreAmbleWillBeRemoved,ThePrePartThatIs": 0x65CBD69C,
        "reAmbleWillBeRemoved,ThePrePartThatIs": 0x6E49C79A,
        "eAmbleWillBeRemoved,ThePrePartThatIs": 0x69EED356,
        "AmbleWillBeRemoved,ThePrePartThatIs": 0x6ABCC023,
        "": 0x7EE3623B,
        None: 0x7EE3623B,
    }
    for key, want in cases.items():
        assert librdkafka.partition("fnv1a", raw(key), WIDEST) == want % WIDEST
        assert partition(key, WIDEST, Partitioner.LIBRDKAFKA_FNV1A) == want % WIDEST
    record(f"librdkafka {VERSION} fnv1a", 2 * len(cases))


@settings(max_examples=60)
@given(batch=st.lists(keys, min_size=1, max_size=200), n=counts)
def test_drawn_keys(librdkafka: Librdkafka, batch: list[Key], n: int) -> None:
    for name in NAMES:
        compare(librdkafka, name, batch, n)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=1)
@given(seed=st.integers(0, 2**32 - 1))
def test_bulk_keys(librdkafka: Librdkafka, name: str, seed: int) -> None:
    """120,000 keys per partitioner: a third unicode, a third bytes, the rest names, with
    empty keys and about one null key in a hundred; at fixed counts, as a drawn count would
    be 1 in the one example."""
    rng = random.Random(seed)
    batch = [None if rng.randrange(100) == 0 else k for k in bulk_keys(seed, BULK_KEYS)]
    for n in (12, WIDEST):
        compare(librdkafka, name, batch, n)
