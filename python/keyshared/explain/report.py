"""``keyshared explain``'s text: a Key_Shared subscription's explanation (the verdict, then
consumers, ranges, keys, held hashes, stuck consumers and a what-if) and a scalable topic's
(the DAG and where keys go), as tables for a terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

import keyshared.explain.scalable_topic as explain_scalable
from keyshared._text import percent as _percent
from keyshared._text import table as _table
from keyshared.explain.answers import HeldHash, WhatIf
from keyshared.explain.explanation import Explanation
from keyshared.explain.stats import shown
from keyshared.explain.verdicts import ConsumerHealth


def print_scalable(e: explain_scalable.ScalableExplanation, out: TextIO) -> None:
    out.write("".join(f"{line}\n" for line in e.lines))
    out.write("\nsegments (the DAG)\n")
    _table(
        (
            "id",
            "range",
            "state",
            "parents",
            "children",
            "epochs",
            "backlog",
            "waits for",
            "read by",
        ),
        [
            (
                s.segment_id,
                s.hash_range,
                s.state + (" (legacy)" if s.legacy_topic_name else ""),
                _ids(s.parent_ids),
                _ids(s.child_ids),
                f"{s.created_at_epoch}-{'' if s.sealed_at_epoch < 0 else s.sealed_at_epoch}",
                "-" if s.backlog is None else s.backlog,
                _ids(s.waiting_for),
                " ".join(shown(c) for c in s.consumers) or "-",
            )
            for s in e.segments
        ],
        out,
    )
    if e.keys:
        out.write(f"\nkeys (routed as {e.pulsar_version} producers do)\n")
        _table(
            (_key_header("key", e.key_encoding), "routing hash", "segment", "read by", "waits for"),
            [
                (
                    shown(k.key),
                    f"{k.routing_hash:04x}",
                    k.segment_id,
                    " ".join(shown(c) for c in k.consumers) or "-",
                    _ids(k.waits_for),
                )
                for k in e.keys
            ],
            out,
        )


def _key_header(header: str, key_encoding: str) -> str:
    """A column of keys as written: ``key (hex)`` where they are a binary key's bytes."""
    return header if key_encoding == "utf-8" else f"{header} ({key_encoding})"


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids) or "-"


def print_explanation(e: Explanation, all_ranges: bool, out: TextIO) -> None:
    if e.verdict is not None:
        out.write("".join(f"{line}\n" for line in e.verdict.lines))
    out.write(
        f"\nsubscription {shown(e.subscription)} (Key_Shared,"
        f" {shown(e.key_shared_mode or 'mode unknown')}): {len(e.shares)} consumer(s),"
        f" backlog {e.msg_backlog}, {e.unacked_messages} unacked, {e.msg_in_replay} in replay,"
        f" {e.draining_hashes_count} draining hash(es) holding"
        f" {e.draining_hashes_unacked_messages} unacked message(s)\n\n"
    )
    _print_consumers(e, out)
    if all_ranges:
        out.write("\nranges (inclusive)\n")
        for s in e.shares:
            out.write(
                f"  {shown(s.consumer)}: {' '.join(f'[{a}, {b}]' for a, b in s.ranges) or '-'}\n"
            )
    if e.keys:
        _print_keys(e, out)
    _print_held(e.held, e.key_encoding, out)
    if e.stuck:
        out.write("\nconsumers taking no messages\n")
        for c in e.stuck:
            out.write(
                f"  {shown(c.consumer)}: {', '.join(c.reasons)} (availablePermits"
                f" {c.available_permits}, {c.unacked_messages} unacked)\n"
            )
    if e.what_if is not None:
        _print_what_if(e.what_if, out)


def _largest(ranges: Sequence[tuple[int, int]]) -> str:
    if not ranges:
        return "-"
    start, end = max(ranges, key=lambda r: (r[1] - r[0], -r[0]))
    return f"[{start}, {end}]"


def _last_ack(h: ConsumerHealth) -> str:
    return "never" if h.seconds_since_ack is None else f"{h.seconds_since_ack:.0f} s ago"


