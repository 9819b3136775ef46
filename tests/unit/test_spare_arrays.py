"""Short results of the key-hash calls reuse the last one made once nothing else holds it
(rust/bindings/src/spare.rs): a result the caller kept, or anything that still sees one (a view,
a memoryview, a weak reference, a changed shape, dtype or flag), must never change."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import keyshared as ks
from keyshared.routing import hashing as h

RANGE = ks.HashRange(100, 40_000)
TABLE = ks.RoutingTable(
    [(0, ks.HashRange(0, 0x7FFF), [0x4000]), (1, ks.HashRange(0x8000, 0xFFFF), [])]
)
CALLS: dict[str, tuple[Callable[[list[str]], Any], Callable[[str], list[int]]]] = {
    "key_hashes": (ks.key_hashes, lambda k: [ks.key_hash(k)]),
    "sticky_key_hashes": (h.sticky_key_hashes, lambda k: [h.sticky_key_hash(k)]),
    "make_sticky_key_hashes": (
        lambda keys: h.make_sticky_key_hashes(keys, RANGE),
        lambda k: [h.make_sticky_key_hash(k, RANGE)],
    ),
    "split_hashes": (ks.split_hashes, lambda k: [h.segment_hash(k), h.bucket_hash(k)]),
    # Two arrays of two dtypes, int64 and int32.
    "route_keys": (TABLE.route_keys, lambda k: list(TABLE.route(k))),
}


def arrays(result: Any) -> list[np.ndarray[Any, Any]]:
    return list(result) if isinstance(result, tuple) else [result]


Read = Callable[[Any], object]


def hold(array: np.ndarray[Any, Any], how: str) -> tuple[Any, Read, object]:
    """Something that still sees `array` by `how`, how to read it back, and what it reads."""
    if how == "view":
        view = array[:]
        return view, lambda v: v.tolist(), view.tolist()
    if how == "memoryview":
        return memoryview(array), lambda m: m.tolist(), array.tolist()
    if how == "read-only":
        array.flags.writeable = False
    elif how == "reshaped":
        array.shape = (1, -1)
    elif how == "retyped":
        array.dtype = np.uint8
    return array, state, state(array)


def state(a: np.ndarray[Any, Any]) -> object:
    return (a.tolist(), a.dtype, a.shape, a.flags.writeable)


STEP = st.tuples(
    st.sampled_from(sorted(CALLS)),
    st.lists(st.text(max_size=6), min_size=1, max_size=3),
    st.sampled_from(["drop", "array", "view", "memoryview", "read-only", "reshaped", "retyped"]),
)


@given(steps=st.lists(STEP, max_size=30))
def test_a_result_kept_in_any_form_never_changes(steps: list[tuple[str, list[str], str]]) -> None:
    held: list[tuple[Any, Read, object]] = []
    for name, keys, how in steps:
        call, one = CALLS[name]
        got = arrays(call(keys))
        want = [[one(k)[i] for k in keys] for i in range(len(got))]
        for array, values in zip(got, want, strict=True):
            assert array.tolist() == values
            assert array.flags.writeable and array.flags.owndata and array.shape == (len(keys),)
            if how != "drop":
                held.append(hold(array, how))
        del got, array
        for obj, read, seen in held:
            assert read(obj) == seen


def test_a_dropped_result_is_handed_out_again() -> None:
    first = ks.key_hashes(["a"])
    address = id(first)
    del first
    again = ks.key_hashes(["b"])
    assert id(again) == address
    assert again.tolist() == [ks.key_hash("b")]


def test_a_weakly_referenced_result_dies_and_is_not_reused() -> None:
    result = ks.key_hashes(["a"])
    ref = weakref.ref(result)
    del result
    other = ks.key_hashes(["b"])
    gc.collect()
    assert ref() is None
    assert other.tolist() == [ks.key_hash("b")]


def test_results_kept_by_several_threads_are_their_own() -> None:
    keys = [[f"key-{t}-{i}"] for t in range(4) for i in range(2_000)]
    kept: dict[int, list[Any]] = {t: [] for t in range(4)}

    def run(t: int) -> None:
        for i in range(2_000):
            got = ks.key_hashes(keys[t * 2_000 + i])
            if i % 3:
                kept[t].append((keys[t * 2_000 + i][0], got))

    threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for results in kept.values():
        assert all(a.tolist() == [ks.key_hash(k)] for k, a in results)
