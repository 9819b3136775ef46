"""The Key_Shared dispatcher's ordering state beyond the draining tracker: the redelivery
queue, the hashes held within one read, consumer permits and the look-ahead limit.

Ports of Pulsar's MessageRedeliveryControllerTest, KeySharedLookAheadConfigTest and the
ordering cases of PersistentStickyKeyDispatcherMultipleConsumersTest and
KeySharedSubscriptionTest (each named after its Java method), a stateful test against a
Python model, and bad-input tests."""

import itertools
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from keyshared import DispatchResult, StickyKeyDispatcher, sticky_key_hash
from keyshared.dispatch import (
    HoldReason,
    MessageRedeliveryController,
    get_available_permits,
    get_effective_look_ahead_limit,
)

# --- MessageRedeliveryControllerTest ---------------------------------------------------


@pytest.mark.parametrize("allow_out_of_order_delivery", [True, False])
def test_addAndRemove(allow_out_of_order_delivery: bool) -> None:
    ordered = not allow_out_of_order_delivery
    c = MessageRedeliveryController(allow_out_of_order_delivery)
    assert c.is_empty() and c.size() == 0
    c.add(1, 1)
    c.add(1, 2)
    assert not c.is_empty() and c.size() == 2
    assert c.get_hash(1, 1) is None and c.get_hash(1, 2) is None
    c.remove(1, 1)
    c.remove(1, 2)
    assert c.is_empty() and c.size() == 0

    c.add(2, 1, 100)
    c.add(2, 2, 101)
    c.add(2, 3, 101)
    assert c.size() == 3
    assert [c.get_hash(2, e) for e in (1, 2, 3)] == [100, 101, 101]
    assert c.contains_sticky_key_hash(100) is ordered
    assert c.contains_sticky_key_hash(101) is ordered
    c.remove(2, 1)
    c.remove(2, 2)
    assert c.size() == 1
    assert c.get_hash(2, 1) is None and c.get_hash(2, 2) is None
    assert c.get_hash(2, 3) == 101
    assert not c.contains_sticky_key_hash(100)
    assert c.contains_sticky_key_hash(101) is ordered

    c.clear()
    assert c.is_empty() and c.get_hash(2, 3) is None
    assert not c.contains_sticky_key_hash(101)

    for ledger, entry, h in [
        (2, 2, 201), (1, 3, 100), (3, 1, 300), (2, 1, 200), (3, 2, 301), (1, 2, 101), (1, 1, 100)
    ]:  # fmt: skip
        c.add(ledger, entry, h)
    c.remove_all_up_to(1, 3)
    assert c.size() == 4
    assert [c.get_hash(1, e) for e in (1, 2, 3)] == [None, None, None]
    assert [c.get_hash(*p) for p in [(2, 1), (2, 2), (3, 1), (3, 2)]] == [200, 201, 300, 301]
    assert not c.contains_sticky_key_hash(100) and not c.contains_sticky_key_hash(101)
    for h in (200, 201, 300, 301):
        assert c.contains_sticky_key_hash(h) is ordered
    c.remove_all_up_to(3, 1)
    assert c.size() == 1 and c.get_hash(3, 2) == 301
    for h in (200, 201, 300):
        assert not c.contains_sticky_key_hash(h)
    assert c.contains_sticky_key_hash(301) is ordered
    c.remove_all_up_to(5, 10)
    assert c.is_empty() and c.get_hash(3, 2) is None
    assert not c.contains_sticky_key_hash(301)


def test_outOfOrderSentinelHashDoesNotInitializePositionHashMap() -> None:
    c = MessageRedeliveryController(True)
    c.add(1, 1, 0)  # 0 is "not set": queued without a hash
    assert c.size() == 1 and c.get_hash(1, 1) is None
    c.remove_all_up_to(1, 1)
    assert c.is_empty()


@pytest.mark.parametrize("allow_out_of_order_delivery", [True, False])
def test_containsStickyKeyHashes(allow_out_of_order_delivery: bool) -> None:
    c = MessageRedeliveryController(allow_out_of_order_delivery)
    for ledger, entry, h in [(1, 1, 100), (1, 2, 101), (1, 3, 102), (2, 2, 103), (2, 1, 104)]:
        c.add(ledger, entry, h)
    ordered = not allow_out_of_order_delivery
    assert c.contains_sticky_key_hashes({100}) is ordered
    assert c.contains_sticky_key_hashes({101, 102, 103}) is ordered
    assert c.contains_sticky_key_hashes({104, 105}) is ordered
    assert not c.contains_sticky_key_hashes(set())
    assert not c.contains_sticky_key_hashes({99})
    assert not c.contains_sticky_key_hashes({105, 106})


