"""Bucket ownership: Pulsar's contiguous assignment, the sticky one, and what moves."""

from itertools import product

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keyshared import (
    BucketAssignment,
    BucketConsumer,
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
