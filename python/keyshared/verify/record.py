"""What a ``keyshared verify`` run saw, as the checker reads it.

A run sends keyed messages to one topic and lets Key_Shared consumers of one subscription per
scenario receive, acknowledge and negatively acknowledge them while consumers join, leave,
crash and stall. :class:`ScenarioRecord` holds one scenario: the messages the broker
acknowledged on send (:class:`Message`, by their send index) and an ordered event log.

The log is ordered by moment, and that order is the order in which the checker feeds the
events to keyshared's model. It is causal because a scenario waits until the broker has
settled (its stats list a joining consumer, a leaving one is gone, every consumer fell quiet)
before it makes the next change, and because each moment is taken before the act it records
(a consumer notes an ack's moment before it acknowledges). Every moment is in milliseconds
since the epoch, from this machine's clock (the consumers are child processes of the run).

Events are tuples whose first item is the kind (:class:`Kind`) and second the moment:

- ``("scenario", ms, name)``: the scenario starts (the first event of each record);
- ``("join", ms, consumer, name)``: the broker lists a consumer; ``consumer`` is its label,
  unique within the scenario (a consumer started again under the same ``name`` gets a new
  label), ``name`` the consumer name the broker shows;
- ``("leave", ms, consumer, how)``: the broker no longer lists it; ``how`` is ``"close"``,
  ``"crash"`` (its process was killed with -9) or ``"timeout"`` (it stopped answering past
  the broker's keep-alive). Its moment is when the consumer stopped being live: when it was
  told to close, when it was killed, or when the broker dropped it (no later than the first
  delivery elsewhere of a message it held);
- ``("publish", ms, first, count)``: messages ``first`` to ``first + count - 1`` were sent
  and acknowledged by the broker; the model reads them as one read, in index order;
- ``("deliver", ms, consumer, index, redelivery_count)``: the consumer received a message;
- ``("ack", ms, consumer, index)`` and ``("nack", ms, consumer, index)``: it acknowledged or
  negatively acknowledged one;
- ``("stall", ms, consumer)`` and ``("resume", ms, consumer)``: its process was stopped
  (SIGSTOP) or stopped acknowledging, and continued;
- ``("stats", ms, consumers)``: the broker's stats at a quiet point, ``{name: {"ranges":
  [[start, end], ...], "draining": [[hash, unacked], ...]}}`` per partition
  (:data:`Stats`), which the model's must equal.

Records round-trip through JSON (:meth:`RunRecord.to_json`, :meth:`RunRecord.from_json`), so
a run can be checked again or replayed later; they hold no credentials.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from keyshared.errors import InvalidArgument

#: The record format's version, written into every record; a reader refuses others.
FORMAT = 1

#: The partition of a message on a non-partitioned topic.
NOT_PARTITIONED = -1


class Kind(StrEnum):
    """The kinds of event in a scenario's log."""

    SCENARIO = "scenario"
    JOIN = "join"
    LEAVE = "leave"
    PUBLISH = "publish"
    DELIVER = "deliver"
    ACK = "ack"
    NACK = "nack"
    STALL = "stall"
    RESUME = "resume"
    STATS = "stats"


class Leave(StrEnum):
    """How a consumer left."""

    CLOSE = "close"
    CRASH = "crash"
    TIMEOUT = "timeout"


#: One event: the kind, the moment in ms since the epoch, then the kind's fields.
Event = tuple[Any, ...]

#: The broker's stats of one consumer on one partition: ``{"ranges": [[start, end], ...],
#: "draining": [[hash, unacked], ...]}``, keyed by consumer name and then by partition
#: (:data:`NOT_PARTITIONED` on a non-partitioned topic).
Stats = dict[str, dict[int, dict[str, list[list[int]]]]]

#: How many fields each kind carries after the kind and the moment.
_ARITY = {
    Kind.SCENARIO: 1,
    Kind.JOIN: 2,
    Kind.LEAVE: 2,
    Kind.PUBLISH: 2,
    Kind.DELIVER: 3,
    Kind.ACK: 2,
    Kind.NACK: 2,
    Kind.STALL: 1,
    Kind.RESUME: 1,
    Kind.STATS: 1,
}


@dataclass(frozen=True, slots=True)
class Message:
    """A message the broker acknowledged on send: its send ``index`` within the scenario
    (also its payload), its partition ``key``, the ``partition`` it was stored in
    (:data:`NOT_PARTITIONED` for a topic without partitions), its position
    (``ledger_id``, ``entry_id``) and ``sent_ms``, when the send was acknowledged."""

    index: int
    key: str
    partition: int
    ledger_id: int
    entry_id: int
    sent_ms: float


