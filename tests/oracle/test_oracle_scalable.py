"""keyshared's scalable-topic kernels against Pulsar 5.0.0-M1's own classes (PIP-483).

5.0.0-M1 is the one served release with the scalable-topic classes: the auto-scale evaluator
and its config, ``SegmentLayout``, the controller's initial layouts, the subscription
coordinator's assignment, ``HashRange``, segment topic names and the load reporter. It has no
``EntryBucketSplits`` nor entry-bucket selector (PIP-486 came after it), so its segments have
no buckets and its evaluator never rebuckets. Hypothesis drives keyshared and the oracle with
the same random layouts (built by random splits, merges and prunes), load samples, policies,
hashes and names, many cases to one oracle request, and compares every answer.

keyshared follows Pulsar's master branch, which M1 predates. Where M1 answers otherwise, the
test names M1's behaviour and asserts exactly that difference (counted apart, under "kept on
purpose"), instead of leaving the case out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from support.pulsar_oracle import MILESTONE, Oracle, record, record_kept

import keyshared as ks
from keyshared.scalable.policy import _overload

EXAMPLES = 60
CASES = 12
TOPIC = "topic://tenant/ns/orders"
RATES = ("msg_rate_in", "bytes_rate_in", "msg_rate_out", "bytes_rate_out")


class Tally:
    """Cases compared, and the cases where M1 differs from keyshared as asserted."""

    def __init__(self) -> None:
        self.cases = 0
        self.kept: dict[str, int] = {}

    def kept_on_purpose(self, why: str) -> None:
        self.kept[why] = self.kept.get(why, 0) + 1

    def record(self, area: str) -> None:
        record(f"{MILESTONE} scalable {area}", self.cases, 0)
        for why, count in sorted(self.kept.items()):
            record_kept(f"{MILESTONE} scalable {area}", why, count)


def values(answers: list[dict[str, Any]]) -> list[Any]:
    """The values of a batch every item of which must have succeeded."""
    for answer in answers:
        assert answer["ok"], answer
    return [answer["value"] for answer in answers]


def outcome(call: Callable[[], Any]) -> tuple[bool, Any]:
    """``(True, value)``, or ``(False, None)`` when keyshared refused (ValueError, TypeError)."""
    try:
        return True, call()
    except (ValueError, TypeError):
        return False, None


# --- layouts built by random operations --------------------------------------------------


@dataclasses.dataclass
class Script:
    """An initial layout, the operations applied to it (in the oracle's form) and what
    keyshared made of each: the final layout and, per operation, whether it applied."""

    initial: ks.TopicLayout
    ops: list[list[int | str]]
    applied: list[bool]
    layout: ks.TopicLayout


def _apply(layout: ks.TopicLayout, op: list[int | str]) -> ks.TopicLayout:
    kind, *args = op
    ids = [int(a) for a in args]
    if kind == "split":
        return layout.split_segment(ids[0], ids[1])
    if kind == "merge":
        return layout.merge_segments(ids[0], ids[1], ids[2])
    return layout.prune_segment(ids[0])


@st.composite
def scripts(draw: st.DrawFn, max_ops: int = 6, refused: bool = True) -> Script:
    """Random splits, merges of adjacent pairs (either way round) and prunes of sealed
    segments; with ``refused``, now and then an operation on any id, which may be refused."""
    initial = ks.TopicLayout.initial(draw(st.integers(1, 4)), draw(st.sampled_from((1, 2, 4))))
    layout, ops, applied, now = initial, [], [], 1_000
    for _ in range(draw(st.integers(0, max_ops))):
        now += draw(st.integers(0, 5_000))
        active = layout.active_segments()
        sealed = [s.segment_id for s in layout.segments.values() if s.is_sealed]
        kinds = ["split", "split"] + ["merge"] * (len(active) > 1) + ["prune"] * bool(sealed)
        kind = draw(st.sampled_from(kinds + ["any"] * refused))
        pick = draw(st.integers(0, 1 << 16))
        op: list[int | str]
        if kind == "split":
            op = ["split", active[pick % len(active)].segment_id, now]
        elif kind == "merge":
            a, b = active[pick % (len(active) - 1)], active[pick % (len(active) - 1) + 1]
            first, second = (a, b) if draw(st.booleans()) else (b, a)
            op = ["merge", first.segment_id, second.segment_id, now]
        elif kind == "prune":
            op = ["prune", sealed[pick % len(sealed)]]
        else:
            anyid = st.integers(0, layout.next_segment_id + 1)
            op = draw(
                st.sampled_from(
                    (
                        ["split", draw(anyid), now],
                        ["merge", draw(anyid), draw(anyid), now],
                        ["prune", draw(anyid)],
                    )
                )
            )
        ok, after = outcome(lambda: _apply(layout, op))  # noqa: B023 - called at once
        ops.append(op)
        applied.append(ok)
        layout = after if ok else layout
    return Script(initial, ops, applied, layout)


def without_buckets(layout: dict[str, Any]) -> dict[str, Any]:
    """A layout's JSON form less ``bucket_splits``: M1's segments have no buckets."""
    segments = [{k: v for k, v in s.items() if k != "bucket_splits"} for s in layout["segments"]]
    return {**layout, "segments": segments}


def first_occurrences(ids: Iterable[int]) -> list[int]:
    return list(dict.fromkeys(ids))


@settings(max_examples=EXAMPLES)
@given(st.lists(st.tuples(scripts(), st.lists(st.integers(0, 0xFFFF), max_size=8)), min_size=1))
def test_segment_layout_operations(
    oracle_milestone: Oracle, cases: list[tuple[Script, list[int]]]
) -> None:
    """SegmentLayout's split, merge and prune (refusals included), then every query of the
    result: the whole DAG, the active segments, findActiveSegment, mergeDepth, lineage,
    children and parents of every segment."""
    tally = Tally()
    answers = values(
        oracle_milestone.call(
            "scalable.layout_ops",
            cases=[{"layout": s.initial.to_dict(), "ops": s.ops, "hashes": h} for s, h in cases],
        )
    )
    for (script, hashes), pulsar in zip(cases, answers, strict=True):
        layout = script.layout
        assert [step["ok"] for step in pulsar["steps"]] == script.applied
        assert pulsar["layout"] == without_buckets(layout.to_dict())
        assert pulsar["active"] == sorted(s.segment_id for s in layout.active_segments())
        assert values(pulsar["find"]) == [layout.find_active_segment(h).segment_id for h in hashes]
        for key, lineage in pulsar["lineage"].items():
            sid = int(key)
            assert pulsar["merge_depth"][key] == layout.merge_depth(sid)
            assert pulsar["children"][key] == [s.segment_id for s in layout.children(sid)]
            assert pulsar["parents"][key] == [s.segment_id for s in layout.parents(sid)]
            ours = [s.segment_id for s in layout.lineage(sid)]
            if lineage != ours:
                # M1's getLineage lists a segment reachable along two paths (the children
                # of a split merged again) once per path; keyshared lists it once.
                assert first_occurrences(lineage) == ours
                tally.kept_on_purpose("M1's lineage repeats a segment reached twice")
        tally.cases += 1 + len(script.ops) + len(hashes) + len(pulsar["lineage"])
    tally.record("layout")


@settings(max_examples=5)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=CASES))
def test_initial_layouts(oracle_milestone: Oracle, counts: list[int]) -> None:
    """createInitialMetadata(n): the epoch-0 layout of a new topic (its creation time is
    the controller's wall clock, so that field is left out)."""
    answers = values(oracle_milestone.call("scalable.initial_layout", cases=counts))
    for n, pulsar in zip(counts, answers, strict=True):
        ours = without_buckets(ks.TopicLayout.initial(n).to_dict())
        assert untimed(pulsar) == untimed(ours)
    record(f"{MILESTONE} scalable initial layout", len(counts))


@settings(max_examples=5)
@given(st.lists(st.tuples(st.sampled_from(("a", "p-1", "x.y")), st.integers(-2, 40)), min_size=1))
def test_migrated_layouts(oracle_milestone: Oracle, cases: list[tuple[str, int]]) -> None:
    """createMigratedMetadata(base, partitions): sealed legacy parents over the old
    partitions and active children tiling the ring (times are the wall clock's)."""
    bases = [(f"persistent://tenant/ns/{name}", partitions) for name, partitions in cases]
    answers = values(oracle_milestone.call("scalable.migrated_layout", cases=bases))
    for (base, partitions), pulsar in zip(bases, answers, strict=True):
        ours = without_buckets(ks.create_migrated_metadata(base, partitions).to_dict())
        assert untimed(pulsar) == untimed(ours)
    record(f"{MILESTONE} scalable migrated layout", len(cases))


def untimed(layout: dict[str, Any]) -> dict[str, Any]:
    times = ("created_at_ms", "sealed_at_ms")
    segments = [{k: v for k, v in s.items() if k not in times} for s in layout["segments"]]
    return {**layout, "segments": segments}


# --- the auto-scale decision --------------------------------------------------------------

#: A rate's unit: each segment adds its own power of two below it to msg_rate_in, so that no
#: two segments, nor two pairs of segments, have the same msgRateIn or combined rate. M1 takes
#: the active segments in hash-map order, which would otherwise break ties its own way.
UNIT = 4096


@st.composite
def policies(draw: st.DrawFn) -> ks.AutoScalePolicy:
    def thresholds() -> tuple[float, float]:
        merge = draw(st.integers(0, 12)) * UNIT
        return float(merge + draw(st.integers(1, 12)) * UNIT - 1), float(merge)

    times = st.sampled_from((0, 1, 1_000, 60_000, 300_000))
    rates = {rate: thresholds() for rate in RATES}
    return ks.AutoScalePolicy(
        enabled=draw(st.booleans()) or draw(st.booleans()),
        max_segments=(high := draw(st.integers(1, 12))),
        min_segments=draw(st.integers(1, high)),
        max_dag_depth=draw(st.integers(0, 3)),
        split_cooldown_ms=draw(times),
        merge_cooldown_ms=draw(times),
        merge_window_ms=draw(times),
        rebucket_cooldown_ms=draw(times),
        split_vs_rebucket_min_msg_rate_in=float(draw(st.integers(0, 8)) * UNIT),
        max_entry_buckets_per_segment=draw(st.sampled_from((1, 2, 4, 16, 1024))),
        **{f"split_{rate}": split for rate, (split, _) in rates.items()},
        **{f"merge_{rate}": merge for rate, (_, merge) in rates.items()},
    )


@dataclasses.dataclass
class DecideCase:
    layout: ks.TopicLayout
    load: dict[int, ks.scalable.SegmentLoadSample]
    consumers: dict[str, int]
    policy: ks.AutoScalePolicy
    now_ms: int
    last_split_at_ms: int | None
    last_merge_at_ms: int | None
    last_rebucket_at_ms: int | None

    def decide(self, policy: ks.AutoScalePolicy, last_rebucket_at_ms: int | None) -> ks.Decision:
        return ks.decide(
            self.layout,
            self.load,
            self.consumers,
            policy,
            self.now_ms,
            self.last_split_at_ms,
            self.last_merge_at_ms,
            last_rebucket_at_ms,
        )

    def oracle_args(self) -> dict[str, Any]:
        p = self.policy
        config = {
            f.name: getattr(p, f.name)
            for f in dataclasses.fields(p)
            if f.name
            not in {
                "rebucket_cooldown_ms",
                "split_vs_rebucket_min_msg_rate_in",
                "max_entry_buckets_per_segment",
                "entry_bucket_budget",
            }
        }
        return {
            "layout": self.layout.to_dict(),
            "load": [
                [sid, list(s.stats.rates()), s.modified_at_ms] for sid, s in self.load.items()
            ],
            "consumers": self.consumers,
            "config": config,
            "now_ms": self.now_ms,
            "last_split_at_ms": self.last_split_at_ms,
            "last_merge_at_ms": self.last_merge_at_ms,
        }


NOW = 1_700_000_000_000


@st.composite
def decide_cases(draw: st.DrawFn) -> DecideCase:
    layout = draw(scripts(refused=False)).layout
    policy = draw(policies())
    load = {}
    for rank, seg in enumerate(layout.active_segments()):
        if draw(st.integers(0, 5)) == 0:
            continue  # no sample: zero load, never merges
        high = [draw(st.integers(0, 14)) * UNIT for _ in RATES]
        stats = ks.scalable.SegmentLoadStats(high[0] + (1 << rank), *high[1:])
        age = draw(st.sampled_from((0, 1, 999, 1_000, 60_000, 299_999, 300_000, 10**7)))
        load[seg.segment_id] = ks.scalable.SegmentLoadSample(stats, NOW - age)
    subs = st.dictionaries(st.sampled_from(("a", "b", "c")), st.integers(0, 40), max_size=3)
    last = st.one_of(st.none(), st.sampled_from((0, 1, 999, 59_999, 60_000, 10**6)))
    lasts = [draw(last) for _ in range(3)]
    return DecideCase(
        layout,
        load,
        draw(subs),
        policy,
        NOW,
        *(None if ago is None else NOW - ago for ago in lasts),
    )


def m1_equivalent(policy: ks.AutoScalePolicy) -> ks.AutoScalePolicy:
    """The policy under which keyshared decides as M1 does: no split-vs-rebucket floor (M1
    splits for consumers whatever the traffic), no bucket ceiling (so master's merge
    capacity guard never holds a pair back) and a rebucket cooldown to keep the rebucket lane
    shut (M1 has none)."""
    return dataclasses.replace(
        policy,
        split_vs_rebucket_min_msg_rate_in=0.0,
        max_entry_buckets_per_segment=ks.routing.RING_SIZE,
        rebucket_cooldown_ms=max(1, policy.rebucket_cooldown_ms),
    )


def as_m1(decision: ks.Decision) -> dict[str, Any]:
    """A decision as the oracle writes it (M1's NoAction gives no reason)."""
    if isinstance(decision, ks.scalable.Split):
        return {"action": "split", "segment_id": decision.segment_id, "reason": decision.reason}
    if isinstance(decision, ks.scalable.Merge):
        return {
            "action": "merge",
            "segment_id_1": decision.segment_id_1,
            "segment_id_2": decision.segment_id_2,
            "reason": decision.reason,
        }
    if isinstance(decision, ks.scalable.Rebucket):
        return {"action": "rebucket", "segment_ids": list(decision.segment_ids)}
    return {"action": "none"}


@settings(max_examples=EXAMPLES * 2)
@given(st.lists(decide_cases(), min_size=1, max_size=CASES))
def test_auto_scale_decision(oracle_milestone: Oracle, cases: list[DecideCase]) -> None:
    """AutoScalePolicyEvaluator.decide on random layouts, samples, consumer counts, policies
    and cooldown clocks. M1 is master's evaluator without PIP-486: it splits for surplus
    consumers whatever the traffic, never rebuckets, and merges without master's capacity
    guard; each of those differences is asserted as keyshared deciding, under the
    M1-equivalent policy, exactly what M1 decides."""
    tally = Tally()
    answers = values(
        oracle_milestone.call("scalable.decide", cases=[c.oracle_args() for c in cases])
    )
    for case, pulsar in zip(cases, answers, strict=True):
        ours = as_m1(case.decide(case.policy, case.last_rebucket_at_ms))
        expected = as_m1(case.decide(m1_equivalent(case.policy), NOW))
        # The 5.0.0-M1 profile is the M1-equivalent policy, whatever the policy's PIP-486
        # fields and the rebucket clock.
        profile = ks.decide(
            case.layout,
            case.load,
            case.consumers,
            case.policy,
            case.now_ms,
            case.last_split_at_ms,
            case.last_merge_at_ms,
            case.last_rebucket_at_ms,
            pulsar_version=MILESTONE,
        )
        assert as_m1(profile) == expected, (case, profile)
        if expected != ours:
            tally.kept_on_purpose(f"M1 has no rebucket lane nor merge guard ({ours['action']})")
        if pulsar != expected and pulsar["action"] == expected["action"] == "merge":
            # M1 names the pair in its hash map's order; keyshared the lower range first.
            assert (pulsar["segment_id_2"], pulsar["segment_id_1"]) == (
                expected["segment_id_1"],
                expected["segment_id_2"],
            )
            tally.kept_on_purpose("M1 names a merged pair in hash-map order")
        elif pulsar != expected and pulsar["action"] == expected["action"] == "split":
            # Two segments tie on their overload score (on different metrics): M1 takes the
            # one its hash map lists first, keyshared the lower id.
            scores = {
                sid: _overload(case.load[sid].stats, case.policy)[0]
                for sid in (pulsar["segment_id"], expected["segment_id"])
            }
            assert len(set(scores.values())) == 1, (pulsar, expected, scores)
            tally.kept_on_purpose("M1 breaks an overload tie in hash-map order")
        else:
            assert pulsar == expected, (case, ours)
        tally.cases += 1
    tally.record("auto-scale decision")


# --- the resolved policy -------------------------------------------------------------------

#: M1's config fields: keyshared's name, ServiceConfiguration's, the override's, and how many
#: ms one unit of the override (and broker setting) is.
CONFIG_FIELDS = (
    ("enabled", "scalableTopicAutoScaleEnabled", "enabled", None),
    ("max_segments", "scalableTopicMaxSegments", "maxSegments", None),
    ("min_segments", "scalableTopicMinSegments", "minSegments", None),
    ("max_dag_depth", "scalableTopicMaxDagDepth", "maxDagDepth", None),
    ("split_cooldown_ms", "scalableTopicSplitCooldownSeconds", "splitCooldownSeconds", 1000),
    ("merge_cooldown_ms", "scalableTopicMergeCooldownSeconds", "mergeCooldownSeconds", 1000),
    ("merge_window_ms", "scalableTopicMergeWindowSeconds", "mergeWindowSeconds", 1000),
    *(
        (
            f"{kind}_{rate}",
            f"scalableTopic{kind.title()}{java}Threshold",
            f"{kind}{java}Threshold",
            None,
        )
        for kind in ("split", "merge")
        for rate, java in zip(
            RATES, ("MsgRateIn", "BytesRateIn", "MsgRateOut", "BytesRateOut"), strict=True
        )
    ),
)


def field_values(name: str) -> st.SearchStrategy[Any]:
    if name == "enabled":
        return st.booleans()
    if name.endswith("_ms"):
        return st.sampled_from((0, 1, 60, 300))
    if "rate" in name:
        return st.sampled_from((0, 1, 1_000, 5_000, 10_000))
    return st.integers(0, 5)


settings_dicts = st.fixed_dictionaries(
    {}, optional={name: field_values(name) for name, *_ in CONFIG_FIELDS}
)


def java_names(chosen: dict[str, Any], column: int) -> dict[str, Any]:
    return {row[column]: chosen[row[0]] for row in CONFIG_FIELDS if row[0] in chosen}


def ms(chosen: dict[str, Any]) -> dict[str, Any]:
    """keyshared's fields: seconds as ms, rates as floats."""
    scale = {row[0]: row[3] for row in CONFIG_FIELDS}
    return {
        k: v * scale[k] if scale[k] else (float(v) if "rate" in k else v) for k, v in chosen.items()
    }


@settings(max_examples=EXAMPLES)
@given(
    st.lists(
        st.tuples(settings_dicts, st.none() | settings_dicts, st.none() | settings_dicts),
        min_size=1,
        max_size=CASES * 2,
    )
)
def test_resolved_config(
    oracle_milestone: Oracle,
    cases: list[tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]],
) -> None:
    """AutoScaleConfig.resolve: broker settings, then the namespace and topic overrides, each
    set field winning, validated once. Small values make many combinations invalid (min 0,
    max below min, a split threshold not above its merge threshold); valid and invalid must
    agree, and so must every resolved field."""
    requests = [
        {
            "broker": java_names(broker, 1),
            "namespace": None if ns is None else java_names(ns, 2),
            "topic": None if topic is None else java_names(topic, 2),
        }
        for broker, ns, topic in cases
    ]
    answers = oracle_milestone.call("scalable.resolve_config", cases=requests)
    for (broker, ns, topic), pulsar in zip(cases, answers, strict=True):
        overrides = [
            None if o is None else ks.scalable.AutoScalePolicyOverride(**ms(o)) for o in (ns, topic)
        ]
        base = ks.scalable.AutoScalePolicyOverride(**ms(broker))
        resolved = ks.scalable.resolve_auto_scale_config(base, *overrides)
        assert pulsar["ok"] == isinstance(resolved, ks.AutoScalePolicy), (pulsar, resolved)
        if isinstance(resolved, ks.AutoScalePolicy):
            assert pulsar["value"] == {name: getattr(resolved, name) for name, *_ in CONFIG_FIELDS}
    record(f"{MILESTONE} scalable resolved config", len(cases))


def test_default_config(oracle_milestone: Oracle) -> None:
    """Pulsar's broker defaults are keyshared's."""
    pulsar = values(oracle_milestone.call("scalable.resolve_config", cases=[{}]))[0]
    ours = ks.AutoScalePolicy()
    assert pulsar == {name: getattr(ours, name) for name, *_ in CONFIG_FIELDS}
    record(f"{MILESTONE} scalable resolved config", 1)


# --- hash ranges and names -----------------------------------------------------------------

ends = st.integers(0, 0xFFFF)
ranges = st.tuples(ends, ends).map(sorted)


def hash_range_answers(a: ks.HashRange, b: ks.HashRange, hash_: int) -> dict[str, Any]:
    """What the oracle's ``scalable.hash_ranges`` answers, from keyshared."""
    split_ok, halves = outcome(a.split)
    merge_ok, merged = outcome(lambda: a.merge(b))
    return {
        "size": a.size,
        "contains": a.contains(hash_),
        "contains_range": a.contains(b),
        "adjacent": a.is_adjacent_to(b),
        "split": {"ok": split_ok, "value": [[h.start, h.end] for h in halves]}
        if split_ok
        else {"ok": False},
        "merge": {"ok": merge_ok, "value": [merged.start, merged.end]}
        if merge_ok
        else {"ok": False},
        "compare": (a > b) - (a < b),
        "hex": a.to_hex(),
    }


def without_errors(answer: dict[str, Any]) -> dict[str, Any]:
    """An oracle answer less its error texts (keyshared's messages are its own)."""
    out = {k: v for k, v in answer.items() if k != "string"}
    for key in ("split", "merge"):
        out[key] = {k: v for k, v in answer[key].items() if k != "error"}
    return out


near = st.sampled_from((0, 1, 2, 0x7FFF, 0x8000, 0xFFFE, 0xFFFF))
range_cases = st.tuples(ranges | st.tuples(near, near).map(sorted), ranges, ends)


@settings(max_examples=EXAMPLES)
@given(st.lists(range_cases, min_size=1, max_size=CASES * 4))
def test_hash_ranges(oracle_milestone: Oracle, cases: list[Any]) -> None:
    """HashRange's size, contains (a hash, a range), adjacency, split, merge, ordering and
    hex form, with the second range often just after the first so that merges happen."""
    pairs = []
    for (s1, e1), (s2, e2), hash_ in cases:
        if e1 < 0xFFFF and hash_ % 2:
            s2, e2 = e1 + 1, max(e1 + 1, e2)  # adjacent
        pairs.append([s1, e1, s2, e2, hash_])
    answers = values(oracle_milestone.call("scalable.hash_ranges", cases=pairs))
    for (s1, e1, s2, e2, hash_), pulsar in zip(pairs, answers, strict=True):
        ours = hash_range_answers(ks.HashRange(s1, e1), ks.HashRange(s2, e2), hash_)
        assert without_errors(pulsar) == ours
    record(f"{MILESTONE} scalable hash range", len(pairs))


hex_texts = st.one_of(
    st.tuples(ends, ends).map(lambda r: f"{r[0]:04x}-{r[1]:04x}"),
    st.tuples(ends, ends).map(lambda r: f"{r[0]:04X}-{r[1]:04x}"),
    st.tuples(st.integers(-2, 0x1FFFF), st.integers(-2, 0x1FFFF)).map(
        lambda r: f"{r[0]:x}-{r[1]:x}"
    ),
    st.text("0123456789abcdefABCDEF-+ x\uff11", max_size=11),  # \uff11: a fullwidth 1,
)


@settings(max_examples=EXAMPLES)
@given(
    st.lists(st.tuples(st.integers(-3, 0x10002), st.integers(-3, 0x10002)), max_size=CASES),
    st.lists(hex_texts, max_size=CASES * 2),
)
def test_hash_range_checks_and_hex(
    oracle_milestone: Oracle, bounds: list[tuple[int, int]], texts: list[str]
) -> None:
    """The constructor refuses what keyshared refuses; fromHexString reads the 4-digit form
    as keyshared does. M1's parser is Integer.parseInt: it also takes other widths, a sign
    and non-ASCII digits, which keyshared refuses (it reads only the form it writes)."""
    tally = Tally()
    built = oracle_milestone.call("scalable.hash_range_new", cases=[list(b) for b in bounds])
    for (start, end), pulsar in zip(bounds, built, strict=True):
        ok, ours = outcome(lambda: ks.HashRange(start, end))  # noqa: B023 - called at once
        assert pulsar["ok"] == ok
        assert not ok or pulsar["value"] == [ours.start, ours.end]
        tally.cases += 1
    parsed = oracle_milestone.call("scalable.hash_range_parse", cases=texts)
    for text, pulsar in zip(texts, parsed, strict=True):
        ok, ours = outcome(lambda: ks.HashRange.from_hex(text))  # noqa: B023 - called at once
        if ok:
            assert pulsar == {"ok": True, "value": [ours.start, ours.end]}
        elif pulsar["ok"]:
            tally.kept_on_purpose("M1 parses a hex range not in the 4-digit form")
        tally.cases += 1
    tally.record("hash range checks")


names = st.text("abcxyz019-_.", min_size=1, max_size=6)


@settings(max_examples=EXAMPLES)
@given(
    st.lists(
        st.tuples(names, names, names, ranges, st.integers(0, 2**40)),
        min_size=1,
        max_size=CASES,
    )
)
def test_segment_topic_names(
    oracle_milestone: Oracle, cases: list[tuple[str, str, str, list[int], int]]
) -> None:
    """SegmentTopicName.fromParent and formatDescriptor, then TopicName.get of the segment
    name, of its parent and of the persistent topic of the same name: every field."""
    parents = [f"topic://{t}/{n}/{local}" for t, n, local, _, _ in cases]
    made = values(
        oracle_milestone.call(
            "scalable.segment_topic_names",
            cases=[[p, r[0], r[1], sid] for p, (*_, r, sid) in zip(parents, cases, strict=True)],
        )
    )
    segment_names = []
    for parent, (*_, (start, end), sid), pulsar in zip(parents, cases, made, strict=True):
        hash_range = ks.HashRange(start, end)
        ours = ks.scalable.SegmentTopicName.from_parent(ks.TopicName.get(parent), hash_range, sid)
        assert pulsar == {
            "descriptor": ks.scalable.format_descriptor(hash_range, sid),
            "name": {"ok": True, "value": str(ours)},
        }
        segment_names.append(str(ours))
    plain = [p.replace("topic://", "persistent://") for p in parents]
    texts = segment_names + parents + plain
    parsed = values(oracle_milestone.call("scalable.topic_names", cases=texts))
    for text, pulsar in zip(texts, parsed, strict=True):
        assert pulsar == topic_name_answer(ks.TopicName.get(text))
    record(f"{MILESTONE} scalable topic name", len(cases) + len(texts))


def topic_name_answer(name: ks.TopicName) -> dict[str, Any]:
    out: dict[str, Any] = {
        "domain": name.domain.value,
        "tenant": name.tenant,
        "namespace_portion": name.namespace_portion,
        "local_name": name.local_name,
        "segment_range": None,
        "segment_id": -1,  # Pulsar's "not a segment"
        "string": str(name),
    }
    if name.is_segment:
        hash_range = ks.scalable.SegmentTopicName.get_hash_range(name)
        sid = ks.scalable.SegmentTopicName.get_segment_id(name)
        out |= {
            "segment_range": [hash_range.start, hash_range.end],
            "segment_id": sid,
            "parent": str(ks.scalable.SegmentTopicName.get_parent_topic_name(name)),
            "hash_range": [hash_range.start, hash_range.end],
            "parsed_segment_id": sid,
        }
    return out


# --- the load reporter ---------------------------------------------------------------------

rate_values = st.sampled_from((0.0, 1.0, 100.0, 124.0, 125.0, 126.0, 75.0, 74.0, 1e9))
stats = st.tuples(rate_values, rate_values, rate_values, rate_values)
thresholds = st.sampled_from((0.0, 0.1, 0.25, 0.5, 1.0))


@settings(max_examples=EXAMPLES)
@given(st.lists(st.tuples(stats, stats, thresholds), min_size=1, max_size=CASES * 4))
def test_material_change(oracle_milestone: Oracle, cases: list[tuple[Any, Any, float]]) -> None:
    """isMaterialChange at and around the threshold, and off and onto zero."""
    answers = values(
        oracle_milestone.call(
            "scalable.material_change", cases=[[list(a), list(b), t] for a, b, t in cases]
        )
    )
    for (last, current, threshold), pulsar in zip(cases, answers, strict=True):
        ours = ks.scalable.is_material_change(
            ks.scalable.SegmentLoadStats(*last), ks.scalable.SegmentLoadStats(*current), threshold
        )
        assert pulsar == ours
    record(f"{MILESTONE} scalable material change", len(cases))


reporter_steps = st.lists(
    st.one_of(
        st.tuples(st.just("report"), st.integers(0, 2), stats),
        st.tuples(st.just("forget"), st.integers(0, 2)),
    ),
    max_size=12,
)


@settings(max_examples=EXAMPLES)
@given(st.lists(st.tuples(thresholds, st.booleans(), reporter_steps), min_size=1, max_size=CASES))
def test_load_reporter(
    oracle_milestone: Oracle, cases: list[tuple[float, bool, list[Any]]]
) -> None:
    """reportIfChanged and forget over a few segments. keyshared keeps no store: a segment
    it forgot writes its next report. M1 then seeds its baseline from the record already in
    the store (``store``), so a report close to that record is skipped; with the record gone
    (``store`` false) M1 writes too. The seeded case is asserted as M1's."""
    tally = Tally()
    requests = [
        {
            "threshold": threshold,
            "store": store,
            "steps": [
                [s[0], TOPIC, s[1], *([list(s[2])] if s[0] == "report" else [])] for s in steps
            ],
        }
        for threshold, store, steps in cases
    ]
    answers = values(oracle_milestone.call("scalable.reporter", cases=requests))
    for (threshold, store, steps), pulsar in zip(cases, answers, strict=True):
        reporter = ks.scalable.SegmentLoadReporter(threshold)
        written: dict[int, ks.scalable.SegmentLoadStats] = {}  # the store M1 writes to
        for step, wrote in zip(steps, pulsar, strict=True):
            if step[0] == "forget":
                reporter = reporter.forget(TOPIC, step[1])
                assert wrote is None
                continue
            current = ks.scalable.SegmentLoadStats(*step[2])
            key = (TOPIC, step[1])
            seeded = key not in reporter.last_written
            ours, reporter = reporter.report_if_changed(TOPIC, step[1], current)
            if ours and not wrote:
                # M1 seeded its baseline from the stored record, and the report is close.
                assert store and seeded and step[1] in written
                assert not ks.scalable.is_material_change(written[step[1]], current, threshold)
                # keyshared goes on from M1's baseline, the stored record.
                baseline = {**reporter.last_written, key: written[step[1]]}
                reporter = ks.scalable.SegmentLoadReporter(threshold, baseline)
                tally.kept_on_purpose("M1 seeds a forgotten segment's baseline from the store")
            else:
                assert wrote == ours
            if wrote:
                written[step[1]] = current
            tally.cases += 1
    tally.record("load reporter")


# --- the subscription coordinator's assignment ---------------------------------------------


@st.composite
def assign_cases(draw: st.DrawFn) -> tuple[ks.TopicLayout, list[str], bool, list[int]]:
    layout = draw(scripts(refused=False)).layout
    sealed = sorted(s.segment_id for s in layout.segments.values() if s.is_sealed)
    drained = draw(st.lists(st.sampled_from(sealed), unique=True)) if sealed else []
    consumers = draw(st.lists(st.sampled_from("abcdefghijkl"), unique=True, max_size=12))
    return layout, consumers, draw(st.booleans()), drained


def assigned(segment_id: int, hash_range: ks.HashRange) -> list[Any]:
    name = ks.scalable.SegmentTopicName.from_parent(ks.TopicName.get(TOPIC), hash_range, segment_id)
    return [segment_id, [hash_range.start, hash_range.end], str(name)]


def first_owners(ours: dict[str, ks.scalable.ConsumerAssignment]) -> dict[str, Any]:
    """keyshared's assignment with each shared segment left to its first sharer alone (the
    consumer that took it whole before the surplus was dealt), bucket ranges dropped."""
    seen: set[int] = set()
    out = {}
    for name, assignment in sorted(ours.items()):
        kept = [s for s in assignment.assigned_segments if s.segment_id not in seen]
        seen |= {s.segment_id for s in kept}
        segments = [assigned(s.segment_id, s.hash_range) for s in kept]
        out[name] = {"layout_epoch": assignment.layout_epoch, "segments": segments}
    return out


def whole(ours: dict[str, ks.scalable.ConsumerAssignment]) -> dict[str, Any]:
    return {
        name: {
            "layout_epoch": a.layout_epoch,
            "segments": [assigned(s.segment_id, s.hash_range) for s in a.assigned_segments],
        }
        for name, a in ours.items()
    }


@settings(max_examples=EXAMPLES)
@given(st.lists(assign_cases(), min_size=1, max_size=CASES))
def test_subscription_assignment(oracle_milestone: Oracle, cases: list[Any]) -> None:
    """SubscriptionCoordinator's assignment of restored sessions, with and without a drain
    checker, over layouts with sealed segments some of which drained: keyshared's M1
    profile gives M1's answer. M1 hands out every sealed segment, drained or not, and
    leaves consumers beyond the segment count idle; master (keyshared's default) retires
    drained sealed segments, holds a sealed segment until its parents drain (keyshared's
    safer rule) and lets surplus consumers share bucketed segments: each difference of the
    default is counted by name."""
    tally = Tally()
    requests = [
        {
            "layout": lay.to_dict(),
            "topic": TOPIC,
            "consumers": names,
            "drain_checker": c,
            "drained": d,
        }
        for lay, names, c, d in cases
    ]
    answers = values(oracle_milestone.call("scalable.assign", cases=requests))
    for (layout, names, checker, drained), pulsar in zip(cases, answers, strict=True):
        topic = ks.TopicName.get(TOPIC)
        expected = whole(
            ks.compute_assignment(
                layout, topic, names, drained if checker else None, pulsar_version=MILESTONE
            )
        )
        assert pulsar == expected
        ours = ks.compute_assignment(layout, topic, names, drained if checker else None)
        ours_first = first_owners(ours)
        if ours_first != expected:
            tally.kept_on_purpose("M1 hands out drained or waiting sealed segments")
        elif ours_first != whole(ours):
            tally.kept_on_purpose("M1 leaves surplus consumers idle")
        tally.cases += 1
    tally.record("subscription assignment")
