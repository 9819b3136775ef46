"""Topic layouts: initial layouts, split, merge, rebucket, prune, routing and JSON."""

import bisect
import json
import pickle
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import keyshared as ks
from keyshared import HashRange, Segment, SegmentState, TopicLayout


def ranges(layout: TopicLayout) -> list[tuple[int, int]]:
    return [(s.hash_range.start, s.hash_range.end) for s in layout.active_segments()]


# --- initial layouts ---------------------------------------------------------------------


def test_single_segment_takes_the_whole_ring_and_the_whole_budget() -> None:
    layout = TopicLayout.initial(1)
    (seg,) = layout.active_segments()
    assert seg.hash_range == HashRange.full()
    assert seg.bucket_splits == (0x4000, 0x8000, 0xC000)
    assert (layout.epoch, layout.next_segment_id, seg.segment_id) == (0, 1, 0)
    assert seg.state is SegmentState.ACTIVE and seg.sealed_at_ms == -1


@pytest.mark.parametrize(
    ("n", "budget", "want_ranges", "want_buckets"),
    [
        (2, 4, [(0, 0x7FFF), (0x8000, 0xFFFF)], 2),
        (3, 4, [(0, 21844), (21845, 43689), (43690, 0xFFFF)], 1),
        (4, 4, [(0, 0x3FFF), (0x4000, 0x7FFF), (0x8000, 0xBFFF), (0xC000, 0xFFFF)], 1),
        (3, 8, [(0, 21844), (21845, 43689), (43690, 0xFFFF)], 2),
        (5, 1, [(i * 13107, i * 13107 + 13106) for i in range(4)] + [(52428, 0xFFFF)], 1),
    ],
)
def test_initial_layout_formula(
    n: int, budget: int, want_ranges: list[tuple[int, int]], want_buckets: int
) -> None:
    layout = TopicLayout.initial(n, bucket_budget=budget, now_ms=5)
    assert ranges(layout) == want_ranges
    assert [s.segment_id for s in layout.active_segments()] == list(range(n))
    assert all(s.bucket_count == want_buckets for s in layout.active_segments())
    assert all(
        s.bucket_splits == tuple(ks.routing.equal_width_splits(want_buckets))
        for s in layout.segments.values()
    )
    assert all(s.created_at_ms == 5 for s in layout.segments.values())
    assert layout.total_bucket_count == n * want_buckets


def test_65536_segments_of_one_hash_each() -> None:
    layout = TopicLayout.initial(65536, bucket_budget=1)
    assert len(layout.active_segments()) == 65536
    assert layout.find_active_segment(0xABCD).segment_id == 0xABCD


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"num_segments": 0}, ValueError, "num_segments"),
        ({"num_segments": 65537}, ValueError, "num_segments"),
        ({"num_segments": 2.0}, TypeError, "num_segments"),
        ({"num_segments": 2, "bucket_budget": 0}, ValueError, "bucket_budget"),
        ({"num_segments": 1, "bucket_budget": 70000}, ValueError, "bucket_budget"),
        ({"num_segments": 1, "now_ms": -1}, ValueError, "now_ms"),
    ],
)
def test_initial_layout_rejects_bad_arguments(kwargs: dict, error: type, field: str) -> None:
    with pytest.raises(error, match=field):
        TopicLayout.initial(**kwargs)


# --- operations ----------------------------------------------------------------------------


def test_split_seals_the_parent_and_halves_range_and_buckets() -> None:
    layout = TopicLayout.initial(1, bucket_budget=4).split_segment(0, now_ms=100)
    parent = layout.segments[0]
    assert parent.state is SegmentState.SEALED and parent.sealed_at_ms == 100
    assert parent.child_ids == (1, 2)
    low, high = layout.segments[1], layout.segments[2]
    assert (low.hash_range, high.hash_range) == (HashRange(0, 0x7FFF), HashRange(0x8000, 0xFFFF))
    assert low.parent_ids == high.parent_ids == (0,)
    assert low.bucket_splits == high.bucket_splits == (0x8000,)
    assert low.created_at_ms == high.created_at_ms == 100
    assert (layout.epoch, layout.next_segment_id) == (1, 3)


def test_split_of_an_odd_bucket_count_and_of_one_bucket() -> None:
    layout = TopicLayout.initial(1).rebucket_segment(0, 3, now_ms=1).split_segment(1, now_ms=2)
    assert [s.bucket_count for s in layout.active_segments()] == [1, 1]
    again = layout.split_segment(2, now_ms=3)
    assert [s.bucket_count for s in again.active_segments()] == [1, 1, 1]


