"""keyshared.explain.scalable_topic: a scalable topic's DAG, what still drains and what waits for
it, where keys go and who reads what, from the admin REST JSON of a 5.0 broker.

tests/fixtures/scalable/split-merge.json is in the broker's JSON form (the fields of M1's
``ScalableTopicMetadata``, ``SegmentInfo`` and ``ScalableTopicStats``): two segments, the
first split (0 -> 2, 3), then 3 merged with 1 into 4; the subscription ``sub`` has drained
segment 0 and still has entries in 1 and 3."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keyshared.cli import main
from keyshared.explain import ScalableSnapshot, explain_scalable, read_snapshot
from keyshared.explain.scalable_topic import read_layout, routing_hash
from keyshared.routing import bucket_hash, segment_hash
from keyshared.scalable import (
    SegmentTopicName,
    TopicLayout,
    TopicName,
    compute_assignment,
    is_assignable,
)
from keyshared.versions import M1, MASTER

FIXTURE = Path(__file__).parents[1] / "fixtures" / "scalable" / "split-merge.json"
SUB = "sub"


def snapshot_json() -> Any:
    return json.loads(FIXTURE.read_text())


def broker_json(layout: TopicLayout) -> dict[str, Any]:
    """``layout`` in the broker's ``ScalableTopicMetadata`` JSON form."""
    return {
        "epoch": layout.epoch,
        "nextSegmentId": layout.next_segment_id,
        "segments": {
            str(i): {
                "segmentId": s.segment_id,
                "hashRange": {"start": s.hash_range.start, "end": s.hash_range.end},
                "state": s.state.value,
                "parentIds": list(s.parent_ids),
                "childIds": list(s.child_ids),
                "createdAtEpoch": s.created_at_epoch,
                "sealedAtEpoch": s.sealed_at_epoch,
                "createdAtMs": s.created_at_ms,
                "sealedAtMs": s.sealed_at_ms,
                "legacyTopicName": s.legacy_topic_name,
            }
            for i, s in layout.segments.items()
        },
    }


def test_the_broker_layout_reads_as_the_topic_layout_it_is() -> None:
    t0 = 1795620000000
    want = TopicLayout.initial(2, now_ms=t0).split_segment(0, t0 + 60_000)
    want = want.merge_segments(3, 1, t0 + 120_000)
    got = read_layout(snapshot_json()["layout"]).to_dict()
    # M1's layout has no entry buckets (PIP-486 came after it): every segment reads as one.
    assert all(s.pop("bucket_splits") == [] for s in got["segments"])
    expected = want.to_dict()
    for s in expected["segments"]:
        del s["bucket_splits"]
    assert got == expected


def test_the_fixture_says_what_drains_what_waits_and_who_reads_what() -> None:
    snap = read_snapshot(snapshot_json())
    e = explain_scalable(snap, SUB, consumers=["c1", "c0"], keys=["order-1", "order-2"])
    assert e.still_draining == (1, 3)
    by_id = {s.segment_id: s for s in e.segments}
    assert by_id[0].drained and by_id[1].backlog == 5 and by_id[3].backlog == 2
    assert by_id[4].waiting_for == (3, 1) and not by_id[4].assignable and by_id[4].consumers == ()
    assert by_id[2].waiting_for == () and by_id[2].assignable
    topic = TopicName.get(snap.topic)
    want = compute_assignment(snap.layout, topic, ["c0", "c1"], {0})
    readers = {sid: [n for n, a in want.items() if sid in a.segment_ids] for sid in by_id}
    assert {sid: list(s.consumers) for sid, s in by_id.items()} == readers
    assert e.lines[0] == (
        "topic://public/default/orders epoch 2: 2 active, 3 sealed segment(s); subscription sub:"
        " 2 consumer(s)"
    )
    assert (
        "segment 1 (8000-ffff) still drains: 5 entries of sub left; segment(s) 4 wait for it"
        in (e.lines)
    )
    for k in e.keys:
        assert k.segment_id == snap.layout.route(k.key)[0] == 4
        assert k.waits_for == ((1,) if segment_hash(k.key) >= 0x8000 else (3,))
    assert json.loads(json.dumps(e.to_dict()))["still_draining"] == [1, 3]


