"""The simulator's invariant checker: every delivery, processing, give-up and cursor move is
checked as it happens, and the first violation stops the run with the trail of events
that led to it.

The invariants, per topic:

* **key order**: a key's messages are processed for the first time in storage order, across
  splits, merges, rebuckets and bucket hand-offs (a message given up on by the poison
  policy counts as passed, in its place);
* **exclusive keys**: at no time do two consumers hold unacked messages of one key (a
  consumer holds a message from its delivery until it acks or nacks it, or disconnects);
* **no duplicates** outside the at-least-once retry case: an entry is processed a second
  time only if the broker redelivered it (after an ack timeout);
* **no loss**: once a run has drained, every entry was processed or given up on by the
  poison policy (``drop`` or ``dead_letter``, which the summary reports);
* **safe cursors**: neither a segment's safe cursor nor a per-(segment, bucket) checkpoint
  ever passes an entry that is not done.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from keyshared.simulate.model import Delivery, Entry

#: How many events a violation reports.
TRAIL_LENGTH = 400


class InvariantViolation(RuntimeError):
    """An invariant failed. ``invariant`` names it (``key-order``, ``exclusive-keys``,
    ``duplicate``, ``lost``, ``cursor``, ``entry-bucket``, ``handoff``); ``at_ms`` is the
    virtual time; ``trail`` the last events before it, oldest first."""

    def __init__(self, invariant: str, message: str, at_ms: float, trail: Sequence[str]) -> None:
        super().__init__(f"[{invariant}] at {at_ms:.3f} ms: {message}")
        self.invariant = invariant
        self.message = message
        self.at_ms = at_ms
        self.trail = tuple(trail)

    def report(self) -> str:
        """The violation and its event trail, for people."""
        lines = [str(self), f"last {len(self.trail)} events:"]
        lines.extend(f"  {line}" for line in self.trail)
        return "\n".join(lines)


class EventTrail:
    """The last :data:`TRAIL_LENGTH` events of a run. Events are stored as tuples and only
    formatted when a violation reports them, so recording costs little."""

    def __init__(self, length: int = TRAIL_LENGTH) -> None:
        self._events: deque[tuple[int, str, str, tuple[object, ...]]] = deque(maxlen=length)

    def add(self, now_us: int, topic: str, kind: str, *detail: object) -> None:
        self._events.append((now_us, topic, kind, detail))

    def lines(self) -> list[str]:
        return [
            f"{now_us / 1000:12.3f} ms  {topic}  {kind} " + " ".join(str(d) for d in detail)
            for now_us, topic, kind, detail in self._events
        ]


@dataclass
class CheckCounts:
    """How many checks of each kind passed (reported in the summary)."""

    deliveries: int = 0
    redeliveries: int = 0
    processings: int = 0
    duplicates: int = 0
    late_after_give_up: int = 0
    dropped: int = 0
    dead_lettered: int = 0
    cursor_moves: int = 0
    checkpoint_moves: int = 0


class TopicChecker:
    """The invariants of one topic over its key space (``key_count`` key ids)."""

    def __init__(self, topic: str, key_count: int, trail: EventTrail) -> None:
        self.topic = topic
        self.trail = trail
        self.counts = CheckCounts()
        # Per key: the consumer holding unacked messages of it (-1: none), how many copies
        # it holds, and the rank of the next message to be processed for the first time.
        self._holder = np.full(key_count, -1, dtype=np.int64)
        self._held = np.zeros(key_count, dtype=np.int64)
        self._next = np.zeros(key_count, dtype=np.int64)
        self._verified: dict[tuple[int, int], int] = {}
        self.now_us = 0

    def fail(self, invariant: str, message: str) -> InvariantViolation:
        return InvariantViolation(
            invariant, f"{self.topic}: {message}", self.now_us / 1000, self.trail.lines()
        )

    def delivered(self, delivery: Delivery) -> None:
        """A copy reached its consumer: no other consumer may hold unacked messages of its
        keys."""
        entry, consumer_id = delivery.entry, delivery.consumer_id
        self.trail.add(
            self.now_us,
            self.topic,
            "deliver",
            entry,
            "to",
            consumer_id,
            "attempt",
            delivery.attempt,
        )
        keys = entry.keys
        holders = self._holder[keys]
        clash = (holders != -1) & (holders != consumer_id)
        if np.count_nonzero(clash):
            i = int(np.argmax(clash))
            raise self.fail(
                "exclusive-keys",
                f"{entry} delivered to consumer {consumer_id} while consumer"
                f" {int(holders[i])} holds unacked messages of key id {int(keys[i])}",
            )
        self._hold(delivery)
        self.counts.deliveries += 1
        self.counts.redeliveries += delivery.attempt > 1

    def _hold(self, delivery: Delivery) -> None:
        keys = delivery.entry.keys
        self._holder[keys] = delivery.consumer_id
        self._held[keys] += 1
        delivery.entry.copies.append(delivery)

    def _unhold(self, delivery: Delivery) -> None:
        keys = delivery.entry.keys
        self._held[keys] -= 1
        self._holder[keys[self._held[keys] == 0]] = -1
        delivery.entry.copies.remove(delivery)

    def released(self, delivery: Delivery, why: str) -> None:
        """The consumer no longer holds its copy, unprocessed (``why``: it nacked it, or
        disconnected). A stale copy held nothing any more."""
        self.trail.add(self.now_us, self.topic, why, delivery.entry, "by", delivery.consumer_id)
        if not delivery.stale:
            self._unhold(delivery)

    def settled(self, entry: Entry) -> None:
        """The broker counts ``entry`` done (acked, or given up on): copies still out are
        at-least-once duplicates-in-waiting and no longer hold its keys."""
        for delivery in list(entry.copies):
            self._unhold(delivery)
            delivery.stale = True

    def acked(self, delivery: Delivery) -> None:
        """A consumer processed its copy and acks it: the first processing of an entry must
        come in key order, a later one only after a redelivery. The copy is held no more."""
        entry, consumer_id = delivery.entry, delivery.consumer_id
        self.trail.add(self.now_us, self.topic, "ack", entry, "by", consumer_id)
        if entry.processed == 0 and entry.given_up is None:
            self._pass_in_order(entry, f"processed by consumer {consumer_id}")
            entry.processed_us = self.now_us
        elif entry.processed == 0:
            self.counts.late_after_give_up += 1
        elif entry.redelivered:
            self.counts.duplicates += 1
        else:
            raise self.fail(
                "duplicate",
                f"{entry} processed again by consumer {consumer_id} although it was never"
                " redelivered",
            )
        entry.processed += 1
        self.counts.processings += 1
        if not delivery.stale:
            self._unhold(delivery)

    def given_up(self, entry: Entry, how: str) -> None:
        """The broker gave up on ``entry`` (``how``: ``drop`` or ``dead_letter``)."""
        self.trail.add(self.now_us, self.topic, how, entry)
        if entry.processed == 0:
            self._pass_in_order(entry, how)
        entry.given_up = how
        if how == "drop":
            self.counts.dropped += 1
        else:
            self.counts.dead_lettered += 1

    def _pass_in_order(self, entry: Entry, what: str) -> None:
        keys = entry.keys
        expected = self._next[keys]
        wrong = expected != entry.first_ranks
        if np.count_nonzero(wrong):
            i = int(np.argmax(wrong))
            raise self.fail(
                "key-order",
                f"{entry} {what}: key id {int(keys[i])} is at message"
                f" #{int(entry.first_ranks[i])} but message #{int(expected[i])} comes first",
            )
        self._next[keys] = entry.first_ranks + entry.key_counts

    def cursor_moved(self, log: Sequence[Entry], segment_id: int, position: int) -> None:
        """A segment's safe cursor moved to ``position``: every entry up to it must be done."""
        self.trail.add(self.now_us, self.topic, "cursor", f"segment {segment_id} -> {position}")
        self._verify(log, (segment_id, -1), position, f"segment {segment_id}'s safe cursor")
        self.counts.cursor_moves += 1

    def checkpoint_moved(
        self, log: Sequence[Entry], segment_id: int, bucket: int, position: int
    ) -> None:
        """A per-(segment, bucket) checkpoint moved to ``position`` (in bucket order)."""
        self._verify(
            log,
            (segment_id, bucket),
            position,
            f"the checkpoint of bucket {bucket} of segment {segment_id}",
        )
        self.counts.checkpoint_moves += 1

    def _verify(
        self, log: Sequence[Entry], where: tuple[int, int], position: int, what: str
    ) -> None:
        start = self._verified.get(where, -1) + 1
        if position >= len(log):
            raise self.fail("cursor", f"{what} is at {position}, past the end ({len(log)})")
        for entry in log[start : position + 1]:
            if not entry.done:
                raise self.fail("cursor", f"{what} passed {entry}, which is not done")
        self._verified[where] = max(position, start - 1)

    def finished(self, logs: Sequence[Sequence[Entry]]) -> None:
        """The run drained: nothing may be left undone, and no consumer may hold anything."""
        for log in logs:
            for entry in log:
                if not entry.done:
                    raise self.fail("lost", f"{entry} was never processed nor given up on")
        if np.count_nonzero(self._held):
            key = int(np.argmax(self._held != 0))
            raise self.fail("exclusive-keys", f"key id {key} is still held after the run")


__all__ = ["CheckCounts", "EventTrail", "InvariantViolation", "TopicChecker"]
