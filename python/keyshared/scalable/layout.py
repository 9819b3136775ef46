"""A scalable topic's segment layout (PIP-468 / PIP-486): an immutable DAG of segments.

Each segment owns a range of the 16-bit segment ring (``key_hash >> 16``) and divides the
16-bit bucket ring (hashB, ``key_hash & 0xFFFF``) into buckets by its ascending split points.
Routing takes ``pulsar_version``: on ``"5.0.0-M1"``, which predates PIP-486, the segment
ring is ``key_hash & 0xFFFF`` and every key is in bucket 0 (M1 has no entry buckets).
Invariants of every :class:`TopicLayout`:

* the active segments tile ``[0x0000, 0xFFFF]`` exactly, without gaps or overlaps;
* segment ids are unique and below ``next_segment_id``; a child's id is above its parents';
* parent and child links are mutual, and an active segment has no children;
* a segment's bucket splits never change: a new bucket count is a new segment (rollover).

Every operation returns a new layout with ``epoch + 1`` and raises ValueError when it cannot
apply; the segments it creates record that epoch as ``created_at_epoch``, the ones it seals
as ``sealed_at_epoch``. Times are epoch milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property
from itertools import pairwise
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
import numpy.typing as npt

from keyshared._checks import check_instance, check_int, check_mapping
from keyshared._core import (
    RING_SIZE,
    HashRange,
    RoutingTable,
    _checked_splits,
    bucket_ranges,
    buckets_for_budget,
    canonical_bucket_hash,
    equal_width_splits,
)
from keyshared._reader import json_form, read, read_list
from keyshared.errors import ArgumentTypeError, InvalidArgument, RefusedChange
from keyshared.routing.router import HashingScheme, check_scheme
from keyshared.scalable._persistent import RangeList, SegmentMap
from keyshared.versions import SCALABLE_TOPICS, segment_half


class SegmentState(StrEnum):
    """Pulsar's ``SegmentState``: a segment takes writes while active, and only drains once
    sealed."""

    ACTIVE = "ACTIVE"
    SEALED = "SEALED"


# The members as module names: looked up on the enum class, a member takes ten times as long
# (a loop over a layout's segments asks for one per segment).
_ACTIVE, _SEALED = SegmentState.ACTIVE, SegmentState.SEALED


def format_descriptor(hash_range: HashRange, segment_id: int) -> str:
    """Pulsar's segment descriptor, ``"{start:04x}-{end:04x}-{segment_id}"``, e.g.
    ``"0000-7fff-1"``: the last part of a ``segment://`` topic name."""
    hash_range = check_instance("hash_range", hash_range, HashRange)
    return f"{hash_range.to_hex()}-{check_int('segment_id', segment_id, minimum=0)}"


def parse_descriptor(descriptor: str) -> tuple[HashRange, int]:
    """``(hash_range, segment_id)`` of a descriptor such as ``"0000-7fff-1"``."""
    if not isinstance(descriptor, str):
        raise ArgumentTypeError(
            f"descriptor must be a str, got {type(descriptor).__name__}", argument="descriptor"
        )
    text, sep, seg = descriptor.rpartition("-")
    if not sep or not seg.isdigit() or not seg.isascii():
        raise InvalidArgument(
            f'descriptor {descriptor!r} is not like "0000-7fff-1"', argument="descriptor"
        )
    return HashRange.from_hex(text), int(seg)


def _check_splits(name: str, splits: Iterable[object]) -> tuple[int, ...]:
    """Split points checked by the kernel's rules, its errors naming them ``name``."""
    return tuple(_checked_splits(splits, name))  # type: ignore[arg-type]


#: Segment ids are routed as int64 (``RoutingTable``), so larger ones are refused up front.
MAX_SEGMENT_ID = 2**63 - 1


def _check_ids(name: str, ids: Iterable[object]) -> tuple[int, ...]:
    out = tuple(
        check_int(f"{name}[{i}]", v, minimum=0, maximum=MAX_SEGMENT_ID) for i, v in enumerate(ids)
    )
    if len(set(out)) != len(out):
        raise InvalidArgument(f"{name} has a repeated id: {list(out)}", argument=name)
    return out


