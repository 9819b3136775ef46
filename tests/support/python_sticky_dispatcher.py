"""The sticky-key dispatcher as it was before its kernel: a Python class that checks each
entry and records each pending ack with a call across the binding. The stateful test of
``keyshared.dispatch.StickyKeyDispatcher`` runs it as its model, and the dispatcher
benchmark as the Python-loop peer (loaded from here, so there is one copy)."""

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from keyshared._checks import check_consumer_id, check_index
from keyshared._core import (
    ConsistentHashingStickyKeyConsumerSelector,
    DrainingHashesTracker,
    ImpactedConsumersResult,
    MessageRedeliveryController,
    PendingAcksMap,
    get_available_permits,
    get_effective_look_ahead_limit,
    register_draining_hashes,
)
from keyshared.dispatch import DispatchResult, HoldReason

PendingAck = tuple[int, int, int, int]
Entry = tuple[int, int, int, int]
"""``(ledger_id, entry_id, sticky_key_hash, batch_size)`` of one entry of a read."""

_UNLIMITED_PERMITS = 2**31 - 1
_HOLDS = {
    "no_consumer": HoldReason.NO_CONSUMER,
    "blocked_in_read": HoldReason.BLOCKED_IN_READ,
    "no_permits": HoldReason.NO_PERMITS,
    "awaiting_redelivery": HoldReason.AWAITING_REDELIVERY,
    "draining": HoldReason.DRAINING,
}


