"""What the simulated brokers store: entries (one flushed producer batch each) in per-segment
logs, with each entry's per-key ranks, so that ordering can be checked per key without
keeping per-message records.

A key's rank counts its messages in storage order (0, 1, 2, ...): the order Key_Shared
promises to deliver them in. Within one entry a key's messages have consecutive ranks, so
an entry only keeps, per distinct key, the first rank and the count.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from keyshared.scalable.batching import EntryBatch
from keyshared.simulate.model import Entry

_I64 = npt.NDArray[np.int64]


class TopicStore:
    """The entries of one topic, per segment in offset order and per (segment, bucket) in
    bucket order; assigns each key's ranks as entries are stored."""

    def __init__(self, key_count: int) -> None:
        self.key_count = key_count
        self._next_rank = np.zeros(key_count, dtype=np.int64)
        self.logs: dict[int, list[Entry]] = {}
        self.bucket_logs: dict[tuple[int, int], list[Entry]] = {}
        self.messages = 0
        self.bytes = 0

    def open_segment(self, segment_id: int, bucket_count: int) -> None:
        self.logs[segment_id] = []
        for bucket in range(bucket_count):
            self.bucket_logs[(segment_id, bucket)] = []

    def store(self, now_us: int, batches: Sequence[tuple[EntryBatch, _I64]]) -> list[Entry]:
        """Appends one entry per ``(batch, key ids of its messages)``, in the order given,
        which is storage order."""
        if not batches:
            return []
        key_ids = np.concatenate([ids for _, ids in batches])
        sizes = np.array([len(ids) for _, ids in batches], dtype=np.int64)
        ranks = self._ranks(key_ids)
        summary = _per_entry_keys(key_ids, ranks, sizes, self.key_count)
        entries = []
        for (batch, _), (keys, first, counts) in zip(batches, summary, strict=True):
            log = self.logs[batch.segment_id]
            bucket_log = self.bucket_logs[(batch.segment_id, batch.bucket)]
            entry = Entry(
                batch.segment_id,
                len(log),
                batch.bucket,
                len(bucket_log),
                batch.num_messages,
                batch.size_bytes,
                (batch.entry_hash_min, batch.entry_hash_max),
                now_us,
                keys,
                first,
                counts,
            )
            log.append(entry)
            bucket_log.append(entry)
            entries.append(entry)
        self.messages += len(key_ids)
        self.bytes += sum(batch.size_bytes for batch, _ in batches)
        return entries

    def _ranks(self, key_ids: _I64) -> _I64:
        """Each message's rank among its key's messages, continuing from earlier entries."""
        order = np.argsort(key_ids, kind="stable")
        sorted_keys = key_ids[order]
        starts, lengths = _runs(sorted_keys)
        within = np.arange(len(key_ids)) - np.repeat(starts, lengths)
        ranks = np.empty(len(key_ids), dtype=np.int64)
        ranks[order] = self._next_rank[sorted_keys] + within
        self._next_rank[sorted_keys[starts]] += lengths
        return ranks


def _runs(values: _I64) -> tuple[_I64, _I64]:
    """The start index and length of each run of equal values in a sorted array."""
    boundary = np.empty(len(values), dtype=bool)
    boundary[0] = True
    np.not_equal(values[1:], values[:-1], out=boundary[1:])
    starts = np.flatnonzero(boundary)
    lengths = np.empty_like(starts)
    np.subtract(starts[1:], starts[:-1], out=lengths[:-1])
    lengths[-1] = len(values) - starts[-1]
    return starts, lengths


def _per_entry_keys(
    key_ids: _I64, ranks: _I64, sizes: _I64, key_count: int
) -> list[tuple[_I64, _I64, _I64]]:
    """Per entry (messages ``sizes[i]`` long, one after another): its distinct keys, the
    first rank of each and how many messages each has."""
    entry_of = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    pairs = entry_of * key_count + key_ids
    order = np.argsort(pairs, kind="stable")
    sorted_pairs = pairs[order]
    starts, counts = _runs(sorted_pairs)
    keys = sorted_pairs[starts] % key_count
    # The sort is stable, so a run's first element is the key's first message in the entry.
    first_ranks = ranks[order[starts]]
    bounds = np.searchsorted(sorted_pairs[starts] // key_count, np.arange(len(sizes) + 1))
    return [
        (keys[lo:hi], first_ranks[lo:hi], counts[lo:hi])
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
    ]


__all__ = ["Entry", "TopicStore"]