@dataclass(frozen=True)
class Segment:
    """One node of the layout DAG (Pulsar's ``SegmentInfo``).

    ``bucket_splits`` are the ascending starts of buckets 1..N-1 on the hashB ring (empty:
    one bucket). ``created_at_ms`` and ``sealed_at_ms`` are epoch ms; ``created_at_epoch``
    and ``sealed_at_epoch`` are the layout epochs (DAG generations) of the same events. Both
    sealed values are -1 exactly while the segment is active. ``legacy_topic_name`` names
    the ``persistent://`` topic a *legacy* segment wraps (a partition of a migrated topic);
    it is None for the controller's own segments. ``legacy_hashing_scheme`` records how that
    topic's v4 producers routed keys (None: not recorded), for the segment router and the
    migration audit.
    """

    segment_id: int
    hash_range: HashRange = field(metadata=json_form(read=lambda p, v: _hash_range(p, v)))
    state: SegmentState = field(
        default=SegmentState.ACTIVE, metadata=json_form(read=lambda p, v: _state(p, v))
    )
    parent_ids: tuple[int, ...] = ()
    child_ids: tuple[int, ...] = ()
    bucket_splits: tuple[int, ...] = ()
    created_at_ms: int = 0
    sealed_at_ms: int = -1
    created_at_epoch: int = 0
    # An older layout's sealed segment may leave its epoch out: the one it was created in.
    sealed_at_epoch: int = field(
        default=-1, metadata=json_form(missing=lambda read: _default_sealed_epoch(read))
    )
    legacy_topic_name: str | None = None
    legacy_hashing_scheme: HashingScheme | None = field(
        default=None, metadata=json_form(read=lambda p, v: _hashing_scheme(p, v))
    )

    def __post_init__(self) -> None:
        check_int("segment_id", self.segment_id, minimum=0, maximum=MAX_SEGMENT_ID)
        if not isinstance(self.hash_range, HashRange):
            raise ArgumentTypeError(
                f"hash_range must be a HashRange, got {type(self.hash_range).__name__}",
                argument="hash_range",
            )
        object.__setattr__(self, "state", SegmentState(self.state))
        object.__setattr__(self, "parent_ids", _check_ids("parent_ids", self.parent_ids))
        object.__setattr__(self, "child_ids", _check_ids("child_ids", self.child_ids))
        object.__setattr__(
            self, "bucket_splits", _check_splits("bucket_splits", self.bucket_splits)
        )
        check_int("created_at_ms", self.created_at_ms, minimum=0)
        created_epoch = check_int("created_at_epoch", self.created_at_epoch, minimum=0)
        if self.state is _ACTIVE:
            check_int("sealed_at_ms", self.sealed_at_ms, minimum=-1, maximum=-1)
            check_int("sealed_at_epoch", self.sealed_at_epoch, minimum=-1, maximum=-1)
        else:
            check_int("sealed_at_ms", self.sealed_at_ms, minimum=0)
            check_int("sealed_at_epoch", self.sealed_at_epoch, minimum=created_epoch)
        if self.legacy_topic_name is not None and not isinstance(self.legacy_topic_name, str):
            kind = type(self.legacy_topic_name).__name__
            raise ArgumentTypeError(
                f"legacy_topic_name must be a str or None, got {kind}", argument="legacy_topic_name"
            )
        check_scheme("legacy_hashing_scheme", self.legacy_hashing_scheme)

    def __getstate__(self) -> dict[str, Any]:
        # The fields alone: the cached values (_descriptor, _memo) are made again on demand.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    @property
    def is_active(self) -> bool:
        return self.state is _ACTIVE

    @property
    def is_sealed(self) -> bool:
        return self.state is _SEALED

    @property
    def is_root(self) -> bool:
        """No parents: an initial segment (or one whose parents were pruned)."""
        return not self.parent_ids

    @property
    def is_leaf(self) -> bool:
        """No children: every active segment, and a sealed one whose children were pruned."""
        return not self.child_ids

    @property
    def is_legacy(self) -> bool:
        """Wraps an existing ``persistent://`` topic (an empty name does not count)."""
        return bool(self.legacy_topic_name)

    @property
    def bucket_count(self) -> int:
        """N, the number of buckets: one more than the split points."""
        return len(self.bucket_splits) + 1

    @property
    def descriptor(self) -> str:
        """``"0000-7fff-1"``: hash range and id, as in the segment's topic name."""
        return self._descriptor

    @cached_property
    def _descriptor(self) -> str:
        # Made once per segment (its parts never change), for every assignment that names it.
        return f"{self.hash_range.to_hex()}-{self.segment_id}"

    @cached_property
    def _memo(self) -> dict[object, Any]:
        """Values other modules derive from the segment alone, made once per segment (it
        never changes, and layouts share it until an operation replaces it): by key, e.g. the
        assignment record of the whole segment under one topic (coordinator.py)."""
        return {}

    def bucket_ranges(self) -> list[HashRange]:
        """The hashB range of each bucket, in bucket order."""
        return bucket_ranges(self.bucket_splits)

    def canonical_bucket_hash(self, bucket: int) -> int:
        """The one hash standing for bucket ``bucket`` in per-hash structures (PIP-379)."""
        check_int("bucket", bucket, minimum=0, maximum=len(self.bucket_splits))
        return canonical_bucket_hash(bucket, self.bucket_splits)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back."""
        return {
            "segment_id": self.segment_id,
            "hash_range": self.hash_range.to_hex(),
            "state": self.state.value,
            "parent_ids": list(self.parent_ids),
            "child_ids": list(self.child_ids),
            "bucket_splits": list(self.bucket_splits),
            "created_at_ms": self.created_at_ms,
            "sealed_at_ms": self.sealed_at_ms,
            "created_at_epoch": self.created_at_epoch,
            "sealed_at_epoch": self.sealed_at_epoch,
            "legacy_topic_name": self.legacy_topic_name,
            # Left out when not recorded, so that layouts without one read as before.
            **_scheme_entry(self.legacy_hashing_scheme),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], name: str = "segment") -> Segment:
        """The segment of a :meth:`to_dict` dict; errors name the field (``name.field``)."""
        return read(cls, data, name)


def _hash_range(path: str, text: object) -> HashRange:
    if not isinstance(text, str):
        raise ArgumentTypeError(f'{path} must be a str like "0000-7fff"', argument=path)
    try:
        return HashRange.from_hex(text)
    except ValueError as e:
        raise InvalidArgument(f"{path}: {e}", argument=path) from None


def _state(path: str, value: object) -> SegmentState:
    name = str(value).upper()
    if name not in SegmentState.__members__:
        raise InvalidArgument(f"{path} must be ACTIVE or SEALED, got {value!r}", argument=path)
    return SegmentState(name)


def _hashing_scheme(path: str, value: object) -> HashingScheme | None:
    if value is None:
        return None
    try:
        return HashingScheme(value)
    except ValueError:
        names = [s.value for s in HashingScheme]
        raise InvalidArgument(
            f"{path} must be one of {names} or null, got {value!r}", argument=path
        ) from None


def _scheme_entry(scheme: HashingScheme | None) -> dict[str, str]:
    return {} if scheme is None else {"legacy_hashing_scheme": scheme.value}


def _default_sealed_epoch(read: Mapping[str, Any]) -> object:
    active = read.get("state", SegmentState.ACTIVE) is SegmentState.ACTIVE
    return -1 if active else read.get("created_at_epoch", 0)


def _segments_by_id(path: str, items: object) -> dict[int, Segment]:
    segments = read_list(path, items, lambda p, v: read(Segment, v, p))
    by_id = {s.segment_id: s for s in segments}
    if len(by_id) != len(segments):
        raise InvalidArgument(f"{path} repeats a segment id", argument=path)
    return by_id


def equal_width_ranges(n: int) -> list[HashRange]:
    """``n`` ranges of ``65536 // n`` hashes tiling the segment ring, the last one ending at
    0xFFFF: the active segments of a new topic."""
    width = RING_SIZE // n
    return [HashRange(i * width, 0xFFFF if i == n - 1 else (i + 1) * width - 1) for i in range(n)]


@dataclass(frozen=True)
class TopicLayout:
    """Pulsar's ``SegmentLayout``: the segment DAG of one scalable topic, immutable.

    ``segments`` maps every segment id (active and sealed) to its :class:`Segment`, in id
    order. Build one with :meth:`initial`, or from its parts (validated), or from JSON.
    """

    epoch: int
    next_segment_id: int
    segments: Mapping[int, Segment] = field(hash=False, metadata=json_form(read=_segments_by_id))

    if TYPE_CHECKING:
        # Kept beside the fields, derived from them (not fields: no part of equality or JSON).
        #: The active segments in range order.
        _ranges: ClassVar[RangeList[Segment]]
        #: Per segment id, the merges among the segment and its ancestors.
        _merges: ClassVar[SegmentMap[frozenset[int]]]

    def __post_init__(self) -> None:
        check_int("epoch", self.epoch, minimum=0)
        check_int("next_segment_id", self.next_segment_id, minimum=0, maximum=MAX_SEGMENT_ID + 1)
        check_mapping("segments", self.segments)
        by_id: dict[int, Segment] = {}
        for key, seg in self.segments.items():
            if not isinstance(seg, Segment):
                raise ArgumentTypeError(
                    f"segments[{key!r}] must be a Segment, got {type(seg).__name__}",
                    argument="segments",
                )
            if key != seg.segment_id:
                raise InvalidArgument(
                    f"segments[{key!r}] holds segment {seg.segment_id}", argument="segments"
                )
            by_id[seg.segment_id] = seg
        _check_dag(by_id, self.next_segment_id, self.epoch)
        active = sorted((s for s in by_id.values() if s.is_active), key=_range_start)
        _check_tiling(active)
        # Built whole once here (a layout read or made from its parts); every operation then
        # derives them from its input's by the change alone (_derive).
        object.__setattr__(self, "segments", SegmentMap(by_id.items()))
        object.__setattr__(self, "_ranges", RangeList(active))
        object.__setattr__(self, "_merges", _merge_sets(self.segments.values()))

    def __getstate__(self) -> dict[str, Any]:
        # Caches are made again on demand; routing tables are most of a pickle when kept.
        return {k: v for k, v in self.__dict__.items() if k not in _CACHES}

    def validate(self) -> TopicLayout:
        """Checks the whole DAG and the active tiling, as a layout read from JSON or built
        from its parts is checked, and that what operations keep up to date (the active
        segments, their routing order, the merge depths) is what the DAG gives; returns the
        layout. Operations check only what they change; this is the full check."""
        by_id = dict(self.segments.items())
        _check_dag(by_id, self.next_segment_id, self.epoch)
        active = sorted((s for s in by_id.values() if s.is_active), key=_range_start)
        _check_tiling(active)
        if list(self._ranges) != active:
            raise AssertionError("the layout's active segments do not match its DAG")
        if dict(self._merges.items()) != dict(_merge_sets(by_id.values()).items()):
            raise AssertionError("the layout's merge depths do not match its DAG")
        return self

    @classmethod
    def initial(cls, num_segments: int, bucket_budget: int = 4, now_ms: int = 0) -> TopicLayout:
        """``num_segments`` segments (ids 0..n-1) of ``65536 // n`` hashes each, the last one
        ending at 0xFFFF, each with ``buckets_for_budget(bucket_budget, n)`` equal-width
        buckets; epoch 0, next id n."""
        n = check_int("num_segments", num_segments, minimum=1, maximum=RING_SIZE)
        check_int("bucket_budget", bucket_budget, minimum=1)
        check_int("now_ms", now_ms, minimum=0)
        buckets = buckets_for_budget(bucket_budget, n)
        if buckets > RING_SIZE:
            raise InvalidArgument(
                f"bucket_budget gives {buckets} buckets per segment, above {RING_SIZE}",
                argument="bucket_budget",
            )
        splits = tuple(equal_width_splits(buckets))
        segments = {
            i: Segment(segment_id=i, hash_range=r, bucket_splits=splits, created_at_ms=now_ms)
            for i, r in enumerate(equal_width_ranges(n))
        }
        return cls(epoch=0, next_segment_id=n, segments=segments)

    # --- reading ----------------------------------------------------------------------

    def active_segments(self) -> tuple[Segment, ...]:
        """The active segments in range order (they tile the ring)."""
        return self._active

    @property
    def _map(self) -> SegmentMap[Segment]:
        return cast(SegmentMap[Segment], self.segments)

    @cached_property
    def _active(self) -> tuple[Segment, ...]:
        return self._ranges.to_tuple()

    @cached_property
    def _memo(self) -> dict[object, Any]:
        """Values other modules derive from the layout alone, made once per layout (it never
        changes): by key, e.g. the assignment records of its segments under one topic
        (coordinator.py). Not pickled, and not handed to the layouts an operation makes."""
        return {}

    @cached_property
    def _in_range_order(self) -> tuple[Segment, ...]:
        """Every segment, active and sealed, by (hash range, id): the order assignments deal
        segments in. Sorted once per layout, when first asked for."""
        return tuple(sorted(self.segments.values(), key=_RANGE_THEN_ID))

    @property
    def total_bucket_count(self) -> int:
        """The sum of the active segments' bucket counts: the consumer parallelism on offer."""
        return sum(s.bucket_count for s in self._active)

    def segment(self, segment_id: int) -> Segment:
        """The segment with this id; ValueError naming the id if there is none."""
        if isinstance(segment_id, bool):
            # True == 1 as a dict key, but a bool is never meant as a segment id.
            raise ArgumentTypeError("segment_id must be an int, got bool", argument="segment_id")
        try:
            return self.segments[segment_id]
        except (KeyError, TypeError):
            raise InvalidArgument(
                f"segment {segment_id!r} is not in the layout", argument="segment_id"
            ) from None

    def find_active_segment(self, segment_hash: int) -> Segment:
        """The active segment whose range holds ``segment_hash`` (in ``[0, 0xFFFF]``)."""
        h = check_int("segment_hash", segment_hash, minimum=0, maximum=0xFFFF)
        return self._ranges.find(h)

    def merge_depth(self, segment_id: int) -> int:
        """How many segments with two or more parents (merges) lie among the segment and its
        ancestors; splits and rollovers do not count."""
        return len(self._merges[self.segment(segment_id).segment_id])

    def children(self, segment_id: int) -> tuple[Segment, ...]:
        """The direct children of a segment, in the order it lists them."""
        return tuple(self.segments[c] for c in self.segment(segment_id).child_ids)

    def parents(self, segment_id: int) -> tuple[Segment, ...]:
        """The direct parents of a segment, in the order it lists them (none for a root)."""
        return tuple(self.segments[p] for p in self.segment(segment_id).parent_ids)

    def lineage(self, segment_id: int) -> tuple[Segment, ...]:
        """Pulsar's ``getLineage``: the segment's ancestors (each parent after its own
        ancestors), the segment, then its descendants (each child before its own).

        Pulsar lists an ancestor shared by two parents (a split followed by a merge) once
        per path; here every segment appears once, at its first place."""
        root = self.segment(segment_id)
        ordered: dict[int, Segment] = {}
        # Iterative depth-first walks: a long-lived topic's DAG can be deeper than Python's
        # recursion limit. A segment already listed is not walked again.
        stack = [(root, iter(root.parent_ids))]
        while stack:
            seg, parents = stack[-1]
            pid = next(parents, None)
            if pid is None:
                stack.pop()
                if stack:
                    ordered.setdefault(seg.segment_id, seg)
            elif pid not in ordered:
                parent = self.segments[pid]
                stack.append((parent, iter(parent.parent_ids)))
        ordered.setdefault(root.segment_id, root)
        walk = [iter(root.child_ids)]
        while walk:
            cid = next(walk[-1], None)
            if cid is None:
                walk.pop()
            elif cid not in ordered:
                child = self.segments[cid]
                ordered[cid] = child
                walk.append(iter(child.child_ids))
        return tuple(ordered.values())

    # --- routing ----------------------------------------------------------------------

    @property
    def routing_table(self) -> RoutingTable:
        """The native one-pass router of the active segments under Pulsar master's rule,
        built once per layout."""
        return self.routing_table_for(SCALABLE_TOPICS.default)

    def routing_table_for(self, pulsar_version: str) -> RoutingTable:
        """The native one-pass router of the active segments under ``pulsar_version``'s
        rule (``"master"`` or ``"5.0.0-M1"``), built once per layout and release."""
        version = SCALABLE_TOPICS.check(pulsar_version)
        table = self._routing_tables.get(version)
        if table is None:
            # The table of the layout this one was made from, if it had one, with the
            # operation's change made (_apply); else every active segment read.
            change: _RoutingChange | None = self.__dict__.get("_routing_change")
            if change is not None and (base := change[0].get(version)) is not None:
                _, start, count, created = change
                table = base.replaced(start, count, _routes(created))
            else:
                table = RoutingTable(_routes(self._active), version)
            table = self._routing_tables.setdefault(version, table)
        return table

    @cached_property
    def _routing_tables(self) -> dict[str, RoutingTable]:
        return {}

    def route(
        self, key: str | bytes, *, pulsar_version: str = SCALABLE_TOPICS.default
    ) -> tuple[int, int]:
        """``(segment id, bucket index)`` of one key under ``pulsar_version``'s rule."""
        return self.routing_table_for(pulsar_version).route(key)

    def route_keys(
        self,
        keys: Any,
        *,
        null_key: str | bytes | None = None,
        threads: int | None = None,
        pulsar_version: str = SCALABLE_TOPICS.default,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """Segment ids (int64) and bucket indices (int32) of a batch of keys (a list, NumPy
        array or Arrow array) under ``pulsar_version``'s rule, in one native pass that
        releases the GIL."""
        table = self.routing_table_for(pulsar_version)
        return table.route_keys(keys, null_key=null_key, threads=threads)

    def route_hashes(
        self,
        key_hashes: npt.NDArray[np.uint32],
        *,
        threads: int | None = None,
        pulsar_version: str = SCALABLE_TOPICS.default,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
        """As :meth:`route_keys`, from 32-bit key hashes (uint32)."""
        return self.routing_table_for(pulsar_version).route_hashes(key_hashes, threads=threads)

    # --- operations -------------------------------------------------------------------

    def split_segment(self, segment_id: int, now_ms: int) -> TopicLayout:
        """Seals an active segment and gives the halves of its range to two children (the
        next two ids), each with ``max(1, N // 2)`` equal-width buckets."""
        seg = self._active_segment(segment_id, "split", "segment_id")
        check_int("now_ms", now_ms, minimum=0)
        try:
            low, high = seg.hash_range.split()
        except ValueError as e:
            raise RefusedChange(
                f"cannot split segment {seg.segment_id}: {e}", argument="segment_id"
            ) from None
        first, epoch = self.next_segment_id, self.epoch + 1
        splits = tuple(equal_width_splits(max(1, seg.bucket_count // 2)))
        children = [
            Segment(
                cid,
                r,
                parent_ids=(seg.segment_id,),
                bucket_splits=splits,
                created_at_ms=now_ms,
                created_at_epoch=epoch,
            )
            for cid, r in ((first, low), (first + 1, high))
        ]
        sealed = _sealed(seg, now_ms, epoch, (first, first + 1))
        return self._apply([sealed], children, first + 2)

    def merge_segments(
        self, segment_id_1: int, segment_id_2: int, now_ms: int, max_buckets: int | None = None
    ) -> TopicLayout:
        """Seals two adjacent active segments and creates one (the next id) with the union
        range, both as parents, and ``N1 + N2`` equal-width buckets, clamped to
        ``max_buckets`` when given (and always to the ring's 65,536)."""
        a = self._active_segment(segment_id_1, "merge", "segment_id_1")
        b = self._active_segment(segment_id_2, "merge", "segment_id_2")
        check_int("now_ms", now_ms, minimum=0)
        if a.segment_id == b.segment_id:
            raise RefusedChange(f"cannot merge segment {a.segment_id} with itself", argument=None)
        if not a.hash_range.is_adjacent_to(b.hash_range):
            raise RefusedChange(
                f"segments {a.segment_id} ({a.hash_range}) and {b.segment_id} ({b.hash_range})"
                " are not adjacent",
                kind="not_adjacent",
                argument=None,
            )
        count = min(a.bucket_count + b.bucket_count, RING_SIZE)
        if max_buckets is not None:
            count = min(count, check_int("max_buckets", max_buckets, minimum=1))
        new_id, epoch = self.next_segment_id, self.epoch + 1
        merged = Segment(
            new_id,
            a.hash_range.merge(b.hash_range),
            parent_ids=(a.segment_id, b.segment_id),
            bucket_splits=tuple(equal_width_splits(count)),
            created_at_ms=now_ms,
            created_at_epoch=epoch,
        )
        sealed = [_sealed(s, now_ms, epoch, (new_id,)) for s in (a, b)]
        return self._apply(sealed, [merged], new_id + 1)

    def rebucket_segment(
        self,
        segment_id: int,
        bucket_count: int,
        now_ms: int,
        *,
        bucket_splits: Sequence[int] | None = None,
    ) -> TopicLayout:
        """PIP-486's rebucket rollover ("no-op split"): seals the segment and creates one
        successor (the next id) with the same range and ``bucket_count`` buckets, equal-width
        unless ``bucket_splits`` gives the ``bucket_count - 1`` split points (for example
        traffic-balanced ones). Refused when the buckets would not change."""
        seg = self._active_segment(segment_id, "rebucket", "segment_id")
        n = check_int("bucket_count", bucket_count, minimum=1, maximum=RING_SIZE)
        check_int("now_ms", now_ms, minimum=0)
        if bucket_splits is None:
            if n == seg.bucket_count:
                raise RefusedChange(
                    f"segment {seg.segment_id} already has {n} bucket(s)", argument="bucket_count"
                )
            splits = tuple(equal_width_splits(n))
        else:
            splits = _check_splits("bucket_splits", bucket_splits)
            if len(splits) != n - 1:
                raise InvalidArgument(
                    f"bucket_splits has {len(splits)} split point(s); {n} buckets need {n - 1}",
                    argument="bucket_splits",
                )
            if splits == seg.bucket_splits:
                raise RefusedChange(
                    f"segment {seg.segment_id} already has these bucket splits",
                    argument="bucket_splits",
                )
        new_id, epoch = self.next_segment_id, self.epoch + 1
        successor = Segment(
            new_id,
            seg.hash_range,
            parent_ids=(seg.segment_id,),
            bucket_splits=splits,
            created_at_ms=now_ms,
            created_at_epoch=epoch,
        )
        return self._apply([_sealed(seg, now_ms, epoch, (new_id,))], [successor], new_id + 1)

    def prune_segment(self, segment_id: int) -> TopicLayout:
        """Removes a sealed segment from the DAG (its data has expired), unlinking it from
        its parents and children; epoch + 1."""
        seg = self.segment(segment_id)
        if seg.is_active:
            raise RefusedChange(
                f"cannot prune segment {seg.segment_id}: it is active", argument="segment_id"
            )
        changed = [
            replace(child, parent_ids=tuple(p for p in child.parent_ids if p != seg.segment_id))
            for child in map(self.segments.__getitem__, seg.child_ids)
        ] + [
            replace(parent, child_ids=tuple(c for c in parent.child_ids if c != seg.segment_id))
            for parent in map(self.segments.__getitem__, seg.parent_ids)
        ]
        segments = self._map.updated(((s.segment_id, s) for s in changed), (seg.segment_id,))
        ranges = self._ranges
        for s in changed:
            if s.is_active:
                ranges = ranges.replaced(s.hash_range.start, 1, (s,))
        out: TopicLayout = object.__new__(TopicLayout)
        out.__dict__.update(
            epoch=self.epoch + 1,
            next_segment_id=self.next_segment_id,
            segments=segments,
            _ranges=ranges,
            # The descendants' ancestries lose the pruned segment's: counted again.
            _merges=_merge_sets(segments.values()),
            # The active segments route as before (ids, ranges and buckets unchanged): the
            # tables are the same ones, built or yet to be built for either layout.
            _routing_tables=self._routing_tables,
        )
        if _FULL_CHECKS:
            out.validate()
        return out

    def _active_segment(self, segment_id: int, action: str, name: str) -> Segment:
        """The active segment ``segment_id``, which the caller's argument ``name`` gave, for
        ``action``."""
        seg = self.segment(segment_id)
        if not seg.is_active:
            raise RefusedChange(
                f"cannot {action} segment {seg.segment_id}: it is sealed", argument=name
            )
        return seg

    def _apply(
        self, sealed: Sequence[Segment], created: Sequence[Segment], next_segment_id: int
    ) -> TopicLayout:
        """The layout one epoch on, with the active ``sealed`` (neighbours in range order,
        now sealed) replaced by the new active ``created`` over the same hashes. Only the
        change is checked and only it is copied: the rest of the segment map, the active
        list and the merge depths are shared with this layout."""
        sealed = sorted(sealed, key=_range_start)
        created = sorted(created, key=_range_start)
        _check_change(self, sealed, created, next_segment_id)
        merges = self._merges
        new_merges = [(s.segment_id, _merge_set(s, merges)) for s in created]
        out: TopicLayout = object.__new__(TopicLayout)
        out.__dict__.update(
            epoch=self.epoch + 1,
            next_segment_id=next_segment_id,
            segments=self._map.updated((s.segment_id, s) for s in (*sealed, *created)),
            _ranges=self._ranges.replaced(sealed[0].hash_range.start, len(sealed), created),
            _merges=merges.updated(new_merges),
        )
        if self.__dict__.get("_routing_tables"):
            # Kept for routing_table_for: the new tables are these with the change made.
            out.__dict__["_routing_change"] = (
                self._routing_tables,
                sealed[0].hash_range.start,
                len(sealed),
                created,
            )
        if _FULL_CHECKS:
            out.validate()
        return out

    # --- serialisation ----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the whole DAG; :meth:`from_dict` reads it back."""
        return {
            "epoch": self.epoch,
            "next_segment_id": self.next_segment_id,
            "segments": [s.to_dict() for s in self.segments.values()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], name: str = "layout") -> TopicLayout:
        """The layout of a :meth:`to_dict` dict, validated; errors name the field."""
        return read(cls, data, name)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, text: str | bytes) -> TopicLayout:
        return cls.from_dict(json.loads(text))

    def layout_response(self, *, pulsar_version: str = SCALABLE_TOPICS.default) -> dict[str, Any]:
        """What a producer needs to route and bucket its batches (PIP-486's extension of
        ``ScalableTopicLayoutResponse``): the epoch and, per active segment in range order,
        its id, descriptor, range and bucket splits, and for a legacy segment the
        ``persistent://`` topic it wraps (``legacy_topic_name``) and, when recorded, its
        producers' ``legacy_hashing_scheme``. On ``pulsar_version="5.0.0-M1"``, which has
        no entry buckets, the segments carry no ``bucket_splits``."""
        bucketed = segment_half(pulsar_version) == "high"
        return {
            "epoch": self.epoch,
            "segments": [
                {
                    "segment_id": s.segment_id,
                    "descriptor": s.descriptor,
                    "hash_range": s.hash_range.to_hex(),
                    **({"bucket_splits": list(s.bucket_splits)} if bucketed else {}),
                    **({"legacy_topic_name": s.legacy_topic_name} if s.is_legacy else {}),
                    **_scheme_entry(s.legacy_hashing_scheme),
                }
                for s in self._active
            ],
        }


def _sealed(seg: Segment, now_ms: int, epoch: int, child_ids: tuple[int, ...]) -> Segment:
    return replace(
        seg,
        state=SegmentState.SEALED,
        child_ids=child_ids,
        sealed_at_ms=now_ms,
        sealed_at_epoch=epoch,
    )


#: Operations run the whole check (TopicLayout.validate) after their own when set: the tests
#: set it, so that every layout they make is checked whole.
_FULL_CHECKS = False


_RANGE_THEN_ID = attrgetter("hash_range", "segment_id")


#: The tables of the layout an operation came from, and its change: the hash the replaced
#: run of active segments starts at, how many it held, the segments that replace them.
_RoutingChange = tuple[dict[str, RoutingTable], int, int, Sequence[Segment]]

#: What a layout makes on demand and keeps (its routing tables, ``routing_table_for``, and
#: what other modules derive from it): not pickled.
_CACHES = frozenset({"_routing_tables", "_routing_change", "_memo"})


def _routes(segments: Iterable[Segment]) -> Iterator[tuple[int, HashRange, tuple[int, ...]]]:
    """Each segment as a routing table takes it."""
    return ((s.segment_id, s.hash_range, s.bucket_splits) for s in segments)


def _range_start(seg: Segment) -> int:
    return seg.hash_range.start


def _merge_set(seg: Segment, merges: Mapping[int, frozenset[int]]) -> frozenset[int]:
    """The merges (segments with two or more parents) among ``seg`` and its ancestors, from
    its parents' sets: one parent's set is shared as it is."""
    parents = [merges[p] for p in seg.parent_ids if p in merges]
    if len(seg.parent_ids) >= 2:
        return frozenset().union(*parents) | {seg.segment_id}
    return parents[0] if parents else _NO_MERGES


_NO_MERGES: frozenset[int] = frozenset()


def _merge_sets(segments: Iterable[Segment]) -> SegmentMap[frozenset[int]]:
    """Every segment's :func:`_merge_set`, in one pass over ``segments`` given in id order
    (a parent's id is below its children's)."""
    merges: dict[int, frozenset[int]] = {}
    for seg in segments:
        merges[seg.segment_id] = _merge_set(seg, merges)
    return SegmentMap(merges.items())


def _check_change(
    layout: TopicLayout, sealed: Sequence[Segment], created: Sequence[Segment], next_id: int
) -> None:
    """An operation's own check: the sealed segments were active neighbours, the created ones
    have new ids and tile exactly their hashes, and the links between the two are mutual.
    The rest of the DAG is as it was, so this is the whole DAG's check of the change."""
    for run in (sealed, created):
        for a, b in pairwise(run):
            if a.hash_range.end + 1 != b.hash_range.start:
                raise InvalidArgument("an operation's segments leave a gap", argument=None)
    if (sealed[0].hash_range.start, sealed[-1].hash_range.end) != (
        created[0].hash_range.start,
        created[-1].hash_range.end,
    ):
        raise InvalidArgument("an operation's new segments do not cover the old", argument=None)
    old_ids = {s.segment_id for s in sealed}
    new_ids = {s.segment_id for s in created}
    epoch = layout.epoch + 1
    for seg in sealed:
        if layout._ranges.find(seg.hash_range.start).segment_id != seg.segment_id:
            raise InvalidArgument(f"segment {seg.segment_id} was not active", argument=None)
        if seg.is_active or seg.sealed_at_epoch != epoch or set(seg.child_ids) != new_ids:
            raise InvalidArgument(f"segment {seg.segment_id} is not sealed for it", argument=None)
    for seg in created:
        if not layout.next_segment_id <= seg.segment_id < next_id:
            raise InvalidArgument(f"segment {seg.segment_id} is not a new id", argument=None)
        if not seg.is_active or seg.created_at_epoch != epoch or set(seg.parent_ids) != old_ids:
            raise InvalidArgument(
                f"segment {seg.segment_id} is not linked to its parents", argument=None
            )


def _check_dag(segments: Mapping[int, Segment], next_segment_id: int, epoch: int) -> None:
    # Sets, not the tuples: a migrated topic's N parents each name N children, and a
    # membership test per edge on tuples made the check cubic in N.
    parents_of = {sid: frozenset(seg.parent_ids) for sid, seg in segments.items()}
    children_of = {sid: frozenset(seg.child_ids) for sid, seg in segments.items()}
    for sid, seg in segments.items():
        if sid >= next_segment_id:
            raise InvalidArgument(
                f"segment {sid} is not below next_segment_id ({next_segment_id})", argument=None
            )
        if max(seg.created_at_epoch, seg.sealed_at_epoch) > epoch:
            raise InvalidArgument(
                f"segment {sid} records an epoch above the layout's ({epoch})", argument=None
            )
        if seg.is_active and seg.child_ids:
            raise InvalidArgument(
                f"segment {sid} is active but has children {list(seg.child_ids)}", argument=None
            )
        for pid in seg.parent_ids:
            parent = segments.get(pid)
            if parent is None:
                raise InvalidArgument(
                    f"segment {sid} names parent {pid}, which is not in the layout", argument=None
                )
            if pid >= sid:
                raise InvalidArgument(
                    f"segment {sid} names parent {pid}, which is not older", argument=None
                )
            if sid not in children_of[pid]:
                raise InvalidArgument(
                    f"segment {sid} names parent {pid}, which does not name it", argument=None
                )
        for cid in seg.child_ids:
            child = segments.get(cid)
            if child is None:
                raise InvalidArgument(
                    f"segment {sid} names child {cid}, which is not in the layout", argument=None
                )
            if sid not in parents_of[cid]:
                raise InvalidArgument(
                    f"segment {sid} names child {cid}, which does not name it", argument=None
                )


def _check_tiling(active: Sequence[Segment]) -> None:
    # The tiling is the routing table's rule; a table is built here only to check it.
    RoutingTable((s.segment_id, s.hash_range, s.bucket_splits) for s in active)


__all__ = [
    "MAX_SEGMENT_ID",
    "Segment",
    "SegmentState",
    "TopicLayout",
    "equal_width_ranges",
    "format_descriptor",
    "parse_descriptor",
]