@pytest.mark.parametrize("allow_out_of_order_delivery", [True, False])
def test_getMessagesToReplayNow(allow_out_of_order_delivery: bool) -> None:
    c = MessageRedeliveryController(allow_out_of_order_delivery)
    for ledger, entry in [(2, 2), (1, 3), (3, 1), (2, 1), (3, 2), (1, 2), (1, 1)]:
        c.add(ledger, entry)
    assert c.get_messages_to_replay_now(3, lambda _l, _e: True) == [(1, 1), (1, 2), (1, 3)]
    expected = [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (3, 1)]
    assert c.get_messages_to_replay_now(6, lambda _l, _e: True) == expected
    assert c.get_messages_to_replay_now(10, lambda _l, e: e == 2) == [(1, 2), (2, 2), (3, 2)]
    assert c.get_first_position_in_replay() == (1, 1)


# --- KeySharedLookAheadConfigTest ------------------------------------------------------


def test_getEffectiveLookAheadLimit() -> None:
    limit = get_effective_look_ahead_limit
    assert limit(5, per_consumer=5, per_subscription=100) == 25
    assert limit(100, per_consumer=5, per_subscription=100) == 100
    assert limit(100, per_consumer=5, per_subscription=0) == 500
    assert limit(100, per_consumer=0, per_subscription=6000) == 6000
    off: dict[str, Any] = {"per_consumer": 0, "per_subscription": 0}
    unlimited = {"max_unacked_messages_per_consumer": 0, "max_unacked_messages_per_subscription": 0}
    assert limit(100, **off, **unlimited) == 2**31 - 1
    assert (
        limit(
            100,
            **off,
            max_unacked_messages_per_consumer=1,
            max_unacked_messages_per_subscription=10,
        )
        == 10
    )
    assert (
        limit(
            100,
            **off,
            max_unacked_messages_per_consumer=22,
            max_unacked_messages_per_subscription=0,
        )
        == 2200
    )
    # Pulsar's defaults (2000 per consumer, 20000 per subscription).
    assert limit(3) == 6000 and limit(50) == 20000


def test_look_ahead_limit_saturates_where_pulsar_wraps() -> None:
    big = {"per_consumer": 0, "per_subscription": 0, "max_unacked_messages_per_subscription": 0}
    assert get_effective_look_ahead_limit(8, max_unacked_messages_per_consumer=2**30, **big) == (
        2**31 - 1
    )


def test_available_permits_as_the_dispatcher_computes_them() -> None:
    # createMockConsumer: max unacked 100, one message per entry.
    assert get_available_permits(1000, 100, 0, 1) == 100
    assert get_available_permits(1000, 100, 100, 1) == 0
    assert get_available_permits(1000, 100, 97, 2) == 2
    assert get_available_permits(-5) == 0
    assert get_available_permits(10, active=False) == 0
    assert get_available_permits(10, 0, 10**6) == 10


# --- PersistentStickyKeyDispatcherMultipleConsumersTest --------------------------------


def key_for_consumer(d: StickyKeyDispatcher, consumer: int) -> str:
    """Pulsar's generateKeyForConsumer: the first "key<i>" the selector gives the consumer."""
    return next(
        f"key{i}" for i in itertools.count() if d.select(sticky_key_hash(f"key{i}")) == consumer
    )


def entry(ledger: int, entry_id: int, key: str) -> tuple[int, int, int, int]:
    return (ledger, entry_id, sticky_key_hash(key), 1)


def pulsar_test_dispatcher() -> StickyKeyDispatcher:
    """The test's dispatcher: consistent hashing with 1 replica point, permits counted."""
    return StickyKeyDispatcher(number_of_points=1, flow_control=True)


def positions(results: list[DispatchResult], consumer: int) -> list[tuple[int, int]]:
    return [(r.ledger_id, r.entry_id) for r in results if r.consumer_id == consumer and r.delivered]


def replay(d: StickyKeyDispatcher, entries: dict[tuple[int, int], Any]) -> list[DispatchResult]:
    """A replay read of what the dispatcher's replay filter takes now."""
    return d.dispatch_read([entries[p] for p in d.get_messages_to_replay_now()], replay=True)


