"""PIP-379 draining hashes and pending acks (SPEC 6), and the dispatcher wiring that keeps
them in step with Pulsar's consistent-hashing selector."""

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from keyshared._core import (
    ConsistentHashingStickyKeyConsumerSelector,
    ConsumerDrainingHashesStats,
    DrainingHash,
    DrainingHashEntry,
    DrainingHashesTracker,
    HashRange,
    PendingAcksMap,
    impacted_consumers,
    register_draining_hashes,
)

__all__ = [
    "ConsumerDrainingHashesStats",
    "DrainingHash",
    "DrainingHashEntry",
    "DrainingHashesTracker",
    "PendingAcksMap",
    "StickyKeyDispatcher",
    "batch",
]

PendingAck = tuple[int, int, int, int]


@contextmanager
def batch(tracker: DrainingHashesTracker) -> Iterator[DrainingHashesTracker]:
    """``start_batch`` ... ``end_batch``: unblocking inside is reported once, as -1."""
    tracker.start_batch()
    try:
        yield tracker
    finally:
        tracker.end_batch()


class StickyKeyDispatcher:
    """The draining-hashes part of Pulsar's ``PersistentStickyKeyDispatcherMultipleConsumers``
    (PIP-379): a consistent-hashing selector, a draining-hashes tracker, and one pending-acks
    map per consumer wired to the tracker.

    A consumer change registers, for every other consumer that lost hash ranges, the pending
    acks in those ranges as draining; a draining hash then blocks dispatch to any other
    consumer until its pending acks are acked (or its consumer leaves). A consumer that gets
    ranges back releases its own draining hashes in them, as Pulsar's dispatcher does since
    it reports added ranges too (without that, losing a hash twice would count its pending
    acks twice and it would never drain). Thread-safe: changes and dispatches are
    serialized, as Pulsar's dispatcher methods are ``synchronized``.
    """

    def __init__(
        self,
        number_of_points: int = 100,
        unblocking_handler: Callable[[int], object] | None = None,
        dispatcher_name: str = "",
    ) -> None:
        self.selector = ConsistentHashingStickyKeyConsumerSelector(number_of_points)
        self.tracker = DrainingHashesTracker(unblocking_handler, dispatcher_name)
        self._pending: dict[int, PendingAcksMap] = {}
        self._lock = threading.RLock()

    def add_consumer(self, consumer_id: int, name: str | bytes) -> PendingAcksMap:
        """Adds the consumer to the ring; returns its pending-acks map."""
        with self._lock:
            before = self.selector.get_consumer_key_hash_ranges()
            self.selector.add_consumer(consumer_id, name)
            pending = PendingAcksMap(consumer_id, self.tracker)
            self._pending[consumer_id] = pending
            self._register_draining_hashes(consumer_id, before)
            return pending

    def remove_consumer(self, consumer_id: int) -> list[PendingAck]:
        """Removes the consumer (KeyError if unknown). Its pending acks are closed and
        returned, in order, as ``(ledger_id, entry_id, batch_size, sticky_key_hash)``, for
        redelivery."""
        with self._lock:
            before = self.selector.get_consumer_key_hash_ranges()
            self.selector.remove_consumer(consumer_id)
            pending = self._pending.pop(consumer_id)
            replay: list[PendingAck] = []
            pending.for_each_and_close(lambda *ack: replay.append(ack))
            if not self._pending:
                self.tracker.clear()
            self._register_draining_hashes(consumer_id, before)
            self.tracker.consumer_removed(consumer_id)
            return replay

    def pending_acks(self, consumer_id: int) -> PendingAcksMap:
        """The consumer's pending-acks map (KeyError if unknown)."""
        return self._pending[consumer_id]

    def select(self, sticky_key_hash: int) -> int | None:
        return self.selector.select(sticky_key_hash)

    def dispatch(
        self, ledger_id: int, entry_id: int, sticky_key_hash: int, batch_size: int = 1
    ) -> int | None:
        """Sends one entry if it may go now: the selected consumer, unless there is none,
        the hash drains on another consumer, or the pending-acks map refuses it (None)."""
        with self._lock:
            consumer = self.selector.select(sticky_key_hash)
            if consumer is None:
                return None
            if self.tracker.should_block_sticky_key_hash(consumer, sticky_key_hash):
                return None
            pending = self._pending[consumer]
            if not pending.add_pending_ack_if_allowed(
                ledger_id, entry_id, batch_size, sticky_key_hash
            ):
                return None
            return consumer

    def ack(self, consumer_id: int, ledger_id: int, entry_id: int) -> bool:
        """The consumer acked an entry; False if it was not pending there."""
        return self.pending_acks(consumer_id).remove(ledger_id, entry_id)

    def _register_draining_hashes(
        self, skip_consumer: int, before: dict[int, list[HashRange]]
    ) -> None:
        impacted = impacted_consumers(before, self.selector.get_consumer_key_hash_ranges())
        register_draining_hashes(impacted, list(self._pending.values()), skip_consumer)
