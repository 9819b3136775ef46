"""keyshared.dispatch: the kernel-backed StickyKeyDispatcher against the Python dispatcher it
replaced (tests/support/python_sticky_dispatcher.py, run as the model of a stateful test), the
shared result types, and bad input to a whole read."""

from typing import Any

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from support.python_sticky_dispatcher import PyStickyKeyDispatcher

from keyshared import sticky_key_hash
from keyshared.dispatch import DispatchResult, HoldReason, StickyKeyDispatcher

HASHES = [sticky_key_hash(f"k{i}") for i in range(8)]
NAMES = ["a", "b", "c", "a"]


class AgainstPython(RuleBasedStateMachine):
    """Every call goes to both dispatchers; results, notices and state must agree."""

    def __init__(self) -> None:
        super().__init__()
        self.live: list[int] = []
        self.next_consumer = 0
        self.next_entry = 0
        self.entries: dict[tuple[int, int], tuple[int, int, int, int]] = {}
        self.notices: tuple[list[int], list[int]] = ([], [])

    @initialize(
        flow_control=st.booleans(),
        look_ahead=st.sampled_from([None, 3, 8]),
        points=st.integers(1, 6),
    )
    def make(self, flow_control: bool, look_ahead: int | None, points: int) -> None:
        settings: dict[str, Any] = {"flow_control": flow_control}
        if look_ahead is not None:
            settings |= {"look_ahead_per_consumer": 0, "look_ahead_per_subscription": look_ahead}
        self.ours = StickyKeyDispatcher(
            points, unblocking_handler=self.notices[0].append, **settings
        )
        self.model = PyStickyKeyDispatcher(
            points, unblocking_handler=self.notices[1].append, **settings
        )
        self.both = (self.ours, self.model)

    @rule(name=st.sampled_from(NAMES))
    def add(self, name: str) -> None:
        c = self.next_consumer
        self.next_consumer += 1
        for d in self.both:
            d.add_consumer(c, name)
        self.live.append(c)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        c = data.draw(st.sampled_from(self.live))
        ours, model = (d.remove_consumer(c) for d in self.both)
        assert ours == model
        self.live.remove(c)

    @precondition(lambda self: self.live)
    @rule(data=st.data(), permits=st.integers(0, 5))
    def flow(self, data: st.DataObject, permits: int) -> None:
        c = data.draw(st.sampled_from(self.live))
        for d in self.both:
            d.flow(c, permits)

    @precondition(lambda self: self.live)
    @rule(data=st.data(), limit=st.integers(0, 6), avg=st.integers(1, 3))
    def limit_unacked(self, data: st.DataObject, limit: int, avg: int) -> None:
        c = data.draw(st.sampled_from(self.live))
        for d in self.both:
            d.set_consumer_limits(c, max_unacked_messages=limit, avg_messages_per_entry=avg)

    @rule(picks=st.lists(st.tuples(st.sampled_from(HASHES), st.integers(0, 3)), max_size=8))
    def normal_read(self, picks: list[tuple[int, int]]) -> None:
        batch = []
        for h, size in picks:
            self.next_entry += 1
            batch.append((1, self.next_entry, h, size))
            self.entries[1, self.next_entry] = batch[-1]
        ours, model = (d.dispatch_read(batch) for d in self.both)
        assert ours == model

    @rule(limit=st.integers(0, 6))
    def replay_read(self, limit: int) -> None:
        ours, model = (d.get_messages_to_replay_now(limit) for d in self.both)
        assert ours == model
        batch = [self.entries[p] for p in ours]
        ours, model = (d.dispatch_read(batch, replay=True) for d in self.both)
        assert ours == model

    @precondition(lambda self: any(len(self.ours.pending_acks(c)) for c in self.live))
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        acks = [(c, a[:2]) for c in self.live for a in self.ours.pending_acks(c).to_list()]
        c, position = data.draw(st.sampled_from(acks))
        assert [d.ack(c, *position) for d in self.both] == [True, True]

    @invariant()
    def same_state(self) -> None:
        if not hasattr(self, "ours"):
            return
        ours, model = self.ours, self.model
        assert ours.redelivery.to_list() == model.redelivery.to_list()
        assert self.notices[0] == self.notices[1]
        assert ours.get_effective_look_ahead_limit() == model.get_effective_look_ahead_limit()
        assert ours.is_normal_read_allowed() == model.is_normal_read_allowed()
        assert ours.selector.get_consumer_key_hash_ranges() == (
            model.selector.get_consumer_key_hash_ranges()
        )
        for c in self.live:
            assert ours.pending_acks(c).to_list() == model.pending_acks(c).to_list()
            assert ours.get_available_permits(c) == model.get_available_permits(c)
        for c in range(self.next_consumer):  # those gone too: their stats are forgotten
            ours_stats, model_stats = (d.tracker.consumer_stats(c) for d in self.both)
            assert ours_stats.draining_hashes == model_stats.draining_hashes
            assert ours_stats.draining_hashes_cleared_total == (
                model_stats.draining_hashes_cleared_total
            )
        for h in HASHES:
            assert ours.tracker.get_entry(h) == model.tracker.get_entry(h)