def test_skipRedeliverTemporally() -> None:
    d = pulsar_test_dispatcher()
    d.add_consumer(1, "consumer1")
    d.flow(1, 1000)
    d.add_consumer(2, "consumer2")  # the slow consumer: no permits yet
    slow_key, key = key_for_consumer(d, 2), key_for_consumer(d, 1)
    m1, m2, m3 = entry(1, 1, slow_key), entry(1, 2, slow_key), entry(1, 3, key)
    by_position = {e[:2]: e for e in (m1, m2, m3)}
    d.redelivery.add(1, 1, m1[2])  # addEntryToReplay(message1)

    assert replay(d, by_position) == []  # the slow consumer has no permits
    read = d.dispatch_read([m1, m2, m3])
    assert positions(read, 1) == [(1, 3)]
    assert [r.held for r in read[:2]] == [HoldReason.NO_PERMITS, HoldReason.BLOCKED_IN_READ]

    d.flow(2, 2)
    assert positions(replay(d, by_position), 2) == [(1, 1), (1, 2)]
    assert d.redelivery.is_empty()


def test_messageRedelivery() -> None:
    d = pulsar_test_dispatcher()
    d.add_consumer(1, "consumer1")  # no permits at first, then 10
    d.add_consumer(2, "consumer2")
    d.flow(2, 10)
    key1, key2 = key_for_consumer(d, 1), key_for_consumer(d, 2)
    all_entries = [entry(1, 1, key1), entry(1, 2, key1), entry(1, 3, key2)]
    by_position = {e[:2]: e for e in all_entries}
    d.redelivery.add(1, 1, all_entries[0][2])  # message1 awaits redelivery

    received: dict[int, list[tuple[int, int]]] = {1: [], 2: []}
    assert replay(d, by_position) == []  # consumer1 has no permits
    d.flow(1, 10)
    read = d.dispatch_read(all_entries)  # message2 waits: message1 has its hash
    assert read[0].held is HoldReason.AWAITING_REDELIVERY
    assert read[1].held is HoldReason.BLOCKED_IN_READ
    for results in (read, replay(d, by_position)):
        for c in received:
            received[c] += positions(results, c)
    assert received == {1: [(1, 1), (1, 2)], 2: [(1, 3)]}


def test_backoffDelayWhenNoMessagesDispatched() -> None:
    """The dispatch side of the test: nothing goes to a consumer without permits, and an
    entry of another key goes once it has some (the retry delays are the caller's clock)."""
    d = StickyKeyDispatcher(flow_control=True)
    d.add_consumer(1, "consumer1")
    for _ in range(3):
        result = d.dispatch(1, 1, sticky_key_hash("testKey"))
        assert result.held is HoldReason.NO_PERMITS and result.consumer_id == 1
    d.flow(1, 1000)
    assert d.dispatch(1, 2, sticky_key_hash("key2")).delivered
    assert d.get_available_permits(1) == 999


# --- KeySharedSubscriptionTest ---------------------------------------------------------


def test_orderingWhenAddingConsumers() -> None:
    d = StickyKeyDispatcher()
    d.add_consumer(1, "c1")
    sent = {i: entry(1, i, str(i % 10)) for i in range(20)}
    assert all(d.dispatch(*sent[i]).consumer_id == 1 for i in range(10))
    d.add_consumer(2, "c2")
    for i in range(10, 20):
        result = d.dispatch(*sent[i])
        # All keys c2 now owns still have messages pending on c1: nothing reaches c2.
        assert result.consumer_id == 1 or result.held is HoldReason.DRAINING
        assert result.held is None or result.draining_consumer_id == 1
    assert len(d.pending_acks(2)) == 0

    d.remove_consumer(1)  # closing c1 sends everything to c2, in order
    received = positions(replay(d, sent_by_position(sent)), 2)
    assert received == [(1, i) for i in range(20)]


def sent_by_position(sent: dict[int, tuple[int, int, int, int]]) -> dict[tuple[int, int], Any]:
    return {e[:2]: e for e in sent.values()}


def test_removeFirstConsumer() -> None:
    d = StickyKeyDispatcher(flow_control=True)
    d.add_consumer(1, "c1")
    d.flow(1, 10)  # receiverQueueSize 10
    sent = {i: entry(1, i, str(i % 10)) for i in range(20)}
    assert all(d.dispatch(*sent[i]).delivered for i in range(10))
    d.add_consumer(2, "c2")
    d.flow(2, 10)
    results = d.dispatch_read([sent[i] for i in range(10, 20)])
    assert not any(r.delivered for r in results)  # c1 has no permits; c2's keys drain
    assert {r.held for r in results} <= {
        HoldReason.NO_PERMITS,
        HoldReason.DRAINING,
        HoldReason.AWAITING_REDELIVERY,
    }
    d.remove_consumer(1)
    received: list[tuple[int, int]] = []
    while len(received) < 20:
        got = positions(replay(d, sent_by_position(sent)), 2)
        assert got, "no progress"
        for ledger, entry_id in got:
            assert d.ack(2, ledger, entry_id)
            d.flow(2, 1)  # the client refills permits as it acknowledges
        received += got
    assert received == [(1, i) for i in range(20)]


