"""Consumer selection rings (SPEC 7): Pulsar's consistent hashing and Danube's Key-Shared
state, against plain-Python readings of their rules."""

import bisect
import itertools
import re
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from keyshared import (
    ConsistentHashingStickyKeyConsumerSelector,
    HashRange,
    KeySharedConsumerState,
    sticky_key_hash,
)

ALL_HASHES = np.arange(0x10000, dtype=np.uint16)


class PulsarRing:
    """Pulsar's selector: points at sticky_key_hash(name \\0 name_index \\0 i), the newer
    consumer taking a colliding point, name indexes from the lowest free slot."""

    def __init__(self, points: int = 100) -> None:
        self.n = points
        self.points: dict[int, int] = {}
        self.names: dict[int, str] = {}
        self.slot: dict[int, list[int]] = {}  # consumer -> [name index, points held]

    def _point(self, name: str, index: int, i: int) -> int:
        return sticky_key_hash(f"{name}\0{index}\0{i}")

    def _increase(self, c: int) -> int:
        if c not in self.slot:
            used = {s[0] for d, s in self.slot.items() if self.names[d] == self.names[c]}
            self.slot[c] = [next(i for i in range(len(used) + 1) if i not in used), 0]
        self.slot[c][1] += 1
        return self.slot[c][0]

    def _decrease(self, c: int) -> None:
        self.slot[c][1] -= 1
        if self.slot[c][1] == 0:
            del self.slot[c]

    def add(self, c: int, name: str) -> None:
        self.names[c] = name
        for i in range(self.n):
            h = self._point(name, self._increase(c), i)
            displaced = self.points.get(h)
            self.points[h] = c
            if displaced is not None:
                self._decrease(displaced)

    def remove(self, c: int) -> None:
        if c in self.slot:
            index = self.slot[c][0]
            for i in range(self.n):
                h = self._point(self.names[c], index, i)
                if self.points.get(h) == c:
                    del self.points[h]
                    self._decrease(c)
        del self.names[c]

    def owners(self) -> np.ndarray:
        """The owner of every hash; -1 for none."""
        if not self.points:
            return np.full(0x10000, -1, dtype=np.int64)
        keys = np.array(sorted(self.points))
        values = np.array([self.points[k] for k in keys], dtype=np.int64)
        return values[np.searchsorted(keys, ALL_HASHES, side="left") % len(keys)]


def owners_of(selector: ConsistentHashingStickyKeyConsumerSelector) -> np.ndarray:
    if len(selector) == 0:
        return np.full(0x10000, -1, dtype=np.int64)
    return selector.select_many(ALL_HASHES).astype(np.int64)


def mask_of(ranges: list[HashRange]) -> np.ndarray:
    mask = np.zeros(0x10000, dtype=bool)
    for r in ranges:
        mask[r.start : r.end + 1] = True
    return mask


def test_empty_ring() -> None:
    s = ConsistentHashingStickyKeyConsumerSelector()
    assert s.number_of_points == 100
    assert s.select(5) is None
    assert s.get_consumer_key_hash_ranges() == {}
    with pytest.raises(ValueError, match="no consumers"):
        s.select_many([1, 2])
    assert s.select_many([]).tolist() == []


def test_points_follow_pulsars_formula() -> None:
    s = ConsistentHashingStickyKeyConsumerSelector(number_of_points=3)
    assert s.add_consumer(7, "c1") == {}
    points = sorted(sticky_key_hash(f"c1\0{0}\0{i}") for i in range(3))
    for p in points:
        assert s.select(p) == 7
    assert s.get_consumer_key_hash_ranges() == {7: [HashRange.full()]}


def test_first_point_at_or_above_wrapping() -> None:
    s = ConsistentHashingStickyKeyConsumerSelector(number_of_points=1)
    s.add_consumer(1, "a")
    s.add_consumer(2, "b")
    pa, pb = sticky_key_hash("a\x000\x000"), sticky_key_hash("b\x000\x000")
    low, high = sorted([(pa, 1), (pb, 2)])
    assert s.select(low[0]) == low[1]
    assert s.select(low[0] + 1) == high[1]
    assert s.select(high[0]) == high[1]
    if high[0] < 0xFFFF:
        assert s.select(high[0] + 1) == low[1]
    assert s.select(0) == low[1]
    ranges = s.get_consumer_key_hash_ranges()
    assert ranges[high[1]] == [HashRange(low[0] + 1, high[0])]
    expected_low = [HashRange(0, low[0])]
    if high[0] < 0xFFFF:
        expected_low.append(HashRange(high[0] + 1, 0xFFFF))
    assert ranges[low[1]] == expected_low


def test_namesakes_take_the_lowest_free_slot() -> None:
    s = ConsistentHashingStickyKeyConsumerSelector()
    s.add_consumer(1, "same")
    s.add_consumer(2, "same")
    model = PulsarRing()
    model.add(1, "same")
    model.add(2, "same")
    assert (owners_of(s) == model.owners()).all()
    s.remove_consumer(1)
    s.add_consumer(3, "same")  # takes the freed slot 0: consumer 1's points
    model.remove(1)
    model.add(3, "same")
    assert (owners_of(s) == model.owners()).all()
    for i in range(100):
        assert s.select(sticky_key_hash(f"same\x000\x00{i}")) == 3
        assert s.select(sticky_key_hash(f"same\x001\x00{i}")) in (2, 3)


