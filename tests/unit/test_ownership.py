"""Bucket ownership: Pulsar's contiguous assignment, the sticky one, and what moves."""

from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from keyshared import TopicLayout
from keyshared.scalable import (
    BucketAssignment,
    BucketConsumer,
    BucketHandoff,
    BucketMove,
    contiguous_assignment,
    lost_buckets,
    moved_buckets,
    sticky_assignment,
)


def test_contiguous_assignment_is_pulsars_formula() -> None:
    consumers = [BucketConsumer("b", 1), BucketConsumer("a", 7), BucketConsumer("a", 3)]
    # Sorted by (name, id): a/3, a/7, b/1.
    assert contiguous_assignment(consumers, 8).owners == (3, 3, 7, 7, 7, 1, 1, 1)
    assert contiguous_assignment([5], 4).owners == (5, 5, 5, 5)
    assert contiguous_assignment([], 3).owners == (None, None, None)


@given(st.integers(1, 64), st.integers(0, 80))
def test_contiguous_slices_follow_floor_j_n_over_k(n: int, k: int) -> None:
    owners = contiguous_assignment(range(k), n).owners
    for j in range(k):
        assert [b for b, o in enumerate(owners) if o == j] == list(
            range(j * n // k, (j + 1) * n // k)
        )
    assert (None in owners) == (k == 0)


def test_more_consumers_than_buckets_leaves_some_idle() -> None:
    assignment = contiguous_assignment(range(5), 2)
    assert assignment.owners == (2, 4)
    assert assignment.buckets_of(0) == () and assignment.buckets_of(4) == (1,)


def test_assignment_accessors_and_validation() -> None:
    assignment = BucketAssignment((4, 4, None, 9))
    assert assignment.bucket_count == 4
    assert assignment.owner(2) is None and assignment.owner(3) == 9
    assert dict(assignment.by_consumer()) == {4: (0, 1), 9: (3,)}
    assert assignment.owner_array.tolist() == [4, 4, -1, 9]
    with pytest.raises(ValueError, match="bucket"):
        assignment.owner(4)
    with pytest.raises(ValueError, match="len"):
        BucketAssignment(())
    with pytest.raises(ValueError, match=r"owners\[0\]"):
        BucketAssignment((-1,))
    with pytest.raises(ValueError, match="repeat"):
        contiguous_assignment([1, BucketConsumer("x", 1)], 4)
    with pytest.raises(ValueError, match="bucket_count"):
        contiguous_assignment([1], 0)
    with pytest.raises(TypeError, match="consumer_id"):
        BucketConsumer("x", "1")  # type: ignore[arg-type]


def test_lost_and_moved_buckets() -> None:
    before = contiguous_assignment([1, 2], 4)  # 1 1 2 2
    after = contiguous_assignment([1, 2, 3], 4)  # 1 2 3 3
    assert moved_buckets(before, after) == (
        BucketMove(1, 1, 2),
        BucketMove(2, 2, 3),
        BucketMove(3, 2, 3),
    )
    assert lost_buckets(before, after) == {1: (1,), 2: (2, 3)}
    gone = contiguous_assignment([], 4)
    assert lost_buckets(before, gone) == {1: (0, 1), 2: (2, 3)}
    assert lost_buckets(gone, before) == {}
    with pytest.raises(ValueError, match="never changes"):
        moved_buckets(before, contiguous_assignment([1], 8))


def test_sticky_assignment_moves_only_what_balance_needs() -> None:
    before = contiguous_assignment([1, 2], 8)  # 1 x4, 2 x4
    after = sticky_assignment(before, [1, 2, 3])
    assert len(moved_buckets(before, after)) == 2
    assert sorted(len(after.buckets_of(c)) for c in (1, 2, 3)) == [2, 3, 3]
    assert lost_buckets(before, after) == {1: (3,), 2: (7,)}
    assert sticky_assignment(after, [1, 2, 3]) == after
    assert sticky_assignment(after, []).owners == (None,) * 8


def balanced(owners: tuple, consumers: list[int]) -> bool:
    n, k = len(owners), len(consumers)
    counts = [owners.count(c) for c in consumers]
    return None not in owners and all(n // k <= c <= -(-n // k) for c in counts)


@given(
    st.lists(st.none() | st.integers(0, 4), min_size=1, max_size=7),
    st.sets(st.integers(0, 4), min_size=1, max_size=3),
)
def test_sticky_moves_the_fewest_buckets_of_any_balanced_assignment(
    previous: list, consumers: set[int]
) -> None:
    before = BucketAssignment(tuple(previous))
    ids = sorted(consumers)
    after = sticky_assignment(before, ids)
    assert balanced(after.owners, ids)
    fewest = min(
        sum(a != b for a, b in zip(candidate, previous, strict=True))
        for candidate in product(ids, repeat=len(previous))
        if balanced(candidate, ids)
    )
    assert len(moved_buckets(before, after)) == fewest


# --- hand-off --------------------------------------------------------------------------------

SEGMENT = TopicLayout.initial(1, bucket_budget=4).segments[0]


def test_a_moving_bucket_waits_for_the_old_owners_acks() -> None:
    released: list[int] = []
    handoff = BucketHandoff(
        SEGMENT, contiguous_assignment([1, 2], 4), unblocking_handler=released.append
    )
    assert handoff.try_dispatch(1, 1, count=3)  # consumer 1 owns buckets 0 and 1
    assert not handoff.try_dispatch(2, 1)  # not the owner
    lost = handoff.reassign(contiguous_assignment([1, 2, 3], 4))  # 1 2 3 3: 1 loses bucket 1
    assert lost == {1: (1,), 2: (2, 3)}
    assert handoff.withheld_buckets() == (1,)
    entry = handoff.tracker.get_entry(SEGMENT.canonical_bucket_hash(1))
    assert (entry.consumer_id, entry.ref_count) == (1, 3)
    assert not handoff.try_dispatch(2, 1)  # withheld while consumer 1 drains
    handoff.ack(1, 1, count=2)
    assert not handoff.try_dispatch(2, 1) and released == []
    handoff.ack(1, 1)
    assert released == [1]
    assert handoff.withheld_buckets() == ()
    assert handoff.try_dispatch(2, 1) and handoff.holder(1) == 2 and handoff.pending(2, 1) == 1


def test_a_bucket_without_pending_messages_moves_at_once() -> None:
    handoff = BucketHandoff(SEGMENT, contiguous_assignment([1], 4))
    handoff.reassign(contiguous_assignment([1, 2], 4))
    assert handoff.try_dispatch(2, 3) and handoff.withheld_buckets() == ()


def test_a_bucket_handed_back_to_its_drainer_is_released() -> None:
    handoff = BucketHandoff(SEGMENT, contiguous_assignment([1], 4))
    assert handoff.try_dispatch(1, 2, count=2)
    handoff.reassign(contiguous_assignment([2], 4))
    assert handoff.withheld_buckets() == (2,)
    handoff.reassign(contiguous_assignment([1], 4))
    assert handoff.withheld_buckets() == () and len(handoff.tracker) == 0
    assert handoff.try_dispatch(1, 2) and handoff.pending(1, 2) == 3
    handoff.reassign(contiguous_assignment([3], 4))
    assert handoff.tracker.get_entry(SEGMENT.canonical_bucket_hash(2)).ref_count == 3


def test_a_closing_consumer_releases_what_it_drained() -> None:
    released: list[int] = []
    handoff = BucketHandoff(
        SEGMENT, contiguous_assignment([1], 4), unblocking_handler=released.append
    )
    handoff.try_dispatch(1, 0, count=4)
    handoff.try_dispatch(1, 3)
    handoff.reassign(contiguous_assignment([2], 4))
    assert not handoff.try_dispatch(2, 0)
    assert handoff.close_consumer(1) == {0: 4, 3: 1}
    assert released == [] and len(handoff.tracker) == 0
    assert handoff.try_dispatch(2, 0) and handoff.try_dispatch(2, 3)


def test_acks_must_match_pending_messages() -> None:
    handoff = BucketHandoff(SEGMENT, contiguous_assignment([1], 4))
    handoff.try_dispatch(1, 0)
    with pytest.raises(ValueError, match="consumer 1 has 1 pending message"):
        handoff.ack(1, 0, count=2)
    with pytest.raises(ValueError, match="consumer 2 has 0 pending"):
        handoff.ack(2, 0)
    with pytest.raises(ValueError, match="bucket"):
        handoff.try_dispatch(1, 4)
    with pytest.raises(ValueError, match="count"):
        handoff.try_dispatch(1, 0, count=0)


class HandoffMachine(RuleBasedStateMachine):
    """Random dispatches, acks, closes and reassignments: never two consumers holding unacked
    messages of one bucket, and an owner is refused only while someone else drains."""

    def __init__(self) -> None:
        super().__init__()
        self.segment = TopicLayout.initial(1, bucket_budget=6).segments[0]
        self.handoff = BucketHandoff(self.segment, contiguous_assignment([1, 2], 6))
        self.held: dict[int, tuple[int, int]] = {}

    @rule(consumers=st.sets(st.integers(1, 5), max_size=4), sticky=st.booleans())
    def reassign(self, consumers: set[int], sticky: bool) -> None:
        before = self.handoff.assignment
        after = (
            sticky_assignment(before, consumers) if sticky else contiguous_assignment(consumers, 6)
        )
        assert self.handoff.reassign(after) == lost_buckets(before, after)

    @rule(consumer=st.integers(1, 5), bucket=st.integers(0, 5), count=st.integers(1, 3))
    def dispatch(self, consumer: int, bucket: int, count: int) -> None:
        owner = self.handoff.assignment.owner(bucket)
        holder = self.held.get(bucket, (None, 0))[0]
        ok = self.handoff.try_dispatch(consumer, bucket, count)
        assert ok == (consumer == owner and holder in (None, consumer))
        if ok:
            self.held[bucket] = (consumer, self.held.get(bucket, (consumer, 0))[1] + count)

    @rule(bucket=st.integers(0, 5), count=st.integers(1, 3))
    def dispatch_to_owner(self, bucket: int, count: int) -> None:
        owner = self.handoff.assignment.owner(bucket)
        if owner is not None:
            self.dispatch(owner, bucket, count)

    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        if not self.held:
            return
        bucket = data.draw(st.sampled_from(sorted(self.held)))
        consumer, n = self.held[bucket]
        count = data.draw(st.integers(1, n))
        self.handoff.ack(consumer, bucket, count)
        self.held[bucket] = (consumer, n - count)
        if n == count:
            del self.held[bucket]

    @rule(consumer=st.integers(1, 5))
    def close(self, consumer: int) -> None:
        want = {b: n for b, (c, n) in self.held.items() if c == consumer}
        assert self.handoff.close_consumer(consumer) == want
        self.held = {b: v for b, v in self.held.items() if v[0] != consumer}

    @invariant()
    def one_holder_per_bucket_and_the_tracker_agrees(self) -> None:
        for bucket in range(6):
            holder, n = self.held.get(bucket, (None, 0))
            assert self.handoff.holder(bucket) == holder
            for consumer in range(1, 6):
                assert self.handoff.pending(consumer, bucket) == (n if consumer == holder else 0)
            entry = self.handoff.tracker.get_entry(self.segment.canonical_bucket_hash(bucket))
            if holder is not None and holder != self.handoff.assignment.owner(bucket):
                assert entry is not None and (entry.consumer_id, entry.ref_count) == (holder, n)
            else:
                assert entry is None


HandoffMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40)
TestHandoffMachine = HandoffMachine.TestCase


# --- bad input leaves the hand-off unchanged (issue 13, item 2) --------------------------------


def handoff_state(handoff: BucketHandoff) -> tuple[object, ...]:
    buckets = range(handoff.assignment.bucket_count)
    hashes = [SEGMENT.canonical_bucket_hash(b) for b in buckets]
    return (
        handoff.assignment,
        handoff.withheld_buckets(),
        tuple(handoff.holder(b) for b in buckets),
        tuple(handoff.pending(c, b) for c in (1, 2, 3) for b in buckets),
        tuple(
            None if (e := handoff.tracker.get_entry(h)) is None else (e.consumer_id, e.ref_count)
            for h in hashes
        ),
    )


def draining_handoff() -> BucketHandoff:
    handoff = BucketHandoff(SEGMENT, contiguous_assignment([1], 4))
    assert handoff.try_dispatch(1, 0, count=2) and handoff.try_dispatch(1, 3)
    handoff.reassign(contiguous_assignment([1, 2], 4))
    assert handoff.withheld_buckets() == (3,)
    return handoff


@pytest.mark.parametrize("bad_id", [1.0, True, "1", None, -1, 2**64])
def test_bad_consumer_ids_are_refused_before_any_change(bad_id: object) -> None:
    handoff = draining_handoff()
    before = handoff_state(handoff)
    calls = (
        lambda: handoff.ack(bad_id, 0),  # type: ignore[arg-type]
        lambda: handoff.ack(bad_id, 3),  # type: ignore[arg-type]
        lambda: handoff.close_consumer(bad_id),  # type: ignore[arg-type]
        lambda: handoff.pending(bad_id, 0),  # type: ignore[arg-type]
        lambda: handoff.try_dispatch(bad_id, 1),  # type: ignore[arg-type]
    )
    for call in calls:
        with pytest.raises((TypeError, ValueError), match="consumer_id"):
            call()
        assert handoff_state(handoff) == before
    # The bucket still drains and is released by the real acks.
    handoff.ack(1, 3)
    assert handoff.withheld_buckets() == () and handoff.try_dispatch(2, 3)


def test_consumer_ids_are_taken_as_the_dispatcher_takes_them() -> None:
    handoff = draining_handoff()
    assert handoff.pending(np.int64(1), 0) == handoff.pending(1, 0) == 2  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"consumer_id must be in \[0, 18446744073709551615\]"):
        handoff.pending(-1, 0)


