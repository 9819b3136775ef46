"""``keyshared verify``'s flags, checked before anything reaches a cluster, its release
profiles, and ``--check`` of a saved record (the runs on brokers are in tests/broker)."""

from __future__ import annotations

import contextlib
import io
import json
import socket
from pathlib import Path

import pytest

from keyshared.cli import main
from keyshared.connection import ClusterConnection, Secret
from keyshared.verify.consumer import ConsumerSettings
from keyshared.verify.processes import ConsumerFailed, ConsumerProcess
from keyshared.versions import KNOWN_RELEASES, M1, MASTER, nearest_release

FIXTURE = Path(__file__).parents[2] / "docs" / "examples" / "verify-record.json"


def closed_port() -> int:
    """A port nothing listens on: a run that reached the network would fail there."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def verify(*args: str) -> tuple[int, str, str]:
    port = closed_port()
    argv = ["verify", "--service-url", f"pulsar://127.0.0.1:{port}"]
    argv += ["--admin-url", f"http://127.0.0.1:{port}", *args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            status = main(argv, out)
        except SystemExit as e:  # argparse's own refusals
            status = int(e.code or 0)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--messages", "1"),
        ("--keys", "0"),
        ("--consumers", "1"),
        ("--partitions", "-1"),
        ("--duration", "0"),
        ("--keep-alive", "-2"),
        ("--rate", "-5"),
        ("--rate", "nan"),
        ("--points", "0"),
        ("--pulsar-version", "3.0"),
        ("--scenario", "everything"),
        ("--topic", "topic://public/default/scalable"),
    ],
)
def test_a_bad_flag_is_named_before_anything_runs(flag: str, value: str) -> None:
    status, out, err = verify(flag, value)
    assert status == 2
    assert flag in err and "Traceback" not in err
    # Refused before any connection: a closed port would have said "refused".
    assert "refused" not in err.lower() and out == ""


def test_a_report_folder_that_cannot_be_written_is_refused_first(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    status, _, err = verify("--report", str(blocker / "report"))
    assert status == 2 and "--report" in err and "refused" not in err.lower()


def test_a_large_run_wants_yes_without_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    status, _, err = verify("--messages", "60000", "--scenario", "all")
    assert status == 2
    assert "360000 messages" in err and "--yes" in err


def test_a_cluster_not_there_cannot_run() -> None:
    status, out, err = verify("--scenario", "steady")
    assert status == 2 and out == ""
    assert err.count("\n") <= 2 and "Traceback" not in err


def test_a_saved_record_is_checked_again(tmp_path: Path) -> None:
    out = io.StringIO()
    assert main(["verify", "--check", str(FIXTURE)], out) == 0
    assert out.getvalue().startswith("PASS")
    assert main(["verify", "--check", str(FIXTURE), "--json"], out := io.StringIO()) == 0
    assert json.loads(out.getvalue())["verdict"]["passed"] is True


def test_a_tampered_record_fails(tmp_path: Path) -> None:
    data = json.loads(FIXTURE.read_text())
    events = data["scenarios"][0]["events"]
    # One acknowledgement dropped: that message is lost.
    first_ack = next(i for i, e in enumerate(events) if e[0] == "ack")
    del events[first_ack]
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(data))
    out = io.StringIO()
    assert main(["verify", "--check", str(tampered)], out) == 1
    assert out.getvalue().startswith("FAIL") and "lost" in out.getvalue()


@pytest.mark.parametrize(
    ("reported", "profile", "noted"),
    [
        ("4.2.4", "4.2", False),
        ("4.2.0-SNAPSHOT", "4.2", False),
        ("4.0.7", "4.0", False),
        ("5.0.0-M1", M1, False),
        ("4.1.2", "4.2", True),
        ("4.3.0", MASTER, True),
        ("5.0.1", MASTER, True),
        ("3.0.5.1-ds", "4.0", True),
        ("not a version", MASTER, True),
    ],
)
def test_the_release_checked_against(reported: str, profile: str, noted: bool) -> None:
    got, note = nearest_release(reported)
    assert got == profile and got in KNOWN_RELEASES
    assert (note is not None) == noted
    if note is not None:
        assert reported in note and profile in note


def test_a_consumer_that_cannot_subscribe_fails_in_one_line_without_its_secrets() -> None:
    token = "secret-token-" + "x" * 40
    port = closed_port()
    connection = ClusterConnection(
        service_url=f"pulsar://127.0.0.1:{port}",
        admin_url=f"http://127.0.0.1:{port}",
        token=Secret(token),
        timeout_s=2,
    )
    settings = ConsumerSettings(topic="persistent://public/default/t", subscription="s", name="c")
    with pytest.raises(ConsumerFailed) as failed:
        ConsumerProcess("c0", settings, connection, lambda _: None)
    message = str(failed.value)
    assert "c0" in message and "\n" not in message
    assert token not in message