def test_ranges_tile_the_ring_and_adjacent_ones_join() -> None:
    s = ConsistentHashingStickyKeyConsumerSelector()
    for c in range(5):
        s.add_consumer(c, f"consumer-{c}")
    owners = owners_of(s)
    covered = np.zeros(0x10000, dtype=np.int64)
    for c, ranges in s.get_consumer_key_hash_ranges().items():
        assert ranges == sorted(ranges)
        assert not any(a.end + 1 >= b.start for a, b in itertools.pairwise(ranges))
        mask = mask_of(ranges)
        assert (owners[mask] == c).all()
        covered += mask
    assert (covered == 1).all()


def test_bad_input_changes_nothing() -> None:
    for points in (0, -1, 65_537, 2**70):
        with pytest.raises(ValueError, match="number_of_points"):
            ConsistentHashingStickyKeyConsumerSelector(points)
    with pytest.raises(TypeError):
        ConsistentHashingStickyKeyConsumerSelector("100")  # type: ignore[arg-type]
    s = ConsistentHashingStickyKeyConsumerSelector()
    s.add_consumer(1, "a")
    before = owners_of(s).copy()
    with pytest.raises(ValueError, match="already added"):
        s.add_consumer(1, "b")
    with pytest.raises(KeyError, match="not in the ring"):
        s.remove_consumer(2)
    with pytest.raises(ValueError, match="16-bit hash"):
        s.select(0x10000)
    with pytest.raises(ValueError, match="consumer_id"):
        s.add_consumer(-5, "x")
    with pytest.raises(TypeError, match="name must be str or bytes"):
        s.add_consumer(5, 5)  # type: ignore[arg-type]
    assert (owners_of(s) == before).all()
    assert s.consumer_ids == [1]
    assert 1 in s and 2 not in s


class PulsarRingMachine(RuleBasedStateMachine):
    """The selector matches the model; a change moves only the changed consumer's hashes,
    and the reported lost ranges are exactly the hashes each consumer lost."""

    def __init__(self) -> None:
        super().__init__()
        self.ring = ConsistentHashingStickyKeyConsumerSelector(number_of_points=20)
        self.model = PulsarRing(points=20)
        self.next_id = 0

    def _check_change(self, before: np.ndarray, lost: dict[int, list[HashRange]]) -> None:
        after = self.model.owners()
        losers = set(np.unique(before[(before != after) & (before >= 0)]).tolist())
        assert set(lost) == losers
        for c, ranges in lost.items():
            assert (mask_of(ranges) == ((before == c) & (after != c))).all()

    @rule(name=st.sampled_from(["a", "b", "c"]))
    def add(self, name: str) -> None:
        before = self.model.owners()
        c = self.next_id
        self.next_id += 1
        lost = self.ring.add_consumer(c, name)
        self.model.add(c, name)
        self._check_change(before, lost)
        after = self.model.owners()
        assert set(np.unique(after[after != before]).tolist()) <= {c}

    @precondition(lambda self: bool(self.model.names))
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        c = data.draw(st.sampled_from(sorted(self.model.names)))
        before = self.model.owners()
        lost = self.ring.remove_consumer(c)
        self.model.remove(c)
        self._check_change(before, lost)
        after = self.model.owners()
        assert set(np.unique(before[after != before]).tolist()) <= {c}

    @invariant()
    def same_owners(self) -> None:
        assert (owners_of(self.ring) == self.model.owners()).all()


TestPulsarRing = PulsarRingMachine.TestCase
TestPulsarRing.settings = settings(max_examples=25, stateful_step_count=12)


