"""``keyshared verify`` run in this process on a test broker, as the verify tests use it."""

from __future__ import annotations

import contextlib
import io
import json

from keyshared.cli import main
from support.pulsar_broker import KEEP_ALIVE_S, PulsarBroker

#: Small enough for the three releases to run every scenario in a few minutes.
WORKLOAD = ["--messages", "240", "--keys", "40", "--consumers", "3", "--duration", "90"]


def verify(broker: PulsarBroker, *args: str) -> tuple[int, str, str]:
    """``keyshared verify`` on the broker, in this process: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["verify", "--service-url", broker.service_url, "--admin-url", broker.web_url]
    argv += ["--keep-alive", str(KEEP_ALIVE_S), *WORKLOAD, *args]
    with contextlib.redirect_stderr(err):
        status = main(argv, out)
    return status, out.getvalue(), err.getvalue()


def topics(broker: PulsarBroker) -> list[str]:
    names: list[str] = broker.admin("persistent/public/default")
    return names


def why(out: str, err: str) -> str:
    """What a failed run said, for an assertion's message: with ``--json``, the verdict and
    notes without the record, whose events would push the verdict out of a log's tail."""
    try:
        answer = json.loads(out)
    except ValueError:
        return err + out
    brief = {"verdict": answer["verdict"], "notes": answer["notes"]}
    return err + json.dumps(brief, indent=1)