class JavaRandom:
    """java.util.Random, for Pulsar's ``new Random(1)`` key choices."""

    def __init__(self, seed: int) -> None:
        self.seed = (seed ^ 0x5DEECE66D) & ((1 << 48) - 1)

    def next_int(self, bound: int) -> int:
        while True:
            self.seed = (self.seed * 0x5DEECE66D + 0xB) & ((1 << 48) - 1)
            bits = self.seed >> 17
            value = bits % bound
            if bits - value + bound - 1 < 2**31:
                return value


def test_readAheadWithConfiguredLookAheadLimit() -> None:
    random = JavaRandom(1)
    d = StickyKeyDispatcher(flow_control=True, look_ahead_per_subscription=50)
    d.add_consumer(1, "c1")
    d.flow(1, 10)
    keys = [str(random.next_int(300)) for _ in range(1000)]
    read_position = 0
    for i in range(10):
        assert d.dispatch(1, i, sticky_key_hash(keys[i])).delivered
        read_position += 1
    d.add_consumer(2, "c2")
    d.flow(2, 10)
    while read_position < 1000 and d.is_normal_read_allowed():
        batch = [entry(1, i, keys[i]) for i in range(read_position, min(read_position + 100, 1000))]
        results = d.dispatch_read(batch)
        taken = [r for r in results if r.held is not HoldReason.LOOK_AHEAD_LIMIT]
        refused = results[len(taken) :]  # past the read limit: not read, not queued
        assert all(r.held is HoldReason.LOOK_AHEAD_LIMIT for r in refused)
        assert not any(r.queued_for_redelivery for r in refused)
        read_position += len(taken)
    # The dispatcher does not keep looking ahead in the topic.
    assert read_position < 100
    assert len(d.redelivery) <= 50


def test_makingProgressWithSlowerConsumer() -> None:
    random = JavaRandom(1)
    d = StickyKeyDispatcher(flow_control=True)
    for c in range(10):
        d.add_consumer(c, f"consumer-{c}")
        d.flow(c, 100)  # receiverQueueSize 100
    slow = d.select(sticky_key_hash("slowKey"))
    assert slow is not None and d.dispatch(1, 0, sticky_key_hash("slowKey")).consumer_id == slow
    non_slow = received = 0
    for i in range(1, 1001):
        h = sticky_key_hash(str(random.next_int(300)))
        non_slow += d.select(h) != slow
        result = d.dispatch(1, i, h)
        if result.delivered and result.consumer_id != slow:
            assert result.consumer_id is not None
            assert d.ack(result.consumer_id, 1, i)
            d.flow(result.consumer_id, 1)
            received += 1
    assert received == non_slow


def test_continueDispatchMessagesWhenMessageTTL() -> None:
    number_of_keys, total = 50, 1000
    d = StickyKeyDispatcher(flow_control=True)
    d.add_consumer(1, "consumer1")
    d.flow(1, number_of_keys + 1 + 10)  # 51 received, unacked, and 10 prefetched
    first = [entry(1, i, str(i % number_of_keys)) for i in range(total)]
    results = d.dispatch_read(first[:100])
    assert len(positions(results, 1)) == number_of_keys + 1 + 10
    blocked = {sticky_key_hash(str(i)) for i in range(number_of_keys)}

    d.add_consumer(2, "consumer2")
    d.add_consumer(3, "consumer3")
    for c in (2, 3):
        d.flow(c, 1000)
    by_position = {e[:2]: e for e in first}
    for start in range(100, total, 100):
        results = d.dispatch_read(first[start : start + 100]) + replay(d, by_position)
        # Every hash still has messages pending on consumer1: nothing gets through.
        assert not any(r.delivered for r in results)
    assert {h for _, _, h in d.redelivery.to_list()} <= blocked

    # The messages expire: the mark-delete position passes them all.
    for c in (1, 2, 3):
        d.pending_acks(c).remove_all_up_to(1, total - 1)
    d.redelivery.remove_all_up_to(1, total - 1)
    assert len(d.tracker) == 0
    d.flow(1, 10)  # consumer1's client takes its prefetched messages and asks for more

    received = {1: 0, 2: 0, 3: 0}
    second = [entry(2, i, str(i % number_of_keys)) for i in range(total)]
    by_position = {e[:2]: e for e in second}

    def receive(results: list[DispatchResult]) -> None:
        for r in results:
            if r.delivered and r.consumer_id is not None:
                received[r.consumer_id] += 1
                assert d.ack(r.consumer_id, r.ledger_id, r.entry_id)
                d.flow(r.consumer_id, 1)

    for start in range(0, total, 100):
        receive(d.dispatch_read(second[start : start + 100]))
        receive(replay(d, by_position))
    while not d.redelivery.is_empty():
        before = len(d.redelivery)
        receive(replay(d, by_position))
        assert len(d.redelivery) < before, "no progress"
    assert sum(received.values()) >= total and all(n > 0 for n in received.values())


