"""Explaining a live Key_Shared subscription from Pulsar's topic stats.

``pulsar-admin topics stats`` (``GET /admin/v2/persistent/{tenant}/{ns}/{topic}/stats``)
reports the raw facts of a Key_Shared subscription: each consumer's key hash ranges, the
PIP-379 draining hashes it holds, its unacked messages and permits, when it last acked and
consumed, and the messages waiting in replay. This module reads them into frozen records
and turns them into answers, the verdict first (:func:`verdict`: who waits on whom, which
consumers take no messages and why, which held hashes will not drain by themselves); then
who owns a key (a message's sticky key resolved as the broker does:
:func:`keyshared.routing.hashing.resolve_sticky_key`), what share of the hash space and of a key
sample each consumer gets, which hashes are held and which keys they block, and what moves
if a consumer joins or leaves; and between two readings, what changed (:func:`changes`).

The broker's ranges are the truth: a hash goes to the consumer whose range contains it.
keyshared's :class:`~keyshared.dispatch.ConsistentHashingStickyKeyConsumerSelector` is used only
for the what-if of a join or a leave, rebuilt from the consumers' names in the order the
stats list them (their join order), and the answer says whether that ring reproduces the
broker's ranges.

Hashes are the consistent-hashing selector's sticky key hashes, in ``[1, 65535]``
(:func:`keyshared.routing.hashing.sticky_key_hash`); shares are fractions of those 65535 hashes or
of a sample's messages. The stats of Pulsar 4.0 and 4.2 have the same fields; those from
before PIP-379 (3.x) have no draining fields, which then read as none. The stats are those
of one topic: a partitioned topic's aggregated stats mix its partitions' consumers (their
ranges overlap, which is refused), so explain one partition (``name-partition-0``); a 404
on a partitioned topic's base name names its partitions.

Names and keys come from clients: :func:`shown` escapes and shortens them for printing.
"""

from __future__ import annotations

import csv
import http.client
import json
import math
import re
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from keyshared._checks import check_bool, check_int, check_mapping, check_optional_int
from keyshared._core import ConsistentHashingStickyKeyConsumerSelector
from keyshared._jsonfile import load_json, parse_json
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.routing.hashing import resolve_sticky_key, sticky_key_hash, sticky_key_hashes
from keyshared.scalable.topic_name import TopicDomain, TopicName

#: The sticky key hashes a consistent-hashing selector serves: ``[HASH_MIN, HASH_MAX]``.
HASH_MIN, HASH_MAX = 1, 65535
HASH_COUNT = HASH_MAX - HASH_MIN + 1
#: The broker's ``subscriptionKeySharedConsistentHashingReplicaPoints`` default.
DEFAULT_POINTS = 100
#: Seconds to wait for the admin REST endpoint.
DEFAULT_TIMEOUT_S = 10.0
#: Owner index of a hash no consumer's range contains.
NO_OWNER = -1

KEY_SHARED = "Key_Shared"


# --- the stats -----------------------------------------------------------------------------


@dataclass(frozen=True)
class DrainingHashStats:
    """One entry of a consumer's ``drainingHashes``: a hash whose range moved to another
    consumer while this one still has ``unack_msgs`` unacked messages of it; new messages of
    the hash are held until they are acked (``blocked_attempts`` dispatches were held so
    far)."""

    hash: int
    unack_msgs: int
    blocked_attempts: int


@dataclass(frozen=True)
class ConsumerStats:
    """One consumer of a Key_Shared subscription, as its ``ConsumerStatsImpl`` reports it.

    ``ranges`` are ``keyHashRangeArrays``: inclusive ``(start, end)`` hash ranges, ascending.
    ``label`` is the name, unique within the subscription: ``name#index`` (index in the
    stats' list) when several consumers share the name or the name is another's label.
    Timestamps are milliseconds since the epoch, 0 for never (``last_acked_timestamp`` 0:
    no ack since it connected); ``connected_since`` is the broker's ISO-8601 text."""

    index: int
    name: str
    label: str
    ranges: tuple[tuple[int, int], ...]
    draining_hashes: tuple[DrainingHashStats, ...]
    available_permits: int
    unacked_messages: int
    blocked_on_unacked_messages: bool
    draining_hashes_count: int
    draining_hashes_unacked_messages: int
    draining_hashes_cleared_total: int
    msg_out_counter: int = 0
    last_acked_timestamp: int = 0
    last_consumed_timestamp: int = 0
    connected_since: str | None = None

    @property
    def hash_count(self) -> int:
        """How many sticky key hashes of ``[HASH_MIN, HASH_MAX]`` the ranges hold."""
        return sum(max(0, min(e, HASH_MAX) - max(s, HASH_MIN) + 1) for s, e in self.ranges)


@dataclass(frozen=True)
class KeySharedSubscription:
    """A Key_Shared subscription of a topic's stats (``SubscriptionStatsImpl``), consumers in
    the stats' order, which is their join order.

    ``msg_in_replay`` messages wait for redelivery (held back from their consumer);
    ``stats_time_ms`` is when the stats were taken (milliseconds since the epoch): the newest
    timestamp in them, or the time they were fetched.

    Invariant: no two consumers' ranges overlap, so every hash has at most one owner."""

    name: str
    key_shared_mode: str | None
    msg_backlog: int
    unacked_messages: int
    draining_hashes_count: int
    draining_hashes_unacked_messages: int
    consumers: tuple[ConsumerStats, ...]
    path: str = field(default="", compare=False)
    msg_in_replay: int = 0
    msg_out_counter: int = 0
    last_acked_timestamp: int = 0
    last_consumed_timestamp: int = 0
    stats_time_ms: int = 0

    @cached_property
    def owners(self) -> npt.NDArray[np.int32]:
        """The index of each hash's consumer (``NO_OWNER`` for none), hashes 0 to 65535."""
        return _owner_table(self.consumers, self.path)

    def consumer(self, label: str) -> ConsumerStats:
        """The consumer of ``label`` (its name, or ``name#index`` among namesakes)."""
        for c in self.consumers:
            if c.label == label:
                return c
        known = ", ".join(repr(c.label) for c in self.consumers) or "none"
        raise InvalidArgument(
            f"no consumer {label!r} in subscription {self.name!r} (consumers: {known})"
        )

    def owner_of(self, hash_: int) -> ConsumerStats | None:
        """The consumer whose range contains the sticky key hash ``hash_``."""
        index = int(self.owners[check_int("hash", hash_, minimum=0, maximum=HASH_MAX)])
        return None if index == NO_OWNER else self.consumers[index]

    def holder_of(self, hash_: int) -> ConsumerStats | None:
        """The consumer in whose ``drainingHashes`` ``hash_`` is, if any."""
        return next(
            (c for c in self.consumers if any(d.hash == hash_ for d in c.draining_hashes)), None
        )


