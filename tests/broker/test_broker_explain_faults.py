"""``keyshared explain --watch`` across a real 4.2.4 broker's restart.

Two consumers of a Key_Shared subscription ack what a producer sends, so that the stats have
consumers, ranges and deliveries to explain. ``keyshared explain --url ... --watch 0.5``
runs as an operator runs it, in a child process, while the broker is killed (``kill -9``)
and started again on its own data and ports; the consumers reconnect by themselves. Then
Ctrl-C ends the watch. Checked, poll by poll:

- every poll is either good (no change, or what changed) or one line saying why it failed
  (the admin endpoint unreachable or failed, naming the stats URL; or stats that do not
  explain the subscription yet), and no traceback anywhere;
- the restart shows as failed polls, watching carries on through them, and the first good
  poll after says the endpoint is back after as many failed polls as were printed, from the
  time of the first;
- after it, the watch explains the subscription again: replaying its joined, left and
  reconnected lines leaves both consumers present, each reconnected (or joined again), on
  the ``connectedSince`` the broker reports at the end;
- Ctrl-C ends the watch with status 130 and nothing on stderr.
"""

from __future__ import annotations

import logging
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pulsar
import pytest
from support.faults import record_fault
from support.pulsar_broker import PulsarBroker
from support.pulsar_oracle import NEWEST

SUB = "sub"
CONSUMERS = ("c0", "c1")
MESSAGES = 50
WATCH_S = 0.5
# The watch ends by Ctrl-C once it has seen the consumers back; this only bounds it.
WATCH_COUNT = 400
REQUEST_TIMEOUT_S = 2.0
# Consumers reconnect on a backoff that doubles while the broker is down.
BACK_TIMEOUT_S = 60.0
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
RANGELESS = (
    "while consumers reconnect after a restart, the stats can list one without"
    " keyHashRangeArrays: explain --watch reports that poll as failed"
)


@pytest.fixture(scope="module")
def broker() -> Iterator[PulsarBroker]:
    """A broker of its own: restarting the session's would cut other tests' clients."""
    with PulsarBroker(NEWEST) as running:
        yield running