def test_split_refusals_name_the_problem() -> None:
    layout = TopicLayout.initial(65536, bucket_budget=1)
    with pytest.raises(ValueError, match="size 1"):
        layout.split_segment(7, 0)
    split = TopicLayout.initial(1).split_segment(0, 0)
    with pytest.raises(ValueError, match="sealed"):
        split.split_segment(0, 1)
    with pytest.raises(ValueError, match="segment 99 is not in the layout"):
        split.split_segment(99, 1)
    with pytest.raises(ValueError, match="now_ms"):
        split.split_segment(1, -5)


def test_merge_unions_ranges_and_sums_buckets() -> None:
    layout = TopicLayout.initial(4, bucket_budget=16)
    merged = layout.merge_segments(2, 1, now_ms=50)
    new = merged.segments[4]
    assert new.hash_range == HashRange(0x4000, 0xBFFF)
    assert new.parent_ids == (2, 1)
    assert new.bucket_count == 8
    assert merged.segments[1].child_ids == merged.segments[2].child_ids == (4,)
    assert merged.segments[1].sealed_at_ms == 50
    assert (merged.epoch, merged.next_segment_id) == (1, 5)


def test_merge_clamps_to_the_optional_ceiling() -> None:
    layout = TopicLayout.initial(2, bucket_budget=8)
    assert layout.merge_segments(0, 1, 0, max_buckets=5).segments[2].bucket_count == 5
    assert layout.merge_segments(0, 1, 0, max_buckets=64).segments[2].bucket_count == 8
    with pytest.raises(ValueError, match="max_buckets"):
        layout.merge_segments(0, 1, 0, max_buckets=0)


def test_merge_refusals() -> None:
    layout = TopicLayout.initial(3)
    with pytest.raises(ValueError, match="not adjacent"):
        layout.merge_segments(0, 2, 0)
    with pytest.raises(ValueError, match="itself"):
        layout.merge_segments(1, 1, 0)
    with pytest.raises(ValueError, match="sealed"):
        layout.split_segment(0, 0).merge_segments(0, 1, 0)


def test_rebucket_rolls_over_to_a_same_range_successor() -> None:
    layout = TopicLayout.initial(2).rebucket_segment(1, 8, now_ms=9)
    old, new = layout.segments[1], layout.segments[2]
    assert old.state is SegmentState.SEALED and old.child_ids == (2,)
    assert new.hash_range == old.hash_range and new.parent_ids == (1,)
    assert new.bucket_splits == tuple(ks.routing.equal_width_splits(8))
    assert (layout.epoch, layout.next_segment_id) == (1, 3)


def test_rebucket_with_explicit_splits_and_its_refusals() -> None:
    layout = TopicLayout.initial(1)
    custom = layout.rebucket_segment(0, 4, 0, bucket_splits=[10, 20, 30])
    assert custom.segments[1].bucket_splits == (10, 20, 30)
    with pytest.raises(ValueError, match="already has 4 bucket"):
        layout.rebucket_segment(0, 4, 0)
    with pytest.raises(ValueError, match="already has these bucket splits"):
        custom.rebucket_segment(1, 4, 0, bucket_splits=[10, 20, 30])
    with pytest.raises(ValueError, match="bucket_splits has 1 split point"):
        layout.rebucket_segment(0, 4, 0, bucket_splits=[5])
    with pytest.raises(ValueError, match="strictly ascending"):
        layout.rebucket_segment(0, 3, 0, bucket_splits=[9, 9])
    with pytest.raises(ValueError, match="bucket_count"):
        layout.rebucket_segment(0, 0, 0)


def test_prune_unlinks_and_bumps_the_epoch() -> None:
    layout = TopicLayout.initial(2).merge_segments(0, 1, 0).split_segment(2, 5)
    pruned = layout.prune_segment(0)
    assert 0 not in pruned.segments
    assert pruned.segments[2].parent_ids == (1,)
    assert pruned.epoch == layout.epoch + 1 and pruned.next_segment_id == layout.next_segment_id
    assert pruned.prune_segment(2).segments[3].parent_ids == ()
    with pytest.raises(ValueError, match="active"):
        layout.prune_segment(3)


