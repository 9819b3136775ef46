"""Explaining a live Key_Shared subscription from Pulsar's topic stats.

``pulsar-admin topics stats`` (``GET /admin/v2/persistent/{tenant}/{ns}/{topic}/stats``)
reports the raw facts of a Key_Shared subscription: each consumer's key hash ranges, the
PIP-379 draining hashes it holds, its unacked messages and permits. This module reads them
into frozen records and turns them into answers: who owns a key, what share of the hash
space and of a key sample each consumer gets, which hashes are held and which keys they
block, which consumers cannot take messages, and what moves if a consumer joins or leaves.

The broker's ranges are the truth: a hash goes to the consumer whose range contains it.
keyshared's :class:`~keyshared.rings.ConsistentHashingStickyKeyConsumerSelector` is used only
for the what-if of a join or a leave, rebuilt from the consumers' names in the order the
stats list them (their join order), and the answer says whether that ring reproduces the
broker's ranges.

Hashes are the consistent-hashing selector's sticky key hashes, in ``[1, 65535]``
(:func:`keyshared.hashing.sticky_key_hash`); shares are fractions of those 65535 hashes or
of a sample's messages. The stats of Pulsar 4.0 and 4.2 have the same fields; those from
before PIP-379 (3.x) have no draining fields, which then read as none. The stats are those
of one topic: a partitioned topic's aggregated stats mix its partitions' consumers (their
ranges overlap, which is refused), so explain one partition (``name-partition-0``).
"""

from __future__ import annotations

import csv
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from keyshared._checks import check_bool, check_int, check_mapping
from keyshared.hashing import sticky_key_hash, sticky_key_hashes
from keyshared.rings import ConsistentHashingStickyKeyConsumerSelector
from keyshared.topic_name import TopicDomain, TopicName

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
    ``label`` is the name, or ``name#index`` (index in the stats' list) when several
    consumers share the name."""

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

    @property
    def hash_count(self) -> int:
        """How many sticky key hashes of ``[HASH_MIN, HASH_MAX]`` the ranges hold."""
        return sum(max(0, min(e, HASH_MAX) - max(s, HASH_MIN) + 1) for s, e in self.ranges)


@dataclass(frozen=True)
class KeySharedSubscription:
    """A Key_Shared subscription of a topic's stats (``SubscriptionStatsImpl``), consumers in
    the stats' order, which is their join order.

    Invariant: no two consumers' ranges overlap, so every hash has at most one owner."""

    name: str
    key_shared_mode: str | None
    msg_backlog: int
    unacked_messages: int
    draining_hashes_count: int
    draining_hashes_unacked_messages: int
    consumers: tuple[ConsumerStats, ...]
    path: str = field(default="", compare=False)

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
        raise ValueError(
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


def read_subscription(stats: object, subscription: str, path: str = "") -> KeySharedSubscription:
    """The Key_Shared ``subscription`` of a topic's stats (the admin API's JSON, parsed).

    Unknown fields are ignored; a missing or mistyped field is an error naming its path,
    such as ``subscriptions['sub'].consumers[2].keyHashRangeArrays is missing``; so is a
    subscription that is absent or not Key_Shared, and ranges of two consumers that
    overlap."""
    subs = check_mapping(_join(path, "subscriptions"), _required(stats, path, "subscriptions"))
    if subscription not in subs:
        known = ", ".join(repr(s) for s in subs) or "none"
        raise ValueError(f"{_join(path, 'subscriptions')} has no {subscription!r} (it has {known})")
    where = f"{_join(path, 'subscriptions')}[{subscription!r}]"
    data = check_mapping(where, subs[subscription])
    kind = _required(data, where, "type")
    if kind != KEY_SHARED:
        raise ValueError(
            f"{where}.type is {kind!r}: subscription {subscription!r} is not {KEY_SHARED}"
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
    )
    _ = sub.owners  # overlapping ranges are refused here, not at the first question
    return sub


def _read_consumers(path: str, data: object) -> tuple[ConsumerStats, ...]:
    data = _list(path, data)
    names = [
        _str(check_mapping(f"{path}[{i}]", c), f"{path}[{i}]", "consumerName")
        for i, c in enumerate(data)
    ]
    return tuple(
        _read_consumer(f"{path}[{i}]", c, i, name if names.count(name) == 1 else f"{name}#{i}")
        for i, (c, name) in enumerate(zip(data, names, strict=True))
    )


def _read_consumer(path: str, data: Mapping[str, Any], index: int, label: str) -> ConsumerStats:
    draining = data.get("drainingHashes") or []
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
    )


