"""One Key_Shared consumer of a verify run, in a process of its own
(``python -m keyshared.verify.consumer``), so that a scenario can kill it with -9 or stop it.

Its settings come as one JSON line on standard input (:class:`ConsumerSettings` and the
connection's, secrets included: never on the command line, where ``ps`` shows them). It
subscribes, prints ``{"ready": ms}``, then one JSON line per thing it does, each with the
moment it did it (ms since the epoch, taken *before* the call, so that an ack's moment never
comes after the broker saw it):

- ``{"d": [index, partition, ledger, entry, redelivery, ms]}``: it received a message;
- ``{"a": [index, ms]}`` and ``{"n": [index, ms]}``: it acknowledged or negatively
  acknowledged one.

It acknowledges as it receives in ``ack`` mode, holds what it receives in ``hold`` mode, and
in ``nack`` mode negatively acknowledges every ``nack_every``-th message on its first delivery
and acknowledges the rest. Commands on standard input, one a line: ``ack`` (acknowledge
everything held, answered ``{"acked": n}``), ``mode MODE`` (answered ``{"mode": MODE}``) and
``close`` (close and exit, answered ``{"closed": ms}`` first).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, TextIO

from keyshared.connection import ClusterConnection

#: The consumer's modes.
MODES = ("ack", "hold", "nack")


@dataclass(frozen=True)
class ConsumerSettings:
    """What one consumer process does: its ``topic``, ``subscription`` and consumer
    ``name``, its starting ``mode``, its ``receiver_queue`` size, whether it subscribes with
    ``allowOutOfOrderDelivery`` (``allow_out_of_order``), which messages it negatively
    acknowledges in ``nack`` mode (``nack_every``) and after how long the client redelivers
    those (``nack_delay_ms``)."""

    topic: str
    subscription: str
    name: str
    mode: str = "ack"
    receiver_queue: int = 1000
    allow_out_of_order: bool = False
    nack_every: int = 5
    nack_delay_ms: int = 200


def now_ms() -> float:
    """This machine's clock, in ms since the epoch."""
    return time.time() * 1000


class _Reporter:
    """Writes the process's JSON lines, one at a time."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def say(self, line: object) -> None:
        text = json.dumps(line, separators=(",", ":")) + "\n"
        with self._lock:
            self._out.write(text)
            self._out.flush()


class _Consumer:
    """The subscribed consumer and what it holds."""

    def __init__(self, settings: ConsumerSettings, connection: ClusterConnection) -> None:
        import pulsar  # the optional extra, checked by ClusterConnection.pulsar_client

        self._pulsar = pulsar
        self.settings = settings
        self.mode = settings.mode
        self.held: list[Any] = []
        self.lock = threading.Lock()
        self.client = connection.pulsar_client(logger=quiet_logger())
        policy = pulsar.ConsumerKeySharedPolicy(
            allow_out_of_order_delivery=settings.allow_out_of_order
        )
        self.consumer = self.client.subscribe(
            settings.topic,
            settings.subscription,
            consumer_type=pulsar.ConsumerType.KeyShared,
            consumer_name=settings.name,
            receiver_queue_size=settings.receiver_queue,
            negative_ack_redelivery_delay_ms=settings.nack_delay_ms,
            # The first consumer makes the subscription at the end of the topic, so that a
            # scenario sees only its own messages.
            initial_position=pulsar.InitialPosition.Latest,
            key_shared_policy=policy,
        )

    def receive_one(self, report: _Reporter) -> bool:
        """Receives and handles one message; False when none came within 100 ms."""
        try:
            m = self.consumer.receive(timeout_millis=100)
        except self._pulsar.Timeout:
            return False
        mid = m.message_id()
        index = int(m.data())
        redelivery = m.redelivery_count()
        with self.lock:
            report.say(
                {
                    "d": [
                        index,
                        mid.partition(),
                        mid.ledger_id(),
                        mid.entry_id(),
                        redelivery,
                        now_ms(),
                    ]
                }
            )
            if self.mode == "hold":
                self.held.append((index, m))
            elif self.mode == "nack" and redelivery == 0 and index % self.settings.nack_every == 0:
                report.say({"n": [index, now_ms()]})
                self.consumer.negative_acknowledge(m)
            else:
                self._ack(report, index, m)
        return True

    def _ack(self, report: _Reporter, index: int, message: Any) -> None:
        report.say({"a": [index, now_ms()]})
        self.consumer.acknowledge(message)

    def ack_held(self, report: _Reporter) -> int:
        with self.lock:
            taken, self.held = self.held, []
            for index, m in taken:
                self._ack(report, index, m)
        return len(taken)

    def close(self) -> None:
        self.consumer.close()
        self.client.close()


def quiet_logger() -> logging.Logger:
    """The client's logger, at errors only: its connection chatter is no part of a report."""
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.ERROR)
    return logger


def _commands(consumer: _Consumer, report: _Reporter, done: threading.Event) -> None:
    for line in sys.stdin:
        command = line.split()
        if command == ["ack"]:
            report.say({"acked": consumer.ack_held(report)})
        elif len(command) == 2 and command[0] == "mode" and command[1] in MODES:
            with consumer.lock:
                consumer.mode = command[1]
            report.say({"mode": command[1]})
        elif command == ["close"]:
            break
    done.set()


def main() -> None:
    """Reads the settings line, subscribes and runs until ``close`` or the end of input."""
    setup = json.loads(sys.stdin.readline())
    settings = ConsumerSettings(**setup["consumer"])
    connection = ClusterConnection.from_child(setup["connection"])
    # The report keeps standard output to itself: the client's native code may write its
    # own lines to file descriptor 1, which from here on goes to standard error.
    report = _Reporter(os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8"))
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    consumer = _Consumer(settings, connection)
    report.say({"ready": now_ms()})
    done = threading.Event()
    threading.Thread(target=_commands, args=(consumer, report, done), daemon=True).start()
    while not done.is_set():
        consumer.receive_one(report)
    report.say({"closed": now_ms()})
    consumer.close()


__all__ = ["MODES", "ConsumerSettings", "main", "now_ms", "quiet_logger"]

if __name__ == "__main__":
    main()