# --- stateful: the dispatcher against a model -------------------------------------------

HASHES = [sticky_key_hash(f"k{i}") for i in range(12)]


class OrderingModel:
    """The dispatcher's ordering state in plain Python: redelivery queue, permits, pending
    acks; consumers fixed, so no hash ever drains."""

    def __init__(self, select: Any) -> None:
        self.select = select
        self.queue: dict[tuple[int, int], int] = {}
        self.permits: dict[int, int] = {}
        self.max_unacked: dict[int, int] = {}
        self.pending: dict[int, dict[tuple[int, int], tuple[int, int]]] = {}

    def available(self, c: int) -> int:
        return get_available_permits(
            self.permits[c], self.max_unacked[c], sum(b for b, _ in self.pending[c].values())
        )

    def read(self, entries: list[tuple[int, int, int, int]], replay: bool) -> list[tuple[Any, ...]]:
        blocked: set[int] = set()
        permits: dict[int, int] = {}
        out = []
        for ledger, entry_id, h, batch in entries:
            c = self.select(h)
            reason = None
            if h in blocked:
                reason, c = HoldReason.BLOCKED_IN_READ, None
            else:
                left = permits.setdefault(c, self.available(c))
                if left <= 0:
                    reason = HoldReason.NO_PERMITS
                elif not replay and h in self.queue.values():
                    reason = HoldReason.AWAITING_REDELIVERY
                else:
                    permits[c] -= 1
            if reason is None:
                self.queue.pop((ledger, entry_id), None)
                self.pending[c][ledger, entry_id] = (batch, h)
                self.permits[c] -= batch
            else:
                blocked.add(h)
                self.queue[ledger, entry_id] = h
            out.append((ledger, entry_id, c, reason))
        return out

    def replay_positions(self, limit: int) -> list[tuple[int, int]]:
        blocked: set[int] = set()
        permits: dict[int, int] = {}
        out: list[tuple[int, int]] = []
        for position in sorted(self.queue):
            if len(out) >= limit:
                break
            h = self.queue[position]
            c = self.select(h)
            left = permits.setdefault(c, self.available(c))
            if h in blocked or left <= 0:
                blocked.add(h)
                continue
            permits[c] -= 1
            out.append(position)
        return out


class OrderingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.d = StickyKeyDispatcher(number_of_points=4, flow_control=True)
        for c in range(3):
            self.d.add_consumer(c, f"c{c}")
        self.model = OrderingModel(self.d.select)
        for c in range(3):
            self.model.permits[c] = self.model.max_unacked[c] = 0
            self.model.pending[c] = {}
        self.next_entry = 0
        self.batches: dict[tuple[int, int], tuple[int, int, int, int]] = {}

    @rule(c=st.integers(0, 2), permits=st.integers(0, 4))
    def flow(self, c: int, permits: int) -> None:
        self.d.flow(c, permits)
        self.model.permits[c] += permits

    @rule(c=st.integers(0, 2), limit=st.integers(0, 6))
    def limit_unacked(self, c: int, limit: int) -> None:
        self.d.set_consumer_limits(c, max_unacked_messages=limit)
        self.model.max_unacked[c] = limit

    @rule(picks=st.lists(st.tuples(st.sampled_from(HASHES), st.integers(1, 3)), max_size=6))
    def normal_read(self, picks: list[tuple[int, int]]) -> None:
        entries = []
        for h, batch in picks:
            self.next_entry += 1
            entries.append((7, self.next_entry, h, batch))
            self.batches[7, self.next_entry] = entries[-1]
        self.check(self.d.dispatch_read(entries), self.model.read(entries, replay=False))

    @rule(limit=st.integers(0, 5))
    def replay_read(self, limit: int) -> None:
        taken = self.d.get_messages_to_replay_now(limit)
        assert taken == self.model.replay_positions(limit)
        entries = [self.batches[p] for p in taken]
        self.check(self.d.dispatch_read(entries, replay=True), self.model.read(entries, True))

    @precondition(lambda self: any(self.model.pending.values()))
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        acks = sorted((c, p) for c, m in self.model.pending.items() for p in m)
        c, (ledger, entry_id) = data.draw(st.sampled_from(acks))
        assert self.d.ack(c, ledger, entry_id)
        del self.model.pending[c][ledger, entry_id]

    def check(self, got: list[DispatchResult], expected: list[tuple[Any, ...]]) -> None:
        assert [(r.ledger_id, r.entry_id, r.consumer_id, r.held) for r in got] == expected

    @invariant()
    def same_state(self) -> None:
        queue = [(ledger, e, h) for (ledger, e), h in sorted(self.model.queue.items())]
        assert self.d.redelivery.to_list() == queue
        for c in range(3):
            assert self.d.get_available_permits(c) == self.model.available(c)
            pending = [(ledger, e, b, h) for (ledger, e), (b, h) in self.model.pending[c].items()]
            assert self.d.pending_acks(c).to_list() == sorted(pending)


