"""Client of the Pulsar oracle (``oracle/``): Pulsar's own classes, from its released jars,
answering line-delimited JSON requests in a child JVM. ``scripts/pulsar.sh`` builds it.

Every wait has a timeout; a request the oracle refuses raises :class:`OracleError` with the
oracle's message, and a JVM that dies or hangs raises :class:`OracleUnavailable` with the
tail of its log, so a broken oracle fails a test loudly instead of passing it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# The newest Pulsar release Maven Central serves whole, the newest of the 4.0 LTS line, and
# the 5.0 milestone, the one release with the scalable-topic classes (PIP-483).
NEWEST = "4.2.4"
LTS = "4.0.7"
MILESTONE = "5.0.0-M1"
VERSIONS = (NEWEST, LTS, MILESTONE)
TIMEOUT_S = 120.0

# area -> [cases compared, differences], printed by conftest at the end of the run: Pulsar's
# classes by release, and the other systems' jars the oracle also runs. An area naming KEPT
# counts behaviours where keyshared differs from a release on purpose, each asserted to be
# exactly the difference described.
KEPT = "kept on purpose"
COMPARISONS: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])


def record(area: str, cases: int, differences: int = 0) -> None:
    """Counts ``cases`` compared with the real implementation under ``area`` (say ``"4.2.4
    selector"`` for Pulsar's, ``"kafka-clients murmur2"`` for another system's jar)."""
    COMPARISONS[area][0] += cases
    COMPARISONS[area][1] += differences


def record_kept(area: str, why: str, count: int = 1) -> None:
    """Counts ``count`` differences kept on purpose under ``area``, each asserted by the
    caller to be the Pulsar behaviour ``why`` names."""
    record(f"{area}, {KEPT}: {why}", count, count)


class Tally:
    """Counts the answers a stateful run compares; a difference fails it there and then."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.cases = 0
        self.differences = 0

    def same(self, what: str, mine: Any, theirs: Any, cases: int = 1) -> None:
        self.cases += cases
        if mine != theirs:
            self.differences += 1
            raise AssertionError(f"{what}: keyshared {mine!r}, Pulsar {self.version} {theirs!r}")

    def record(self, area: str) -> None:
        # Shrinking replays a difference many times: it counts once.
        record(f"{self.version} {area}", self.cases, min(self.differences, 1))


def run_machine(machine: Any, tally: Tally, area: str, examples: int, steps: int) -> None:
    """Runs a hypothesis state machine against the oracle, recording its cases under area."""
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    try:
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=examples,
                stateful_step_count=steps,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
    finally:
        tally.record(area)


class OracleError(RuntimeError):
    """The oracle answered a request with an error (a bad request or a Java exception)."""


class OracleUnavailable(RuntimeError):
    """The oracle's JVM is missing, died, or did not answer in time."""


def classpath(version: str) -> str:
    target = ROOT / "oracle" / "target" / version
    cp_file = target / "classpath.txt"
    if not cp_file.is_file():
        raise OracleUnavailable(
            f"the oracle for Pulsar {version} is not built ({cp_file} is missing): "
            "run scripts/pulsar.sh"
        )
    return os.pathsep.join([str(target / "classes"), cp_file.read_text().strip()])


def java_command(version: str) -> list[str]:
    # UTF-8 as the default charset, as on Java 18 and later: Pulsar's selector turns consumer
    # names into bytes by it.
    return [
        "java",
        "-Xmx2g",
        "-Dfile.encoding=UTF-8",
        "-cp",
        classpath(version),
        "org.keyshared.oracle.Oracle",
    ]


class Oracle:
    """One oracle JVM on Pulsar ``version``. Use as a context manager or call :meth:`close`."""

    def __init__(
        self,
        version: str = NEWEST,
        timeout_s: float = TIMEOUT_S,
        command: list[str] | None = None,
    ) -> None:
        """Starts the oracle of ``version`` (or ``command``, a stand-in process for tests of
        this client) and checks that it runs that release."""
        self.timeout_s = timeout_s
        # The JVM's log lives as long as the JVM; close() closes it.
        self._log = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        self._proc = subprocess.Popen(
            command or java_command(version),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            encoding="utf-8",
            bufsize=1,
        )
        self._answers: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._next_id = 0
        self._lock = threading.Lock()
        info = self.call("version")
        self.version: str = info["pulsar_version"]
        self.ops: frozenset[str] = frozenset(info["ops"])
        if self.version != version:
            self.close()
            raise OracleUnavailable(f"asked for Pulsar {version}, the oracle runs {self.version}")

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._answers.put(line)
        self._answers.put(None)

    def _log_tail(self) -> str:
        return "".join(self.log_lines()[-20:])

    def log_lines(self) -> list[str]:
        """The JVM's log so far (its stderr: Pulsar's client logs there), line by line."""
        self._log.seek(0)
        return self._log.read().splitlines(True)

    def call(self, op: str, **args: Any) -> Any:
        """Runs ``op`` with ``args`` in the oracle and returns its result."""
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            line = json.dumps({"id": request_id, "op": op, "args": args})
            answer = self._exchange(line, f"{op!r}")
            if answer.get("id") != request_id:
                raise OracleUnavailable(f"answer {answer.get('id')} to request {request_id}")
            if not answer["ok"]:
                raise OracleError(f"{op}: {answer['error']}")
            return answer.get("result")

    def send_line(self, line: str) -> dict[str, Any]:
        """Sends one raw line and returns the answer as the oracle wrote it."""
        with self._lock:
            return self._exchange(line, "a raw line")

    def _exchange(self, line: str, what: str) -> dict[str, Any]:
        if self._proc.poll() is not None:
            raise OracleUnavailable(f"the oracle died before {what}:\n{self._log_tail()}")
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(line + "\n")
            self._proc.stdin.flush()
            answer = self._answers.get(timeout=self.timeout_s)
        except queue.Empty:
            self._proc.kill()
            raise OracleUnavailable(
                f"the oracle did not answer {what} within {self.timeout_s} s"
            ) from None
        except BrokenPipeError:
            answer = None
        if answer is None:
            raise OracleUnavailable(f"the oracle died during {what}:\n{self._log_tail()}")
        try:
            parsed: dict[str, Any] = json.loads(answer)
        except json.JSONDecodeError:
            self._proc.kill()
            raise OracleUnavailable(
                f"the oracle wrote a line that is not an answer: {answer!r}"
            ) from None
        return parsed

    def supports(self, op: str) -> bool:
        return op in self.ops

    def kill(self, timeout_s: float = 10.0) -> None:
        """``kill -9`` of the JVM, waiting at most ``timeout_s`` for it to go: whatever it
        held (connections, consumers) dies with it, closing nothing. :meth:`close` still
        releases the rest; a later call raises OracleUnavailable."""
        self._proc.kill()
        self._proc.wait(timeout=timeout_s)

    def pause(self) -> None:
        """SIGSTOP: the JVM keeps its connections open and answers nothing (a stalled
        client, as in a long garbage collection) until :meth:`resume`."""
        self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        self._proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=10)
        self._log.close()

    def __enter__(self) -> Oracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def key_arg(key: str | bytes) -> Any:
    """A key as the oracle reads it: a str as its UTF-8 bytes, any bytes as base64."""
    if isinstance(key, str):
        return key
    import base64

    return {"b64": base64.b64encode(key).decode("ascii")}
