"""Every answer about a Key_Shared subscription at once (:func:`explain_subscription`): the
verdict first, then shares, keys, held hashes, the consumers taking no messages and a
what-if, in one :class:`Explanation` with a JSON form."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from keyshared._checks import check_optional_int
from keyshared.explain.answers import (
    DEFAULT_POINTS,
    ConsumerShare,
    HeldHash,
    KeyAnswer,
    StuckConsumer,
    WhatIf,
    held_hashes,
    key_answers,
    shares,
    stuck_consumers,
    what_if,
)
from keyshared.explain.keys import check_key_encoding, check_keys, check_sample
from keyshared.explain.stats import KeySharedSubscription
from keyshared.explain.verdicts import Verdict, verdict


@dataclass(frozen=True)
class Explanation:
    """Every answer about one subscription; ``to_dict`` is its JSON form. Keys are named
    as written, in ``key_encoding`` (``utf-8``, or a binary key's bytes in hex or base64)."""

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
    key_encoding: str = "utf-8"

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)  # type: ignore[no-any-return]


def _plain(value: object) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def explain_subscription(
    sub: KeySharedSubscription,
    *,
    sample: Mapping[str, int] | None = None,
    keys: Sequence[str] = (),
    join: str | None = None,
    leave: str | None = None,
    points: int = DEFAULT_POINTS,
    max_unacked_messages: int | None = None,
    key_encoding: str = "utf-8",
) -> Explanation:
    """Every answer about ``sub``: the verdict, shares (of traffic too with a ``sample``,
    key -> messages), the owner of each of ``keys``, the held hashes with the sample keys
    and ``keys`` they block, the stuck consumers, and the what-if of a ``join`` or
    ``leave``. ``max_unacked_messages`` is the consumers' unacked limit
    (``maxUnackedMessagesPerConsumer``) when known; the stats say only whether a consumer
    reached it. The keys of ``sample`` and ``keys`` are written in ``key_encoding``:
    ``utf-8`` (hashed as their UTF-8 bytes), or a binary key's bytes in ``hex`` or
    ``base64``; the answers name them as written. Every argument is checked before
    anything is computed."""
    encoding = check_key_encoding(key_encoding)
    checked = check_sample(sample, encoding)
    asked = check_keys(keys, encoding)
    limit = check_optional_int("max_unacked_messages", max_unacked_messages, minimum=0)
    held = held_hashes(sub, dict.fromkeys([*(checked or {}), *asked]), key_encoding=encoding)
    return Explanation(
        subscription=sub.name,
        key_shared_mode=sub.key_shared_mode,
        msg_backlog=sub.msg_backlog,
        unacked_messages=sub.unacked_messages,
        draining_hashes_count=sub.draining_hashes_count,
        draining_hashes_unacked_messages=sub.draining_hashes_unacked_messages,
        shares=shares(sub, checked, key_encoding=encoding),
        sample_messages=sum(checked.values()) if checked else None,
        keys=key_answers(sub, asked, key_encoding=encoding),
        held=held,
        stuck=stuck_consumers(sub),
        what_if=(
            None
            if join is None and leave is None
            else what_if(
                sub,
                join=join,
                leave=leave,
                points=points,
                sample=checked,
                key_encoding=encoding,
            )
        ),
        verdict=verdict(sub, held, checked, limit, key_encoding=encoding),
        msg_in_replay=sub.msg_in_replay,
        key_encoding=encoding,
    )


__all__ = [
    "Explanation",
    "explain_subscription",
]
