"""``keyshared explain`` on a scalable topic of a running Pulsar 5.0.0-M1 broker.

A topic of two segments in the namespace that never scales by itself gets keyed messages
from the V5 client (tests/v5_explain/ExplainV5.java), which a stream consumer reads without
acking: each message's topic names the segment it was stored in. Segment 0 is then split.
Explain, reading the broker's admin REST, must give the broker's DAG, say that segment 0
still drains (its backlog: the messages stored there) and that its children wait for it,
and place every key in the segment the V5 producer would now pick under the 5.0.0-M1
profile. Once a consumer has acked everything, segment 0 has drained and nothing waits.
The snapshot saved by ``--save`` explains the same offline.

With ``KEYSHARED_RECORD_STATS=1`` the run also writes that snapshot and the segment each key
was stored in to tests/fixtures/scalable/m1-split*.json, the fixtures of
tests/test_explain_scalable.py.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pulsar_broker import ScalableBroker, broker_classpath
from pulsar_oracle import MILESTONE, record

from keyshared.cli import main
from keyshared.explain_scalable import M1, explain_scalable, read_layout, read_snapshot
from keyshared.hashing import bucket_hash
from keyshared.topic_name import TopicName

HARNESS = Path(__file__).parent / "v5_explain" / "ExplainV5.java"
FIXTURES = Path(__file__).parent / "fixtures" / "scalable"
RUN_TIMEOUT_S = 120
DRAIN_TIMEOUT_S = 60.0
SUB = "sub"
KEYS = [f"key-{i}" for i in range(40)]

Pairs = list[tuple[object, object]]


def _harness(broker: ScalableBroker, *args: str) -> list[dict[str, Any]]:
    """The harness's JSON lines (other output is the client's logging)."""
    command = ["java", "-cp", broker_classpath(MILESTONE), str(HARNESS), args[0]]
    command += [broker.service_url, *args[1:]]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, (
        f"the V5 harness failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


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
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while True:
        got = _explain(broker, topic)
        if not got["still_draining"]:
            return got
        assert time.monotonic() < deadline, f"segments {got['still_draining']} did not drain"
        time.sleep(1.0)


def test_explain_follows_a_scalable_topic_through_a_split(
    m1_broker: ScalableBroker, tmp_path: Path
) -> None:
    topic = m1_broker.create(f"topic://public/manual/explain-{uuid.uuid4().hex[:8]}", segments=2)
    m1_broker.scalable(topic, f"subscriptions/{SUB}", "PUT")
    assert _harness(m1_broker, "produce", topic, *KEYS) == [{"sent": len(KEYS)}]
    read = _harness(m1_broker, "consume", topic, SUB, "reader", str(len(KEYS)), "60", "keep")
    stored = {m["key"]: _segment_id(m["topic"]) for m in read}
    assert sorted(stored) == sorted(KEYS)
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
        # Segment 0 still holds what was stored there, unacked; its children wait for it.
        ([0], held["still_draining"]),
        (per_segment[0], segments[0]["backlog"]),
        ({c: [0] for c in children}, {c: segments[c]["waiting_for"] for c in children}),
    ]
    for k in held["keys"]:
        seg = layout.find_active_segment(bucket_hash(k["key"]))
        pairs.append((seg.segment_id, k["segment_id"]))
        pairs.append(([0] if stored[k["key"]] == 0 else [], k["waits_for"]))
    offline = explain_scalable(read_snapshot(json.loads(saved.read_text())), SUB,
                               keys=KEYS, pulsar_version=M1).to_dict()  # fmt: skip
    pairs.append((held, offline))

    # A consumer acks everything: segment 0 drains and nothing waits any more.
    _harness(m1_broker, "consume", topic, SUB, "reader", str(len(KEYS)), "60", "ack")
    drained = _wait_drained(m1_broker, topic)
    after = {s["segment_id"]: s for s in drained["segments"]}
    pairs += [
        (True, after[0]["drained"]),
        ({c: [] for c in children}, {c: after[c]["waiting_for"] for c in children}),
        ([], [k["key"] for k in drained["keys"] if k["waits_for"]]),
    ]
    name = TopicName.get(topic)
    assert str(name) == drained["topic"]
    assert not _compare("split and drain", pairs)


def test_a_topic_that_is_not_there_is_a_clear_error(
    m1_broker: ScalableBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["explain", "--url", m1_broker.web_url, "--topic", "topic://public/manual/none"]
    assert main([*argv, "--subscription", SUB]) == 2
    err = capsys.readouterr().err
    assert "/admin/v2/scalable/public/manual/none: HTTP 404" in err
    record(f"{MILESTONE} broker explain scalable errors", 1, 0)
