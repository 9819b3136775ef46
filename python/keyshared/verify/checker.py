"""The offline half of ``keyshared verify``: what a recorded run broke of Key_Shared's promises
and of keyshared's model of the release.

:func:`check` reads each scenario of a :class:`~keyshared.verify.record.RunRecord` once, event
by event in the log's order, and holds six rules (:data:`RULES`):

- ``lost``: every message the broker acknowledged on send is acknowledged by some consumer by
  the end of the scenario;
- ``order``: each consumer receives each key's messages in send order; a redelivery of a
  message that was nacked, or that its consumer left holding unacked, may come late;
- ``exclusive``: no key is in flight on two live consumers at once. A delivery is in flight
  from its ``deliver`` event to its consumer's ``ack`` or ``nack`` of it, that consumer's
  ``leave``, or the scenario's end; the log's order is causal (see the record module), so
  two spans overlap when one consumer receives a key while another, still live, holds it;
- ``model``: each delivery goes to the consumer keyshared's
  :class:`~keyshared.StickyKeyDispatcher` (one per partition, fed the same log) sent it to,
  after the model sent it; a delivery elsewhere, one the model holds back, or one the model
  sent that never came, breaks it;
- ``duplicate``: a message comes again only after a nack of it or after the consumer holding
  it unacked left (at-least-once allows those; they are counted, not violations). A message
  once nacked may come again even after its ack: Pulsar's acks are not confirmed, and on a
  loaded machine a 5.0.0-M1 broker sent nacked messages a third time, after the consumer had
  acked their redelivery (at-least-once allows it); the model cannot say when, so such a
  delivery is counted, not predicted;
- ``stats``: at each ``stats`` event, each consumer's hash ranges and draining hashes equal
  the model's, partition by partition.

Counts and costs: one pass over the log, a dict or list operation or two per event and one
native call per publish read and per ack; the model replays its redelivery queue only while
that queue holds entries. A scenario keeps the first :data:`KEPT_PER_RULE` violations of each
rule (by log order) and counts them all.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, itemgetter
from types import MappingProxyType
from typing import Any

from keyshared.dispatch import DispatchResult, HoldReason, StickyKeyDispatcher
from keyshared.errors import InvalidArgument
from keyshared.routing import sticky_key_hash
from keyshared.verify.record import NOT_PARTITIONED, Event, Message, RunRecord, ScenarioRecord

#: The rules, each with the promise it holds a run to (the verdict quotes it).
RULES: Mapping[str, str] = MappingProxyType(
    {
        "lost": "every message the broker acknowledged on send is acknowledged by a consumer",
        "order": "each consumer receives each key's messages in send order",
        "exclusive": "no key is in flight on two live consumers at once",
        "model": "each message goes to the consumer keyshared's model of the release gives it,"
        " once the model sends it",
        "duplicate": "a message is delivered again only after a nack of it or after the"
        " consumer holding it left",
        "stats": "the broker's hash ranges and draining hashes equal the model's",
    }
)

#: The most violations of one rule a scenario keeps, the first in log order; every one is
#: counted (:attr:`ScenarioResult.counts`). A run that breaks a rule on every message would
#: otherwise keep a million of them.
KEPT_PER_RULE = 100

#: Positions one replay read of the model takes off its redelivery queue: Pulsar's default
#: ``dispatcherMaxReadBatchSize``.
REPLAY_BATCH = 100

#: The rules that ``allowOutOfOrderDelivery=true`` breaks when a consumer joins.
_OUT_OF_ORDER_RULES = frozenset({"order", "exclusive", "model"})

#: Why a run that subscribed with ``allowOutOfOrderDelivery=true`` and broke the order rules
#: likely did.
OUT_OF_ORDER_CAUSE = (
    "the consumers subscribed with allowOutOfOrderDelivery=true: the broker then hands a"
    " consumer that joined the keys it takes over at once, while the consumer that had them"
    " still holds their earlier messages unacked, so Key_Shared keeps neither per-key order"
    " nor one consumer per key in flight; subscribe without it to keep them"
)

#: The ``owner`` of a key two or more live consumers have in flight (see ``_ScenarioCheck``).
_SHARED = object()

#: Hold reasons of an entry behind another of its hash, which may be held for draining.
_BEHIND_HELD = frozenset({HoldReason.BLOCKED_IN_READ, HoldReason.AWAITING_REDELIVERY})

#: Why the model holds an entry back, by hold reason, for the model rule's sentences.
_HELD_BECAUSE = {
    HoldReason.NO_CONSUMER: "no consumer is connected",
    HoldReason.BLOCKED_IN_READ: "an earlier message of its hash was held in the same read",
    HoldReason.NO_PERMITS: "its consumer has no room under its unacked limit",
    HoldReason.AWAITING_REDELIVERY: "earlier messages of its hash wait for redelivery",
    HoldReason.LOOK_AHEAD_LIMIT: "the redelivery queue is at the look-ahead limit",
    HoldReason.PENDING_ACK_REFUSED: "its consumer is closing",
}


@dataclass(frozen=True, slots=True)
class Violation:
    """One thing a scenario broke: the ``rule`` (a key of :data:`RULES`), the ``scenario``,
    the ``moment_ms`` it happened (ms since the epoch; a scenario's end for what was still
    missing then), the ``key`` (None for the stats rule), the messages by send index
    (``indexes``) and as ``message_ids`` ``(partition, ledger_id, entry_id)``, the consumers
    involved by label (``consumers``) and ``detail``, one sentence saying what happened and
    which rule it breaks."""

    rule: str
    scenario: str
    moment_ms: float
    key: str | None
    indexes: tuple[int, ...]
    message_ids: tuple[tuple[int, int, int], ...]
    consumers: tuple[str, ...]
    detail: str

    def to_json(self) -> dict[str, Any]:
        """The violation as JSON-ready data."""
        return {
            "rule": self.rule,
            "scenario": self.scenario,
            "moment_ms": self.moment_ms,
            "key": self.key,
            "indexes": list(self.indexes),
            "message_ids": [list(m) for m in self.message_ids],
            "consumers": list(self.consumers),
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    """One scenario's counts and violations. ``sent``: messages the broker acknowledged on
    send; ``delivered``: deliver events; ``acked``: messages some consumer acknowledged;
    ``lost``: messages none did; ``redelivered``: deliveries of a message delivered before,
    ``duplicates_allowed`` + ``duplicates_unexpected`` of them; ``predicted``: deliveries
    compared with the model (every one but a once-nacked message's after its ack, which the
    model cannot time); ``matched``: those that went where and when the
    model sent them; ``held``: messages the model held back at some point while their hash
    drained on another consumer. ``violations``: the kept ones, by moment (ties in log
    order); ``counts``: every violation by rule, kept or not."""

    name: str
    sent: int
    delivered: int
    acked: int
    lost: int
    redelivered: int
    duplicates_allowed: int
    duplicates_unexpected: int
    predicted: int
    matched: int
    held: int
    violations: tuple[Violation, ...]
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Whether the scenario broke no rule."""
        return not any(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        """The result as JSON-ready data."""
        return {
            "name": self.name,
            "passed": self.passed,
            "sent": self.sent,
            "delivered": self.delivered,
            "acked": self.acked,
            "lost": self.lost,
            "redelivered": self.redelivered,
            "duplicates_allowed": self.duplicates_allowed,
            "duplicates_unexpected": self.duplicates_unexpected,
            "predicted": self.predicted,
            "matched": self.matched,
            "held": self.held,
            "counts": dict(self.counts),
            "violations": [v.to_json() for v in self.violations],
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    """The whole run's: ``passed`` when every scenario passed; ``first``, the earliest
    violation by moment (None when it passed); ``cause``, the likely cause of the failure
    when the record says one (:data:`OUT_OF_ORDER_CAUSE`), else None."""

    passed: bool
    scenarios: tuple[ScenarioResult, ...]
    first: Violation | None
    cause: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The verdict as JSON-ready data."""
        return {
            "passed": self.passed,
            "first": None if self.first is None else self.first.to_json(),
            "cause": self.cause,
            "scenarios": [s.to_json() for s in self.scenarios],
        }


def check(record: RunRecord) -> Verdict:
    """The verdict on ``record``: each scenario checked on its own (consumer labels and
    send indexes are the scenario's). InvalidArgument naming the event
    (``record.scenarios[i].events[j]``) when the log does not fit its messages: a message
    index out of range, a consumer that never joined or had left, a malformed event."""
    results = tuple(
        _ScenarioCheck(record, i, scenario).run() for i, scenario in enumerate(record.scenarios)
    )
    found = [v for r in results for v in r.violations]
    first = min(found, key=lambda v: v.moment_ms) if found else None
    broken = {rule for r in results for rule, n in r.counts.items() if n}
    cause = (
        OUT_OF_ORDER_CAUSE if record.allow_out_of_order and broken & _OUT_OF_ORDER_RULES else None
    )
    return Verdict(all(r.passed for r in results), results, first, cause)


# --- violations ----------------------------------------------------------------------------


class _Found:
    """A scenario's violations: each counted, the first :data:`KEPT_PER_RULE` of a rule kept."""

    def __init__(self, scenario: ScenarioRecord) -> None:
        self.scenario = scenario
        self.counts = dict.fromkeys(RULES, 0)
        self.kept: list[Violation] = []

    def add(
        self,
        rule: str,
        moment_ms: float,
        indexes: Sequence[int],
        consumers: Iterable[str | None],
        detail: str,
    ) -> None:
        """One violation of ``rule``; its key is its first message's (None without one)."""
        self.counts[rule] += 1
        if self.counts[rule] > KEPT_PER_RULE:
            return
        messages = [self.scenario.messages[i] for i in indexes]
        self.kept.append(
            Violation(
                rule=rule,
                scenario=self.scenario.name,
                moment_ms=moment_ms,
                key=messages[0].key if messages else None,
                indexes=tuple(indexes),
                message_ids=tuple((m.partition, m.ledger_id, m.entry_id) for m in messages),
                consumers=tuple(c for c in consumers if c is not None),
                detail=detail,
            )
        )

    def by_moment(self) -> tuple[Violation, ...]:
        return tuple(sorted(self.kept, key=lambda v: v.moment_ms))


def _message(m: Message) -> str:
    """A message as the sentences name it: its send index, key and position."""
    return f"message #{m.index} (key {m.key!r}, {m.ledger_id}:{m.entry_id})"


# --- the model -----------------------------------------------------------------------------


class _Model:
    """keyshared's model of the release fed a scenario's log: one
    :class:`~keyshared.StickyKeyDispatcher` per partition, consumers by label (a fresh
    integer id each, the broker's name on the ring), and the consumer it sent each message
    to (``sent_to``, by send index, None once the broker's delivery used it up).

    Besides the dispatcher's own state it keeps each partition's ``backlog``: the entries
    a read did not take (no consumer connected, or the look-ahead limit reached), which the
    broker reads again from its cursor, in position order, once it can. Invariant: a
    partition with a non-empty redelivery queue or backlog is in ``unsettled``, so that
    acks elsewhere cost no replay. ``keys`` are the messages' keys by send index."""

    def __init__(self, record: RunRecord, scenario: ScenarioRecord, keys: list[str]) -> None:
        partitions = range(record.partitions) if record.partitions else [NOT_PARTITIONED]
        self.dispatchers = {p: StickyKeyDispatcher(record.points) for p in partitions}
        messages = scenario.messages
        self.messages = messages
        # map() over attrgetter builds each list at C speed: a million messages in ms.
        self.ledgers: list[int] = list(map(attrgetter("ledger_id"), messages))
        self.entries: list[int] = list(map(attrgetter("entry_id"), messages))
        self.partitions: list[int] = list(map(attrgetter("partition"), messages))
        by_key = {key: sticky_key_hash(key) for key in dict.fromkeys(keys)}
        self.hashes = list(map(by_key.__getitem__, keys))
        self.ids: dict[str, int] = {}
        #: Every consumer that joined, by id.
        self.label_of: dict[int | None, str] = {}
        self.by_name: dict[str, str] = {}
        self.sent_to: list[str | None] = [None] * len(messages)
        #: Why the model last held each message it held, and the consumer draining its hash.
        self.holds: dict[int, tuple[HoldReason | None, str | None]] = {}
        self.held_draining: set[int] = set()
        #: Messages the broker delivered before the model sent them, to whom (reported then).
        self.early: dict[int, str] = {}
        self.backlog: dict[int, list[int]] = {p: [] for p in partitions}
        self.unsettled: set[int] = set()
        #: Each partition's send indexes in send order (a range for one partition), and by
        #: position where positions do not ascend with them.
        self._sent: dict[int, Sequence[int]] = {}
        self._positions: dict[int, dict[tuple[int, int], int]] = {}

    # --- the log's events ----------------------------------------------------------------

    def join(self, label: str, name: str) -> None:
        if label in self.label_of.values():
            raise InvalidArgument(f"consumer {label!r} joins twice", argument=None)
        cid = len(self.label_of)
        self.label_of[cid] = label
        self.ids[label] = cid
        self.by_name[name] = label
        for d in self.dispatchers.values():
            d.add_consumer(cid, name)
        self.settle_all()

    def leave(self, label: str) -> None:
        cid = self.ids.pop(label)
        self.by_name = {n: c for n, c in self.by_name.items() if c != label}
        for p, d in self.dispatchers.items():
            if self.ids:
                if d.remove_consumer(cid):
                    self.unsettled.add(p)
            else:
                self._rewind(p, d, cid)
        self.settle_all()

    def _rewind(self, p: int, d: StickyKeyDispatcher, cid: int) -> None:
        """The last consumer left: Pulsar rewinds the cursor, so every entry the model had
        not seen acked is read again, in position order, once a consumer joins."""
        queued = [(ledger, entry) for ledger, entry, _ in d.redelivery.to_list()]
        removed = [(ledger, entry) for ledger, entry, _, _ in d.remove_consumer(cid)]
        again = set(self.backlog[p]) | {self._index(p, *pos) for pos in (*queued, *removed)}
        self.backlog[p] = sorted(again, key=lambda i: (self.ledgers[i], self.entries[i]))
        if self.backlog[p]:
            self.unsettled.add(p)

    def publish(self, first: int, count: int) -> None:
        """One read of messages ``first`` to ``first + count - 1``, partition by partition."""
        if first < 0 or count < 0 or first + count > len(self.messages):
            raise InvalidArgument(
                f"publish of messages {first} to {first + count - 1} of {len(self.messages)}",
                argument=None,
            )
        batch = range(first, first + count)
        reads: list[tuple[int, Sequence[int]]]
        if len(self.dispatchers) == 1:
            reads = [(self.partitions[first], batch)] if count else []
        else:
            by_partition: dict[int, list[int]] = {}
            for i in batch:
                by_partition.setdefault(self.partitions[i], []).append(i)
            reads = list(by_partition.items())
        for p, indexes in reads:
            if self.backlog[p]:
                # The cursor reads in position order: the backlog comes first.
                self.backlog[p].extend(indexes)
                self.settle(p)
            else:
                self._read(p, indexes, replay=False)

    def nack(self, label: str, i: int) -> bool:
        """The consumer nacked message ``i``: off its pending acks, into the redelivery
        queue; False when it had left."""
        cid = self.ids.get(label)
        if cid is None:
            return self.check_left(label)
        p = self.partitions[i]
        d = self.dispatchers[p]
        if d.pending_acks(cid).remove(self.ledgers[i], self.entries[i]):
            d.redelivery.add(self.ledgers[i], self.entries[i], self.hashes[i])
            self.unsettled.add(p)
            self.settle(p)
        return True

    def check_left(self, label: str) -> bool:
        """False for a consumer that joined and left: the broker never hears what it does
        after. KeyError for one that never joined."""
        if label not in self.label_of.values():
            raise KeyError(label)
        return False

    # --- reads ---------------------------------------------------------------------------

    def settle_all(self) -> None:
        for p in list(self.unsettled):
            self.settle(p)

    def settle(self, p: int) -> None:
        """What the broker reads next on partition ``p``: the redelivery queue as far as it
        lets entries through, then the backlog if a normal read is allowed."""
        d = self.dispatchers[p]
        queue = d.redelivery
        while len(queue):
            positions = d.get_messages_to_replay_now(REPLAY_BATCH)
            if not self._read(p, [self._index(p, *pos) for pos in positions], replay=True):
                break
        backlog = self.backlog[p]
        if backlog and d.is_normal_read_allowed():
            self.backlog[p] = []
            self._read(p, backlog, replay=False)
        if not len(queue) and not self.backlog[p]:
            self.unsettled.discard(p)

    def _read(self, p: int, indexes: Sequence[int], *, replay: bool) -> bool:
        """One read of the messages ``indexes`` (of partition ``p``, in order); True when
        it sent any."""
        if not indexes:
            return False
        if isinstance(indexes, range):
            # A publish: the entries sliced out at C speed rather than one by one.
            a, b = indexes.start, indexes.stop
            read = list(zip(self.ledgers[a:b], self.entries[a:b], self.hashes[a:b], repeat(1)))
        else:
            read = [(self.ledgers[i], self.entries[i], self.hashes[i], 1) for i in indexes]
        results = self.dispatchers[p].dispatch_read(read, replay=replay)
        label_of, sent_to, early = self.label_of, self.sent_to, self.early
        sent = False
        for i, r in zip(indexes, results, strict=True):
            if not r.delivered:
                self._held(p, i, r)
                continue
            sent = True
            if early:
                self._sent_after_delivery(i, label_of[r.consumer_id])
            else:
                sent_to[i] = label_of[r.consumer_id]
        return sent

    def _sent_after_delivery(self, i: int, label: str) -> None:
        """The model sends message ``i`` to ``label``: used up at once when the broker
        already delivered it there early (that delivery was reported)."""
        if self.early.pop(i, None) != label:
            self.sent_to[i] = label

    def _held(self, p: int, i: int, r: DispatchResult) -> None:
        """The read held message ``i`` back: queued for redelivery, or left in the backlog."""
        draining = r.draining_consumer_id
        holder = None if draining is None else self.label_of[draining]
        self.holds[i] = (r.held, holder)
        if r.held is HoldReason.DRAINING or (
            r.held in _BEHIND_HELD and self.dispatchers[p].tracker.get_entry(r.sticky_key_hash)
        ):
            self.held_draining.add(i)
        if not r.queued_for_redelivery:
            self.backlog[p].append(i)
        self.unsettled.add(p)

    def _index(self, p: int, ledger: int, entry: int) -> int:
        """The send index of the message at ``(ledger, entry)`` on partition ``p``: found by
        bisection, since a producer's positions ascend with its sends, else (a partition
        whose positions do not) from a map of them all; KeyError for none there."""
        if p not in self._sent:
            single = len(self.dispatchers) == 1
            n = len(self.partitions)
            self._sent[p] = range(n) if single else [i for i in range(n) if self.partitions[i] == p]
        sent = self._sent[p]
        ledgers, entries = self.ledgers, self.entries
        at = bisect_left(sent, (ledger, entry), key=lambda i: (ledgers[i], entries[i]))
        if at < len(sent) and ledgers[sent[at]] == ledger and entries[sent[at]] == entry:
            return sent[at]
        if p not in self._positions:
            self._positions[p] = {(ledgers[i], entries[i]): i for i in sent}
        return self._positions[p][ledger, entry]

    # --- what the model says -------------------------------------------------------------

    def why_not(self, i: int, *, delivered: bool) -> tuple[str, str | None]:
        """Why the model has not sent message ``i`` (``delivered`` before, or not): a clause,
        and the consumer whose draining hash holds it, if one does."""
        p = self.partitions[i]
        queue = self.dispatchers[p].redelivery
        waiting = queue.get_hash(self.ledgers[i], self.entries[i]) is not None
        reason, holder = self.holds.get(i, (None, None))
        if reason is None or not (waiting or i in self.backlog[p]):
            if delivered:
                return (
                    "the model sent it once and sends it again only after a nack or a leave",
                    None,
                )
            return "the model has not read it", None
        if reason is HoldReason.DRAINING:
            return f"its hash {self.hashes[i]} drains on {holder} until {holder} acks it", holder
        return f"the model holds it back: {_HELD_BECAUSE[reason]}", None

    def stats_differences(
        self, stats: Mapping[str, Mapping[int, Mapping[str, Any]]]
    ) -> list[tuple[str, str]]:
        """Where the broker's stats differ from the model's: ``(consumer, sentence)`` pairs,
        the consumer by label where the model has it, else by the broker's name."""
        out = [
            (label, f"the broker does not list {label} (named {name!r}), which the model has")
            for name, label in self.by_name.items()
            if name not in stats
        ]
        ranges = {p: d.selector.get_consumer_key_hash_ranges() for p, d in self.dispatchers.items()}
        for name, by_partition in stats.items():
            label = self.by_name.get(name)
            if label is None:
                out.append((name, f"the broker lists {name!r}, a consumer the model does not have"))
                continue
            cid = self.ids[label]
            for p, d in self.dispatchers.items():
                theirs = by_partition.get(p, {})
                ours_ranges = sorted((r.start, r.end) for r in ranges[p].get(cid, []))
                ours_draining = sorted(
                    (h.hash, h.unack_msgs) for h in d.tracker.consumer_stats(cid).draining_hashes
                )
                for what, ours, broker in (
                    ("hash ranges", ours_ranges, theirs.get("ranges", [])),
                    ("draining hashes", ours_draining, theirs.get("draining", [])),
                ):
                    if ours != sorted(tuple(x) for x in broker):
                        out.append((label, _differ(label, p, what, ours, broker)))
        return out


def _differ(label: str, p: int, what: str, ours: list[Any], broker: Iterable[Any]) -> str:
    where = "" if p == NOT_PARTITIONED else f" on partition {p}"
    theirs = sorted(tuple(x) for x in broker)
    return (
        f"the broker's {what} of {label}{where} are {_few(theirs)} where the model's are"
        f" {_few(ours)}, which breaks: {RULES['stats']}"
    )


def _few(items: list[Any], shown: int = 4) -> str:
    text = ", ".join(str(list(x)) for x in items[:shown])
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return f"[{text}{more}]" if items else "none"


# --- one scenario --------------------------------------------------------------------------


class _ScenarioCheck:
    """One pass over a scenario's log, every rule at once.

    Per message (by send index): ``delivered``, ``acked``, ``nacked`` (by the consumer
    holding it, since its last delivery) and ``ever_nacked`` flags and ``holder``, the
    consumer it was last delivered to until that consumer acks or nacks it (one that left
    stays its holder, which is what allows its redelivery); ``also_held``, consumers besides
    the holder that got it again while it was held. Per key (by key id, the order keys first
    appear in the messages): ``owner``, the one live consumer with the key in flight, and
    ``inflight``, how many of its messages; :data:`_SHARED` where two or more have it, their
    counts then in ``shared``. ``seen``: per live consumer, the highest index received of each
    key."""

    def __init__(self, record: RunRecord, number: int, scenario: ScenarioRecord) -> None:
        self.path = f"record.scenarios[{number}]"
        self.scenario = scenario
        self.messages = scenario.messages
        n = len(scenario.messages)
        keys: list[str] = list(map(attrgetter("key"), scenario.messages))
        key_ids = {key: k for k, key in enumerate(dict.fromkeys(keys))}
        self.kid = list(map(key_ids.__getitem__, keys))
        self.key_count = len(key_ids)
        self.model = _Model(record, scenario, keys)
        self.found = _Found(scenario)
        self.delivered = bytearray(n)
        self.acked = bytearray(n)
        self.nacked = bytearray(n)
        self.ever_nacked = bytearray(n)
        self.holder: list[str | None] = [None] * n
        self.also_held: dict[int, list[str]] = {}
        self.owner: list[object] = [None] * self.key_count
        self.inflight = [0] * self.key_count
        self.shared: dict[int, dict[str, int]] = {}
        self.seen: dict[str, list[int]] = {}
        self._by_key: list[list[int]] = []
        self.redelivered = 0
        self.allowed = 0
        self.unexpected = 0
        #: Deliveries that did not go where and when the model sent them.
        self.missed = 0
        #: Deliveries the model cannot time: a once-nacked message's after its ack.
        self.unmodelled = 0
        self.handlers: dict[str, Callable[[Event], None]] = {
            "scenario": _ignore,
            "join": self._join,
            "leave": self._leave,
            "publish": self._publish,
            "nack": self._nack,
            "stall": _ignore,
            "resume": _ignore,
            "stats": self._stats,
        }

    def run(self) -> ScenarioResult:
        self._loop(self.scenario.events)
        self._finish()
        return self._result()

    def _loop(self, events: list[Event]) -> None:
        """The log in order. Deliveries and acks, nearly every event of a run, are handled
        inline with local names, which a million of each needs to take seconds rather
        than tens of them; their rare cases (a redelivery, a miss, a key shared) and every
        other kind go to methods."""
        model = self.model
        sent_to, ids, unsettled = model.sent_to, model.ids, model.unsettled
        # Each partition's ack by its number; a non-partitioned topic's one at -1, its
        # partition's number, as the last item of a list of one.
        ackers = [model.dispatchers[p].ack for p in sorted(model.dispatchers)]
        partitions, ledgers, entries = model.partitions, model.ledgers, model.entries
        kid, seen, owner, inflight = self.kid, self.seen, self.owner, self.inflight
        delivered, acked, holder, also_held = (
            self.delivered,
            self.acked,
            self.holder,
            self.also_held,
        )
        handlers = self.handlers
        e: Event = ()
        try:
            for e in events:
                kind = e[0]
                if kind == "deliver":
                    _, ms, label, i, _ = e
                    if i < 0:
                        raise IndexError(i)
                    last = seen[label]
                    if delivered[i]:
                        self._redelivery(ms, label, i)
                        continue
                    if sent_to[i] == label:
                        sent_to[i] = None
                    else:
                        self._unpredicted(ms, label, i)
                    # Counted at the end: first deliveries are the flags set.
                    delivered[i] = 1
                    k = kid[i]
                    if i > last[k]:
                        last[k] = i
                    else:
                        self._out_of_order(ms, label, i, last[k])
                    o = owner[k]
                    if o is None:
                        owner[k] = label
                        inflight[k] = 1
                    elif o == label:
                        inflight[k] += 1
                    else:
                        self._shared(ms, label, i, k)
                    holder[i] = label
                elif kind == "ack":
                    _, _, label, i = e
                    if i < 0:
                        raise IndexError(i)
                    acked[i] = 1
                    cid = ids.get(label)
                    if cid is None:
                        model.check_left(label)
                        continue
                    p = partitions[i]
                    ackers[p](cid, ledgers[i], entries[i])
                    if unsettled and p in unsettled:
                        model.settle(p)
                    if also_held:
                        self._release(label, i)
                    elif holder[i] == label:
                        holder[i] = None
                        k = kid[i]
                        if owner[k] == label:
                            inflight[k] -= 1
                            if not inflight[k]:
                                owner[k] = None
                        else:
                            self._release_key(label, k)
                else:
                    handlers[kind](e)
        except InvalidArgument as err:
            path = self._event_path(events, e)
            raise InvalidArgument(f"{path}: {err}", argument=path) from None
        except (KeyError, IndexError, TypeError, ValueError) as err:
            path = self._event_path(events, e)
            raise InvalidArgument(
                f"{path} does not fit the scenario ({type(err).__name__}: {err}): {e!r:.120}",
                argument=path,
            ) from err

    def _event_path(self, events: list[Event], event: Event) -> str:
        """The field path of ``event``, found by identity: the loop keeps no count, which
        a million events would pay for."""
        j = next(j for j, e in enumerate(events) if e is event)
        return f"{self.path}.events[{j}]"

    # --- membership ----------------------------------------------------------------------

    def _join(self, event: Event) -> None:
        _, _, label, name = event
        self.model.join(label, name)
        self.seen[label] = [-1] * self.key_count

    def _leave(self, event: Event) -> None:
        """Its spans end; what it held stays its own, so that a redelivery is allowed."""
        _, _, label, _ = event
        self.model.leave(label)
        del self.seen[label]
        owner = self.owner
        for k in (k for k, o in enumerate(owner) if o == label):
            owner[k] = None
            self.inflight[k] = 0
        for k in [k for k, d in self.shared.items() if label in d]:
            del self.shared[k][label]
            self._collapse(k)

    def _publish(self, event: Event) -> None:
        _, _, first, count = event
        self.model.publish(first, count)

    # --- deliveries ----------------------------------------------------------------------

    def _redelivery(self, ms: float, label: str, i: int) -> None:
        """Message ``i`` comes again: every rule, as the inline path does for a first
        delivery, but the order rule excuses what at-least-once allows."""
        self.redelivered += 1
        # A once-nacked message again after its ack: allowed (the module's duplicate rule).
        unmodelled = bool(self.acked[i] and self.ever_nacked[i])
        self.allowed += unmodelled
        allowed = unmodelled or self._again(ms, label, i)
        if self.model.sent_to[i] == label:
            self.model.sent_to[i] = None
        elif unmodelled:
            self.unmodelled += 1
        else:
            self._unpredicted(ms, label, i)
        k = self.kid[i]
        last = self.seen[label]
        if i > last[k]:
            last[k] = i
        elif i < last[k] and not allowed:
            self._out_of_order(ms, label, i, last[k])
        o = self.owner[k]
        if o is None:
            self.owner[k] = label
            self.inflight[k] = 1
        elif o == label:
            self.inflight[k] += 1
        else:
            self._shared(ms, label, i, k)
        if self.holder[i] is None:
            self.holder[i] = label
        else:
            self.also_held.setdefault(i, []).append(label)

    def _unpredicted(self, ms: float, label: str, i: int) -> None:
        """The broker delivered message ``i`` elsewhere than, or before, the model sent it."""
        model = self.model
        self.missed += 1
        expected = model.sent_to[i]
        m = self.messages[i]
        if expected is not None:
            model.sent_to[i] = None
            detail = f"{_message(m)} went to {label}, where the model sends it to {expected}"
            self.found.add("model", ms, [i], [label, expected], f"{detail}: {RULES['model']}")
            return
        why, holder = model.why_not(i, delivered=bool(self.delivered[i]))
        model.early[i] = label
        detail = f"{_message(m)} went to {label} while {why}"
        self.found.add("model", ms, [i], [label, holder], f"{detail}: {RULES['model']}")

    def _again(self, ms: float, label: str, i: int) -> bool:
        """Counts a redelivery of message ``i``; whether at-least-once allows it (after a
        nack of it, or after the consumer holding it left), else reports it."""
        before = self.holder[i]
        left = before is not None and before not in self.seen
        if not self.acked[i] and (self.nacked[i] or left):
            self.nacked[i] = 0
            self.allowed += 1
            if left:
                # The consumer that left holding it is done with it.
                self.holder[i] = None
            return True
        why = (
            "after it was acked"
            if self.acked[i]
            else f"while {before} still holds it and has not nacked it"
        )
        self.unexpected += 1
        detail = f"{_message(self.messages[i])} was delivered again to {label} {why}"
        self.found.add("duplicate", ms, [i], [label, before], f"{detail}: {RULES['duplicate']}")
        return False

    def _out_of_order(self, ms: float, label: str, i: int, last: int) -> None:
        detail = (
            f"{label} received {_message(self.messages[i])} after #{last} of the same key,"
            f" which was sent later: {RULES['order']}"
        )
        self.found.add("order", ms, [i, last], [label], detail)

    def _shared(self, ms: float, label: str, i: int, k: int) -> None:
        """A delivery of key ``k`` while another live consumer has it in flight."""
        o = self.owner[k]
        d = self.shared.get(k) if o is _SHARED else None
        if d is None:
            d = self.shared[k] = {str(o): self.inflight[k]}
            self.owner[k] = _SHARED
        other = next(c for c in d if c != label)
        held = self._held_by(other, k)
        detail = (
            f"{label} received {_message(self.messages[i])} while {other} still had"
            f" {'a message' if held is None else f'#{held}'} of the same key in flight:"
            f" {RULES['exclusive']}"
        )
        indexes = [i] if held is None else [i, held]
        self.found.add("exclusive", ms, indexes, [label, other], detail)
        d[label] = d.get(label, 0) + 1

    def _held_by(self, label: str, k: int) -> int | None:
        """The first message of key ``k`` that ``label`` has in flight."""
        if not self._by_key:
            self._by_key = [[] for _ in range(self.key_count)]
            for i, key in enumerate(self.kid):
                self._by_key[key].append(i)
        return next(
            (
                i
                for i in self._by_key[k]
                if self.holder[i] == label or label in self.also_held.get(i, ())
            ),
            None,
        )

    # --- acks ----------------------------------------------------------------------------

    def _nack(self, event: Event) -> None:
        _, _, label, i = event
        if i < 0:
            raise IndexError(i)
        if self.model.nack(label, i) and self._release(label, i):
            self.nacked[i] = self.ever_nacked[i] = 1

    def _release(self, label: str, i: int) -> bool:
        """The live consumer is done with message ``i``: its span ends. False when it did
        not hold it."""
        extra = self.also_held.get(i)
        if self.holder[i] == label:
            self.holder[i] = extra.pop(0) if extra else None
        elif extra and label in extra:
            extra.remove(label)
        else:
            return False
        if extra is not None and not extra:
            del self.also_held[i]
        self._release_key(label, self.kid[i])
        return True

    def _release_key(self, label: str, k: int) -> None:
        """One in-flight message of key ``k`` fewer on ``label``."""
        if self.owner[k] == label:
            self.inflight[k] -= 1
            if not self.inflight[k]:
                self.owner[k] = None
        elif self.owner[k] is _SHARED and label in self.shared[k]:
            d = self.shared[k]
            d[label] -= 1
            if not d[label]:
                del d[label]
                self._collapse(k)

    def _collapse(self, k: int) -> None:
        """Key ``k`` back to one owner, or none, once no two consumers share it."""
        d = self.shared[k]
        if len(d) > 1:
            return
        del self.shared[k]
        self.owner[k], self.inflight[k] = next(iter(d.items()), (None, 0))

    # --- stats and the end ---------------------------------------------------------------

    def _stats(self, event: Event) -> None:
        _, ms, stats = event
        for consumer, detail in self.model.stats_differences(stats):
            self.found.add("stats", ms, [], [consumer], detail)

    def _finish(self) -> None:
        """What the end of the scenario leaves: messages no one acked, and messages the
        model sent that never came. The end is the latest moment in the log (a leave's
        moment may come before those of events logged ahead of it)."""
        end = max(map(itemgetter(1), self.scenario.events), default=0.0)
        if 0 in self.acked:
            for i in (i for i, acked in enumerate(self.acked) if not acked):
                last = self.holder[i]
                where = f"last delivered to {last}" if last else "never delivered"
                detail = (
                    f"{_message(self.messages[i])} was acknowledged on send but by no consumer"
                    f" by the scenario's end ({where}): {RULES['lost']}"
                )
                self.found.add("lost", end, [i], [last], detail)
        sent_to = self.model.sent_to
        if sent_to.count(None) != len(sent_to):
            for i, label in enumerate(sent_to):
                if label is not None:
                    detail = (
                        f"the model sent {_message(self.messages[i])} to {label}, which never"
                        f" received it: {RULES['model']}"
                    )
                    self.found.add("model", end, [i], [label], detail)

    def _result(self) -> ScenarioResult:
        acked = self.acked.count(1)
        deliveries = self.delivered.count(1) + self.redelivered
        return ScenarioResult(
            name=self.scenario.name,
            sent=len(self.messages),
            delivered=deliveries,
            acked=acked,
            lost=len(self.messages) - acked,
            redelivered=self.redelivered,
            duplicates_allowed=self.allowed,
            duplicates_unexpected=self.unexpected,
            predicted=deliveries - self.unmodelled,
            matched=deliveries - self.unmodelled - self.missed,
            held=len(self.model.held_draining),
            violations=self.found.by_moment(),
            counts=MappingProxyType(self.found.counts),
        )


def _ignore(event: Event) -> None:
    """Events that change neither the model nor a rule's state (they mark the timeline)."""


__all__ = [
    "KEPT_PER_RULE",
    "OUT_OF_ORDER_CAUSE",
    "REPLAY_BATCH",
    "RULES",
    "ScenarioResult",
    "Verdict",
    "Violation",
    "check",
]
