"""PIP-379 draining hashes and pending acks: the draining-hashes tracker and each
consumer's pending-acks map wired to it (native). The dispatcher that keeps them in step
with its selector is in ``keyshared.dispatch``."""

from collections.abc import Iterator
from contextlib import contextmanager

from keyshared._core import (
    ConsumerDrainingHashesStats,
    DrainingHash,
    DrainingHashEntry,
    DrainingHashesTracker,
    PendingAcksMap,
)

__all__ = [
    "ConsumerDrainingHashesStats",
    "DrainingHash",
    "DrainingHashEntry",
    "DrainingHashesTracker",
    "PendingAcksMap",
    "batch",
]


@contextmanager
def batch(tracker: DrainingHashesTracker) -> Iterator[DrainingHashesTracker]:
    """``start_batch`` ... ``end_batch``: unblocking inside is reported once, as -1."""
    tracker.start_batch()
    try:
        yield tracker
    finally:
        tracker.end_batch()
