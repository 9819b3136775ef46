"""The broker's admin REST endpoint: a topic's stats, its partitions and its unacked limit.

Each request is a GET bounded as a whole by a timeout (:func:`http_get`); an answer that is
an HTTP error carries the reason Pulsar gives (:class:`HttpStatusError`). A 404 on a
partitioned topic's base name names its partitions, since its stats cannot be explained as
one topic's.
"""

from __future__ import annotations

import http.client
import json
import math
import threading
import urllib.error
import urllib.request
from typing import Any

from keyshared._checks import check_int, check_mapping
from keyshared._jsonfile import parse_json
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.explain.stats import shown
from keyshared.scalable.topic_name import TopicDomain, TopicName

#: Seconds to wait for the admin REST endpoint.
DEFAULT_TIMEOUT_S = 10.0


#: The longest timeout or interval, in seconds: a year. Python's waits overflow well below
#: ``threading.TIMEOUT_MAX`` (a sleep adds the machine's uptime to its deadline).
MAX_SECONDS = 365 * 24 * 3600


def check_timeout(name: str, value: object) -> float:
    """A timeout or interval in seconds: a finite number > 0 and at most a year
    (:data:`MAX_SECONDS`); the error names ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentTypeError(
            f"{name} must be a number of seconds, got {type(value).__name__}", argument=name
        )
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgument(
            f"{name} must be a finite number of seconds > 0, got {value}", argument=name
        )
    if value > MAX_SECONDS:
        raise InvalidArgument(
            f"{name} must be at most {MAX_SECONDS} seconds (a year), got {value}", argument=name
        )
    return float(value)


def _admin_url(url: str, name: TopicName, tail: str) -> str:
    return (
        f"{url.rstrip('/')}/admin/v2/{name.domain.value}/{name.namespace}/{name.local_name}{tail}"
    )


def _persistent(topic: str) -> TopicName:
    name = TopicName.get(topic)
    if name.domain not in (TopicDomain.persistent, TopicDomain.non_persistent):
        raise InvalidArgument(
            f"--topic {topic!r} is not a persistent or non-persistent topic", argument="--topic"
        )
    return name


def stats_url(url: str, topic: str) -> str:
    """The admin REST address of a topic's stats on the broker at ``url``
    (``http://host:8080``); ``topic`` as Pulsar reads it (a bare name is in public/default)."""
    return _admin_url(url, _persistent(topic), "/stats")


class AnswerError(OSError):
    """The broker's admin endpoint was reached but gave no whole answer: an HTTP error
    (:class:`HttpStatusError`), or a connection closed before the body was complete. The
    other OSErrors of :func:`http_get` say that it could not be reached, or gave no answer
    within the timeout."""


class HttpStatusError(AnswerError):
    """The broker answered with an HTTP error ``code``; the message ends with the reason
    its answer gives, when it gives one."""

    def __init__(self, address: str, code: int, reason: str, detail: str | None = None) -> None:
        said = "" if not detail else f": {shown(detail, 200)}"
        super().__init__(f"{address}: HTTP {code} {reason}{said}")
        self.code = code


#: The most of an HTTP error's body read for its reason.
_ERROR_BODY_LIMIT = 16 * 1024


def _error_detail(body: bytes) -> str | None:
    """What Pulsar's error answer says: the ``reason`` of its JSON, or the ``Message:``
    line of the page an unexpected exception gives; None for anything else (a proxy's
    HTML page is no reason)."""
    text = body.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict) and isinstance(data.get("reason"), str):
        return data["reason"].strip() or None
    for line in text.splitlines():
        if line.startswith("Message: "):
            return line.removeprefix("Message: ").strip() or None
    return None


