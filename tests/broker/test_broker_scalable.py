"""keyshared against a running Pulsar 5.0.0-M1 standalone broker with scalable topics
(PIP-483), end to end, through the admin REST API and M1's V5 Java client.

- Layouts: after creation, random splits and merges (refused ones included) and the
  migration of a v4 topic, the broker's whole DAG equals keyshared's TopicLayout (ids,
  ranges, epochs and times, states, parents and children, legacy names); a refusal is a
  refusal on both, keyshared naming the reason where the broker answers HTTP 500.
- Routing: every key a V5 producer sends lands in the segment keyshared routes it to under
  the M1 profile (``pulsar_version="5.0.0-M1"``), as stored and as a consumer receives it;
  master's rule (the default) sends some elsewhere, each counted as a difference kept on
  purpose.
- Assignment: through joins, leaves, splits and merges, every stream consumer's segments
  equal keyshared's SubscriptionCoordinator under the M1 profile, fed the sealed segments
  the broker reports drained.

The topics live in public/manual, where the broker never splits or merges by itself.
Every wait has a timeout.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.pulsar_broker import (
    MANUAL_NAMESPACE,
    SCALABLE_CONF,
    AdminError,
    BrokerUnavailable,
    ScalableBroker,
    V5Client,
    free_port,
)
from support.pulsar_oracle import MILESTONE, OracleError, OracleUnavailable, record, record_kept

import keyshared as ks

AREA = f"{MILESTONE} broker"
SETTLE_TIMEOUT_S = 30.0
BROKER_SETTINGS = settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# Java turns a lone surrogate into '?' where Python refuses to encode it: keys are whole
# text. An empty key is a keyless message to the V5 producer (round-robin): left out.
KEYS = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=16)
FIXED_KEYS = ["hello", "ключ", "鍵", "😀-smile", "naïve", " ", *(f"key-{i}" for i in range(60))]
MASTER_ROUTES = "master routes a key by the high half of its hash, M1 by the low"


def new_topic(prefix: str) -> str:
    return f"topic://{MANUAL_NAMESPACE}/{prefix}-{uuid.uuid4().hex[:8]}"


def broker_form(layout: dict[str, Any]) -> dict[str, Any]:
    """The broker's layout JSON in keyshared's ``to_dict`` form."""
    segments = sorted(layout["segments"].values(), key=lambda s: s["segmentId"])
    return {
        "epoch": layout["epoch"],
        "next_segment_id": layout["nextSegmentId"],
        "segments": [
            {
                "segment_id": s["segmentId"],
                "hash_range": f"{s['hashRange']['start']:04x}-{s['hashRange']['end']:04x}",
                "state": s["state"],
                "parent_ids": s["parentIds"],
                "child_ids": s["childIds"],
                "created_at_ms": s["createdAtMs"],
                "sealed_at_ms": s["sealedAtMs"],
                "created_at_epoch": s["createdAtEpoch"],
                "sealed_at_epoch": s["sealedAtEpoch"],
                "legacy_topic_name": s.get("legacyTopicName"),
            }
            for s in segments
        ],
    }


def ours_form(layout: ks.TopicLayout) -> dict[str, Any]:
    """keyshared's layout less what M1 has not: entry buckets (PIP-486) and the recorded
    hashing scheme of legacy segments."""
    data = layout.to_dict()
    drop = {"bucket_splits", "legacy_hashing_scheme"}
    data["segments"] = [{k: v for k, v in s.items() if k not in drop} for s in data["segments"]]
    return data


class Mirror:
    """A scalable topic on the broker and keyshared's TopicLayout of it, changed in step;
    each change is checked whole. keyshared's operations take the broker's clock: the time
    it stamped on what changed."""

    def __init__(self, broker: ScalableBroker, topic: str, segments: int) -> None:
        self.broker, self.topic = broker, broker.create(topic, segments)
        created = self.broker.layout(self.topic)["segments"]["0"]["createdAtMs"]
        self.layout = ks.TopicLayout.initial(segments, 1, now_ms=created)
        self.cases = 0
        self.check()

    def check(self) -> dict[str, Any]:
        """The whole layout, and the segment topic names and states of the topic's stats."""
        theirs = self.broker.layout(self.topic)
        assert broker_form(theirs) == ours_form(self.layout)
        stats = self.broker.stats(self.topic)
        parent = ks.TopicName.get(self.topic)
        assert stats["epoch"] == self.layout.epoch
        assert stats["segments"] == {
            str(sid): {
                "name": str(ks.scalable.SegmentTopicName.from_parent(parent, s.hash_range, sid)),
                "state": s.state.value,
            }
            for sid, s in self.layout.segments.items()
        }
        self.cases += 1
        return theirs

    def sealed_at(self, segment_id: int) -> int:
        stamp: int = self.broker.layout(self.topic)["segments"][str(segment_id)]["sealedAtMs"]
        return stamp

    def split(self, segment_id: int) -> None:
        self.broker.split(self.topic, segment_id)
        self.layout = self.layout.split_segment(segment_id, self.sealed_at(segment_id))
        self.check()

    def merge(self, a: int, b: int) -> None:
        self.broker.merge(self.topic, a, b)
        self.layout = self.layout.merge_segments(a, b, self.sealed_at(a))
        self.check()

    def refused(self, op: str, ids: tuple[int, ...]) -> None:
        """The broker refuses ``op`` with its reason for it, keyshared with its own, and the
        layout stays as it was on both."""
        broker_reason, our_reason = REASONS[refusal_kind(self.layout, op, ids)]
        call: Callable[[], Any] = (
            (lambda: self.broker.split(self.topic, *ids))
            if op == "split"
            else (lambda: self.broker.merge(self.topic, *ids))
        )
        with pytest.raises(AdminError) as theirs:
            call()
        assert theirs.value.status == 500 and broker_reason in theirs.value.reason
        with pytest.raises(ValueError, match=our_reason):
            if op == "split":
                self.layout.split_segment(ids[0], 1)
            else:
                self.layout.merge_segments(ids[0], ids[1], 1)
        self.check()