def test_a_float_id_does_not_match_consumer_1() -> None:
    handoff = draining_handoff()
    with pytest.raises(TypeError, match="consumer_id must be an int, got float"):
        handoff.pending(1.0, 0)  # type: ignore[arg-type]
    assert handoff.pending(1, 0) == 2


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda h: h.ack(1, 0, count=3), ValueError),
        (lambda h: h.ack(1, 0, count=0), ValueError),
        (lambda h: h.ack(1, 0, count=1.0), TypeError),
        (lambda h: h.ack(1, 9), ValueError),
        (lambda h: h.ack(1, True), TypeError),
        (lambda h: h.try_dispatch(1, 0, count=2**31), ValueError),
        (lambda h: h.try_dispatch(1, -1), ValueError),
        (lambda h: h.reassign("1 2 3 4"), TypeError),
        (lambda h: h.reassign(contiguous_assignment([1], 5)), ValueError),
    ],
)
def test_bad_arguments_change_nothing(call: object, error: type[Exception]) -> None:
    handoff = draining_handoff()
    before = handoff_state(handoff)
    with pytest.raises(error):
        call(handoff)  # type: ignore[operator]
    assert handoff_state(handoff) == before


def test_contiguous_assignment_orders_names_as_the_entry_bucket_selector() -> None:
    from keyshared.scalable import EntryBucketConsumerSelector

    # U+FF61 sorts after U+1F600 in UTF-16 (a surrogate pair starts at 0xD83D), as in Java.
    consumers = [BucketConsumer("\uff61", 1), BucketConsumer("\U0001f600", 2)]
    assignment = contiguous_assignment(consumers, 4)
    selector = EntryBucketConsumerSelector([0x4000, 0x8000, 0xC000])
    for c in consumers:
        selector.add_consumer(c.consumer_id, c.name)
    assert assignment.owners == (2, 2, 1, 1)
    assert tuple(selector.bucket_owners()) == assignment.owners
