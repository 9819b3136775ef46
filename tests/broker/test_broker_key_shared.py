"""keyshared against a running Pulsar 4.2.4 standalone broker, end to end.

Key_Shared delivery (the consumer of every key), the broker's topic stats (each consumer's
hash ranges and PIP-379 draining hashes), messages held while their hash drains on another
consumer, and where a v4 producer routes keys on a partitioned topic: each is what
keyshared predicts. Every receive has a timeout; nothing waits unbounded.
"""

from __future__ import annotations

import base64
import json
import logging
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pulsar
import pytest
import websocket
from support.pulsar_broker import BrokerUnavailable, PulsarBroker, wait_until_ready
from support.pulsar_oracle import record

from keyshared import ConsistentHashingStickyKeyConsumerSelector, StickyKeyDispatcher
from keyshared.routing import HashingScheme, choose_partition, sticky_key_hash

AREA = "4.2.4 broker"
RECEIVE_TIMEOUT_S = 60.0
# How long a consumer must stay silent for "nothing more is coming" to hold.
QUIET_MS = 1000
POLL_MS = 20
KEY_SHARED = pulsar.ConsumerType.KeyShared
# Keys whose UTF-16 and UTF-8 forms differ, so that the two hashing schemes are told apart.
ODD_KEYS = ["ключ", "鍵", "😀-smile", "naïve", "", " "]

Received = dict[str, list[pulsar.Message]]
Delivery = tuple[int, tuple[int, int]]
"""(consumer index, message position)."""


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def client(broker: PulsarBroker) -> pulsar.Client:
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.WARNING)
    return pulsar.Client(
        broker.service_url, operation_timeout_seconds=15, connection_timeout_ms=5000, logger=logger
    )


def subscribe(c: pulsar.Client, topic: str, names: Iterable[str]) -> dict[str, pulsar.Consumer]:
    """Key_Shared consumers joining one after another, in the order of ``names``."""
    return {
        name: c.subscribe(topic, "sub", consumer_type=KEY_SHARED, consumer_name=name)
        for name in names
    }


def _poll(consumer: pulsar.Consumer, timeout_ms: int) -> list[pulsar.Message]:
    """Everything the consumer has until it stays silent for ``timeout_ms``."""
    out = []
    while True:
        try:
            out.append(consumer.receive(timeout_millis=timeout_ms))
        except pulsar.Timeout:
            return out


def receive(consumers: Mapping[str, pulsar.Consumer], count: int) -> Received:
    """What each consumer receives: ``count`` messages in all (AssertionError if they do
    not come within RECEIVE_TIMEOUT_S), then whatever else comes before a quiet spell."""
    got: Received = {name: [] for name in consumers}
    deadline = time.monotonic() + RECEIVE_TIMEOUT_S
    while sum(map(len, got.values())) < count:
        if time.monotonic() > deadline:
            total = sum(map(len, got.values()))
            raise AssertionError(f"{total} of {count} messages came in {RECEIVE_TIMEOUT_S} s")
        for name, consumer in consumers.items():
            got[name] += _poll(consumer, POLL_MS)
    for name, consumer in consumers.items():
        got[name] += _poll(consumer, QUIET_MS)
    return got


def ack_all(consumers: Mapping[str, pulsar.Consumer], received: Received) -> None:
    for name, messages in received.items():
        for m in messages:
            consumers[name].acknowledge(m)


def position(m: pulsar.Message) -> tuple[int, int]:
    mid = m.message_id()
    return mid.ledger_id(), mid.entry_id()


