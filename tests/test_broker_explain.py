"""``keyshared explain`` against running Pulsar 4.2.4 and 4.0.7 standalone brokers.

Three consumers hold everything they received unacked, a fourth never receives (its
receiver queue of 5 fills, leaving it no permits), and a newcomer joins: the ranges it
takes drain on the old consumers, and the newcomer gets none of their keys' messages. The
explanation of the broker's stats (library and CLI) must name the held hashes, the consumers
holding them and the sample keys they block, each answer checked against the broker's own
stats and against what each consumer received. Its what-ifs are checked against the
broker's ranges before and after the join.

With ``KEYSHARED_RECORD_STATS=1`` the run also writes its stats to tests/fixtures/stats/,
the fixtures of tests/test_explain.py.
"""

from __future__ import annotations

import io
import json
import logging
import os
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pulsar
import pytest
from pulsar_broker import PulsarBroker, owner_by_ranges
from pulsar_oracle import LTS, NEWEST, record

from keyshared.cli import main
from keyshared.explain import Explanation, explain_subscription, read_subscription

FIXTURES = Path(__file__).parent / "fixtures" / "stats"
TIMEOUT_S = 60.0
QUIET_MS = 1500
POLL_MS = 20
SUB = "sub"
HOLDERS = ["old-0", "old-1", "old-2"]
STUCK = "stuck"
NEWCOMER = "newcomer"
FIRST = [f"key-{i}" for i in range(300)]
SAMPLE = [*FIRST, *(f"new-{i}" for i in range(100))]

Pairs = list[tuple[object, object]]


def _client(broker: PulsarBroker) -> pulsar.Client:
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.WARNING)
    return pulsar.Client(
        broker.service_url, operation_timeout_seconds=15, connection_timeout_ms=5000, logger=logger
    )


def _subscribe(c: pulsar.Client, topic: str, name: str, queue: int = 1000) -> pulsar.Consumer:
    return c.subscribe(
        topic,
        SUB,
        consumer_type=pulsar.ConsumerType.KeyShared,
        consumer_name=name,
        receiver_queue_size=queue,
    )


def _receive(consumers: Mapping[str, pulsar.Consumer], want: int) -> dict[str, list[str]]:
    """The keys each consumer receives: at least ``want`` messages in all (AssertionError
    if they do not come within TIMEOUT_S), then whatever comes before a quiet spell."""
    got: dict[str, list[str]] = {name: [] for name in consumers}
    deadline = time.monotonic() + TIMEOUT_S
    quiet_since = time.monotonic()
    while True:
        fresh = 0
        for name, consumer in consumers.items():
            try:
                got[name].append(consumer.receive(timeout_millis=POLL_MS).partition_key())
                fresh += 1
            except pulsar.Timeout:
                pass
        now = time.monotonic()
        quiet_since = now if fresh else quiet_since
        count = sum(map(len, got.values()))
        if count >= want and now - quiet_since > QUIET_MS / 1000:
            return got
        assert now < deadline, f"{count} of {want} messages came in {TIMEOUT_S} s"


class Scene:
    """The run: stats before the join and while held, and the keys each consumer received
    after the join."""

    def __init__(self, broker: PulsarBroker) -> None:
        topic = f"explain-{uuid.uuid4().hex[:8]}"
        c = _client(broker)
        try:
            producer = c.create_producer(topic, batching_enabled=False)
            holders = {name: _subscribe(c, topic, name) for name in HOLDERS}
            # Never receives: its queue of 5 fills and the broker has no permits for it.
            _subscribe(c, topic, STUCK, queue=5)
            self._send(producer, FIRST)
            before = broker.topic_stats(topic)
            for_holders = sum(owner_by_ranges(before, k) in HOLDERS for k in FIRST)
            self.first = _receive(holders, for_holders)
            self.before = broker.topic_stats(topic)
            holders[NEWCOMER] = _subscribe(c, topic, NEWCOMER)
            self._send(producer, SAMPLE)
            self.joined = broker.topic_stats(topic)
            owned = sum(owner_by_ranges(self.joined, k) in HOLDERS for k in SAMPLE)
            self.second = _receive(holders, owned)
            self.held = broker.topic_stats(topic)
            # The same, read by the CLI from the admin endpoint while the consumers are on.
            self.live = _cli(
                "--url", broker.web_url, "--topic", topic, "--subscription", SUB, "--json"
            )
        finally:
            c.close()

    @staticmethod
    def _send(producer: pulsar.Producer, keys: Iterable[str]) -> None:
        for key in keys:
            producer.send(key.encode(), partition_key=key)

    def save(self, suffix: str = "") -> None:
        """Writes the stats and what each consumer received after the join (file names
        ending in ``suffix``) and the sample keys to FIXTURES."""
        FIXTURES.mkdir(parents=True, exist_ok=True)
        received = {name: sorted(set(keys)) for name, keys in self.second.items()}
        for name, data in (
            ("before-join", self.before),
            ("held", self.held),
            ("held.received", received),
        ):
            (FIXTURES / f"{name}{suffix}.json").write_text(json.dumps(data, indent=2) + "\n")
        (FIXTURES / "held.keys.txt").write_text("".join(f"{k}\n" for k in SAMPLE))


