"""The consumer processes of a verify run, seen from the run: start one, command it, stop,
continue or kill it, and collect what it reports into the run's event log."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import IO, Any

from keyshared.connection import ClusterConnection
from keyshared.connection.failures import scrub
from keyshared.verify.consumer import ConsumerSettings, now_ms
from keyshared.verify.record import Event, Kind

#: Seconds a consumer process may take to subscribe, or to answer a command.
START_TIMEOUT_S = 60.0
ANSWER_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


class ConsumerFailed(RuntimeError):
    """A consumer process could not subscribe, answer or stop in time: the run cannot go on.
    The message holds the end of its error output, never its settings."""


class ConsumerProcess:
    """One consumer process, reporting under ``label``; its events go to ``sink`` (which
    must be safe to call from the reader thread), its answers wait for :meth:`command`."""

    def __init__(
        self,
        label: str,
        settings: ConsumerSettings,
        connection: ClusterConnection,
        sink: Callable[[Event], None],
    ) -> None:
        self.label = label
        self.name = settings.name
        self.settings = settings
        self.ready_ms = 0.0
        #: Message indexes it received, acknowledged and negatively acknowledged, in order.
        self.received: list[int] = []
        self.acked = 0
        self._sink = sink
        self._connection = connection
        self._answers: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "keyshared.verify.consumer"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            # Its own process group: a Ctrl-C at the terminal reaches the run, which closes
            # the consumers itself, not each consumer at once.
            start_new_session=True,
        )
        assert self._proc.stdin is not None
        setup = {"consumer": asdict(settings), "connection": connection.to_child()}
        self._proc.stdin.write(json.dumps(setup) + "\n")
        self._proc.stdin.flush()
        self._reader = threading.Thread(target=self._read, name=f"verify-{label}", daemon=True)
        self._reader.start()
        ready = self._wait(lambda a: "ready" in a, START_TIMEOUT_S, "subscribe")
        self.ready_ms = float(ready["ready"])

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                continue  # not the consumer's report: nothing to record
            if "d" in item:
                index, _, _, _, redelivery, ms = item["d"]
                self.received.append(index)
                self._sink((Kind.DELIVER.value, ms, self.label, index, redelivery))
            elif "a" in item:
                self.acked += 1
                self._sink((Kind.ACK.value, item["a"][1], self.label, item["a"][0]))
            elif "n" in item:
                self._sink((Kind.NACK.value, item["n"][1], self.label, item["n"][0]))
            else:
                with self._changed:
                    self._answers.append(item)
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def _wait(
        self, match: Callable[[dict[str, Any]], bool], timeout_s: float, what: str
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for i, answer in enumerate(self._answers):
                    if match(answer):
                        return self._answers.pop(i)
                if self._proc.poll() is not None and not self._reader.is_alive():
                    raise ConsumerFailed(
                        f"consumer {self.label} exited before it could {what}: {self.errors()}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ConsumerFailed(
                        f"consumer {self.label} did not {what} within {timeout_s:g} s:"
                        f" {self.errors()}"
                    )
                self._changed.wait(min(left, 0.5))

    def errors(self) -> str:
        """The last lines of its error output (any secret of the connection scrubbed: the
        process held them), or a note that it wrote none."""
        self._stderr.seek(0)
        lines = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
        return scrub(self._connection, " | ".join(lines[-3:])) if lines else "(no error output)"

    def command(self, line: str, answer: str) -> dict[str, Any]:
        """Sends a command and waits for the answer holding ``answer``."""
        self._send(line)
        return self._wait(lambda a: answer in a, ANSWER_TIMEOUT_S, f"answer {line!r}")

    def _send(self, line: str) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(line + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise ConsumerFailed(f"consumer {self.label} is gone: {self.errors()}") from None

    def ack_held(self) -> int:
        """Acknowledges everything it holds; how many."""
        count: int = self.command("ack", "acked")["acked"]
        return count

    def set_mode(self, mode: str) -> None:
        self.command(f"mode {mode}", "mode")

    def close(self) -> float:
        """Closes the consumer (the broker sees a close); the moment it was told to."""
        told = now_ms()
        if self._proc.poll() is None:
            with contextlib.suppress(ConsumerFailed):
                self._send("close")
                self._wait(lambda a: "closed" in a, ANSWER_TIMEOUT_S, "close")
        self._reap()
        return told

    def kill(self) -> float:
        """``kill -9``: the broker sees the connection drop. The moment it was killed."""
        killed = now_ms()
        self._signal(signal.SIGKILL)
        self._reap()
        return killed

    def stop(self) -> float:
        """SIGSTOP: it keeps its connection but answers nothing."""
        stopped = now_ms()
        self._signal(signal.SIGSTOP)
        return stopped

    def resume(self) -> float:
        resumed = now_ms()
        self._signal(signal.SIGCONT)
        return resumed

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._proc.pid, sig)

    def _reap(self) -> None:
        try:
            self._proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self._proc.wait(timeout=STOP_TIMEOUT_S)
        self._reader.join(timeout=STOP_TIMEOUT_S)
        for stream in (self._proc.stdin, self._proc.stdout):
            _close(stream)
        self._stderr.close()

    def discard(self) -> None:
        """Ends the process whatever its state (a stopped one is continued first, so that
        the kill is not left pending)."""
        if self._proc.poll() is None:
            self._signal(signal.SIGCONT)
            self._signal(signal.SIGKILL)
        if not self._stderr.closed:
            self._reap()


def _close(stream: IO[str] | None) -> None:
    if stream is not None:
        with contextlib.suppress(OSError):
            stream.close()


__all__ = [
    "ANSWER_TIMEOUT_S",
    "START_TIMEOUT_S",
    "STOP_TIMEOUT_S",
    "ConsumerFailed",
    "ConsumerProcess",
]
