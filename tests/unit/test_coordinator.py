"""keyshared's own checks on SubscriptionCoordinator and compute_assignment arguments (the
behaviour ported from Pulsar is in test_pulsar_subscription_coordinator.py)."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest

import keyshared as ks

TOPIC = ks.TopicName.get("topic://shop/eu/orders")
LAYOUT = ks.TopicLayout.initial(2)


def coordinator() -> ks.SubscriptionCoordinator:
    return ks.SubscriptionCoordinator("sub", TOPIC, LAYOUT)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: ks.compute_assignment(LAYOUT, TOPIC, "ab"),
            "consumer_names must be an iterable of str, got a lone str",
        ),
        (
            lambda: coordinator().restore_consumers("ab", 0),
            "persisted_consumer_names must be an iterable of str, got a lone str",
        ),
        (
            lambda: coordinator().restore_consumers(["a", 7], 0),
            r"persisted_consumer_names\[1\] must be a str, got int",
        ),
        (lambda: coordinator().register_consumer(5, consumer_id=1), "consumer_name must be a str"),
        (lambda: coordinator().unregister_consumer(b"a", 1), "consumer_name must be a str"),
        (lambda: coordinator().on_consumer_disconnect(None, 0), "consumer_name must be a str"),
    ],
)
def test_names_are_checked_and_named(call: Callable[[], object], message: str) -> None:
    """A lone str is not taken as one consumer per letter, and each error names the
    argument the caller passed."""
    with pytest.raises(TypeError, match=message):
        call()


def test_a_list_of_names_still_assigns() -> None:
    assignment = ks.compute_assignment(LAYOUT, TOPIC, ["ab"])
    assert list(assignment) == ["ab"]
    assert assignment["ab"].segment_ids == (0, 1)


# --- the 5.0.0-M1 profile ---------------------------------------------------------------


def test_active_children_blocked_until_parent_drained_on_m1() -> None:
    """Pulsar's testActiveChildrenBlockedUntilParentDrained under the 5.0.0-M1 profile: the
    children of 0 wait for it, and once it drained 0 stays assigned beside them (master
    retires it: test_pulsar_subscription_coordinator.py)."""
    layout = ks.TopicLayout.initial(4, 4).split_segment(0, 0)
    c = ks.SubscriptionCoordinator(
        "test-sub", TOPIC, layout, drain_checker=True, pulsar_version="5.0.0-M1"
    )
    c, result = c.register_consumer("consumer-1", 1)
    assert set(result["consumer-1"].segment_ids) == {0, 1, 2, 3}
    c = c.mark_segments_drained({0})
    assert set(c.current_assignment()["consumer-1"].segment_ids) == {0, 1, 2, 3, 4, 5}


def test_m1_keeps_drained_sealed_segments_and_waits_for_parents_of_active_ones() -> None:
    """The broker's answer in issue 28: 4 segments, 0 split into 4 and 5, merged into 6,
    0, 4 and 5 drained."""
    layout = ks.TopicLayout.initial(4, 1).split_segment(0, 5).merge_segments(4, 5, 7)
    names = ["c1", "c0"]
    m1 = ks.compute_assignment(layout, TOPIC, names, {0, 4, 5}, pulsar_version="5.0.0-M1")
    assert {n: a.segment_ids for n, a in m1.items()} == {"c0": (4, 6, 1, 3), "c1": (0, 5, 2)}
    master = ks.compute_assignment(layout, TOPIC, names, {0, 4, 5})
    assert {n: a.segment_ids for n, a in master.items()} == {"c0": (6, 2), "c1": (1, 3)}
    # Before 4 and 5 drain, 6 waits on both releases; the sealed 4 and 5 do not wait for 0
    # on M1.
    waiting = ks.compute_assignment(layout, TOPIC, ["c0"], {0}, pulsar_version="5.0.0-M1")
    assert waiting["c0"].segment_ids == (4, 0, 5, 1, 2, 3)
    assert ks.compute_assignment(layout, TOPIC, ["c0"], set())["c0"].segment_ids == (0, 1, 2, 3)


def test_m1_leaves_surplus_consumers_idle() -> None:
    """M1 has no entry buckets: a segment goes whole to one consumer, the rest idle."""
    layout = ks.TopicLayout.initial(2, 4)
    m1 = ks.compute_assignment(layout, TOPIC, ["a", "b", "c"], pulsar_version="5.0.0-M1")
    assert [m1[n].segment_ids for n in "abc"] == [(0,), (1,), ()]
    assert all(not s.bucket_ranges for a in m1.values() for s in a.assigned_segments)
    master = ks.compute_assignment(layout, TOPIC, ["a", "b", "c"])
    assert master["c"].segment_ids == (0,)


@pytest.mark.parametrize("version", ["master", "5.0.0-M1"])
def test_an_assignment_computed_again_names_each_topic_and_layout_as_a_fresh_one(
    version: str,
) -> None:
    """A layout keeps the segment records it dealt, per topic: assignments computed again on
    it, under another topic, on its unpickled copy and on the layouts operations make from
    it are those of a layout read afresh from its JSON."""
    layout = ks.TopicLayout.initial(4, 2).split_segment(0, 5).merge_segments(2, 3, 9)
    other = ks.TopicName.get("topic://shop/us/orders")
    names = ["c0", "c1", "c2"]

    def fresh(of: ks.TopicLayout, topic: ks.TopicName) -> dict[str, ks.ConsumerAssignment]:
        copy = ks.TopicLayout.from_dict(of.to_dict())
        return ks.compute_assignment(copy, topic, names, {0}, pulsar_version=version)

    def again(of: ks.TopicLayout, topic: ks.TopicName) -> dict[str, ks.ConsumerAssignment]:
        return ks.compute_assignment(of, topic, names, {0}, pulsar_version=version)

    assert again(layout, TOPIC) == fresh(layout, TOPIC)
    assert again(layout, TOPIC) == fresh(layout, TOPIC)
    assert again(layout, other) == fresh(layout, other)
    names_in = {
        s.segment_topic_name for a in again(layout, other).values() for s in a.assigned_segments
    }
    assert names_in and all(n.startswith("segment://shop/us/orders/") for n in names_in)
    unpickled = pickle.loads(pickle.dumps(layout))
    assert "_memo" not in unpickled.__dict__
    assert again(unpickled, TOPIC) == fresh(layout, TOPIC)
    split = layout.split_segment(4, 7)
    assert again(split, TOPIC) == fresh(split, TOPIC)
    pruned = split.prune_segment(0)
    assert again(pruned, TOPIC) == fresh(pruned, TOPIC)


def test_the_coordinator_carries_its_profile() -> None:
    layout = ks.TopicLayout.initial(4, 1).split_segment(0, 5)
    c = ks.SubscriptionCoordinator(
        "sub", TOPIC, layout, drain_checker=True, pulsar_version="5.0.0-M1"
    )
    c, _ = c.register_consumer("a", 1)
    c, assignment = c.on_layout_change(layout)
    assert assignment["a"].segment_ids == (0, 1, 2, 3)
    c = c.mark_segments_drained({0})
    assert c.current_assignment()["a"].segment_ids == (4, 0, 5, 1, 2, 3)
    assert c.pulsar_version == "5.0.0-M1"


@pytest.mark.parametrize(
    ("version", "error", "message"),
    [
        ("4.2", ValueError, r"pulsar_version '4\.2': scalable topics need Pulsar 5\.0"),
        ("5.0", ValueError, "pulsar_version must be one of 'master', '5.0.0-M1', got '5.0'"),
        (5, TypeError, "pulsar_version must be a str, got int"),
    ],
)
def test_an_unknown_release_is_refused(version: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        ks.compute_assignment(LAYOUT, TOPIC, ["a"], pulsar_version=version)  # type: ignore[arg-type]
    with pytest.raises(error, match=message):
        ks.SubscriptionCoordinator("sub", TOPIC, LAYOUT, pulsar_version=version)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"drained_segment_ids": "12"},
            TypeError,
            "drained_segment_ids must be a collection of segment ids \\(int\\), got str",
        ),
        (
            {"drained_segment_ids": 3},
            TypeError,
            "drained_segment_ids must be a collection of segment ids \\(int\\), got int",
        ),
        (
            {"drained_segment_ids": [-1]},
            ValueError,
            r"drained_segment_ids\[0\] must be >= 0, got -1",
        ),
        (
            {"drained_segment_ids": [0, "1"]},
            TypeError,
            r"drained_segment_ids\[1\] must be an int, got str",
        ),
        (
            {"sessions": [ks.scalable.ConsumerSession("a", 1)]},
            TypeError,
            "sessions must be a mapping .*got list",
        ),
        (
            {"topic": ks.TopicName.get("persistent://shop/eu/orders")},
            ValueError,
            "topic must be a scalable topic \\(domain 'topic'\\), got 'persistent'",
        ),
        ({"topic": "topic://shop/eu/orders"}, TypeError, "topic must be a TopicName, got str"),
    ],
)
def test_construction_names_the_bad_argument(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    """Refused up front, naming the field: a str is not taken as its letters, and a topic
    that is not scalable does not wait for the first consumer to fail."""
    args: dict[str, object] = {"subscription_name": "sub", "topic": TOPIC, "layout": LAYOUT}
    with pytest.raises(error, match=message):
        ks.SubscriptionCoordinator(**{**args, **kwargs})  # type: ignore[arg-type]


def test_a_topic_that_is_not_scalable_is_refused_without_consumers_too() -> None:
    persistent = ks.TopicName.get("persistent://shop/eu/orders")
    with pytest.raises(ValueError, match="topic must be a scalable topic"):
        ks.compute_assignment(LAYOUT, persistent, [])


@pytest.mark.parametrize(
    ("segment_ids", "error", "message"),
    [
        ("0", TypeError, "segment_ids must be a collection of segment ids"),
        (0, TypeError, "segment_ids must be a collection of segment ids"),
        ([-2], ValueError, r"segment_ids\[0\] must be >= 0"),
    ],
)
def test_mark_segments_drained_names_the_bad_id(
    segment_ids: object, error: type[Exception], message: str
) -> None:
    before = coordinator().install_drain_checker()
    with pytest.raises(error, match=message):
        before.mark_segments_drained(segment_ids)  # type: ignore[arg-type]
    assert before.drained_segment_ids == frozenset()


def test_drained_ids_of_any_collection_are_kept() -> None:
    layout = LAYOUT.split_segment(0, 10)
    c = ks.SubscriptionCoordinator("sub", TOPIC, layout, drained_segment_ids=(0,))
    assert c.drained_segment_ids == frozenset({0})
    assert c.mark_segments_drained(iter([0])).drained_segment_ids == frozenset({0})
