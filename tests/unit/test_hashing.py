"""The pinned key hash against mmh3, over every input kind a batch accepts."""

import os
import signal
import threading
import time

import mmh3
import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.keys import Text, list_items

import keyshared as ks
from keyshared.routing import Partitioner

#: Keys of a list read at once (rust/bindings/src/keys.rs).
PIECE = 1 << 12
#: Lists and tuples up to this long are hashed with the GIL held, straight into the output.
SHORT = 64

keys_st = st.one_of(st.text(max_size=64), st.binary(max_size=64))
key_lists = st.lists(keys_st, max_size=40)


def reference(key: str | bytes) -> int:
    return mmh3.hash(key.encode() if isinstance(key, str) else key, 0, signed=False)


def test_known_values() -> None:
    assert ks.HASH_VERSION == 1
    assert ks.key_hash("") == 0
    assert ks.key_hash("hello") == 0x248BFA47
    assert ks.key_hash(b"hello") == 0x248BFA47
    assert ks.key_hash("The quick brown fox jumps over the lazy dog") == 0x2E4FF723
    assert ks.routing.segment_hash("hello") == 0x248B
    assert ks.routing.bucket_hash("hello") == 0xFA47
    assert ks.sticky_key_hash("hello") == (0x248BFA47 % 65535) + 1 == 7892
    assert ks.routing.make_sticky_key_hash("hello", ks.HashRange.full()) == 0xFA47


@pytest.mark.parametrize("length", range(65))
def test_every_tail_length_matches_mmh3(length: int) -> None:
    key = bytes(range(7, 7 + length))
    assert ks.key_hash(key) == reference(key)


@given(keys_st)
def test_single_key_matches_mmh3(key: str | bytes) -> None:
    h = ks.key_hash(key)
    assert h == reference(key)
    assert ks.routing.segment_hash(key) == h >> 16
    assert ks.routing.bucket_hash(key) == h & 0xFFFF
    assert ks.sticky_key_hash(key) == (h & 0x7FFFFFFF) % 65535 + 1
    assert ks.routing.make_sticky_key_hash(key, ks.HashRange.full()) == ((h & 0xFFFF) or 1)
    assert ks.routing.make_sticky_key_hash(key, ks.HashRange(10, 19)) == (h & 0x7FFFFFFF) % 10 + 10


@given(
    st.text(
        alphabet=st.characters(min_codepoint=0x80, exclude_categories=("Cs",)),
        min_size=1,
        max_size=20,
    )
)
def test_non_ascii_text_hashes_its_utf8(text: str) -> None:
    assert ks.key_hash(text) == reference(text.encode("utf-8"))


def test_make_sticky_key_hash_maps_zero_to_one() -> None:
    # A key whose low half is 0; found by search, pinned here.
    key = next(f"k{i}" for i in range(1_000_000) if reference(f"k{i}") & 0xFFFF == 0)
    assert ks.routing.make_sticky_key_hash(key, ks.HashRange.full()) == 1
    assert ks.routing.make_sticky_key_hash(key, ks.HashRange(0, 0)) == 1
    assert (
        ks.routing.make_sticky_key_hash(key, ks.HashRange(1, 0xFFFF)) == ks.sticky_key_hash(key) > 0
    )


@given(key_lists, st.integers(0, 0xFFFF), st.integers(0, 0xFFFF))
def test_sticky_hash_batches_equal_single_keys(keys: list[str | bytes], a: int, b: int) -> None:
    r = ks.HashRange(min(a, b), max(a, b))
    sticky = ks.routing.sticky_key_hashes(keys)
    within = ks.routing.make_sticky_key_hashes(keys, r, threads=2)
    assert sticky.dtype == within.dtype == np.uint16
    assert sticky.tolist() == [ks.sticky_key_hash(k) for k in keys]
    assert within.tolist() == [ks.routing.make_sticky_key_hash(k, r) for k in keys]
    texts = [k for k in keys if isinstance(k, str)]
    for batch in (np.array(texts, dtype=object), pa.array(texts, type=pa.large_string())):
        assert ks.routing.sticky_key_hashes(batch).tolist() == [
            ks.sticky_key_hash(k) for k in texts
        ]