def read_subscription(
    stats: object, subscription: str, path: str = "", *, stats_time_ms: int | None = None
) -> KeySharedSubscription:
    """The Key_Shared ``subscription`` of a topic's stats (the admin API's JSON, parsed).

    Unknown fields are ignored; a missing or mistyped field is an error naming its path,
    such as ``subscriptions['sub'].consumers[2].keyHashRangeArrays is missing``; so is a
    subscription that is absent or not Key_Shared, and ranges of two consumers that
    overlap. ``stats_time_ms`` is when the stats were taken (default: the newest timestamp
    in the subscription's stats)."""
    subs = check_mapping(_join(path, "subscriptions"), _required(stats, path, "subscriptions"))
    if subscription not in subs:
        known = ", ".join(repr(s) for s in subs) or "none"
        raise InvalidArgument(
            f"{_join(path, 'subscriptions')} has no {subscription!r} (it has {known})"
        )
    where = f"{_join(path, 'subscriptions')}[{subscription!r}]"
    data = check_mapping(where, subs[subscription])
    kind = _required(data, where, "type")
    if kind != KEY_SHARED:
        raise InvalidArgument(
            f"{where}.type is {kind!r}: subscription {subscription!r} is not {KEY_SHARED}",
            argument=where,
        )
    consumers = _read_consumers(f"{where}.consumers", _required(data, where, "consumers"))
    sub = KeySharedSubscription(
        name=subscription,
        key_shared_mode=_optional_str(data, where, "keySharedMode"),
        msg_backlog=_int(data, where, "msgBacklog"),
        unacked_messages=_int(data, where, "unackedMessages"),
        draining_hashes_count=_int(data, where, "drainingHashesCount", 0),
        draining_hashes_unacked_messages=_int(data, where, "drainingHashesUnackedMessages", 0),
        consumers=consumers,
        path=where,
        msg_in_replay=_int(data, where, "msgInReplay", 0),
        msg_out_counter=_int(data, where, "msgOutCounter", 0),
        last_acked_timestamp=_int(data, where, "lastAckedTimestamp", 0),
        last_consumed_timestamp=_int(data, where, "lastConsumedTimestamp", 0),
        stats_time_ms=(
            _newest_timestamp(data, consumers)
            if stats_time_ms is None
            else check_int("stats_time_ms", stats_time_ms, minimum=0)
        ),
    )
    _ = sub.owners  # overlapping ranges are refused here, not at the first question
    return sub


#: The timestamps of a subscription's and its consumers' stats, in milliseconds.
_TIMESTAMPS = (
    "lastAckedTimestamp",
    "lastConsumedTimestamp",
    "lastConsumedFlowTimestamp",
    "lastMarkDeleteAdvancedTimestamp",
    "firstMessagesSentTimestamp",
    "firstConsumedFlowTimestamp",
)


def _newest_timestamp(data: Mapping[str, Any], consumers: Sequence[ConsumerStats]) -> int:
    """The newest timestamp of the subscription's stats (0 when it has none): a file of stats
    does not say when it was taken, and this is the latest moment it speaks of."""
    found = [data.get(name) for name in _TIMESTAMPS]
    found += [c.last_acked_timestamp for c in consumers]
    found += [c.last_consumed_timestamp for c in consumers]
    return max((t for t in found if isinstance(t, int) and not isinstance(t, bool)), default=0)


def unique_labels(names: Sequence[str]) -> list[str]:
    """Labels for consumers named ``names`` (in the stats' order), all different: a name no
    other consumer has is its own label; the others get ``name#index``, with ``#index``
    again while that is taken, so that consumers named ``a``, ``a`` and ``a#1`` get
    ``a#0``, ``a#1#1`` and ``a#1``."""
    count = Counter(names)
    taken = set(names)
    labels = []
    for i, name in enumerate(names):
        label = name if count[name] == 1 else _fresh_label(name, i, taken)
        taken.add(label)
        labels.append(label)
    return labels


def _fresh_label(name: str, index: int, taken: set[str]) -> str:
    """``name#index``, with ``#index`` again while it is in ``taken``."""
    label = f"{name}#{index}"
    while label in taken:
        label += f"#{index}"
    return label


def _read_consumers(path: str, data: object) -> tuple[ConsumerStats, ...]:
    data = _list(path, data)
    names = [
        _str(check_mapping(f"{path}[{i}]", c), f"{path}[{i}]", "consumerName")
        for i, c in enumerate(data)
    ]
    return tuple(
        _read_consumer(f"{path}[{i}]", c, i, label)
        for i, (c, label) in enumerate(zip(data, unique_labels(names), strict=True))
    )


def _read_consumer(path: str, data: Mapping[str, Any], index: int, label: str) -> ConsumerStats:
    # Absent (before PIP-379) or null is none; anything but a list is refused, not read as
    # none: {} or false there means the stats are not what this reader knows.
    draining = data.get("drainingHashes")
    draining = [] if draining is None else draining
    return ConsumerStats(
        index=index,
        name=data["consumerName"],
        label=label,
        ranges=_read_ranges(
            f"{path}.keyHashRangeArrays", _required(data, path, "keyHashRangeArrays")
        ),
        draining_hashes=tuple(
            _read_draining(f"{path}.drainingHashes[{i}]", d)
            for i, d in enumerate(_list(f"{path}.drainingHashes", draining))
        ),
        available_permits=_int(data, path, "availablePermits", minimum=None),
        unacked_messages=_int(data, path, "unackedMessages"),
        blocked_on_unacked_messages=check_bool(
            f"{path}.blockedConsumerOnUnackedMsgs",
            _required(data, path, "blockedConsumerOnUnackedMsgs"),
        ),
        draining_hashes_count=_int(data, path, "drainingHashesCount", 0),
        draining_hashes_unacked_messages=_int(data, path, "drainingHashesUnackedMessages", 0),
        draining_hashes_cleared_total=_int(data, path, "drainingHashesClearedTotal", 0),
        msg_out_counter=_int(data, path, "msgOutCounter", 0),
        last_acked_timestamp=_int(data, path, "lastAckedTimestamp", 0),
        last_consumed_timestamp=_int(data, path, "lastConsumedTimestamp", 0),
        connected_since=_optional_str(data, path, "connectedSince"),
    )