def test_merge_depth_counts_merges_in_the_lineage_only() -> None:
    layout = TopicLayout.initial(4)
    assert layout.merge_depth(0) == 0
    layout = layout.merge_segments(0, 1, 0)  # 4
    layout = layout.merge_segments(2, 3, 0)  # 5
    layout = layout.merge_segments(4, 5, 0)  # 6: two merges below it, plus itself
    assert [layout.merge_depth(i) for i in (4, 5, 6)] == [1, 1, 3]
    layout = layout.split_segment(6, 0).rebucket_segment(7, 4, 0)  # 7, 8 and 9
    assert layout.merge_depth(9) == 3
    with pytest.raises(ValueError, match="not in the layout"):
        layout.merge_depth(42)


# --- reading and routing -------------------------------------------------------------------


def test_find_active_segment_at_the_edges() -> None:
    layout = TopicLayout.initial(3)
    assert layout.find_active_segment(0).segment_id == 0
    assert layout.find_active_segment(21844).segment_id == 0
    assert layout.find_active_segment(21845).segment_id == 1
    assert layout.find_active_segment(0xFFFF).segment_id == 2
    with pytest.raises(ValueError, match="segment_hash"):
        layout.find_active_segment(0x10000)


def test_route_matches_hash_halves_and_the_routing_table_is_cached() -> None:
    layout = TopicLayout.initial(2, bucket_budget=8).split_segment(1, 0)
    keys = [f"key-{i}" for i in range(500)]
    ids, buckets = layout.route_keys(keys)
    for key, sid, bucket in zip(keys, ids.tolist(), buckets.tolist(), strict=True):
        h = ks.key_hash(key)
        seg = layout.find_active_segment(h >> 16)
        assert (sid, bucket) == (seg.segment_id, ks.bucket_index(h & 0xFFFF, seg.bucket_splits))
        assert layout.route(key) == (sid, bucket)
    assert layout.routing_table is layout.routing_table
    ids2, buckets2 = layout.route_hashes(ks.key_hashes(keys))
    assert np.array_equal(ids, ids2) and np.array_equal(buckets, buckets2)


def test_segment_descriptor_both_ways() -> None:
    layout = TopicLayout.initial(1).split_segment(0, 0)
    assert layout.segments[1].descriptor == "0000-7fff-1"
    assert ks.scalable.format_descriptor(HashRange(0x10, 0x20), 12) == "0010-0020-12"
    assert ks.scalable.parse_descriptor("8000-ffff-2") == (HashRange(0x8000, 0xFFFF), 2)
    for bad in ("8000-ffff", "8000-ffff-x", "zz-ffff-1", "8000-ffff--1"):
        with pytest.raises(ValueError):
            ks.scalable.parse_descriptor(bad)


def test_layout_response_lists_active_segments_in_range_order() -> None:
    layout = TopicLayout.initial(2).split_segment(0, 0)
    assert layout.layout_response() == {
        "epoch": 1,
        "segments": [
            {
                "segment_id": 2,
                "descriptor": "0000-3fff-2",
                "hash_range": "0000-3fff",
                "bucket_splits": [],
            },
            {
                "segment_id": 3,
                "descriptor": "4000-7fff-3",
                "hash_range": "4000-7fff",
                "bucket_splits": [],
            },
            {
                "segment_id": 1,
                "descriptor": "8000-ffff-1",
                "hash_range": "8000-ffff",
                "bucket_splits": [32768],
            },
        ],
    }


def test_segment_bucket_helpers() -> None:
    seg = TopicLayout.initial(1).segments[0]
    assert seg.bucket_ranges()[1] == HashRange(0x4000, 0x7FFF)
    assert [seg.canonical_bucket_hash(i) for i in range(4)] == [1, 0x4000, 0x8000, 0xC000]
    with pytest.raises(ValueError, match="bucket"):
        seg.canonical_bucket_hash(4)


# --- serialisation and validation --------------------------------------------------------


def test_json_and_pickle_round_trips() -> None:
    layout = TopicLayout.initial(3, 8, now_ms=1).split_segment(1, 2).merge_segments(3, 4, 3)
    layout = layout.rebucket_segment(0, 4, 4).prune_segment(3)
    assert TopicLayout.from_json(layout.to_json()) == layout
    assert TopicLayout.from_json(layout.to_json(indent=2)).to_dict() == layout.to_dict()
    layout.route("warm the cache")
    assert pickle.loads(pickle.dumps(layout)) == layout
    assert hash(layout) == hash(TopicLayout.from_dict(layout.to_dict()))