# The broker's reason (its HTTP 500 page's message) and keyshared's, by kind of refusal.
REASONS = {
    "split unknown": ("Segment not found: ", "is not in the layout"),
    "split sealed": ("Cannot split non-active segment: ", "it is sealed"),
    "merge unknown": ("Segment not found", "is not in the layout"),
    "merge sealed": ("Both segments must be active", "it is sealed"),
    # Merging a segment with itself: M1 finds the range not adjacent to itself.
    "merge self": ("Segments are not adjacent", "with itself"),
    "merge apart": ("Segments are not adjacent", "are not adjacent"),
}


def refusal_kind(layout: ks.TopicLayout, op: str, ids: tuple[int, ...]) -> str:
    if any(i not in layout.segments for i in ids):
        return f"{op} unknown"
    if any(layout.segments[i].is_sealed for i in ids):
        return f"{op} sealed"
    return "merge self" if ids[0] == ids[1] else "merge apart"


def step(mirror: Mirror, data: st.DataObject) -> None:
    """One random operation: a split, a merge of neighbours (either way round), or one the
    broker must refuse."""
    layout = mirror.layout
    active = [s.segment_id for s in layout.active_segments()]
    sealed = [s for s, seg in layout.segments.items() if seg.is_sealed]
    unknown = layout.next_segment_id + data.draw(st.integers(0, 3), label="unknown offset")
    choices = ["split", "split", "merge self", "split unknown", "merge unknown"]
    choices += ["merge"] * (len(active) > 1) + ["merge apart"] * (len(active) > 2)
    choices += ["split sealed", "merge sealed"] * bool(sealed)
    kind = data.draw(st.sampled_from(choices), label="operation")
    pick = data.draw(st.integers(0, 1 << 16), label="pick")
    if kind == "split":
        mirror.split(active[pick % len(active)])
    elif kind == "merge":
        i = pick % (len(active) - 1)
        a, b = active[i], active[i + 1]
        mirror.merge(*((a, b) if data.draw(st.booleans(), label="order") else (b, a)))
    elif kind == "split sealed":
        mirror.refused("split", (sealed[pick % len(sealed)],))
    elif kind == "split unknown":
        mirror.refused("split", (unknown,))
    elif kind == "merge sealed":
        mirror.refused("merge", (sealed[pick % len(sealed)], active[pick % len(active)]))
    elif kind == "merge unknown":
        mirror.refused("merge", (active[pick % len(active)], unknown))
    elif kind == "merge self":
        mirror.refused("merge", (active[pick % len(active)],) * 2)
    else:
        i = pick % (len(active) - 2)
        mirror.refused("merge", (active[i], active[i + 2]))


@BROKER_SETTINGS
@given(st.integers(1, 4), st.data())
def test_layouts_after_splits_and_merges(
    m1_broker: ScalableBroker, segments: int, data: st.DataObject
) -> None:
    mirror = Mirror(m1_broker, new_topic("layout"), segments)
    try:
        for _ in range(data.draw(st.integers(1, 8), label="steps")):
            step(mirror, data)
    finally:
        record(f"{AREA} layout", mirror.cases)