def _read_ranges(path: str, data: object) -> tuple[tuple[int, int], ...]:
    out = []
    for i, pair in enumerate(_list(path, data)):
        if not isinstance(pair, list) or len(pair) != 2:
            raise InvalidArgument(
                f"{path}[{i}] must be a [start, end] pair, got {pair!r}", argument=path
            )
        start = check_int(f"{path}[{i}][0]", pair[0], minimum=0, maximum=HASH_MAX)
        end = check_int(f"{path}[{i}][1]", pair[1], minimum=start, maximum=HASH_MAX)
        out.append((start, end))
    return tuple(sorted(out))


def _read_draining(path: str, data: object) -> DrainingHashStats:
    d = check_mapping(path, data)
    return DrainingHashStats(
        hash=_int(d, path, "hash", maximum=HASH_MAX),
        unack_msgs=_int(d, path, "unackMsgs"),
        blocked_attempts=_int(d, path, "blockedAttempts"),
    )


def _owner_table(consumers: Sequence[ConsumerStats], path: str) -> npt.NDArray[np.int32]:
    owners = np.full(HASH_MAX + 1, NO_OWNER, dtype=np.int32)
    for c in consumers:
        for start, end in c.ranges:
            taken = owners[start : end + 1]
            if (taken != NO_OWNER).any():
                other = consumers[int(taken[taken != NO_OWNER][0])]
                raise InvalidArgument(
                    f"{path}.consumers[{c.index}].keyHashRangeArrays: [{start}, {end}] overlaps"
                    f" a range of consumers[{other.index}] ({other.label})",
                    argument=path,
                )
            owners[start : end + 1] = c.index
    return owners


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _required(data: object, path: str, name: str) -> Any:
    mapping = check_mapping(path or "stats", data)
    if name not in mapping or mapping[name] is None:
        missing = _join(path, name)
        raise InvalidArgument(f"{missing} is missing", kind="missing_field", argument=missing)
    return mapping[name]


def _int(
    data: Mapping[str, Any],
    path: str,
    name: str,
    default: int | None = None,
    *,
    minimum: int | None = 0,
    maximum: int | None = None,
) -> int:
    """Field ``name``, an int; ``default`` when absent (required when ``default`` is None)."""
    value = data.get(name) if default is not None else _required(data, path, name)
    value = default if value is None else value
    return check_int(_join(path, name), value, minimum=minimum, maximum=maximum)


def _str(data: Mapping[str, Any], path: str, name: str) -> str:
    value = _required(data, path, name)
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{_join(path, name)} must be a str, got {type(value).__name__}")
    return value


def _optional_str(data: Mapping[str, Any], path: str, name: str) -> str | None:
    return None if data.get(name) is None else _str(data, path, name)


def _list(path: str, data: object) -> list[Any]:
    if not isinstance(data, list):
        raise ArgumentTypeError(f"{path} must be a list, got {type(data).__name__}", argument=path)
    return data


# --- where the stats come from -------------------------------------------------------------


def load_stats(source: str | Path) -> Any:
    """The topic stats JSON of a file, or of standard input for ``"-"``; a ValueError naming
    the source when it cannot be decoded or is not JSON, or when standard input is closed."""
    return load_json(source)


def decode_utf8(source: str, data: bytes) -> str:
    """``data`` decoded as UTF-8 (a BOM dropped); a ValueError naming ``source`` and the
    offset of the first bad byte otherwise."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InvalidArgument(
            f"{source}: not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})"
        ) from None


def check_timeout(name: str, value: object) -> float:
    """A timeout or interval in seconds: a finite number > 0; the error names ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentTypeError(
            f"{name} must be a number of seconds, got {type(value).__name__}", argument=name
        )
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgument(
            f"{name} must be a finite number of seconds > 0, got {value}", argument=name
        )
    return float(value)


def _admin_url(url: str, name: TopicName, tail: str) -> str:
    return (
        f"{url.rstrip('/')}/admin/v2/{name.domain.value}/{name.namespace}/{name.local_name}{tail}"
    )


def _persistent(topic: str) -> TopicName:
    name = TopicName.get(topic)
    if name.domain not in (TopicDomain.persistent, TopicDomain.non_persistent):
        raise InvalidArgument(f"--topic {topic!r} is not a persistent or non-persistent topic")
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


#: The largest message count of a key sample: counts add up in float64, exact to 2**53.
MAX_COUNT = 2**53


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, split at ``\n`` and ``\r\n`` only: a key may hold any other
    character (``str.splitlines`` would also split at ``\v``, U+001C, U+0085, U+2028...).
    A final line break ends the last line rather than starting an empty one."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


_COUNT = re.compile(r"[+-]?[0-9]+", re.ASCII)


def load_keys(path: str | Path) -> dict[str, int]:
    """A key sample with message counts: a ``.csv`` file (any letter case) of
    ``key[,count]`` rows (a first row whose count is not a number is a header), else one
    key per line, each counting once. A key listed twice adds up. Lines end at ``\n`` or
    ``\r\n``; counts are decimal digits, at most ``MAX_COUNT`` in all. Errors name the
    file (and line)."""
    lines = split_lines(decode_utf8(str(path), Path(path).read_bytes()))
    sample: dict[str, int] = {}
    if Path(path).suffix.lower() != ".csv":
        for key in lines:
            sample[key] = sample.get(key, 0) + 1
        return sample
    for line, row in enumerate(csv.reader(lines), start=1):
        if not row:
            continue
        count = row[1].strip() if len(row) > 1 else "1"
        if not _COUNT.fullmatch(count):
            if line == 1:
                continue
            raise InvalidArgument(f"{path}:{line}: count {count[:40]!r} is not an integer")
        sample[row[0]] = sample.get(row[0], 0) + check_int(
            f"{path}:{line} count", int(count), minimum=0, maximum=MAX_COUNT
        )
    check_int(f"{path}: the total count", sum(sample.values()), maximum=MAX_COUNT)
    return sample


