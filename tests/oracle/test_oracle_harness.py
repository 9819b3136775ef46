"""The oracle harness itself: bad requests get an error answer naming what was wrong, and a
JVM that hangs, dies or writes something else than answers fails the call within its
timeout, never a hang and never a silent pass."""

from __future__ import annotations

import sys
import time

import pytest
from support.pulsar_oracle import Oracle, OracleError, OracleUnavailable


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("{not json", "bad request: not JSON"),
        ("[1, 2]", "bad request: not a JSON object"),
        ('{"id": 1, "op": "no.such.op"}', "bad request: unknown op 'no.such.op'"),
    ],
)
def test_bad_line_is_answered_with_an_error(oracle: Oracle, line: str, error: str) -> None:
    answer = oracle.send_line(line)
    assert answer["ok"] is False
    assert answer["error"].startswith(error)
    assert oracle.call("version")["pulsar_version"] == oracle.version


@pytest.mark.parametrize(
    ("op", "args", "error"),
    [
        ("selector.new", {}, "number_of_points"),
        ("selector.new", {"number_of_points": "ten"}, "number_of_points"),
        ("selector.select", {"handle": 999_999, "hash": 1}, "999999"),
        ("hash.make_hash", {"key": 5}, "args.key"),
        ("hash.make_hashes", {"keys": ["a", 5]}, "args.keys[1]"),
        ("hash.sticky_key_hash", {"key": "a", "range": [1]}, "args.range"),
    ],
)
def test_bad_arguments_name_the_argument(
    oracle: Oracle, op: str, args: dict[str, object], error: str
) -> None:
    with pytest.raises(OracleError, match=f"^{op}: .*{error}".replace("[", r"\[")):
        oracle.call(op, **args)
    assert oracle.call("version")["pulsar_version"] == oracle.version


def test_handle_of_another_kind_is_refused(oracle: Oracle) -> None:
    tracker = oracle.call("draining.new")
    try:
        with pytest.raises(OracleError, match=r"selector.ranges: .*handle"):
            oracle.call("selector.ranges", handle=tracker)
    finally:
        oracle.call("close", handle=tracker)


def stand_in(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_hung_oracle_times_out() -> None:
    started = time.monotonic()
    with pytest.raises(OracleUnavailable, match=r"did not answer 'version' within 1\.0 s"):
        Oracle(timeout_s=1.0, command=stand_in("import time; time.sleep(60)"))
    assert time.monotonic() - started < 10


def test_a_dead_oracle_says_so_with_its_log() -> None:
    # The stand-in may exit before or after the first request is written: both name it.
    code = "import sys; sys.stderr.write('no Pulsar here\\n'); sys.exit(3)"
    with pytest.raises(
        OracleUnavailable, match=r"(?s)died (before|during) 'version'.*no Pulsar here"
    ):
        Oracle(timeout_s=10.0, command=stand_in(code))


def test_a_line_that_is_not_an_answer_fails_the_call() -> None:
    code = "import sys; sys.stdin.readline(); print('log line on stdout', flush=True)"
    with pytest.raises(OracleUnavailable, match="not an answer: 'log line on stdout"):
        Oracle(timeout_s=10.0, command=stand_in(code))
