"""The stats of a Key_Shared subscription, read from Pulsar's topic stats into frozen records.

``pulsar-admin topics stats`` (``GET /admin/v2/persistent/{tenant}/{ns}/{topic}/stats``)
reports the raw facts of a Key_Shared subscription: each consumer's key hash ranges, the
PIP-379 draining hashes it holds, its unacked messages and permits, when it last acked and
consumed, and the messages waiting in replay. :func:`read_subscription` reads them into
:class:`KeySharedSubscription`, whose owner table says which consumer's range holds each
hash.

Hashes are the consistent-hashing selector's sticky key hashes, in ``[1, 65535]``
(:func:`keyshared.routing.hashing.sticky_key_hash`). The stats of Pulsar 4.0 and 4.2 have the
same fields; those from before PIP-379 (3.x) have no draining fields, which then read as
none. The stats are those of one topic: a partitioned topic's aggregated stats mix its
partitions' consumers (their ranges overlap, which is refused), so explain one partition
(``name-partition-0``).

Names and keys come from clients: :func:`shown` escapes and shortens them for printing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from keyshared._checks import check_bool, check_int, check_mapping
from keyshared._jsonfile import load_json
from keyshared.errors import ArgumentTypeError, InvalidArgument

#: The sticky key hashes a consistent-hashing selector serves: ``[HASH_MIN, HASH_MAX]``.
HASH_MIN, HASH_MAX = 1, 65535
HASH_COUNT = HASH_MAX - HASH_MIN + 1
#: Owner index of a hash no consumer's range contains.
NO_OWNER = -1

KEY_SHARED = "Key_Shared"


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
        return self._consumer(label, "label")

    def _consumer(self, label: str, name: str) -> ConsumerStats:
        """:meth:`consumer`, its error naming the caller's argument ``name``."""
        for c in self.consumers:
            if c.label == label:
                return c
        known = ", ".join(repr(c.label) for c in self.consumers) or "none"
        raise InvalidArgument(
            f"no consumer {label!r} in subscription {self.name!r} (consumers: {known})",
            argument=name,
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
            f"{_join(path, 'subscriptions')} has no {subscription!r} (it has {known})",
            argument=_join(path, "subscriptions"),
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
        ranges=_read_ranges(f"{path}.keyHashRangeArrays", _ranges_of(data, path)),
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


def _ranges_of(data: Mapping[str, Any], path: str) -> Any:
    """A consumer's ``keyHashRangeArrays``: Pulsar 3.x's stats lack them, which says so."""
    if data.get("keyHashRangeArrays") is None:
        missing = _join(path, "keyHashRangeArrays")
        raise InvalidArgument(
            f"{missing} is missing: Pulsar 4.0 or later reports each consumer's hash ranges"
            " (3.x's stats lack them); keyshared explain needs stats from 4.0+",
            kind="missing_field",
            argument=missing,
        )
    return data["keyHashRangeArrays"]


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
        raise ArgumentTypeError(
            f"{_join(path, name)} must be a str, got {type(value).__name__}",
            argument=_join(path, name),
        )
    return value


def _optional_str(data: Mapping[str, Any], path: str, name: str) -> str | None:
    return None if data.get(name) is None else _str(data, path, name)


def _list(path: str, data: object) -> list[Any]:
    if not isinstance(data, list):
        raise ArgumentTypeError(f"{path} must be a list, got {type(data).__name__}", argument=path)
    return data


def load_stats(source: str | Path) -> Any:
    """The topic stats JSON of a file, or of standard input for ``"-"``; a ValueError naming
    the source when it cannot be decoded or is not JSON, or when standard input is closed."""
    return load_json(source)


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


__all__ = [
    "HASH_COUNT",
    "KEY_SHARED",
    "NO_OWNER",
    "ConsumerStats",
    "DrainingHashStats",
    "KeySharedSubscription",
    "load_stats",
    "read_subscription",
    "shown",
    "unique_labels",
]
