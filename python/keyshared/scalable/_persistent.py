"""Persistent (immutable, structurally shared) containers behind :class:`TopicLayout`, so that
an operation on a layout costs what it changes rather than the whole DAG's size.

Both are two-level: a short top level over chunks of at most ``2 * CHUNK`` entries. A change
copies the top level (``n / CHUNK`` references) and the one or two chunks it touches; every
other chunk is shared with the layout it came from. At 8,192 segments that is 128 top-level
references, against 8,192 for a copy of the whole map.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any, Generic, Protocol, TypeVar, overload

from keyshared._core import HashRange

#: Ids per chunk of a :class:`SegmentMap` (a power of two: an id's chunk is ``id >> BITS``).
BITS = 6
#: The usual length of a :class:`RangeList` chunk; a chunk is split at twice this.
CHUNK = 64


class HasRangeStart(Protocol):
    @property
    def hash_range(self) -> HashRange: ...


V = TypeVar("V")
S = TypeVar("S", bound=HasRangeStart)


class SegmentMap(Mapping[int, V], Generic[V]):
    """An immutable mapping of int ids to values, iterated in id order, whose
    :meth:`updated` shares every chunk it does not touch.

    Ids are chunked by ``id >> BITS``; the top level is a dict in chunk order and each chunk
    a dict in id order. New ids above every id present (how a layout's ids grow) keep both
    in order without sorting; any other insertion sorts the chunks it touches."""

    __slots__ = ("_chunks", "_len")

    _chunks: dict[int, dict[int, V]]
    _len: int

    def __init__(self, items: Iterable[tuple[int, V]] = ()) -> None:
        chunks: dict[int, dict[int, V]] = {}
        for key, value in sorted(items, key=lambda kv: kv[0]):
            chunks.setdefault(key >> BITS, {})[key] = value
        self._chunks = chunks
        self._len = sum(map(len, chunks.values()))

    @classmethod
    def _of(cls, chunks: dict[int, dict[int, V]], length: int) -> SegmentMap[V]:
        out: SegmentMap[V] = cls.__new__(cls)
        out._chunks = chunks
        out._len = length
        return out

    def __getitem__(self, key: int) -> V:
        try:
            return self._chunks[key >> BITS][key]
        except TypeError:
            # Not an int (a float, a str): never a key here, as a dict of int keys would say
            # for all but integral floats.
            raise KeyError(key) from None

    def get(self, key: int, default: Any = None) -> Any:
        try:
            return self._chunks[key >> BITS].get(key, default)
        except (KeyError, TypeError):
            return default

    def __contains__(self, key: object) -> bool:
        try:
            return key in self._chunks[key >> BITS]  # type: ignore[operator]
        except (KeyError, TypeError):
            return False

    def __iter__(self) -> Iterator[int]:
        return chain.from_iterable(self._chunks.values())

    def __len__(self) -> int:
        return self._len

    def values(self) -> _Values[V]:  # type: ignore[override]
        return _Values(self)

    def items(self) -> _Items[V]:  # type: ignore[override]
        return _Items(self)

    def __repr__(self) -> str:
        return f"SegmentMap({dict(self.items())!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (SegmentMap, (list(self.items()),))

    def updated(
        self, changed: Iterable[tuple[int, V]], removed: Iterable[int] = ()
    ) -> SegmentMap[V]:
        """A new map with ``changed`` set (replaced or added) and ``removed`` deleted (each
        must be present); this one is left as it was."""
        chunks = dict(self._chunks)
        copied: set[int] = set()
        length = self._len
        resort: set[int] = set()
        for key, value in changed:
            c = key >> BITS
            chunk = chunks.get(c)
            if chunk is None:
                if chunks and c < next(reversed(chunks)):
                    resort.add(-1)
                chunk = chunks[c] = {}
                copied.add(c)
            elif c not in copied:
                chunk = chunks[c] = dict(chunk)
                copied.add(c)
            if key not in chunk:
                length += 1
                if chunk and key < next(reversed(chunk)):
                    resort.add(c)
            chunk[key] = value
        for key in removed:
            c = key >> BITS
            chunk = chunks[c]
            if c not in copied:
                chunk = chunks[c] = dict(chunk)
                copied.add(c)
            del chunk[key]
            length -= 1
            if not chunk:
                del chunks[c]
        for c in resort:
            if c == -1:
                chunks = dict(sorted(chunks.items()))
            elif c in chunks:
                chunks[c] = dict(sorted(chunks[c].items()))
        return SegmentMap._of(chunks, length)


class _Values(Generic[V]):
    """The values of a :class:`SegmentMap` in id order (a view: iterate it, take its length,
    test membership)."""

    __slots__ = ("_map",)

    def __init__(self, m: SegmentMap[V]) -> None:
        self._map = m

    def __iter__(self) -> Iterator[V]:
        return chain.from_iterable(c.values() for c in self._map._chunks.values())

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, value: object) -> bool:
        return any(v is value or v == value for v in self)

    def __repr__(self) -> str:
        return f"values({list(self)!r})"


class _Items(Generic[V]):
    """The ``(id, value)`` pairs of a :class:`SegmentMap` in id order (a view)."""

    __slots__ = ("_map",)

    def __init__(self, m: SegmentMap[V]) -> None:
        self._map = m

    def __iter__(self) -> Iterator[tuple[int, V]]:
        return chain.from_iterable(c.items() for c in self._map._chunks.values())

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, tuple) or len(item) != 2:
            return False
        key, value = item
        return key in self._map and self._map[key] == value

    def __repr__(self) -> str:
        return f"items({list(self)!r})"


class RangeList(Sequence[S]):
    """An immutable sequence of segments in range order (ascending ``hash_range.start``):
    a layout's active segments. :meth:`replaced` swaps a run of neighbours for others (a
    split's two children for their parent, a merge's one for two) and shares every chunk
    it does not touch; :meth:`find` is a binary search by segment hash."""

    __slots__ = ("_chunks", "_firsts", "_len", "_starts")

    _chunks: tuple[tuple[S, ...], ...]
    _starts: tuple[tuple[int, ...], ...]
    _firsts: tuple[int, ...]
    _len: int

    def __init__(self, segments: Iterable[S] = ()) -> None:
        ordered = tuple(segments)
        chunks = tuple(ordered[i : i + CHUNK] for i in range(0, len(ordered), CHUNK))
        self._set(chunks, tuple(tuple(s.hash_range.start for s in c) for c in chunks))

    def _set(self, chunks: tuple[tuple[S, ...], ...], starts: tuple[tuple[int, ...], ...]) -> None:
        self._chunks = chunks
        self._starts = starts
        self._firsts = tuple(s[0] for s in starts)
        self._len = sum(map(len, chunks))

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> S: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[S, ...]: ...
    def __getitem__(self, index: int | slice) -> S | tuple[S, ...]:
        return self.to_tuple()[index]

    def __iter__(self) -> Iterator[S]:
        return chain.from_iterable(self._chunks)

    def to_tuple(self) -> tuple[S, ...]:
        return tuple(chain.from_iterable(self._chunks))

    def find(self, segment_hash: int) -> S:
        """The segment whose range holds ``segment_hash`` (the list tiles the ring)."""
        c = bisect.bisect_right(self._firsts, segment_hash) - 1
        return self._chunks[c][bisect.bisect_right(self._starts[c], segment_hash) - 1]

    def replaced(self, start: int, count: int, new: Sequence[S]) -> RangeList[S]:
        """A new list with the ``count`` neighbours from the one that starts at ``start``
        replaced by ``new`` (in range order); this one is left as it was."""
        c = bisect.bisect_right(self._firsts, start) - 1
        i = bisect.bisect_left(self._starts[c], start)
        # The run may go on into the next chunk (a merge of a chunk's last with the next
        # one's first): take as many whole chunks as it needs, then re-cut them.
        last = c
        held = len(self._chunks[c]) - i
        while held < count:
            last += 1
            held += len(self._chunks[last])
        joined = tuple(chain.from_iterable(self._chunks[c : last + 1]))
        edited = (*joined[:i], *new, *joined[i + count :])
        cut = _cut(edited)
        out: RangeList[S] = RangeList.__new__(RangeList)
        out._set(
            self._chunks[:c] + cut + self._chunks[last + 1 :],
            self._starts[:c]
            + tuple(tuple(s.hash_range.start for s in k) for k in cut)
            + self._starts[last + 1 :],
        )
        return out


def _cut(segments: tuple[S, ...]) -> tuple[tuple[S, ...], ...]:
    """One chunk, or halves of about CHUNK each once it reaches 2 * CHUNK (none if empty)."""
    n = len(segments)
    if n == 0:
        return ()
    if n < 2 * CHUNK:
        return (segments,)
    parts = n // CHUNK
    size = -(-n // parts)
    return tuple(segments[i : i + size] for i in range(0, n, size))


__all__: list[str] = []
