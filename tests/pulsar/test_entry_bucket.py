"""PIP-486's entry-bucket selector and dispatcher: Pulsar's EntryBucketConsumerSelectorTest and
PersistentEntryBucketDispatcherMultipleConsumersTest, the impacted-consumers result, the one
hand-off rule, stateful tests against small models, and bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import keyshared as ks
from keyshared import DrainingHashesTracker, EntryBucketDispatcher, HashRange, PendingAcksMap
from keyshared.scalable import (
    EntryBucketConsumerSelector,
    ImpactedConsumersResult,
    impacted_consumers,
    register_draining_hashes,
    validate_bucket_boundaries,
)

FOUR_BUCKETS = [
    HashRange(0x0000, 0x3FFF),
    HashRange(0x4000, 0x7FFF),
    HashRange(0x8000, 0xBFFF),
    HashRange(0xC000, 0xFFFF),
]
FOUR_SPLITS = [0x4000, 0x8000, 0xC000]


def four() -> EntryBucketConsumerSelector:
    return EntryBucketConsumerSelector.from_bucket_ranges(FOUR_BUCKETS)


# --- EntryBucketConsumerSelectorTest -----------------------------------------------------------


def test_bucket_index_and_canonical_hash() -> None:  # testBucketIndexAndCanonicalHash
    selector = four()
    for h, bucket in [(0, 0), (0x3FFF, 0), (0x4000, 1), (0x7FFF, 1), (0x8000, 2), (0xC000, 3)]:
        assert selector.bucket_index_of_hash(h) == bucket
    assert selector.bucket_index_of_hash(0xFFFF) == 3
    # Bucket 0's canonical hash is nudged to 1 (0 is the reserved "not set" value).
    assert [selector.canonical_hash_of_bucket(b) for b in range(4)] == [1, 0x4000, 0x8000, 0xC000]
    assert selector.canonical_hash_of(0x1234) == 1
    assert selector.canonical_hash_of(0x4000) == 0x4000
    assert selector.canonical_hash_of(0x7FFF) == 0x4000
    assert selector.canonical_hash_of(0xFFFF) == 0xC000


def test_deterministic_spread_is_add_order_independent() -> None:
    # testDeterministicSpreadIsAddOrderIndependent
    selector1, selector2 = four(), four()
    selector1.add_consumer(1, "consumer-a")
    selector1.add_consumer(2, "consumer-b")
    selector2.add_consumer(2, "consumer-b")
    selector2.add_consumer(1, "consumer-a")
    # Sorted by name: consumer-a owns buckets 0-1, consumer-b buckets 2-3.
    for bucket in range(4):
        h = selector1.canonical_hash_of_bucket(bucket)
        expected = 1 if bucket < 2 else 2
        assert selector1.select(h) == expected and selector2.select(h) == expected


def test_spread_with_more_consumers_than_buckets() -> None:
    # testSpreadWithMoreConsumersThanBuckets
    selector = four()
    for i in range(6):
        selector.add_consumer(i, f"consumer-{i}")
    owners = {selector.select(selector.canonical_hash_of_bucket(b)) for b in range(4)}
    assert None not in owners and len(owners) == 4


def test_make_sticky_key_hash_normalizes_to_canonical() -> None:
    # testMakeStickyKeyHashNormalizesToCanonical
    selector = four()
    assert selector.key_hash_range == HashRange(0, 0xFFFF)
    for i in range(100):
        key = f"key-{i}".encode()
        raw = (ks.key_hash(key) & 0x7FFFFFFF) % 65536 or 1
        h = selector.make_sticky_key_hash(key)
        assert h == selector.canonical_hash_of(raw)
        assert selector.bucket_index_of_hash(h) == selector.bucket_index_of_hash(raw)


def test_membership_change_reports_impacted_buckets() -> None:
    # testMembershipChangeReportsImpactedBuckets
    selector = four()
    selector.add_consumer(1, "consumer-a")
    impacted = selector.add_consumer(2, "consumer-b")
    # consumer-b joining takes buckets 2-3 away from consumer-a.
    assert set(impacted.removed_hash_ranges) == {1}
    lost_by_a = impacted.removed_hash_ranges[1]
    contains = [
        any(r.contains(selector.canonical_hash_of_bucket(b)) for r in lost_by_a) for b in range(4)
    ]
    assert contains == [False, False, True, True]
    # consumer-b leaving hands buckets 2-3 back: the removal is attributed to consumer-b.
    after_leave = selector.remove_consumer(2)
    assert set(after_leave.removed_hash_ranges) == {2}
    assert after_leave.added_hash_ranges == {1: [HashRange(0x8000, 0xFFFF)]}
    assert all(selector.select(selector.canonical_hash_of_bucket(b)) == 1 for b in range(4))


def test_select_with_no_consumers() -> None:  # testSelectWithNoConsumers
    selector = four()
    assert selector.select(1) is None
    selector.add_consumer(1, "consumer-a")
    selector.remove_consumer(1)
    assert selector.select(1) is None


def test_consumer_hash_assignments_snapshot() -> None:  # testConsumerHashAssignmentsSnapshot
    selector = four()
    selector.add_consumer(1, "consumer-a")
    selector.add_consumer(2, "consumer-b")
    # Contiguous bucket slices are merged: a owns buckets 0-1, b owns buckets 2-3.
    assert selector.get_consumer_key_hash_ranges() == {
        1: [HashRange(0x0000, 0x7FFF)],
        2: [HashRange(0x8000, 0xFFFF)],
    }


# --- PersistentEntryBucketDispatcherMultipleConsumersTest --------------------------------------


def test_valid_boundaries() -> None:  # testValidBoundaries
    pairs = [(0x0000, 0x3FFF), (0x4000, 0x7FFF), (0x8000, 0xBFFF), (0xC000, 0xFFFF)]
    assert validate_bucket_boundaries(pairs) == FOUR_BUCKETS
    assert validate_bucket_boundaries(FOUR_BUCKETS) == FOUR_BUCKETS
    # A single bucket spanning the whole ring is valid.
    assert validate_bucket_boundaries([(0x0000, 0xFFFF)]) == [HashRange(0, 0xFFFF)]


@pytest.mark.parametrize(
    ("ranges", "message"),
    [
        ([], "at least one bucket"),  # no boundaries at all
        ([(0x0001, 0xFFFF)], r"ranges\[0\] is \[1, 65535\] where start 0"),  # not from 0
        ([(0x0000, 0x3FFF), (0x5000, 0xFFFF)], r"ranges\[1\]"),  # gap between buckets
        ([(0x0000, 0x7FFF), (0x4000, 0xFFFF)], r"ranges\[1\]"),  # overlapping buckets
        ([(0x0000, 0x3FFF), (0x4000, 0x2000)], r"ranges\[1\]"),  # end before start
        ([(0x0000, 0x3FFF), (0x4000, 0x7FFF)], "tile the 16-bit ring"),  # not tiling
        ([(0x0000, 0x0000), (0x0001, 0xFFFF)], r"at least \[0, 1\]"),  # bucket 0 too narrow
    ],
)
def test_invalid_boundaries_are_rejected(ranges: list[tuple[int, int]], message: str) -> None:
    # testInvalidBoundariesAreRejected
    with pytest.raises(ValueError, match=message):
        validate_bucket_boundaries(ranges)
    with pytest.raises(ValueError, match=message):
        EntryBucketConsumerSelector.from_bucket_ranges(ranges)
    with pytest.raises(ValueError, match=message):
        EntryBucketDispatcher.from_bucket_ranges(ranges)


def test_a_stamped_entry_goes_by_its_min_hash_and_an_unstamped_one_by_its_key() -> None:
    dispatcher = EntryBucketDispatcher(FOUR_SPLITS)
    dispatcher.add_consumer(1, "consumer-a")
    dispatcher.add_consumer(2, "consumer-b")
    assert dispatcher.sticky_key_hash(entry_hash_min=0x8123) == 0x8000
    assert dispatcher.dispatch(1, 0, entry_hash_min=0x8123) == 2
    assert dispatcher.dispatch(1, 1, entry_hash_min=0x0000) == 1
    key = next(f"k{i}" for i in range(100) if ks.routing.bucket_hash(f"k{i}") >= 0xC000)
    assert dispatcher.sticky_key_hash(key=key) == 0xC000
    assert dispatcher.dispatch(1, 2, key=key) == 2
    assert dispatcher.pending_acks(2).to_list() == [(1, 0, 1, 0x8000), (1, 2, 1, 0xC000)]
    assert dispatcher.pending_acks(1).to_list() == [(1, 1, 1, 1)]


def test_a_moving_bucket_is_withheld_until_the_previous_owner_acks() -> None:
    unblocked: list[int] = []
    dispatcher = EntryBucketDispatcher(FOUR_SPLITS, unblocking_handler=unblocked.append)
    dispatcher.add_consumer(1, "consumer-a")
    assert dispatcher.dispatch(1, 0, entry_hash_min=0x9000, batch_size=5) == 1
    assert dispatcher.dispatch(1, 1, entry_hash_min=0xA000) == 1
    dispatcher.add_consumer(2, "consumer-b")  # takes buckets 2 and 3
    entry = dispatcher.tracker.get_entry(0x8000)
    assert (entry.consumer_id, entry.ref_count) == (1, 2)
    assert dispatcher.withheld_buckets() == (2,)
    assert dispatcher.dispatch(1, 2, entry_hash_min=0x8000) is None
    assert dispatcher.dispatch(1, 3, entry_hash_min=0xC000) == 2  # bucket 3 had nothing pending
    assert dispatcher.ack(1, 1, 0) and unblocked == []
    assert dispatcher.ack(1, 1, 1) and unblocked == [0x8000]
    assert dispatcher.withheld_buckets() == ()
    assert dispatcher.dispatch(1, 2, entry_hash_min=0x8000) == 2


def test_a_bucket_handed_back_is_released_by_its_drainer() -> None:
    dispatcher = EntryBucketDispatcher(FOUR_SPLITS)
    dispatcher.add_consumer(1, "consumer-a")
    assert dispatcher.dispatch(1, 0, entry_hash_min=0xF000) == 1
    for _ in range(3):
        dispatcher.add_consumer(2, "consumer-b")
        assert dispatcher.withheld_buckets() == (3,)
        assert dispatcher.remove_consumer(2) == []
        assert len(dispatcher.tracker) == 0
    assert dispatcher.dispatch(1, 1, entry_hash_min=0xF000) == 1


def test_a_leaving_consumer_returns_its_pending_acks_and_stops_draining() -> None:
    dispatcher = EntryBucketDispatcher(FOUR_SPLITS)
    dispatcher.add_consumer(1, "a")
    dispatcher.dispatch(7, 1, entry_hash_min=0xF000)
    dispatcher.add_consumer(2, "b")
    assert dispatcher.withheld_buckets() == (3,)
    assert dispatcher.remove_consumer(1) == [(7, 1, 1, 0xC000)]
    assert dispatcher.withheld_buckets() == () and len(dispatcher.tracker) == 0
    assert dispatcher.dispatch(7, 1, entry_hash_min=0xF000) == 2
    with pytest.raises(KeyError, match="consumer 9 is not connected"):
        dispatcher.remove_consumer(9)  # the one rule for a consumer not connected


def test_dispatch_with_no_consumer_sends_nothing() -> None:
    dispatcher = EntryBucketDispatcher()
    assert dispatcher.dispatch(1, 1, key="k") is None


# --- impacted consumers and the hand-off rule --------------------------------------------------


def test_impacted_result_merges_compares_and_prints() -> None:
    result = ImpactedConsumersResult(
        {1: [HashRange(5, 9), HashRange(0, 4)], 2: []}, {3: [HashRange(0, 9)]}
    )
    assert result.removed_hash_ranges == {1: [HashRange(0, 9)]}
    assert result.added_hash_ranges == {3: [HashRange(0, 9)]}
    assert not result.is_empty()
    assert result == ImpactedConsumersResult({1: [HashRange(0, 9)]}, {3: [HashRange(0, 9)]})
    assert result != ImpactedConsumersResult({1: [HashRange(0, 9)]})
    assert ImpactedConsumersResult(added_hash_ranges={1: [HashRange(0, 1)]}).is_empty()
    assert repr(result) == (
        "ImpactedConsumersResult(removed_hash_ranges={1: [HashRange(0x0000, 0x0009)]}, "
        "added_hash_ranges={3: [HashRange(0x0000, 0x0009)]})"
    )
    with pytest.raises(AttributeError):
        result.removed_hash_ranges = {}  # type: ignore[misc]


def test_impacted_consumers_diffs_snapshots() -> None:
    before = {1: [HashRange(0, 0xFFFF)]}
    after = {1: [HashRange(0, 0x7FFF)], 2: [HashRange(0x8000, 0xFFFF)]}
    assert impacted_consumers(before, after) == ImpactedConsumersResult(
        {1: [HashRange(0x8000, 0xFFFF)]}, {2: [HashRange(0x8000, 0xFFFF)]}
    )
    with pytest.raises(ValueError, match="non-overlapping"):
        impacted_consumers({1: [HashRange(0, 9)], 2: [HashRange(9, 12)]}, {})
    with pytest.raises(TypeError, match="mapping"):
        impacted_consumers([HashRange(0, 9)], {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a HashRange"):
        impacted_consumers({1: [(0, 9)]}, {})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="got bool"):
        impacted_consumers({True: [HashRange(0, 9)]}, {})


@given(
    st.lists(st.integers(0, 3), min_size=8, max_size=8),
    st.lists(st.integers(0, 3), min_size=8, max_size=8),
)
def test_impacted_consumers_match_a_hash_by_hash_diff(before: list[int], after: list[int]) -> None:
    """Owners per eighth of the ring (0 = none): every hash whose owner changed is lost by
    the old owner and gained by the new one, nothing else."""

    def snapshot(owners: list[int]) -> dict[int, list[HashRange]]:
        out: dict[int, list[HashRange]] = {}
        for i, owner in enumerate(owners):
            if owner:
                out.setdefault(owner, []).append(HashRange(i * 8192, i * 8192 + 8191))
        return out

    result = impacted_consumers(snapshot(before), snapshot(after))
    for eighth, (old, new) in enumerate(zip(before, after, strict=True)):
        h = eighth * 8192 + 17
        lost = {c for c, rs in result.removed_hash_ranges.items() if any(r.contains(h) for r in rs)}
        won = {c for c, rs in result.added_hash_ranges.items() if any(r.contains(h) for r in rs)}
        assert lost == ({old} if old and old != new else set())
        assert won == ({new} if new and old != new else set())


def test_register_draining_hashes_refuses_bad_maps_without_change() -> None:
    tracker, other = DrainingHashesTracker(), DrainingHashesTracker()
    a, b = PendingAcksMap(1, tracker), PendingAcksMap(2, other)
    a.add_pending_ack_if_allowed(1, 1, 1, 0x9000)
    lost = ImpactedConsumersResult({1: [HashRange(0x8000, 0xFFFF)]})
    for maps, message in [
        ([a, b], "another tracker"),
        ([a, a], "given twice"),
        ([a, PendingAcksMap(3)], "no tracker"),
        ([a, "map"], "must be a PendingAcksMap"),
    ]:
        with pytest.raises((TypeError, ValueError), match=message):
            register_draining_hashes(lost, maps)
        assert len(tracker) == 0
    with pytest.raises(TypeError, match="skip_consumer must be an int, got bool"):
        register_draining_hashes(lost, [a], skip_consumer=True)
    assert register_draining_hashes(lost, [a], skip_consumer=1) == (0, 0)
    assert register_draining_hashes(lost, []) == (0, 0)
    assert register_draining_hashes(lost, [a]) == (1, 0)
    assert tracker.get_entry(0x9000).consumer_id == 1


def test_a_conflicting_registration_changes_nothing() -> None:
    tracker = DrainingHashesTracker()
    a, b = PendingAcksMap(1, tracker), PendingAcksMap(2, tracker)
    a.add_pending_ack_if_allowed(1, 1, 1, 7)
    b.add_pending_ack_if_allowed(1, 2, 1, 7)
    both = ImpactedConsumersResult({1: [HashRange(0, 9)], 2: [HashRange(0, 9)]})
    with pytest.raises(ValueError, match="already draining hash 7"):
        register_draining_hashes(both, [a, b])
    assert len(tracker) == 0


# --- selector bad input ------------------------------------------------------------------------


def test_selector_bad_input_changes_nothing() -> None:
    selector = four()
    selector.add_consumer(1, "a")
    before = (selector.consumer_ids, selector.get_consumer_key_hash_ranges())
    for call, error, message in [
        (lambda: selector.add_consumer(1, "again"), ValueError, "already connected"),
        (lambda: selector.add_consumer(True, "t"), TypeError, "got bool"),
        (lambda: selector.add_consumer(2.0, "f"), TypeError, "must be an int"),
        (lambda: selector.add_consumer(-1, "n"), ValueError, "2\\*\\*64"),
        (lambda: selector.add_consumer(2, b"bytes"), TypeError, "name must be a str"),
        (lambda: selector.remove_consumer(1.0), TypeError, "must be an int"),
        (lambda: selector.select(0x10000), ValueError, "16-bit"),
        (lambda: selector.select_many([1, 0x10000]), ValueError, "hashes"),
        (lambda: selector.canonical_hash_of_bucket(4), ValueError, "outside"),
        (lambda: selector.canonical_hash_of_bucket(True), TypeError, "bool"),
        (lambda: EntryBucketConsumerSelector([1, 0x8000]), ValueError, "at least 2"),
        (lambda: EntryBucketConsumerSelector("12"), TypeError, "got str"),
        (lambda: EntryBucketConsumerSelector.from_bucket_ranges(["ab"]), TypeError, "pair"),
    ]:
        with pytest.raises(error, match=message):
            call()  # type: ignore[no-untyped-call]
        assert (selector.consumer_ids, selector.get_consumer_key_hash_ranges()) == before


def test_select_many_agrees_with_select() -> None:
    selector = EntryBucketConsumerSelector(ks.routing.equal_width_splits(100))
    with pytest.raises(ValueError, match="no consumers"):
        selector.select_many([1])
    assert selector.select_many([]).tolist() == []
    for i in range(7):
        selector.add_consumer(i, f"c{i}")
    hashes = list(range(0, 65536, 7))
    assert selector.select_many(hashes).tolist() == [selector.select(h) for h in hashes]


def test_dispatcher_bad_input_changes_nothing() -> None:
    dispatcher = EntryBucketDispatcher(FOUR_SPLITS)
    dispatcher.add_consumer(1, "a")
    dispatcher.dispatch(1, 0, entry_hash_min=0x9000)
    dispatcher.add_consumer(2, "b")
    before = (dispatcher.withheld_buckets(), dispatcher.tracker.get_entry(0x8000))
    for call, error in [
        (lambda: dispatcher.dispatch(1, 1), TypeError),
        (lambda: dispatcher.dispatch(1, 1, entry_hash_min=1, key="k"), TypeError),
        (lambda: dispatcher.dispatch(1, 1, entry_hash_min=0x10000), ValueError),
        (lambda: dispatcher.dispatch(1, 1, key=5), TypeError),  # type: ignore[arg-type]
        (lambda: dispatcher.dispatch(1.0, 1, entry_hash_min=0x9000), TypeError),
        (lambda: dispatcher.dispatch(1, 1, entry_hash_min=0x9000, batch_size=-1), ValueError),
        (lambda: dispatcher.add_consumer(2, "b"), ValueError),
        (lambda: dispatcher.remove_consumer(True), TypeError),
        (lambda: dispatcher.ack(1.0, 1, 0), TypeError),
        (lambda: dispatcher.pending_acks(3), KeyError),
        (lambda: dispatcher.remove_consumer(3), KeyError),
        (lambda: dispatcher.ack(3, 1, 0), KeyError),
    ]:
        with pytest.raises(error):
            call()  # type: ignore[no-untyped-call]
        assert (dispatcher.withheld_buckets(), dispatcher.tracker.get_entry(0x8000)) == before
    assert dispatcher.tracker.get_entry(0x8000).blocked_count == 0


# --- stateful: the selector and the dispatcher against small models ----------------------------

NAMES = ("a", "b", "c", "\uff61", "\U0001f600")


def java_order(consumer: tuple[str, int]) -> tuple[list[int], int]:
    name, cid = consumer
    units = list(name.encode("utf-16-be"))
    return [units[i] << 8 | units[i + 1] for i in range(0, len(units), 2)], cid


class Model:
    """Bucket owners as Pulsar computes them, and the draining entries of the hand-off."""

    def __init__(self, splits: list[int]) -> None:
        self.n = len(splits) + 1
        self.starts = [0, *splits]
        self.members: dict[int, str] = {}
        self.pending: dict[int, dict[tuple[int, int], int]] = {}  # consumer -> (l, e) -> bucket
        self.draining: dict[int, tuple[int, int]] = {}  # bucket -> (consumer, refs)

    def owners(self) -> list[int | None]:
        ordered = sorted(((name, cid) for cid, name in self.members.items()), key=java_order)
        k = len(ordered)
        out: list[int | None] = [None] * self.n
        for j, (_, cid) in enumerate(ordered):
            for b in range(j * self.n // k, (j + 1) * self.n // k):
                out[b] = cid
        return out

    def change(self, skip: int, apply: object) -> None:
        before = self.owners()
        apply()  # type: ignore[operator]
        after = self.owners()
        for b, (old, new) in enumerate(zip(before, after, strict=True)):
            if old == new:
                continue
            if old is not None and old != skip and old in self.pending:
                refs = sum(1 for bucket in self.pending[old].values() if bucket == b)
                if refs:
                    self.draining[b] = (old, refs)
            if new is not None and new != skip and self.draining.get(b, (None,))[0] == new:
                del self.draining[b]

    def bucket(self, h: int) -> int:
        return max(i for i, s in enumerate(self.starts) if s <= h)


class DispatcherMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.splits = [0x3000, 0x5000, 0x5001, 0xA000]
        self.dispatcher = EntryBucketDispatcher(self.splits)
        self.model = Model(self.splits)
        self.next_entry = 0

    @rule(cid=st.integers(1, 5), name=st.sampled_from(NAMES))
    def add(self, cid: int, name: str) -> None:
        if cid in self.model.members:
            with pytest.raises(ValueError, match="already connected"):
                self.dispatcher.add_consumer(cid, name)
            return

        def apply() -> None:
            self.model.members[cid] = name
            self.model.pending[cid] = {}

        self.model.change(cid, apply)
        self.dispatcher.add_consumer(cid, name)

    @rule(cid=st.integers(1, 6))
    def remove(self, cid: int) -> None:
        m = self.model
        if cid not in m.members:
            with pytest.raises(KeyError):
                self.dispatcher.remove_consumer(cid)
            return
        expected = sorted(m.pending[cid])
        replay = self.dispatcher.remove_consumer(cid)
        assert [(ledger, entry) for ledger, entry, _, _ in replay] == expected

        def apply() -> None:
            del m.members[cid]
            del m.pending[cid]
            m.draining = {b: v for b, v in m.draining.items() if v[0] != cid}

        m.change(cid, apply)
        if not m.members:
            m.draining.clear()

    @rule(h=st.integers(0, 0xFFFF), stamped=st.booleans())
    def dispatch(self, h: int, stamped: bool) -> None:
        m = self.model
        self.next_entry += 1
        entry = self.next_entry
        if stamped:
            got = self.dispatcher.dispatch(0, entry, entry_hash_min=h)
            b = m.bucket(h)
        else:
            key = f"key-{h}"
            got = self.dispatcher.dispatch(0, entry, key=key)
            b = m.bucket(ks.routing.bucket_hash(key) or 1)
        owner = m.owners()[b]
        drainer = m.draining.get(b, (None,))[0]
        want = None if owner is None or drainer not in (None, owner) else owner
        assert got == want
        if want is not None:
            m.draining.pop(b, None)  # the owner's own draining entry goes (Pulsar)
            m.pending[want][(0, entry)] = b

    @precondition(lambda self: any(self.model.pending.values()))
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        m = self.model
        cid = data.draw(st.sampled_from(sorted(c for c, p in m.pending.items() if p)))
        key = data.draw(st.sampled_from(sorted(m.pending[cid])))
        assert self.dispatcher.ack(cid, *key)
        b = m.pending[cid].pop(key)
        drainer, refs = m.draining.get(b, (None, 0))
        if drainer == cid:
            if refs == 1:
                del m.draining[b]
            else:
                m.draining[b] = (cid, refs - 1)

    @invariant()
    def agrees_with_the_model(self) -> None:
        m, d = self.model, self.dispatcher
        owners = m.owners()
        assert d.selector.bucket_owners() == ([] if not m.members else owners)
        starts = [max(s, 1) for s in m.starts]
        got = {}
        for b, h in enumerate(starts):
            entry = d.tracker.get_entry(h)
            if entry is not None:
                got[b] = (entry.consumer_id, entry.ref_count)
        assert got == m.draining
        assert d.withheld_buckets() == tuple(
            sorted(b for b, (c, _) in m.draining.items() if owners[b] != c)
        )


DispatcherMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40)
TestDispatcherMachine = DispatcherMachine.TestCase


@given(
    st.lists(st.tuples(st.integers(0, 0xFFFF), st.integers(0, 3)), max_size=60),
    st.integers(1, 4),
)
@settings(max_examples=40)
def test_dispatch_many_agrees_with_dispatch(entries: list[tuple[int, int]], late: int) -> None:
    """The batch decides as one dispatch per entry would, draining buckets included."""
    import numpy as np

    def make() -> EntryBucketDispatcher:
        d = EntryBucketDispatcher([0x3000, 0x5000, 0xA000])
        d.add_consumer(1, "a")
        d.dispatch(9, 0, entry_hash_min=0x3100)
        d.dispatch(9, 1, entry_hash_min=0xB000)
        d.add_consumer(late + 1, "b")  # buckets move while consumer 1 holds entries
        return d

    one, many = make(), make()
    want = [one.dispatch(0, i, entry_hash_min=h, batch_size=n) for i, (h, n) in enumerate(entries)]
    consumers, sent = many.dispatch_many(
        np.zeros(len(entries), dtype=np.int64),
        np.arange(len(entries)),
        [h for h, _ in entries],
        [n for _, n in entries],
    )
    assert [int(c) if s else None for c, s in zip(consumers, sent, strict=True)] == want
    for c in (1, late + 1):
        assert many.pending_acks(c).to_list() == one.pending_acks(c).to_list()
    assert many.withheld_buckets() == one.withheld_buckets()


def test_dispatch_many_refuses_bad_input_without_change() -> None:
    d = EntryBucketDispatcher([0x8000])
    d.add_consumer(1, "a")
    with pytest.raises(ValueError, match="entry_hash_mins has 1 items but ledger_ids has 2"):
        d.dispatch_many([1, 1], [1, 2], [5])
    with pytest.raises(ValueError, match=r"batch_sizes\[1\] must be in \[0, 2\*\*31 - 1\], got -1"):
        d.dispatch_many([1, 1], [1, 2], [5, 6], [1, -1])
    with pytest.raises(ValueError, match="entry_hash_mins"):
        d.dispatch_many([1], [1], [0x10000])
    assert len(d.pending_acks(1)) == 0


def test_a_pending_entry_keeps_its_bucket() -> None:
    """Sent again in another bucket of the same consumer, a pending entry's ack would
    release that bucket and leave its own withheld for ever: refused, nothing changed."""
    import numpy as np

    d = EntryBucketDispatcher([0x4000, 0x8000, 0xC000])
    d.add_consumer(1, "a")
    assert d.dispatch(1, 0, entry_hash_min=0xD000) == 1
    d.add_consumer(2, "b")  # bucket 3 moves to 2 and drains on 1
    assert d.withheld_buckets() == (3,)
    before = d.pending_acks(1).to_list()
    with pytest.raises(ValueError, match=r"position \(1, 0\) is pending on consumer 1"):
        d.dispatch(1, 0, entry_hash_min=0x1000)
    with pytest.raises(ValueError, match=r"entry_ids\[1\]: position \(1, 0\) is pending"):
        d.dispatch_many(np.array([1, 1]), np.array([5, 0]), np.array([0x1000, 0x1000]))
    assert d.pending_acks(1).to_list() == before and len(d.pending_acks(2)) == 0
    assert d.ack(1, 1, 0)
    assert d.withheld_buckets() == ()


def test_a_position_twice_in_one_batch_is_refused() -> None:
    d = EntryBucketDispatcher([0x8000])
    d.add_consumer(1, "a")
    with pytest.raises(ValueError, match=r"entry_ids\[2\]: position \(1, 0\) is given twice"):
        d.dispatch_many([1, 1, 1], [0, 1, 0], [5, 6, 5])
    assert len(d.pending_acks(1)) == 0


def test_a_dispatchers_selector_is_read_only() -> None:
    d = EntryBucketDispatcher([0x8000])
    d.add_consumer(1, "a")
    for change in (lambda: d.selector.add_consumer(5, "e"), lambda: d.selector.remove_consumer(1)):
        with pytest.raises(TypeError, match="EntryBucketDispatcher's: add and remove consumers"):
            change()
    assert d.selector.consumer_ids == [1]
    d.add_consumer(5, "e")
    assert d.remove_consumer(5) == []