def _read_ranges(path: str, data: object) -> tuple[tuple[int, int], ...]:
    out = []
    for i, pair in enumerate(_list(path, data)):
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError(f"{path}[{i}] must be a [start, end] pair, got {pair!r}")
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
                raise ValueError(
                    f"{path}.consumers[{c.index}].keyHashRangeArrays: [{start}, {end}] overlaps"
                    f" a range of consumers[{other.index}] ({other.label})"
                )
            owners[start : end + 1] = c.index
    return owners


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _required(data: object, path: str, name: str) -> Any:
    mapping = check_mapping(path or "stats", data)
    if name not in mapping or mapping[name] is None:
        raise ValueError(f"{_join(path, name)} is missing")
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
        raise TypeError(f"{_join(path, name)} must be a str, got {type(value).__name__}")
    return value


def _optional_str(data: Mapping[str, Any], path: str, name: str) -> str | None:
    return None if data.get(name) is None else _str(data, path, name)


def _list(path: str, data: object) -> list[Any]:
    if not isinstance(data, list):
        raise TypeError(f"{path} must be a list, got {type(data).__name__}")
    return data


# --- where the stats come from -------------------------------------------------------------


def load_stats(source: str | Path) -> Any:
    """The topic stats JSON of a file, or of standard input for ``"-"``."""
    name = "stdin" if source == "-" else str(source)
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8-sig")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{name}: not JSON ({e})") from None


def stats_url(url: str, topic: str) -> str:
    """The admin REST address of a topic's stats on the broker at ``url``
    (``http://host:8080``); ``topic`` as Pulsar reads it (a bare name is in public/default)."""
    name = TopicName.get(topic)
    if name.domain not in (TopicDomain.persistent, TopicDomain.non_persistent):
        raise ValueError(f"--topic {topic!r} is not a persistent or non-persistent topic")
    return (
        f"{url.rstrip('/')}/admin/v2/{name.domain.value}/{name.namespace}/{name.local_name}/stats"
    )


def fetch_stats(url: str, topic: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    """The topic stats from the admin REST endpoint of the broker at ``url``; an OSError
    naming the address when the broker does not answer within ``timeout_s`` or refuses."""
    address = stats_url(url, topic)
    try:
        with urllib.request.urlopen(address, timeout=timeout_s) as answer:
            text = answer.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        raise OSError(f"{address}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, TimeoutError) as e:
        raise OSError(f"{address}: {getattr(e, 'reason', e)}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{address}: not JSON ({e})") from None


def load_keys(path: str | Path) -> dict[str, int]:
    """A key sample with message counts: a ``.csv`` file of ``key[,count]`` rows (a first row
    whose count is not a number is a header), else one key per line, each counting once.
    A key listed twice adds up."""
    text = Path(path).read_text(encoding="utf-8-sig")
    sample: dict[str, int] = {}
    if str(path).endswith(".csv"):
        for line, row in enumerate(csv.reader(text.splitlines()), start=1):
            if not row:
                continue
            count = row[1].strip() if len(row) > 1 else "1"
            if not count.lstrip("-").isdigit():
                if line == 1:
                    continue
                raise ValueError(f"{path}:{line}: count {count!r} is not an integer")
            sample[row[0]] = sample.get(row[0], 0) + check_int(
                f"{path}:{line} count", int(count), minimum=0
            )
    else:
        for key in text.splitlines():
            sample[key] = sample.get(key, 0) + 1
    return sample


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
    while held, its new messages wait for ``held_by``'s acks instead of reaching ``owner``."""

    key: str
    hash: int
    owner: str | None
    held_by: str | None


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
    """The sticky hash, owner and holder of each key."""
    out = []
    for key in keys:
        h = sticky_key_hash(key)
        owner, holder = sub.owner_of(h), sub.holder_of(h)
        out.append(
            KeyAnswer(
                key,
                h,
                None if owner is None else owner.label,
                None if holder is None else holder.label,
            )
        )
    return tuple(out)


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
        raise ValueError("give exactly one of join and leave")
    selector = rebuilt_ring(sub, points)
    before = _ring_owners(selector)
    if join is not None:
        if not join:
            raise ValueError("join must be a non-empty consumer name")
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
    label = f"{name}#{index}" if any(c.name == name for c in sub.consumers) else name
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
) -> Explanation:
    """Every answer about ``sub``: shares (of traffic too with a ``sample``, key ->
    messages), the owner of each of ``keys``, the held hashes with the sample keys and
    ``keys`` they block, the stuck consumers, and the what-if of a ``join`` or ``leave``."""
    return Explanation(
        subscription=sub.name,
        key_shared_mode=sub.key_shared_mode,
        msg_backlog=sub.msg_backlog,
        unacked_messages=sub.unacked_messages,
        draining_hashes_count=sub.draining_hashes_count,
        draining_hashes_unacked_messages=sub.draining_hashes_unacked_messages,
        shares=shares(sub, sample),
        sample_messages=sum(sample.values()) if sample else None,
        keys=key_answers(sub, keys),
        held=held_hashes(sub, dict.fromkeys([*(sample or {}), *keys])),
        stuck=stuck_consumers(sub),
        what_if=(
            None
            if join is None and leave is None
            else what_if(sub, join=join, leave=leave, points=points, sample=sample)
        ),
    )