def _print_consumers(e: Explanation, out: TextIO) -> None:
    health = {h.consumer: h for h in (e.verdict.consumers if e.verdict else ())}
    rows = []
    for s in e.shares:
        h = health.get(s.consumer)
        rows.append(
            (
                shown(s.consumer),
                s.hashes,
                _percent(s.hash_share),
                len(s.ranges),
                _largest(s.ranges),
                "-" if h is None else h.available_permits,
                "-" if h is None else h.unacked_messages,
                "-" if h is None else h.msg_out_counter,
                "-" if h is None else _last_ack(h),
                "-" if h is None else h.holds,
                "-" if h is None else h.waits_for,
                "-" if s.messages is None else s.messages,
                _percent(s.traffic_share),
            )
        )
    _table(
        (
            "consumer",
            "hashes",
            "hash share",
            "ranges",
            "largest range",
            "permits",
            "unacked",
            "delivered",
            "last ack",
            "holds",
            "waits for",
            "sample msgs",
            "traffic share",
        ),
        rows,
        out,
    )


def _print_keys(e: Explanation, out: TextIO) -> None:
    out.write("\nkeys\n")
    _table(
        (_key_header("key", e.key_encoding), "hash", "owner", "held by"),
        [
            (
                shown(k.key),
                k.hash,
                shown(k.owner or "-"),
                shown(k.held_by or "-"),
            )
            for k in e.keys
        ],
        out,
    )
    if any(k.keyless for k in e.keys):
        out.write(
            "  '' (no key): a message without key or ordering key has the sticky key"
            " producerName-sequenceId (Pulsar 4.0+), so keyless messages spread over every"
            " consumer by hash share (the table above); the row for '' is a key set to the"
            ' empty string (the Java client\'s key(""); the Python and C++ clients send an'
            " empty key as none). Place one message with --keyless PRODUCER SEQUENCE_ID.\n"
        )


def _print_held(held: Sequence[HeldHash], key_encoding: str, out: TextIO) -> None:
    if not held:
        out.write("\nno draining hashes: nothing is held\n")
        return
    out.write(
        f"\n{len(held)} draining hash(es): new messages of each wait until its holder acks"
        " the unacked ones\n"
    )
    _table(
        (
            "hash",
            "held by",
            "waiting consumer",
            "unacked",
            "blocked attempts",
            _key_header("sample keys", key_encoding),
        ),
        [
            (
                h.hash,
                shown(h.held_by),
                shown(h.owner or "-"),
                h.unack_msgs,
                h.blocked_attempts,
                " ".join(shown(k) for k in h.keys) or "-",
            )
            for h in held
        ],
        out,
    )


def _print_what_if(w: WhatIf, out: TextIO) -> None:
    out.write(f"\nif {shown(w.consumer)} {w.change}s (ring of {w.points} points per consumer")
    if w.ring_matches:
        out.write(" rebuilt from the names: it reproduces the broker's ranges)\n")
    else:
        out.write(
            " rebuilt from the names: it does NOT reproduce the broker's ranges, so this is"
            f" what keyshared's ring would do, not necessarily the broker; {w.mismatch})\n"
        )
    out.write(f"  {len(w.moves)} range(s) move, {w.moved_share:.1%} of the hashes\n")
    _table(
        ("start", "end", "from", "to"),
        [(m.start, m.end, shown(m.source or "-"), shown(m.target or "-")) for m in w.moves],
        out,
    )
    if w.moved_traffic_share is not None:
        out.write(
            f"  {len(w.moved_keys)} sample key(s) move,"
            f" {w.moved_traffic_share:.1%} of the sample's messages\n"
        )
    out.write("  after:\n")
    _table(
        ("consumer", "ranges", "hash share", "traffic share"),
        [
            (shown(s.consumer), len(s.ranges), _percent(s.hash_share), _percent(s.traffic_share))
            for s in w.shares_after
        ],
        out,
    )


__all__ = [
    "print_explanation",
    "print_scalable",
]
