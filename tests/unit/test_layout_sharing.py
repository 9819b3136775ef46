"""Layout operations share what they do not change: the persistent containers behind
TopicLayout, and operations on layouts large enough to span many of their chunks, each
checked against the layout rebuilt whole from its parts and against the layout it came from,
which must not change."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keyshared import RoutingTable, TopicLayout
from keyshared.scalable import layout as layout_module
from keyshared.scalable._persistent import CHUNK, RangeList, SegmentMap

VERSIONS = ("master", "5.0.0-M1")


def snapshot(layout: TopicLayout) -> tuple[object, ...]:
    return (layout.to_json(), layout.active_segments(), dict(layout.segments.items()))


def rebuilt(layout: TopicLayout) -> TopicLayout:
    """The layout made whole from its parts, every index built from nothing."""
    return TopicLayout(layout.epoch, layout.next_segment_id, dict(layout.segments.items()))


def assert_same_as_rebuilt(layout: TopicLayout, rng: random.Random) -> None:
    whole = rebuilt(layout)
    assert whole == layout
    assert layout.active_segments() == whole.active_segments()
    assert list(layout.segments) == sorted(layout.segments)
    for h in [0, 0xFFFF, *(rng.randrange(0x10000) for _ in range(50))]:
        assert layout.find_active_segment(h) == whole.find_active_segment(h)
    for sid in rng.sample(sorted(layout.segments), min(40, len(layout.segments))):
        assert layout.merge_depth(sid) == whole.merge_depth(sid)
    assert_routes_as_built_whole(layout)
    layout.validate()


def assert_routes_as_built_whole(layout: TopicLayout) -> None:
    """Each release's routing table (made from the table of the layout the operation came
    from, where it had one) is the one built from every active segment."""
    for version in VERSIONS:
        routes = [(s.segment_id, s.hash_range, s.bucket_splits) for s in layout.active_segments()]
        assert layout.routing_table_for(version) == RoutingTable(routes, version)


@settings(max_examples=15)
@given(seed=st.integers(0, 2**32), start=st.sampled_from([1, 3, 200, 700]))
def test_operations_on_large_layouts_match_a_whole_rebuild(seed: int, start: int) -> None:
    rng = random.Random(seed)
    layout = TopicLayout.initial(start, bucket_budget=4 * start)
    for step in range(40):
        before, kept = layout, snapshot(layout)
        if rng.random() < 0.5:
            # A table built before the operation: the next layout's comes from it.
            layout.routing_table_for(rng.choice(VERSIONS))
        active = layout.active_segments()
        kind = rng.choice(["split", "merge", "rebucket", "prune"])
        if kind == "split":
            seg = rng.choice([s for s in active if s.hash_range.size > 1])
            layout = layout.split_segment(seg.segment_id, step)
        elif kind == "merge" and len(active) > 1:
            i = rng.randrange(len(active) - 1)
            a, b = active[i], active[i + 1]
            if rng.random() < 0.5:
                a, b = b, a
            layout = layout.merge_segments(a.segment_id, b.segment_id, step)
        elif kind == "rebucket":
            seg = rng.choice(active)
            layout = layout.rebucket_segment(seg.segment_id, seg.bucket_count + 1, step)
        else:
            sealed = [s.segment_id for s in layout.segments.values() if s.is_sealed]
            if not sealed:
                continue
            layout = layout.prune_segment(rng.choice(sealed))
        assert snapshot(before) == kept, "an operation changed the layout it came from"
        assert layout.epoch == before.epoch + 1
        if rng.random() < 0.3:
            assert_routes_as_built_whole(layout)
        if step % 8 == 7:
            assert_same_as_rebuilt(layout, rng)
    assert_same_as_rebuilt(layout, rng)


def test_operations_check_the_change_without_the_full_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the whole check off (as outside the tests), an operation still checks what it
    changed, and the layout it gives passes the whole check."""
    monkeypatch.setattr(layout_module, "_FULL_CHECKS", False)
    layout = TopicLayout.initial(1)
    for _ in range(9):
        for seg in layout.active_segments():
            layout = layout.split_segment(seg.segment_id, 5)
    active = layout.active_segments()
    layout = layout.merge_segments(active[0].segment_id, active[1].segment_id, 6)
    assert layout.validate() is layout
    assert layout.merge_depth(layout.next_segment_id - 1) == 1