def http_get(address: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> bytes:
    """The body of a GET of ``address``, the whole request (connecting, the headers and
    every read of the body) within ``timeout_s``: a server that answers a byte at a time
    cannot stretch it. An OSError naming the address otherwise: :class:`HttpStatusError`
    for an HTTP error, :class:`AnswerError` for a body cut short."""
    timeout_s = check_timeout("timeout", timeout_s)
    outcome: list[bytes | BaseException] = []
    detail: list[str | None] = []

    def get() -> None:
        try:
            with urllib.request.urlopen(address, timeout=timeout_s) as answer:
                outcome.append(answer.read())
        except urllib.error.HTTPError as e:
            # Read here, within the deadline: an error's body can hang as a body can.
            try:
                detail.append(_error_detail(e.read(_ERROR_BODY_LIMIT)))
            except (OSError, http.client.HTTPException):
                detail.append(None)
            finally:
                e.close()
            outcome.append(e)
        except BaseException as e:  # handed to the caller's thread
            outcome.append(e)

    # A thread of its own bounds the whole request: urllib's timeout bounds each socket
    # operation alone. A request still running at the deadline is left to its own
    # socket timeout; the thread is a daemon, so it never keeps the process alive.
    worker = threading.Thread(target=get, name="keyshared-admin-get", daemon=True)
    worker.start()
    worker.join(timeout_s)
    late = OSError(f"{address}: no complete answer within {timeout_s:g} s")
    if not outcome:
        raise late
    result = outcome[0]
    reason = result.reason if isinstance(result, urllib.error.URLError) else result
    if isinstance(reason, TimeoutError):
        # urllib's socket timeout is the same span and may fire first: the same failure.
        raise late
    if isinstance(result, urllib.error.HTTPError):
        raise HttpStatusError(
            address, result.code, str(result.reason), detail[0] if detail else None
        )
    if isinstance(result, urllib.error.URLError):
        raise OSError(f"{address}: {result.reason}")
    if isinstance(result, http.client.IncompleteRead):
        got = len(result.partial)
        of = "" if result.expected is None else f" of {got + result.expected}"
        raise AnswerError(f"{address}: the connection closed after {got}{of} bytes of the answer")
    if isinstance(result, OSError | http.client.HTTPException):
        raise OSError(f"{address}: {result}")
    if isinstance(result, BaseException):
        raise result
    return result


def fetch_stats(url: str, topic: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    """The topic stats from the admin REST endpoint of the broker at ``url``; an OSError
    naming the address when the broker does not answer within ``timeout_s`` or refuses.
    A 404 for a partitioned topic's base name says so and names its partitions."""
    address = stats_url(url, topic)
    try:
        body = http_get(address, timeout_s)
    except HttpStatusError as e:
        count = _partitions_or_none(url, topic, timeout_s) if e.code == 404 else 0
        if count:
            name = _persistent(topic)
            raise OSError(
                f"{e}: {name} is a partitioned topic of {count} partition(s),"
                f" {name}-partition-0 to {name}-partition-{count - 1}; explain one"
                f" (--topic {name}-partition-0) or each (--all-partitions)"
            ) from None
        raise
    return parse_json(body, address)


def _partitions_or_none(url: str, topic: str, timeout_s: float) -> int:
    # Only to explain a 404: when this lookup fails too, the 404 is the answer.
    try:
        return partition_count(url, topic, timeout_s)
    except (OSError, ValueError, TypeError):
        return 0


def partition_count(url: str, topic: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
    """How many partitions the topic has (0: not partitioned), from its partitioned-topic
    metadata (``GET .../partitions``)."""
    address = _admin_url(url, _persistent(topic), "/partitions")
    data = parse_json(http_get(address, timeout_s), address)
    return check_int(
        f"{address}: partitions", check_mapping(address, data).get("partitions", 0), minimum=0
    )


def partition_names(url: str, topic: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[str]:
    """The topic's partitions by name, or the topic alone when it is not partitioned."""
    count = partition_count(url, topic, timeout_s)
    name = str(_persistent(topic))
    return [f"{name}-partition-{i}" for i in range(count)] if count else [name]


def fetch_max_unacked(url: str, topic: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> int | None:
    """The topic's applied ``maxUnackedMessagesOnConsumer`` (topic, namespace or broker
    level), or None when the broker does not say (topic policies disabled, no answer):
    the limit is context for "at its unacked limit", never a reason to fail."""
    address = _admin_url(url, _persistent(topic), "/maxUnackedMessagesOnConsumer?applied=true")
    try:
        value = parse_json(http_get(address, timeout_s), address)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "AnswerError",
    "HttpStatusError",
    "check_timeout",
    "fetch_max_unacked",
    "fetch_stats",
    "http_get",
    "partition_count",
    "partition_names",
    "stats_url",
]