TestAgainstPython = AgainstPython.TestCase
TestAgainstPython.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_hold_reasons_are_an_enum_named_by_value() -> None:
    assert [r.value for r in HoldReason] == [r.name.lower() for r in HoldReason]
    assert HoldReason("draining") is HoldReason.DRAINING
    d = StickyKeyDispatcher()
    assert d.dispatch(1, 1, 5).held is HoldReason.NO_CONSUMER


def test_dispatch_results_compare_and_hash_by_value() -> None:
    sent = DispatchResult(1, 2, 3, 4)
    assert sent.delivered and sent.held is None and not sent.queued_for_redelivery
    held = DispatchResult(1, 2, 3, 4, HoldReason.DRAINING, 9, True)
    assert (held.held, held.draining_consumer_id, held.delivered) == (HoldReason.DRAINING, 9, False)
    assert held == DispatchResult(1, 2, 3, 4, HoldReason.DRAINING, 9, True) != sent
    assert len({sent, held, DispatchResult(1, 2, 3, 4)}) == 2
    assert repr(sent) == (
        "DispatchResult(ledger_id=1, entry_id=2, sticky_key_hash=3, consumer_id=4, held=None, "
        "draining_consumer_id=None, queued_for_redelivery=False)"
    )
    with pytest.raises(TypeError, match="held must be a HoldReason"):
        DispatchResult(1, 2, 3, 4, "draining")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="consumer_id"):
        DispatchResult(1, 2, 3, -1)


# --- bad input to a whole read ------------------------------------------------------------


def state(d: StickyKeyDispatcher) -> tuple[Any, ...]:
    return (
        d.redelivery.to_list(),
        [d.pending_acks(c).to_list() for c in (1, 2)],
        [d.get_available_permits(c) for c in (1, 2)],
        len(d.tracker),
    )


def busy_dispatcher() -> StickyKeyDispatcher:
    d = StickyKeyDispatcher(flow_control=True)
    d.add_consumer(1, "c1")
    d.flow(1, 3)
    d.dispatch_read([(1, e, h, 1) for e, h in enumerate(HASHES)])
    d.add_consumer(2, "c2")
    return d


class OnlyIndex:
    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


GOOD = (3, 0, HASHES[0], 1)


@pytest.mark.parametrize(
    ("entries", "error", "message"),
    [
        (5, TypeError, "entries must be a sequence, got int"),
        ("abcd", TypeError, "entries must be a sequence, got str"),
        ((e for e in [GOOD]), TypeError, "entries must be a sequence, got generator"),
        ([GOOD, 5], TypeError, r"entries\[1\] must be a sequence, got int"),
        ([GOOD, b"abcd"], TypeError, r"entries\[1\] must be a sequence, got bytes"),
        ([GOOD, (1, 2, 3)], ValueError, r"entries\[1\] must be \(ledger_id, .*got 3 items"),
        ([GOOD, (2**63, 0, 5, 1)], ValueError, r"entries\[1\]\.ledger_id must be in \[0, 2\*\*63"),
        ([GOOD, (1, -1, 5, 1)], ValueError, r"entries\[1\]\.entry_id must be in"),
        ([GOOD, (1, 1.0, 5, 1)], TypeError, r"entries\[1\]\.entry_id must be an int, got float"),
        ([GOOD, (1, 1, False, 1)], TypeError, r"entries\[1\]\.sticky_key_hash must be an int"),
        (
            [GOOD, (1, 1, 0, 1)],
            ValueError,
            r"entries\[1\]\.sticky_key_hash must be in \[1, 65535\]",
        ),
        ([GOOD, (1, 1, 5, 2**31)], ValueError, r"entries\[1\]\.batch_size must be in \[0, 2\*\*31"),
        ([GOOD, GOOD, (1, 1, 5, "1")], TypeError, r"entries\[2\]\.batch_size must be an int"),
    ],
)
def test_a_bad_entry_is_named_and_changes_nothing(
    entries: Any, error: type[Exception], message: str
) -> None:
    d = busy_dispatcher()
    before = state(d)
    with pytest.raises(error, match=message):
        d.dispatch_read(entries)
    with pytest.raises(error, match=message):
        d.dispatch_read(entries, replay=True)
    assert state(d) == before