def fnv_fmix(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    x = ((h >> 32) ^ h) & 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & 0xFFFFFFFF
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & 0xFFFFFFFF
    return x ^ (x >> 16)


def glob(pattern: bytes, key: bytes) -> bool:
    regex = b"".join(
        b".*" if c == 42 else b"." if c == 63 else re.escape(bytes([c])) for c in pattern
    )
    return re.fullmatch(regex, key, re.DOTALL) is not None


class DanubeRing:
    def __init__(self) -> None:
        self.consumers: list[tuple[int, list[bytes]]] = []

    def select(self, key: bytes) -> int | None:
        eligible = [c for c, f in self.consumers if not f or any(glob(p, key) for p in f)]
        if len(eligible) <= 1:
            return eligible[0] if eligible else None
        nodes = sorted(
            (
                (fnv_fmix(f"{c}-{v}".encode()), n)
                for n, (c, _) in enumerate(self.consumers)
                for v in range(100)
            ),
            key=lambda node: node[0],
        )
        nodes = [(h, self.consumers[n][0]) for h, n in nodes if self.consumers[n][0] in eligible]
        at = bisect.bisect_left([h for h, _ in nodes], fnv_fmix(key))
        return nodes[at % len(nodes)][1]


@pytest.mark.parametrize(
    ("pattern", "key", "matches"),
    [
        ("payment", "payment", True),
        ("payment", "payments", False),
        ("ship*", "shipping", True),
        ("ship*", "shipment", True),
        ("ship*", "ship", True),
        ("eu-west-?", "eu-west-1", True),
        ("eu-west-?", "eu-west-12", False),
        ("*", "anything", True),
        ("*", "", True),
        ("Ship*", "shipping", False),
        ("a*b?c", "aXXbYc", True),
        ("?", "é", False),  # two bytes in UTF-8
        ("??", "é", True),
        ("[ab]", "a", False),  # no character classes
        ("\\*", "\\x", True),  # no escapes: a backslash is itself
    ],
)
def test_danube_globs(pattern: str, key: str, matches: bool) -> None:
    s = KeySharedConsumerState()
    s.add_consumer(1, [pattern])
    assert (s.select_consumer(key) == 1) is matches
    assert glob(pattern.encode(), key.encode()) is matches


def test_danube_filters_decide_eligibility() -> None:
    s = KeySharedConsumerState()
    s.add_consumer(1, ["payment", "invoice"])
    s.add_consumer(2, ["ship*"])
    assert s.select_consumer("payment") == 1
    assert s.select_consumer("invoice") == 1
    assert s.select_consumer("shipping") == 2
    assert s.select_consumer("other") is None
    s.add_consumer(3)
    assert s.select_consumer("other") == 3
    assert s.select_consumer("payment") in (1, 3)
    assert s.key_filters(2) == [b"ship*"]
    assert s.key_filters(3) == []
    assert s.consumer_ids == [1, 2, 3]


def test_danube_ring_matches_the_model() -> None:
    s, model = KeySharedConsumerState(), DanubeRing()
    for c, filters in [(10, []), (2**63 + 5, []), (7, [b"k1*", b"x"]), (3, [b"k*"])]:
        s.add_consumer(c, filters)
        model.consumers.append((c, filters))
    keys = [f"k{i}".encode() for i in range(300)] + [b"x", b"", b"zzz"]
    expected = [model.select(k) for k in keys]
    assert [s.select_consumer(k) for k in keys] == expected
    ids, selected = s.select_consumers(keys)
    assert ids.dtype == np.uint64
    assert [int(i) if ok else None for i, ok in zip(ids, selected, strict=True)] == expected
    texts = np.array([k.decode() for k in keys])
    assert s.select_consumers(texts)[0].tolist() == ids.tolist()


@given(st.lists(st.binary(max_size=12), max_size=40), st.integers(1, 6))
@settings(max_examples=30)
def test_danube_adding_a_consumer_moves_only_keys_to_it(keys: list[bytes], n: int) -> None:
    s = KeySharedConsumerState()
    for c in range(n):
        s.add_consumer(c)
    before = [s.select_consumer(k) for k in keys]
    s.add_consumer(99)
    after = [s.select_consumer(k) for k in keys]
    assert all(a == b or a == 99 for a, b in zip(after, before, strict=True))
    s.remove_consumer(99)
    assert [s.select_consumer(k) for k in keys] == before


def test_danube_bad_input_changes_nothing() -> None:
    s = KeySharedConsumerState()
    s.add_consumer(1, ["a*"])
    with pytest.raises(ValueError, match="already added"):
        s.add_consumer(1)
    with pytest.raises(ValueError, match=r"key_filters\[1\] is empty"):
        s.add_consumer(2, ["b*", ""])
    with pytest.raises(TypeError, match="not a single pattern"):
        s.add_consumer(2, "b*")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"key_filters\[0\] must be str or bytes"):
        s.add_consumer(2, [3])  # type: ignore[list-item]
    with pytest.raises(KeyError, match="not in the state"):
        s.remove_consumer(2)
    with pytest.raises(TypeError, match=r"keys\[1\] must be str or bytes"):
        s.select_consumers(["a", 1])
    with pytest.raises(TypeError, match="not a single str"):
        s.select_consumers("abc")
    assert s.consumer_ids == [1]
    assert s.select_consumer("ab") == 1
    s.disconnect_all()
    assert s.is_empty() and s.select_consumer("ab") is None


def test_rings_under_threads() -> None:
    pulsar, danube = ConsistentHashingStickyKeyConsumerSelector(), KeySharedConsumerState()

    def worker(base: int) -> None:
        for i in range(20):
            c = base * 100 + i
            pulsar.add_consumer(c, f"w{base}")
            danube.add_consumer(c)
            assert pulsar.select_many(ALL_HASHES[:1000]).size == 1000
            danube.select_consumers([f"k{j}" for j in range(50)])
            pulsar.remove_consumer(c)
            danube.remove_consumer(c)

    pool = [threading.Thread(target=worker, args=(b,)) for b in range(4)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert len(pulsar) == 0 and len(danube) == 0
