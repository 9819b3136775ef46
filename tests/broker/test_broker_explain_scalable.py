"""``keyshared explain`` on a scalable topic of a running Pulsar 5.0.0-M1 broker.

A topic of two segments in the namespace that never scales by itself gets keyed messages
from M1's V5 producer (the ``v5_client`` fixture), which reports the segment each was stored
in; its subscription reads nothing yet. Segment 0 is then split. Explain, reading the
broker's admin REST, must give the broker's DAG, say that segment 0 still drains (its
backlog: the messages stored there) and that its children wait for it, and place every key
in the segment the V5 producer now picks, under the 5.0.0-M1 profile. A stream consumer
then joins: the segments the broker assigns it are those explain gives it, before and after
it has read and acked everything, when segment 0 has drained and nothing waits any more.
The snapshot saved by ``--save`` explains the same offline.

With ``KEYSHARED_RECORD_STATS=1`` the run also writes that snapshot and the segment each key
was stored in to tests/fixtures/scalable/m1-split*.json, the fixtures of
tests/unit/test_explain_scalable.py.
"""

from __future__ import annotations

import io
import json
import os
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.pulsar_broker import ScalableBroker, V5Client
from support.pulsar_oracle import MILESTONE, record

from keyshared.cli import main
from keyshared.explain import explain_scalable, read_snapshot
from keyshared.explain.scalable_topic import read_layout
from keyshared.routing import bucket_hash
from keyshared.scalable import TopicName
from keyshared.versions import M1

FIXTURES = Path(__file__).parents[1] / "fixtures" / "scalable"
WAIT_S = 60.0
SUB = "sub"
READER = "reader"
KEYS = [f"key-{i}" for i in range(40)]

Pairs = list[tuple[object, object]]


def _cli(*argv: str) -> Any:
    out = io.StringIO()
    assert main(["explain", *argv], out=out) == 0
    return json.loads(out.getvalue()) if "--json" in argv else out.getvalue()


def _segment_id(segment_topic: str) -> int:
    return int(segment_topic.rsplit("-", 1)[1])


def _compare(area: str, pairs: Pairs) -> Pairs:
    differences = [(got, want) for got, want in pairs if got != want]
    record(f"{MILESTONE} broker explain scalable {area}", len(pairs), len(differences))
    return differences


def _explain(broker: ScalableBroker, topic: str, *extra: str) -> Any:
    keys = [a for k in KEYS for a in ("--key", k)]
    return _cli(
        "--url", broker.web_url, "--topic", topic, "--subscription", SUB,
        "--pulsar-version", M1, "--json", *keys, *extra,
    )  # fmt: skip


def _wait_drained(broker: ScalableBroker, topic: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        got = _explain(broker, topic)
        if not got["still_draining"]:
            return got
        assert time.monotonic() < deadline, f"segments {got['still_draining']} did not drain"
        time.sleep(1.0)


def _assignments(
    broker: ScalableBroker, v5: V5Client, topic: str, consumer: int
) -> tuple[list[int], list[int]]:
    """The segments the broker assigned the consumer and those explain gives it, once they
    agree or WAIT_S passed (the controller reassigns a moment after a segment drains)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        _, segments = v5.assignment(consumer)
        got = sorted(s[0] for s in segments)
        explained = _explain(broker, topic, "--consumer", READER)
        want = sorted(s["segment_id"] for s in explained["segments"] if READER in s["consumers"])
        if got == want or time.monotonic() > deadline:
            return got, want
        time.sleep(0.5)


def test_explain_follows_a_scalable_topic_through_a_split(
    m1_broker: ScalableBroker, v5_client: V5Client, tmp_path: Path
) -> None:
    topic = m1_broker.create(f"topic://public/manual/explain-{uuid.uuid4().hex[:8]}", segments=2)
    m1_broker.scalable(topic, f"subscriptions/{SUB}", "PUT")
    stored = dict(zip(KEYS, v5_client.produce(topic, KEYS), strict=True))
    assert set(stored.values()) == {0, 1}, "the keys did not reach both segments"

    # Before the split: every key is where the M1 profile routes it.
    before = _explain(m1_broker, topic)
    pairs: Pairs = [(stored[k["key"]], k["segment_id"]) for k in before["keys"]]

    m1_broker.split(topic, 0)
    saved = tmp_path / "snapshot.json"
    held = _explain(m1_broker, topic, "--save", str(saved))
    if os.environ.get("KEYSHARED_RECORD_STATS") == "1":
        FIXTURES.mkdir(parents=True, exist_ok=True)
        (FIXTURES / "m1-split.json").write_text(saved.read_text())
        (FIXTURES / "m1-split.stored.json").write_text(json.dumps(stored, indent=2) + "\n")
    layout = read_layout(m1_broker.layout(topic))
    segments = {s["segment_id"]: s for s in held["segments"]}
    children = layout.segment(0).child_ids
    per_segment = Counter(stored.values())
    pairs += [
        # The DAG as the broker has it.
        (
            {
                i: (s.hash_range.to_hex(), s.state.value, list(s.parent_ids), list(s.child_ids))
                for i, s in layout.segments.items()
            },
            {
                i: (s["hash_range"], s["state"], s["parent_ids"], s["child_ids"])
                for i, s in segments.items()
            },
        ),
        # Segment 0 still holds what was stored there, unread; its children wait for it.
        ([0], held["still_draining"]),
        (per_segment[0], segments[0]["backlog"]),
        ({c: [0] for c in children}, {c: segments[c]["waiting_for"] for c in children}),
    ]
    for k in held["keys"]:
        seg = layout.find_active_segment(bucket_hash(k["key"]))
        pairs.append((seg.segment_id, k["segment_id"]))
        pairs.append(([0] if stored[k["key"]] == 0 else [], k["waits_for"]))
    offline = explain_scalable(
        read_snapshot(json.loads(saved.read_text())), SUB, keys=KEYS, pulsar_version=M1
    ).to_dict()
    pairs.append((held, offline))

    # A consumer joins: the broker gives it what explain says, before and after it has
    # read and acked everything, when segment 0 has drained and nothing waits any more.
    consumer = v5_client.stream_consumer(topic, SUB, READER, own_client=True)
    try:
        pairs.append(_assignments(m1_broker, v5_client, topic, consumer))
        received = v5_client.receive(consumer)
        pairs.append((sorted(KEYS), sorted(m["key"] for m in received)))
        drained = _wait_drained(m1_broker, topic)
        pairs.append(_assignments(m1_broker, v5_client, topic, consumer))
    finally:
        v5_client.close(consumer)
    after = {s["segment_id"]: s for s in drained["segments"]}
    pairs += [
        (True, after[0]["drained"]),
        ({c: [] for c in children}, {c: after[c]["waiting_for"] for c in children}),
        ([], [k["key"] for k in drained["keys"] if k["waits_for"]]),
    ]
    assert str(TopicName.get(topic)) == drained["topic"]
    assert not _compare("split and drain", pairs)


def test_a_topic_that_is_not_there_is_a_clear_error(
    m1_broker: ScalableBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["explain", "--url", m1_broker.web_url, "--topic", "topic://public/manual/none"]
    assert main([*argv, "--subscription", SUB]) == 2
    err = capsys.readouterr().err
    assert "/admin/v2/scalable/public/manual/none: HTTP 404" in err
    record(f"{MILESTONE} broker explain scalable errors", 1, 0)
