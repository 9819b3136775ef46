"""Pulsar's SegmentLayoutTest and EntryBucketSplitsTest, ported (same inputs and expected
values; ``createInitialMetadata(n, budget, ...)`` is ``TopicLayout.initial(n, budget)``), and
property tests: layouts built by random operation sequences keep their tiling, their DAG
links, their epochs and their lineage consistent."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import keyshared as ks
from keyshared import HashRange, TopicLayout, create_migrated_metadata
from keyshared.routing import equal_width_splits

# --- SegmentLayoutTest -------------------------------------------------------------------------


def test_initial_layout() -> None:
    layout = TopicLayout.initial(2, 4)
    assert layout.epoch == 0
    assert len(layout.active_segments()) == 2
    assert len(layout.segments) == 2
    seg0, seg1 = layout.segments[0], layout.segments[1]
    assert seg0.hash_range == HashRange(0x0000, 0x7FFF)
    assert seg1.hash_range == HashRange(0x8000, 0xFFFF)
    assert seg0.is_active and seg1.is_active


def test_single_segment_initial_layout() -> None:
    layout = TopicLayout.initial(1, 4)
    assert len(layout.active_segments()) == 1
    assert layout.segments[0].hash_range == HashRange.full()


def test_four_segment_initial_layout() -> None:
    layout = TopicLayout.initial(4, 4)
    assert len(layout.active_segments()) == 4
    expected_start = 0
    for i in range(4):
        seg = layout.segments[i]
        assert seg.hash_range.start == expected_start
        expected_start = seg.hash_range.end + 1
    assert layout.segments[3].hash_range.end == 0xFFFF


def test_find_active_segment() -> None:
    layout = TopicLayout.initial(2, 4)
    assert layout.find_active_segment(0x1000).segment_id == 0
    assert layout.find_active_segment(0x9000).segment_id == 1


def test_split_segment() -> None:
    after = TopicLayout.initial(2, 4).split_segment(0, 0)
    assert after.epoch == 1
    assert len(after.active_segments()) == 3
    assert len(after.segments) == 4
    sealed = after.segments[0]
    assert sealed.is_sealed
    assert sealed.child_ids == (2, 3)
    child1, child2 = after.segments[2], after.segments[3]
    assert child1.is_active and child2.is_active
    assert child1.parent_ids == (0,) and child2.parent_ids == (0,)
    assert child1.hash_range == HashRange(0x0000, 0x3FFF)
    assert child2.hash_range == HashRange(0x4000, 0x7FFF)


def test_split_non_active_segment() -> None:
    after = TopicLayout.initial(2, 4).split_segment(0, 0)
    with pytest.raises(ValueError, match="sealed"):
        after.split_segment(0, 0)


def test_merge_segments() -> None:
    after_split = TopicLayout.initial(2, 4).split_segment(0, 0)
    after_merge = after_split.merge_segments(2, 3, 0)
    assert after_merge.epoch == 2
    assert len(after_merge.active_segments()) == 2
    assert after_merge.segments[2].is_sealed and after_merge.segments[3].is_sealed
    merged = after_merge.segments[4]
    assert merged.is_active
    assert merged.hash_range == HashRange(0x0000, 0x7FFF)
    assert merged.parent_ids == (2, 3)


def test_rebucket_segment() -> None:
    layout = TopicLayout.initial(1, 4)
    after = layout.rebucket_segment(0, 8, 123)
    assert after.epoch == 1
    assert len(after.active_segments()) == 1
    assert len(after.segments) == 2
    sealed = after.segments[0]
    assert sealed.is_sealed and sealed.child_ids == (1,) and sealed.sealed_at_ms == 123
    successor = after.segments[1]
    assert successor.is_active and successor.parent_ids == (0,)
    assert successor.hash_range == sealed.hash_range
    assert successor.bucket_count == 8 and successor.created_at_ms == 123
    assert list(successor.bucket_splits) == equal_width_splits(8)


def test_rebucket_rejects_invalid_targets() -> None:
    layout = TopicLayout.initial(1, 4)
    with pytest.raises(ValueError, match="99"):
        layout.rebucket_segment(99, 8, 0)
    with pytest.raises(ValueError, match="already has 4"):
        layout.rebucket_segment(0, 4, 0)
    after_split = layout.split_segment(0, 0)
    with pytest.raises(ValueError, match="sealed"):
        after_split.rebucket_segment(0, 8, 0)


def test_split_records_wall_clock_timestamps() -> None:
    created_at = 1_600_000_000_000
    layout = TopicLayout.initial(1, 4, now_ms=created_at)
    split_at = 1_700_000_000_000
    after = layout.split_segment(0, split_at)
    parent = after.segments[0]
    assert parent.is_sealed and parent.sealed_at_ms == split_at
    assert parent.created_at_ms == created_at > 0
    child1, child2 = after.segments[1], after.segments[2]
    assert child1.created_at_ms == child2.created_at_ms == split_at
    assert child1.sealed_at_ms == child2.sealed_at_ms == -1


def test_merge_records_wall_clock_timestamps() -> None:
    split_at = 1_700_000_000_000
    after_split = TopicLayout.initial(2, 4).split_segment(0, split_at)
    merge_at = split_at + 60_000
    after_merge = after_split.merge_segments(2, 3, merge_at)
    assert after_merge.segments[2].sealed_at_ms == merge_at
    assert after_merge.segments[3].sealed_at_ms == merge_at
    merged = after_merge.segments[4]
    assert merged.created_at_ms == merge_at and merged.sealed_at_ms == -1


def test_merge_non_adjacent_segments() -> None:
    with pytest.raises(ValueError, match="not adjacent"):
        TopicLayout.initial(4, 4).merge_segments(0, 2, 0)


def test_prune_segment() -> None:
    after_prune = TopicLayout.initial(2, 4).split_segment(0, 0).prune_segment(0)
    assert 0 not in after_prune.segments
    assert after_prune.segments[2].parent_ids == ()
    assert after_prune.segments[3].parent_ids == ()


def test_cannot_prune_active_segment() -> None:
    with pytest.raises(ValueError, match="active"):
        TopicLayout.initial(2, 4).prune_segment(0)


def test_get_children() -> None:
    after_split = TopicLayout.initial(1, 4).split_segment(0, 0)
    children = after_split.children(0)
    assert len(children) == 2
    assert children[0].segment_id == 1 and children[1].segment_id == 2


def test_get_parents() -> None:
    after_split = TopicLayout.initial(1, 4).split_segment(0, 0)
    parents = after_split.parents(1)
    assert len(parents) == 1 and parents[0].segment_id == 0
    assert after_split.parents(0) == ()


def test_get_lineage() -> None:
    after_split = TopicLayout.initial(1, 4).split_segment(0, 0)
    assert len(after_split.lineage(0)) == 3


def test_to_metadata() -> None:
    # The layout's stored form carries the whole DAG through a split; the per-topic policy
    # override is not part of a layout here (a DecisionSnapshot holds it beside the layout).
    after_split = TopicLayout.initial(2, 4).split_segment(0, 0)
    restored = TopicLayout.from_json(after_split.to_json())
    assert restored.epoch == 1
    assert restored.next_segment_id == 4
    assert len(restored.segments) == 4
    assert restored == after_split


def test_next_segment_id_advances() -> None:
    layout = TopicLayout.initial(2, 4)
    assert layout.next_segment_id == 2
    split1 = layout.split_segment(0, 0)
    assert split1.next_segment_id == 4
    assert split1.split_segment(1, 0).next_segment_id == 6


def test_merge_depth_zero_for_never_merged_segments() -> None:
    layout = TopicLayout.initial(2, 4)
    assert layout.merge_depth(0) == layout.merge_depth(1) == 0
    after_split = layout.split_segment(0, 0)
    assert after_split.merge_depth(2) == after_split.merge_depth(3) == 0


def test_merge_depth_counts_merges_in_lineage() -> None:
    layout = (
        TopicLayout.initial(1, 4).split_segment(0, 0).merge_segments(1, 2, 0).split_segment(3, 0)
    )
    assert layout.merge_depth(3) == layout.merge_depth(4) == layout.merge_depth(5) == 1
    twice = layout.merge_segments(4, 5, 0)
    assert twice.merge_depth(twice.next_segment_id - 1) == 2


# --- EntryBucketSplitsTest ---------------------------------------------------------------------


def test_equal_width_single_bucket_has_no_splits() -> None:
    assert equal_width_splits(1) == []
    assert equal_width_splits(0) == []


def test_equal_width_powers_of_two_are_exact() -> None:
    assert equal_width_splits(2) == [0x8000]
    assert equal_width_splits(4) == [0x4000, 0x8000, 0xC000]


def test_equal_width_non_power_of_two_rounds_down() -> None:
    assert equal_width_splits(3) == [21845, 43690]


def test_buckets_for_budget_floors_at_least_one() -> None:
    assert ks.routing.buckets_for_budget(4, 1) == 4
    assert ks.routing.buckets_for_budget(4, 2) == 2
    assert ks.routing.buckets_for_budget(4, 4) == 1
    assert ks.routing.buckets_for_budget(4, 8) == 1
    assert ks.routing.buckets_for_budget(4, 3) == 1


def test_initial_single_segment_takes_whole_budget() -> None:
    assert TopicLayout.initial(1, 4).segments[0].bucket_count == 4


def test_initial_budget_split_across_segments() -> None:
    layout = TopicLayout.initial(2, 4)
    assert layout.segments[0].bucket_count == layout.segments[1].bucket_count == 2


def test_initial_segments_at_or_above_budget_settle_at_one_bucket() -> None:
    layout = TopicLayout.initial(4, 4)
    assert [layout.segments[i].bucket_count for i in range(4)] == [1, 1, 1, 1]


def test_migrated_children_share_budget_parents_have_one_bucket() -> None:
    md = create_migrated_metadata("persistent://tenant/ns/topic", 2, 4)
    assert md.segments[0].bucket_count == 1
    assert md.segments[1].bucket_count == 1
    assert md.segments[2].bucket_count == 2
    assert md.segments[3].bucket_count == 2


def test_split_halves_parent_buckets() -> None:
    after_split = TopicLayout.initial(1, 4).split_segment(0, 0)
    assert after_split.segments[1].bucket_count == after_split.segments[2].bucket_count == 2


def test_split_of_single_bucket_stays_single_bucket() -> None:
    after_split = TopicLayout.initial(4, 4).split_segment(0, 0)
    first_child = after_split.segments[0].child_ids[0]
    assert after_split.segments[first_child].bucket_count == 1


def test_merge_sums_child_buckets() -> None:
    merged = TopicLayout.initial(4, 4).merge_segments(0, 1, 0)
    merged_id = merged.segments[0].child_ids[0]
    assert merged.segments[merged_id].bucket_count == 2


def test_ranges_single_bucket_spans_whole_ring() -> None:
    assert ks.routing.bucket_ranges([]) == [HashRange(0, 0xFFFF)]


def test_ranges_from_splits() -> None:
    assert ks.routing.bucket_ranges([0x8000]) == [HashRange(0, 0x7FFF), HashRange(0x8000, 0xFFFF)]
    assert ks.routing.bucket_ranges([0x4000, 0x8000, 0xC000]) == [
        HashRange(0, 0x3FFF),
        HashRange(0x4000, 0x7FFF),
        HashRange(0x8000, 0xBFFF),
        HashRange(0xC000, 0xFFFF),
    ]


# --- createMigratedMetadata, in full -----------------------------------------------------------


@pytest.mark.parametrize(("partitions", "n"), [(0, 1), (-3, 1), (1, 1), (3, 3)])
def test_migrated_layout_wraps_every_partition_in_a_sealed_legacy_parent(
    partitions: int, n: int
) -> None:
    md = create_migrated_metadata("persistent://tenant/ns/topic", partitions, 8, now_ms=77)
    assert (md.epoch, md.next_segment_id) == (0, 2 * n)
    parents = [md.segments[k] for k in range(n)]
    children = [md.segments[n + j] for j in range(n)]
    for k, parent in enumerate(parents):
        assert parent.is_sealed and parent.is_root and parent.is_legacy
        assert parent.hash_range == HashRange.full()
        assert parent.child_ids == tuple(range(n, 2 * n))
        assert (parent.created_at_ms, parent.sealed_at_ms) == (77, 77)
        assert (parent.created_at_epoch, parent.sealed_at_epoch) == (0, 0)
        expected = "persistent://tenant/ns/topic" + (f"-partition-{k}" if partitions > 0 else "")
        assert parent.legacy_topic_name == expected
    assert [c.hash_range for c in children] == [
        s.hash_range for s in TopicLayout.initial(n, 8).active_segments()
    ]
    for child in children:
        assert child.is_active and not child.is_legacy and child.parent_ids == tuple(range(n))
        assert child.bucket_count == ks.routing.buckets_for_budget(8, n)
    assert TopicLayout.from_json(md.to_json()) == md


def test_migrated_layout_refuses_other_domains_and_bad_arguments() -> None:
    with pytest.raises(ValueError, match="persistent"):
        create_migrated_metadata("topic://tenant/ns/topic", 2)
    with pytest.raises(ValueError, match="entry_bucket_budget"):
        create_migrated_metadata("persistent://tenant/ns/topic", 2, 0)
    with pytest.raises(TypeError, match="partitions"):
        create_migrated_metadata("persistent://tenant/ns/topic", "2")  # type: ignore[arg-type]


# --- per-segment epochs and flags ---------------------------------------------------------------


def test_operations_record_created_and_sealed_epochs() -> None:
    layout = TopicLayout.initial(2, 4).split_segment(0, 10)
    layout = layout.merge_segments(3, 1, 20).rebucket_segment(2, 8, 30)
    epochs = {sid: (s.created_at_epoch, s.sealed_at_epoch) for sid, s in layout.segments.items()}
    assert epochs == {
        0: (0, 1),
        1: (0, 2),
        2: (1, 3),
        3: (1, 2),
        4: (2, -1),
        5: (3, -1),
    }
    assert [s.segment_id for s in layout.segments.values() if s.is_leaf] == [4, 5]
    assert [s.segment_id for s in layout.segments.values() if s.is_root] == [0, 1]


def test_lineage_lists_a_shared_ancestor_once() -> None:
    layout = TopicLayout.initial(1, 4).split_segment(0, 0).merge_segments(1, 2, 0)
    assert [s.segment_id for s in layout.lineage(3)] == [0, 1, 2, 3]
    assert [s.segment_id for s in layout.lineage(0)] == [0, 1, 3, 2]
    assert [s.segment_id for s in layout.lineage(1)] == [0, 1, 3]
    with pytest.raises(ValueError, match="7"):
        layout.lineage(7)


def test_older_layout_json_without_epochs_still_reads() -> None:
    data = TopicLayout.initial(1, 4).split_segment(0, 5).to_dict()
    for seg in data["segments"]:
        for key in ("created_at_epoch", "sealed_at_epoch", "legacy_topic_name"):
            del seg[key]
    layout = TopicLayout.from_dict(data)
    assert layout.segments[0].sealed_at_epoch == 0 and layout.segments[1].sealed_at_epoch == -1


def test_segment_epoch_rules_are_checked() -> None:
    full = HashRange.full()
    with pytest.raises(ValueError, match="sealed_at_epoch"):
        ks.Segment(0, full, sealed_at_epoch=1)
    with pytest.raises(ValueError, match="sealed_at_epoch"):
        ks.Segment(0, full, state=ks.SegmentState.SEALED, sealed_at_ms=1, created_at_epoch=2)
    with pytest.raises(ValueError, match="epoch above"):
        TopicLayout(0, 1, {0: ks.Segment(0, full, created_at_epoch=1)})
    with pytest.raises(TypeError, match="legacy_topic_name"):
        ks.Segment(0, full, legacy_topic_name=5)  # type: ignore[arg-type]


# --- properties -------------------------------------------------------------------------------


def _closure(layout: TopicLayout, segment_id: int, links: str) -> set[int]:
    """Every segment reachable from ``segment_id`` over one kind of link."""
    found: set[int] = set()
    todo = [segment_id]
    while todo:
        for other in getattr(layout.segments[todo.pop()], links):
            if other not in found:
                found.add(other)
                todo.append(other)
    return found


def _lineage_model(layout: TopicLayout, segment_id: int) -> set[int]:
    """Every ancestor and descendant, by a plain closure over the links."""
    parents = _closure(layout, segment_id, "parent_ids")
    return parents | {segment_id} | _closure(layout, segment_id, "child_ids")


class LayoutOperations(RuleBasedStateMachine):
    """Random splits, merges, rebuckets and prunes; the layout must stay consistent."""

    def __init__(self) -> None:
        super().__init__()
        self.layout = TopicLayout.initial(2, 8)
        self.now = 0

    def _tick(self) -> int:
        self.now += 1
        return self.now

    @rule(pick=st.integers(0, 10**6))
    def split(self, pick: int) -> None:
        active = [s for s in self.layout.active_segments() if s.hash_range.size > 1]
        if active:
            seg = active[pick % len(active)]
            self.layout = self.layout.split_segment(seg.segment_id, self._tick())

    @rule(pick=st.integers(0, 10**6), cap=st.none() | st.integers(1, 16))
    def merge(self, pick: int, cap: int | None) -> None:
        active = self.layout.active_segments()
        if len(active) > 1:
            i = pick % (len(active) - 1)
            a, b = active[i], active[i + 1]
            self.layout = self.layout.merge_segments(
                a.segment_id, b.segment_id, self._tick(), max_buckets=cap
            )

    @rule(pick=st.integers(0, 10**6), count=st.integers(1, 32))
    def rebucket(self, pick: int, count: int) -> None:
        active = self.layout.active_segments()
        seg = active[pick % len(active)]
        if seg.bucket_count != count:
            self.layout = self.layout.rebucket_segment(seg.segment_id, count, self._tick())

    @rule(pick=st.integers(0, 10**6))
    def prune(self, pick: int) -> None:
        sealed = [s for s in self.layout.segments.values() if s.is_sealed]
        if sealed:
            self.layout = self.layout.prune_segment(sealed[pick % len(sealed)].segment_id)

    @invariant()
    def consistent(self) -> None:
        layout = self.layout
        # The constructor checks tiling and links; a JSON round trip re-checks them.
        assert TopicLayout.from_json(layout.to_json()) == layout
        for sid, seg in layout.segments.items():
            assert seg.is_active != seg.is_sealed
            assert seg.is_leaf == (not layout.children(sid))
            assert seg.is_root == (not layout.parents(sid))
            assert seg.created_at_epoch <= layout.epoch
            if seg.is_sealed:
                assert seg.created_at_epoch <= seg.sealed_at_epoch <= layout.epoch
            for child in layout.children(sid):
                assert child.created_at_epoch == seg.sealed_at_epoch
            lineage = [s.segment_id for s in layout.lineage(sid)]
            assert len(lineage) == len(set(lineage))
            assert set(lineage) == _lineage_model(layout, sid)
            # Ancestors come before the segment, descendants after it.
            here = lineage.index(sid)
            assert set(lineage[:here]) == _closure(layout, sid, "parent_ids")
            assert set(lineage[here + 1 :]) == _closure(layout, sid, "child_ids")


TestLayoutOperations = LayoutOperations.TestCase
TestLayoutOperations.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)


@given(st.integers(1, 64), st.integers(1, 64), st.integers(-2, 64))
def test_migrated_layouts_are_valid_for_any_partition_count(
    budget: int, now: int, partitions: int
) -> None:
    md = create_migrated_metadata("persistent://t/n/x", partitions, budget, now_ms=now)
    n = max(partitions, 1)
    assert len(md.active_segments()) == n and len(md.segments) == 2 * n
    assert md.total_bucket_count == n * ks.routing.buckets_for_budget(budget, n)
    assert all(md.merge_depth(n + j) == (1 if n >= 2 else 0) for j in range(n))


def test_a_synthetic_layout_of_legacy_segments_names_them_in_the_layout_response() -> None:
    # The layout a not-yet-migrated partitioned topic shows V5 clients: one active legacy
    # segment per partition, routed by mod-N (see the router's tests).
    segments = {
        i: ks.Segment(
            i,
            HashRange(i * 0x8000, i * 0x8000 + 0x7FFF),
            legacy_topic_name=f"persistent://t/n/x-partition-{i}",
        )
        for i in range(2)
    }
    response = TopicLayout(0, 2, segments).layout_response()
    assert [s["legacy_topic_name"] for s in response["segments"]] == [
        "persistent://t/n/x-partition-0",
        "persistent://t/n/x-partition-1",
    ]
    assert "legacy_topic_name" not in TopicLayout.initial(1).layout_response()["segments"][0]
