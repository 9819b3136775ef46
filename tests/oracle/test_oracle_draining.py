"""keyshared's DrainingHashesTracker and PendingAcksMap against Pulsar's own (SPEC 6, PIP-379).

A stateful test drives both with the same random operations (several consumers, a small pool
of hashes so they collide, pending acks wired to the tracker as Pulsar's Key_Shared dispatcher
wires them) and compares every answer, the whole table, every consumer's stats and the
unblocking handler's notifications after every step, on the newest release (4.2.4) and the
4.0 LTS release (4.0.7). The behaviours where keyshared differs from Pulsar on purpose are
asserted one by one at the end, each naming what Pulsar does.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)
from support.pulsar_oracle import LTS, NEWEST, Oracle, OracleError, Tally, record_kept, run_machine

from keyshared import DrainingHashesTracker, HashRange, PendingAcksMap

CONSUMERS = (1, 2, 3)
HASHES = (1, 2, 0xFFFF)  # 0 ("not set") is drawn separately, now and then
LEDGERS = (1, 2)
ENTRIES = (0, 1, 2, 3)

consumers = st.sampled_from(CONSUMERS)
hashes = st.sampled_from(HASHES)
hashes_or_zero = st.sampled_from((*HASHES, *HASHES, 0))
ledgers = st.sampled_from(LEDGERS)
entries = st.sampled_from(ENTRIES)
# Calls that empty the tables run one time in five they are drawn, so that states with many
# draining hashes and pending acks are reached.
seldom = st.sampled_from((False, False, False, False, True))
picks = st.integers(0, 7)  # which pending ack an op takes (0: the position drawn instead)

EXAMPLES = 200
STEPS = 50


class Refused:
    """What a call that raised answers: keyshared's ValueError or any Java exception."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Refused)

    def __repr__(self) -> str:
        return "refused"


REFUSED = Refused()


