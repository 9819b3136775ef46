"""A Key_Shared consumer in a process of its own, driven by tests/support/faults.py.

It subscribes, prints ``{"ready": true}``, then one JSON line per message it receives
(``key``, ``value``, ``ledger``, ``entry``, ``redelivery``). With ``--ack`` it acknowledges
each message as it prints it; otherwise it holds them until ``ack`` arrives on its standard
input (answered ``{"acked": n}``). ``close`` closes the consumer and exits. Killing it is
the point: the broker then sees a dropped connection, not a close.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading

import pulsar


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("service_url")
    parser.add_argument("topic")
    parser.add_argument("name")
    parser.add_argument("--subscription", default="sub")
    parser.add_argument("--ack", action="store_true")
    parser.add_argument("--queue", type=int, default=1000)
    args = parser.parse_args()
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.ERROR)
    client = pulsar.Client(
        args.service_url, operation_timeout_seconds=15, connection_timeout_ms=5000, logger=logger
    )
    consumer = client.subscribe(
        args.topic,
        args.subscription,
        consumer_type=pulsar.ConsumerType.KeyShared,
        consumer_name=args.name,
        receiver_queue_size=args.queue,
    )
    lock = threading.Lock()
    held: list[pulsar.Message] = []
    done = threading.Event()

    def say(line: object) -> None:
        with lock:
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()

    def commands() -> None:
        for line in sys.stdin:
            if line.strip() == "ack":
                with lock:
                    taken, held[:] = list(held), []
                for m in taken:
                    consumer.acknowledge(m)
                say({"acked": len(taken)})
            elif line.strip() == "close":
                break
        done.set()

    threading.Thread(target=commands, daemon=True).start()
    say({"ready": True})
    while not done.is_set():
        try:
            m = consumer.receive(timeout_millis=100)
        except pulsar.Timeout:
            continue
        mid = m.message_id()
        line = {
            "key": m.partition_key(),
            "value": m.data().decode(),
            "ledger": mid.ledger_id(),
            "entry": mid.entry_id(),
            "redelivery": m.redelivery_count(),
        }
        if args.ack:
            # Reported before it is acknowledged: a kill between the two makes a duplicate,
            # which the tests count, never a message acknowledged but not seen.
            say(line)
            consumer.acknowledge(m)
        else:
            # Held before it is reported, so that an `ack` after the report takes it.
            with lock:
                held.append(m)
            say(line)
    consumer.close()
    client.close()


if __name__ == "__main__":
    main()