class PyStickyKeyDispatcher:
    """``StickyKeyDispatcher`` as it was in Python: the draining-hashes part of Pulsar's
    ``PersistentStickyKeyDispatcherMultipleConsumers`` (PIP-379): a consistent-hashing
    selector, a draining-hashes tracker, and one pending-acks map per consumer wired to the
    tracker.

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
        *,
        unblocking_handler: Callable[[int], object] | None = None,
        dispatcher_name: str = "",
        flow_control: bool = False,
        look_ahead_per_consumer: int | None = None,
        look_ahead_per_subscription: int | None = None,
        max_unacked_messages_per_consumer: int | None = None,
        max_unacked_messages_per_subscription: int | None = None,
    ) -> None:
        if not isinstance(flow_control, bool):
            raise TypeError(f"flow_control must be a bool, got {type(flow_control).__name__}")
        self._look_ahead = {
            "per_consumer": look_ahead_per_consumer,
            "per_subscription": look_ahead_per_subscription,
            "max_unacked_messages_per_consumer": max_unacked_messages_per_consumer,
            "max_unacked_messages_per_subscription": max_unacked_messages_per_subscription,
        }
        get_effective_look_ahead_limit(1, **self._look_ahead)  # checks the settings
        self.selector = ConsistentHashingStickyKeyConsumerSelector(number_of_points)
        self.tracker = DrainingHashesTracker(unblocking_handler, dispatcher_name)
        self.redelivery = MessageRedeliveryController()
        self.flow_control = flow_control
        self._pending: dict[int, PendingAcksMap] = {}
        self._permits: dict[int, _Permits] = {}
        self._lock = threading.RLock()

    def add_consumer(self, consumer_id: int, name: str | bytes) -> PendingAcksMap:
        """Adds the consumer to the ring; returns its pending-acks map."""
        consumer_id = check_consumer_id("consumer_id", consumer_id)
        with self._lock:
            impacted = self.selector.add_consumer(consumer_id, name)
            pending = PendingAcksMap(consumer_id, self.tracker)
            self._pending[consumer_id] = pending
            self._register_draining_hashes(consumer_id, impacted)
            return pending

    def remove_consumer(self, consumer_id: int) -> list[PendingAck]:
        """Removes the consumer (KeyError if unknown). Its pending acks are closed and
        returned, in order, as ``(ledger_id, entry_id, batch_size, sticky_key_hash)``, for
        redelivery (the dispatcher also queues them in ``redelivery`` while other consumers
        remain)."""
        consumer_id = check_consumer_id("consumer_id", consumer_id)
        with self._lock:
            impacted = self.selector.remove_consumer(consumer_id)
            pending = self._pending.pop(consumer_id)
            replay: list[PendingAck] = []
            pending.for_each_and_close(lambda *ack: replay.append(ack))
            self._permits.pop(consumer_id, None)
            if not self._pending:
                self.tracker.clear()
            self._queue_for_redelivery(replay)
            self._register_draining_hashes(consumer_id, impacted)
            self.tracker.consumer_removed(consumer_id)
            return replay

    def pending_acks(self, consumer_id: int) -> PendingAcksMap:
        """The consumer's pending-acks map (KeyError if unknown)."""
        return self._pending[check_consumer_id("consumer_id", consumer_id)]

    def select(self, sticky_key_hash: int) -> int | None:
        return self.selector.select(sticky_key_hash)

    def dispatch(
        self, ledger_id: int, entry_id: int, sticky_key_hash: int, batch_size: int = 1
    ) -> DispatchResult:
        """A normal read of one entry: sent to the selected consumer if nothing holds it
        back, else held (and queued for redelivery unless the reason says otherwise)."""
        return self.dispatch_read([(ledger_id, entry_id, sticky_key_hash, batch_size)])[0]

    def dispatch_read(
        self, entries: Sequence[Entry], *, replay: bool = False
    ) -> list[DispatchResult]:
        """Pulsar's ``trySendMessagesToConsumers`` for one read of ``(ledger_id, entry_id,
        sticky_key_hash, batch_size)`` entries, in order: one result per entry. A replay
        read (of positions from ``get_messages_to_replay_now``) skips the redelivery-queue
        check and takes delivered entries off the queue. Every argument is checked before
        anything changes."""
        if not isinstance(replay, bool):
            raise TypeError(f"replay must be a bool, got {type(replay).__name__}")
        checked = [_entry(i, e) for i, e in enumerate(_sequence("entries", entries))]
        with self._lock:
            if not self._pending:
                return [_held(e, None, HoldReason.NO_CONSUMER) for e in checked]
            taken = checked if replay else checked[: self._normal_read_size()]
            results = self._filter_and_send(taken, replay)
            refused = [_held(e, None, HoldReason.LOOK_AHEAD_LIMIT) for e in checked[len(taken) :]]
            return results + refused

    def get_messages_to_replay_now(self, max_messages_to_read: int = 100) -> list[tuple[int, int]]:
        """Pulsar's replay filter: the queued positions a replay read takes now, in order
        (``max_messages_to_read`` at most, Pulsar's ``dispatcherMaxReadBatchSize`` 100 by
        default). A hash whose consumer has no permits or drains elsewhere is skipped with
        all its later positions."""
        limit = check_index("max_messages_to_read", max_messages_to_read, 0, 2**63 - 1)
        with self._lock:
            hashes = self.redelivery.sticky_key_hashes()
            consumers = {h: self.selector.select(h) for h in hashes}
            permits = self._read_permits(consumers.values())
            return self.redelivery.replay_positions(limit, consumers, permits, self.tracker)

    def flow(self, consumer_id: int, permits: int) -> None:
        """The consumer asks for ``permits`` more messages (Pulsar's ``consumerFlow``)."""
        consumer_id = check_consumer_id("consumer_id", consumer_id)
        permits = check_index("permits", permits, 0, 2**31 - 1)
        with self._lock:
            self.pending_acks(consumer_id)
            state = self._permits.setdefault(consumer_id, _Permits())
            state.available = min(state.available + permits, _UNLIMITED_PERMITS)

    def set_consumer_limits(
        self,
        consumer_id: int,
        *,
        max_unacked_messages: int | None = None,
        avg_messages_per_entry: int | None = None,
    ) -> None:
        """Sets the consumer's unacked-messages limit (0 = none) and the average messages
        per entry its remaining room is divided by; None leaves a setting as it is."""
        consumer_id = check_consumer_id("consumer_id", consumer_id)
        limit = None
        if max_unacked_messages is not None:
            limit = check_index("max_unacked_messages", max_unacked_messages, 0, 2**31 - 1)
        avg = None
        if avg_messages_per_entry is not None:
            avg = check_index("avg_messages_per_entry", avg_messages_per_entry, 1, 2**31 - 1)
        with self._lock:
            self.pending_acks(consumer_id)
            state = self._permits.setdefault(consumer_id, _Permits())
            state.max_unacked = state.max_unacked if limit is None else limit
            state.avg_per_entry = state.avg_per_entry if avg is None else avg

    def get_available_permits(self, consumer_id: int) -> int:
        """How many entries the dispatcher may send the consumer now (Pulsar's
        ``getAvailablePermits``); without flow control, 2**31 - 1 under its unacked limit."""
        consumer_id = check_consumer_id("consumer_id", consumer_id)
        with self._lock:
            self.pending_acks(consumer_id)
            return self._read_permits([consumer_id])[consumer_id]

    def get_effective_look_ahead_limit(self) -> int:
        """The redelivery-queue length at which normal reads stop, for the consumers now."""
        with self._lock:
            return get_effective_look_ahead_limit(len(self._pending), **self._look_ahead)

    def is_normal_read_allowed(self) -> bool:
        """Pulsar's ``isNormalReadAllowed``: the redelivery queue is below the look-ahead
        limit and some consumer has permits."""
        with self._lock:
            if len(self.redelivery) >= self.get_effective_look_ahead_limit():
                return False
            return any(p > 0 for p in self._read_permits(self._pending).values())

    def ack(self, consumer_id: int, ledger_id: int, entry_id: int) -> bool:
        """The consumer acked an entry; False if it was not pending there."""
        return self.pending_acks(consumer_id).remove(ledger_id, entry_id)

    def _normal_read_size(self) -> int:
        """Pulsar's ``getMaxEntriesReadLimit``: the room left under the look-ahead limit; 0
        once the redelivery queue is at the limit (``isNormalReadAllowed`` reads nothing)."""
        return max(self.get_effective_look_ahead_limit() - len(self.redelivery), 0)

    def _read_permits(self, consumers: Iterable[int | None]) -> dict[int, int]:
        """Each consumer's available permits, taken once per read."""
        out: dict[int, int] = {}
        for c in set(consumers) - {None}:
            assert c is not None
            state = self._permits.get(c, _Permits())
            available = state.available if self.flow_control else _UNLIMITED_PERMITS
            unacked = 0
            if state.max_unacked > 0:
                unacked = sum(a[2] for a in self._pending[c].to_list())
            out[c] = get_available_permits(
                available, state.max_unacked, unacked, state.avg_per_entry
            )
        return out

    def _filter_and_send(self, entries: list[Entry], replay: bool) -> list[DispatchResult]:
        if not entries:
            return []
        ledgers, entry_ids, hashes, _ = zip(*entries, strict=True)
        consumers = [self.selector.select(h) for h in hashes]
        permits = self._read_permits(consumers)
        decisions = self.redelivery.filter_read(
            ledgers, entry_ids, hashes, consumers, permits, replay, self.tracker
        )
        return [self._send(e, d) for e, d in zip(entries, decisions, strict=True)]

    def _send(self, entry: Entry, decision: tuple[str, int | None, int | None]) -> DispatchResult:
        kind, consumer, draining = decision
        ledger_id, entry_id, h, batch_size = entry
        if kind != "deliver":
            return _held(entry, consumer, _HOLDS[kind], draining, queued=True)
        assert consumer is not None
        if not self._pending[consumer].add_pending_ack_if_allowed(
            ledger_id, entry_id, batch_size, h
        ):
            self.redelivery.add(ledger_id, entry_id, h)
            return _held(entry, consumer, HoldReason.PENDING_ACK_REFUSED, queued=True)
        if self.flow_control:
            state = self._permits.setdefault(consumer, _Permits())
            state.available -= batch_size
        return DispatchResult(ledger_id, entry_id, h, consumer)

    def _queue_for_redelivery(self, acks: list[PendingAck]) -> None:
        """A leaving consumer's pending acks wait for redelivery; with no consumer left the
        queue empties, as Pulsar rewinds the cursor instead."""
        if not self._pending:
            self.redelivery.clear()
            return
        for ledger_id, entry_id, _, h in acks:
            self.redelivery.add(ledger_id, entry_id, h or None)

    def _register_draining_hashes(
        self, skip_consumer: int, impacted: ImpactedConsumersResult | None
    ) -> None:
        # The dispatcher's own selector always reports impacted consumers.
        assert impacted is not None
        register_draining_hashes(impacted, list(self._pending.values()), skip_consumer)