def test_creation_refused_and_repeated(m1_broker: ScalableBroker) -> None:
    """No segments: refused by both, for that reason. A topic made twice: the second is
    refused and the first keeps its layout."""
    with pytest.raises(AdminError) as theirs:
        m1_broker.create(new_topic("none"), 0)
    assert theirs.value.status == 412 and "numInitialSegments must be >= 1" in theirs.value.reason
    with pytest.raises(ValueError, match="num_segments must be >= 1"):
        ks.TopicLayout.initial(0, 1)
    mirror = Mirror(m1_broker, new_topic("twice"), 3)
    with pytest.raises(AdminError) as again:
        m1_broker.create(mirror.topic, 2)
    assert again.value.status == 409
    mirror.check()
    record(f"{AREA} layout", mirror.cases + 1)


@pytest.mark.parametrize("partitions", [0, 1, 3])
def test_migrated_layout(m1_broker: ScalableBroker, partitions: int) -> None:
    """PIP-475: a v4 topic (``partitions`` 0: not partitioned) made scalable: its layout is
    create_migrated_metadata's, legacy parents wrapping the v4 partitions."""
    local = f"legacy-{uuid.uuid4().hex[:8]}"
    base = f"persistent://{MANUAL_NAMESPACE}/{local}"
    if partitions:
        m1_broker.admin(f"persistent/{MANUAL_NAMESPACE}/{local}/partitions", "PUT", partitions)
    else:
        m1_broker.admin(f"persistent/{MANUAL_NAMESPACE}/{local}", "PUT")
    topic = f"topic://{MANUAL_NAMESPACE}/{local}"
    m1_broker.scalable(topic, "migrate", "POST")
    theirs = m1_broker.layout(topic)
    now = theirs["segments"]["0"]["createdAtMs"]
    ours = ks.create_migrated_metadata(base, partitions, 1, now_ms=now)
    assert broker_form(theirs) == ours_form(ours)
    with pytest.raises(AdminError) as again:
        m1_broker.scalable(topic, "migrate", "POST")
    assert again.value.status == 409
    record(f"{AREA} layout", 1)


# --- routing ----------------------------------------------------------------------------


@BROKER_SETTINGS
@given(
    st.integers(1, 4),
    st.lists(st.tuples(st.booleans(), st.integers(0, 1 << 16)), max_size=3),
    st.lists(KEYS, min_size=20, max_size=120, unique=True),
)
def test_keys_land_where_keyshared_routes_them(
    m1_broker: ScalableBroker,
    v5_client: V5Client,
    segments: int,
    changes: list[tuple[bool, int]],
    drawn: list[str],
) -> None:
    """Keys sent by a V5 producer to a topic after random splits and merges: the segment
    each is stored in, and the segment a stream consumer receives it from, are the one the
    M1 profile routes it to."""
    mirror = Mirror(m1_broker, new_topic("route"), segments)
    for split, pick in changes:
        active = [s.segment_id for s in mirror.layout.active_segments()]
        if split or len(active) == 1:
            mirror.split(active[pick % len(active)])
        else:
            i = pick % (len(active) - 1)
            mirror.merge(active[i], active[i + 1])
    keys = list(dict.fromkeys([*FIXED_KEYS, *drawn]))
    consumer = v5_client.stream_consumer(mirror.topic, "sub", "reader")
    try:
        stored = v5_client.produce(mirror.topic, keys, [str(i) for i in range(len(keys))])
        received = receive_all(v5_client, consumer, len(keys))
    finally:
        v5_client.close(consumer)
    routed, _ = mirror.layout.route_keys(keys, pulsar_version=MILESTONE)
    assert stored == routed.tolist()
    assert sorted((int(m["value"]), m["segment_id"]) for m in received) == list(enumerate(stored))
    master, _ = mirror.layout.route_keys(keys)
    elsewhere = int((master != routed).sum())
    # The default is master's rule: the high half of the key hash.
    assert master.tolist() == [
        mirror.layout.find_active_segment(ks.key_hash(k) >> 16).segment_id for k in keys
    ]
    record(f"{AREA} routing", len(keys) * 2)
    record_kept(f"{AREA} routing", MASTER_ROUTES, elsewhere)


def receive_all(v5: V5Client, consumer: int, count: int) -> list[dict[str, Any]]:
    """What the consumer receives until it has ``count`` messages (or stays quiet)."""
    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while len(received) < count and time.monotonic() < deadline:
        received += v5.receive(consumer, quiet_ms=1500)
    assert len(received) == count, f"received {len(received)} of {count} messages"
    return received


# --- consumers to segments ----------------------------------------------------------------


