"""Coverage-guided fuzzing of the key readers (atheris): Python lists and tuples, NumPy
fixed-width, object and masked arrays in either byte order and any stride, and Arrow
arrays of every supported layout, sliced and chunked. These readers walk raw memory
(list item pointers, NumPy strides, Arrow offsets) in native code.

Every batch either hashes to exactly what ``key_hash`` gives key by key, through every
batch entry point, or is refused with a ValueError or TypeError; anything else (a panic,
a wrong hash, another exception) is a finding. The same holds for the other systems'
partitioners: ``partitions`` of a batch is ``partition`` key by key.

    python fuzz/fuzz_keys.py -runs=2000          # a short run
    python fuzz/fuzz_keys.py -max_total_time=600 corpus/keys
"""

from __future__ import annotations

import sys
from typing import Any

import atheris
import numpy as np
import pyarrow as pa

with atheris.instrument_imports(include=["keyshared"]):
    import keyshared as ks

LAYOUT = ks.TopicLayout.initial(3, bucket_budget=12)
STATE = ks.dispatch.KeySharedConsumerState()
STATE.add_consumer(1, key_filters=["a*"])
STATE.add_consumer(2)
NULL_KEYS: list[str | bytes | None] = [None, "", "null", b"\xff"]


def _key(fdp: atheris.FuzzedDataProvider, kind: int) -> Any:
    """One key: text (sometimes with a lone surrogate), bytes, None or a wrong object."""
    if kind == 0:
        return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 12))
    if kind == 1:
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 12))
    if kind == 2:
        return None
    return [1, 2.5, True, bytearray(b"x")][fdp.ConsumeIntInRange(0, 3)]


def _values(fdp: atheris.FuzzedDataProvider, kinds: list[int]) -> list[Any]:
    count = fdp.ConsumeIntInRange(0, 40)
    return [_key(fdp, kinds[fdp.ConsumeIntInRange(0, len(kinds) - 1)]) for _ in range(count)]


def _as_bytes(key: Any) -> bytes | None:
    """The key's bytes; None for a null (or a wrong object, refused by type first)."""
    if isinstance(key, str):
        return key.encode("utf-8")
    return key if isinstance(key, bytes) else None


