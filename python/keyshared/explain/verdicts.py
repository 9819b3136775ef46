"""The verdict on a Key_Shared subscription, first of its answers: who waits on whom and why,
which consumers take no messages and why, and which held hashes will not drain by themselves,
from each consumer's health at the time of the stats (:func:`consumer_health`)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from keyshared.explain.answers import HeldHash
from keyshared.explain.keys import hashed_keys
from keyshared.explain.stats import HASH_MAX, ConsumerStats, KeySharedSubscription, shown
from keyshared.routing.hashing import sticky_key_hashes

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
    *,
    key_encoding: str = "utf-8",
) -> Verdict:
    """Who waits on whom and why (see :class:`Verdict`); ``sample``'s keys are written in
    ``key_encoding``."""
    health = consumer_health(sub, held, max_unacked_messages)
    by_label = {h.consumer: h for h in health}
    per_hash = _messages_per_hash(sample, key_encoding) if sample else None
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


def _messages_per_hash(sample: Mapping[str, int], key_encoding: str) -> npt.NDArray[np.float64]:
    """The sample's messages per sticky key hash (exact: counts add up to at most 2**53)."""
    hashes = sticky_key_hashes(hashed_keys(sample, key_encoding)).astype(np.int64)
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


__all__ = [
    "ACK_QUIET_S",
    "ConsumerHealth",
    "Verdict",
    "Wait",
    "consumer_health",
    "verdict",
]