def check_sample(sample: object) -> dict[str, int] | None:
    """A key sample (key -> messages) checked: str keys, int counts >= 0, at most
    ``MAX_COUNT`` in all; errors name ``sample[key]``."""
    if sample is None:
        return None
    checked = {
        check_str(f"sample key {k!r}", k): check_int(
            f"sample[{k!r}]", v, minimum=0, maximum=MAX_COUNT
        )
        for k, v in check_mapping("sample", sample).items()
    }
    check_int("sample: the total count", sum(checked.values()), maximum=MAX_COUNT)
    return checked


def check_keys(keys: object) -> tuple[str, ...]:
    """``keys``, a sequence of str (a lone str is refused: it is not seven keys)."""
    if isinstance(keys, str | bytes):
        raise ArgumentTypeError(
            f"keys must be a sequence of str, got one {type(keys).__name__}", argument="keys"
        )
    if not isinstance(keys, Iterable):
        raise ArgumentTypeError(
            f"keys must be a sequence of str, got {type(keys).__name__}", argument="keys"
        )
    return tuple(check_str(f"keys[{i}]", k) for i, k in enumerate(keys))


def check_str(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a str, got {type(value).__name__}", argument=name)
    return value


# --- answers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConsumerShare:
    """A consumer's share of the hash space (of 65535 hashes) and, with a key sample, of its
    messages (None without one)."""

    consumer: str
    ranges: tuple[tuple[int, int], ...]
    hashes: int
    hash_share: float
    messages: int | None
    traffic_share: float | None


@dataclass(frozen=True)
class KeyAnswer:
    """Where a key's messages go: its sticky ``hash``, the consumer whose range has it
    (``owner``), and the consumer holding it as draining (``held_by``, None when not held):
    while held, its new messages wait for ``held_by``'s acks instead of reaching ``owner``.

    ``keyless`` marks the empty key: a message without key or ordering key is not hashed
    as ``""`` but by ``producerName-sequenceId``
    (:func:`keyshared.routing.hashing.resolve_sticky_key`),
    so such messages spread over every consumer by hash share; ``hash`` and ``owner`` are
    then those of a key set to ``""`` (the Java client's ``key("")``). For a message placed
    by :func:`place_message`, ``key`` is its sticky key as text."""

    key: str
    hash: int
    owner: str | None
    held_by: str | None
    keyless: bool = False


@dataclass(frozen=True)
class HeldHash:
    """A draining hash: ``held_by`` has ``unack_msgs`` unacked messages of it, ``owner`` (the
    consumer whose range has it now) gets none of its messages until they are acked;
    ``blocked_attempts`` dispatches were held so far; ``keys`` are the sample keys of it."""

    hash: int
    held_by: str
    owner: str | None
    unack_msgs: int
    blocked_attempts: int
    keys: tuple[str, ...]


@dataclass(frozen=True)
class StuckConsumer:
    """A consumer that takes no more messages, and why: ``no permits`` (availablePermits <=
    0: its receiver queue is full) and/or ``blocked on unacked messages`` (it reached
    maxUnackedMessagesPerConsumer)."""

    consumer: str
    available_permits: int
    unacked_messages: int
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Move:
    """Hashes ``[start, end]`` moving from one consumer to another (None: no consumer)."""

    start: int
    end: int
    source: str | None
    target: str | None


@dataclass(frozen=True)
class MovedKey:
    key: str
    hash: int
    source: str | None
    target: str | None


@dataclass(frozen=True)
class WhatIf:
    """What moves if ``consumer`` joins or leaves (``change``), on keyshared's ring of
    ``points`` points per consumer rebuilt from the names in join order.

    ``ring_matches`` says whether that ring reproduces the broker's ranges; when it does
    not (another selector, another number of points, a consumer that rejoined), ``mismatch``
    says where, and the answer is about the rebuilt ring, not the broker's.
    ``moved_share`` is the fraction of the 65535 hashes that change consumer;
    ``shares_after`` the consumers' shares after the change (traffic with a sample)."""

    change: str
    consumer: str
    points: int
    ring_matches: bool
    mismatch: str
    moves: tuple[Move, ...]
    moved_share: float
    moved_keys: tuple[MovedKey, ...]
    moved_traffic_share: float | None
    shares_after: tuple[ConsumerShare, ...]


@dataclass(frozen=True)
class Explanation:
    """Every answer about one subscription; ``to_dict`` is its JSON form."""

    subscription: str
    key_shared_mode: str | None
    msg_backlog: int
    unacked_messages: int
    draining_hashes_count: int
    draining_hashes_unacked_messages: int
    shares: tuple[ConsumerShare, ...]
    sample_messages: int | None
    keys: tuple[KeyAnswer, ...]
    held: tuple[HeldHash, ...]
    stuck: tuple[StuckConsumer, ...]
    what_if: WhatIf | None
    verdict: Verdict | None = None
    msg_in_replay: int = 0

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)  # type: ignore[no-any-return]


def _plain(value: object) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def shares(
    sub: KeySharedSubscription,
    sample: Mapping[str, int] | None = None,
    owners: npt.NDArray[np.int32] | None = None,
) -> tuple[ConsumerShare, ...]:
    """Each consumer's ranges and share of the hash space, and with a ``sample`` (key ->
    messages) of its messages, under ``owners`` (the broker's by default)."""
    sample = check_sample(sample)
    table = sub.owners if owners is None else owners
    counts = np.bincount(
        table[HASH_MIN:][table[HASH_MIN:] != NO_OWNER], minlength=len(sub.consumers)
    )
    traffic = _traffic(table, sample, len(sub.consumers)) if sample else None
    total = sum(sample.values()) if sample else 0
    return tuple(
        ConsumerShare(
            consumer=c.label,
            ranges=_ranges_of(table, c.index),
            hashes=int(counts[c.index]),
            hash_share=int(counts[c.index]) / HASH_COUNT,
            messages=None if traffic is None else int(traffic[c.index]),
            traffic_share=None
            if traffic is None
            else (int(traffic[c.index]) / total if total else 0.0),
        )
        for c in sub.consumers
    )