TestOrdering = OrderingMachine.TestCase
TestOrdering.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


class RedeliveryMachine(RuleBasedStateMachine):
    """MessageRedeliveryController against a sorted dict and per-hash counts."""

    def __init__(self) -> None:
        super().__init__()
        self.c = MessageRedeliveryController()
        self.model: dict[tuple[int, int], int | None] = {}

    @rule(
        ledger=st.integers(0, 3),
        entry_id=st.integers(0, 5),
        h=st.none() | st.integers(1, 6),
    )
    def add(self, ledger: int, entry_id: int, h: int | None) -> None:
        self.c.add(ledger, entry_id, h)
        if h is not None or (ledger, entry_id) not in self.model:
            self.model[ledger, entry_id] = h

    @rule(ledger=st.integers(0, 3), entry_id=st.integers(0, 5))
    def remove(self, ledger: int, entry_id: int) -> None:
        assert self.c.remove(ledger, entry_id) == ((ledger, entry_id) in self.model)
        self.model.pop((ledger, entry_id), None)

    @rule(ledger=st.integers(0, 3), entry_id=st.integers(0, 5))
    def remove_all_up_to(self, ledger: int, entry_id: int) -> None:
        gone = [p for p in self.model if p <= (ledger, entry_id)]
        assert self.c.remove_all_up_to(ledger, entry_id) == len(gone)
        for p in gone:
            del self.model[p]

    @invariant()
    def same(self) -> None:
        assert self.c.to_list() == [(ledger, e, h) for (ledger, e), h in sorted(self.model.items())]
        for h in range(1, 7):
            assert self.c.contains_sticky_key_hash(h) == (h in self.model.values())


TestRedelivery = RedeliveryMachine.TestCase
TestRedelivery.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)


# --- bad input leaves state unchanged (issue 13 item 3) -----------------------------------


def snapshot(d: StickyKeyDispatcher) -> tuple[Any, ...]:
    return (
        d.selector.get_consumer_key_hash_ranges(),
        d.redelivery.to_list(),
        sorted(
            (c, tuple(d.pending_acks(c).to_list()))
            for c in d.selector.get_consumer_key_hash_ranges()
        ),
    )


class OnlyIndex:
    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def test_consumer_ids_are_normalised_before_any_change() -> None:
    d = StickyKeyDispatcher()
    d.add_consumer(np.array(9), "c9")  # type: ignore[arg-type]
    d.add_consumer(OnlyIndex(2), "c2")  # type: ignore[arg-type]
    d.add_consumer(np.int64(3), "c3")  # type: ignore[arg-type]
    assert set(d.selector.get_consumer_key_hash_ranges()) == {2, 3, 9}
    for i, h in enumerate(HASHES):
        result = d.dispatch(1, i, h)  # no KeyError for any consumer
        assert result.delivered and type(result.consumer_id) is int
    d.remove_consumer(np.array(2))  # type: ignore[arg-type]
    assert set(d.selector.get_consumer_key_hash_ranges()) == {3, 9}
    assert d.pending_acks(OnlyIndex(9)) is d.pending_acks(9)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("consumer_id", "error"),
    [(True, TypeError), (1.0, TypeError), ("1", TypeError), (-1, ValueError), (2**64, ValueError)],
)
def test_bad_consumer_ids_change_nothing(consumer_id: object, error: type[Exception]) -> None:
    d = StickyKeyDispatcher()
    d.add_consumer(1, "c1")
    d.dispatch(1, 0, HASHES[0])
    before = snapshot(d)
    with pytest.raises(error, match="consumer_id"):
        d.add_consumer(consumer_id, "x")  # type: ignore[arg-type]
    with pytest.raises(error, match="consumer_id"):
        d.remove_consumer(consumer_id)  # type: ignore[arg-type]
    with pytest.raises(error, match="consumer_id"):
        d.flow(consumer_id, 1)  # type: ignore[arg-type]
    assert snapshot(d) == before


