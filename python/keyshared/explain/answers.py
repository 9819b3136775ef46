"""Answers about a Key_Shared subscription's stats: who owns a key (a message's sticky key
resolved as the broker does: :func:`keyshared.routing.hashing.resolve_sticky_key`), what share
of the hash space and of a key sample each consumer gets, which hashes are held and which
keys they block, which consumers take no messages, and what moves if a consumer joins or
leaves.

The broker's ranges are the truth: a hash goes to the consumer whose range contains it.
keyshared's :class:`~keyshared.dispatch.ConsistentHashingStickyKeyConsumerSelector` is used only
for the what-if of a join or a leave, rebuilt from the consumers' names in the order the
stats list them (their join order), and the answer says whether that ring reproduces the
broker's ranges. Shares are fractions of the 65535 hashes or of a sample's messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from keyshared._checks import check_int
from keyshared._core import ConsistentHashingStickyKeyConsumerSelector
from keyshared.errors import InvalidArgument
from keyshared.explain.keys import check_keys, check_sample, hashed_key, hashed_keys
from keyshared.explain.stats import (
    HASH_COUNT,
    HASH_MAX,
    HASH_MIN,
    NO_OWNER,
    ConsumerStats,
    KeySharedSubscription,
    _fresh_label,
)
from keyshared.routing.hashing import resolve_sticky_key, sticky_key_hash, sticky_key_hashes

#: The broker's ``subscriptionKeySharedConsistentHashingReplicaPoints`` default.
DEFAULT_POINTS = 100


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


def shares(
    sub: KeySharedSubscription,
    sample: Mapping[str, int] | None = None,
    owners: npt.NDArray[np.int32] | None = None,
    *,
    key_encoding: str = "utf-8",
) -> tuple[ConsumerShare, ...]:
    """Each consumer's ranges and share of the hash space, and with a ``sample`` (key ->
    messages, keys written in ``key_encoding``) of its messages, under ``owners`` (the
    broker's by default)."""
    sample = check_sample(sample, key_encoding)
    table = sub.owners if owners is None else owners
    counts = np.bincount(
        table[HASH_MIN:][table[HASH_MIN:] != NO_OWNER], minlength=len(sub.consumers)
    )
    traffic = _traffic(table, sample, len(sub.consumers), key_encoding) if sample else None
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
    owners: npt.NDArray[np.int32], sample: Mapping[str, int], n: int, key_encoding: str
) -> npt.NDArray[np.int64]:
    """Messages per consumer index; those of hashes without a consumer are left out."""
    who = owners[sticky_key_hashes(hashed_keys(sample, key_encoding)).astype(np.int64)]
    weights = np.fromiter(sample.values(), dtype=np.int64, count=len(sample))
    owned = who != NO_OWNER
    return np.bincount(who[owned], weights=weights[owned], minlength=n).astype(np.int64)


def _ranges_of(owners: npt.NDArray[np.int32], index: int) -> tuple[tuple[int, int], ...]:
    """The maximal runs of ``index`` in ``owners``, as inclusive ranges."""
    mine = np.concatenate(([False], owners == index, [False]))
    edges = np.flatnonzero(mine[1:] != mine[:-1])
    return tuple((int(s), int(e) - 1) for s, e in zip(edges[::2], edges[1::2], strict=True))


def key_answers(
    sub: KeySharedSubscription, keys: Iterable[str], *, key_encoding: str = "utf-8"
) -> tuple[KeyAnswer, ...]:
    """The sticky hash, owner and holder of each key, written in ``key_encoding`` (``""``:
    see ``KeyAnswer.keyless``); each answer names its key as written."""
    asked = check_keys(keys, key_encoding)
    return tuple(
        _answer(sub, key, sticky_key_hash(hashed_key(key, key_encoding)), key == "")
        for key in asked
    )


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


def held_hashes(
    sub: KeySharedSubscription, sample: Iterable[str] = (), *, key_encoding: str = "utf-8"
) -> tuple[HeldHash, ...]:
    """The draining hashes, by hash: who holds each, who waits for it, and its sample keys
    (written in ``key_encoding``, and named as written)."""
    keys = list(sample)
    by_hash: dict[int, list[str]] = {}
    for key, hashed in zip(keys, hashed_keys(keys, key_encoding), strict=True):
        by_hash.setdefault(sticky_key_hash(hashed), []).append(key)
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
    key_encoding: str = "utf-8",
) -> WhatIf:
    """What moves if a consumer named ``join`` joins, or the consumer ``leave`` (a label)
    leaves: hash ranges, sample keys (written in ``key_encoding``) and traffic share, on
    the rebuilt ring."""
    if (join is None) == (leave is None):
        raise InvalidArgument("give exactly one of join and leave", argument=None)
    sample = check_sample(sample, key_encoding)
    selector = rebuilt_ring(sub, points)
    before = _ring_owners(selector)
    if join is not None:
        if not join:
            raise InvalidArgument("join must be a non-empty consumer name", argument="join")
        joined = _with_consumer(sub, join)
        selector.add_consumer(len(sub.consumers), join)
        after_sub, name = joined, joined.consumers[-1].label
    else:
        gone = sub._consumer(leave or "", "leave")
        selector.remove_consumer(gone.index)
        after_sub, name = sub, gone.label
    after = _ring_owners(selector)
    labels = [c.label for c in after_sub.consumers]
    moved = before != after
    keys = list(sample or {})
    moved_keys = tuple(
        MovedKey(k, h, _label(labels, before[h]), _label(labels, after[h]))
        for k, hashed in zip(keys, hashed_keys(keys, key_encoding), strict=True)
        if moved[h := sticky_key_hash(hashed)]
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
            s
            for s in shares(after_sub, sample, after, key_encoding=key_encoding)
            if leave is None or s.consumer != name
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


__all__ = [
    "DEFAULT_POINTS",
    "ConsumerShare",
    "HeldHash",
    "KeyAnswer",
    "Move",
    "MovedKey",
    "StuckConsumer",
    "WhatIf",
    "held_hashes",
    "key_answers",
    "place_message",
    "rebuilt_ring",
    "shares",
    "stuck_consumers",
    "what_if",
]