def _batch(fdp: atheris.FuzzedDataProvider) -> tuple[Any, list[Any]]:
    """A batch in one of the supported containers, and the keys it holds (None: null)."""
    shape = fdp.ConsumeIntInRange(0, 7)
    if shape <= 1:
        values = _values(fdp, [0, 0, 1, 2, 3])
        return (values if shape == 0 else tuple(values)), values
    if shape == 2:
        text = [k.rstrip("\0") for k in _values(fdp, [0])]
        order = "<>="[fdp.ConsumeIntInRange(0, 2)]
        width = max([1, *map(len, text)]) + fdp.ConsumeIntInRange(0, 3)
        try:
            array = np.array(text, dtype=f"{order}U{width}")
        except UnicodeEncodeError:
            return text, text
        step = fdp.ConsumeIntInRange(1, 3) * (-1 if fdp.ConsumeBool() else 1)
        return array[::step], text[::step]
    if shape == 3:
        raw = [k.rstrip(b"\0") for k in _values(fdp, [1])]
        array = np.array(raw, dtype=f"S{max([1, *map(len, raw)])}")
        return array[::2], raw[::2]
    if shape == 4:
        values = _values(fdp, [0, 1, 2, 3])
        array = np.empty(len(values), dtype=object)
        array[:] = values
        return array, values
    if shape == 5:
        text = [k.rstrip("\0") for k in _values(fdp, [0])]
        mask = [fdp.ConsumeBool() for _ in text]
        try:
            array = np.ma.array(np.array(text, dtype=f"U{max([1, *map(len, text)])}"), mask=mask)
        except UnicodeEncodeError:
            return text, text
        return array, [None if m else k for k, m in zip(text, mask, strict=True)]
    kinds = [0, 2] if fdp.ConsumeBool() else [1, 2]
    values = _values(fdp, kinds)
    types = [pa.string(), pa.large_string(), pa.string_view()] if kinds[0] == 0 else []
    types += [pa.binary(), pa.large_binary(), pa.binary_view()]
    try:
        array = pa.array(values, type=types[fdp.ConsumeIntInRange(0, len(types) - 1)])
    except (pa.ArrowException, UnicodeEncodeError):
        return values, values
    if shape == 6:
        start = fdp.ConsumeIntInRange(0, len(values))
        return array.slice(start), values[start:]
    cut = fdp.ConsumeIntInRange(0, len(values))
    return pa.chunked_array([array[:cut], array[cut:]], type=array.type), values


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    batch, keys = _batch(fdp)
    check_partitions(fdp, batch, keys)
    null_key = NULL_KEYS[fdp.ConsumeIntInRange(0, len(NULL_KEYS) - 1)]
    threads = fdp.ConsumeIntInRange(1, 3)
    try:
        expected_bytes = [_as_bytes(k) for k in keys]
        valid = all(k is None or isinstance(k, str | bytes) for k in keys) and all(
            b is not None or null_key is not None for b in expected_bytes
        )
    except UnicodeEncodeError:
        valid = False
    try:
        hashes = ks.key_hashes(batch, null_key=null_key, threads=threads)
    except (ValueError, TypeError):
        if valid:
            raise
        return
    assert valid, f"accepted an invalid batch {keys!r}"
    stand_in = _as_bytes(null_key) or b""
    expected = [ks.key_hash(stand_in if b is None else b) for b in expected_bytes]
    assert hashes.tolist() == expected, (keys, hashes)
    seg, bucket = ks.split_hashes(batch, null_key=null_key, threads=threads)
    assert seg.tolist() == [h >> 16 for h in expected]
    assert bucket.tolist() == [h & 0xFFFF for h in expected]
    ids, buckets = LAYOUT.routing_table.route_keys(batch, null_key=null_key)
    assert list(zip(ids.tolist(), buckets.tolist(), strict=True)) == [
        LAYOUT.routing_table.route_hash(h) for h in expected
    ]
    if null_key is None or all(b is not None for b in expected_bytes):
        chosen, found = STATE.select_consumers(batch)
        assert [c if f else None for c, f in zip(chosen.tolist(), found.tolist(), strict=True)] == [
            STATE.select_consumer(b) for b in expected_bytes
        ]


PARTITIONERS = list(ks.Partitioner)


def check_partitions(fdp: atheris.FuzzedDataProvider, batch: Any, keys: list[Any]) -> None:
    """``partitions`` of the batch is ``partition`` key by key (None: a null key), or a
    refusal when one key is refused or the batch mixes int keys with str/bytes ones."""
    partitioner = PARTITIONERS[fdp.ConsumeIntInRange(0, len(PARTITIONERS) - 1)]
    n = fdp.ConsumeIntInRange(1, 2**31 - 1)
    try:
        singles = [ks.partition(k, n, partitioner) for k in keys]
        present = [k for k in keys if k is not None]
        mixed = len({isinstance(k, int) for k in present}) > 1
    except (ValueError, TypeError):
        singles, mixed = None, False
    try:
        got = ks.partitions(batch, n, partitioner)
    except (ValueError, TypeError):
        assert singles is None or mixed, f"refused a valid batch {keys!r}"
        return
    assert singles is not None and not mixed, f"accepted an invalid batch {keys!r}"
    assert got.tolist() == [-1 if p is None else p for p in singles], (keys, got)


def main() -> None:
    # The harness's own branches (which container, which call, refused or not) guide the
    # search; the native kernels are not instrumented.
    for function in list(globals().values()):
        if getattr(function, "__module__", None) == __name__ and hasattr(function, "__code__"):
            atheris.instrument_func(function)
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