def test_validate_finds_indexes_that_disagree_with_the_dag() -> None:
    layout = TopicLayout.initial(4)
    broken = rebuilt(layout)
    object.__setattr__(broken, "_ranges", RangeList(layout.active_segments()[::-1]))
    with pytest.raises(AssertionError, match="active segments"):
        broken.validate()


def test_segment_map_shares_untouched_chunks_and_keeps_id_order() -> None:
    base = SegmentMap((i, str(i)) for i in range(0, 1000, 3))
    after = base.updated([(3, "x"), (2000, "new")], removed=[6])
    assert list(base) == list(range(0, 1000, 3))
    assert base[3] == "3" and 6 in base and 2000 not in base
    assert after[3] == "x" and after[2000] == "new" and 6 not in after
    assert list(after) == [i for i in range(0, 1000, 3) if i != 6] + [2000]
    assert len(after) == len(base) == 334
    # Chunks far from the change are the same objects.
    assert after._chunks[900 >> 6] is base._chunks[900 >> 6]
    # Ids inserted below others still iterate in order.
    lower = after.updated([(1, "one"), (-64, "neg")])
    assert list(lower)[:3] == [-64, 0, 1]
    assert dict(lower.items()) == {**dict(after.items()), 1: "one", -64: "neg"}
    assert list(lower.values())[:2] == ["neg", "0"]
    assert lower.get("a") is None and "a" not in lower and 1.5 not in lower
    with pytest.raises(KeyError):
        lower["a"]  # type: ignore[index]
    emptied = SegmentMap([(5, "a")]).updated([], removed=[5])
    assert len(emptied) == 0 and list(emptied) == []


def test_range_list_replaces_runs_across_chunks() -> None:
    layout = TopicLayout.initial(5 * CHUNK)
    active = layout.active_segments()
    ranges = RangeList(active)
    assert tuple(ranges) == active and len(ranges) == len(active)
    # The last of one chunk and the first of the next, as a merge takes them.
    a, b = active[CHUNK - 1], active[CHUNK]
    merged = layout.merge_segments(a.segment_id, b.segment_id, 1)
    new = merged.segment(merged.next_segment_id - 1)
    replaced = ranges.replaced(a.hash_range.start, 2, [new])
    assert tuple(replaced) == (*active[: CHUNK - 1], new, *active[CHUNK + 1 :])
    assert tuple(ranges) == active
    for h in (0, a.hash_range.start, b.hash_range.end, 0xFFFF):
        assert replaced.find(h).hash_range.contains(h)
    # A chunk that grows to twice its length is cut again.
    grown = replaced
    for _ in range(3 * CHUNK):
        grown = grown.replaced(new.hash_range.start, 1, [new, new])
    assert len(grown) == len(replaced) + 3 * CHUNK
    assert max(len(c) for c in grown._chunks) < 2 * CHUNK


def test_a_replaced_table_refuses_replacements_that_do_not_tile() -> None:
    table = TopicLayout.initial(2).routing_table
    (left, right) = TopicLayout.initial(2).active_segments()
    half = right.hash_range.split()[0]
    with pytest.raises(ValueError, match=r"tile|gap|overlap"):
        table.replaced(right.hash_range.start, 1, [(9, half, ())])
    with pytest.raises(ValueError):
        table.replaced(right.hash_range.start, 1, [(left.segment_id, right.hash_range, ())])
    same = table.replaced(right.hash_range.start, 1, [(7, right.hash_range, (10,))])
    assert same.route_hash(0xFFFF_FFFF) == (7, 1)
    assert same.pulsar_version == table.pulsar_version


def test_replaced_names_a_wrong_argument() -> None:
    table = TopicLayout.initial(2).routing_table
    with pytest.raises(TypeError, match="start"):
        table.replaced("0", 1, [])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="start"):
        table.replaced(0x10000, 1, [])
    with pytest.raises(ValueError, match="count"):
        table.replaced(0, -1, [])
    with pytest.raises(TypeError, match="segments"):
        table.replaced(0, 1, 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        table.replaced(0, 2, [])