def test_sticky_hash_batch_arguments() -> None:
    assert ks.routing.sticky_key_hashes(["a", None], null_key="hello").tolist() == [
        ks.sticky_key_hash("a"),
        7892,
    ]
    with pytest.raises(ValueError, match=r"keys\[1\] is None"):
        ks.routing.make_sticky_key_hashes(["a", None], ks.HashRange.full())
    with pytest.raises(TypeError):
        ks.routing.make_sticky_key_hashes(["a"], (0, 5))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ks.routing.make_sticky_key_hash(5, ks.HashRange.full())  # type: ignore[arg-type]


def expected(keys: list[str | bytes]) -> np.ndarray:
    return np.array([reference(k) for k in keys], dtype=np.uint32)


@given(key_lists)
def test_lists_and_tuples(keys: list[str | bytes]) -> None:
    want = expected(keys)
    for batch in (keys, tuple(keys)):
        got = ks.key_hashes(batch)
        assert got.dtype == np.uint32
        np.testing.assert_array_equal(got, want)


@given(st.lists(st.text(max_size=30), max_size=30))
def test_numpy_str_object_and_arrow_text(keys: list[str]) -> None:
    # NumPy's fixed-width str drops trailing NULs, so keys ending in one are not comparable.
    keys = [k.rstrip("\0") for k in keys]
    want = expected(list(keys))
    batches = [
        np.array(keys, dtype=str),
        np.array(keys, dtype=object),
        pa.array(keys, type=pa.string()),
        pa.array(keys, type=pa.large_string()),
        pa.array(keys, type=pa.string_view()),
        pa.chunked_array([keys[:3], keys[3:]], type=pa.string()),
        pa.chunked_array([], type=pa.large_string()) if not keys else pa.chunked_array([keys]),
    ]
    for batch in batches:
        np.testing.assert_array_equal(ks.key_hashes(batch), want, err_msg=repr(type(batch)))


@given(st.lists(st.binary(max_size=30), max_size=30))
def test_numpy_bytes_and_arrow_binary(keys: list[bytes]) -> None:
    keys = [k.rstrip(b"\0") for k in keys]
    want = expected(list(keys))
    batches = [
        np.array(keys, dtype=bytes) if keys else np.array([], dtype="S1"),
        np.array(keys, dtype=object),
        pa.array(keys, type=pa.binary()),
        pa.array(keys, type=pa.large_binary()),
        pa.array(keys, type=pa.binary_view()),
        pa.chunked_array([keys[:2], keys[2:]], type=pa.large_binary()),
    ]
    for batch in batches:
        np.testing.assert_array_equal(ks.key_hashes(batch), want, err_msg=repr(type(batch)))


def test_view_arrays_hash_as_one_key_at_a_time() -> None:
    # A view holds a key of up to 12 bytes inline and a longer one in a buffer; both are
    # read where they lie, from a sliced array too.
    keys = ["v" * (i % 100) + str(i) for i in range(3000)]
    for array in (pa.array(keys, pa.string_view()), pa.array(keys, pa.binary_view())):
        np.testing.assert_array_equal(ks.key_hashes(array), expected(list(keys)))
        np.testing.assert_array_equal(ks.key_hashes(array.slice(7)), expected(keys[7:]))


@given(key_lists)
def test_split_hashes_are_the_halves(keys: list[str | bytes]) -> None:
    seg, bucket = ks.split_hashes(keys)
    full = expected(keys)
    assert seg.dtype == np.uint16 and bucket.dtype == np.uint16
    np.testing.assert_array_equal(seg, full >> 16)
    np.testing.assert_array_equal(bucket, full & 0xFFFF)


def test_polars_series_through_the_capsule_interface() -> None:
    keys = ["a", "é", ""]
    np.testing.assert_array_equal(ks.key_hashes(pl.Series(keys)), expected(list(keys)))


