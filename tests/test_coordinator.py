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