def mine(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except ValueError:
        return REFUSED


def theirs(oracle: Oracle, op: str, **args: Any) -> Any:
    try:
        return oracle.call(op, **args)
    except OracleError as e:
        if "is missing in this Pulsar release" in str(e):
            raise
        return REFUSED


def entry_of(tracker: DrainingHashesTracker, h: int) -> dict[str, int] | None:
    e = tracker.get_entry(h)
    if e is None:
        return None
    return {"consumer": e.consumer_id, "ref_count": e.ref_count, "blocked_count": e.blocked_count}


def stats_of(tracker: DrainingHashesTracker, consumer: int) -> dict[str, Any]:
    s = tracker.consumer_stats(consumer)
    return {
        "draining_hashes_count": s.draining_hashes_count,
        "draining_hashes_cleared_total": s.draining_hashes_cleared_total,
        "draining_hashes_unacked_messages": s.draining_hashes_unacked_messages,
        "draining_hashes": [[d.hash, d.unack_msgs, d.blocked_attempts] for d in s.draining_hashes],
    }


def supports(oracle: Oracle, method: str) -> bool:
    """Whether the oracle's release has PendingAcksMap.``method`` (4.2 added several)."""
    handle = oracle.call("draining.new")
    try:
        oracle.call("pending.new", handle=handle, consumer=1)
        try:
            oracle.call(method, handle=handle, consumer=1, ledger=1, entry=1, acked_delta=0)
        except OracleError as e:
            if "is missing in this Pulsar release" in str(e):
                return False
            raise
        return True
    finally:
        oracle.call("close", handle=handle)


def machine_for(oracle: Oracle, tally: Tally) -> type[RuleBasedStateMachine]:
    newer_api = supports(oracle, "pending.remove_and_get")

    class DrainingAgainstPulsar(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.told: list[int] = []
            self.tracker = DrainingHashesTracker(self.told.append, "dispatcher")
            self.handle = oracle.call("draining.new", dispatcher_name="dispatcher")
            self.maps: dict[int, PendingAcksMap] = {}
            self.batch_level = 0
            for c in CONSUMERS:
                self.open(c)

        def open(self, c: int) -> None:
            self.maps[c] = PendingAcksMap(c, self.tracker)
            oracle.call("pending.new", handle=self.handle, consumer=c)

        def both(
            self, what: str, my_call: Any, my_args: tuple[Any, ...], op: str, **args: Any
        ) -> Any:
            answer = mine(my_call, *my_args)
            tally.same(what, answer, theirs(oracle, op, handle=self.handle, **args))
            return answer

        def teardown(self) -> None:
            oracle.call("close", handle=self.handle)

        # --- the tracker, driven directly -------------------------------------------------

        def target(self, c: int, ledger: int, entry: int, pick: int) -> tuple[int, int]:
            """Mostly one of ``c``'s pending acks (by ``pick``), else the position drawn."""
            acks = self.maps[c].to_list()
            if pick == 0 or not acks:
                return ledger, entry
            ack = acks[pick % len(acks)]
            return ack[0], ack[1]

        def others_hold(self, c: int, h: int) -> bool:
            return any(
                ack[3] == h for other, m in self.maps.items() if other != c for ack in m.to_list()
            )

        @rule(c=consumers, h=hashes_or_zero, n=st.integers(1, 3))
        def add_entry(self, c: int, h: int, n: int) -> None:
            """``n`` references to ``h`` for ``c``, or for the one consumer holding pending acks
            of ``h`` if another does. As in the dispatcher, only the consumer holding a hash's
            pending acks drains it: an entry owned by one consumer while another holds acks
            of the hash would make removing those acks fail, which Pulsar and keyshared handle
            differently (test_removal_refused_by_the_tracker_changes_nothing)."""
            holders = {o for o, m in self.maps.items() for ack in m.to_list() if ack[3] == h}
            if len(holders) > 1:
                return
            if holders:
                (c,) = holders
            for _ in range(n):
                self.both(
                    f"add_entry({c}, {h})",
                    self.tracker.add_entry,
                    (c, h),
                    "draining.add_entry",
                    consumer=c,
                    hash=h,
                )

        @rule(c=consumers, bounds=st.lists(hashes, min_size=2, max_size=2))
        def register_draining_hashes(self, c: int, bounds: list[int]) -> None:
            """The dispatcher's registerDrainingHashes for a range consumer ``c`` lost: each of
            its pending acks with a hash in the range adds a reference to that hash's entry.
            keyshared does it in one call, checked first; Pulsar's loop calls addEntry per
            ack, so a range holding a hash another consumer drains is left out (Pulsar would
            add part of it before throwing)."""
            lo, hi = sorted(bounds)
            held = [a for a in self.maps[c].to_list() if a[3] != 0 and lo <= a[3] <= hi]
            if any((e := self.tracker.get_entry(a[3])) and e.consumer_id != c for a in held):
                return
            if any(self.others_hold(c, a[3]) for a in held):  # as in add_entry
                return
            n = self.maps[c].register_draining_hashes([HashRange(lo, hi)])
            acks = oracle.call("pending.for_each", handle=self.handle, consumer=c)
            pulsar = [a for a in acks if a[3] != 0 and lo <= a[3] <= hi]
            for a in pulsar:
                oracle.call("draining.add_entry", handle=self.handle, consumer=c, hash=a[3])
            tally.same(f"[{c}].register_draining_hashes({lo:#x}-{hi:#x})", n, len(pulsar))

        @rule(c=consumers, h=hashes_or_zero, closing=st.booleans())
        def reduce_ref_count(self, c: int, h: int, closing: bool) -> None:
            self.both(
                f"reduce_ref_count({c}, {h}, {closing})",
                self.tracker.reduce_ref_count,
                (c, h, closing),
                "draining.reduce_ref_count",
                consumer=c,
                hash=h,
                closing=closing,
            )

        @rule(c=consumers, h=hashes_or_zero)
        def should_block(self, c: int, h: int) -> None:
            self.both(
                f"should_block_sticky_key_hash({c}, {h})",
                self.tracker.should_block_sticky_key_hash,
                (c, h),
                "draining.should_block",
                consumer=c,
                hash=h,
            )

        @rule(c=consumers, h=hashes)
        def block_elsewhere(self, c: int, h: int) -> None:
            """should_block for a consumer other than the one draining ``h``, if one is."""
            e = self.tracker.get_entry(h)
            if e is not None and e.consumer_id == c:
                c = CONSUMERS[(CONSUMERS.index(c) + 1) % len(CONSUMERS)]
            self.should_block(c, h)

        @rule(h=hashes, closing=seldom, drain=st.booleans())
        def reduce_owned(self, h: int, closing: bool, drain: bool) -> None:
            """reduce_ref_count by the consumer draining ``h``, if one is: once, or (``drain``)
            until the entry goes."""
            e = self.tracker.get_entry(h)
            if e is not None:
                for _ in range(e.ref_count if drain else 1):
                    self.reduce_ref_count(e.consumer_id, h, closing)

        @rule(c=consumers, h=hashes)
        def block_then_drain(self, c: int, h: int) -> None:
            """A dispatch to another consumer blocked by ``h``, then ``h`` drained (if it is
            draining): the path that tells the unblocking handler."""
            e = self.tracker.get_entry(h)
            if e is not None:
                self.block_elsewhere(c, h)
                self.reduce_owned(h, False, True)

        @rule(now=seldom)
        def start_batch(self, now: bool) -> None:
            # Seldom, or a batch would be open most of the time, hiding unblocking by hash.
            if not now:
                return
            self.both("start_batch()", self.tracker.start_batch, (), "draining.start_batch")
            self.batch_level += 1

        @precondition(lambda self: self.batch_level > 0)
        @rule()
        def end_batch(self) -> None:
            # Unmatched, Pulsar's batch level goes negative: test_end_batch_without_start.
            self.both("end_batch()", self.tracker.end_batch, (), "draining.end_batch")
            self.batch_level -= 1

        def clear(self, now: bool) -> None:
            if now:
                self.both("clear()", self.tracker.clear, (), "draining.clear")

        def consumer_removed(self, c: int, now: bool) -> None:
            if now:
                self.both(
                    f"consumer_removed({c})",
                    self.tracker.consumer_removed,
                    (c,),
                    "draining.consumer_removed",
                    consumer=c,
                )

        # --- pending acks, wired to the tracker ---------------------------------------------

        @rule(c=consumers, ledger=ledgers, entry=entries, size=st.integers(1, 3), h=hashes_or_zero)
        def add_pending_ack(self, c: int, ledger: int, entry: int, size: int, h: int) -> None:
            self.both(
                f"[{c}].add_pending_ack_if_allowed({ledger}, {entry}, {size}, {h})",
                self.maps[c].add_pending_ack_if_allowed,
                (ledger, entry, size, h),
                "pending.add",
                consumer=c,
                ledger=ledger,
                entry=entry,
                batch_size=size,
                hash=h,
            )

        def remove(self, c: int, ledger: int, entry: int) -> None:
            self.both(
                f"[{c}].remove({ledger}, {entry})",
                self.maps[c].remove,
                (ledger, entry),
                "pending.remove",
                consumer=c,
                ledger=ledger,
                entry=entry,
            )

        def remove_exact(
            self, c: int, ledger: int, entry: int, size: int, h: int, exact: bool
        ) -> None:
            held = self.maps[c].get(ledger, entry)
            if exact and held is not None:
                size, h = held
            self.both(
                f"[{c}].remove({ledger}, {entry}, {size}, {h})",
                self.maps[c].remove,
                (ledger, entry, size, h),
                "pending.remove",
                consumer=c,
                ledger=ledger,
                entry=entry,
                batch_size=size,
                hash=h,
            )

        def remove_and_get(self, c: int, ledger: int, entry: int) -> None:
            got = self.maps[c].remove_and_get(ledger, entry)
            mine_got = None if got is None else list(got)
            if newer_api:
                pulsar = theirs(
                    oracle,
                    "pending.remove_and_get",
                    handle=self.handle,
                    consumer=c,
                    ledger=ledger,
                    entry=entry,
                )
            else:  # 4.0 has no removeAndGet: get, then remove
                pulsar = theirs(
                    oracle,
                    "pending.get",
                    handle=self.handle,
                    consumer=c,
                    ledger=ledger,
                    entry=entry,
                )
                oracle.call(
                    "pending.remove", handle=self.handle, consumer=c, ledger=ledger, entry=entry
                )
            tally.same(f"[{c}].remove_and_get({ledger}, {entry})", mine_got, pulsar)

        @rule(c=consumers, ledger=ledgers, entry=entries, delta=st.integers(0, 3), pick=picks)
        def update_remaining_unacked(
            self, c: int, ledger: int, entry: int, delta: int, pick: int
        ) -> None:
            if not newer_api:
                return
            ledger, entry = self.target(c, ledger, entry, pick)
            # Beyond the remaining count Pulsar goes negative: test_update_remaining_unacked.
            held = self.maps[c].get(ledger, entry)
            if held is not None:
                delta = min(delta, held[0])
            self.both(
                f"[{c}].update_remaining_unacked({ledger}, {entry}, {delta})",
                self.maps[c].update_remaining_unacked,
                (ledger, entry, delta),
                "pending.update_remaining_unacked",
                consumer=c,
                ledger=ledger,
                entry=entry,
                acked_delta=delta,
            )

        @rule(c=consumers, ledger=ledgers, entry=entries, now=seldom)
        def remove_all_up_to(self, c: int, ledger: int, entry: int, now: bool) -> None:
            if not now:
                return
            seen: list[list[int]] = []
            n = self.maps[c].remove_all_up_to(ledger, entry, lambda *ack: seen.append(list(ack)))
            pulsar = oracle.call(
                "pending.remove_all_up_to",
                handle=self.handle,
                consumer=c,
                ledger=ledger,
                entry=entry,
            )
            tally.same(f"[{c}].remove_all_up_to({ledger}, {entry})", n, pulsar["removed"])
            if pulsar["callback"] is not None:
                tally.same(
                    f"[{c}].remove_all_up_to({ledger}, {entry}) callback", seen, pulsar["callback"]
                )

        def for_each_and_close(self, c: int, now: bool) -> None:
            if not now:
                return
            seen: list[list[int]] = []
            self.maps[c].for_each_and_close(lambda *ack: seen.append(list(ack)))
            tally.same(
                f"[{c}].for_each_and_close()",
                seen,
                oracle.call("pending.for_each_and_close", handle=self.handle, consumer=c),
            )

        def for_each_and_clear(self, c: int, now: bool) -> None:
            if not newer_api or not now:
                return
            seen: list[list[int]] = []
            self.maps[c].for_each_and_clear(lambda *ack: seen.append(list(ack)))
            tally.same(
                f"[{c}].for_each_and_clear()",
                seen,
                oracle.call("pending.for_each_and_clear", handle=self.handle, consumer=c),
            )

        def reopen(self, c: int, now: bool) -> None:
            """The consumer's map anew (after a close, adds are allowed again)."""
            if now:
                self.open(c)

        def lookups(self, c: int, ledger: int, entry: int) -> None:
            got = self.maps[c].get(ledger, entry)
            tally.same(
                f"[{c}].get({ledger}, {entry})",
                None if got is None else list(got),
                oracle.call(
                    "pending.get", handle=self.handle, consumer=c, ledger=ledger, entry=entry
                ),
            )
            tally.same(
                f"[{c}].contains({ledger}, {entry})",
                self.maps[c].contains(ledger, entry),
                oracle.call(
                    "pending.contains", handle=self.handle, consumer=c, ledger=ledger, entry=entry
                ),
            )

        @rule(
            kind=st.sampled_from(
                ("clear", "consumer_removed", "for_each_and_close", "for_each_and_clear", "reopen")
            ),
            c=consumers,
            now=seldom,
        )
        def wipe(self, kind: str, c: int, now: bool) -> None:
            """One of the calls that empty a table (each run one time in five)."""
            if kind == "clear":
                self.clear(now)
            else:
                getattr(self, kind)(c, now)

        @rule(
            how=st.sampled_from(("remove", "exact", "inexact", "remove_and_get", "lookups")),
            c=consumers,
            ledger=ledgers,
            entry=entries,
            size=st.integers(1, 3),
            h=hashes,
            pick=picks,
        )
        def take(
            self, how: str, c: int, ledger: int, entry: int, size: int, h: int, pick: int
        ) -> None:
            """One ack looked up or removed: by position, by position with its batch size and
            hash (``exact``: the ack's own), or removed and returned."""
            ledger, entry = self.target(c, ledger, entry, pick)
            if how in ("exact", "inexact"):
                self.remove_exact(c, ledger, entry, size, h, how == "exact")
            else:
                getattr(self, how)(c, ledger, entry)

        # --- after every step: the whole state ----------------------------------------------

        @invariant()
        def same_state(self) -> None:
            pool = [0, *HASHES]
            tally.same(
                "entries",
                [entry_of(self.tracker, h) for h in pool],
                oracle.call("draining.entries", handle=self.handle, hashes=pool),
            )
            tally.same(
                "unblocking handler",
                self.told,
                oracle.call("draining.unblocked", handle=self.handle),
            )
            self.told.clear()
            for c in CONSUMERS:
                tally.same(
                    f"consumer_stats({c})",
                    stats_of(self.tracker, c),
                    oracle.call("draining.consumer_stats", handle=self.handle, consumer=c),
                )
                m = self.maps[c]
                tally.same(
                    f"[{c}].for_each()",
                    [list(a) for a in m.to_list()],
                    oracle.call("pending.for_each", handle=self.handle, consumer=c),
                )
                tally.same(
                    f"[{c}].size()",
                    m.size(),
                    oracle.call("pending.size", handle=self.handle, consumer=c),
                )

    return DrainingAgainstPulsar


def run_against(oracle: Oracle) -> None:
    tally = Tally(oracle.version)
    run_machine(machine_for(oracle, tally), tally, "draining", EXAMPLES, STEPS)


def test_same_as_pulsar_newest(oracle: Oracle) -> None:
    assert oracle.version == NEWEST
    run_against(oracle)


def test_same_as_pulsar_lts(oracle_lts: Oracle) -> None:
    assert oracle_lts.version == LTS
    run_against(oracle_lts)


# --- differences kept on purpose, each asserted against what Pulsar does --------------------


class Session:
    """One oracle tracker with a pending acks map per consumer, closed at the end."""

    def __init__(self, oracle: Oracle) -> None:
        self.oracle = oracle
        self.handle = oracle.call("draining.new", dispatcher_name="dispatcher")

    def __call__(self, op: str, **args: Any) -> Any:
        return self.oracle.call(op, handle=self.handle, **args)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.oracle.call("close", handle=self.handle)


def test_end_batch_without_start(pulsar_release: Oracle) -> None:
    """Pulsar's endBatch decrements its batch level unchecked: unmatched, the level goes to
    -1, the next startBatch only brings it back to 0, and an unblocking inside that "batch"
    is told at once by hash instead of once as -1 at its end. keyshared refuses the unmatched
    end_batch with a ValueError and stays as it was."""
    told: list[int] = []
    tracker = DrainingHashesTracker(told.append)
    with pytest.raises(ValueError, match="end_batch without a matching start_batch"):
        tracker.end_batch()
    with Session(pulsar_release) as s:
        s("draining.end_batch")  # accepted
        tracker.start_batch()
        s("draining.start_batch")
        tracker.add_entry(1, 5)
        s("draining.add_entry", consumer=1, hash=5)
        assert tracker.should_block_sticky_key_hash(2, 5)
        assert s("draining.should_block", consumer=2, hash=5)
        tracker.reduce_ref_count(1, 5)
        s("draining.reduce_ref_count", consumer=1, hash=5, closing=False)
        assert told == []  # keyshared: inside the batch, nothing yet
        assert s("draining.unblocked") == [5]  # Pulsar: told at once, as if no batch were open
        tracker.end_batch()
        s("draining.end_batch")
        assert told == [-1]
        assert s("draining.unblocked") == []
    record_kept(f"{pulsar_release.version} draining", "end_batch without start_batch", 2)


def test_hash_beyond_16_bits(pulsar_release: Oracle) -> None:
    """Pulsar's tracker takes any int as a hash (65536, -1); keyshared's hashes are the
    16-bit range's [1, 0xFFFF], and others are a ValueError (OverflowError for negatives)."""
    tracker = DrainingHashesTracker()
    with Session(pulsar_release) as s:
        for h in (0x10000, -1):
            with pytest.raises((ValueError, OverflowError)):
                tracker.add_entry(1, h)
            s("draining.add_entry", consumer=1, hash=h)
            assert s("draining.get_entry", hash=h) == {
                "consumer": 1,
                "ref_count": 1,
                "blocked_count": 0,
            }
    assert len(tracker) == 0
    record_kept(f"{pulsar_release.version} draining", "hash outside 16 bits", 2)


def test_removal_refused_by_the_tracker_changes_nothing(pulsar_release: Oracle) -> None:
    """An ack whose hash another consumer drains (reachable only by driving the tracker
    directly): Pulsar's remove takes the ack out of the map, then the tracker's
    reduceRefCount throws IllegalStateException, leaving the ack gone. keyshared refuses the
    removal with a ValueError and changes nothing."""
    tracker = DrainingHashesTracker()
    acks = PendingAcksMap(1, tracker)
    assert acks.add_pending_ack_if_allowed(1, 0, 1, 5)
    tracker.add_entry(2, 5)
    with pytest.raises(ValueError, match="already draining hash 5"):
        acks.remove(1, 0)
    assert acks.contains(1, 0)
    with Session(pulsar_release) as s:
        s("pending.new", consumer=1)
        assert s("pending.add", consumer=1, ledger=1, entry=0, batch_size=1, hash=5)
        s("draining.add_entry", consumer=2, hash=5)
        with pytest.raises(OracleError, match="IllegalStateException"):
            s("pending.remove", consumer=1, ledger=1, entry=0)
        assert not s("pending.contains", consumer=1, ledger=1, entry=0)
    record_kept(f"{pulsar_release.version} draining", "removal refused by the tracker", 1)


def test_update_remaining_unacked(pulsar_release: Oracle) -> None:
    """Pulsar 4.2's updateRemainingUnacked subtracts unchecked: a delta beyond the remaining
    count leaves it negative, and a negative delta raises it. keyshared answers False and
    changes nothing for the first and raises ValueError for the second. Pulsar 4.0 has no
    updateRemainingUnacked."""
    acks = PendingAcksMap(1)
    assert acks.add_pending_ack_if_allowed(1, 0, 2, 5)
    assert not acks.update_remaining_unacked(1, 0, 3)
    with pytest.raises(ValueError):
        acks.update_remaining_unacked(1, 0, -1)
    assert acks.get(1, 0) == (2, 5)
    with Session(pulsar_release) as s:
        s("pending.new", consumer=1, wired=False)
        assert s("pending.add", consumer=1, ledger=1, entry=0, batch_size=2, hash=5)
        if pulsar_release.version == LTS:
            with pytest.raises(OracleError, match="updateRemainingUnacked is missing"):
                s("pending.update_remaining_unacked", consumer=1, ledger=1, entry=0, acked_delta=3)
            return
        assert s("pending.update_remaining_unacked", consumer=1, ledger=1, entry=0, acked_delta=3)
        assert s("pending.get", consumer=1, ledger=1, entry=0) == [-1, 5]
        assert s("pending.update_remaining_unacked", consumer=1, ledger=1, entry=0, acked_delta=-4)
        assert s("pending.get", consumer=1, ledger=1, entry=0) == [3, 5]
    record_kept(
        f"{pulsar_release.version} draining", "remaining unacked beyond the count or below zero", 2
    )


# --- the differences the oracle found, fixed (these run without it) --------------------------


def test_closed_map_refuses_hash_zero_without_an_error() -> None:
    """As Pulsar's addPendingAckIfAllowed, which checks ``closed`` before the dispatcher's add
    handler refuses hash 0: a closed map answers False even for hash 0."""
    acks = PendingAcksMap(1, DrainingHashesTracker())
    with pytest.raises(ValueError):
        acks.add_pending_ack_if_allowed(1, 0, 1, 0)
    acks.for_each_and_close(lambda *ack: None)
    assert not acks.add_pending_ack_if_allowed(1, 0, 1, 0)
    assert acks.size() == 0


def test_stats_made_anew_list_only_later_hashes() -> None:
    """As Pulsar's per-consumer stats (a RoaringBitmap of the hashes added since the stats
    began): after consumer_removed, a consumer still draining hash 1 that starts draining
    hash 2 reports hash 2 alone."""
    tracker = DrainingHashesTracker()
    tracker.add_entry(2, 1)
    tracker.consumer_removed(2)
    tracker.add_entry(2, 2)
    tracker.add_entry(2, 1)
    stats = tracker.consumer_stats(2)
    assert stats.draining_hashes_count == 1
    assert stats.draining_hashes_unacked_messages == 1
    assert [d.hash for d in stats.draining_hashes] == [2]
    entry = tracker.get_entry(1)
    assert entry is not None and (entry.consumer_id, entry.ref_count) == (2, 2)