def test_strided_numpy_views() -> None:
    arr = np.array(["a", "bb", "ccc", "dddd"])[::2]
    np.testing.assert_array_equal(ks.key_hashes(arr), expected(["a", "ccc"]))


def test_large_batches_agree_across_thread_counts() -> None:
    keys = [f"user-{i:08d}-{i * 7919 % 1000}" for i in range(200_000)]
    arrow = pa.array(keys)
    one = ks.key_hashes(arrow, threads=1)
    np.testing.assert_array_equal(one, ks.key_hashes(arrow, threads=2))
    np.testing.assert_array_equal(one, ks.key_hashes(keys, threads=7))
    np.testing.assert_array_equal(one[:1000], expected(list(keys[:1000])))


def test_default_thread_count_is_settable() -> None:
    before = ks.routing.get_num_threads()
    try:
        ks.set_num_threads(1)
        assert ks.routing.get_num_threads() == 1
        ks.set_num_threads(0)
        assert ks.routing.get_num_threads() >= 1
    finally:
        ks.set_num_threads(before)
    with pytest.raises(ValueError, match="threads"):
        ks.set_num_threads(-1)
    with pytest.raises(ValueError, match="threads must be at least 1"):
        ks.key_hashes(["a"], threads=0)


def test_null_keys_are_errors_naming_their_index() -> None:
    with pytest.raises(ValueError, match=r"keys\[1\] is None"):
        ks.key_hashes(["a", None])
    with pytest.raises(ValueError, match=r"keys\[2\] is null"):
        ks.key_hashes(pa.chunked_array([["a", "b"], [None]]))
    with pytest.raises(ValueError, match=r"keys\[0\] is None"):
        ks.split_hashes(np.array([None], dtype=object))


def test_null_key_stands_in_for_nulls() -> None:
    hello = ks.key_hash("hello")
    for batch in (["x", None], np.array(["x", None], dtype=object), pa.array(["x", None])):
        got = ks.key_hashes(batch, null_key="hello")
        assert got.tolist() == [ks.key_hash("x"), hello]
    assert ks.key_hashes(pa.array([None], type=pa.binary()), null_key=b"").tolist() == [0]


@pytest.mark.parametrize(
    ("batch", "error", "message"),
    [
        ("abc", TypeError, "not a single str"),
        (b"abc", TypeError, "not a single str"),
        (42, TypeError, "got int"),
        ({"a"}, TypeError, "got set"),
        (["a", 3], TypeError, r"keys\[1\] must be str or bytes, got int"),
        (np.arange(3), TypeError, "dtype int64"),
        (np.array([["a"]]), ValueError, "one-dimensional"),
        (pa.array([1, 2]), TypeError, "Arrow type Int64"),
        (["ok", "\udc80"], ValueError, r"keys\[1\] is not valid text"),
    ],
)
def test_bad_batches(batch: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        ks.key_hashes(batch)


@pytest.mark.parametrize("key", [None, 1, 1.5, ["a"], bytearray(b"a")])
def test_bad_single_keys(key: object) -> None:
    with pytest.raises(TypeError, match="key must be str or bytes"):
        ks.key_hash(key)  # type: ignore[arg-type]


def test_bad_null_key() -> None:
    with pytest.raises(TypeError, match="null_key must be str or bytes"):
        ks.key_hashes([None], null_key=5)  # type: ignore[arg-type]


def test_empty_batches() -> None:
    assert ks.key_hashes([]).shape == (0,)
    seg, bucket = ks.split_hashes(pa.array([], type=pa.string()))
    assert seg.shape == bucket.shape == (0,)


def test_batches_from_many_python_threads() -> None:
    keys = pa.array([f"k{i}" for i in range(100_000)])
    want = ks.key_hashes(keys, threads=1)
    results: list[bool] = []

    def work() -> None:
        for _ in range(5):
            results.append(bool((ks.key_hashes(keys, threads=2) == want).all()))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 20


@given(st.lists(list_items, max_size=60))
def test_list_items_of_every_kind_hash_as_their_bytes(keys: list[str | bytes | None]) -> None:
    null_key = b"\x00null"
    as_bytes = [
        null_key if k is None else k.encode() if isinstance(k, str) else bytes(k) for k in keys
    ]
    want = expected(as_bytes)
    for batch in (keys, tuple(keys)):
        np.testing.assert_array_equal(ks.key_hashes(batch, null_key=null_key), want)


@pytest.mark.parametrize("at", [3, SHORT - 3, 1000, PIECE * 2 + 5])
@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        ("\udc80", ValueError, r"keys\[{at}\] is not valid text"),
        (Text("\udc80"), ValueError, r"keys\[{at}\] is not valid text"),
        (None, ValueError, r"keys\[{at}\] is None"),
        (bytearray(b"a"), TypeError, r"keys\[{at}\] must be str or bytes, got bytearray"),
        (7, TypeError, r"keys\[{at}\] must be str or bytes, got int"),
    ],
)
def test_a_bad_item_after_a_run_of_keys_is_named_by_its_index(
    at: int, bad: object, error: type[Exception], message: str
) -> None:
    # Past the first pieces too: a list is read a piece at a time, on one thread or several.
    keys = [f"key-{i:019d}" for i in range(at)] + [bad] + ["é", b"x"]
    for batch in (keys, tuple(keys)):
        for threads in (1, 2):
            with pytest.raises(error, match=message.format(at=at)):
                ks.key_hashes(batch, threads=threads)