def _traffic(
    owners: npt.NDArray[np.int32], sample: Mapping[str, int], n: int
) -> npt.NDArray[np.int64]:
    """Messages per consumer index; those of hashes without a consumer are left out."""
    who = owners[sticky_key_hashes(list(sample)).astype(np.int64)]
    weights = np.fromiter(sample.values(), dtype=np.int64, count=len(sample))
    owned = who != NO_OWNER
    return np.bincount(who[owned], weights=weights[owned], minlength=n).astype(np.int64)


def _ranges_of(owners: npt.NDArray[np.int32], index: int) -> tuple[tuple[int, int], ...]:
    """The maximal runs of ``index`` in ``owners``, as inclusive ranges."""
    mine = np.concatenate(([False], owners == index, [False]))
    edges = np.flatnonzero(mine[1:] != mine[:-1])
    return tuple((int(s), int(e) - 1) for s, e in zip(edges[::2], edges[1::2], strict=True))


def key_answers(sub: KeySharedSubscription, keys: Iterable[str]) -> tuple[KeyAnswer, ...]:
    """The sticky hash, owner and holder of each key (``""``: see ``KeyAnswer.keyless``)."""
    return tuple(_answer(sub, key, sticky_key_hash(key), key == "") for key in check_keys(keys))


def place_message(
    sub: KeySharedSubscription,
    key: str | bytes | None = None,
    *,
    ordering_key: bytes | None = None,
    producer_name: str | None = None,
    sequence_id: int | None = None,
    key_is_base64: bool = False,
) -> KeyAnswer:
    """Where one message goes, its sticky key resolved from its metadata as the broker does
    (:func:`keyshared.routing.hashing.resolve_sticky_key`: the ordering key, else the key, else
    ``producerName-sequenceId``)."""
    sticky = resolve_sticky_key(
        key,
        ordering_key=ordering_key,
        producer_name=producer_name,
        sequence_id=sequence_id,
        key_is_base64=key_is_base64,
    )
    text = sticky.decode("utf-8", "backslashreplace")
    return _answer(sub, text, sticky_key_hash(sticky), False)


def _answer(sub: KeySharedSubscription, key: str, hash_: int, keyless: bool) -> KeyAnswer:
    owner, holder = sub.owner_of(hash_), sub.holder_of(hash_)
    return KeyAnswer(
        key,
        hash_,
        None if owner is None else owner.label,
        None if holder is None else holder.label,
        keyless,
    )


def held_hashes(sub: KeySharedSubscription, sample: Iterable[str] = ()) -> tuple[HeldHash, ...]:
    """The draining hashes, by hash: who holds each, who waits for it, and its sample keys."""
    by_hash: dict[int, list[str]] = {}
    for key in sample:
        by_hash.setdefault(sticky_key_hash(key), []).append(key)
    out = []
    for c in sub.consumers:
        for d in c.draining_hashes:
            owner = sub.owner_of(d.hash)
            out.append(
                HeldHash(
                    hash=d.hash,
                    held_by=c.label,
                    owner=None if owner is None else owner.label,
                    unack_msgs=d.unack_msgs,
                    blocked_attempts=d.blocked_attempts,
                    keys=tuple(sorted(by_hash.get(d.hash, ()))),
                )
            )
    return tuple(sorted(out, key=lambda h: (h.hash, h.held_by)))


def stuck_consumers(sub: KeySharedSubscription) -> tuple[StuckConsumer, ...]:
    """The consumers without permits or blocked on unacked messages."""
    out = []
    for c in sub.consumers:
        reasons = (("no permits",) if c.available_permits <= 0 else ()) + (
            ("blocked on unacked messages",) if c.blocked_on_unacked_messages else ()
        )
        if reasons:
            out.append(StuckConsumer(c.label, c.available_permits, c.unacked_messages, reasons))
    return tuple(out)


def rebuilt_ring(
    sub: KeySharedSubscription, points: int
) -> ConsistentHashingStickyKeyConsumerSelector:
    """keyshared's selector with the subscription's consumers added in join order, consumer
    id = index in the stats."""
    selector = ConsistentHashingStickyKeyConsumerSelector(
        check_int("points", points, minimum=1, maximum=65536)
    )
    for c in sub.consumers:
        selector.add_consumer(c.index, c.name)
    return selector


def _ring_owners(selector: ConsistentHashingStickyKeyConsumerSelector) -> npt.NDArray[np.int32]:
    owners = np.full(HASH_MAX + 1, NO_OWNER, dtype=np.int32)
    for cid, ranges in selector.get_consumer_key_hash_ranges().items():
        for r in ranges:
            owners[r.start : r.end + 1] = cid
    return owners


def _mismatch(sub: KeySharedSubscription, ring: npt.NDArray[np.int32]) -> str:
    """Where the rebuilt ring differs from the broker's ranges ('' when it does not)."""
    for c in sub.consumers:
        want = _ranges_of(ring, c.index)
        if want != c.ranges:
            return (
                f"{c.label}: the broker reports {len(c.ranges)} range(s), {c.hash_count} hashes;"
                f" the rebuilt ring gives {len(want)} range(s),"
                f" {int((ring[HASH_MIN:] == c.index).sum())} hashes"
            )
    return ""


def what_if(
    sub: KeySharedSubscription,
    *,
    join: str | None = None,
    leave: str | None = None,
    points: int = DEFAULT_POINTS,
    sample: Mapping[str, int] | None = None,
) -> WhatIf:
    """What moves if a consumer named ``join`` joins, or the consumer ``leave`` (a label)
    leaves: hash ranges, sample keys and traffic share, on the rebuilt ring."""
    if (join is None) == (leave is None):
        raise InvalidArgument("give exactly one of join and leave")
    sample = check_sample(sample)
    selector = rebuilt_ring(sub, points)
    before = _ring_owners(selector)
    if join is not None:
        if not join:
            raise InvalidArgument("join must be a non-empty consumer name")
        joined = _with_consumer(sub, join)
        selector.add_consumer(len(sub.consumers), join)
        after_sub, name = joined, joined.consumers[-1].label
    else:
        gone = sub.consumer(leave or "")
        selector.remove_consumer(gone.index)
        after_sub, name = sub, gone.label
    after = _ring_owners(selector)
    labels = [c.label for c in after_sub.consumers]
    moved = before != after
    moved_keys = tuple(
        MovedKey(k, h, _label(labels, before[h]), _label(labels, after[h]))
        for k in (sample or {})
        if moved[h := sticky_key_hash(k)]
    )
    total = sum(sample.values()) if sample else 0
    return WhatIf(
        change="join" if join is not None else "leave",
        consumer=name,
        points=points,
        ring_matches=not (mismatch := _mismatch(sub, before)),
        mismatch=mismatch,
        moves=_moves(before, after, labels),
        moved_share=int(moved.sum()) / HASH_COUNT,
        moved_keys=moved_keys,
        moved_traffic_share=(
            (sum(sample[m.key] for m in moved_keys) / total if total else 0.0) if sample else None
        ),
        shares_after=tuple(
            s for s in shares(after_sub, sample, after) if leave is None or s.consumer != name
        ),
    )