@dataclass
class _Permits:
    """A consumer's capacity as the dispatcher sees it."""

    available: int = 0
    max_unacked: int = 0
    avg_per_entry: int = 1


def _sequence(name: str, value: object) -> Sequence[object]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a sequence, got {type(value).__name__}")
    return value


def _entry(index: int, value: object) -> Entry:
    where = f"entries[{index}]"
    items = _sequence(where, value)
    if len(items) != 4:
        raise ValueError(
            f"{where} must be (ledger_id, entry_id, sticky_key_hash, batch_size), "
            f"got {len(items)} items"
        )
    ledger_id, entry_id, h, batch_size = items
    return (
        check_index(f"{where}.ledger_id", ledger_id, 0, 2**63 - 1),
        check_index(f"{where}.entry_id", entry_id, 0, 2**63 - 1),
        check_index(f"{where}.sticky_key_hash", h, 1, 0xFFFF),
        check_index(f"{where}.batch_size", batch_size, 0, 2**31 - 1),
    )


def _held(
    entry: Entry,
    consumer: int | None,
    reason: HoldReason,
    draining: int | None = None,
    queued: bool = False,
) -> DispatchResult:
    ledger_id, entry_id, h, _ = entry
    return DispatchResult(ledger_id, entry_id, h, consumer, reason, draining, queued)
