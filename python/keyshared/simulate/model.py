"""The records the simulator's parts share: stored entries, the copies of them consumers
hold, and what a consumer reports back to the dispatcher that sent it a copy.

They live apart from the store, the dispatchers, the clients and the checker so that each of
those imports them without importing the others.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

_I64 = npt.NDArray[np.int64]


class Feedback(Protocol):
    """What a consumer tells the dispatcher of a delivery (times in µs of virtual time)."""

    def processing_started(self, consumer_id: int) -> None: ...
    def processing_stopped(self, consumer_id: int) -> None: ...
    def ack(self, now_us: int, delivery: Delivery) -> None: ...
    def nack(self, now_us: int, delivery: Delivery) -> None: ...


class Entry:
    """One stored entry: ``count`` messages, ``size`` bytes, at ``offset`` of segment
    ``segment_id`` and ``bucket_offset`` of its bucket's own sequence, stamped with the
    hashB range ``[hash_min, hash_max]`` of its messages. ``keys`` are its distinct key ids
    (ascending), with the first rank and the count of each.

    Delivery state, changed by the dispatcher and the checker: how many times a consumer
    finished processing it and when it first did (``processed_us``, -1 before), whether the
    broker gave up on it (``"drop"`` or ``"dead_letter"``, by the poison policy), whether it
    was ever redelivered (which makes a second processing an allowed at-least-once
    duplicate), and the copies consumers hold that still count as unacked. Times are µs of
    virtual time (``stored_us``: when it was stored)."""

    __slots__ = (
        "bucket",
        "bucket_offset",
        "copies",
        "count",
        "first_ranks",
        "given_up",
        "hash_max",
        "hash_min",
        "key_counts",
        "keys",
        "offset",
        "processed",
        "processed_us",
        "redelivered",
        "segment_id",
        "size",
        "stored_us",
    )

    def __init__(
        self,
        segment_id: int,
        offset: int,
        bucket: int,
        bucket_offset: int,
        count: int,
        size: int,
        hash_range: tuple[int, int],
        stored_us: int,
        keys: _I64,
        first_ranks: _I64,
        key_counts: _I64,
    ) -> None:
        self.segment_id = segment_id
        self.offset = offset
        self.bucket = bucket
        self.bucket_offset = bucket_offset
        self.count = count
        self.size = size
        self.hash_min, self.hash_max = hash_range
        self.stored_us = stored_us
        self.keys = keys
        self.first_ranks = first_ranks
        self.key_counts = key_counts
        self.processed = 0
        self.processed_us = -1
        self.given_up: str | None = None
        self.redelivered = False
        self.copies: list[Delivery] = []

    @property
    def done(self) -> bool:
        """Whether no more delivery is owed: processed once, or given up on."""
        return self.processed > 0 or self.given_up is not None

    def __repr__(self) -> str:
        return (
            f"Entry(segment {self.segment_id} offset {self.offset}, bucket {self.bucket}"
            f" #{self.bucket_offset}, {self.count} msg)"
        )


class Delivery:
    """One copy of an entry sent to a consumer (``attempt`` 1 for a first delivery).
    ``stale`` once the entry was settled through another copy or given up on: the copy no
    longer holds its keys."""

    __slots__ = ("attempt", "consumer_id", "dispatcher", "entry", "stale")

    def __init__(self, entry: Entry, consumer_id: int, attempt: int, dispatcher: Feedback) -> None:
        self.entry = entry
        self.consumer_id = consumer_id
        self.attempt = attempt
        self.dispatcher = dispatcher
        self.stale = False


__all__ = [
    "Delivery",
    "Entry",
    "Feedback",
]
