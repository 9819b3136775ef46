"""keyshared's key hashes against Pulsar's own (SPEC 1): ``Murmur3_32Hash`` and the sticky
key hash a broker's selector computes, on the newest release (4.2.4) and the 4.0 LTS release
(4.0.7).

Keys are drawn by hypothesis (unicode text without lone surrogates, which have no UTF-8 form,
empty keys, arbitrary bytes) and, in bulk, hundreds of thousands at a time from a drawn seed,
each batch costing one oracle request. Every key is compared one by one and in batch form.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from support.keys import Key, bulk_keys
from support.pulsar_oracle import Oracle, key_arg, record

import keyshared
from keyshared import HashRange, key_hash, key_hashes, sticky_key_hash
from keyshared.routing import make_sticky_key_hash, make_sticky_key_hashes, sticky_key_hashes

texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
keys = st.one_of(texts, st.binary(max_size=40), st.just(""), st.just(b""))
key_lists = st.lists(keys, min_size=1, max_size=200)
hash_ranges = st.one_of(
    st.sampled_from([(0, 0xFFFF), (1, 0xFFFF), (0, 0), (1, 1), (0xFFFF, 0xFFFF), (0, 1)]),
    st.tuples(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)).map(lambda r: (min(r), max(r))),
)

BULK_KEYS = 120_000
BULK_EXAMPLES = 3


def compare_keys(pulsar_release: Oracle, batch: list[Key], ranges: list[tuple[int, int]]) -> None:
    """Compares every hash of ``batch`` with Pulsar's, recording each area's count."""
    v = pulsar_release.version
    wire = [key_arg(k) for k in batch]
    n = len(batch)

    raw = pulsar_release.call("hash.raws", keys=wire)
    ours_raw = [key_hash(k) for k in batch]
    batch_raw = key_hashes(batch).tolist()
    made = pulsar_release.call("hash.make_hashes", keys=wire)
    differ = sum(a != b for a, b in zip(ours_raw, raw, strict=True))
    differ += sum(a != b for a, b in zip(batch_raw, raw, strict=True))
    differ += sum((a & 0x7FFFFFFF) != b for a, b in zip(ours_raw, made, strict=True))
    record(f"{v} murmur3 hash", 3 * n, differ)

    sticky = pulsar_release.call("hash.sticky_key_hashes", keys=wire)
    ours = [sticky_key_hash(k) for k in batch]
    batch_sticky = sticky_key_hashes(batch).tolist()
    differ = sum(a != b for a, b in zip(ours, sticky, strict=True))
    differ += sum(a != b for a, b in zip(batch_sticky, sticky, strict=True))
    record(f"{v} sticky key hash", 2 * n, differ)
    assert ours == sticky
    assert batch_sticky == sticky

    differ_ranges = 0
    for start, end in ranges:
        theirs = pulsar_release.call("hash.sticky_key_hashes", keys=wire, range=[start, end])
        r = HashRange(start, end)
        one = [make_sticky_key_hash(k, r) for k in batch]
        many = make_sticky_key_hashes(batch, r).tolist()
        differ_ranges += sum(a != b for a, b in zip(one, theirs, strict=True))
        differ_ranges += sum(a != b for a, b in zip(many, theirs, strict=True))
        assert one == theirs, (start, end)
        assert many == theirs, (start, end)
    record(f"{v} make sticky key hash (range)", 2 * n * len(ranges), differ_ranges)
    assert ours_raw == raw
    assert batch_raw == raw
    assert [h & 0x7FFFFFFF for h in ours_raw] == made


def test_default_selector_key_hash_range(pulsar_release: Oracle) -> None:
    """The broker's default selector hashes keys to [1, 65535] (0 is "not set") in both
    releases, as keyshared's ``sticky_key_hash`` does."""
    info = pulsar_release.call("hash.default_key_hash_range")
    assert info == {
        "key_hash_range": [1, 0xFFFF],
        "default_range_size": 0x10000,
        "sticky_key_hash_not_set": 0,
    }
    selector = keyshared.ConsistentHashingStickyKeyConsumerSelector()
    r = selector.key_hash_range
    assert [r.start, r.end] == info["key_hash_range"]
    record(f"{pulsar_release.version} sticky key hash", 1, 0)


def test_known_values(pulsar_release: Oracle) -> None:
    for key, raw in [
        ("", 0),
        ("hello", 0x248BFA47),
        ("The quick brown fox jumps over the lazy dog", 0x2E4FF723),
    ]:
        assert pulsar_release.call("hash.raw", key=key) == key_hash(key) == raw
        assert pulsar_release.call("hash.make_hash", key=key) == raw & 0x7FFFFFFF
        assert pulsar_release.call("hash.sticky_key_hash", key=key) == sticky_key_hash(key)
    record(f"{pulsar_release.version} murmur3 hash", 3, 0)


@settings(max_examples=60)
@given(batch=key_lists, ranges=st.lists(hash_ranges, min_size=1, max_size=3))
def test_drawn_keys(
    pulsar_release: Oracle, batch: list[Key], ranges: list[tuple[int, int]]
) -> None:
    compare_keys(pulsar_release, batch, ranges)


@settings(max_examples=BULK_EXAMPLES)
@given(seed=st.integers(0, 2**32 - 1), ranges=st.lists(hash_ranges, min_size=1, max_size=2))
def test_bulk_keys(pulsar_release: Oracle, seed: int, ranges: list[tuple[int, int]]) -> None:
    """Hundreds of thousands of keys per release, each batch one request per hash kind."""
    compare_keys(pulsar_release, bulk_keys(seed, BULK_KEYS), ranges)


def test_every_zero_case_becomes_one(pulsar_release: Oracle) -> None:
    """Keys whose ``make_hash % size + start`` is 0 (only for ranges starting at 0) give 1
    in both, and keys landing on each end of a range keep it."""
    batch = bulk_keys(7, 400_000)
    hashes = key_hashes(batch) & np.uint32(0x7FFFFFFF)
    zero = [batch[i] for i in np.flatnonzero(hashes % 0x10000 == 0)[:20]]
    top = [batch[i] for i in np.flatnonzero(hashes % 0xFFFF == 0xFFFE)[:20]]
    assert zero and top
    compare_keys(pulsar_release, zero + top, [(0, 0xFFFF), (1, 0xFFFF)])
    assert all(make_sticky_key_hash(k, HashRange(0, 0xFFFF)) == 1 for k in zero)
    assert all(sticky_key_hash(k) == 0xFFFF for k in top)