def test_the_m1_profile_routes_by_the_low_half() -> None:
    snap = read_snapshot(snapshot_json())
    keys = [f"order-{i}" for i in range(200)]
    m1 = explain_scalable(snap, SUB, keys=keys, pulsar_version=M1)
    master = explain_scalable(snap, SUB, keys=keys)
    for a, b in zip(m1.keys, master.keys, strict=True):
        assert a.routing_hash == bucket_hash(a.key) == routing_hash(a.key, M1)
        assert b.routing_hash == segment_hash(b.key) == routing_hash(b.key, MASTER)
        assert a.segment_id == snap.layout.find_active_segment(a.routing_hash).segment_id
    assert any(a.segment_id != b.segment_id for a, b in zip(m1.keys, master.keys, strict=True))
    with pytest.raises(ValueError, match="pulsar_version must be one of"):
        explain_scalable(snap, SUB, pulsar_version="4.2.4")


# A random history of splits and merges, and a random backlog per sealed segment.
@st.composite
def histories(draw: st.DrawFn) -> tuple[TopicLayout, dict[int, int]]:
    layout = TopicLayout.initial(draw(st.integers(1, 3)))
    for step in range(draw(st.integers(0, 6))):
        active = layout.active_segments()
        if len(active) > 1 and draw(st.booleans()):
            i = draw(st.integers(0, len(active) - 2))
            layout = layout.merge_segments(active[i].segment_id, active[i + 1].segment_id, step)
        else:
            seg = draw(st.sampled_from(active))
            if seg.hash_range.end > seg.hash_range.start:
                layout = layout.split_segment(seg.segment_id, step)
    sealed = [s.segment_id for s in layout.segments.values() if s.is_sealed]
    backlogs = {sid: draw(st.integers(0, 3)) for sid in sealed}
    return layout, backlogs


@settings(max_examples=150, deadline=None)
@given(histories(), st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True), st.data())
def test_waiting_and_reading_follow_the_drain_order(
    history: tuple[TopicLayout, dict[int, int]], consumers: list[str], data: st.DataObject
) -> None:
    layout, backlogs = history
    topic = "topic://t/ns/x"
    snap = ScalableSnapshot(topic, layout, {SUB: len(consumers)}, {SUB: backlogs})
    keys = data.draw(st.lists(st.text(max_size=6), max_size=20))
    e = explain_scalable(snap, SUB, consumers=consumers, keys=keys)
    drained = {sid for sid, n in backlogs.items() if n == 0}
    assert set(e.still_draining) == {sid for sid, n in backlogs.items() if n > 0}
    for s in e.segments:
        seg = layout.segment(s.segment_id)
        assert s.assignable == is_assignable(seg, layout, drained)
        # An active segment is read only once no parent still drains.
        if seg.is_active:
            assert s.assignable == (not s.waiting_for)
        if not s.assignable:
            assert s.consumers == ()
    assignment = compute_assignment(layout, TopicName.get(topic), consumers, drained)
    for name, a in assignment.items():
        for sid in a.segment_ids:
            assert name in next(s for s in e.segments if s.segment_id == sid).consumers
    for k in e.keys:
        seg = layout.segment(k.segment_id)
        assert seg.is_active and seg.hash_range.start <= k.routing_hash <= seg.hash_range.end
        for sid in k.waits_for:
            ancestor = layout.segment(sid)
            assert ancestor.is_sealed and sid not in drained
            assert ancestor.hash_range.start <= k.routing_hash <= ancestor.hash_range.end
        assert (
            not k.waits_for
            or not is_assignable(seg, layout, drained)
            or any(layout.segment(p).is_sealed for p in seg.parent_ids)
        )
        descriptor = SegmentTopicName.from_parent(
            TopicName.get(topic), seg.hash_range, seg.segment_id
        )
        assert str(descriptor).endswith(seg.descriptor)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("layout", "segments", "2", "hashRange"),
            r"layout\.segments\['2'\]\.hashRange is missing",
        ),
        (("layout", "nextSegmentId"), r"layout\.nextSegmentId is missing"),
        (("topic",), r"snapshot\.topic is missing"),
    ],
)
def test_bad_snapshots_name_the_field(edit: tuple[str, ...], message: str) -> None:
    data = snapshot_json()
    node = data
    for part in edit[:-1]:
        node = node[part]
    del node[edit[-1]]
    with pytest.raises(ValueError, match=message):
        read_snapshot(data)