@pytest.mark.parametrize(
    ("args", "error", "where"),
    [
        (("x", None, 5), TypeError, "ledger_id"),
        ((1, None, 5), TypeError, "entry_id"),
        ((1, 1, None), TypeError, "sticky_key_hash"),
        ((1, 1, 0), ValueError, "sticky_key_hash"),
        ((1, 1, 0x10000), ValueError, "sticky_key_hash"),
        ((1, True, 5), TypeError, "entry_id"),
        ((-1, 1, 5), ValueError, "ledger_id"),
        ((1, 1, 5, -1), ValueError, "batch_size"),
        ((1, 1, 5, 1.5), TypeError, "batch_size"),
    ],
)
def test_dispatch_refuses_bad_arguments(
    args: tuple[Any, ...], error: type[Exception], where: str
) -> None:
    for d in (StickyKeyDispatcher(), StickyKeyDispatcher(flow_control=True)):
        if d.flow_control:
            d.add_consumer(1, "c1")
        before = snapshot(d)
        with pytest.raises(error, match=where):
            d.dispatch(*args)
        with pytest.raises(error, match=rf"entries\[1\]\.{where}"):
            d.dispatch_read([(2, 2, HASHES[1], 1), args + (1,) * (4 - len(args))])
        assert snapshot(d) == before


def test_bad_reads_and_settings_are_refused() -> None:
    d = StickyKeyDispatcher()
    d.add_consumer(1, "c1")
    with pytest.raises(TypeError, match="entries must be a sequence"):
        d.dispatch_read(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"entries\[0\] must be"):
        d.dispatch_read([(1, 2, 3)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="replay"):
        d.dispatch_read([], replay=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="permits"):
        d.flow(1, -1)
    with pytest.raises(KeyError):
        d.flow(5, 1)
    with pytest.raises(ValueError, match="avg_messages_per_entry"):
        d.set_consumer_limits(1, avg_messages_per_entry=0)
    with pytest.raises(TypeError, match="flow_control"):
        StickyKeyDispatcher(flow_control=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="per_consumer"):
        StickyKeyDispatcher(look_ahead_per_consumer="5")  # type: ignore[arg-type]
    assert d.redelivery.is_empty()


def test_no_consumer_holds_without_queueing() -> None:
    d = StickyKeyDispatcher()
    result = d.dispatch(1, 1, 5)
    assert result == DispatchResult(1, 1, 5, None, HoldReason.NO_CONSUMER)
    assert not result.delivered and d.redelivery.is_empty()


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda c: c.add(True, 1, 5), TypeError),
        (lambda c: c.add(-1, 1, 5), ValueError),
        (lambda c: c.add(1, 1, 0), ValueError),
        (lambda c: c.add(1, 1, 0x10000), ValueError),
        (lambda c: c.add(1, 1, 2.0), TypeError),
        (lambda c: c.get_messages_to_replay_now(-1), ValueError),
        (lambda c: c.get_messages_to_replay_now(1, 5), TypeError),
        (lambda c: c.contains_sticky_key_hashes("ab"), TypeError),
        (lambda c: c.filter_read([1], [1], [0], [1], {1: 1}), ValueError),
        (lambda c: c.filter_read([1], [1, 2], [3], [1], {1: 1}), ValueError),
        (lambda c: c.filter_read([1], [1], [3], [True], {1: 1}), TypeError),
        (lambda c: c.filter_read([1], [1], [3], [1], [1]), TypeError),
    ],
)
def test_redelivery_controller_bad_input_changes_nothing(call: Any, error: type[Exception]) -> None:
    c = MessageRedeliveryController()
    c.add(1, 0, 5)
    with pytest.raises(error):
        call(c)
    assert c.to_list() == [(1, 0, 5)]


