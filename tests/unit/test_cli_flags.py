"""Every subcommand's options, each with a wrong value: the error is one line that names the
option as the user typed it, there is no traceback, and nothing ran (no output written).
The Spark job's flags too, refused before a JVM starts."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import socket
from pathlib import Path

import pytest

from keyshared import cli
from spark_udfs import job

#: Stats of a Key_Shared subscription "sub" (Pulsar 4.0+'s).
STATS = Path(__file__).parents[1] / "fixtures" / "stats" / "held.json"

#: Files the cases read, made in a folder of their own (not the one runs write in).
LAYOUT = '{"epoch": 0, "next_segment_id": 1, "segments": {}}'


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


#: (subcommand and arguments, the flag the error must name). {in} is the inputs' folder.
CASES: list[tuple[list[str], str]] = [
    # layout
    (["layout", "--segments", "-1"], "--segments"),
    (["layout", "--segments", "x"], "--segments"),
    (["layout", "--budget", "0"], "--budget"),
    (["layout", "--layout", "{in}/missing.json"], "--layout"),
    (["layout", "--layout", "{in}"], "--layout"),
    (["layout", "--layout", "{in}/bad.json"], "--layout"),
    (["layout", "--layout", "{in}/layout.json", "--budget", "8"], "--budget"),
    (["layout", "--pulsar-version", "4.2.1"], "--pulsar-version"),
    (["layout", "--pulsar-version", "latest"], "--pulsar-version"),
    (["layout", "--all", "--json"], "--all"),
    # route
    (["route", "k", "--segments", "0"], "--segments"),
    (["route", "k", "--budget", "-4"], "--budget"),
    (["route", "k", "--layout", "{in}/missing.json"], "--layout"),
    (["route", "k", "--pulsar-version", "3.0"], "--pulsar-version"),
    (["route", "zz", "--key-encoding", "hex"], "--key-encoding"),
    (["route", "k", "--key-encoding", "utf-16"], "--key-encoding"),
    (["route"], "KEY"),
    (["route", "--stdin", "--layout", "-"], "--stdin"),
    # decide
    (["decide", "{in}/missing.json"], "SNAPSHOT.json"),
    (["decide", "{in}/bad.json"], "SNAPSHOT.json"),
    (["decide", "{in}/layout.json", "--pulsar-version", "x"], "--pulsar-version"),
    # demo
    (["demo", "--segments", "0"], "--segments"),
    (["demo", "--budget", "0"], "--budget"),
    (["demo", "--keys", "0"], "--keys"),
    (["demo", "--keys", "100000000"], "--keys"),
    (["demo", "--pulsar-version", "4.0"], "--pulsar-version"),
    # simulate
    (["simulate", "--scenario", "drain-backlog", "--scale", "0"], "--scale"),
    (["simulate", "--scenario", "drain-backlog", "--scale", "nan"], "--scale"),
    (["simulate", "--scenario", "nope"], "--scenario"),
    (["simulate", "--scenario", "drain-backlog", "--seed", "-1"], "--seed"),
    (["simulate", "--scenario", "drain-backlog", "--out", "/proc/x"], "--out"),
    (["simulate", "--scenario", "drain-backlog", "--out", "{in}/bad.json"], "--out"),
    (["simulate", "{in}/missing.toml"], "SCENARIO"),
    (["simulate", "{in}/layout.json", "--scale", "2"], "--scale"),
    (["simulate"], "SCENARIO"),
    # audit
    (["audit", "k", "--from", "nope", "--partitions", "2", "--to-partitions", "3"], "--from"),
    (
        ["audit", "k", "--from", "kafka", "--partitions", "0", "--to-partitions", "3"],
        "--partitions",
    ),
    (
        ["audit", "k", "--from", "kafka", "--partitions", "2", "--to-partitions", "-1"],
        "--to-partitions",
    ),
    (
        [
            "audit",
            "k",
            "--from",
            "kafka",
            "--partitions",
            "2",
            "--to-partitions",
            "3",
            "--sample",
            "-3",
        ],
        "--sample",
    ),
    (
        ["audit", "k", "--from", "kafka", "--partitions", "2", "--to-layout", "{in}/missing.json"],
        "--to-layout",
    ),
    (
        [
            "audit",
            "--keys",
            "{in}/missing.txt",
            "--from",
            "kafka",
            "--partitions",
            "2",
            "--to-partitions",
            "3",
        ],
        "--keys",
    ),
    (
        [
            "audit",
            "--keys",
            "{in}/extra.csv",
            "--from",
            "kafka",
            "--partitions",
            "2",
            "--to-partitions",
            "3",
        ],
        "--keys",
    ),
    (["audit", "--from", "kafka", "--partitions", "2", "--to-partitions", "3"], "KEY"),
    (
        [
            "audit",
            "k",
            "--from",
            "kafka",
            "--partitions",
            "2",
            "--to-partitions",
            "3",
            "--key-encoding",
            "base64",
        ],
        "--key-encoding",
    ),
    (["audit", "k", "--partitions", "2", "--to-partitions", "3"], "--from"),
    (
        ["audit", "k", "--from", "kafka", "--partitions", "2", "--to-layout", "-", "--stdin"],
        "--stdin",
    ),
    # explain (the connection flags' own refusals are keyshared.connection's tests')
    (["explain", "{in}/stats.json", "--subscription", "sub", "--points", "-5"], "--points"),
    (["explain", "{in}/missing.json", "--subscription", "sub"], "STATS.json"),
    (["explain", "{in}/stats.json"], "--subscription"),
    (
        ["explain", "{in}/stats.json", "--subscription", "sub", "--pulsar-version", "4.2.1"],
        "--pulsar-version",
    ),
    (["explain", "{in}/stats.json", "--subscription", "sub", "--png", "{in}/x.txt"], "--png"),
    (
        ["explain", "{in}/stats.json", "--subscription", "sub", "--png", "/proc/no/x.png"],
        "--png",
    ),
    (["explain", "{in}/stats.json", "--subscription", "sub", "--topic", "t"], "--topic"),
    (["explain", "{in}/stats.json", "--subscription", "sub", "--consumer", "c"], "--consumer"),
    (
        ["explain", "{in}/stats.json", "--subscription", "sub", "--keys", "{in}/missing.txt"],
        "--keys",
    ),
    (["explain", "{in}/stats.json", "--subscription", "sub", "--timeout", "0"], "--timeout"),
    (["explain", "{in}/stats.json", "--subscription", "sub", "--watch", "-1"], "--watch"),
    (["explain", "{in}/stats.json", "--subscription", "sub", "--count", "2"], "--count"),
    (
        ["explain", "{in}/stats.json", "--subscription", "sub", "--max-unacked", "-1"],
        "--max-unacked",
    ),
    (["explain", "{in}/stats.json", "--subscription", "sub", "--keyless", "p", "x"], "--keyless"),
    (["explain", "{in}/stats.json", "--subscription", "sub", "--save", "{in}/s.json"], "--save"),
    (["explain", "{in}/stats.json", "--subscription", "sub", "--url", "ftp://x"], "--url"),
    (
        ["explain", "{in}/stats.json", "--subscription", "sub", "--all-partitions"],
        "--all-partitions",
    ),
    (
        ["explain", "{in}/stats.json", "--subscription", "sub", "--join", "a", "--leave", "b"],
        "--leave",
    ),
    (["explain", "{in}/stats.json", "--subscription", "sub", "--ring"], "--ring"),
    (["explain", "{in}/stats.json", "--subscription", "sub", "--join", ""], "--join"),
    (["explain", "{in}/stats.json", "--subscription", "sub", "--leave", "nobody"], "--leave"),
    (["explain", "{in}/stats.json", "--subscription", "sub", "--key", "\udcff"], "--key"),
    (["explain", "{in}/stats.json", "--subscription", "sub", "--keys", "{in}/extra.csv"], "--keys"),
    (
        [
            "explain",
            "{in}/stats.json",
            "--subscription",
            "sub",
            "--key-encoding",
            "hex",
            "--key",
            "zz",
        ],
        "--key-encoding",
    ),
    (
        ["explain", "{in}/stats.json", "--subscription", "sub", "--key-encoding", "utf-16"],
        "--key-encoding",
    ),
    (
        ["explain", "{in}/stats.json", "--subscription", "sub", "--key-encoding", "base64"],
        "--key-encoding",
    ),
    # verify: its flags' checks are tests/unit/test_verify_command.py's; here, that they
    # speak as the others do
    (["verify", "--service-url", "pulsar://127.0.0.1:{port}", "--keys", "0"], "--keys"),
    (["verify", "--service-url", "pulsar://127.0.0.1:{port}", "--rate", "nan"], "--rate"),
    (["verify", "--service-url", "pulsar://127.0.0.1:{port}", "--points", "0"], "--points"),
    (
        ["verify", "--service-url", "pulsar://127.0.0.1:{port}", "--partitions", "-1"],
        "--partitions",
    ),
]

#: Options whose refusals other tests walk: the connection flags (keyshared.connection's,
#: tests/unit/test_connection.py) and verify's (tests/unit/test_verify_command.py).
ELSEWHERE = {
    "--client-conf",
    "--token",
    "--token-file",
    "--token-env",
    "--tls-trust-certs",
    "--tls-cert",
    "--tls-key",
    "--oauth2-issuer-url",
    "--oauth2-credentials",
    "--oauth2-audience",
    "--oauth2-scope",
}


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "bad.json").write_text("{not json")
    (folder / "layout.json").write_text(LAYOUT)
    (folder / "extra.csv").write_text("key,count\na,1,2\n")
    shutil.copy(STATS, folder / "stats.json")
    return folder


def run_cli(argv: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    monkeypatch.chdir(cwd)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            status = cli.main(argv, out)
        except SystemExit as e:
            status = int(e.code or 0)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("argv", "flag"), CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else v
)
def test_a_wrong_value_is_one_line_naming_its_option(
    argv: list[str], flag: str, inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    port = str(closed_port())
    typed = [a.replace("{in}", str(inputs)).replace("{port}", port) for a in argv]
    before = sorted(p.name for p in inputs.rglob("*"))
    status, out, err = run_cli(typed, work, monkeypatch)
    lines = err.strip().splitlines()
    assert status == cli.EXIT_BAD_INPUT, err
    assert len(lines) == 1, err
    assert flag in lines[0] and "Traceback" not in err
    assert lines[0].startswith(f"keyshared {argv[0]}: error: ")
    # Nothing ran: nothing printed, nothing written where the run was, or beside the inputs.
    assert out == ""
    assert list(work.iterdir()) == []
    assert sorted(p.name for p in inputs.rglob("*")) == before


def options(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """Per subcommand, its options that take a value, and its positionals (by metavar)."""
    found: dict[str, set[str]] = {}
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, child in sub.choices.items():
        names: set[str] = set()
        for action in child._actions:
            if isinstance(action, argparse._HelpAction) or action.nargs == 0:
                continue
            if action.option_strings:
                names.add(action.option_strings[-1])
            else:
                names.add(str(action.metavar))
        found[name] = names
    return found


def test_every_option_that_takes_a_value_is_walked() -> None:
    walked: dict[str, set[str]] = {}
    for argv, flag in CASES:
        walked.setdefault(argv[0], set()).add(flag)
    for command, names in options(cli.build_parser()).items():
        if command == "verify":
            continue  # walked by tests/unit/test_verify_command.py; a few above
        missing = names - walked.get(command, set()) - ELSEWHERE
        assert not missing, f"keyshared {command}: no wrong value tried for {sorted(missing)}"


def test_a_flag_that_does_not_apply_is_refused(
    inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, _, err = run_cli(
        ["route", "k", "--layout", str(inputs / "layout.json"), "--budget", "8"],
        tmp_path,
        monkeypatch,
    )
    assert status == 2 and "--budget" in err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--segments", "-1"], "--segments"),
        (["--bucket-budget", "0"], "--bucket-budget"),
        (["--layout", "{in}/missing.json"], "--layout"),
        (["--policy", "{in}/missing.json"], "--policy"),
        (["--input", "{in}/missing.parquet"], "--input"),
        (["--pulsar-version", "4.2"], "--pulsar-version"),
        (["--pulsar-version", "latest"], "--pulsar-version"),
        (["--top", "-1"], "--top"),
        (["--balance-buckets", "0"], "--balance-buckets"),
        (["--fanout", "-1"], "--fanout"),
        (["--message-size", "-1"], "--message-size"),
        (["--synthetic-keys", "0"], "--synthetic-keys"),
        (["--key-space", "0"], "--key-space"),
        (["--zipf-s", "0"], "--zipf-s"),
        (["--msg-rate", "-1"], "--msg-rate"),
        (["--consumers", "x"], "--consumers"),
        (["--audit-from", "kafka"], "--audit-from"),
        (["--audit-from", "kafka:0"], "--audit-from"),
        (["--audit-to-partitions", "3"], "--audit-to-partitions"),
        (["--audit-from", "kafka:2", "--audit-sample", "-1"], "--audit-sample"),
        (["--out", "/proc/x"], "--out"),
        (["--engine", "gpu"], "--engine"),
        (["--format", "xls"], "--format"),
    ],
)
def test_the_spark_job_names_the_flag_before_spark_starts(
    argv: list[str], flag: str, inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    # Would a session start, it would fail here rather than run a job.
    monkeypatch.setattr(job, "get_session", lambda *a: pytest.fail("Spark started"))
    err = io.StringIO()
    typed = [a.replace("{in}", str(inputs)) for a in argv]
    with contextlib.redirect_stderr(err):
        try:
            status = job.main(typed)
        except SystemExit as e:
            status = int(e.code or 0)
    lines = err.getvalue().strip().splitlines()
    assert status == 2 and flag in lines[-1] and "Traceback" not in err.getvalue()
    assert not os.listdir(work)