def test_bad_snapshot_values_are_refused() -> None:
    data = snapshot_json()
    data["backlogs"]["sub"]["9"] = 1
    with pytest.raises(
        ValueError, match=r"snapshot\.backlogs\['sub'\] key '9' is not a segment id"
    ):
        read_snapshot(data)
    data = snapshot_json()
    data["topic"] = "persistent://public/default/orders"
    with pytest.raises(ValueError, match="is not a scalable topic"):
        read_snapshot(data)
    with pytest.raises(ValueError, match=r"stats\.subscriptions has no 'other' \(it has 'sub'\)"):
        explain_scalable(read_snapshot(snapshot_json()), "other")


def run(*argv: str) -> str:
    out = io.StringIO()
    assert main(["explain", *argv], out=out) == 0
    return out.getvalue()


def test_the_command_explains_a_saved_snapshot() -> None:
    text = run(str(FIXTURE), "--subscription", SUB, "--consumer", "c0", "--consumer", "c1",
               "--key", "order-1")  # fmt: skip
    lines = text.splitlines()
    assert lines[1] == "segment 0 (0000-7fff) drained"
    assert "segments (the DAG)" in text and "keys (routed as master producers do)" in text
    row = next(line for line in lines if line.startswith("4 "))
    assert row.split()[:5] == ["4", "4000-ffff", "ACTIVE", "3,1", "-"]
    got = json.loads(run(str(FIXTURE), "--subscription", SUB, "--json"))
    assert got["still_draining"] == [1, 3] and got["consumer_names"] == []
    assert "do not name them: give --consumer NAME" in got["lines"][-1]


def test_the_command_refuses_key_shared_flags_for_a_scalable_topic(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", str(FIXTURE), "--subscription", SUB, "--join", "x"]) == 2
    assert "--join is for Key_Shared subscriptions" in capsys.readouterr().err
    argv = ["explain", "--url", "http://127.0.0.1:9", "--topic", "topic://a/b/c"]
    assert main([*argv, "--subscription", SUB, "--timeout", "1"]) == 2
    assert "127.0.0.1:9/admin/v2/scalable/a/b/c" in capsys.readouterr().err


# --- recorded from a 5.0.0-M1 broker (tests/broker/test_broker_explain_scalable.py) ---------------

M1_SPLIT = FIXTURE.parent / "m1-split.json"


def test_the_recorded_m1_split_drains_segment_0_before_its_children() -> None:
    """Two segments got 40 keys from the V5 producer, none acked; then segment 0
    was split. ``m1-split.stored.json`` is the segment each key was stored in."""
    snap = read_snapshot(json.loads(M1_SPLIT.read_text()))
    stored: dict[str, int] = json.loads(M1_SPLIT.with_suffix(".stored.json").read_text())
    e = explain_scalable(snap, SUB, consumers=["reader"], keys=list(stored), pulsar_version=M1)
    by_id = {s.segment_id: s for s in e.segments}
    assert e.still_draining == (0,)
    assert by_id[0].backlog == sum(1 for s in stored.values() if s == 0) > 0
    assert by_id[2].waiting_for == by_id[3].waiting_for == (0,)
    assert by_id[0].consumers == by_id[1].consumers == ("reader",)
    assert by_id[2].consumers == by_id[3].consumers == ()
    for k in e.keys:
        if stored[k.key] == 0:
            assert k.segment_id in (2, 3) and k.waits_for == (0,)
        else:
            assert (k.segment_id, k.waits_for) == (1, ())
    # Routed by master's rule instead, keys would be placed in other segments.
    master = explain_scalable(snap, SUB, keys=list(stored))
    assert any(a.segment_id != b.segment_id for a, b in zip(e.keys, master.keys, strict=True))
