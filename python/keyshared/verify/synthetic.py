"""Valid ``keyshared verify`` records made without a broker, for demos, tests and benchmarks.

:func:`synthetic_run` plays a Key_Shared broker with keyshared's own
:class:`~keyshared.StickyKeyDispatcher` (one per partition) and writes down what its
consumers would see: messages of ``keys`` keys published in batches, consumers joining,
leaving (closing, crashing, timing out after a stall), stalling, acking a little behind
what they received and nacking now and then, and the broker's stats at each membership
change. The record is what a broker that keeps Key_Shared's promises, and matches the
model, would give: :func:`keyshared.verify.checker.check` passes it, and a change to it
shows what the checker catches (``keyshared verify --check RECORD.json``).

The broker here reads each published batch once, delivers to a consumer's inbox in the
order it sends, and after every ack, nack, join or leave reads its redelivery queue while
that lets entries through, :data:`~keyshared.verify.checker.REPLAY_BATCH` positions a read;
it never lets the last consumer go, so no read finds no consumer. Moments advance 1 ms an
event from :data:`START_MS`.
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from keyshared._checks import check_int, check_rate
from keyshared.dispatch import DispatchResult, StickyKeyDispatcher
from keyshared.errors import InvalidArgument
from keyshared.routing import sticky_key_hash
from keyshared.verify.checker import REPLAY_BATCH
from keyshared.verify.record import (
    NOT_PARTITIONED,
    Event,
    Leave,
    Message,
    RunRecord,
    ScenarioRecord,
    Stats,
)

#: The first moment of a synthetic run, in ms since the epoch (2023-11-14T22:13:20Z).
START_MS = 1_700_000_000_000.0

#: The ledger id of partition p's entries is ``LEDGER + max(p, 0)``.
LEDGER = 100


@dataclass(frozen=True)
class SyntheticWorkload:
    """What :func:`synthetic_run` plays: ``messages`` messages over ``keys`` keys
    (``key-0`` ...), drawn uniformly, published ``batch`` at a time; ``consumers`` consumers
    at the start, ``joins`` more and ``leaves`` leaving (``close``, ``crash`` and
    ``timeout`` in turn) at random batches, ``stalls`` stalls of ``stall_batches`` batches
    each; after each batch every consumer that is not stalled takes its inbox and acks all
    but its last 0 to ``max_lag`` messages, each nacked instead with ``nack_probability``.
    At the end every consumer takes and acks everything, so every message is acked once
    (and delivered again only after a nack or a leave). ``partitions`` 0 is a
    non-partitioned topic; ``points`` are the ring's points per consumer."""

    messages: int = 10_000
    keys: int = 100
    consumers: int = 3
    joins: int = 1
    leaves: int = 1
    stalls: int = 0
    stall_batches: int = 2
    batch: int = 100
    max_lag: int = 2
    nack_probability: float = 0.0
    partitions: int = 0
    points: int = 100
    seed: int = 0
    name: str = "synthetic"
    allow_out_of_order: bool = False

    def __post_init__(self) -> None:
        check_int("messages", self.messages, minimum=0)
        check_int("keys", self.keys, minimum=1)
        check_int("consumers", self.consumers, minimum=1)
        check_int("joins", self.joins, minimum=0)
        check_int("leaves", self.leaves, minimum=0, maximum=self.consumers + self.joins - 1)
        check_int("stalls", self.stalls, minimum=0)
        check_int("stall_batches", self.stall_batches, minimum=1)
        check_int("batch", self.batch, minimum=1)
        check_int("max_lag", self.max_lag, minimum=0)
        if not check_rate("nack_probability", self.nack_probability) < 1.0:
            raise InvalidArgument(
                f"nack_probability must be below 1, got {self.nack_probability}",
                argument="nack_probability",
            )
        check_int("partitions", self.partitions, minimum=0)
        check_int("points", self.points, minimum=1, maximum=65_536)
        check_int("seed", self.seed, minimum=0)


def synthetic_run(workload: SyntheticWorkload | None = None) -> RunRecord:
    """A record of one scenario (``workload.name``) that a broker keeping Key_Shared's
    promises would give for ``workload`` (the defaults without one)."""
    workload = workload or SyntheticWorkload()
    scenario = ScenarioRecord(workload.name, f"verify-{workload.name}")
    _Broker(workload, scenario).play()
    return RunRecord(
        topic=f"persistent://public/default/keyshared-verify-{workload.name}",
        partitions=workload.partitions,
        pulsar_version="master",
        broker_version=None,
        allow_out_of_order=workload.allow_out_of_order,
        seed=workload.seed,
        points=workload.points,
        scenarios=[scenario],
    )