@dataclass(slots=True)
class ScenarioRecord:
    """One scenario: its ``name``, the ``subscription`` it used, the ``messages`` sent (the
    message of index ``i`` at ``messages[i]``) and the ``events`` in the model's order."""

    name: str
    subscription: str
    messages: list[Message] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


@dataclass(slots=True)
class RunRecord:
    """A whole run: the ``topic`` and its ``partitions`` (0: not partitioned), the release
    whose model it is checked against (``pulsar_version``, a profile name) and the one the
    broker reported (``broker_version``, None if it did not say), whether its consumers
    subscribed with ``allowOutOfOrderDelivery`` (``allow_out_of_order``), the workload's
    ``seed``, Pulsar's ``consistentHashingReplicaPoints`` (``points``) and the scenarios in
    the order they ran."""

    topic: str
    partitions: int
    pulsar_version: str
    broker_version: str | None
    allow_out_of_order: bool
    seed: int
    points: int = 100
    scenarios: list[ScenarioRecord] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON-ready data (messages as rows of their fields)."""
        return {
            "format": FORMAT,
            "topic": self.topic,
            "partitions": self.partitions,
            "pulsar_version": self.pulsar_version,
            "broker_version": self.broker_version,
            "allow_out_of_order": self.allow_out_of_order,
            "seed": self.seed,
            "points": self.points,
            "scenarios": [
                {
                    "name": s.name,
                    "subscription": s.subscription,
                    "messages": [
                        [m.index, m.key, m.partition, m.ledger_id, m.entry_id, m.sent_ms]
                        for m in s.messages
                    ],
                    "events": [list(e) for e in s.events],
                }
                for s in self.scenarios
            ],
        }

    @classmethod
    def from_json(cls, data: Any) -> RunRecord:
        """A record from :meth:`to_json`'s data; InvalidArgument naming the field that is
        missing or malformed."""
        if not isinstance(data, dict):
            raise InvalidArgument("a verify record must be a JSON object", argument="record")
        if data.get("format") != FORMAT:
            raise InvalidArgument(
                f"record.format must be {FORMAT}, got {data.get('format')!r}",
                argument="record.format",
            )
        try:
            record = cls(
                topic=str(data["topic"]),
                partitions=int(data["partitions"]),
                pulsar_version=str(data["pulsar_version"]),
                broker_version=data["broker_version"],
                allow_out_of_order=bool(data["allow_out_of_order"]),
                seed=int(data["seed"]),
                points=int(data.get("points", 100)),
            )
            for i, s in enumerate(data["scenarios"]):
                record.scenarios.append(_scenario(f"record.scenarios[{i}]", s))
        except KeyError as e:
            raise InvalidArgument(
                f"a verify record lacks the field {e.args[0]!r}", argument="record"
            ) from None
        except (TypeError, ValueError) as e:
            raise InvalidArgument(f"a verify record is malformed: {e}", argument="record") from None
        return record

    def dumps(self) -> str:
        """The record as a JSON document."""
        return json.dumps(self.to_json(), separators=(",", ":"))


def _scenario(path: str, data: Any) -> ScenarioRecord:
    messages = [
        Message(int(i), str(k), int(p), int(ledger), int(e), float(t))
        for i, k, p, ledger, e, t in data["messages"]
    ]
    for i, m in enumerate(messages):
        if m.index != i:
            raise InvalidArgument(
                f"{path}.messages[{i}] has index {m.index}, not {i}", argument=f"{path}.messages"
            )
    events = [_event(f"{path}.events[{i}]", e) for i, e in enumerate(data["events"])]
    return ScenarioRecord(str(data["name"]), str(data["subscription"]), messages, events)


def _event(path: str, data: Sequence[Any]) -> Event:
    try:
        kind = Kind(data[0])
    except (ValueError, IndexError):
        raise InvalidArgument(f"{path} is not an event: {data!r:.80}", argument=path) from None
    if len(data) != 2 + _ARITY[kind]:
        raise InvalidArgument(
            f"{path}: a {kind} event has {_ARITY[kind]} fields after its moment, got"
            f" {len(data) - 2}",
            argument=path,
        )
    if kind is Kind.STATS:
        stats = {
            name: {int(p): v for p, v in by_partition.items()}
            for name, by_partition in data[2].items()
        }
        return (kind.value, float(data[1]), stats)
    return (kind.value, float(data[1]), *data[2:])


__all__ = [
    "FORMAT",
    "NOT_PARTITIONED",
    "Event",
    "Kind",
    "Leave",
    "Message",
    "RunRecord",
    "ScenarioRecord",
    "Stats",
]