class Watch:
    """``keyshared explain ... --watch`` in a child process; :attr:`text` is its output so
    far."""

    def __init__(self, argv: list[str]) -> None:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "keyshared", "explain", *argv],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._chunks: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            with self._changed:
                self._chunks.append(line)
                self._changed.notify_all()

    @property
    def text(self) -> str:
        with self._changed:
            return "".join(self._chunks)

    def wait_until(self, done: Callable[[str], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not done("".join(self._chunks)):
                left = deadline - time.monotonic()
                exited = self._proc.poll()
                assert exited is None, f"the watch exited ({exited}) before {what}: {self.text}"
                assert left > 0, f"no {what} within {timeout_s} s:\n{''.join(self._chunks)}"
                self._changed.wait(min(left, 0.5))

    def interrupt(self) -> tuple[int, str]:
        """Ctrl-C; its exit status and stderr."""
        self._proc.send_signal(signal.SIGINT)
        status = self._proc.wait(timeout=STOP_TIMEOUT_S)
        self._reader.join(STOP_TIMEOUT_S)
        self._stderr.seek(0)
        return status, self._stderr.read().decode(errors="replace")

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=STOP_TIMEOUT_S)
        self._reader.join(STOP_TIMEOUT_S)
        self._stderr.close()


def _polls(text: str) -> list[str]:
    """The watch's blocks after the first explanation, one per poll (a last one cut off
    mid-write left out)."""
    blocks = text.split("\n+")[1:]
    return blocks if text.endswith("\n") else blocks[:-1]


class Reading:
    """What the watch's output says, poll by poll: ``runs`` the times of the failed polls,
    run by run, each with the back line that ended it (None while it lasts; a back line
    must count its run's polls and name its first's time); ``present`` the consumers after
    replaying joined and left lines; ``reconnected`` the ``connectedSince`` of each
    consumer that reconnected (None: joined) after the first failure; ``good_before`` and
    ``good_after_back`` the good polls before the first failure and from the first back
    line on; ``wrong`` the polls that are neither a good poll nor one failure line."""

    def __init__(self, text: str, stats_url: str) -> None:
        self.polls = _polls(text)
        self.runs: list[tuple[list[float], str | None]] = []
        self.present = set(CONSUMERS)
        self.reconnected: dict[str, str | None] = {}
        self.wrong: list[str] = []
        self.good_before = self.good_after_back = 0
        failed = re.compile(
            r"(?P<at>\d+\.\d) s: (the admin endpoint (is unreachable|failed): "
            + re.escape(stats_url)
            + r": .+|the stats cannot be explained: .+)"
        )
        back = re.compile(
            r"\d+\.\d s: (the admin endpoint is back|the subscription is explained again)"
            r" after (?P<count>\d+) failed poll\(s\) from \+(?P<since>\d+\.\d) s;"
            r" (no change|what changed) since the read at \+\d+\.\d s:?"
        )
        good = re.compile(r"\d+\.\d s:( no change)?")
        for poll in self.polls:
            first, *rest = poll.rstrip("\n").split("\n")
            if (f := failed.fullmatch(first)) and not rest:
                if not self.runs or self.runs[-1][1] is not None:
                    self.runs.append(([], None))
                self.runs[-1][0].append(float(f["at"]))
                continue
            if b := back.fullmatch(first):
                if not self.runs or self.runs[-1][1] is not None:
                    self.wrong.append(poll)
                    continue
                times = self.runs[-1][0]
                if int(b["count"]) != len(times) or float(b["since"]) != times[0]:
                    self.wrong.append(poll)
                self.runs[-1] = (times, first)
            elif not good.fullmatch(first):
                self.wrong.append(poll)
                continue
            if ("no change" in first) == bool(rest):
                self.wrong.append(poll)
            if self.runs:
                self.good_after_back += 1
            else:
                self.good_before += 1
            self._replay(rest)

    def _replay(self, lines: list[str]) -> None:
        for line in lines:
            change = re.fullmatch(
                r"  (?P<name>\S+) (?P<what>joined|left|reconnected)"
                r"( \(connected since (?P<since>\S+)\))?",
                line,
            )
            if change is None:
                continue
            name = change["name"]
            if change["what"] == "left":
                self.present.discard(name)
                continue
            self.present.add(name)
            if self.runs:
                self.reconnected[name] = change["since"]


def _connected_since(broker: PulsarBroker, topic: str) -> dict[str, Any]:
    consumers = broker.topic_stats(topic)["subscriptions"][SUB]["consumers"]
    return {c["consumerName"]: c.get("connectedSince") for c in consumers}


def test_watch_reports_a_broker_restart_and_explains_again(broker: PulsarBroker) -> None:
    topic = f"explain-restart-{uuid.uuid4().hex[:8]}"
    logger = logging.getLogger("pulsar-client-restart")
    logger.setLevel(logging.CRITICAL)  # the reconnection attempts are expected
    client = pulsar.Client(
        broker.service_url, operation_timeout_seconds=15, connection_timeout_ms=5000, logger=logger
    )
    watch: Watch | None = None
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for name in CONSUMERS:
            client.subscribe(
                topic,
                SUB,
                consumer_type=pulsar.ConsumerType.KeyShared,
                consumer_name=name,
                message_listener=lambda consumer, message: consumer.acknowledge(message),
            )
        for i in range(MESSAGES):
            producer.send(f"m{i}".encode(), partition_key=f"key-{i}")
        before = _connected_since(broker, topic)
        stats_url = f"{broker.web_url}/admin/v2/persistent/public/default/{topic}/stats"
        url = ["--url", broker.web_url, "--topic", topic, "--subscription", SUB]
        timing = ["--timeout", str(REQUEST_TIMEOUT_S), "--watch", str(WATCH_S)]
        watch = Watch([*url, *timing, "--count", str(WATCH_COUNT)])
        watch.wait_until(lambda text: len(_polls(text)) >= 2, START_TIMEOUT_S, "first polls")
        broker.restart(hard=True)

        def all_back(text: str) -> bool:
            seen = Reading(text, stats_url)
            return (
                bool(seen.runs)
                and seen.runs[-1][1] is not None
                and seen.present == set(CONSUMERS)
                and set(seen.reconnected) == set(CONSUMERS)
                and seen.good_after_back >= 2
            )

        watch.wait_until(all_back, BACK_TIMEOUT_S, "consumers back in the watch")
        status, err = watch.interrupt()
        text = watch.text
        after = _connected_since(broker, topic)
    finally:
        if watch is not None:
            watch.close()
        client.close()
    seen = Reading(text, stats_url)
    failed = [t for times, _ in seen.runs for t in times]
    # Seen on 4.2.4: a consumer that has just reconnected can be listed before it has
    # ranges; explain refuses such stats, which makes that poll a failed one.
    rangeless = any("keyHashRangeArrays is missing" in p for p in seen.polls)
    record_fault(
        f"{NEWEST} explain --watch across a broker restart",
        faults=1,
        messages=len(seen.polls),
        mismatched=len(seen.wrong),
        findings=[RANGELESS] if rangeless else [],
    )
    assert not seen.wrong, "\n---\n".join(seen.wrong)
    assert "Traceback" not in text and err == "" and status == 130, (status, err)
    assert failed and all(back is not None for _, back in seen.runs), text
    assert seen.good_before >= 2 and seen.good_after_back >= 2, text
    assert set(before) == set(after) == set(CONSUMERS)
    assert all(after[c] != before[c] for c in CONSUMERS), (before, after)
    # A consumer that reconnected is named with the broker's connectedSince; one that left
    # and joined again, without.
    assert all(seen.reconnected[c] in (None, after[c]) for c in CONSUMERS), (
        seen.reconnected,
        after,
    )
