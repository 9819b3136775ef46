"""keyshared's ConsistentHashingStickyKeyConsumerSelector against Pulsar's own (SPEC 5, PIP-379),
on the newest release (4.2.4) and the 4.0 LTS release (4.0.7).

A stateful test joins and removes consumers in random order (names drawn from a small pool,
so namesakes share a ring and their points collide, and from unicode names), with random
numbers of points and key hash ranges, and compares after every step the impacted consumers
Pulsar reports, every consumer's key hash ranges, and the consumer selected for drawn hashes;
the whole ring is compared hash by hash when a run ends. Adding an id twice is asserted
apart: keyshared refuses it, Pulsar's dispatcher never does it (each connection is a new
``Consumer`` object).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from support.pulsar_oracle import Oracle, Tally, record, record_kept, run_machine

from keyshared import ConsistentHashingStickyKeyConsumerSelector, HashRange
from keyshared.scalable import ImpactedConsumersResult

IDS = tuple(range(1, 9))
# Namesakes share a ring position sequence and collide point for point; "" and non-ASCII
# names reach the hash as UTF-8 bytes (the oracle's JVM runs with UTF-8 as default charset).
NAMES = ("c", "c", "d", "", "consumer-ä", "名前")

ids = st.sampled_from(IDS)
names = st.sampled_from(NAMES) | st.text(max_size=6)
points = st.sampled_from((1, 2, 3, 10, 100)) | st.integers(1, 200)
range_max_values = st.sampled_from((65535, 1, 2, 100, 1000)) | st.integers(1, 65535)

EXAMPLES = 120
STEPS = 30
DRAWN_HASHES = 64


def wire_ranges(ranges: dict[int, list[HashRange]]) -> dict[str, list[list[int]]]:
    """A ``{consumer: ranges}`` map as the oracle's JSON writes it."""
    return {str(c): [[r.start, r.end] for r in rs] for c, rs in sorted(ranges.items())}