def consumer_stats(broker: PulsarBroker, topic: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The subscription's stats and its consumers' stats by name."""
    sub = broker.topic_stats(topic)["subscriptions"]["sub"]
    return sub, {c["consumerName"]: c for c in sub["consumers"]}


def compare(area: str, pairs: list[tuple[object, object]]) -> list[tuple[object, object]]:
    """Records ``(broker, keyshared)`` pairs under ``area``; returns those that differ."""
    differences = [(got, want) for got, want in pairs if got != want]
    record(f"{AREA} {area}", len(pairs), len(differences))
    return differences


def ranges(selector: ConsistentHashingStickyKeyConsumerSelector) -> dict[int, list[list[int]]]:
    by_consumer = selector.get_consumer_key_hash_ranges()
    return {cid: [[r.start, r.end] for r in rs] for cid, rs in by_consumer.items()}


def test_every_key_goes_to_the_consumer_keyshared_selects(pulsar_broker: PulsarBroker) -> None:
    topic = topic_name("key-shared")
    names = [f"consumer-{i}" for i in range(4)]
    selector = ConsistentHashingStickyKeyConsumerSelector(100)
    for i, name in enumerate(names):
        selector.add_consumer(i, name)
    c = client(pulsar_broker)
    try:
        consumers = subscribe(c, topic, names)
        # Every other message also has an ordering key: the broker's sticky key then.
        sent = {}
        failed: list[pulsar.Result] = []
        producer = c.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
        for i in range(3000):
            ordering_key = f"order-{i}" if i % 2 else None
            payload = str(i).encode()
            sent[payload] = ordering_key or f"key-{i}"
            producer.send_async(
                payload,
                lambda result, _: failed.append(result) if result != pulsar.Result.Ok else None,
                partition_key=f"key-{i}",
                ordering_key=ordering_key,
            )
        producer.flush()
        assert not failed
        received = receive(consumers, len(sent))
        ack_all(consumers, received)
        delivered = [
            (name, names[selector.select(sticky_key_hash(sent[m.data()])) or 0])
            for name, messages in received.items()
            for m in messages
        ]
        _, stats = consumer_stats(pulsar_broker, topic)
        want = ranges(selector)
        range_pairs = [(stats[n]["keyHashRangeArrays"], want[i]) for i, n in enumerate(names)]
    finally:
        c.close()
    assert len(delivered) == len(sent)
    assert not compare("key_shared delivery", list(delivered))
    assert not compare("key_shared consumer ranges", list(range_pairs))


def _draining_stats(stats: Mapping[str, Any]) -> list[tuple[int, int, int]]:
    return sorted(
        (d["hash"], d["unackMsgs"], d["blockedAttempts"]) for d in stats["drainingHashes"]
    )


def _model_draining(dispatcher: StickyKeyDispatcher, cid: int) -> list[tuple[int, int, int]]:
    stats = dispatcher.tracker.consumer_stats(cid)
    return sorted((d.hash, d.unack_msgs, d.blocked_attempts) for d in stats.draining_hashes)


class DrainingRun:
    """One Key_Shared subscription on the broker beside keyshared's dispatcher, fed the
    broker's own message positions in publish order."""

    def __init__(self, broker: PulsarBroker, c: pulsar.Client, names: list[str]) -> None:
        self.broker = broker
        self.client = c
        self.topic = topic_name("draining")
        self.names: list[str] = []
        self.consumers: dict[str, pulsar.Consumer] = {}
        self.dispatcher = StickyKeyDispatcher(100)
        self.hashes: dict[tuple[int, int], int] = {}
        for name in names:
            self.join(name)
        self.producer = c.create_producer(self.topic, batching_enabled=False)

    def join(self, name: str) -> None:
        self.dispatcher.add_consumer(len(self.names), name)
        self.consumers |= subscribe(self.client, self.topic, [name])
        self.names.append(name)

    def publish(self, keys: Iterable[str]) -> list[Delivery]:
        """Sends one message per key; returns the model's deliveries."""
        entries = []
        for key in keys:
            mid = self.producer.send(key.encode(), partition_key=key)
            entries.append((mid.ledger_id(), mid.entry_id(), sticky_key_hash(key), 1))
            self.hashes[entries[-1][:2]] = entries[-1][2]
        results = self.dispatcher.dispatch_read(entries)
        return [(r.consumer_id or 0, (r.ledger_id, r.entry_id)) for r in results if r.delivered]

    def ack(self, received: Received) -> None:
        ack_all(self.consumers, received)
        for name, messages in received.items():
            for m in messages:
                self.dispatcher.ack(self.names.index(name), *position(m))

    def replay(self) -> list[Delivery]:
        """The model's redeliveries once nothing blocks them."""
        out: list[Delivery] = []
        while positions := self.dispatcher.get_messages_to_replay_now(100):
            results = self.dispatcher.dispatch_read(
                [(*p, self.hashes[p], 1) for p in positions], replay=True
            )
            assert all(r.delivered for r in results), "the model still holds entries"
            out += [(r.consumer_id or 0, (r.ledger_id, r.entry_id)) for r in results]
        return out

    def deliveries(self, received: Received) -> list[Delivery]:
        return sorted(
            (self.names.index(name), position(m)) for name, ms in received.items() for m in ms
        )

    def stats_pairs(self) -> list[tuple[object, object]]:
        """(broker, keyshared) pairs: each consumer's ranges, draining hashes and cleared
        total, and the subscription's draining totals."""
        sub, stats = consumer_stats(self.broker, self.topic)
        want = ranges(self.dispatcher.selector)
        model = [self.dispatcher.tracker.consumer_stats(i) for i in range(len(self.names))]
        pairs: list[tuple[object, object]] = []
        for i, name in enumerate(self.names):
            pairs += [
                (stats[name]["keyHashRangeArrays"], want[i]),
                (_draining_stats(stats[name]), _model_draining(self.dispatcher, i)),
                (stats[name]["drainingHashesClearedTotal"], model[i].draining_hashes_cleared_total),
            ]
        unacked = sum(m.draining_hashes_unacked_messages for m in model)
        pairs += [
            (sub["drainingHashesCount"], sum(m.draining_hashes_count for m in model)),
            (sub["drainingHashesUnackedMessages"], unacked),
        ]
        return pairs


def merge(*received: Received) -> Received:
    out: Received = {}
    for r in received:
        for name, messages in r.items():
            out.setdefault(name, []).extend(messages)
    return out


def _wait_for_drained(run: DrainingRun) -> None:
    deadline = time.monotonic() + RECEIVE_TIMEOUT_S
    while consumer_stats(run.broker, run.topic)[0]["drainingHashesCount"]:
        assert time.monotonic() < deadline, "the broker's draining hashes did not clear"
        time.sleep(0.2)


def compare_deliveries(area: str, got: list[Delivery], want: list[Delivery]) -> int:
    differences = len(set(got) ^ set(want))
    record(f"{AREA} {area}", len(want), differences)
    return differences


def test_moved_hashes_wait_for_the_old_consumers_acks(pulsar_broker: PulsarBroker) -> None:
    c = client(pulsar_broker)
    try:
        run = DrainingRun(pulsar_broker, c, ["old-0", "old-1", "old-2"])
        first = run.publish([f"key-{i}" for i in range(300)])
        unacked = receive(run.consumers, len(first))
        run.join("newcomer")
        joined = run.stats_pairs()
        # Known keys whose hash moved drain on their old consumer; new keys go straight on.
        second = run.publish([*(f"key-{i}" for i in range(300)), *(f"new-{i}" for i in range(100))])
        before_acks = receive(run.consumers, len(second))
        newcomer = {"newcomer": before_acks.pop("newcomer")}
        run.ack(merge(unacked, before_acks))
        released = run.replay()
        after_acks = receive(run.consumers, len(released))
        run.ack(merge(newcomer, after_acks))
        _wait_for_drained(run)
        drained = run.stats_pairs()
    finally:
        c.close()
    assert released, "no message was held: the test did not exercise draining"
    assert {cid for cid, _ in released} == {3}
    assert not compare_deliveries("draining first deliveries", run.deliveries(unacked), first)
    got = run.deliveries(merge(before_acks, newcomer))
    assert not compare_deliveries("draining deliveries while held", got, second)
    got = run.deliveries(after_acks)
    assert not compare_deliveries("draining deliveries after acks", got, released)
    assert not compare("draining stats", joined + drained)


def routing_keys() -> list[str]:
    return [*ODD_KEYS, *(f"route-{i}" for i in range(1000))]


def java_client_partitions(
    broker: PulsarBroker, topic: str, keys: list[str], scheme: HashingScheme
) -> list[int]:
    """The partition of each key as the broker's Java client routes it: a WebSocket producer
    (``RoundRobinPartition``, the Java default) with ``scheme``, read from each ack's
    message id."""
    url = (
        f"{broker.websocket_url}/producer/persistent/public/default/{topic}"
        f"?hashingScheme={scheme.value}&messageRoutingMode=RoundRobinPartition"
    )
    ws = websocket.create_connection(url, timeout=RECEIVE_TIMEOUT_S)
    try:
        partitions = []
        for i, key in enumerate(keys):
            payload = base64.b64encode(key.encode()).decode("ascii")
            ws.send(json.dumps({"payload": payload, "key": key, "context": str(i)}))
            ack = json.loads(ws.recv())
            assert ack["result"] == "ok" and ack["context"] == str(i), ack
            message_id = pulsar.MessageId.deserialize(base64.b64decode(ack["messageId"]))
            partitions.append(message_id.partition())
        return partitions
    finally:
        ws.close()


@pytest.mark.parametrize("scheme", list(HashingScheme), ids=lambda s: s.value)
def test_java_client_routes_keys_where_keyshared_says(
    pulsar_broker: PulsarBroker, scheme: HashingScheme
) -> None:
    topic, partitions = topic_name(f"routing-{scheme.value}"), 7
    pulsar_broker.create_partitioned_topic(topic, partitions)
    keys = routing_keys()
    got = java_client_partitions(pulsar_broker, topic, keys, scheme)
    want = [choose_partition(k, partitions, scheme) for k in keys]
    assert not compare(f"{scheme.value} partition routing", list(zip(got, want, strict=True)))
    # The other scheme routes most keys elsewhere: the comparison tells the two apart.
    other = next(s for s in HashingScheme if s is not scheme)
    moved = [choose_partition(k, partitions, other) != p for k, p in zip(keys, got, strict=True)]
    assert sum(moved) > len(keys) // 2


def test_python_client_routes_keys_by_neither_java_scheme(pulsar_broker: PulsarBroker) -> None:
    """The C++ client under pulsar-client hashes keys with its default BoostHash (its
    hashing scheme is not settable from Python), so keyshared cannot say where it routes a
    key: each key keeps one partition, but not the Java client's. An empty key counts as no
    key there and goes round-robin, where the Java client routes it by hash 0."""
    topic, partitions = topic_name("routing-python"), 7
    pulsar_broker.create_partitioned_topic(topic, partitions)
    keys = [k for k in routing_keys() if k]
    c = client(pulsar_broker)
    try:
        producer = c.create_producer(topic, batching_enabled=False)
        got = [producer.send(b"x", partition_key=k).partition() for k in keys]
        again = [producer.send(b"x", partition_key=k).partition() for k in keys]
        empty = {producer.send(b"x", partition_key="").partition() for _ in range(partitions)}
    finally:
        c.close()
    assert got == again
    assert len(empty) > 1
    for scheme in HashingScheme:
        want = [choose_partition(k, partitions, scheme) for k in keys]
        agree = sum(p == q for p, q in zip(got, want, strict=True))
        assert agree < len(keys) // 2, f"{agree} of {len(keys)} keys routed by {scheme.value}"


def test_a_broker_that_is_down_fails_fast() -> None:
    from support.pulsar_broker import free_port

    closed = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(BrokerUnavailable, match="not ready within 2"):
        wait_until_ready(closed, timeout_s=2.0)
    assert time.monotonic() - started < 10
    c = pulsar.Client(
        closed.replace("http", "pulsar"), operation_timeout_seconds=3, connection_timeout_ms=1000
    )
    try:
        with pytest.raises(pulsar.PulsarException):
            c.create_producer("never")
    finally:
        c.close()
    assert time.monotonic() - started < 20


def test_a_broker_that_cannot_start_says_why_and_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A JVM that dies at start: the error carries its log, and neither the process nor its
    temporary folder is left behind."""
    from support import pulsar_broker

    monkeypatch.setattr(pulsar_broker, "JVM_OPTIONS", ["-XX:+NoSuchOptionAnywhere"])
    before = set(Path(tempfile.gettempdir()).glob("keyshared-pulsar-*"))
    started = time.monotonic()
    with pytest.raises(BrokerUnavailable, match="NoSuchOptionAnywhere"):
        PulsarBroker(start_timeout_s=60.0)
    assert time.monotonic() - started < 60
    assert set(Path(tempfile.gettempdir()).glob("keyshared-pulsar-*")) == before
    with pytest.raises(BrokerUnavailable, match=r"classpath\.txt is missing"):
        PulsarBroker(version="0.0.0-not-built")
    assert set(Path(tempfile.gettempdir()).glob("keyshared-pulsar-*")) == before
