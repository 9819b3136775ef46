"""``keyshared explain`` against running Pulsar 4.2.4 and 4.0.7 standalone brokers.

Three consumers hold everything they received unacked, a fourth never receives (its
receiver queue of 5 fills, leaving it no permits), and a newcomer joins: the ranges it
takes drain on the old consumers, and the newcomer gets none of their keys' messages. The
explanation of the broker's stats (library and CLI) must name the held hashes, the consumers
holding them and the sample keys they block, each answer checked against the broker's own
stats and against what each consumer received. Its what-ifs are checked against the
broker's ranges before and after the join.

With ``KEYSHARED_RECORD_STATS=1`` the run also writes its stats to tests/fixtures/stats/,
the fixtures of tests/unit/test_explain.py.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pulsar
import pytest
from support.pulsar_broker import PulsarBroker, owner_by_ranges
from support.pulsar_oracle import LTS, NEWEST, record

from keyshared.cli import main
from keyshared.explain.answers import place_message
from keyshared.explain.explanation import Explanation, explain_subscription
from keyshared.explain.stats import read_subscription, shown
from keyshared.routing import sticky_key_hash

FIXTURES = Path(__file__).parents[1] / "fixtures" / "stats"
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


def _receive(
    consumers: Mapping[str, pulsar.Consumer], want: int
) -> dict[str, list[pulsar.Message]]:
    """The messages each consumer receives: at least ``want`` in all (AssertionError if
    they do not come within TIMEOUT_S), then whatever comes before a quiet spell."""
    got: dict[str, list[pulsar.Message]] = {name: [] for name in consumers}
    deadline = time.monotonic() + TIMEOUT_S
    quiet_since = time.monotonic()
    while True:
        fresh = 0
        for name, consumer in consumers.items():
            try:
                got[name].append(consumer.receive(timeout_millis=POLL_MS))
                fresh += 1
            except pulsar.Timeout:
                pass
        now = time.monotonic()
        quiet_since = now if fresh else quiet_since
        count = sum(map(len, got.values()))
        if count >= want and now - quiet_since > QUIET_MS / 1000:
            return got
        assert now < deadline, f"{count} of {want} messages came in {TIMEOUT_S} s"


def _keys(received: Mapping[str, list[pulsar.Message]]) -> dict[str, list[str]]:
    return {name: [m.partition_key() for m in messages] for name, messages in received.items()}


class Scene:
    """The run: stats before the join and while held, and the keys each consumer received
    after the join. Then the old consumers ack everything while ``keyshared explain
    --watch`` looks on (``watch``), and ``acked`` are the stats once their hashes drained:
    the stuck consumer's stay held."""

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
            first = _receive(holders, for_holders)
            self.first = _keys(first)
            self.before = broker.topic_stats(topic)
            holders[NEWCOMER] = _subscribe(c, topic, NEWCOMER)
            self._send(producer, SAMPLE)
            self.joined = broker.topic_stats(topic)
            owned = sum(owner_by_ranges(self.joined, k) in HOLDERS for k in SAMPLE)
            second = _receive(holders, owned)
            self.second = _keys(second)
            self.held = broker.topic_stats(topic)
            # The same, read by the CLI from the admin endpoint while the consumers are on.
            url = ("--url", broker.web_url, "--topic", topic, "--subscription", SUB)
            self.live = _cli(*url, "--json")
            self.live_text = _cli(*url)
            self.watch = self._ack_while_watched(broker, topic, holders, first, second, url=url)
            self.acked = broker.topic_stats(topic)
        finally:
            c.close()

    @staticmethod
    def _ack_while_watched(
        broker: PulsarBroker,
        topic: str,
        consumers: Mapping[str, pulsar.Consumer],
        *received: Mapping[str, list[pulsar.Message]],
        url: tuple[str, ...],
    ) -> str:
        """``keyshared explain --watch`` output while the old consumers ack all they hold:
        its one re-read comes once their draining hashes are gone from the stats."""

        def ack(seconds: float) -> None:
            for batch in received:
                for name in HOLDERS:
                    for message in batch[name]:
                        consumers[name].acknowledge(message)
            deadline = time.monotonic() + TIMEOUT_S
            while any(
                c.get("drainingHashes")
                for c in broker.topic_stats(topic)["subscriptions"][SUB]["consumers"]
                if c["consumerName"] in HOLDERS
            ):
                assert time.monotonic() < deadline, "the old consumers' hashes did not drain"
                time.sleep(0.2)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("keyshared.explain.command._sleep", ack)
            return str(_cli(*url, "--watch", "1", "--count", "1"))

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


