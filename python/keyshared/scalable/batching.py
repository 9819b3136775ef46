"""PIP-486 entry-bucketed batching (producer side) and entry routing (broker side).

The producer keeps one open batch per (segment, bucket), so that every stored entry holds
keys of one bucket of one segment and carries the effective hashB range of its messages
(``entry_hash_min`` / ``entry_hash_max``, both inclusive). The broker then routes a whole
entry by that range: range -> bucket -> owning consumer, with no per-key hashing.

``pulsar_version="5.0.0-M1"`` batches as that release's producer routes: by the low half of
the key hash into segments of one bucket each, so one open batch per segment.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from keyshared._checks import check_int
from keyshared._core import bucket_indices, entry_bucket
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.routing.hashing import key_hash, key_hashes
from keyshared.scalable.layout import Segment, TopicLayout
from keyshared.scalable.ownership import BucketAssignment
from keyshared.versions import SCALABLE_TOPICS

#: Pulsar producer defaults: ``batchingMaxMessages``, ``batchingMaxBytes`` (128 KiB) and
#: ``batchingMaxPublishDelay`` (1 ms).
DEFAULT_MAX_MESSAGES = 1000
DEFAULT_MAX_BYTES = 128 * 1024
DEFAULT_MAX_DELAY_MS = 1

_Group = tuple[int, int]


@dataclass(frozen=True, eq=False)
class EntryBatch:
    """One flushed batch, to be stored as one entry of segment ``segment_id``.

    ``sequence_ids`` (int64, read-only, ascending) are the batcher's numbers of its messages
    in the order they were added; ``entry_hash_min`` / ``entry_hash_max`` are the smallest
    and largest hashB among them, both inside bucket ``bucket``; ``size_bytes`` is the sum
    of their payload sizes (B); ``opened_at_ms`` is when the first one arrived.
    """

    segment_id: int
    bucket: int
    entry_hash_min: int
    entry_hash_max: int
    sequence_ids: npt.NDArray[np.int64]
    size_bytes: int
    opened_at_ms: int

    @property
    def num_messages(self) -> int:
        return len(self.sequence_ids)


class _OpenBatch:
    """A batch still taking messages. Sequence ids arrive as single ints (from ``add``) or
    array slices (from ``add_many``) and are joined once, at flush."""

    __slots__ = ("chunks", "count", "hash_max", "hash_min", "opened_at_ms", "singles", "size")

    def __init__(self, opened_at_ms: int) -> None:
        self.opened_at_ms = opened_at_ms
        self.singles: list[int] = []
        self.chunks: list[npt.NDArray[np.int64]] = []
        self.count = 0
        self.size = 0
        self.hash_min = 0xFFFF
        self.hash_max = 0

    def add_one(self, sequence_id: int, size: int, hash_b: int) -> None:
        self.singles.append(sequence_id)
        self.count += 1
        self.size += size
        self.hash_min = min(self.hash_min, hash_b)
        self.hash_max = max(self.hash_max, hash_b)

    def add_run(self, ids: npt.NDArray[np.int64], size: int, hash_min: int, hash_max: int) -> None:
        self.chunks.append(ids)
        self.count += len(ids)
        self.size += size
        self.hash_min = min(self.hash_min, hash_min)
        self.hash_max = max(self.hash_max, hash_max)

    def sequence_ids(self) -> npt.NDArray[np.int64]:
        if not self.singles and len(self.chunks) == 1:
            ids = self.chunks[0]
        else:
            ids = np.concatenate([np.array(self.singles, dtype=np.int64), *self.chunks])
            if self.singles and self.chunks:
                # Sequence ids grow with arrival, so sorting restores the arrival order.
                ids.sort()
        ids.setflags(write=False)
        return ids


class BucketedBatcher:
    """PIP-486's ``BucketedBatchContainer``: one open batch per (segment, bucket) of a layout.

    Each batch is bounded by ``max_messages``, ``max_bytes`` (B) and ``max_delay_ms`` (ms,
    >= 1). Adding a message to a non-empty batch that it would push above ``max_bytes``
    flushes that batch first; a batch that reaches ``max_messages`` or ``max_bytes`` flushes
    at once (so a message larger than ``max_bytes`` travels alone); a batch whose first
    message arrived ``max_delay_ms`` or more ago flushes on the next call. Messages are
    numbered 0, 1, 2, ... in the order they are added (``sequence_ids``).

    Pure: it holds no clock or timer. Every call takes ``now_ms`` (never decreasing) and
    returns the batches it flushed, in the order a one-message-at-a-time batcher would
    flush them; :meth:`add_many` behaves exactly like that many :meth:`add` calls.

    ``pulsar_version`` (``"master"``, the default, or ``"5.0.0-M1"``) is the release whose
    routing the batches follow. On 5.0.0-M1 every batch is bucket 0 of its segment; its
    ``entry_hash_min`` / ``entry_hash_max`` are still the smallest and largest low halves of
    its keys' hashes, which M1 itself does not record.
    """

    def __init__(
        self,
        layout: TopicLayout,
        *,
        max_messages: int = DEFAULT_MAX_MESSAGES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_delay_ms: int = DEFAULT_MAX_DELAY_MS,
        pulsar_version: str = SCALABLE_TOPICS.default,
    ) -> None:
        self.pulsar_version = SCALABLE_TOPICS.check(pulsar_version)
        self._routing = _Routing(_check_layout(layout), self.pulsar_version)
        self.max_messages = check_int("max_messages", max_messages, minimum=1)
        self.max_bytes = check_int("max_bytes", max_bytes, minimum=1)
        self.max_delay_ms = check_int("max_delay_ms", max_delay_ms, minimum=1)
        self._open: OrderedDict[_Group, _OpenBatch] = OrderedDict()
        self._next_sequence_id = 0
        self._now_ms = 0

    @property
    def layout(self) -> TopicLayout:
        return self._routing.layout

    @property
    def next_sequence_id(self) -> int:
        """The sequence id the next message will get."""
        return self._next_sequence_id

    @property
    def open_batches(self) -> int:
        return len(self._open)

    def add(self, key: str | bytes, payload_size: int, now_ms: int) -> list[EntryBatch]:
        """Adds one message (``payload_size`` B); returns the batches flushed meanwhile."""
        size = check_int("payload_size", payload_size, minimum=0)
        # Everything that can refuse the message runs before poll flushes anything, so that
        # an error never drops the batches poll took out.
        h = key_hash(key)
        segment_id, bucket = self._routing.table.route_hash(h)
        flushed = self.poll(now_ms)
        group = (segment_id, bucket)
        batch = self._open.get(group)
        if batch is not None and batch.size + size > self.max_bytes:
            flushed.append(self._close(group))
            batch = None
        if batch is None:
            batch = self._open[group] = _OpenBatch(now_ms)
        batch.add_one(self._next_sequence_id, size, h & 0xFFFF)
        self._next_sequence_id += 1
        if batch.count >= self.max_messages or batch.size >= self.max_bytes:
            flushed.append(self._close(group))
        return flushed

    def add_many(
        self,
        keys: Any,
        payload_sizes: Sequence[int] | npt.NDArray[np.integer[Any]],
        now_ms: int,
        *,
        null_key: str | bytes | None = None,
    ) -> list[EntryBatch]:
        """Adds many messages at once, all at ``now_ms``: ``keys`` as for
        :func:`keyshared.key_hashes` (list, NumPy or Arrow array), ``payload_sizes`` (B) one
        non-negative int per key. Hashes and routes in native code and groups with NumPy."""
        hashes = key_hashes(keys, null_key=null_key)
        sizes = _sizes(payload_sizes, len(hashes))
        flushed = self.poll(now_ms)
        if not len(hashes):
            return flushed
        run = _Run(self, hashes, sizes, now_ms)
        self._next_sequence_id += len(hashes)
        return flushed + run.cut_all()

    def poll(self, now_ms: int) -> list[EntryBatch]:
        """Flushes the batches whose first message arrived ``max_delay_ms`` or more before
        ``now_ms``, oldest first."""
        check_int("now_ms", now_ms, minimum=self._now_ms)
        self._now_ms = now_ms
        flushed = []
        while self._open:
            group, batch = next(iter(self._open.items()))
            if batch.opened_at_ms + self.max_delay_ms > now_ms:
                break
            flushed.append(self._close(group))
        return flushed

    def flush(self) -> list[EntryBatch]:
        """Flushes every open batch, oldest first (for example before closing)."""
        return [self._close(group) for group in list(self._open)]

    def update_layout(self, layout: TopicLayout) -> list[EntryBatch]:
        """Switches to a new layout (after a split, merge or rollover redirects the producer);
        open batches belong to the old segments, so they are flushed first."""
        routing = _Routing(_check_layout(layout), self.pulsar_version)
        flushed = self.flush()
        self._routing = routing
        return flushed

    def _close(self, group: _Group) -> EntryBatch:
        return _entry(group, self._open.pop(group))


def _entry(group: _Group, batch: _OpenBatch) -> EntryBatch:
    return EntryBatch(
        segment_id=group[0],
        bucket=group[1],
        entry_hash_min=batch.hash_min,
        entry_hash_max=batch.hash_max,
        sequence_ids=batch.sequence_ids(),
        size_bytes=batch.size,
        opened_at_ms=batch.opened_at_ms,
    )


def _check_layout(layout: TopicLayout) -> TopicLayout:
    if not isinstance(layout, TopicLayout):
        raise ArgumentTypeError(
            f"layout must be a TopicLayout, got {type(layout).__name__}", argument="layout"
        )
    return layout


def _sizes(payload_sizes: object, n: int) -> npt.NDArray[np.int64]:
    sizes = np.asarray(payload_sizes)
    if sizes.shape != (n,):
        raise InvalidArgument(
            f"payload_sizes must hold one size per key ({n}), got shape {sizes.shape}",
            argument="payload_sizes",
        )
    if n and not np.issubdtype(sizes.dtype, np.integer):
        raise ArgumentTypeError(
            f"payload_sizes must be integers, got dtype {sizes.dtype}", argument="payload_sizes"
        )
    if n and sizes.min() < 0:
        raise InvalidArgument(
            f"payload_sizes must not be negative (index {int(np.argmin(sizes))})",
            argument="payload_sizes",
        )
    # Batch sizes are summed as int64: refuse what would wrap rather than cut wrong batches.
    if n and int(sizes.max()) > _MAX_TOTAL_BYTES // n:
        total = sum(sizes.tolist())
        if total > _MAX_TOTAL_BYTES:
            raise InvalidArgument(
                f"payload_sizes add up to {total} B, more than one call can batch"
                f" ({_MAX_TOTAL_BYTES} B); pass them in smaller calls",
                argument="payload_sizes",
            )
    return sizes.astype(np.int64, copy=False)


#: The largest sum of payload sizes one ``add_many`` call takes (B): batches are cut by
#: int64 prefix sums, and an open batch may already hold up to ``max_bytes`` more.
_MAX_TOTAL_BYTES = 2**62


class _Routing:
    """A layout and its routing table under a release, whose bucket ordinals number the
    (segment, bucket) groups densely, so that grouping sorts small integers."""

    def __init__(self, layout: TopicLayout, pulsar_version: str) -> None:
        self.layout = layout
        self.table = table = layout.routing_table_for(pulsar_version)
        self.group_count = table.bucket_count
        # NumPy sorts 16-bit integers by radix, in linear time: the common case.
        self.group_dtype = np.uint16 if self.group_count <= 0x10000 else np.int64
        # The groups in bucket-ordinal order: segments in range order, then their buckets.
        self.groups = [
            (segment_id, bucket)
            for (segment_id, _, _), count in zip(table.segments, table.bucket_counts, strict=True)
            for bucket in range(count)
        ]


class _Run:
    """One ``add_many`` call: messages sorted by group (stably, so arrival order holds within
    a group), then each group's run is cut into batches with prefix sums of the sizes."""

    def __init__(
        self,
        batcher: BucketedBatcher,
        hashes: npt.NDArray[np.uint32],
        sizes: npt.NDArray[np.int64],
        now_ms: int,
    ) -> None:
        routing = batcher._routing
        ordinals = routing.table.bucket_ordinals(hashes)
        groups = ordinals.astype(routing.group_dtype, copy=False)
        order = np.argsort(groups, kind="stable")
        self.batcher, self.routing, self.now_ms = batcher, routing, now_ms
        self.counts = np.bincount(groups, minlength=routing.group_count)
        self.hash_b = np.take((hashes & 0xFFFF).astype(np.uint16), order)
        self.ids = order.astype(np.int64, copy=False) + batcher.next_sequence_id
        # Batches hold slices of this array; read-only here, they are read-only there.
        self.ids.setflags(write=False)
        self.cum = np.concatenate(([0], np.cumsum(np.take(sizes, order))))
        # Flushed batches, each with the (sequence id, phase) at which a one-at-a-time
        # batcher would flush it: phase 0 before adding that message, 1 after.
        self.out: list[tuple[tuple[int, int], EntryBatch]] = []
        # Runs of the sorted arrays, each joining a batch: (start, end, group, batch, the
        # batch's flush key or None while it stays open).
        self.pieces: list[tuple[int, int, _Group, _OpenBatch, tuple[int, int] | None]] = []

    def cut_all(self) -> list[EntryBatch]:
        present = np.flatnonzero(self.counts)
        ends = np.cumsum(self.counts)[present]
        starts = ends - self.counts[present]
        opened: list[tuple[int, _Group, _OpenBatch]] = []
        for g, start, end in zip(present.tolist(), starts.tolist(), ends.tolist(), strict=True):
            opened.extend(self._cut_group(self.routing.groups[g], start, end))
        # A one-at-a-time batcher opens batches in arrival order; so must the dict, since
        # poll and flush go through it oldest first.
        for _, group, batch in sorted(opened, key=lambda item: item[0]):
            self.batcher._open[group] = batch
        self._emit_pieces()
        self.out.sort(key=lambda item: item[0])
        return [batch for _, batch in self.out]

    def _cut_group(
        self, group: _Group, start: int, end: int
    ) -> list[tuple[int, _Group, _OpenBatch]]:
        """Cuts one group's messages into pieces; returns the batch left open, if it is a
        new one (with its first sequence id)."""
        open_batch = self.batcher._open.get(group)
        p = start
        while p < end:
            k, phase = self._next_cut(p, end, open_batch)
            if k == 0:
                # The open batch cannot take message p: it goes alone, before p is added.
                self.out.append(((int(self.ids[p]), 0), self.batcher._close(group)))
                open_batch = None
            elif phase is None:
                if open_batch is not None:
                    self.pieces.append((p, end, group, open_batch, None))
                    return []
                fresh = _OpenBatch(self.now_ms)
                self.pieces.append((p, end, group, fresh, None))
                return [(int(self.ids[p]), group, fresh)]
            else:
                if open_batch is not None:
                    del self.batcher._open[group]
                trigger = p + k if phase == 0 else p + k - 1
                batch = open_batch or _OpenBatch(self.now_ms)
                self.pieces.append((p, p + k, group, batch, (int(self.ids[trigger]), phase)))
                open_batch = None
                p += k
        return []

    def _next_cut(self, p: int, end: int, open_batch: _OpenBatch | None) -> tuple[int, int | None]:
        """How many of messages ``p..end-1`` join the open batch before it flushes, and the
        phase of that flush (0: before the next message is added, 1: right after the last
        one joins; None: no flush, they all join)."""
        batcher, cum = self.batcher, self.cum
        count0, size0 = (open_batch.count, open_batch.size) if open_batch else (0, 0)
        m, room = end - p, batcher.max_messages - count0
        bytes_left = batcher.max_bytes - size0
        # Usual case: the count limit or the end of the run comes before the byte limit.
        last = p + min(room, m)
        if int(cum[last]) - int(cum[p]) < bytes_left:
            return (room, 1) if room <= m else (m, None)
        target = int(cum[p]) + bytes_left
        # The first message whose prefix reaches max_bytes; it exists, by the test above.
        k = int(np.searchsorted(cum[p + 1 : last + 1], target, side="left")) + 1
        if int(cum[p + k]) == target:
            by_bytes = (k, 1)
        elif k > 1:
            by_bytes = (k - 1, 0)
        else:
            by_bytes = (0, 0) if count0 else (1, 1)
        # On a tie the count limit fires first: it flushes right after the message fills it.
        return (room, 1) if room <= by_bytes[0] else by_bytes

    def _emit_pieces(self) -> None:
        if not self.pieces:
            return
        starts = np.array([piece[0] for piece in self.pieces], dtype=np.intp)
        mins = np.minimum.reduceat(self.hash_b, starts).tolist()
        maxs = np.maximum.reduceat(self.hash_b, starts).tolist()
        for (start, end, group, batch, key), lo, hi in zip(self.pieces, mins, maxs, strict=True):
            batch.add_run(self.ids[start:end], int(self.cum[end] - self.cum[start]), lo, hi)
            if key is not None:
                self.out.append((key, _entry(group, batch)))