class KeyOrderMachine(RuleBasedStateMachine):
    """Consumers come and go, permits and acks arrive, reads and replays interleave: per
    hash, entries first go out in position order, and a redelivered entry goes out only
    when no earlier entry of its hash is still queued."""

    def __init__(self) -> None:
        super().__init__()
        self.d = StickyKeyDispatcher(number_of_points=4, flow_control=True)
        self.live: set[int] = set()
        self.next_consumer = 0
        self.next_entry = 0
        self.entries: dict[tuple[int, int], tuple[int, int, int, int]] = {}
        self.first_sent: dict[int, tuple[int, int]] = {}
        self.sent: set[tuple[int, int]] = set()

    @rule(name=st.sampled_from(["a", "b", "c"]))
    def add(self, name: str) -> None:
        self.d.add_consumer(self.next_consumer, name)
        self.live.add(self.next_consumer)
        self.next_consumer += 1

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        c = data.draw(st.sampled_from(sorted(self.live)))
        self.d.remove_consumer(c)
        self.live.discard(c)

    @precondition(lambda self: self.live)
    @rule(data=st.data(), permits=st.integers(1, 3))
    def flow(self, data: st.DataObject, permits: int) -> None:
        self.d.flow(data.draw(st.sampled_from(sorted(self.live))), permits)

    @rule(hashes=st.lists(st.sampled_from(HASHES[:5]), max_size=5))
    def normal_read(self, hashes: list[int]) -> None:
        batch = []
        for h in hashes:
            self.next_entry += 1
            batch.append((1, self.next_entry, h, 1))
            self.entries[1, self.next_entry] = batch[-1]
        self.check(self.d.dispatch_read(batch))

    @rule(limit=st.integers(1, 5))
    def replay_read(self, limit: int) -> None:
        taken = [self.entries[p] for p in self.d.get_messages_to_replay_now(limit)]
        queued_before = self.d.redelivery.to_list()
        for r in self.d.dispatch_read(taken, replay=True):
            if r.delivered:
                earlier = [
                    (ledger, e)
                    for ledger, e, h in queued_before
                    if h == r.sticky_key_hash and (ledger, e) < (r.ledger_id, r.entry_id)
                ]
                assert not [p for p in earlier if p in self.queued()], (r, earlier)
        self.check([])

    @precondition(lambda self: any(len(self.d.pending_acks(c)) for c in self.live))
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        acks = [(c, a) for c in sorted(self.live) for a in self.d.pending_acks(c).to_list()]
        c, a = data.draw(st.sampled_from(acks))
        assert self.d.ack(c, a[0], a[1])

    def queued(self) -> set[tuple[int, int]]:
        return {(ledger, e) for ledger, e, _ in self.d.redelivery.to_list()}

    def check(self, results: list[DispatchResult]) -> None:
        for r in results:
            position = (r.ledger_id, r.entry_id)
            if r.delivered and position not in self.sent:
                last = self.first_sent.get(r.sticky_key_hash)
                assert last is None or last < position, (r, last)
                self.first_sent[r.sticky_key_hash] = position
                self.sent.add(position)

    @invariant()
    def a_hash_is_pending_on_one_consumer_at_most(self) -> None:
        owner: dict[int, int] = {}
        for c in self.live:
            for _, _, _, h in self.d.pending_acks(c).to_list():
                assert owner.setdefault(h, c) == c


TestKeyOrder = KeyOrderMachine.TestCase
TestKeyOrder.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)


def test_concurrent_reads_replays_and_acks_keep_state_consistent() -> None:
    d = StickyKeyDispatcher(flow_control=True)
    for c in range(4):
        d.add_consumer(c, f"c{c}")
        d.flow(c, 50)
    entries = {
        (t, i): (t, i, HASHES[(t + i) % len(HASHES)], 1) for t in range(4) for i in range(200)
    }

    def worker(t: int) -> None:
        for i in range(0, 200, 10):
            d.dispatch_read([entries[t, j] for j in range(i, i + 10)])
            for r in d.dispatch_read(
                [entries[p] for p in d.get_messages_to_replay_now(5)], replay=True
            ):
                if r.delivered and r.consumer_id is not None:
                    d.ack(r.consumer_id, r.ledger_id, r.entry_id)
                    d.flow(r.consumer_id, 1)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    queued = {(ledger, e) for ledger, e, _ in d.redelivery.to_list()}
    pending = {(a[0], a[1]) for c in range(4) for a in d.pending_acks(c).to_list()}
    assert not queued & pending  # an entry waits or is out, never both
    for ledger, e, h in d.redelivery.to_list():
        assert entries[ledger, e][2] == h