class Subscription:
    """Stream consumers of one subscription on the broker, and keyshared's coordinator (M1
    profile) fed the same joins, leaves, layout changes and the drains the broker
    reports."""

    def __init__(self, mirror: Mirror, v5: V5Client, name: str = "sub") -> None:
        self.mirror, self.v5, self.name = mirror, v5, name
        self.coordinator = ks.SubscriptionCoordinator(
            name,
            ks.TopicName.get(mirror.topic),
            mirror.layout,
            drain_checker=True,
            grace_period_ms=int(SCALABLE_CONF["scalableTopicConsumerSessionGracePeriodSeconds"])
            * 1000,
            pulsar_version=MILESTONE,
        )
        self.consumers: dict[str, int] = {}
        self.cases = 0
        self.produced: list[str] = []
        self.received: list[dict[str, Any]] = []

    def join(self, name: str) -> None:
        self.consumers[name] = self.v5.stream_consumer(
            self.mirror.topic, self.name, name, own_client=True
        )
        self.coordinator, _ = self.coordinator.register_consumer(name, self.consumers[name])
        self.check()

    def leave(self, name: str) -> None:
        """The consumer's connection closes (M1's consumer sends no unsubscribe): the broker
        evicts its session once the grace period has passed."""
        self.v5.close(self.consumers.pop(name))
        now = int(time.time() * 1000)
        gone = self.coordinator.on_consumer_disconnect(name, now)
        self.coordinator = gone.evict_expired(now + gone.grace_period_ms)
        self.check()

    def layout_changed(self) -> None:
        self.coordinator, _ = self.coordinator.on_layout_change(self.mirror.layout)
        self.check()

    def produce(self, count: int) -> None:
        keys = [f"key-{len(self.produced) + i}" for i in range(count)]
        self.v5.produce(self.mirror.topic, keys)
        self.produced += keys

    def drain(self) -> None:
        """Every consumer reads what it is given (acknowledging it), until every message
        sent came and the broker has seen every sealed segment drained; then each consumer
        has its final assignment."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        sealed = {s for s, seg in self.mirror.layout.segments.items() if seg.is_sealed}
        while True:
            for name, handle in self.consumers.items():
                self.v5.resubscribe(handle)
                for message in self.v5.receive(handle, quiet_ms=500):
                    self.received.append({**message, "consumer": name})
            drained = self.mirror.broker.drained_segments(self.mirror.topic, self.name)
            missing = set(self.produced) - {m["key"] for m in self.received}
            if (drained >= sealed and not missing) or time.monotonic() > deadline:
                break
        assert drained >= sealed, f"the broker reports {sorted(drained)} of {sorted(sealed)}"
        assert not missing, f"{len(missing)} messages never came"
        self.check()

    def expected(self, drained: set[int]) -> dict[str, tuple[int, list[tuple[int, int, int]]]]:
        coordinator = self.coordinator.mark_segments_drained(drained)
        return {
            name: (
                a.layout_epoch,
                [(s.segment_id, s.hash_range.start, s.hash_range.end) for s in a.assigned_segments],
            )
            for name, a in coordinator.current_assignment().items()
        }

    def observed(self) -> tuple[set[int], dict[str, Any]]:
        """The drained segments the broker reports and every consumer's assignment, read
        while no drain report came in between."""
        while True:
            drained = self.mirror.broker.drained_segments(self.mirror.topic, self.name)
            seen = {n: self.v5.assignment(h) for n, h in sorted(self.consumers.items())}
            if self.mirror.broker.drained_segments(self.mirror.topic, self.name) == drained:
                return drained, seen

    def check(self) -> None:
        """Every consumer's assignment equals keyshared's once the broker has pushed it
        (assignments travel asynchronously: the last one seen must match within the
        timeout)."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while True:
            drained, seen = self.observed()
            expected = self.expected(drained)
            if seen == expected or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert seen == expected, f"drained {sorted(drained)}"
        self.cases += len(expected)

    def close(self) -> None:
        for handle in self.consumers.values():
            self.v5.close(handle)


