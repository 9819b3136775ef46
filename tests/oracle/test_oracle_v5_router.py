"""keyshared's segment router against Pulsar 5.0.0-M1's V5 client's own ``SegmentRouter``
(pulsar-client-v5, package-private, run by the oracle), under the release's profile.

Hypothesis draws the active segments (random tilings of the 16-bit ring with random ids, now
and then a legacy layout whose segments wrap the partitions of a v4 topic) and keys, and
both routers route every key: the same segment id, or both refuse. M1 routes a key by the
low half of its 32-bit hash, master (keyshared's default) by the high half: the default's
answer is checked to be master's rule, and each key it sends elsewhere is counted as a
difference kept on purpose.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from support.pulsar_oracle import MILESTONE, Oracle, record, record_kept

import keyshared as ks

M1_ROUTER = ks.SegmentRouter(pulsar_version=MILESTONE)
MASTER_ROUTER = ks.SegmentRouter()
AREA = f"{MILESTONE} V5 SegmentRouter"
# Java turns a lone surrogate into '?' where Python refuses to encode it: keys are whole text.
KEYS = st.text(st.characters(exclude_categories=("Cs",)), max_size=24)


@st.composite
def tilings(draw: st.DrawFn) -> list[ks.routing.ActiveSegment]:
    """Active segments tiling the ring, in range order, with distinct random ids; a third
    of them legacy segments (the synthetic layout of a partitioned v4 topic), whose ids are
    usually the partitions 0..N-1."""
    cuts = draw(st.lists(st.integers(1, 0xFFFF), unique=True, max_size=7))
    bounds = [0, *sorted(cuts), 0x10000]
    n = len(bounds) - 1
    legacy = draw(st.integers(0, 2)) == 0
    if legacy and draw(st.integers(0, 4)) > 0:
        ids = draw(st.permutations(range(n)))
    else:
        ids = draw(st.lists(st.integers(0, 40), unique=True, min_size=n, max_size=n))
    return [
        ks.routing.ActiveSegment(
            segment_id=sid,
            hash_range=ks.HashRange(bounds[i], bounds[i + 1] - 1),
            segment_topic_name=f"segment://t/ns/x/{bounds[i]:04x}-{bounds[i + 1] - 1:04x}-{sid}",
            legacy_topic_name=f"persistent://t/ns/x-partition-{sid}" if legacy else None,
        )
        for i, sid in enumerate(ids)
    ]


def routed(router: ks.SegmentRouter, key: str, segments: list[ks.routing.ActiveSegment]) -> Any:
    """The segment id, or None where keyshared refuses."""
    try:
        return router.route(key, segments)
    except ValueError:
        return None


def as_java(segments: list[ks.routing.ActiveSegment]) -> list[list[Any]]:
    return [
        [s.segment_id, s.hash_range.start, s.hash_range.end, s.legacy_topic_name] for s in segments
    ]


@settings(max_examples=40)
@given(st.lists(st.tuples(tilings(), st.lists(KEYS, min_size=1, max_size=40)), min_size=1))
def test_segment_router(
    oracle_milestone: Oracle, cases: list[tuple[list[ks.routing.ActiveSegment], list[str]]]
) -> None:
    requests = [[key, as_java(segments)] for segments, keys in cases for key in keys]
    answers = oracle_milestone.call("v5.segment_router", cases=requests)
    elsewhere = 0
    for (key, _), answer, segments in zip(
        requests, answers, [s for s, keys in cases for _ in keys], strict=True
    ):
        ours = routed(M1_ROUTER, key, segments)
        assert (answer["value"] if answer["ok"] else None) == ours, (key, segments, answer)
        master = routed(MASTER_ROUTER, key, segments)
        if all(s.is_legacy for s in segments):
            # Legacy layouts route by makeHash mod N on both.
            assert master == ours
        else:
            high = ks.key_hash(key) >> 16
            assert master == next(s.segment_id for s in segments if s.hash_range.contains(high))
            elsewhere += master != ours
    record(AREA, len(requests))
    record_kept(AREA, "master routes a key by the high half of its hash, M1 by the low", elsewhere)


def test_known_keys(oracle_milestone: Oracle) -> None:
    """The issue's finding: a key whose low and high halves fall in different segments."""
    halves = [
        ks.routing.ActiveSegment(0, ks.HashRange(0, 0x7FFF), "segment://t/ns/x/0000-7fff-0"),
        ks.routing.ActiveSegment(1, ks.HashRange(0x8000, 0xFFFF), "segment://t/ns/x/8000-ffff-1"),
    ]
    # key_hash("hello") == 0x248BFA47: the high half 0x248B, the low half 0xFA47.
    [answer] = oracle_milestone.call("v5.segment_router", cases=[["hello", as_java(halves)]])
    assert answer == {"ok": True, "value": 1}
    assert M1_ROUTER.route("hello", halves) == 1
    assert MASTER_ROUTER.route("hello", halves) == 0
    record(AREA, 1)
    record_kept(AREA, "master routes a key by the high half of its hash, M1 by the low")
