"""Watching a Key_Shared subscription recover: what changed from one explanation of it to the
next (:func:`changes`), as ``keyshared explain --watch`` prints it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from keyshared.explain.explanation import Explanation
from keyshared.explain.stats import shown


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
    "changes",
]