@pytest.fixture(scope="module")
def scene(pulsar_broker: PulsarBroker) -> Scene:
    run = Scene(pulsar_broker)
    if os.environ.get("KEYSHARED_RECORD_STATS") == "1":
        run.save()
    return run


def _compare(area: str, pairs: Pairs, version: str = NEWEST) -> Pairs:
    """Records ``(broker, keyshared)`` pairs; returns those that differ."""
    differences = [(got, want) for got, want in pairs if got != want]
    record(f"{version} broker explain {area}", len(pairs), len(differences))
    return differences


def _cli(*argv: str) -> Any:
    out = io.StringIO()
    assert main(["explain", *argv], out=out) == 0
    return json.loads(out.getvalue()) if "--json" in argv else out.getvalue()


def _explanation(scene: Scene) -> Explanation:
    sub = read_subscription(scene.held, SUB)
    return explain_subscription(sub, sample=dict.fromkeys(SAMPLE, 1), keys=["key-7", "new-3"])


def held_pairs(scene: Scene) -> Pairs:
    e = _explanation(scene)
    broker_held = sorted(
        (d["hash"], c["consumerName"], d["unackMsgs"], d["blockedAttempts"])
        for c in scene.held["subscriptions"][SUB]["consumers"]
        for d in c.get("drainingHashes") or []
    )
    assert broker_held, "nothing was held: the scene did not exercise draining"
    ours = [(h.hash, h.held_by, h.unack_msgs, h.blocked_attempts) for h in e.held]
    # The hash waits for the newcomer, whose range has it now.
    owners = [(NEWCOMER, h.owner) for h in e.held]
    sub = scene.held["subscriptions"][SUB]
    totals = [
        (sub["drainingHashesCount"], e.draining_hashes_count),
        (sub["drainingHashesUnackedMessages"], sum(h.unack_msgs for h in e.held)),
    ]
    return [*zip(broker_held, ours, strict=True), *owners, *totals]


def blocked_pairs(scene: Scene) -> Pairs:
    e = _explanation(scene)
    owned = {k for k in SAMPLE if owner_by_ranges(scene.held, k) == NEWCOMER}
    received = set(scene.second[NEWCOMER])
    blocked = {k for h in e.held for k in h.keys}
    assert owned - received, "the newcomer received every key of its ranges"
    pairs: Pairs = [(k in received, k not in blocked) for k in sorted(owned)]
    # No key of a held hash reaches anyone else either.
    pairs += [(k in scene.second[n], False) for k in sorted(blocked) for n in HOLDERS]
    return pairs


def owner_pairs(scene: Scene) -> Pairs:
    e = _explanation(scene)
    sample = explain_subscription(read_subscription(scene.held, SUB), keys=SAMPLE)
    answers = {k.key: k for k in sample.keys}
    pairs: Pairs = [(owner_by_ranges(scene.held, k), answers[k].owner) for k in SAMPLE]
    # Whoever received a key after the join is its owner (the stuck consumer receives none).
    pairs += [(name, answers[k].owner) for name, keys in scene.second.items() for k in set(keys)]
    consumers = scene.held["subscriptions"][SUB]["consumers"]
    pairs += [
        (sum(e - s + 1 for s, e in c["keyHashRangeArrays"]), share.hashes)
        for c, share in zip(consumers, e.shares, strict=True)
    ]
    assert abs(sum(s.hash_share for s in e.shares) - 1) < 1e-9
    stuck = sorted(c["consumerName"] for c in consumers if c["availablePermits"] <= 0)
    blocked = sorted(c["consumerName"] for c in consumers if c["blockedConsumerOnUnackedMsgs"])
    pairs += [
        (stuck, sorted(s.consumer for s in e.stuck if "no permits" in s.reasons)),
        (
            blocked,
            sorted(s.consumer for s in e.stuck if "blocked on unacked messages" in s.reasons),
        ),
    ]
    assert STUCK in stuck
    return pairs