def route_entry(
    segment: Segment, entry_hash_min: int, entry_hash_max: int, assignment: BucketAssignment
) -> tuple[int, int | None]:
    """The broker's dispatch of one stored entry of ``segment``: ``(bucket, owner)``, the one
    bucket holding ``[entry_hash_min, entry_hash_max]`` and the consumer owning it (None
    while there is none). ValueError when the range straddles a bucket boundary."""
    _check_segment_assignment(segment, assignment)
    bucket = entry_bucket(entry_hash_min, entry_hash_max, segment.bucket_splits)
    return bucket, assignment.owners[bucket]


def route_entries(
    segment: Segment,
    entry_hash_min: npt.NDArray[np.integer[Any]],
    entry_hash_max: npt.NDArray[np.integer[Any]],
    assignment: BucketAssignment,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    """:func:`route_entry` over arrays: buckets (int32) and owners (int64, -1 for none). An
    entry straddling a bucket boundary gets bucket -1 and owner -1 (a relay re-batches it)."""
    _check_segment_assignment(segment, assignment)
    lo, hi = np.asarray(entry_hash_min), np.asarray(entry_hash_max)
    if lo.shape != hi.shape or lo.ndim != 1:
        raise InvalidArgument(
            "entry_hash_min and entry_hash_max must be one-dimensional arrays of one length,"
            f" got shapes {lo.shape} and {hi.shape}",
            argument="entry_hash_min",
        )
    if len(lo) and (lo > hi).any():
        raise InvalidArgument(
            f"entry_hash_min is above entry_hash_max at index {int(np.argmax(lo > hi))}",
            argument="entry_hash_min",
        )
    first = bucket_indices(lo, segment.bucket_splits)
    last = bucket_indices(hi, segment.bucket_splits)
    whole = first == last
    buckets = np.where(whole, first, -1).astype(np.int32)
    owners = np.where(whole, assignment.owner_array[first], -1)
    return buckets, owners


def _check_segment_assignment(segment: Segment, assignment: BucketAssignment) -> None:
    if not isinstance(segment, Segment):
        raise ArgumentTypeError(
            f"segment must be a Segment, got {type(segment).__name__}", argument="segment"
        )
    if not isinstance(assignment, BucketAssignment):
        raise ArgumentTypeError(
            f"assignment must be a BucketAssignment, got {type(assignment).__name__}",
            argument="assignment",
        )
    if assignment.bucket_count != segment.bucket_count:
        raise InvalidArgument(
            f"assignment has {assignment.bucket_count} buckets but segment"
            f" {segment.segment_id} has {segment.bucket_count}",
            argument="assignment",
        )


__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DELAY_MS",
    "DEFAULT_MAX_MESSAGES",
    "BucketedBatcher",
    "EntryBatch",
    "route_entries",
    "route_entry",
]