def test_lists_of_many_pieces_map_as_arrow() -> None:
    # Nulls on both sides of the edges between the pieces a list is read in.
    keys: list[str | None] = [f"k{i}-{i * 7919 % 10007}" for i in range(PIECE * 3 + 17)]
    for i in (0, PIECE - 1, PIECE, 2 * PIECE, len(keys) - 1):
        keys[i] = None
    arrow = pa.array(keys, pa.string())
    for batch in (keys, tuple(keys)):
        for threads in (1, 2):
            np.testing.assert_array_equal(
                ks.key_hashes(batch, null_key="n", threads=threads),
                ks.key_hashes(arrow, null_key="n"),
            )
        for got, want in zip(
            ks.split_hashes(batch, null_key=""),
            ks.split_hashes(arrow, null_key=""),
            strict=True,
        ):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(
            ks.partitions(batch, 7, Partitioner.KAFKA), ks.partitions(arrow, 7, Partitioner.KAFKA)
        )


@settings(max_examples=30, deadline=None)
@given(
    spots=st.lists(st.tuples(st.integers(0, PIECE * 3), list_items), max_size=8),
    threads=st.sampled_from([1, 2, 3, 8]),
)
def test_lists_read_on_threads_answer_as_their_bytes(
    spots: list[tuple[int, str | bytes | None]], threads: int
) -> None:
    # Several threads read a long list's plain keys at once; any other item (text that is
    # not ASCII, a subclass, a None) sends its piece back to the thread that holds the GIL.
    keys: list[str | bytes | None] = [f"k{i}-{i * 7919 % 10007}" for i in range(PIECE * 3 + 1)]
    for i, item in spots:
        keys[i] = item
    null_key = b"\x00null"
    as_bytes = [
        null_key if k is None else k.encode() if isinstance(k, str) else bytes(k) for k in keys
    ]
    want = expected(as_bytes)
    for batch in (keys, tuple(keys)):
        np.testing.assert_array_equal(
            ks.key_hashes(batch, null_key=null_key, threads=threads), want
        )
        if all(k is not None for k in keys):
            np.testing.assert_array_equal(ks.key_hashes(batch, threads=threads), want)