def verdict_pairs(scene: Scene) -> Pairs:
    """The verdict against the broker: who waits on whom, who takes nothing, and which
    held hashes will not drain, this last checked by the broker's stats after every other
    consumer acked all it had."""
    e = _explanation(scene)
    v = e.verdict
    assert v is not None
    consumers = scene.held["subscriptions"][SUB]["consumers"]
    draining = {
        c["consumerName"]: sorted(d["hash"] for d in c["drainingHashes"]) for c in consumers
    }
    still = {
        (d["hash"], c["consumerName"])
        for c in scene.acked["subscriptions"][SUB]["consumers"]
        for d in c.get("drainingHashes") or []
    }
    assert draining[STUCK] and still, "the stuck consumer held nothing"
    after = explain_subscription(read_subscription(scene.acked, SUB)).verdict
    assert after is not None
    acking = sorted(
        c["consumerName"]
        for c in scene.acked["subscriptions"][SUB]["consumers"]
        if c["lastAckedTimestamp"] > 0
    )
    pairs: Pairs = [
        (
            {(NEWCOMER, name): tuple(h) for name, h in draining.items() if h},
            {(w.waiting, w.holder): w.hashes for w in v.waits},
        ),
        (
            sorted(c["consumerName"] for c in consumers if c["availablePermits"] <= 0),
            sorted(v.not_taking),
        ),
        # Predicted not to drain by itself, and indeed still held once the others acked.
        ({(h, STUCK) for h in draining[STUCK]}, still),
        (tuple(draining[STUCK]), v.never_draining),
        (scene.held["subscriptions"][SUB]["msgInReplay"], v.msg_in_replay),
        (
            [(c["msgOutCounter"], c["lastAckedTimestamp"]) for c in consumers],
            [(h.msg_out_counter, h.last_acked_timestamp) for h in v.consumers],
        ),
        (acking, sorted(h.consumer for h in after.consumers if h.last_acked_timestamp > 0)),
        (sorted(HOLDERS), acking),
    ]
    lines = scene.live_text.splitlines()
    pairs += [
        (True, lines[0].startswith(f"verdict: {NEWCOMER} waits for ")),
        (True, lines[1].startswith(f"{STUCK} takes no messages: no permits")),
        (True, "will not drain by itself" in lines[1]),
    ]
    return pairs


def watch_pairs(scene: Scene) -> Pairs:
    """What --watch printed while the old consumers acked: their hashes drained, each of
    them started acking; the stuck consumer's hashes did not drain."""
    held = {
        c["consumerName"]: len(c["drainingHashes"])
        for c in scene.held["subscriptions"][SUB]["consumers"]
    }
    drained = ", ".join(f"{name} {held[name]}" for name in HOLDERS if held[name])
    out = scene.watch
    drained_line = next(line for line in out.splitlines() if "drained:" in line).strip()
    pairs: Pairs = [(f"{sum(held[n] for n in HOLDERS)} hash(es) drained: {drained}", drained_line)]
    pairs += [(True, f"{name} started acking" in out) for name in HOLDERS]
    return pairs


def picture_pairs(scene: Scene) -> Pairs:
    from keyshared.explain.plot import consumer_bars

    bars = consumer_bars(_explanation(scene))
    consumers = scene.held["subscriptions"][SUB]["consumers"]
    return [
        (
            [
                (c["consumerName"], len(c["drainingHashes"]), c["availablePermits"] <= 0)
                for c in consumers
            ],
            [(b.consumer, b.holds, b.stuck) for b in bars],
        ),
        ([STUCK], [b.consumer for b in bars if b.never_drains]),
    ]


# Each check gives (broker, keyshared) pairs; the stats of both releases are read alike.
CHECKS = {
    "held hashes": held_pairs,
    "blocked keys": blocked_pairs,
    "owners and shares": owner_pairs,
    "what-if": what_if_pairs,
    "verdict": verdict_pairs,
    "watch": watch_pairs,
    "picture": picture_pairs,
}


@pytest.mark.parametrize("check", list(CHECKS))
def test_explanations_match_the_broker(scene: Scene, check: str) -> None:
    assert not _compare(check, CHECKS[check](scene))


