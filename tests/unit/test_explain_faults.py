"""``keyshared explain --url`` against an admin endpoint that misbehaves.

A fake admin endpoint on 127.0.0.1 (``http.server`` in a thread) serves the stats a 4.2.4
broker recorded (tests/fixtures/stats) when healthy and, request by request, misbehaves:
HTTP 500 with Pulsar's JSON reason, a hang longer than ``--timeout``, the connection closed
mid-body, a body of truncated JSON, or no listener at all (connection refused). Checked:

- without ``--watch``, in a child process as an operator runs it: each misbehaviour is one
  line on stderr naming the stats URL and what went wrong, exit status 2, nothing on
  stdout, no traceback, and the hang ends within the timeout;
- with ``--watch``: every poll that fails is one line (its time, the endpoint unreachable
  or failed, and why) and watching carries on; the first good poll after says the
  endpoint is back, after how many failed polls from when, and what changed since the
  last good read (a consumer that reconnected, hashes drained). Each poll's lines are
  compared with what the schedule of faults says they must be, times included;
- stats that do not explain the subscription (a restarted broker's, before the consumers
  are back) and a stats file cut short are failed polls too; Ctrl-C ends a watch with
  status 130 and no traceback.
"""

from __future__ import annotations

import functools
import http.server
import io
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from support.faults import record_fault

from keyshared.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures" / "stats"
SUB = "sub"
TOPIC = "t"
STATS_PATH = f"/admin/v2/persistent/public/default/{TOPIC}/stats"
TIMEOUT_S = 1.0
# A hung request is released after this (or when the test ends): far past --timeout, so
# that an answer bounded by the hang rather than the timeout shows.
HANG_S = 30.0
# A child process explaining a bad answer: its start and one request, on two busy cores.
CHILD_TIMEOUT_S = 60.0
REASON = "Failed to get topic stats: the managed ledger is fenced"
FAULTS = ("500", "hang", "cut", "truncated", "refused")


def _stats(name: str = "held.json") -> Any:
    return json.loads((FIXTURES / name).read_text())


