"""The broker side of one segment: PIP-486 entry dispatch by bucket owner, on keyshared's
dispatcher kernels.

* Routing: an entry goes whole to the consumer owning its bucket (no per-key hashing).
* In-flight window (Danube's, with its defects fixed): the routing key is the bucket, so
  one entry per bucket is in flight at a time. Per-key order then survives nacks, ack
  timeouts and poison handling, since nothing of a bucket overtakes an entry being retried.
  The window also keeps the segment's safe cursor, the per-consumer cap, and the retries,
  backoff and poison policy, run by its heartbeat.
* Hand-off (PIP-379 draining hashes, per bucket): each consumer's pending acks are a
  ``PendingAcksMap`` wired to the segment's ``DrainingHashesTracker`` under each bucket's
  canonical hash. When a bucket moves, keyshared's one hand-off rule
  (``register_draining_hashes``, as ``BucketHandoff`` and the dispatchers use it) registers
  the previous owner's pending acks in it as draining, and the bucket is withheld from the
  new owner (for first deliveries and for redeliveries alike) until they are acked.
* Checkpoints: each bucket's own sequence of entries has a safe cursor (PIP-486: the bucket
  is the unit of checkpointing), kept in the topic's ``BucketCheckpoints``.

The window's heartbeat picks the consumer of a redelivery with a Danube consumer state in
which each consumer's key filters are exactly the buckets it owns and may be sent, so the
one eligible consumer is the bucket's owner (and nobody while the bucket is withheld).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from keyshared._core import (
    BucketCheckpoints,
    InFlightWindow,
    KeySharedConsumerState,
    SubscriptionFailurePolicy,
)
from keyshared.dispatch.draining import DrainingHashesTracker, PendingAcksMap
from keyshared.scalable.batching import route_entry
from keyshared.scalable.layout import Segment
from keyshared.scalable.ownership import (
    BucketAssignment,
    ImpactedConsumersResult,
    assignment_ranges,
    impacted_consumers,
    moved_buckets,
    register_draining_hashes,
)
from keyshared.simulate.invariants import TopicChecker
from keyshared.simulate.model import Delivery, Entry
from keyshared.simulate.scenario import WindowSpec
from keyshared.simulate.store import TopicStore


class HandOff:
    """How a bucket changes owner: keyshared's one hand-off rule
    (:func:`keyshared.register_draining_hashes`, PIP-379's draining hashes per bucket). A
    connected consumer that loses a bucket has its pending acks in it registered as
    draining, which withholds the bucket from every other consumer until they are acked (or
    it leaves); a consumer that gets a bucket back releases what it still drained there.
    A subclass may replace it to check that the invariants catch a broken hand-off."""

    def hand_off(
        self, impacted: ImpactedConsumersResult, pending_acks: Sequence[PendingAcksMap]
    ) -> None:
        """The owners changed as ``impacted`` says; ``pending_acks`` are the maps of the
        connected consumers."""
        register_draining_hashes(impacted, pending_acks)


@dataclass(frozen=True)
class TopicContext:
    """What the dispatchers of one topic share."""

    name: str
    store: TopicStore
    checker: TopicChecker
    checkpoints: BucketCheckpoints
    handoff: HandOff
    window: WindowSpec
    #: Hands a copy to its consumer.
    deliver: Callable[[int, Delivery], None]
    #: Told when a sealed segment has just drained (the topic retires it).
    drained: Callable[[int], None]


def failure_policy(spec: WindowSpec) -> SubscriptionFailurePolicy:
    return SubscriptionFailurePolicy(
        max_redelivery_count=spec.max_redelivery_count,
        ack_timeout_ms=spec.ack_timeout_ms,
        base_redelivery_delay_ms=spec.base_redelivery_delay_ms,
        max_redelivery_delay_ms=spec.max_redelivery_delay_ms,
        backoff_strategy=spec.backoff_strategy,
        poison_policy=spec.poison_policy,
        dead_letter_topic="dead-letter" if spec.poison_policy == "dead_letter" else None,
    )


class SegmentDispatcher:
    """Dispatch of one segment's entries to the owners of its buckets.

    Invariants: at most one entry per bucket is in flight; a bucket's entries are sent in
    bucket order, an entry taken back from a departed consumer before any later one; a
    bucket whose previous owner still has pending acks in it is sent to nobody else.
    """

    def __init__(self, ctx: TopicContext, segment: Segment) -> None:
        self.ctx = ctx
        self.segment = segment
        self.segment_id = sid = segment.segment_id
        self.sealed = not segment.is_active
        n = segment.bucket_count
        self._keys = [str(b) for b in range(n)]
        self._hashes = [segment.canonical_bucket_hash(b) for b in range(n)]
        self._bucket_of_hash = {h: b for b, h in enumerate(self._hashes)}
        self._ranges = segment.bucket_ranges()
        spec = ctx.window
        self.window = InFlightWindow(
            max_window_size=spec.max_window_size,
            max_per_consumer=spec.max_per_consumer,
            failure_policy=failure_policy(spec),
        )
        # The safe cursor starts at offset 0 even if another bucket's entry goes first.
        self.window.record_polled(0)
        self.tracker = DrainingHashesTracker(self._unblocked, f"{ctx.name}/{segment.descriptor}")
        self._pending: dict[int, PendingAcksMap] = {}
        self.assignment = BucketAssignment((None,) * n)
        self.log = ctx.store.logs[sid]
        self._bucket_logs = [ctx.store.bucket_logs[(sid, b)] for b in range(n)]
        self._next = [0] * n
        self._returned: list[Entry | None] = [None] * n
        self._dirty: set[int] = set()
        self._starved: set[int] = set()
        self.withheld: dict[int, int] = {}
        self._ring: KeySharedConsumerState | None = None
        for b in range(n):
            ctx.checkpoints.open(sid, b, 0)
        self.done = 0
        self.done_messages = 0
        self.stored_messages = 0
        self.rates = [0, 0, 0, 0]  # cumulative messages in, bytes in, messages out, bytes out
        self.processing: set[int] = set()
        self.max_processing = 0
        self.handoff_waits_us: list[int] = []

    @property
    def bucket_count(self) -> int:
        return len(self._keys)

    @property
    def backlog_messages(self) -> int:
        return self.stored_messages - self.done_messages

    @property
    def drained(self) -> bool:
        """Sealed, and every entry it will ever hold is done."""
        return self.sealed and self.done == len(self.log)

    # --- input ------------------------------------------------------------------------

    def appended(self, entries: Sequence[Entry]) -> None:
        """Entries were stored in this segment (the store holds them). The broker queues
        each by its stamped hashB range alone, which must give the bucket the producer
        batched it in."""
        segment, assignment = self.segment, self.assignment
        for entry in entries:
            bucket, _ = route_entry(segment, entry.hash_min, entry.hash_max, assignment)
            if bucket != entry.bucket:
                raise self.ctx.checker.fail(
                    "entry-bucket", f"{entry} routes to bucket {bucket} by its hashB range"
                )
            self._dirty.add(bucket)
            self.stored_messages += entry.count
            self.rates[0] += entry.count
            self.rates[1] += entry.size

    def reassign(self, now_us: int, new: BucketAssignment, connected: set[int]) -> int:
        """Gives the buckets to their new owners; returns how many moved. A connected
        consumer that lost buckets drains its pending acks in them first."""
        impacted = impacted_consumers(
            assignment_ranges(self._ranges, self.assignment), assignment_ranges(self._ranges, new)
        )
        moves = moved_buckets(self.assignment, new)
        maps = [m for c, m in self._pending.items() if c in connected]
        self.ctx.handoff.hand_off(impacted, maps)
        self.assignment = new
        for move in moves:
            self.ctx.checker.trail.add(
                now_us,
                self.ctx.name,
                "move",
                f"segment {self.segment_id} bucket {move.bucket}",
                f"{move.from_consumer} -> {move.to_consumer}",
            )
            self._dirty.add(move.bucket)
        self._refresh_withheld(now_us, (m.bucket for m in moves))
        self._ring = None
        return len(moves)

    # --- dispatch ---------------------------------------------------------------------

    def pump(self, now_us: int) -> None:
        """Sends what can be sent now: per dirty bucket, its next entry to its owner."""
        if not self._dirty:
            return
        now_ms = now_us // 1000
        for b in sorted(self._dirty):
            self._send_next(now_us, now_ms, b)
        self._dirty.clear()

    def _send_next(self, now_us: int, now_ms: int, b: int) -> None:
        owner = self.assignment.owners[b]
        entry = self._peek(b)
        if owner is None or entry is None:
            return
        window, key = self.window, self._keys[b]
        if window.is_key_active(key):
            return  # the ack of the entry in flight wakes the bucket
        if not window.has_capacity() or not window.consumer_has_capacity(owner):
            self._starved.add(b)  # any ack in this segment wakes it
            return
        chash = self._hashes[b]
        if self.tracker.should_block_sticky_key_hash(owner, chash):
            return  # withheld: the tracker's unblocking handler wakes it
        pending = self._pending_of(owner)
        if not pending.add_pending_ack_if_allowed(
            self.segment_id, entry.offset, entry.count, chash
        ):
            raise self.ctx.checker.fail(
                "handoff", f"{entry}: the pending-acks map of consumer {owner} refused it"
            )
        window.mark_dispatched(entry.offset, key, owner, now_ms)
        self._take(b)
        self._send(now_us, Delivery(entry, owner, 1, self))

    def _send(self, now_us: int, delivery: Delivery) -> None:
        self.rates[2] += delivery.entry.count
        self.rates[3] += delivery.entry.size
        self.ctx.checker.delivered(delivery)
        self.ctx.deliver(now_us, delivery)

    def _peek(self, b: int) -> Entry | None:
        returned = self._returned[b]
        if returned is not None:
            return returned
        log, i = self._bucket_logs[b], self._next[b]
        return log[i] if i < len(log) else None

    def _take(self, b: int) -> None:
        if self._returned[b] is not None:
            self._returned[b] = None
        else:
            self._next[b] += 1

    def _pending_of(self, consumer_id: int) -> PendingAcksMap:
        pending = self._pending.get(consumer_id)
        if pending is None:
            pending = self._pending[consumer_id] = PendingAcksMap(consumer_id, self.tracker)
        return pending

    def _unblocked(self, sticky_key_hash: int) -> None:
        # Runs inside a pending-acks removal: only note what to look at again.
        if sticky_key_hash < 0:
            self._dirty.update(self.withheld)
        else:
            self._dirty.add(self._bucket_of_hash[sticky_key_hash])

    # --- consumer feedback ------------------------------------------------------------

    def ack(self, now_us: int, delivery: Delivery) -> None:
        """The consumer processed its copy and acks it."""
        entry, consumer_id = delivery.entry, delivery.consumer_id
        checker = self.ctx.checker
        checker.now_us = now_us
        checker.acked(delivery)
        self._pending_of(consumer_id).remove(self.segment_id, entry.offset)
        key, cursor = self.window.on_ack(entry.offset)
        if key is not None:
            self._settle(now_us, entry, given_up=False)
        if cursor is not None:
            checker.cursor_moved(self.log, self.segment_id, cursor)
        self._woken(now_us, entry.bucket)
        self._after(now_us)

    def nack(self, now_us: int, delivery: Delivery) -> None:
        """The consumer failed to process its copy: the window schedules a retry."""
        entry = delivery.entry
        self.ctx.checker.now_us = now_us
        self.ctx.checker.released(delivery, "nack")
        self._pending_of(delivery.consumer_id).remove(self.segment_id, entry.offset)
        self.window.on_nack(entry.offset, now_us // 1000, reason="processing failed")
        self._woken(now_us, entry.bucket)
        self._after(now_us)

    def _after(self, now_us: int) -> None:
        self.pump(now_us)
        if self.drained:
            self.ctx.drained(now_us)

    def _woken(self, now_us: int, bucket: int) -> None:
        self._dirty.add(bucket)
        if self._starved:
            self._dirty.update(self._starved)
            self._starved.clear()
        if self.withheld:
            self._refresh_withheld(now_us, list(self.withheld))

    def _settle(self, now_us: int, entry: Entry, *, given_up: bool) -> None:
        """``entry`` is done: every other copy of it is now a duplicate-in-waiting."""
        checker, checkpoints = self.ctx.checker, self.ctx.checkpoints
        checker.settled(entry)
        b = entry.bucket
        if given_up:
            position = checkpoints.skip(self.segment_id, b, entry.bucket_offset)
        else:
            position = checkpoints.ack(self.segment_id, b, entry.bucket_offset)
        if position is not None:
            checker.checkpoint_moved(self._bucket_logs[b], self.segment_id, b, position)
        self.done += 1
        self.done_messages += entry.count

    def remove_consumer(self, now_us: int, consumer_id: int) -> None:
        """A consumer left (its copies were released already): its pending acks are taken
        back, to go first to each bucket's next owner, and it drains nothing any more."""
        pending = self._pending.pop(consumer_id, None)
        offsets: list[int] = []
        if pending is not None:
            pending.for_each_and_close(lambda _ledger, entry_id, _n, _h: offsets.append(entry_id))
        self.tracker.consumer_removed(consumer_id)
        for offset in offsets:
            if self.window.remove_entry(offset) is not None:
                entry = self.log[offset]
                self._returned[entry.bucket] = entry
                self._dirty.add(entry.bucket)
        self._dirty.update(self.withheld)
        self._refresh_withheld(now_us, list(self.withheld))

    # --- retries ----------------------------------------------------------------------

    def heartbeat(self, now_us: int) -> None:
        """The window's heartbeat: ack timeouts, redeliveries to the bucket's owner (none
        while withheld), and the poison policy for entries out of redeliveries."""
        if not self.window.in_flight_count:
            return
        self._refresh_withheld(now_us, list(self.withheld))
        checker = self.ctx.checker
        checker.now_us = now_us
        actions, cursor = self.window.handle_heartbeat(now_us // 1000, self._consumer_state())
        for action in actions:
            offset, target = action.offset, action.consumer_id
            assert offset is not None
            entry = self.log[offset]
            if action.kind == "redeliver" and target is not None:
                self._redeliver(now_us, entry, target, action.attempt)
            elif action.kind in ("drop", "dead_letter"):
                checker.given_up(entry, action.kind)
                self._settle(now_us, entry, given_up=True)
                self._dirty.add(entry.bucket)
            else:
                raise RuntimeError(f"unexpected window action {action!r}")
        if cursor is not None:
            checker.cursor_moved(self.log, self.segment_id, cursor)
        self._after(now_us)

    def _redeliver(self, now_us: int, entry: Entry, target: int, attempt: int) -> None:
        chash = self._hashes[entry.bucket]
        pending = self._pending_of(target)
        if not pending.add_pending_ack_if_allowed(
            self.segment_id, entry.offset, entry.count, chash
        ):
            raise self.ctx.checker.fail(
                "handoff", f"{entry} redelivered to consumer {target}, whose bucket is draining"
            )
        entry.redelivered = True
        self._send(now_us, Delivery(entry, target, attempt, self))

    def _consumer_state(self) -> KeySharedConsumerState:
        """The Danube consumer state whose filters make each bucket's owner the one
        eligible consumer for it (and nobody for a withheld bucket)."""
        if self._ring is None:
            ring = KeySharedConsumerState()
            for consumer_id, buckets in sorted(self.assignment.by_consumer().items()):
                keys = [self._keys[b] for b in buckets if b not in self.withheld]
                # An empty filter list would accept every key.
                if keys:
                    ring.add_consumer(consumer_id, keys)
            self._ring = ring
        return self._ring

    def _refresh_withheld(self, now_us: int, buckets: Iterable[int]) -> None:
        """Re-reads, for ``buckets``, whether another consumer still drains them."""
        for b in buckets:
            owner = self.assignment.owners[b]
            entry = self.tracker.get_entry(self._hashes[b])
            withheld = owner is not None and entry is not None and entry.consumer_id != owner
            if withheld and b not in self.withheld:
                self.withheld[b] = now_us
                self._ring = None
            elif not withheld and b in self.withheld:
                self.handoff_waits_us.append(now_us - self.withheld.pop(b))
                self._dirty.add(b)
                self._ring = None

    # --- processing parallelism -------------------------------------------------------

    def processing_started(self, consumer_id: int) -> None:
        self.processing.add(consumer_id)
        self.max_processing = max(self.max_processing, len(self.processing))

    def processing_stopped(self, consumer_id: int) -> None:
        self.processing.discard(consumer_id)

    # --- retirement -------------------------------------------------------------------

    def retire(self) -> None:
        """Closes the drained segment's checkpoints; each must end on its bucket's last
        entry."""
        for b, log in enumerate(self._bucket_logs):
            position = self.ctx.checkpoints.close(self.segment_id, b)
            expected = len(log) - 1 if log else None
            if position != expected:
                raise self.ctx.checker.fail(
                    "cursor",
                    f"segment {self.segment_id} bucket {b} drained with its checkpoint at"
                    f" {position}, not {expected}",
                )


__all__ = ["HandOff", "SegmentDispatcher", "TopicContext", "failure_policy"]
