"""``keyshared verify`` as an operator runs it, on the suite's 4.2.4 broker: a partitioned
topic, a topic that exists (refused unless allowed, and then only the run's own subscription
added and removed), Ctrl-C (everything closed, the topic removed, exit 130), and a report."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from support.pulsar_broker import PulsarBroker
from support.verify_cli import topics, verify, why


def test_a_partitioned_topic(pulsar_broker: PulsarBroker) -> None:
    partitions = 3
    status, out, err = verify(
        pulsar_broker, "--partitions", str(partitions), "--scenario", "leave", "--json"
    )
    assert status == 0, why(out, err)
    answer = json.loads(out)
    assert answer["record"]["partitions"] == partitions
    used = {m[2] for s in answer["record"]["scenarios"] for m in s["messages"]}
    assert used == set(range(partitions))


def test_an_existing_topic_is_refused_unless_allowed(pulsar_broker: PulsarBroker) -> None:
    topic = f"persistent://public/default/mine-{uuid.uuid4().hex[:8]}"
    local = topic.rsplit("/", 1)[1]
    pulsar_broker.admin(f"persistent/public/default/{local}", "PUT")
    pulsar_broker.admin(f"persistent/public/default/{local}/subscription/theirs", "PUT")
    status, out, err = verify(pulsar_broker, "--topic", topic)
    assert status == 2 and "already exists" in err and "--existing-topic" in err
    status, out, err = verify(
        pulsar_broker, "--topic", topic, "--existing-topic", "--scenario", "nack"
    )
    assert status == 0, why(out, err)
    # Its own subscription is gone, the user's is untouched, and so is the topic.
    stats = pulsar_broker.admin(f"persistent/public/default/{local}/stats")
    assert list(stats["subscriptions"]) == ["theirs"]


def interruptible() -> None:
    """Ctrl-C's default in the child: a command started in the background by a shell without
    job control inherits SIGINT ignored, and Python then installs no KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_closes_everything_and_removes_the_topic(pulsar_broker: PulsarBroker) -> None:
    before = set(topics(pulsar_broker))
    command = [
        sys.executable,
        "-m",
        "keyshared",
        "verify",
        "--service-url",
        pulsar_broker.service_url,
    ]
    command += ["--admin-url", pulsar_broker.web_url, "--scenario", "steady", "--rate", "50"]
    command += ["--messages", "2000"]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "sent" in line:
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert set(topics(pulsar_broker)) == before
    # No consumer process outlived it.
    left = subprocess.run(["pgrep", "-f", "keyshared.verify.consumer"], capture_output=True)
    assert left.returncode == 1, left.stdout


def test_a_report(pulsar_broker: PulsarBroker, tmp_path: Path) -> None:
    status, out, err = verify(
        pulsar_broker, "--scenario", "join", "--allow-out-of-order", "--report", str(tmp_path)
    )
    assert status == 1, why(out, err)
    written = {p.name for p in tmp_path.iterdir()}
    assert {"record.json", "verdict.json", "report.md", "timeline.png"} <= written
    assert "allowOutOfOrderDelivery" in (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "verdict.json").read_text())["passed"] is False