class _Broker:
    """The broker and its consumers, writing the scenario's log as it goes."""

    def __init__(self, workload: SyntheticWorkload, scenario: ScenarioRecord) -> None:
        self.w = workload
        self.rng = random.Random(workload.seed)
        self.scenario = scenario
        self.events: list[Event] = scenario.events
        partitions = range(workload.partitions) if workload.partitions else [NOT_PARTITIONED]
        self.dispatchers = {p: StickyKeyDispatcher(workload.points) for p in partitions}
        self.keys = [f"key-{i}" for i in range(workload.keys)]
        self.hashes = [sticky_key_hash(k) for k in self.keys]
        #: Each partition's send indexes by entry id (one ledger a partition).
        self.by_entry: dict[int, list[int]] = {p: [] for p in partitions}
        self.message_hashes: list[int] = []
        self.ids: dict[str, int] = {}
        self.labels: list[str] = []
        self.inbox: dict[str, deque[int]] = {}
        self.unacked: dict[str, list[int]] = {}
        self.stalled: dict[str, int] = {}
        self.deliveries: list[int] = []
        self.now = START_MS

    def log(self, *fields: object) -> float:
        """Appends the event of kind ``fields[0]`` and the rest, 1 ms after the last."""
        self.now += 1.0
        self.events.append((fields[0], self.now, *fields[1:]))
        return self.now

    # --- the run -------------------------------------------------------------------------

    def play(self) -> None:
        w = self.w
        self.log("scenario", w.name)
        for _ in range(w.consumers):
            self.join()
        batches = -(-w.messages // w.batch)
        plan = self._plan(batches)
        for step in range(batches):
            for change in plan.get(step, []):
                change()
            self._resume_due()
            self.publish(min(w.batch, w.messages - step * w.batch))
            live = [c for c in self.ids if c not in self.stalled]
            self.rng.shuffle(live)
            for label in live:
                self.receive(label)
                self.acks(label, self.rng.randint(0, w.max_lag), w.nack_probability)
        self.drain()
        self.stats()

    def _plan(self, batches: int) -> dict[int, list[Callable[[], None]]]:
        """The membership changes and stalls, each at a random batch; a leave is drawn only
        while another consumer stays."""
        w = self.w
        joins, leaves, live = w.joins, w.leaves, w.consumers
        ordered: list[str] = []
        while joins or leaves:
            # leaves <= live - 1 + joins holds throughout, so a join is left when none may leave.
            may_leave = leaves and live > 1
            if joins and (not may_leave or self.rng.random() < joins / (joins + leaves)):
                ordered.append("join")
                joins, live = joins - 1, live + 1
            else:
                ordered.append("leave")
                leaves, live = leaves - 1, live - 1
        steps = sorted(self.rng.randrange(max(1, batches)) for _ in ordered)
        hows = itertools.cycle([Leave.CLOSE, Leave.CRASH, Leave.TIMEOUT])
        plan: dict[int, list[Callable[[], None]]] = {}
        for step, kind in zip(steps, ordered, strict=True):
            change = self.join if kind == "join" else self._leaver(next(hows))
            plan.setdefault(step, []).append(change)
        for _ in range(w.stalls):
            plan.setdefault(self.rng.randrange(max(1, batches)), []).append(self.stall)
        return plan

    def drain(self) -> None:
        """Every stalled consumer resumes; all take and ack everything, until no message
        is in an inbox, unacked or queued."""
        for label in list(self.stalled):
            self.resume(label)
        while any(self.inbox.values()) or any(self.unacked.values()):
            for label in list(self.ids):
                self.receive(label)
                self.acks(label, 0, 0.0)

    # --- membership ----------------------------------------------------------------------

    def join(self) -> None:
        cid = len(self.labels)
        label = f"c{cid}"
        self.labels.append(label)
        for d in self.dispatchers.values():
            d.add_consumer(cid, label)
        self.ids[label] = cid
        self.inbox[label] = deque()
        self.unacked[label] = []
        self.log("join", label, label)
        self.settle_all()
        self.stats()

    def _leaver(self, how: Leave) -> Callable[[], None]:
        def leave() -> None:
            label = self.rng.choice(list(self.ids))
            if how is Leave.TIMEOUT and label not in self.stalled:
                self.log("stall", label)
            self.leave(label, how)

        return leave

    def leave(self, label: str, how: Leave) -> None:
        """What it received and did not ack goes back to the queue, with what it had not
        received yet (the broker had sent it)."""
        cid = self.ids.pop(label)
        for d in self.dispatchers.values():
            d.remove_consumer(cid)
        del self.inbox[label], self.unacked[label]
        self.stalled.pop(label, None)
        self.log("leave", label, how.value)
        self.settle_all()
        self.stats()

    def stall(self) -> None:
        candidates = [c for c in self.ids if c not in self.stalled]
        if candidates:
            label = self.rng.choice(candidates)
            self.stalled[label] = self.w.stall_batches
            self.log("stall", label)

    def _resume_due(self) -> None:
        """Stalls count down a batch at a time."""
        for label in list(self.stalled):
            self.stalled[label] -= 1
            if self.stalled[label] < 0:
                self.resume(label)

    def resume(self, label: str) -> None:
        del self.stalled[label]
        self.log("resume", label)

    # --- messages ------------------------------------------------------------------------

    def publish(self, count: int) -> None:
        first = len(self.scenario.messages)
        by_partition: dict[int, list[int]] = {}
        for i in range(first, first + count):
            k = self.rng.randrange(self.w.keys)
            h = self.hashes[k]
            p = h % self.w.partitions if self.w.partitions else NOT_PARTITIONED
            entry = len(self.by_entry[p])
            self.by_entry[p].append(i)
            self.message_hashes.append(h)
            self.deliveries.append(0)
            ledger = LEDGER + max(p, 0)
            self.scenario.messages.append(Message(i, self.keys[k], p, ledger, entry, self.now))
            by_partition.setdefault(p, []).append(i)
        self.log("publish", first, count)
        for p, indexes in by_partition.items():
            self.read(p, indexes, replay=False)

    def read(self, p: int, indexes: list[int], *, replay: bool) -> bool:
        """One read: each delivered entry to its consumer's inbox; True when any was."""
        ledger = LEDGER + max(p, 0)
        entries = [
            (ledger, self.scenario.messages[i].entry_id, self.message_hashes[i], 1) for i in indexes
        ]
        sent = False
        results = self.dispatchers[p].dispatch_read(entries, replay=replay)
        for i, r in zip(indexes, results, strict=True):
            sent |= self._sent(i, r)
        return sent

    def _sent(self, i: int, r: DispatchResult) -> bool:
        if r.delivered:
            self.inbox[self.labels[r.consumer_id or 0]].append(i)
            return True
        if not r.queued_for_redelivery:
            raise InvalidArgument(
                f"the workload outgrew the broker's look-ahead limit (message {i} was not"
                " read): use fewer stall batches or smaller batches",
                argument="stall_batches",
            )
        return False

    def settle_all(self) -> None:
        for p in self.dispatchers:
            self.settle(p)

    def settle(self, p: int) -> None:
        """The redelivery queue read while it lets entries through, as the checker's model
        reads it."""
        d = self.dispatchers[p]
        while len(d.redelivery):
            positions = d.get_messages_to_replay_now(REPLAY_BATCH)
            indexes = [self.by_entry[p][entry] for _, entry in positions]
            if not self.read(p, indexes, replay=True):
                break

    def receive(self, label: str) -> None:
        inbox, unacked = self.inbox[label], self.unacked[label]
        while inbox:
            i = inbox.popleft()
            self.log("deliver", label, i, self.deliveries[i])
            self.deliveries[i] += 1
            unacked.append(i)

    def acks(self, label: str, lag: int, nack_probability: float) -> None:
        """Acks (or nacks) all it received but the last ``lag``, oldest first."""
        unacked = self.unacked[label]
        done, self.unacked[label] = unacked[: len(unacked) - lag], unacked[len(unacked) - lag :]
        cid = self.ids[label]
        for i in done:
            m = self.scenario.messages[i]
            d = self.dispatchers[m.partition]
            if nack_probability and self.rng.random() < nack_probability:
                self.log("nack", label, i)
                if d.pending_acks(cid).remove(m.ledger_id, m.entry_id):
                    d.redelivery.add(m.ledger_id, m.entry_id, self.message_hashes[i])
            else:
                self.log("ack", label, i)
                d.ack(cid, m.ledger_id, m.entry_id)
            if len(d.redelivery):
                self.settle(m.partition)

    def stats(self) -> None:
        stats: Stats = {}
        for p, d in self.dispatchers.items():
            ranges = d.selector.get_consumer_key_hash_ranges()
            for label, cid in self.ids.items():
                draining = d.tracker.consumer_stats(cid).draining_hashes
                stats.setdefault(label, {})[p] = {
                    "ranges": [[r.start, r.end] for r in ranges.get(cid, [])],
                    "draining": [[h.hash, h.unack_msgs] for h in draining],
                }
        self.log("stats", stats)


__all__ = ["LEDGER", "START_MS", "SyntheticWorkload", "synthetic_run"]
