"""keyshared's own checks on SubscriptionCoordinator and compute_assignment arguments (the
behaviour ported from Pulsar is in test_pulsar_subscription_coordinator.py)."""

from __future__ import annotations

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
            {"sessions": [ks.ConsumerSession("a", 1)]},
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