@pytest.fixture(scope="module")
def lts_scene(lts_broker: PulsarBroker) -> Scene:
    """The same run on the 4.0.7 broker."""
    run = Scene(lts_broker)
    if os.environ.get("KEYSHARED_RECORD_STATS") == "1":
        run.save(f"-{LTS}")
    return run


@pytest.fixture(params=[NEWEST, LTS])
def broker(request: pytest.FixtureRequest) -> PulsarBroker:
    """Each release's broker in turn: 4.2.4, then 4.0.7."""
    running: PulsarBroker = request.getfixturevalue(
        "pulsar_broker" if request.param == NEWEST else "lts_broker"
    )
    return running


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
    from support.pulsar_broker import free_port

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


# --- keys as the broker resolves them -------------------------------------------------------

PRODUCER = "explain-producer"
ODD_NAME = "tab\tname\x1b[31m"


class KeylessScene:
    """Three consumers that receive and ack; one producer (batching off, so that every
    message is an entry of its own) sends keyless messages, messages with an empty key,
    and messages whose ordering key differs from their key, each numbered in its payload.
    ``got`` is the consumer each message reached."""

    KEYLESS = range(0, 300)
    EMPTY = range(300, 400)
    ORDERED = range(400, 600)

    def __init__(self, broker: PulsarBroker) -> None:
        self.topic = f"explain-keyless-{uuid.uuid4().hex[:8]}"
        c = _client(broker)
        try:
            names = ["one", "two", ODD_NAME]
            consumers = {n: _subscribe(c, self.topic, n) for n in names}
            producer = c.create_producer(self.topic, producer_name=PRODUCER, batching_enabled=False)
            for i in self.KEYLESS:
                producer.send(str(i).encode(), sequence_id=i)
            for i in self.EMPTY:
                producer.send(str(i).encode(), partition_key="", sequence_id=i)
            for i in self.ORDERED:
                producer.send(
                    str(i).encode(), partition_key=f"k{i}", ordering_key=f"o{i}", sequence_id=i
                )
            received = _receive(consumers, len(self.KEYLESS) + len(self.EMPTY) + len(self.ORDERED))
            for name, messages in received.items():
                for m in messages:
                    consumers[name].acknowledge(m)
            self.got = {int(m.data()): name for name, ms in received.items() for m in ms}
            self.stats = broker.topic_stats(self.topic)
            self.text = _cli(
                "--url", broker.web_url, "--topic", self.topic, "--subscription", SUB,
                "--key", "", "--keyless", PRODUCER, "7",
            )  # fmt: skip
        finally:
            c.close()


@pytest.fixture(scope="module")
def keyless_scenes() -> dict[str, KeylessScene]:
    return {}


def _keyless(broker: PulsarBroker, scenes: dict[str, KeylessScene]) -> KeylessScene:
    if broker.version not in scenes:
        scenes[broker.version] = KeylessScene(broker)
    return scenes[broker.version]


def test_keyless_and_ordering_key_messages_go_where_explain_says(
    broker: PulsarBroker, keyless_scenes: dict[str, KeylessScene]
) -> None:
    scene = _keyless(broker, keyless_scenes)
    sub = read_subscription(scene.stats, SUB)
    labels = {c.label: c.name for c in sub.consumers}

    def predicted(i: int) -> str | None:
        if i in scene.ORDERED:
            answer = place_message(sub, f"k{i}", ordering_key=f"o{i}".encode())
        else:  # keyless, and an empty key as the Python client sends it: none
            answer = place_message(sub, producer_name=PRODUCER, sequence_id=i)
        return None if answer.owner is None else labels[answer.owner]

    everything = [*scene.KEYLESS, *scene.EMPTY, *scene.ORDERED]
    assert sorted(scene.got) == everything
    pairs: Pairs = [(scene.got[i], predicted(i)) for i in everything]
    # Keyless messages spread over every consumer; hashed as "" they would all go to one.
    spread = {scene.got[i] for i in scene.KEYLESS}
    assert len(spread) == 3
    as_empty = owner_by_ranges(scene.stats, "")
    wrong = sum(scene.got[i] != as_empty for i in scene.KEYLESS)
    assert wrong > len(scene.KEYLESS) // 3
    # Hashed by the key instead of the ordering key, many would be placed elsewhere.
    assert any(scene.got[i] != owner_by_ranges(scene.stats, f"k{i}") for i in scene.ORDERED)
    assert not _compare("keyless and ordering keys", pairs, broker.version)