class FaultyAdmin:
    """A broker's admin endpoint on 127.0.0.1: GET of the topic's stats answers ``stats``
    as JSON when :attr:`fault` is ``"ok"``, else misbehaves as it names (FAULTS); any other
    path is a 404 with Pulsar's JSON reason (so the unacked limit is unknown). ``refused``
    stops listening, which refuses connections, and ``ok`` listens again on the same port.
    :attr:`served` counts the stats requests answered, by fault."""

    def __init__(self) -> None:
        self.stats: Any = _stats()
        self.fault = "ok"
        self.served: Counter[str] = Counter()
        self.body_size = 0  # of the stats last served or cut
        self._release = threading.Event()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._port = 0
        # While refusing, the port stays bound without listening (connections are
        # refused), so that no other process takes it before the endpoint is back.
        self._holder: socket.socket | None = None
        self._listen()
        self.url = f"http://127.0.0.1:{self._port}"
        self.stats_url = self.url + STATS_PATH

    def set(self, fault: str, stats: Any = None) -> None:
        """The answer to the next stats requests (and new ``stats`` when healthy)."""
        assert fault in ("ok", *FAULTS), fault
        if stats is not None:
            self.stats = stats
        if fault == "refused" and self._server is not None:
            self._shut()
        elif fault != "refused" and self._server is None:
            self._listen()
        self.fault = fault

    def _listen(self) -> None:
        admin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != STATS_PATH:
                    self._send(404, b'{"reason": "Topic policies are disabled"}')
                    return
                fault = admin.fault
                admin.served[fault] += 1
                body = json.dumps(admin.stats).encode()
                admin.body_size = len(body)
                if fault == "ok":
                    self._send(200, body)
                elif fault == "500":
                    self._send(500, json.dumps({"reason": REASON}).encode())
                elif fault == "hang":
                    admin._release.wait(HANG_S)
                    self.close_connection = True
                elif fault == "cut":
                    # Headers promise the whole body; half comes, then the socket closes.
                    self._send(200, body[: len(body) // 2], length=len(body))
                    self.close_connection = True
                elif fault == "truncated":
                    # Whole as HTTP goes, cut between two members as JSON goes.
                    self._send(200, body[: body.rindex(b",", 0, len(body) // 2)])

            def _send(self, status: int, body: bytes, length: int | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()

            def log_message(self, *args: object) -> None:
                pass

        if self._holder is not None:
            self._holder.close()
            self._holder = None
        server = http.server.ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        server.daemon_threads = True
        self._port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def _shut(self) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
        self._server = None
        self._holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._holder.bind(("127.0.0.1", self._port))

    def close(self) -> None:
        self._release.set()
        if self._server is not None:
            self._shut()
        if self._holder is not None:
            self._holder.close()


@pytest.fixture
def admin() -> Iterator[FaultyAdmin]:
    running = FaultyAdmin()
    try:
        yield running
    finally:
        running.close()


def _argv(admin: FaultyAdmin, *more: str) -> list[str]:
    url = ["--url", admin.url, "--topic", TOPIC, "--subscription", SUB]
    return ["explain", *url, "--timeout", str(TIMEOUT_S), *more]


# What the URL's error says, per fault (after "<stats URL>: ").
SAID = {
    "500": re.escape(f"HTTP 500 Internal Server Error: {REASON}"),
    "hang": re.escape(f"no complete answer within {TIMEOUT_S:g} s"),
    "cut": r"the connection closed after (\d+) of (\d+) bytes of the answer",
    "truncated": (
        r"the JSON ends early \(line 1, column \d+\): Expecting ',' delimiter;"
        r" is the file truncated\?"
    ),
    "refused": r"\[Errno 111\] Connection refused",
}
# How a failed poll of --watch names the endpoint's state, per fault.
STATE = {
    "500": "failed",
    "hang": "is unreachable",
    "cut": "failed",
    "truncated": "failed",
    "refused": "is unreachable",
}


# --- once ------------------------------------------------------------------------------------


def test_each_misbehaviour_is_one_error_line_naming_the_url(admin: FaultyAdmin) -> None:
    """Each fault in a child process: status 2, one stderr line, no traceback, in time."""
    wrong = []
    for fault in FAULTS:
        admin.set(fault)
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "keyshared", *_argv(admin)],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
        took = time.monotonic() - started
        want = rf"keyshared explain: error: {re.escape(admin.stats_url)}: {SAID[fault]}\n"
        said = re.fullmatch(want, done.stderr)
        if done.returncode != 2 or done.stdout or said is None:
            wrong.append(f"{fault}: status {done.returncode}, {done.stdout!r}, {done.stderr!r}")
        elif fault == "cut" and said.groups() != (str(admin.body_size // 2), str(admin.body_size)):
            wrong.append(f"cut: {done.stderr!r} for a body of {admin.body_size} bytes")
        elif fault == "hang" and took > HANG_S / 2:
            # Bounded by --timeout, not by the server's hang.
            wrong.append(f"hang: the command took {took:.1f} s")
    admin.set("ok")
    record_fault(
        "explain through admin faults",
        faults=len(FAULTS),
        messages=len(FAULTS),
        mismatched=len(wrong),
    )
    assert not wrong, "\n".join(wrong)
    assert admin.served == Counter({f: 1 for f in FAULTS if f != "refused"})


# --- watching --------------------------------------------------------------------------------


def _reconnected(stats: Any) -> Any:
    """``stats`` after the consumer ``stuck`` reconnected: a new connection, its unacked
    messages back to redelivery and the hashes it held released, permits again."""
    after = json.loads(json.dumps(stats))
    stuck = next(
        c for c in after["subscriptions"][SUB]["consumers"] if c["consumerName"] == "stuck"
    )
    stuck.update(
        connectedSince="2026-11-25T15:40:00.5Z",
        drainingHashes=[],
        unackedMessages=0,
        availablePermits=5,
    )
    return after


def _without_consumers(stats: Any) -> Any:
    """``stats`` as a restarted broker may give them before any consumer is back: the
    subscription has no consumers and so no dispatcher, and its type reads None."""
    after = json.loads(json.dumps(stats))
    after["subscriptions"][SUB].update(type="None", consumers=[])
    return after


def _polls(text: str) -> list[str]:
    """The blocks of a watch's output after the first explanation, one per poll."""
    return text.split("\n+")[1:]


def _watch(
    argv: list[str], steps: Sequence[Callable[[], None]], monkeypatch: pytest.MonkeyPatch
) -> str:
    """The output of a watch whose poll ``i`` follows ``steps[i]()`` (instead of a sleep)."""
    todo = list(steps)

    def next_step(seconds: float) -> None:
        assert seconds == 0.5
        todo.pop(0)()

    monkeypatch.setattr("keyshared.explain.command._sleep", next_step)
    out = io.StringIO()
    assert main([*argv, "--watch", "0.5", "--count", str(len(steps))], out=out) == 0
    assert not todo
    return out.getvalue()


# What the watch must say once the endpoint is back with _reconnected's stats.
RECONNECTED = [
    "stuck reconnected (connected since 2026-11-25T15:40:00.5Z)",
    "2 hash(es) drained: stuck 2",
    "stuck takes messages again (availablePermits 5)",
]
UNEXPLAINED = re.escape(
    "the stats cannot be explained: subscriptions['sub'].type is 'None':"
    " subscription 'sub' is not Key_Shared"
)


def test_watch_reports_each_failed_poll_and_carries_on(
    admin: FaultyAdmin, monkeypatch: pytest.MonkeyPatch
) -> None:
    reconnected = _reconnected(_stats())
    # Per poll: the endpoint's answer, the stats it serves from then on (None: the same),
    # and when the poll is good, the changes it must print.
    schedule: list[tuple[str, Any, list[str]]] = [
        ("ok", None, []),
        *((fault, None, []) for fault in FAULTS),
        ("ok", reconnected, RECONNECTED),
        ("refused", None, []),
        ("hang", None, []),
        ("ok", None, []),
        ("ok", _without_consumers(reconnected), []),
        ("ok", reconnected, []),
    ]
    steps = [functools.partial(admin.set, fault, stats) for fault, stats, _ in schedule]
    polls = _polls(_watch(_argv(admin), steps, monkeypatch))
    assert len(polls) == len(schedule), polls
    url = re.escape(admin.stats_url)
    times: list[float] = []
    good_at = 0.0
    failed: list[float] = []  # when each poll of the current outage was made
    endpoint = False  # whether the endpoint was at fault in it
    wrong = []
    for poll, (fault, stats, changes) in zip(polls, schedule, strict=True):
        at = re.match(r"(\d+\.\d) s: ", poll)
        assert at, poll
        times.append(float(at[1]))
        first, *rest = poll.rstrip("\n").split("\n")
        unexplained = stats is not None and not stats["subscriptions"][SUB]["consumers"]
        if fault in FAULTS or unexplained:
            why = (
                UNEXPLAINED
                if unexplained
                else rf"the admin endpoint {STATE[fault]}: {url}: {SAID[fault]}"
            )
            ok = re.fullmatch(rf"{at[1]} s: {why}", first) is not None and not rest
            failed.append(times[-1])
            endpoint = endpoint or not unexplained
        else:
            back = ""
            if failed:
                who = (
                    "the admin endpoint is back"
                    if endpoint
                    else "the subscription is explained again"
                )
                back = f"{who} after {len(failed)} failed poll(s) from +{failed[0]:.1f} s; "
            since = f"since the read at +{good_at:.1f} s"
            said = "no change" if not changes else ""
            if back:
                said = f"no change {since}" if not changes else f"what changed {since}:"
            ok = first == f"{at[1]} s: {back}{said}".rstrip(" ")
            ok = ok and sorted(rest) == sorted(f"  {line}" for line in changes)
            good_at, failed, endpoint = times[-1], [], False
        if not ok:
            wrong.append(poll)
    assert times == sorted(times)
    faults = sum(f in FAULTS for f, _, _ in schedule)
    record_fault(
        "explain --watch through admin faults",
        faults=faults,
        messages=len(polls),
        mismatched=len(wrong),
    )
    assert not wrong, "\n---\n".join(wrong)
    assert admin.served == Counter({"ok": 6, "500": 1, "hang": 2, "cut": 1, "truncated": 1})


def test_a_stats_file_cut_short_is_a_failed_poll_and_ctrl_c_ends_the_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file caught half written is a failed poll like an endpoint's; Ctrl-C, which ends a
    watch without --count, ends it with status 130 and what was printed, no traceback."""
    path = tmp_path / "stats.json"
    whole = (FIXTURES / "held.json").read_text()
    path.write_text(whole)

    def interrupt() -> None:
        raise KeyboardInterrupt

    steps = [
        lambda: path.write_text(whole[: whole.rindex(",", 0, len(whole) // 2)]),
        lambda: path.write_text(whole),
        interrupt,
    ]
    monkeypatch.setattr("keyshared.explain.command._sleep", lambda seconds: steps.pop(0)())
    out = io.StringIO()
    assert main(["explain", str(path), "--subscription", SUB, "--watch", "0.5"], out=out) == 130
    assert not steps
    cut, back = _polls(out.getvalue())
    said = re.escape(f"the stats file cannot be read: {path}: the JSON ends early")
    assert re.fullmatch(rf"(\d+\.\d) s: {said} \(line \d+, column \d+\): .+\n", cut), cut
    since = re.escape(f"the stats are back after 1 failed poll(s) from +{cut.split(' ')[0]} s")
    assert re.fullmatch(rf"\d+\.\d s: {since}; no change since the read at \+0\.0 s\n", back)