def what_if_pairs(scene: Scene) -> Pairs:
    held = read_subscription(scene.held, SUB)
    before = read_subscription(scene.before, SUB)
    leave = explain_subscription(held, leave=NEWCOMER).what_if
    join = explain_subscription(before, join=NEWCOMER).what_if
    assert leave is not None and join is not None
    assert leave.ring_matches and join.ring_matches
    pairs: Pairs = [
        (
            {c.label: c.ranges for c in before.consumers},
            {s.consumer: s.ranges for s in leave.shares_after},
        ),
        (
            {c.label: c.ranges for c in held.consumers},
            {s.consumer: s.ranges for s in join.shares_after},
        ),
        # Leaving moves exactly the newcomer's ranges; joining moves them to it.
        (held.consumer(NEWCOMER).ranges, tuple((m.start, m.end) for m in join.moves)),
        ({NEWCOMER}, {m.target for m in join.moves}),
    ]
    return pairs


# Each check gives (broker, keyshared) pairs; the stats of both releases are read alike.
CHECKS = {
    "held hashes": held_pairs,
    "blocked keys": blocked_pairs,
    "owners and shares": owner_pairs,
    "what-if": what_if_pairs,
}


@pytest.mark.parametrize("check", list(CHECKS))
def test_explanations_match_the_broker(scene: Scene, check: str) -> None:
    assert not _compare(check, CHECKS[check](scene))


@pytest.fixture(scope="module")
def lts_scene() -> Iterator[Scene]:
    """The same run on a Pulsar 4.0.7 standalone broker of its own."""
    with PulsarBroker(LTS) as broker:
        run = Scene(broker)
        if os.environ.get("KEYSHARED_RECORD_STATS") == "1":
            run.save(f"-{LTS}")
        yield run


@pytest.mark.parametrize("check", list(CHECKS))
def test_explanations_match_a_4_0_broker(lts_scene: Scene, check: str) -> None:
    assert not _compare(check, CHECKS[check](lts_scene), LTS)


def test_the_cli_says_the_same(scene: Scene, tmp_path: Path) -> None:
    stats, keys = tmp_path / "held.json", tmp_path / "keys.txt"
    stats.write_text(json.dumps(scene.held))
    keys.write_text("".join(f"{k}\n" for k in SAMPLE))
    png = tmp_path / "ring.png"
    got = _cli(str(stats), "--subscription", SUB, "--keys", str(keys), "--json", "--png", str(png))
    want = _explanation(scene).to_dict()
    held = [(h["hash"], h["held_by"], h["keys"]) for h in got["held"]]
    pairs: Pairs = [
        (got["shares"], want["shares"]),
        (held, [(h["hash"], h["held_by"], h["keys"]) for h in want["held"]]),
    ]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = _cli(str(stats), "--subscription", SUB, "--keys", str(keys), "--leave", NEWCOMER)
    for h in want["held"]:
        assert f"{h['hash']}" in text and h["held_by"] in text
    assert "it reproduces the broker's ranges" in text
    assert not _compare("cli", pairs)


def test_explain_reads_the_live_admin_endpoint(scene: Scene) -> None:
    want = _explanation(scene)
    got = scene.live
    pairs: Pairs = [
        (
            [(h["hash"], h["held_by"]) for h in got["held"]],
            [(h.hash, h.held_by) for h in want.held],
        ),
        ([s["ranges"] for s in got["shares"]], [[list(r) for r in s.ranges] for s in want.shares]),
    ]
    assert not _compare("admin endpoint", pairs)


def test_an_unknown_topic_or_a_silent_broker_is_a_clear_error(
    pulsar_broker: PulsarBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    from pulsar_broker import free_port

    argv = [
        "explain",
        "--url",
        pulsar_broker.web_url,
        "--topic",
        "never-made",
        "--subscription",
        SUB,
    ]
    assert main(argv) == 2
    assert "HTTP 404" in capsys.readouterr().err
    started = time.monotonic()
    closed = f"http://127.0.0.1:{free_port()}"
    argv = ["explain", "--url", closed, "--topic", "t", "--subscription", SUB, "--timeout", "2"]
    assert main(argv) == 2
    assert closed in capsys.readouterr().err
    assert time.monotonic() - started < 10