def _with_consumer(sub: KeySharedSubscription, name: str) -> KeySharedSubscription:
    """``sub`` with a consumer ``name`` joined last, holding no range yet."""
    index = len(sub.consumers)
    taken = {c.name for c in sub.consumers} | {c.label for c in sub.consumers}
    label = name if name not in taken else _fresh_label(name, index, taken)
    newcomer = ConsumerStats(index, name, label, (), (), 0, 0, False, 0, 0, 0)
    return replace(sub, consumers=(*sub.consumers, newcomer))


def _label(labels: Sequence[str], index: np.int32 | int) -> str | None:
    return None if int(index) == NO_OWNER else labels[int(index)]


def _moves(
    before: npt.NDArray[np.int32], after: npt.NDArray[np.int32], labels: Sequence[str]
) -> tuple[Move, ...]:
    """The maximal runs of hashes in ``[HASH_MIN, HASH_MAX]`` whose (old, new) owners are
    the same pair and differ."""
    out: list[Move] = []
    changed = np.flatnonzero(before[HASH_MIN:] != after[HASH_MIN:]) + HASH_MIN
    for h in changed.tolist():
        pair = (_label(labels, before[h]), _label(labels, after[h]))
        if out and out[-1].end == h - 1 and (out[-1].source, out[-1].target) == pair:
            out[-1] = Move(out[-1].start, h, *pair)
        else:
            out.append(Move(h, h, *pair))
    return tuple(out)


def explain_subscription(
    sub: KeySharedSubscription,
    *,
    sample: Mapping[str, int] | None = None,
    keys: Sequence[str] = (),
    join: str | None = None,
    leave: str | None = None,
    points: int = DEFAULT_POINTS,
    max_unacked_messages: int | None = None,
) -> Explanation:
    """Every answer about ``sub``: the verdict, shares (of traffic too with a ``sample``,
    key -> messages), the owner of each of ``keys``, the held hashes with the sample keys
    and ``keys`` they block, the stuck consumers, and the what-if of a ``join`` or
    ``leave``. ``max_unacked_messages`` is the consumers' unacked limit
    (``maxUnackedMessagesPerConsumer``) when known; the stats say only whether a consumer
    reached it. Every argument is checked before anything is computed."""
    checked = check_sample(sample)
    asked = check_keys(keys)
    limit = check_optional_int("max_unacked_messages", max_unacked_messages, minimum=0)
    held = held_hashes(sub, dict.fromkeys([*(checked or {}), *asked]))
    return Explanation(
        subscription=sub.name,
        key_shared_mode=sub.key_shared_mode,
        msg_backlog=sub.msg_backlog,
        unacked_messages=sub.unacked_messages,
        draining_hashes_count=sub.draining_hashes_count,
        draining_hashes_unacked_messages=sub.draining_hashes_unacked_messages,
        shares=shares(sub, checked),
        sample_messages=sum(checked.values()) if checked else None,
        keys=key_answers(sub, asked),
        held=held,
        stuck=stuck_consumers(sub),
        what_if=(
            None
            if join is None and leave is None
            else what_if(sub, join=join, leave=leave, points=points, sample=checked)
        ),
        verdict=verdict(sub, held, checked, limit),
        msg_in_replay=sub.msg_in_replay,
    )


# --- the verdict ---------------------------------------------------------------------------

#: Seconds without an ack after which a consumer with unacked messages is said not to ack.
ACK_QUIET_S = 10.0


@dataclass(frozen=True)
class ConsumerHealth:
    """What a consumer's stats say about its progress at ``stats_time_ms``.

    ``seconds_since_ack`` is None when it never acked since it connected
    (``lastAckedTimestamp`` 0); ``connected_s`` how long it had been connected (None when
    the stats do not say), since ``connected_since`` (the broker's ``connectedSince``).
    ``reasons`` say why it takes no messages or makes no progress: ``no permits`` (its
    receiver queue is full: the application is not receiving), ``at its unacked limit``,
    ``never acked since it connected``, ``no ack for N s``. ``holds`` hashes are draining
    on it; ``waits_for`` hashes of its ranges are held by others. ``will_drain`` is False
    when what it holds cannot drain by itself: it takes no messages and does not ack, so
    nothing it holds is ever acked."""

    consumer: str
    available_permits: int
    unacked_messages: int
    msg_out_counter: int
    last_acked_timestamp: int
    last_consumed_timestamp: int
    seconds_since_ack: float | None
    connected_s: float | None
    max_unacked_messages: int | None
    taking_messages: bool
    acking: bool
    reasons: tuple[str, ...]
    holds: int
    waits_for: int
    will_drain: bool
    connected_since: str | None = None


@dataclass(frozen=True)
class Wait:
    """``waiting`` (the consumer whose ranges have them; None: no consumer's) gets no
    message of ``hashes``: ``holder`` has ``unacked_msgs`` unacked messages of them, and
    ``blocked_attempts`` dispatches were held so far; with a sample, ``sample_messages``
    of its messages are of these hashes. ``will_drain`` is the holder's."""

    waiting: str | None
    holder: str
    hashes: tuple[int, ...]
    unacked_msgs: int
    blocked_attempts: int
    sample_messages: int | None
    will_drain: bool