@pytest.mark.parametrize("threads", [2, 3])
def test_a_list_read_on_threads_names_its_first_bad_item(threads: int) -> None:
    # Bad items in pieces that different threads read: the first in the list is named.
    keys: list[object] = [f"key-{i}" for i in range(PIECE * 8)]
    keys[PIECE * 6 + 1] = 7
    keys[PIECE * 3 + 2] = None
    keys[PIECE * 5] = "\udc80"
    with pytest.raises(ValueError, match=rf"keys\[{PIECE * 3 + 2}\] is None"):
        ks.key_hashes(keys, threads=threads)
    with pytest.raises(ValueError, match=rf"keys\[{PIECE * 5}\] is not valid text"):
        ks.key_hashes(keys, null_key="n", threads=threads)


def test_a_list_changed_while_it_is_read_is_refused_or_read_whole() -> None:
    # The GIL is released between pieces, so another thread may change the list: the call
    # reads the list it began with, or refuses one whose size changed meanwhile.
    keys = [f"k{i}" for i in range(PIECE * 8)]
    without = ks.key_hashes(pa.array(keys)).tolist()
    # The list as it was when the call began, with or without the changer's extra key.
    sizes = {len(without): without, len(without) + 1: [*without, ks.key_hash("extra")]}
    stop = threading.Event()

    def change() -> None:
        while not stop.is_set():
            keys.append("extra")
            keys.pop()

    changer = threading.Thread(target=change)
    changer.start()
    outcomes = set()
    try:
        for _ in range(20):
            try:
                got = ks.key_hashes(keys, threads=1)
            except ValueError as e:
                assert "keys changed size while they were read" in str(e)
                outcomes.add("refused")
            else:
                assert got.tolist() == sizes[len(got)]
                outcomes.add("read")
    finally:
        stop.set()
        changer.join(timeout=10)
    assert outcomes


@given(st.lists(list_items, min_size=SHORT - 3, max_size=SHORT + 3), st.data())
def test_short_and_long_batches_agree(keys: list[str | bytes | None], data: st.DataObject) -> None:
    # A list of at most SHORT keys takes the short path, an object array of the same keys the
    # batch path; either side of the edge, with and without a stand-in for nulls.
    at = data.draw(st.integers(0, len(keys)))
    keys = keys[:at]
    objects = np.empty(len(keys), dtype=object)
    objects[:] = keys
    table = ks.RoutingTable(
        [(0, ks.HashRange(0, 0x7FFF), [0x4000]), (1, ks.HashRange(0x8000, 0xFFFF), [])]
    )
    calls = {
        "key_hashes": lambda b: ks.key_hashes(b, null_key="n"),
        "split_hashes": lambda b: ks.split_hashes(b, null_key="n"),
        "sticky": lambda b: ks.routing.sticky_key_hashes(b, null_key="n"),
        "make_sticky": lambda b: ks.routing.make_sticky_key_hashes(
            b, ks.HashRange(5, 900), null_key="n"
        ),
        "route": lambda b: table.route_keys(b, null_key="n"),
        "route_hashes": lambda b: table.route_keys(b, null_key="n", with_hashes=True),
    }
    for name, call in calls.items():
        want = call(objects)
        for batch in (keys, tuple(keys)):
            got = call(batch)
            for g, w in zip(
                got if isinstance(got, tuple) else (got,),
                want if isinstance(want, tuple) else (want,),
                strict=True,
            ):
                assert g.dtype == w.dtype, name
                np.testing.assert_array_equal(g, w, err_msg=name)
    if None in keys:
        with pytest.raises(ValueError, match=rf"keys\[{keys.index(None)}\] is None"):
            ks.key_hashes(keys)


def test_threaded_batches_run_in_a_forked_child() -> None:
    # The parent's workers are not in a forked child (Spark forks its Python workers): the
    # child's batches must make their own instead of waiting on them.
    keys = pa.array([f"key-{i}" for i in range(300_000)])
    want = ks.key_hashes(keys, threads=1)
    assert (ks.key_hashes(keys, threads=2) == want).all()
    pid = os.fork()
    if pid == 0:
        ok = all((ks.key_hashes(keys, threads=t) == want).all() for t in (2, 3, 2))
        os._exit(0 if ok else 1)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("a forked child's threaded batch did not finish in 60 s")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(done[1]) == 0
