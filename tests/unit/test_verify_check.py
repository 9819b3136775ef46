"""keyshared.verify.checker: each rule caught on hand-written records and quiet on clean ones
(the duplicates at-least-once allows, redeliveries after a leave, messages held while their
hash drains and released by acks), valid generated runs passing and their mutations failing
with the rule they break, and records round-tripping through JSON."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.verify_runs import MUTATIONS, Log, out_of_order_join, owned_keys

from keyshared.errors import InvalidArgument
from keyshared.verify.checker import KEPT_PER_RULE, OUT_OF_ORDER_CAUSE, RULES, Verdict, check
from keyshared.verify.record import RunRecord
from keyshared.verify.synthetic import SyntheticWorkload, synthetic_run


def rules(verdict: Verdict) -> set[str]:
    return {rule for s in verdict.scenarios for rule, n in s.counts.items() if n}


def two_consumers() -> tuple[Log, list[str], list[str]]:
    """c1 and c2 joined; three keys of each."""
    log = Log()
    log.join("c1", "c2")
    return log, owned_keys(["c1", "c2"], "c1", 3), owned_keys(["c1", "c2"], "c2", 3)


# --- clean runs ----------------------------------------------------------------------------


def test_a_steady_run_passes_with_every_count() -> None:
    log, mine, theirs = two_consumers()
    ones, twos = log.publish(*mine, *mine), log.publish(*theirs)
    log.deliver("c1", 0, 1, 2, 3, 4, 5)
    log.deliver("c2", *twos)
    log.ack("c1", 0, 1, 2, 3, 4, 5)
    log.ack("c2", *twos)
    verdict = check(log.record())
    assert verdict.passed and verdict.first is None and verdict.cause is None
    [s] = verdict.scenarios
    assert (s.sent, s.delivered, s.acked, s.lost, s.redelivered) == (9, 9, 9, 0, 0)
    assert (s.predicted, s.matched, s.held) == (9, 9, 0)
    assert ones == [0, 1, 2, 3, 4, 5]


def nacked_then_acked() -> Log:
    """c1 receives two messages of one key, nacks the first, gets it again and acks both."""
    log, mine, _ = two_consumers()
    log.publish(mine[0], mine[0])
    log.deliver("c1", 0, 1)
    log.nack("c1", 0)
    log.deliver("c1", 0)
    log.ack("c1", 1, 0)
    return log


def test_a_nacked_message_may_come_again_and_out_of_order() -> None:
    log = nacked_then_acked()
    verdict = check(log.record())
    assert verdict.passed, verdict.first
    [s] = verdict.scenarios
    assert (s.delivered, s.redelivered, s.matched) == (3, 1, 3)
    assert (s.duplicates_allowed, s.duplicates_unexpected) == (1, 0)


def test_a_nacked_message_may_come_again_even_after_its_ack() -> None:
    """The redelivery the nack asked for came again after the ack of the one before (Pulsar's
    acks are not confirmed): allowed, late, and not timed by the model."""
    log = nacked_then_acked()
    log.deliver("c1", 0)
    log.ack("c1", 0)
    verdict = check(log.record())
    assert verdict.passed, verdict.first
    [s] = verdict.scenarios
    assert (s.delivered, s.redelivered, s.acked) == (4, 2, 2)
    assert (s.duplicates_allowed, s.duplicates_unexpected) == (2, 0)
    assert (s.predicted, s.matched) == (3, 3)


@pytest.mark.parametrize("how", ["close", "crash", "timeout"])
def test_a_leave_redelivers_what_it_held_to_the_new_owner(how: str) -> None:
    log, mine, theirs = two_consumers()
    held = log.publish(*mine)
    log.deliver("c1", *held)
    log.ack("c1", held[0])
    if how == "timeout":
        log.add("stall", "c1")
    log.leave("c1", how)
    log.deliver("c2", *held[1:])
    log.ack("c2", *held[1:])
    later = log.publish(*mine, *theirs)
    log.deliver("c2", *later)
    log.ack("c2", *later)
    verdict = check(log.record())
    assert verdict.passed, verdict.first
    [s] = verdict.scenarios
    assert (s.duplicates_allowed, s.duplicates_unexpected, s.lost) == (2, 0, 0)


def test_a_join_holds_a_draining_hash_until_its_holder_acks() -> None:
    log = Log()
    log.join("c1")
    moved = owned_keys(["c1", "c2"], "c2", 1)[0]
    first = log.publish(moved)
    log.deliver("c1", *first)
    log.join("c2")
    second = log.publish(moved)  # its hash drains on c1: held
    log.ack("c1", *first)  # released: the model replays it to c2
    log.deliver("c2", *second)
    log.ack("c2", *second)
    verdict = check(log.record())
    assert verdict.passed, verdict.first
    assert verdict.scenarios[0].held == 1


def test_messages_sent_before_any_consumer_wait_for_the_first() -> None:
    log = Log()
    waiting = log.publish("a", "b", "c")
    log.join("c1")
    log.deliver("c1", *waiting)
    log.ack("c1", *waiting)
    assert check(log.record()).passed


def test_the_last_consumer_leaving_rewinds_to_what_was_not_acked() -> None:
    log = Log()
    log.join("c1")
    sent = log.publish("a", "b", "a")
    log.deliver("c1", *sent)
    log.ack("c1", sent[1])
    log.leave("c1", "crash")
    log.join("c2")
    log.deliver("c2", sent[0], sent[2])
    log.ack("c2", sent[0], sent[2])
    verdict = check(log.record())
    assert verdict.passed, verdict.first
    assert verdict.scenarios[0].duplicates_allowed == 2


def test_a_read_past_the_look_ahead_limit_leaves_the_rest_for_the_cursor() -> None:
    """4,100 messages of a draining hash: the redelivery queue takes 4,000 (the limit for two
    consumers), the read stops, and the cursor reads the rest once the queue drains."""
    log = Log()
    log.join("c1")
    moved = owned_keys(["c1", "c2"], "c2", 1)[0]
    first = log.publish(moved)
    log.deliver("c1", *first)
    log.join("c2")
    held = log.publish(*[moved] * 4_100)
    log.ack("c1", *first)
    log.deliver("c2", *held)
    log.ack("c2", *held)
    verdict = check(log.record())
    assert verdict.passed, verdict.first
    assert verdict.scenarios[0].held == 4_000


def test_positions_that_do_not_ascend_with_sends_are_found_for_a_replay() -> None:
    log, mine, _ = two_consumers()
    sent = log.publish(*mine)
    messages = log.scenario.messages
    messages[:] = [replace(m, entry_id=10 - m.index) for m in messages]
    log.deliver("c1", *sent)
    log.nack("c1", sent[1])
    log.deliver("c1", sent[1])
    log.ack("c1", *sent)
    verdict = check(log.record())
    assert verdict.passed, verdict.first
    assert verdict.scenarios[0].duplicates_allowed == 1


def test_the_first_violation_is_the_earliest_of_any_scenario() -> None:
    clean, broken = Log("steady"), Log("join")
    clean.join("c1")
    clean.ack("c1", *clean.publish("a"))  # never delivered: the model's miss at its end
    broken.now = clean.now - 100  # recorded first, though listed second
    broken.join("c1")
    sent = broken.publish("a", "a")
    broken.deliver("c1", sent[1], sent[0])
    broken.ack("c1", *sent)
    record = clean.record()
    record.scenarios.append(broken.scenario)
    verdict = check(record)
    assert not verdict.passed
    assert [s.name for s in verdict.scenarios] == ["steady", "join"]
    assert verdict.first is not None and verdict.first.scenario == "join"
    assert verdict.first.rule == "order"


# --- each rule -----------------------------------------------------------------------------


def test_a_message_no_one_acked_is_lost() -> None:
    log, mine, _ = two_consumers()
    sent = log.publish(*mine[:2])
    log.deliver("c1", *sent)
    log.ack("c1", sent[0])
    verdict = check(log.record())
    assert rules(verdict) == {"lost"}
    v = verdict.first
    assert v is not None and v.rule == "lost"
    assert (v.key, v.indexes, v.consumers) == (mine[1], (1,), ("c1",))
    assert v.message_ids == ((-1, 100, 1),)
    assert "last delivered to c1" in v.detail and RULES["lost"] in v.detail
    assert v.moment_ms == log.now


def test_a_key_received_against_its_send_order_breaks_order() -> None:
    log, mine, _ = two_consumers()
    sent = log.publish(mine[0], mine[0])
    log.deliver("c1", sent[1], sent[0])
    log.ack("c1", *sent)
    verdict = check(log.record())
    assert rules(verdict) == {"order"}
    assert verdict.first is not None and verdict.first.indexes == (0, 1)


def test_a_key_in_flight_on_two_consumers_breaks_exclusive_and_the_model() -> None:
    log, mine, _ = two_consumers()
    sent = log.publish(mine[0], mine[0])
    log.deliver("c1", sent[0])
    log.deliver("c2", sent[1])
    log.ack("c1", sent[0])
    log.ack("c2", sent[1])
    verdict = check(log.record())
    assert rules(verdict) == {"exclusive", "model"}
    [exclusive] = [v for v in verdict.scenarios[0].violations if v.rule == "exclusive"]
    assert exclusive.consumers == ("c2", "c1") and exclusive.indexes == (1, 0)
    assert "while c1 still had #0 of the same key in flight" in exclusive.detail


def test_a_delivery_to_another_consumer_than_the_model_breaks_the_model() -> None:
    log, mine, _ = two_consumers()
    sent = log.publish(mine[0])
    log.deliver("c2", *sent)
    log.ack("c2", *sent)
    verdict = check(log.record())
    assert rules(verdict) == {"model"}
    v = verdict.first
    assert v is not None and v.consumers == ("c2", "c1")
    assert "where the model sends it to c1" in v.detail


def test_a_delivery_before_the_model_read_the_message_breaks_the_model() -> None:
    log, mine, _ = two_consumers()
    sent = log.publish(mine[0])
    publish = log.scenario.events.pop()
    log.deliver("c1", *sent)
    log.scenario.events.append(publish)
    log.ack("c1", *sent)
    verdict = check(log.record())
    assert rules(verdict) == {"model"}
    [model] = verdict.scenarios[0].violations
    assert "went to c1 while the model has not read it" in model.detail
    assert verdict.scenarios[0].counts["model"] == 1


def test_a_message_the_model_sent_that_never_came_breaks_the_model() -> None:
    log, mine, _ = two_consumers()
    log.publish(mine[0])
    verdict = check(log.record())
    assert rules(verdict) == {"model", "lost"}
    [model] = [v for v in verdict.scenarios[0].violations if v.rule == "model"]
    assert "which never received it" in model.detail


def test_a_message_delivered_again_after_its_ack_is_an_unexpected_duplicate() -> None:
    log, mine, _ = two_consumers()
    sent = log.publish(mine[0])
    log.deliver("c1", *sent)
    log.ack("c1", *sent)
    log.deliver("c1", *sent)
    verdict = check(log.record())
    assert "duplicate" in rules(verdict)
    s = verdict.scenarios[0]
    assert (s.duplicates_allowed, s.duplicates_unexpected) == (0, 1)
    [dup] = [v for v in s.violations if v.rule == "duplicate"]
    assert "after it was acked" in dup.detail


def test_a_message_delivered_again_while_held_is_an_unexpected_duplicate() -> None:
    log, mine, _ = two_consumers()
    sent = log.publish(mine[0])
    log.deliver("c1", *sent, *sent)
    log.ack("c1", *sent)
    verdict = check(log.record())
    [dup] = [v for v in verdict.scenarios[0].violations if v.rule == "duplicate"]
    assert "while c1 still holds it and has not nacked it" in dup.detail


def test_stats_that_differ_from_the_model_break_stats() -> None:
    log = Log()
    log.join("c1")
    log.add("stats", {"c1": {-1: {"ranges": [[1, 65535]], "draining": []}}})
    assert check(log.record()).passed
    log.add("stats", {"c1": {-1: {"ranges": [[1, 100]], "draining": [[7, 1]]}}, "ghost": {}})
    verdict = check(log.record())
    assert rules(verdict) == {"stats"}
    details = " | ".join(v.detail for v in verdict.scenarios[0].violations)
    assert len(verdict.scenarios[0].violations) == 3
    assert "hash ranges of c1 are [[1, 100]] where the model's are [[1, 65535]]" in details
    assert "draining hashes of c1 are [[7, 1]] where the model's are none" in details
    assert "'ghost', a consumer the model does not have" in details


def test_out_of_order_delivery_on_a_join_names_the_option() -> None:
    """With allowOutOfOrderDelivery=true the broker gives the new consumer a key whose
    earlier message the old one still holds: exclusive and model, and the cause named."""
    verdict = check(out_of_order_join("hand"))
    assert rules(verdict) == {"exclusive", "model"}
    assert verdict.cause == OUT_OF_ORDER_CAUSE and "allowOutOfOrderDelivery=true" in verdict.cause
    [model] = [v for v in verdict.scenarios[0].violations if v.rule == "model"]
    assert "drains on c1 until c1 acks it" in model.detail and model.consumers == ("c2", "c1")
    assert verdict.scenarios[0].held == 1
    # The model's later replay to c2 is that early delivery, not a second violation.
    assert verdict.scenarios[0].counts["model"] == 1
    assert check(out_of_order_join("hand", allow_out_of_order=False)).cause is None


def test_a_scenario_keeps_the_first_violations_of_a_rule_and_counts_all() -> None:
    log = Log()
    log.join("c1")
    log.publish(*(f"k{n}" for n in range(KEPT_PER_RULE + 5)))
    [s] = check(log.record()).scenarios
    assert s.counts["lost"] == KEPT_PER_RULE + 5
    assert sum(v.rule == "lost" for v in s.violations) == KEPT_PER_RULE


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (("deliver", 0.0, "nobody", 0, 0), "KeyError"),
        (("deliver", 0.0, "c1", 5, 0), "IndexError"),
        (("ack", 0.0, "c1", -1), "IndexError"),
        (("publish", 0.0, 0, 9), "publish of messages 0 to 8 of 1"),
        (("join", 0.0, "c1", "c1"), "joins twice"),
    ],
)
def test_a_log_that_does_not_fit_its_messages_names_the_event(
    event: tuple[object, ...], message: str
) -> None:
    log = Log()
    log.join("c1")
    log.publish("a")
    log.scenario.events.append(event)
    with pytest.raises(InvalidArgument, match=message) as info:
        check(log.record())
    assert info.value.argument == "record.scenarios[0].events[3]"


# --- generated runs ------------------------------------------------------------------------


@st.composite
def workloads(draw: st.DrawFn) -> SyntheticWorkload:
    consumers, joins = draw(st.integers(1, 4)), draw(st.integers(0, 3))
    return SyntheticWorkload(
        messages=draw(st.integers(1, 400)),
        keys=draw(st.integers(1, 40)),
        consumers=consumers,
        joins=joins,
        leaves=draw(st.integers(0, min(2, consumers + joins - 1))),
        stalls=draw(st.integers(0, 2)),
        batch=draw(st.integers(1, 60)),
        max_lag=draw(st.integers(0, 4)),
        nack_probability=draw(st.sampled_from([0.0, 0.05, 0.3])),
        partitions=draw(st.sampled_from([0, 2])),
        points=draw(st.sampled_from([1, 5, 100])),
        seed=draw(st.integers(0, 2**32)),
    )


WORKLOADS = workloads()


@settings(max_examples=150, deadline=None)
@given(WORKLOADS)
def test_a_valid_generated_run_passes(workload: SyntheticWorkload) -> None:
    record = synthetic_run(workload)
    verdict = check(record)
    assert verdict.passed, verdict.first
    [s] = verdict.scenarios
    assert s.acked == s.sent == workload.messages and s.matched == s.predicted == s.delivered
    assert s.redelivered == s.duplicates_allowed


@pytest.mark.parametrize("name", list(MUTATIONS))
@settings(max_examples=40, deadline=None)
@given(workload=WORKLOADS, seed=st.integers(0, 2**16))
def test_a_mutated_run_fails_with_the_rule_it_breaks(
    name: str, workload: SyntheticWorkload, seed: int
) -> None:
    mutate, rule = MUTATIONS[name]
    record = synthetic_run(workload)
    if not mutate(record.scenarios[0], random.Random(seed)):
        return
    verdict = check(record)
    assert not verdict.passed
    assert rule in rules(verdict), (name, verdict.first)


def test_the_mutations_apply_to_a_busy_run() -> None:
    """Each mutation finds what it changes in a run of a few consumers."""
    workload = SyntheticWorkload(messages=300, keys=10, consumers=3, seed=5)
    for name, (mutate, rule) in MUTATIONS.items():
        record = synthetic_run(workload)
        assert mutate(record.scenarios[0], random.Random(1)), name
        assert rule in rules(check(record)), name


# --- records -------------------------------------------------------------------------------


def test_a_record_round_trips_through_json() -> None:
    record = synthetic_run(
        SyntheticWorkload(messages=200, keys=7, partitions=2, nack_probability=0.1)
    )
    again = RunRecord.from_json(json.loads(record.dumps()))
    assert again == record
    assert check(again) == check(record)


def test_the_verdict_is_json() -> None:
    log, mine, _ = two_consumers()
    log.publish(mine[0])
    data = json.loads(json.dumps(check(log.record()).to_json()))
    assert data["passed"] is False and data["first"]["rule"] == "lost"
    counts = data["scenarios"][0]["counts"]
    assert counts == {"lost": 1, "order": 0, "exclusive": 0, "model": 1, "duplicate": 0, "stats": 0}