@dataclass(frozen=True)
class Verdict:
    """Who waits on whom and why, first: ``lines`` are the plain-text verdict; ``waits``
    per (waiting, holder) pair; ``not_taking`` the consumers taking no messages;
    ``never_draining`` the held hashes that will not drain by themselves; ``msg_in_replay``
    messages wait for redelivery; ``consumers`` each consumer's health. ``ok`` when nothing
    is held and every consumer takes messages."""

    ok: bool
    lines: tuple[str, ...]
    waits: tuple[Wait, ...]
    not_taking: tuple[str, ...]
    never_draining: tuple[int, ...]
    msg_in_replay: int
    stats_time_ms: int
    consumers: tuple[ConsumerHealth, ...]


def consumer_health(
    sub: KeySharedSubscription,
    held: Sequence[HeldHash],
    max_unacked_messages: int | None = None,
) -> tuple[ConsumerHealth, ...]:
    """Each consumer's :class:`ConsumerHealth` from its stats and the held hashes."""
    holds = Counter(h.held_by for h in held)
    waits = Counter(h.owner for h in held)
    return tuple(
        _health(sub, c, holds[c.label], waits[c.label], max_unacked_messages) for c in sub.consumers
    )


def _health(
    sub: KeySharedSubscription, c: ConsumerStats, holds: int, waits_for: int, limit: int | None
) -> ConsumerHealth:
    now = sub.stats_time_ms
    since_ack = None if c.last_acked_timestamp == 0 else max(0, now - c.last_acked_timestamp) / 1e3
    connected_ms = _epoch_ms(c.connected_since)
    connected_s = None if connected_ms is None else max(0, now - connected_ms) / 1e3
    no_permits = c.available_permits <= 0
    at_limit = c.blocked_on_unacked_messages
    reasons: list[str] = []
    if no_permits:
        reasons.append("no permits")
    if at_limit:
        reasons.append(
            "at its unacked limit"
            + ("" if limit is None else f" ({c.unacked_messages} of {limit})")
        )
    acking = True
    if c.unacked_messages > 0 and since_ack is None:
        acking = False
        reasons.append("never acked since it connected")
    elif c.unacked_messages > 0 and since_ack is not None and since_ack >= ACK_QUIET_S:
        acking = False
        reasons.append(f"no ack for {since_ack:.0f} s")
    taking = not (no_permits or at_limit)
    return ConsumerHealth(
        consumer=c.label,
        available_permits=c.available_permits,
        unacked_messages=c.unacked_messages,
        msg_out_counter=c.msg_out_counter,
        last_acked_timestamp=c.last_acked_timestamp,
        last_consumed_timestamp=c.last_consumed_timestamp,
        seconds_since_ack=since_ack,
        connected_s=connected_s,
        max_unacked_messages=limit,
        taking_messages=taking,
        acking=acking,
        reasons=tuple(reasons),
        holds=holds,
        waits_for=waits_for,
        # Held messages are delivered ones: a consumer that neither takes messages nor acks
        # never acks them, so its hashes stay held until it is closed.
        will_drain=holds == 0 or taking or acking,
        connected_since=c.connected_since,
    )


_ISO = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)?$")


def _epoch_ms(text: str | None) -> int | None:
    """Milliseconds since the epoch of the broker's ``connectedSince`` (ISO-8601 with up to
    nanoseconds); None when absent or unreadable."""
    match = _ISO.match(text or "")
    if match is None:
        return None
    whole, fraction, zone = match.groups()
    stamp = datetime.fromisoformat(whole + ("+00:00" if zone in (None, "Z") else zone))
    return int(stamp.timestamp() * 1000) + int(float(fraction or "0") * 1000)


def verdict(
    sub: KeySharedSubscription,
    held: Sequence[HeldHash],
    sample: Mapping[str, int] | None = None,
    max_unacked_messages: int | None = None,
) -> Verdict:
    """Who waits on whom and why (see :class:`Verdict`)."""
    health = consumer_health(sub, held, max_unacked_messages)
    by_label = {h.consumer: h for h in health}
    per_hash = _messages_per_hash(sample) if sample else None
    waits = []
    pairs = sorted({(h.owner or "", h.held_by) for h in held})
    for owner, holder in pairs:
        mine = [h for h in held if (h.owner or "") == owner and h.held_by == holder]
        hashes = tuple(h.hash for h in mine)
        waits.append(
            Wait(
                waiting=owner or None,
                holder=holder,
                hashes=hashes,
                unacked_msgs=sum(h.unack_msgs for h in mine),
                blocked_attempts=sum(h.blocked_attempts for h in mine),
                sample_messages=None if per_hash is None else int(per_hash[list(hashes)].sum()),
                will_drain=by_label[holder].will_drain,
            )
        )
    not_taking = tuple(h.consumer for h in health if not h.taking_messages)
    never = tuple(sorted(h.hash for h in held if not by_label[h.held_by].will_drain))
    lines = _verdict_lines(sub, health, tuple(waits), never)
    return Verdict(
        ok=not held and not not_taking,
        lines=lines,
        waits=tuple(waits),
        not_taking=not_taking,
        never_draining=never,
        msg_in_replay=sub.msg_in_replay,
        stats_time_ms=sub.stats_time_ms,
        consumers=health,
    )


def _messages_per_hash(sample: Mapping[str, int]) -> npt.NDArray[np.float64]:
    """The sample's messages per sticky key hash (exact: counts add up to at most 2**53)."""
    hashes = sticky_key_hashes(list(sample)).astype(np.int64)
    counts = np.fromiter(sample.values(), dtype=np.float64, count=len(sample))
    return np.bincount(hashes, weights=counts, minlength=HASH_MAX + 1).astype(np.float64)


def _verdict_lines(
    sub: KeySharedSubscription,
    health: Sequence[ConsumerHealth],
    waits: Sequence[Wait],
    never: Sequence[int],
) -> tuple[str, ...]:
    lines = [_headline(sub, waits)]
    waiting_on: dict[str, list[str]] = {}
    for w in waits:
        waiting_on.setdefault(w.holder, []).append(shown(w.waiting) if w.waiting else "no one")
    for h in health:
        if not h.taking_messages:
            lines.append(f"{shown(h.consumer)} takes no messages: {_why(h, waiting_on)}")
    stalled: dict[tuple[str, ...], list[ConsumerHealth]] = {}
    for h in health:
        if h.taking_messages and h.holds and not h.acking:
            stalled.setdefault(h.reasons, []).append(h)
    for reasons, group in stalled.items():
        names = ", ".join(shown(h.consumer) for h in group)
        held = sum(h.holds for h in group)
        waiting = sorted({n for h in group for n in waiting_on.get(h.consumer, [])})
        lines.append(
            f"{names}: {', '.join(reasons)} ({_unacked(group)}); hold {held} hash(es)"
            f" {', '.join(waiting)} wait(s) for: they drain only when acked"
        )
    if never:
        lines.append(
            f"{len(never)} held hash(es) will not drain by themselves: close or restart"
            " their holder(s) to release them"
        )
    return tuple(lines)