def good_dict() -> dict:
    return TopicLayout.initial(2).split_segment(0, 7).to_dict()


@pytest.mark.parametrize(
    ("mutate", "error", "message"),
    [
        (lambda d: d.pop("epoch"), ValueError, r"layout\.epoch is missing"),
        (lambda d: d.update(colour=1), ValueError, "unknown field.*colour"),
        (lambda d: d.update(epoch=-1), ValueError, "epoch"),
        (lambda d: d["segments"][1].update(hash_range="zz"), ValueError, r"segments\[1\]"),
        (lambda d: d["segments"][1].update(hash_range=5), TypeError, r"segments\[1\]\.hash_range"),
        (lambda d: d["segments"][1].update(state="DEAD"), ValueError, r"segments\[1\]\.state"),
        (lambda d: d["segments"][1].update(bucket_splits=[5, 3]), ValueError, "ascending"),
        (lambda d: d["segments"][1].update(sealed_at_ms=4), ValueError, "sealed_at_ms"),
        (lambda d: d["segments"][1].update(created_at_ms=-4), ValueError, "created_at_ms"),
        (lambda d: d["segments"].pop(2), ValueError, "names child 2"),
        (lambda d: d["segments"][3].update(hash_range="4000-ffff"), ValueError, "overlaps"),
        (lambda d: d["segments"][3].update(hash_range="4001-7fff"), ValueError, "gap"),
        (lambda d: d["segments"][1].update(hash_range="8000-fffe"), ValueError, "end at fffe"),
        (lambda d: d.update(next_segment_id=3), ValueError, "next_segment_id"),
        (lambda d: d["segments"][2].update(parent_ids=[]), ValueError, "does not name it"),
        (lambda d: d["segments"].append(d["segments"][0]), ValueError, "repeats"),
        (lambda d: d.update(segments={}), TypeError, "segments must be a list"),
    ],
)
def test_bad_layouts_raise_naming_the_field(mutate: object, error: type, message: str) -> None:
    data = good_dict()
    mutate(data)  # type: ignore[operator]
    with pytest.raises(error, match=message):
        TopicLayout.from_dict(json.loads(json.dumps(data)))


