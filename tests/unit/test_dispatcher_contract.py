"""The one contract of both dispatchers (StickyKeyDispatcher, EntryBucketDispatcher): the
same calls with the same parameters, the same shapes back, and one rule for a consumer that
is not connected (KeyError, nothing changed). Each test runs over both; the stateful test
checks the contract against a small model of connected consumers and their pending acks.
Which consumer an entry goes to is each selector's own business, tested elsewhere."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from keyshared import EntryBucketDispatcher, PendingAcksMap, StickyKeyDispatcher

Dispatcher: TypeAlias = StickyKeyDispatcher | EntryBucketDispatcher


@dataclass(frozen=True)
class Kind:
    """How to build one dispatcher and send it one entry under a hash."""

    name: str
    make: Callable[..., Dispatcher]
    # Sends entry (ledger_id, entry_id) under a hash; the consumer it went to, or None.
    send: Callable[[Any, int, int, int], int | None]
    # The sticky key hash the entry is recorded under, from the hash it was sent under.
    recorded: Callable[[Any, int], int]


def sticky_send(d: StickyKeyDispatcher, ledger_id: int, entry_id: int, h: int) -> int | None:
    result = d.dispatch(ledger_id, entry_id, h)
    return result.consumer_id if result.delivered else None


def bucket_send(d: EntryBucketDispatcher, ledger_id: int, entry_id: int, h: int) -> int | None:
    return d.dispatch(ledger_id, entry_id, entry_hash_min=h)


KINDS = [
    Kind("sticky", lambda **kw: StickyKeyDispatcher(16, **kw), sticky_send, lambda _d, h: h),
    Kind(
        "bucket",
        lambda **kw: EntryBucketDispatcher([0x4000, 0x8000, 0xC000], **kw),
        bucket_send,
        lambda d, h: d.sticky_key_hash(entry_hash_min=h),
    ),
]


@pytest.fixture(params=KINDS, ids=lambda k: k.name)
def kind(request: pytest.FixtureRequest) -> Kind:
    k: Kind = request.param
    return k


COMMON = ["add_consumer", "remove_consumer", "pending_acks", "select", "ack"]


@pytest.mark.parametrize("method", COMMON)
def test_the_common_calls_take_the_same_parameters(method: str) -> None:
    classes = (StickyKeyDispatcher, EntryBucketDispatcher)
    signatures = [inspect.signature(getattr(c, method)) for c in classes]
    shown = [[(p.name, p.kind, p.default) for p in s.parameters.values()] for s in signatures]
    assert shown[0] == shown[1], method


def test_the_constructors_name_the_tracker_settings_alike() -> None:
    for cls in (StickyKeyDispatcher, EntryBucketDispatcher):
        params = inspect.signature(cls).parameters
        for name, default in [("unblocking_handler", None), ("dispatcher_name", "")]:
            assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, (cls, name)
            assert params[name].default == default


def snapshot(d: Dispatcher) -> tuple[object, ...]:
    return (
        d.selector.consumer_ids,
        len(d.tracker),
        [(c, d.pending_acks(c).to_list()) for c in d.selector.consumer_ids],
        repr(d),
    )


def test_a_consumer_not_connected_is_a_key_error_in_every_call(kind: Kind) -> None:
    d = kind.make()
    d.add_consumer(1, "a")
    h = 0x9000
    assert kind.send(d, 1, 0, h) == 1
    before = snapshot(d)
    for call in (
        lambda: d.remove_consumer(7),
        lambda: d.pending_acks(7),
        lambda: d.ack(7, 1, 0),
    ):
        with pytest.raises(KeyError, match="consumer 7 is not connected"):
            call()
        assert snapshot(d) == before
    assert d.remove_consumer(1) == [(1, 0, 1, kind.recorded(d, h))]
    for call in (lambda: d.remove_consumer(1), lambda: d.ack(1, 1, 0)):
        with pytest.raises(KeyError, match="consumer 1 is not connected"):
            call()


def test_adding_and_removing_consumers(kind: Kind) -> None:
    d = kind.make(dispatcher_name="subscription-a")
    assert d.tracker.dispatcher_name == "subscription-a"
    first = d.add_consumer(1)  # no name: ""
    assert isinstance(first, PendingAcksMap)
    assert first.consumer_id == 1 and first.tracker is d.tracker
    assert d.pending_acks(1) is first
    second = d.add_consumer(2, b"bytes-name")
    assert d.selector.consumer_ids in ([1, 2], [2, 1])
    before = snapshot(d)
    with pytest.raises(ValueError, match="already"):
        d.add_consumer(2, "again")
    for bad, error in [(True, TypeError), (-1, ValueError), (2**64, ValueError)]:
        with pytest.raises(error, match="consumer_id"):
            d.add_consumer(bad)
    with pytest.raises(TypeError, match="name"):
        d.add_consumer(3, 5)  # type: ignore[arg-type]
    assert snapshot(d) == before
    assert d.remove_consumer(2) == []
    assert second.closed and not first.closed
    assert d.selector.consumer_ids == [1]


def test_the_selector_is_read_only_and_select_answers_for_it(kind: Kind) -> None:
    d = kind.make()
    assert d.select(0x1234) is None
    d.add_consumer(1, "a")
    d.add_consumer(2, "b")
    for h in (0, 1, 0x7FFF, 0xFFFF):
        assert d.select(h) == d.selector.select(h)
        assert d.select(h) in (1, 2)
    with pytest.raises(ValueError, match="sticky_key_hash"):
        d.select(0x10000)
    with pytest.raises(TypeError, match="sticky_key_hash"):
        d.select(True)
    with pytest.raises(TypeError, match="through the dispatcher"):
        d.selector.remove_consumer(1)


def test_a_sent_entry_is_pending_until_acked(kind: Kind) -> None:
    notices: list[int] = []
    d = kind.make(unblocking_handler=notices.append)
    d.add_consumer(1, "a")
    h = 0xB000
    consumer = kind.send(d, 3, 4, h)
    assert consumer == d.select(kind.recorded(d, h)) == 1
    assert d.pending_acks(1).to_list() == [(3, 4, 1, kind.recorded(d, h))]
    assert d.ack(1, 3, 4) is True
    assert d.ack(1, 3, 4) is False
    assert d.pending_acks(1).to_list() == []
    with pytest.raises(TypeError, match="ledger_id"):
        d.ack(1, 1.5, 4)  # type: ignore[arg-type]


def test_a_moved_hash_drains_and_the_ack_releases_it(kind: Kind) -> None:
    """Both follow PIP-379's rule: a hash that moves waits for its old consumer's acks, and
    the ack that releases it tells the unblocking handler."""
    notices: list[int] = []
    d = kind.make(unblocking_handler=notices.append)
    d.add_consumer(1, "a")
    hashes = range(1, 0x10000, 0x101)
    sent = [(e, h) for e, h in enumerate(hashes) if kind.send(d, 1, e, h) == 1]
    assert len(sent) == len(hashes)
    d.add_consumer(2, "b")
    moved = [(e, h) for e, h in sent if d.select(kind.recorded(d, h)) == 2]
    assert moved, "the second consumer takes some hashes"
    _, h = moved[0]
    assert kind.send(d, 2, 0, h) is None  # held while consumer 1 has it pending
    for entry, other in moved:
        if kind.recorded(d, other) == kind.recorded(d, h):
            d.ack(1, 1, entry)
    assert notices and notices[-1] == kind.recorded(d, h)
    assert d.tracker.get_entry(kind.recorded(d, h)) is None


class ContractMachine(RuleBasedStateMachine):
    """Any sequence of adds, removes, sends and acks, on one dispatcher of the kind, agrees
    with a model of who is connected and what each has pending."""

    kind: Kind

    def __init__(self) -> None:
        super().__init__()
        self.d = self.kind.make()
        self.pending: dict[int, list[tuple[int, int, int, int]]] = {}
        self.next_entry = 0

    @rule(cid=st.integers(0, 4), name=st.sampled_from(["a", "b", "c", b"d"]))
    def add(self, cid: int, name: str | bytes) -> None:
        if cid in self.pending:
            with pytest.raises(ValueError):
                self.d.add_consumer(cid, name)
            return
        m = self.d.add_consumer(cid, name)
        assert m.consumer_id == cid and len(m) == 0
        self.pending[cid] = []

    @rule(cid=st.integers(0, 5))
    def remove(self, cid: int) -> None:
        if cid not in self.pending:
            with pytest.raises(KeyError):
                self.d.remove_consumer(cid)
            return
        assert self.d.remove_consumer(cid) == sorted(self.pending.pop(cid))

    @rule(h=st.integers(1, 0xFFFF))
    def send(self, h: int) -> None:
        self.next_entry += 1
        owner = self.d.select(self.kind.recorded(self.d, h))
        consumer = self.kind.send(self.d, 1, self.next_entry, h)
        if not self.pending:
            assert owner is None and consumer is None
            return
        if consumer is not None:
            assert consumer == owner
            self.pending[consumer].append((1, self.next_entry, 1, self.kind.recorded(self.d, h)))

    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        cid = data.draw(st.integers(0, 5))
        if cid not in self.pending:
            with pytest.raises(KeyError):
                self.d.ack(cid, 1, 0)
            return
        acks = self.pending[cid]
        if not acks:
            assert self.d.ack(cid, 1, 0) is False
            return
        i = data.draw(st.integers(0, len(acks) - 1))
        ledger_id, entry_id, _, _ = acks.pop(i)
        assert self.d.ack(cid, ledger_id, entry_id) is True
        assert self.d.ack(cid, ledger_id, entry_id) is False

    @invariant()
    def consumers_and_pending_acks_agree(self) -> None:
        assert sorted(self.d.selector.consumer_ids) == sorted(self.pending)
        for cid, acks in self.pending.items():
            assert self.d.pending_acks(cid).to_list() == sorted(acks)
        if not self.pending:
            assert len(self.d.tracker) == 0


def machine(kind: Kind) -> type[ContractMachine]:
    return type(f"ContractMachine_{kind.name}", (ContractMachine,), {"kind": kind})


TestStickyContract = machine(KINDS[0]).TestCase
TestStickyContract.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestBucketContract = machine(KINDS[1]).TestCase
TestBucketContract.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
