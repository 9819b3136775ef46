"""Faults applied to the processes around a subscription, and the tally the tests keep of
them.

- :class:`ConsumerProcess`: a Key_Shared consumer in a child process
  (tests/support/consumer_process.py) that a test kills (``kill -9``: the broker sees the
  connection drop, not a close) or stops and continues (SIGSTOP/SIGCONT: it holds its
  connection but answers nothing, so the broker drops it only once its keep-alive runs out).
- ``PulsarBroker.restart`` (tests/support/pulsar_broker.py): ``kill -9`` a standalone broker
  and start it again on its own data.
- :func:`record_fault`: one line per fault kind in the test command's summary (faults
  applied, messages checked and, where a test counts them, delivered, lost, duplicates,
  order violations, predictions mismatched, any Pulsar behaviour found, and the events a
  model of the broker was fed).

A fault that cannot be applied (the process already exited) raises :class:`FaultError`
naming what and why; every wait has a timeout.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).with_name("consumer_process.py")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


class FaultError(RuntimeError):
    """A fault could not be applied, or its process did not answer in time."""


@dataclass
class FaultTally:
    """What the fault tests of one kind checked, summed over tests."""

    faults: int = 0
    messages: int = 0
    lost: int = 0
    duplicates: int = 0
    order_violations: int = 0
    mismatched: int = 0
    findings: list[str] = field(default_factory=list)
    #: None where no test of the kind counted the messages delivered.
    delivered: int | None = None
    event_logs: list[str] = field(default_factory=list)


FAULTS: dict[str, FaultTally] = {}


def record_fault(
    kind: str,
    faults: int,
    messages: int,
    lost: int = 0,
    duplicates: int = 0,
    order_violations: int = 0,
    mismatched: int = 0,
    findings: Iterable[str] = (),
    delivered: int | None = None,
    events: str | None = None,
) -> None:
    """Adds one test's counts under ``kind`` (say ``"4.2.4 consumer killed"``):
    ``delivered``, the distinct messages some consumer received, and ``events``, the event
    log a model of the broker was fed, where the test has them."""
    counts = dict(faults=faults, messages=messages, lost=lost, duplicates=duplicates)
    counts.update(order_violations=order_violations, mismatched=mismatched)
    logs = [] if events is None else [events]
    merge_faults(
        kind, {**counts, "findings": list(findings), "delivered": delivered, "event_logs": logs}
    )


def merge_faults(kind: str, worker: dict[str, Any]) -> None:
    """Adds ``worker``, a tally's fields as a dict (one test's, or a pytest-xdist worker's
    sums), to ``kind``'s."""
    tally = FAULTS.setdefault(kind, FaultTally())
    if worker["delivered"] is not None:
        tally.delivered = (tally.delivered or 0) + worker["delivered"]
    tally.event_logs += worker["event_logs"]
    for name in ("faults", "messages", "lost", "duplicates", "order_violations", "mismatched"):
        setattr(tally, name, getattr(tally, name) + worker[name])
    tally.findings += [f for f in worker["findings"] if f not in tally.findings]


def summary_lines() -> list[str]:
    """The summary's lines, one per fault kind."""
    lines = []
    for kind, t in sorted(FAULTS.items()):
        delivered = "" if t.delivered is None else f"delivered {t.delivered}, "
        line = (
            f"{kind}: {t.faults} faults applied, {t.messages} messages checked, {delivered}"
            f"lost {t.lost}, duplicates {t.duplicates}, order violations {t.order_violations}, "
            f"predictions mismatched {t.mismatched}"
        )
        line += "".join(f"; events: {e}" for e in t.event_logs)
        lines.append(line + "".join(f"; finding: {f}" for f in t.findings))
    return lines


class ConsumerProcess:
    """A Key_Shared consumer of ``topic`` named ``name`` in a child process. With ``ack``
    it acknowledges every message once it has reported it; otherwise it holds them until
    :meth:`ack_all`. :attr:`received` is every message it reported, in order, as dicts
    (``key``, ``value``, ``ledger``, ``entry``, ``redelivery``)."""

    def __init__(
        self,
        service_url: str,
        topic: str,
        name: str,
        ack: bool = True,
        queue: int = 1000,
        subscription: str = "sub",
    ) -> None:
        self.name = name
        self.received: list[dict[str, Any]] = []
        self._answers: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        command = [sys.executable, str(SCRIPT), service_url, topic, name]
        command += ["--subscription", subscription, "--queue", str(queue)]
        command += ["--ack"] if ack else []
        self._proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:
            self._wait(lambda: bool(self._answers), START_TIMEOUT_S, "subscribe")
        except BaseException:
            self._end()
            raise
        self._answers.clear()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            item = json.loads(line)
            with self._changed:
                (self.received if "key" in item else self._answers).append(item)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def _wait(self, done: Any, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not done():
                left = deadline - time.monotonic()
                if self._proc.poll() is not None and not done():
                    raise FaultError(
                        f"consumer {self.name} exited before it could {what}: {self.stderr_tail()}"
                    )
                if left <= 0:
                    raise FaultError(f"consumer {self.name} did not {what} within {timeout_s} s")
                self._changed.wait(min(left, 0.2))

    def stderr_tail(self, chars: int = 2000) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-chars:]

    def wait_for(self, count: int, timeout_s: float = 60.0) -> None:
        """Waits until it has reported ``count`` messages in all."""
        self._wait(lambda: len(self.received) >= count, timeout_s, f"receive {count} messages")

    def ack_all(self, timeout_s: float = 30.0) -> int:
        """Acknowledges everything it holds; how many that was."""
        self._require_running("acknowledge")
        with self._changed:
            self._answers.clear()
        assert self._proc.stdin is not None
        self._proc.stdin.write("ack\n")
        self._proc.stdin.flush()
        self._wait(lambda: bool(self._answers), timeout_s, "acknowledge")
        acked: int = self._answers.pop()["acked"]
        return acked

    def kill(self) -> None:
        """``kill -9``: the process dies with its connection, acknowledging nothing more."""
        self._signal(signal.SIGKILL, "kill")
        self._proc.wait(timeout=STOP_TIMEOUT_S)
        self._reader.join(timeout=STOP_TIMEOUT_S)

    def stop(self) -> None:
        """SIGSTOP: the process keeps its connection but answers nothing."""
        self._signal(signal.SIGSTOP, "stop")

    def resume(self) -> None:
        """SIGCONT after :meth:`stop`."""
        self._signal(signal.SIGCONT, "continue")

    def _require_running(self, what: str) -> None:
        code = self._proc.poll()
        if code is not None:
            raise FaultError(f"cannot {what} consumer {self.name}: it exited with code {code}")

    def _signal(self, sig: signal.Signals, what: str) -> None:
        self._require_running(what)
        self._proc.send_signal(sig)

    def close(self) -> None:
        """Closes the consumer (a clean leave) if it still runs, and ends the process."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGCONT)
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write("close\n")
                self._proc.stdin.flush()
                self._proc.wait(timeout=STOP_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._end()

    def _end(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=STOP_TIMEOUT_S)
        self._reader.join(timeout=STOP_TIMEOUT_S)
        self._stderr.close()

    def __enter__(self) -> ConsumerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
