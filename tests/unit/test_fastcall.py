"""The one-call entry points (rust/bindings/src/fastcall.rs): ``key_hash``, ``key_hashes``,
``select``, ``dispatch`` and ``ack`` called with positional arguments take a path of their
own, every other call the full one. Both must answer, and fail, alike: each case here is
made both ways (positional, then by keyword) and the outcomes compared."""

from __future__ import annotations

import inspect
import pickle
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import keyshared as ks

ANY = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-2, max_value=70_000),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.none(),
    st.floats(allow_nan=False),
    st.booleans(),
)


def outcome(call: Callable[[], object]) -> tuple[str, object]:
    try:
        return ("ok", call())
    except Exception as e:  # the exception is what is compared
        return (type(e).__name__, (str(e), getattr(e, "argument", None)))


def dispatcher() -> ks.StickyKeyDispatcher:
    d = ks.StickyKeyDispatcher()
    for c in range(3):
        d.add_consumer(c, f"consumer-{c}")
    return d


@given(key=ANY)
def test_key_hash_alike_both_ways(key: Any) -> None:
    assert outcome(lambda: ks.key_hash(key)) == outcome(lambda: ks.key_hash(key=key))


@given(keys=st.one_of(st.lists(ANY, max_size=70), st.tuples(ANY, ANY), ANY))
def test_key_hashes_alike_both_ways(keys: Any) -> None:
    fast, full = outcome(lambda: ks.key_hashes(keys)), outcome(lambda: ks.key_hashes(keys=keys))
    if fast[0] == "ok" and full[0] == "ok":
        assert fast[1].dtype == full[1].dtype  # type: ignore[attr-defined]
        assert fast[1].tolist() == full[1].tolist()  # type: ignore[attr-defined]
    else:
        assert fast == full


def test_key_hashes_of_one_key_is_one_key_hash() -> None:
    for key in ("order-1", b"\xff\x00", ""):
        assert ks.key_hashes([key]).tolist() == [ks.key_hash(key)]
        assert ks.key_hashes((key,)).tolist() == [ks.key_hash(key)]


@given(hash_=ANY)
def test_select_alike_both_ways(hash_: Any) -> None:
    selector = ks.ConsistentHashingStickyKeyConsumerSelector()
    selector.add_consumer(1, "one")
    assert outcome(lambda: selector.select(hash_)) == outcome(
        lambda: selector.select(sticky_key_hash=hash_)
    )
    d = dispatcher()
    assert outcome(lambda: d.select(hash_)) == outcome(lambda: d.select(sticky_key_hash=hash_))


@given(ledger=ANY, entry=ANY, hash_=ANY)
def test_dispatch_alike_both_ways(ledger: Any, entry: Any, hash_: Any) -> None:
    fast, full = dispatcher(), dispatcher()
    got = outcome(lambda: fast.dispatch(ledger, entry, hash_))
    want = outcome(lambda: full.dispatch(ledger_id=ledger, entry_id=entry, sticky_key_hash=hash_))
    assert got == want
    assert [fast.pending_acks(c).size() for c in range(3)] == [
        full.pending_acks(c).size() for c in range(3)
    ]


@given(consumer=ANY, ledger=ANY, entry=ANY)
def test_ack_alike_both_ways(consumer: Any, ledger: Any, entry: Any) -> None:
    fast, full = dispatcher(), dispatcher()
    for d in (fast, full):
        sent = d.dispatch(1, 5, 77)
        assert sent.consumer_id is not None
    got = outcome(lambda: fast.ack(consumer, ledger, entry))
    want = outcome(lambda: full.ack(consumer_id=consumer, ledger_id=ledger, entry_id=entry))
    assert got == want


def test_every_shape_the_full_methods_take_still_works() -> None:
    d = dispatcher()
    h = ks.sticky_key_hash("k")
    assert d.dispatch(1, 1, h, 3).delivered
    assert d.dispatch(1, 2, sticky_key_hash=h).consumer_id == d.select(h)
    assert ks.StickyKeyDispatcher.select(d, h) == d.select(h)
    bound = d.ack
    assert bound(d.select(h), 1, 2) is True
    entry_buckets = ks.EntryBucketDispatcher()
    entry_buckets.add_consumer(4, "four")
    assert entry_buckets.select(h) == entry_buckets.select(sticky_key_hash=h) == 4


def test_calls_without_arguments_fail_as_the_full_functions_do() -> None:
    d = dispatcher()
    for call in (d.select, d.dispatch, d.ack, ks.key_hash, ks.key_hashes):
        with pytest.raises(TypeError, match="missing"):
            call()  # type: ignore[operator]


def test_the_entry_points_pickle_as_themselves() -> None:
    """A Spark UDF or a process pool pickles the functions it calls by their names."""
    for function in (ks.key_hash, ks.key_hashes, ks.StickyKeyDispatcher.dispatch):
        assert pickle.loads(pickle.dumps(function)) is function


def test_a_method_refuses_another_class_instance() -> None:
    with pytest.raises(TypeError):
        ks.StickyKeyDispatcher.select(object(), 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ks.ConsistentHashingStickyKeyConsumerSelector.select(dispatcher(), 1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "function",
    [
        ks.key_hash,
        ks.key_hashes,
        ks.StickyKeyDispatcher.dispatch,
        ks.StickyKeyDispatcher.select,
        ks.StickyKeyDispatcher.ack,
        ks.EntryBucketDispatcher.select,
        ks.EntryBucketDispatcher.ack,
        ks.ConsistentHashingStickyKeyConsumerSelector.select,
    ],
)
def test_signatures_and_docs_are_kept(function: Any) -> None:
    """The entry points carry the full functions' text signatures and docs, which the stub
    gives (checked against the stub by tests/package)."""
    assert inspect.signature(function).parameters
    assert function.__doc__ and function.__doc__.strip()