def test_entries_take_any_integer_kind_and_sequence() -> None:
    plain, other = busy_dispatcher(), busy_dispatcher()
    rows = [(4, e, h, 2) for e, h in enumerate(HASHES)]
    odd = tuple(
        [np.int64(ledger), OnlyIndex(e), np.uint16(h), np.array(size)]
        for ledger, e, h, size in rows
    )
    assert other.dispatch_read(odd) == plain.dispatch_read(rows)  # type: ignore[arg-type]
    assert state(other) == state(plain)


def test_bad_settings_and_limits_are_named() -> None:
    d = busy_dispatcher()
    with pytest.raises(ValueError, match="max_unacked_messages must be in"):
        d.set_consumer_limits(1, max_unacked_messages=-1)
    with pytest.raises(ValueError, match="avg_messages_per_entry must be at least 1"):
        d.set_consumer_limits(1, max_unacked_messages=5, avg_messages_per_entry=0)
    with pytest.raises(KeyError):
        d.set_consumer_limits(7, max_unacked_messages=5)
    with pytest.raises(ValueError, match="max_messages_to_read"):
        d.get_messages_to_replay_now(-1)
    with pytest.raises(ValueError, match="number_of_points must be in"):
        StickyKeyDispatcher(0)
    with pytest.raises(TypeError, match="unblocking_handler must be callable"):
        StickyKeyDispatcher(unblocking_handler=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_unacked_messages_per_subscription"):
        StickyKeyDispatcher(max_unacked_messages_per_subscription=1.5)  # type: ignore[arg-type]
    assert d.get_available_permits(1) == 0  # the refused limit left the old one


def test_the_model_agrees_on_a_pulsar_scenario() -> None:
    """PIP-379 with flow control, a joining consumer and a leaving one, call by call."""
    notices: tuple[list[int], list[int]] = ([], [])
    ours = StickyKeyDispatcher(flow_control=True, unblocking_handler=notices[0].append)
    model = PyStickyKeyDispatcher(flow_control=True, unblocking_handler=notices[1].append)
    entries = [(1, i, sticky_key_hash(str(i % 30)), 1 + i % 3) for i in range(300)]
    for d in (ours, model):
        d.add_consumer(1, "c1")
        d.flow(1, 100)
    assert ours.dispatch_read(entries[:100]) == model.dispatch_read(entries[:100])
    for d in (ours, model):
        d.add_consumer(2, "c2")
        d.flow(2, 100)
    assert ours.dispatch_read(entries[100:]) == model.dispatch_read(entries[100:])
    assert [ours.ack(1, 1, i) for i in range(50)] == [model.ack(1, 1, i) for i in range(50)]
    assert ours.remove_consumer(1) == model.remove_consumer(1)
    by_position = {e[:2]: e for e in entries}
    replay = [by_position[p] for p in ours.get_messages_to_replay_now(1000)]
    assert replay == [by_position[p] for p in model.get_messages_to_replay_now(1000)]
    assert ours.dispatch_read(replay, replay=True) == model.dispatch_read(replay, replay=True)
    assert ours.redelivery.to_list() == model.redelivery.to_list()
    assert notices[0] == notices[1]


# --- state kept consistent at the edges ---------------------------------------------------


def test_a_position_twice_in_one_read_is_refused() -> None:
    """A Pulsar read holds an entry once; twice, it was sent twice and charged two permits
    but pending once. Now the read is refused and nothing changes."""
    d = busy_dispatcher()
    d.flow(1, 5)
    d.flow(2, 5)
    before = state(d)
    twice = [(7, 0, HASHES[0], 1), (7, 1, HASHES[1], 1), (7, 0, HASHES[0], 1)]
    for replay in (False, True):
        with pytest.raises(ValueError, match=r"entries\[2\]: position \(7, 0\) is given twice"):
            d.dispatch_read(twice, replay=replay)
        assert state(d) == before
    once = d.dispatch_read(twice[:2])
    delivered = [r for r in once if r.delivered]
    spent = sum(5 - d.get_available_permits(c) for c in (1, 2))
    pending = sum(len(d.pending_acks(c)) - len(before[1][c - 1]) for c in (1, 2))
    assert len(delivered) == spent == pending


def draining_on_1(handler: Any = None) -> tuple[StickyKeyDispatcher, int, int]:
    """A dispatcher whose consumer 1 holds one entry of each of 200 hashes when consumer 2
    joins; one entry `(1, e)` whose hash `h` moved to 2 and now drains on 1."""
    d = StickyKeyDispatcher(unblocking_handler=handler)
    d.add_consumer(1, "c1")
    hashes = list(dict.fromkeys(sticky_key_hash(f"key-{i}") for i in range(200)))
    d.dispatch_read([(1, e, h, 1) for e, h in enumerate(hashes)])
    d.add_consumer(2, "c2")
    e, h = next((e, h) for e, h in enumerate(hashes) if d.tracker.get_entry(h) is not None)
    return d, e, h


def test_a_pending_position_keeps_its_hash() -> None:
    """Sent again under another hash of the same consumer, a pending entry's ack would
    release that hash and leave its own draining for ever; it is refused, naming the entry,
    with nothing changed."""
    d, e, h = draining_on_1()
    other = next(x for x in range(1, 0x10000) if x != h and d.select(x) == 1)
    before = (d.pending_acks(1).to_list(), d.tracker.get_entry(h), d.redelivery.to_list())
    message = rf"entries\[0\]: position \(1, {e}\) is pending on consumer 1 under sticky key"
    with pytest.raises(ValueError, match=message):
        d.dispatch_read([(1, e, other, 1)])
    assert (d.pending_acks(1).to_list(), d.tracker.get_entry(h), d.redelivery.to_list()) == before
    assert d.dispatch(1, e, h).held is HoldReason.DRAINING  # its own hash: held, not refused
    assert d.ack(1, 1, e)
    assert d.tracker.get_entry(h) is None


def test_a_raising_unblocking_handler_leaves_the_ack_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ack is made before the handler hears of it: the handler's exception goes to
    sys.unraisablehook and the call returns True (a retry returns False, as it should)."""
    import sys

    heard: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", heard.append)

    def handler(h: int) -> None:
        raise RuntimeError(f"handler saw {h}")

    d, e, h = draining_on_1(handler)
    assert d.dispatch(2, 0, h).held is HoldReason.DRAINING
    assert d.ack(1, 1, e) is True
    assert [str(u.exc_value) for u in heard] == [f"handler saw {h}"]
    assert heard[0].object is handler
    assert d.ack(1, 1, e) is False
    assert d.tracker.get_entry(h) is None
    assert d.dispatch_read([(2, 0, h, 1)], replay=True)[0].delivered


def test_a_dispatchers_selector_is_read_only() -> None:
    d = StickyKeyDispatcher()
    d.add_consumer(1, "c1")
    for change in (lambda: d.selector.add_consumer(5, "c5"), lambda: d.selector.remove_consumer(1)):
        with pytest.raises(TypeError, match="StickyKeyDispatcher's: add and remove consumers"):
            change()
    assert d.selector.consumer_ids == [1] and d.select(7) == 1
    d.add_consumer(5, "c5")
    d.remove_consumer(5)
    assert d.selector.consumer_ids == [1]


# --- DispatchResult: pickled, copied, checked ---------------------------------------------


def test_dispatch_results_pickle_and_copy() -> None:
    import copy
    import pickle

    d = StickyKeyDispatcher(flow_control=True)
    d.add_consumer(1, "c1")
    d.flow(1, 2)
    results = d.dispatch_read([(9, e, HASHES[e % 4], 1) for e in range(8)])
    drained, _, h = draining_on_1()
    results.append(drained.dispatch(2, 0, h))
    results.append(DispatchResult(1, 2, 3, 4, HoldReason.PENDING_ACK_REFUSED, None, True))
    held = {None, HoldReason.NO_PERMITS, HoldReason.BLOCKED_IN_READ, HoldReason.DRAINING}
    assert {r.held for r in results} >= held
    for r in results:
        for twin in (pickle.loads(pickle.dumps(r)), copy.copy(r), copy.deepcopy(r)):
            assert twin == r and hash(twin) == hash(r) and twin.held is r.held
        # Every result a dispatcher makes passes the constructor's checks.
        assert type(r)(*r.__reduce__()[1]) == r


BAD_RESULTS: list[tuple[tuple[Any, ...], str]] = [
    ((1, 2, 9, None), "consumer_id must be set for a delivered entry"),
    ((1, 2, 9, 4, None, None, True), "queued_for_redelivery must be False"),
    ((1, 2, 9, 4, None, 5), "draining_consumer_id must be set for held=DRAINING, and only"),
    ((1, 2, 9, 4, HoldReason.DRAINING, None, True), "draining_consumer_id must be set"),
    ((1, 2, 9, 4, HoldReason.LOOK_AHEAD_LIMIT), "LOOK_AHEAD_LIMIT is not taken"),
    ((1, 2, 9, None, HoldReason.PENDING_ACK_REFUSED), "PENDING_ACK_REFUSED"),
    ((-1, 2, 9, 4), "ledger_id"),
    ((1, 2, 0, 4), "sticky_key_hash"),
]


@pytest.mark.parametrize(("args", "message"), BAD_RESULTS)
def test_a_dispatch_result_that_cannot_happen_is_refused(
    args: tuple[Any, ...], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        DispatchResult(*args)