def wire_impacted(result: ImpactedConsumersResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {
        "removed": wire_ranges(result.removed_hash_ranges),
        "added": wire_ranges(result.added_hash_ranges),
        "is_empty": result.is_empty(),
    }


def machine_for(oracle: Oracle, tally: Tally) -> type[RuleBasedStateMachine]:
    class SelectorAgainstPulsar(RuleBasedStateMachine):
        @initialize(n=points, impacted=st.booleans(), range_max=range_max_values)
        def build(self, n: int, impacted: bool, range_max: int) -> None:
            self.selector = ConsistentHashingStickyKeyConsumerSelector(n, impacted, range_max)
            args: dict[str, Any] = {"number_of_points": n, "returns_impacted": impacted}
            if range_max != 65535:
                args["range_max_value"] = range_max
            self.handle = oracle.call("selector.new", **args)
            self.range_max = range_max
            tally.same(
                "key_hash_range",
                [1, range_max],
                oracle.call("selector.key_hash_range", handle=self.handle),
            )

        def teardown(self) -> None:
            if hasattr(self, "handle"):
                self.whole_ring()
                oracle.call("close", handle=self.handle)

        def call(self, op: str, **args: Any) -> Any:
            return oracle.call(op, handle=self.handle, **args)

        @precondition(lambda self: len(self.selector) < len(IDS))
        @rule(data=st.data(), name=names)
        def add_consumer(self, data: st.DataObject, name: str) -> None:
            free = [i for i in IDS if i not in self.selector]
            c = data.draw(st.sampled_from(free), label="consumer")
            mine = wire_impacted(self.selector.add_consumer(c, name))
            tally.same(
                f"add_consumer({c}, {name!r})",
                mine,
                self.call("selector.add", consumer=c, name=name),
            )

        @rule(c=ids)
        def remove_consumer(self, c: int) -> None:
            mine = wire_impacted(self.selector.remove_consumer(c))
            tally.same(f"remove_consumer({c})", mine, self.call("selector.remove", consumer=c))

        @precondition(lambda self: len(self.selector) > 0)
        @rule(data=st.data())
        def add_again_is_refused(self, data: st.DataObject) -> None:
            c = data.draw(st.sampled_from(self.selector.consumer_ids), label="consumer")
            before = self.selector.get_consumer_key_hash_ranges()
            with pytest.raises(ValueError, match="already"):
                self.selector.add_consumer(c, "again")
            assert self.selector.get_consumer_key_hash_ranges() == before

        @invariant()
        def same_ranges(self) -> None:
            if not hasattr(self, "handle"):
                return
            mine = wire_ranges(self.selector.get_consumer_key_hash_ranges())
            tally.same("get_consumer_key_hash_ranges()", mine, self.call("selector.ranges"))

        @rule(drawn=st.lists(st.integers(0, 0xFFFF), min_size=1, max_size=DRAWN_HASHES))
        def select(self, drawn: list[int]) -> None:
            # Hashes above range_max_value and 0 wrap to the first point in both.
            mine = [self.selector.select(h) for h in drawn]
            theirs = self.call("selector.select_many", hashes=drawn)
            tally.same(f"select({drawn})", mine, theirs, len(drawn))

        def whole_ring(self) -> None:
            if len(self.selector) == 0:
                return
            every = np.arange(0, 0x10000, dtype=np.uint32)
            mine = self.selector.select_many(every).tolist()
            theirs = self.call("selector.select_range", start=0, end=0xFFFF)
            tally.same("select_many(0..65535)", mine, theirs, len(every))

    return SelectorAgainstPulsar


def run_against(oracle: Oracle) -> None:
    tally = Tally(oracle.version)
    run_machine(machine_for(oracle, tally), tally, "selector", EXAMPLES, STEPS)


def test_same_as_pulsar(pulsar_release: Oracle) -> None:
    run_against(pulsar_release)


def test_make_sticky_key_hash(pulsar_release: Oracle) -> None:
    """The selector's own ``makeStickyKeyHash`` over its key hash range."""
    keys = ["", "a", "key-1", "ä", "名前", "x" * 300]
    for range_max in (65535, 1, 1000):
        selector = ConsistentHashingStickyKeyConsumerSelector(10, True, range_max)
        args: dict[str, Any] = {"number_of_points": 10}
        if range_max != 65535:
            args["range_max_value"] = range_max
        handle = pulsar_release.call("selector.new", **args)
        theirs = pulsar_release.call("selector.make_sticky_key_hashes", handle=handle, keys=keys)
        pulsar_release.call("close", handle=handle)
        assert [selector.make_sticky_key_hash(k) for k in keys] == theirs
        record(f"{pulsar_release.version} selector", len(keys))


def test_default_charset_is_utf8(pulsar_release: Oracle) -> None:
    """Pulsar turns consumer names into bytes by the JVM's default charset; keyshared by UTF-8,
    which is Java 18's default everywhere and the oracle's (it runs with -Dfile.encoding=UTF-8)."""
    assert pulsar_release.call("hash.default_charset") == "UTF-8"


def test_a_hash_beyond_16_bits_is_refused(pulsar_release: Oracle) -> None:
    """Pulsar's ``select`` takes any int and wraps one above the ring's last point to its
    first (``ceilingEntry``, else ``firstEntry``); keyshared's sticky key hashes are 16-bit,
    and ``select`` of one above 0xFFFF is a ValueError naming ``sticky_key_hash``, so that a
    hash from another width fails where it was made rather than landing on the first
    point's consumer. Within 16 bits the two agree, wrap included (``select`` above)."""
    selector = ConsistentHashingStickyKeyConsumerSelector(10, True)
    handle = pulsar_release.call("selector.new", number_of_points=10)
    for c, name in ((1, "a"), (2, "b"), (3, "c")):
        selector.add_consumer(c, name)
        pulsar_release.call("selector.add", handle=handle, consumer=c, name=name)
    beyond = [0x10000, 0x12345, 2**31 - 1]
    theirs = pulsar_release.call("selector.select_many", handle=handle, hashes=beyond)
    pulsar_release.call("close", handle=handle)
    # Pulsar: the first point's consumer, as for hash 0.
    assert theirs == [selector.select(0)] * len(beyond)
    for h in beyond:
        with pytest.raises(ValueError, match="sticky_key_hash"):
            selector.select(h)
    record_kept(f"{pulsar_release.version} selector", "hash above 16 bits refused", len(beyond))
