"""``keyshared verify`` against running 4.2.4, 4.0.7 and 5.0.0-M1 standalone brokers.

Every scenario passes on each release, with every delivery the model predicted matched, and
removes its topic; a consumer subscribed with ``allowOutOfOrderDelivery=true`` is caught in
the ``join`` scenario and the verdict names it. The brokers run with a 2 s keep-alive, so
that the stall scenario's consumer stopped past it is dropped within seconds
(test_broker_verify_cli.py has the command's other promises).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.faults import record_fault
from support.pulsar_broker import KEEP_ALIVE, PulsarBroker
from support.pulsar_oracle import LTS, MILESTONE, NEWEST
from support.verify_cli import topics, verify, why


@pytest.fixture(scope="module", params=[NEWEST, LTS, MILESTONE])
def broker(request: pytest.FixtureRequest) -> Iterator[PulsarBroker]:
    """A standalone broker of each release in turn, with a short keep-alive: the session's
    for 4.2.4 and 4.0.7, one of this module's own for 5.0.0-M1."""
    shared = {NEWEST: "pulsar_broker", LTS: "lts_broker"}
    if request.param in shared:
        yield request.getfixturevalue(shared[request.param])
        return
    with PulsarBroker(request.param, settings=KEEP_ALIVE) as running:
        yield running


def tally(kind: str, answer: dict[str, Any]) -> None:
    """Adds a run's counts to the "under faults" summary."""
    for s in answer["verdict"]["scenarios"]:
        record_fault(
            f"verify {kind} {s['name']}",
            faults=1,
            messages=s["sent"],
            lost=s["lost"],
            duplicates=s["duplicates_allowed"] + s["duplicates_unexpected"],
            mismatched=s["predicted"] - s["matched"],
        )


def test_every_scenario_passes(broker: PulsarBroker) -> None:
    before = set(topics(broker))
    status, out, err = verify(broker, "--scenario", "all", "--json")
    assert status == 0, why(out, err)
    answer = json.loads(out)
    tally(broker.version, answer)
    verdict = answer["verdict"]
    assert verdict["passed"] and verdict["first"] is None
    by_name = {s["name"]: s for s in verdict["scenarios"]}
    assert list(by_name) == ["steady", "join", "leave", "crash", "stall", "nack"]
    for name, s in by_name.items():
        assert s["sent"] == 240 and s["lost"] == 0 and s["violations"] == [], name
        assert s["predicted"] == s["matched"] >= s["sent"], name
        assert s["duplicates_unexpected"] == 0, name
    # Held back while their hashes drained, as the model said: the join leaves some.
    assert by_name["join"]["held"] > 0
    assert by_name["crash"]["redelivered"] > 0 and by_name["nack"]["redelivered"] > 0
    assert answer["record"]["pulsar_version"] == {NEWEST: "4.2", LTS: "4.0"}.get(
        broker.version, MILESTONE
    )
    # The run removed its topic.
    assert set(topics(broker)) == before


def test_an_out_of_order_consumer_is_caught(broker: PulsarBroker) -> None:
    status, out, err = verify(broker, "--scenario", "join", "--allow-out-of-order")
    assert status == 1, why(out, err)
    first = out.splitlines()[0]
    assert first.startswith("FAIL"), out
    assert "allowOutOfOrderDelivery" in out