def test_assignment_of_the_issue(m1_broker: ScalableBroker, v5_client: V5Client) -> None:
    """Two consumers on 4 segments; 0 splits into 4 and 5, which merge into 6. Once 0, 4 and
    5 drained, M1 gives c0 [4, 6, 1, 3] and c1 [0, 5, 2] (a drained sealed segment ends at
    once on its consumer, which then reads 1, 3, 6 and 2); master would give c0 [6, 2] and
    c1 [1, 3]."""
    mirror = Mirror(m1_broker, new_topic("assign"), 4)
    sub = Subscription(mirror, v5_client)
    try:
        sub.join("c0")
        sub.join("c1")
        sub.produce(40)
        mirror.split(0)
        sub.layout_changed()
        sub.produce(40)
        sub.drain()
        mirror.merge(4, 5)
        sub.layout_changed()
        sub.produce(40)
        sub.drain()
        drained, seen = sub.observed()
        assert drained == {0, 4, 5}
        assert {n: [s for s, _, _ in segs] for n, (_, segs) in seen.items()} == {
            "c0": [4, 6, 1, 3],
            "c1": [0, 5, 2],
        }
        master = ks.compute_assignment(
            mirror.layout, ks.TopicName.get(mirror.topic), ["c0", "c1"], drained
        )
        assert {n: list(a.segment_ids) for n, a in master.items()} == {
            "c0": [6, 2],
            "c1": [1, 3],
        }
        record_kept(f"{AREA} assignment", "master retires drained sealed segments, M1 not")
        check_deliveries(sub)
    finally:
        sub.close()
        record(f"{AREA} assignment", sub.cases)


def check_deliveries(sub: Subscription) -> None:
    """Every key came once at least, from the segment the M1 profile routed it to when it
    was sent (a key's segment changes with the layout, so only the set is checked: every
    segment it came from covers its hash at some epoch)."""
    keys = {m["key"] for m in sub.received}
    assert keys == set(sub.produced)
    for m in sub.received:
        segment = sub.mirror.layout.segments[m["segment_id"]]
        assert segment.hash_range.contains(
            ks.routing.segment_hash(m["key"], pulsar_version=MILESTONE)
        ), m


@BROKER_SETTINGS
@given(
    st.lists(
        st.tuples(st.sampled_from(["join", "leave", "split", "merge"]), st.integers(0, 1 << 16)),
        min_size=3,
        max_size=7,
    )
)
def test_assignment_through_joins_leaves_splits_and_merges(
    m1_broker: ScalableBroker, v5_client: V5Client, events: list[tuple[str, int]]
) -> None:
    """Random joins and leaves of consumers and splits and merges of segments, messages
    sent and read between them: after each event, and once every sealed segment drained,
    each consumer holds the segments keyshared's M1 profile assigns it."""
    mirror = Mirror(m1_broker, new_topic("events"), 2)
    sub = Subscription(mirror, v5_client)
    names = iter(f"c{i}" for i in range(100))
    try:
        sub.join(next(names))
        for event, pick in events:
            active = [s.segment_id for s in mirror.layout.active_segments()]
            if event == "join" or (event == "leave" and len(sub.consumers) == 1):
                sub.join(next(names))
            elif event == "leave":
                sub.leave(sorted(sub.consumers)[pick % len(sub.consumers)])
            elif event == "split" or len(active) == 1:
                mirror.split(active[pick % len(active)])
                sub.layout_changed()
            else:
                i = pick % (len(active) - 1)
                mirror.merge(active[i], active[i + 1])
                sub.layout_changed()
            sub.produce(10)
        sub.drain()
        check_deliveries(sub)
    finally:
        sub.close()
        record(f"{AREA} assignment", sub.cases)


# --- failures are loud and bounded ------------------------------------------------------------


def test_an_m1_broker_that_cannot_start_says_why_and_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from support import pulsar_broker

    monkeypatch.setattr(pulsar_broker, "JVM_OPTIONS", ["-XX:+NoSuchOptionAnywhere"])
    before = set(Path(tempfile.gettempdir()).glob("keyshared-pulsar-*"))
    started = time.monotonic()
    with pytest.raises(BrokerUnavailable, match="NoSuchOptionAnywhere"):
        ScalableBroker(start_timeout_s=60.0)
    assert time.monotonic() - started < 60
    assert set(Path(tempfile.gettempdir()).glob("keyshared-pulsar-*")) == before


def test_a_v5_client_of_a_broker_that_is_down_fails_fast() -> None:
    """No broker behind the URL: the V5 client's calls fail within their timeout with the
    client's error, and a harness that dies is reported as such."""
    down = SimpleNamespace(service_url=f"pulsar://127.0.0.1:{free_port()}")
    started = time.monotonic()
    with V5Client(down, timeout_ms=3000) as v5:  # type: ignore[arg-type]
        with pytest.raises(OracleError):
            v5.produce("topic://public/manual/nowhere", ["k"])
        assert time.monotonic() - started < 60
        v5.oracle._proc.kill()
        with pytest.raises(OracleUnavailable, match=r"exited|died"):
            v5.produce("topic://public/manual/nowhere", ["k"])