def test_the_cli_explains_keyless_messages_and_escapes_names(
    broker: PulsarBroker, keyless_scenes: dict[str, KeylessScene]
) -> None:
    scene = _keyless(broker, keyless_scenes)
    text = scene.text
    assert "'' (no key): a message without key or ordering key" in text
    row = next(line for line in text.splitlines() if line.startswith(f"{PRODUCER}-7 "))
    assert row.split()[1] == str(sticky_key_hash(f"{PRODUCER}-7"))
    seventh = scene.got[7]
    want = shown(seventh)
    assert re.split(r"\s{2,}", row)[2] == want
    assert "\x1b" not in text and "\t" not in text
    assert repr(ODD_NAME) in text
    record(f"{broker.version} broker explain escaped names", 1, 0)


# --- partitioned topics ---------------------------------------------------------------------


def test_a_partitioned_topic_names_its_partitions_and_all_are_explained(
    broker: PulsarBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = f"explain-parted-{uuid.uuid4().hex[:8]}"
    broker.create_partitioned_topic(topic, 2)
    c = _client(broker)
    try:
        consumers = {n: _subscribe(c, topic, n) for n in ("p-a", "p-b")}
        producer = c.create_producer(topic, batching_enabled=False)
        for i in range(40):
            producer.send(str(i).encode(), partition_key=f"key-{i}")
        _receive(consumers, 40)
        url = ["explain", "--url", broker.web_url, "--topic", topic, "--subscription", SUB]
        assert main(url) == 2
        err = capsys.readouterr().err
        full = f"persistent://public/default/{topic}"
        assert "HTTP 404" in err
        assert f"{full} is a partitioned topic of 2 partition(s), {full}-partition-0 to" in err
        everything = _cli(*url[1:], "--all-partitions", "--json")
        text = _cli(*url[1:], "--all-partitions")
        stats = {
            p: broker.admin(f"persistent/public/default/{p.rsplit('/', 1)[1]}/stats")
            for p in everything
        }
    finally:
        c.close()
    pairs: Pairs = [(sorted(everything), [f"{full}-partition-{i}" for i in range(2)])]
    for partition, answer in everything.items():
        consumers_stats = stats[partition]["subscriptions"][SUB]["consumers"]
        pairs.append(
            (
                {
                    c["consumerName"]: [list(r) for r in sorted(c["keyHashRangeArrays"])]
                    for c in consumers_stats
                },
                {s["consumer"]: s["ranges"] for s in answer["shares"]},
            )
        )
        assert f"== {partition} ==" in text
    assert not _compare("partitioned topic", pairs, broker.version)


# --- the unacked limit -----------------------------------------------------------------------


def test_a_consumer_at_its_unacked_limit_is_named_with_the_limit(broker: PulsarBroker) -> None:
    namespace = f"public/explain-limit-{uuid.uuid4().hex[:6]}"
    limit = 20
    broker.admin(f"namespaces/{namespace}", "PUT")
    broker.admin(f"namespaces/{namespace}/maxUnackedMessagesPerConsumer", "POST", limit)
    topic = f"persistent://{namespace}/limited"
    c = _client(broker)
    try:
        consumer = _subscribe(c, topic, "greedy")
        producer = c.create_producer(topic, batching_enabled=False)
        for i in range(3 * limit):
            producer.send(str(i).encode(), partition_key=f"key-{i}")
        _receive({"greedy": consumer}, limit)
        got = _cli("--url", broker.web_url, "--topic", topic, "--subscription", SUB, "--json")
        stats = broker.admin(f"persistent/{namespace}/limited/stats")
    finally:
        c.close()
    greedy = stats["subscriptions"][SUB]["consumers"][0]
    health = got["verdict"]["consumers"][0]
    pairs: Pairs = [
        (greedy["blockedConsumerOnUnackedMsgs"], True),
        (greedy["blockedConsumerOnUnackedMsgs"], not health["taking_messages"]),
        (limit, health["max_unacked_messages"]),
        (
            f"at its unacked limit ({greedy['unackedMessages']} of {limit})",
            health["reasons"][0],
        ),
        (["greedy"], got["verdict"]["not_taking"]),
    ]
    assert not _compare("unacked limit", pairs, broker.version)
