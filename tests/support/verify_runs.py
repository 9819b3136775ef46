"""Hand-written ``keyshared verify`` records for the checker's and the report's tests: a
:class:`Log` that writes a scenario event by event, keys chosen by the consumer keyshared's
ring gives them (:func:`owned_keys`), and the mutations that turn a valid run into one that
breaks a rule (:data:`MUTATIONS`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from keyshared import ConsistentHashingStickyKeyConsumerSelector, sticky_key_hash
from keyshared.verify.record import NOT_PARTITIONED, Event, Message, RunRecord, ScenarioRecord
from keyshared.verify.synthetic import LEDGER, START_MS


def owned_keys(consumers: Sequence[str], owner: str, count: int, prefix: str = "k") -> list[str]:
    """``count`` keys that keyshared's ring (100 points a consumer) gives ``owner`` when
    ``consumers`` join in that order (each named by its label)."""
    selector = ConsistentHashingStickyKeyConsumerSelector(100)
    for cid, name in enumerate(consumers):
        selector.add_consumer(cid, name)
    want = list(consumers).index(owner)
    keys = (f"{prefix}{n}" for n in range(100_000))
    found = [k for k in keys if selector.select(sticky_key_hash(k)) == want]
    return found[:count]


class Log:
    """One scenario written event by event, 1 ms apart from :data:`START_MS`; messages on
    a non-partitioned topic, entry ids their send indexes."""

    def __init__(self, name: str = "hand", *, allow_out_of_order: bool = False) -> None:
        self.scenario = ScenarioRecord(name, f"sub-{name}")
        self.allow_out_of_order = allow_out_of_order
        self.now = START_MS
        self.add("scenario", name)

    def add(self, kind: str, *fields: Any) -> Event:
        self.now += 1.0
        event = (kind, self.now, *fields)
        self.scenario.events.append(event)
        return event

    def join(self, *labels: str) -> None:
        for label in labels:
            self.add("join", label, label)

    def leave(self, label: str, how: str = "close") -> None:
        self.add("leave", label, how)

    def publish(self, *keys: str) -> list[int]:
        """Sends one message of each key, as one read; their send indexes."""
        first = len(self.scenario.messages)
        for n, key in enumerate(keys):
            i = first + n
            self.scenario.messages.append(Message(i, key, NOT_PARTITIONED, LEDGER, i, self.now))
        self.add("publish", first, len(keys))
        return list(range(first, first + len(keys)))

    def deliver(self, label: str, *indexes: int) -> None:
        for i in indexes:
            self.add("deliver", label, i, 0)

    def ack(self, label: str, *indexes: int) -> None:
        for i in indexes:
            self.add("ack", label, i)

    def nack(self, label: str, *indexes: int) -> None:
        for i in indexes:
            self.add("nack", label, i)

    def record(self) -> RunRecord:
        return RunRecord(
            topic="persistent://public/default/hand",
            partitions=0,
            pulsar_version="master",
            broker_version="4.2.0",
            allow_out_of_order=self.allow_out_of_order,
            seed=1,
            scenarios=[self.scenario],
        )


# --- mutations of a valid run --------------------------------------------------------------


def out_of_order_join(name: str = "join", allow_out_of_order: bool = True) -> RunRecord:
    """A join on which the broker hands the new consumer a key the old one still holds, as
    it does for consumers subscribed with allowOutOfOrderDelivery=true (the record says
    whether they were: ``allow_out_of_order``)."""
    log = Log(name, allow_out_of_order=allow_out_of_order)
    log.join("c1")
    moved = owned_keys(["c1", "c2"], "c2", 1)[0]
    first = log.publish(moved)
    log.deliver("c1", *first)
    log.join("c2")
    second = log.publish(moved)
    log.deliver("c2", *second)
    log.ack("c1", *first)
    log.ack("c2", *second)
    return log.record()


#: A mutation: the scenario's events changed in place; False when the run has nothing it
#: can change (a run with one consumer has no two deliveries to swap).
Mutation = Callable[[ScenarioRecord, random.Random], bool]


def _delivers(events: list[Event]) -> list[int]:
    return [j for j, e in enumerate(events) if e[0] == "deliver"]


def swap_consumers(scenario: ScenarioRecord, rng: random.Random) -> bool:
    """Two first deliveries to different consumers trade consumers."""
    events = scenario.events
    # Pairs between the same joins and leaves, so that both consumers are live at both.
    epoch, epochs = 0, {}
    for j, e in enumerate(events):
        epoch += e[0] in ("join", "leave")
        if e[0] == "deliver" and e[4] == 0:
            epochs[j] = epoch
    firsts = list(epochs)[:60]
    pairs = [
        (a, b)
        for a in firsts
        for b in firsts
        if a < b and events[a][2] != events[b][2] and epochs[a] == epochs[b]
    ]
    if not pairs:
        return False
    a, b = rng.choice(pairs)
    ea, eb = events[a], events[b]
    events[a] = (*ea[:2], eb[2], *ea[3:])
    events[b] = (*eb[:2], ea[2], *eb[3:])
    return True


def drop_ack(scenario: ScenarioRecord, rng: random.Random) -> bool:
    """One message's only ack goes."""
    events = scenario.events
    acks: dict[int, list[int]] = {}
    for j, e in enumerate(events):
        if e[0] == "ack":
            acks.setdefault(e[3], []).append(j)
    single = [js[0] for js in acks.values() if len(js) == 1]
    if not single:
        return False
    del events[rng.choice(single)]
    return True


def reorder_key(scenario: ScenarioRecord, rng: random.Random) -> bool:
    """Two first deliveries of one key to one consumer, the later sent one published before
    the earlier was delivered, change places in the log."""
    events, messages = scenario.events, scenario.messages
    published: dict[int, int] = {}
    for j, e in enumerate(events):
        if e[0] == "publish":
            published |= dict.fromkeys(range(e[2], e[2] + e[3]), j)
    last: dict[tuple[str, str], int] = {}
    pairs = []
    for j in _delivers(events):
        e = events[j]
        if e[4]:
            continue
        slot = (e[2], messages[e[3]].key)
        if slot in last and published[e[3]] < last[slot]:
            pairs.append((last[slot], j))
        last[slot] = j
    if not pairs:
        return False
    a, b = rng.choice(pairs)
    events[a], events[b] = (
        (*events[a][:3], events[b][3], *events[a][4:]),
        (
            *events[b][:3],
            events[a][3],
            *events[b][4:],
        ),
    )
    return True


def deliver_acked(scenario: ScenarioRecord, rng: random.Random) -> bool:
    """A message acked, and never nacked, is delivered again, right after its ack, to the
    consumer that acked it (a once-nacked message may come again after its ack)."""
    events = scenario.events
    nacked = {e[3] for e in events if e[0] == "nack"}
    acks = [j for j, e in enumerate(events) if e[0] == "ack" and e[3] not in nacked]
    if not acks:
        return False
    j = rng.choice(acks)
    _, ms, label, i = events[j]
    events.insert(j + 1, ("deliver", ms, label, i, 1))
    return True


#: Each mutation with the rule the checker must then report.
MUTATIONS: dict[str, tuple[Mutation, str]] = {
    "swap two deliveries' consumers": (swap_consumers, "model"),
    "drop an ack": (drop_ack, "lost"),
    "reorder two deliveries of one key on one consumer": (reorder_key, "order"),
    "deliver an acked message again": (deliver_acked, "duplicate"),
}