def test_direct_construction_is_validated() -> None:
    seg = Segment(0, HashRange.full(), bucket_splits=(5,))
    with pytest.raises(ValueError, match="holds segment 0"):
        TopicLayout(0, 1, {1: seg})
    with pytest.raises(TypeError, match="must be a Segment"):
        TopicLayout(0, 1, {0: "segment"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="none"):
        TopicLayout(0, 1, {})
    with pytest.raises(ValueError, match="active but has children"):
        TopicLayout(0, 2, {0: Segment(0, HashRange.full(), child_ids=(1,))})
    with pytest.raises(TypeError, match="hash_range"):
        Segment(0, (0, 5))  # type: ignore[arg-type]


# --- properties ------------------------------------------------------------------------------

PROBE_HASHES = np.random.default_rng(11).integers(0, 2**32, 3000, dtype=np.uint32)


class LayoutMachine(RuleBasedStateMachine):
    """Random split / merge / rebucket / prune sequences against a model of the active
    segments: {id: (start, end, bucket count)}."""

    def __init__(self) -> None:
        super().__init__()
        self.layout = TopicLayout.initial(1, bucket_budget=8)
        self.model = {0: (0, 0xFFFF, 8)}
        self.now = 0

    def _apply(self, new: TopicLayout, changes: dict) -> None:
        assert new.epoch == self.layout.epoch + 1
        self.layout = new
        self.model.update(changes)

    def _active_ids(self) -> list[int]:
        return sorted(self.model, key=lambda i: self.model[i][0])

    @rule(data=st.data())
    def split(self, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from(self._active_ids()))
        start, end, n = self.model[sid]
        self.now += 1
        if start == end:
            with pytest.raises(ValueError):
                self.layout.split_segment(sid, self.now)
            return
        mid = start + (end - start) // 2
        first = self.layout.next_segment_id
        new = self.layout.split_segment(sid, self.now)
        del self.model[sid]
        half = max(1, n // 2)
        self._apply(new, {first: (start, mid, half), first + 1: (mid + 1, end, half)})

    @precondition(lambda self: len(self.model) > 1)
    @rule(data=st.data(), ceiling=st.none() | st.integers(1, 16))
    def merge(self, data: st.DataObject, ceiling: int | None) -> None:
        ids = self._active_ids()
        i = data.draw(st.integers(0, len(ids) - 2))
        a, b = ids[i], ids[i + 1]
        if data.draw(st.booleans()):
            a, b = b, a
        total = self.model[a][2] + self.model[b][2]
        want = total if ceiling is None else min(total, ceiling)
        new_id = self.layout.next_segment_id
        self.now += 1
        new = self.layout.merge_segments(a, b, self.now, max_buckets=ceiling)
        lo = min(self.model[a][0], self.model[b][0])
        hi = max(self.model[a][1], self.model[b][1])
        del self.model[a], self.model[b]
        self._apply(new, {new_id: (lo, hi, want)})

    @rule(data=st.data(), count=st.integers(1, 64))
    def rebucket(self, data: st.DataObject, count: int) -> None:
        sid = data.draw(st.sampled_from(self._active_ids()))
        self.now += 1
        start, end, n = self.model[sid]
        if count == n:
            with pytest.raises(ValueError, match="already has"):
                self.layout.rebucket_segment(sid, count, self.now)
            return
        new_id = self.layout.next_segment_id
        new = self.layout.rebucket_segment(sid, count, self.now)
        del self.model[sid]
        self._apply(new, {new_id: (start, end, count)})

    @rule(data=st.data())
    def prune(self, data: st.DataObject) -> None:
        sealed = [i for i, s in self.layout.segments.items() if not s.is_active]
        if not sealed:
            return
        self._apply(self.layout.prune_segment(data.draw(st.sampled_from(sealed))), {})

    @invariant()
    def active_segments_tile_the_ring_as_modelled(self) -> None:
        active = self.layout.active_segments()
        got = {s.segment_id: (s.hash_range.start, s.hash_range.end, s.bucket_count) for s in active}
        assert got == self.model
        assert active[0].hash_range.start == 0 and active[-1].hash_range.end == 0xFFFF
        for left, right in pairwise(active):
            assert left.hash_range.end + 1 == right.hash_range.start

    @invariant()
    def ids_are_unique_and_below_next_id(self) -> None:
        ids = list(self.layout.segments)
        assert len(set(ids)) == len(ids)
        assert all(i < self.layout.next_segment_id for i in ids)

    @invariant()
    def every_hash_routes_to_exactly_one_active_segment_and_bucket(self) -> None:
        active = self.layout.active_segments()
        starts = [s.hash_range.start for s in active]
        ids, buckets = self.layout.route_hashes(PROBE_HASHES)
        for h, sid, bucket in zip(
            PROBE_HASHES[:300].tolist(), ids.tolist(), buckets.tolist(), strict=False
        ):
            seg = active[bisect.bisect_right(starts, h >> 16) - 1]
            assert sid == seg.segment_id and seg.hash_range.contains(h >> 16)
            assert bucket == bisect.bisect_right(seg.bucket_splits, h & 0xFFFF)
        counts = {s.segment_id: s.bucket_count for s in active}
        assert all(0 <= b < counts[s] for s, b in zip(ids.tolist(), buckets.tolist(), strict=True))

    @invariant()
    def json_round_trips(self) -> None:
        assert TopicLayout.from_json(self.layout.to_json()) == self.layout


LayoutMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25)
TestLayoutMachine = LayoutMachine.TestCase


@given(st.integers(1, 300), st.integers(1, 600))
def test_budget_rule_of_initial_layouts(n: int, budget: int) -> None:
    layout = TopicLayout.initial(n, bucket_budget=budget)
    assert {s.bucket_count for s in layout.active_segments()} == {max(1, budget // n)}


def test_migrated_layout_of_a_thousand_partitions() -> None:
    """Every parent names every child: the DAG check looks edges up in sets, so 1,024
    partitions (about a million edges) are checked in well under a second (it was cubic)."""
    layout = ks.create_migrated_metadata("persistent://shop/eu/orders", 1024)
    assert len(layout.segments) == 2048 and layout.next_segment_id == 2048
    children = tuple(range(1024, 2048))
    assert all(layout.segments[p].child_ids == children for p in range(1024))
    assert all(layout.segments[c].parent_ids == tuple(range(1024)) for c in children)