def _headline(sub: KeySharedSubscription, waits: Sequence[Wait]) -> str:
    replay = f"{sub.msg_in_replay} message(s) in replay"
    if not waits:
        return f"verdict: no hash is held; {replay}"
    by_waiting: dict[str, list[Wait]] = {}
    for w in waits:
        by_waiting.setdefault(shown(w.waiting) if w.waiting else "no consumer", []).append(w)
    parts = []
    for name, mine in by_waiting.items():
        count = sum(len(w.hashes) for w in mine)
        holders = ", ".join(f"{shown(w.holder)} ({len(w.hashes)})" for w in mine)
        sample = [w.sample_messages for w in mine if w.sample_messages is not None]
        held_back = f", {sum(sample)} sample message(s)" if sample else ""
        parts.append(f"{name} waits for {count} hash(es){held_back} held by {holders}")
    return f"verdict: {'; '.join(parts)}; {replay}"


def _why(h: ConsumerHealth, waiting_on: Mapping[str, Sequence[str]]) -> str:
    why = ", ".join(h.reasons)
    facts = f"availablePermits {h.available_permits}, {_unacked([h])}"
    text = f"{why} ({facts})"
    if h.holds:
        waiting = ", ".join(sorted(set(waiting_on.get(h.consumer, []))))
        fate = "will not drain by itself" if not h.will_drain else "drain as it acks"
        text += f"; holds {h.holds} hash(es) {waiting} wait(s) for: {fate}"
    return text


def _unacked(group: Sequence[ConsumerHealth]) -> str:
    return ", ".join(
        f"{h.unacked_messages} unacked of {h.msg_out_counter} delivered" for h in group
    )


def shown(text: str, limit: int = 40) -> str:
    """``text`` safe to print in a table: as it is when every character is printable and
    it neither starts nor ends with a space; else quoted with escapes (Python's repr: a
    tab is ``\\t``, an escape sequence ``\\x1b``), so that client-chosen names and keys
    cannot move the cursor or forge lines. Longer than ``limit`` characters: cut, with
    ``…`` and the length."""
    cut = text[:limit]
    plain = cut.isprintable() and cut == cut.strip() and cut != ""
    body = cut if plain else repr(cut)
    return body if len(text) <= limit else f"{body}…({len(text)} chars)"


# --- watching ------------------------------------------------------------------------------


def changes(before: Explanation, after: Explanation) -> tuple[str, ...]:
    """What changed from one explanation of a subscription to the next, for an operator
    watching it recover: consumers that joined, left or reconnected (a new
    ``connectedSince``: after a broker restart, say), hashes drained and newly held,
    consumers that started or stopped acking or taking messages, and the replay queue."""
    show = shown
    old = {h.consumer: h for h in (before.verdict.consumers if before.verdict else ())}
    new = {h.consumer: h for h in (after.verdict.consumers if after.verdict else ())}
    lines = [f"{show(c)} joined" for c in new if c not in old]
    lines += [f"{show(c)} left" for c in old if c not in new]
    was = {(h.hash, h.held_by) for h in before.held}
    now = {(h.hash, h.held_by) for h in after.held}
    drained, fresh = sorted(was - now), sorted(now - was)
    if drained:
        lines.append(f"{len(drained)} hash(es) drained: {_by_holder(drained)}")
    if fresh:
        lines.append(f"{len(fresh)} hash(es) newly held: {_by_holder(fresh)}")
    for c in [c for c in new if c in old]:
        a, b = old[c], new[c]
        if a.connected_since and b.connected_since and a.connected_since != b.connected_since:
            lines.append(f"{show(c)} reconnected (connected since {show(b.connected_since)})")
        if b.last_acked_timestamp > a.last_acked_timestamp:
            what = "started acking" if a.last_acked_timestamp == 0 else "acked"
            lines.append(f"{show(c)} {what} ({b.unacked_messages} unacked now)")
        if a.taking_messages != b.taking_messages:
            state = "takes messages again" if b.taking_messages else "takes no more messages"
            lines.append(f"{show(c)} {state} (availablePermits {b.available_permits})")
    if before.msg_in_replay != after.msg_in_replay:
        lines.append(f"messages in replay: {before.msg_in_replay} -> {after.msg_in_replay}")
    return tuple(lines)


def _by_holder(pairs: Sequence[tuple[int, str]]) -> str:
    count = Counter(holder for _, holder in pairs)
    return ", ".join(f"{shown(holder)} {n}" for holder, n in sorted(count.items()))


__all__ = [
    "ACK_QUIET_S",
    "DEFAULT_POINTS",
    "DEFAULT_TIMEOUT_S",
    "HASH_COUNT",
    "KEY_SHARED",
    "MAX_COUNT",
    "NO_OWNER",
    "AnswerError",
    "ConsumerHealth",
    "ConsumerShare",
    "ConsumerStats",
    "DrainingHashStats",
    "Explanation",
    "HeldHash",
    "HttpStatusError",
    "KeyAnswer",
    "KeySharedSubscription",
    "Move",
    "MovedKey",
    "StuckConsumer",
    "Verdict",
    "Wait",
    "WhatIf",
    "changes",
    "check_keys",
    "check_sample",
    "check_str",
    "check_timeout",
    "consumer_health",
    "decode_utf8",
    "explain_subscription",
    "fetch_max_unacked",
    "fetch_stats",
    "held_hashes",
    "http_get",
    "key_answers",
    "load_keys",
    "load_stats",
    "partition_count",
    "partition_names",
    "place_message",
    "read_subscription",
    "rebuilt_ring",
    "shares",
    "shown",
    "split_lines",
    "stats_url",
    "stuck_consumers",
    "unique_labels",
    "verdict",
    "what_if",
]
