"""Auto split and merge on a running Pulsar 5.0.0-M1 broker (PIP-483), decision by decision,
against keyshared's :func:`~keyshared.decide` on the same policy and the inputs the broker
read.

One scalable topic, one segment to start with, and a topic override that sets every field
of the auto-scale policy. The test drives it through three phases: more STREAM consumers
than segments (splits by consumer count), a keyed load above the split threshold (splits by
load), then no consumers and a steady trickle of its own on each segment, each a
different rate below the merge threshold (cold segments merge down to one, in the order of
their combined rates, which never tie). The broker's ZooKeeper is watched throughout
(``tests/support/broker_history.py``): every version of the layout and override, of each segment's
load record and of each consumer registration, with the store's timestamps, which are what
the broker's evaluator reads.

Two checks, both against ``decide(..., pulsar_version="5.0.0-M1")``:

* every decision the broker logged (segment, reason, merged pair) is keyshared's on the
  inputs in force when it was taken;
* whenever the inputs stood still over a whole evaluation interval (and some slack) and
  keyshared would act, the broker did act within it.

Differences are asserted by name: M1 lists the active segments in a hash map's order, so
it names a merged pair in that order where keyshared names the lower range first, and among
pairs exactly as cold (which the trickles rule out, but two idle segments would be) it merges
the first its map lists where keyshared takes the lowest hash range; and master's rules
(keyshared's default) serve the surplus consumers of a quiet topic with entry buckets where
M1 splits.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import islice
from typing import Any

import pytest
from support.broker_history import (
    BrokerDecision,
    Inputs,
    MetadataHistory,
    auto_scale_decisions,
    layout_of,
    policy_of,
)
from support.pulsar_broker import ScalableBroker
from support.pulsar_oracle import MILESTONE, Oracle, record, record_kept

import keyshared as ks
from keyshared.routing import segment_hash

TOPIC = "autoscale"
TOPIC_NAME = f"topic://public/default/{TOPIC}"
ROOT = f"/topics/public/default/{TOPIC}"
SUBSCRIPTION = "orders"

#: The broker evaluates every second and reports load every second (pulsar_broker's
#: SCALABLE_CONF); a consumer whose connection closed leaves after its grace period.
INTERVAL_MS = 1_000
#: How long after its inputs settle the broker may take to act: one evaluation interval,
#: a split or merge in flight (the controller evaluates one at a time), a loaded machine.
SLACK_MS = 2_500
#: How far before its log line the broker may have read its inputs.
READ_AHEAD_MS = 100
#: How far behind the store the broker's view of a load record may be: the controller reads
#: load records through its metadata cache (ScalableTopicController.collectLoadSamples),
#: which takes a new version when the store's notification reaches it, up to about one
#: report interval later on a loaded machine.
CACHE_LAG_MS = INTERVAL_MS

NAMING = "M1 names a merged pair in hash-map order"

#: The topic's override: every field set, so that the broker's defaults play no part.
#: Load splits past 150 msg/s in; a segment is cold below 20 msg/s and 1 MB/s each way.
OVERRIDE = {
    "enabled": True,
    "maxSegments": 8,
    "minSegments": 1,
    "maxDagDepth": 10,
    "splitCooldownSeconds": 1,
    "mergeCooldownSeconds": 1,
    "mergeWindowSeconds": 2,
    "splitMsgRateInThreshold": 150.0,
    "splitBytesRateInThreshold": 1_000_000_000,
    "splitMsgRateOutThreshold": 1_000_000.0,
    "splitBytesRateOutThreshold": 1_000_000_000,
    "mergeMsgRateInThreshold": 20.0,
    "mergeBytesRateInThreshold": 1_000_000,
    "mergeMsgRateOutThreshold": 20.0,
    "mergeBytesRateOutThreshold": 1_000_000,
}

#: The merges' phase: merge thresholds high enough for every trickle and their sum.
COLD_OVERRIDE = {**OVERRIDE, "mergeMsgRateInThreshold": 120.0, "mergeMsgRateOutThreshold": 120.0}

CONSUMERS = 3
LOAD_RATE = 400.0
KEYS = [f"key-{i}" for i in range(2_000)]
#: Each segment's trickle in the merges' phase, msg/s: paced, so that each second's count
#: stays within the load reporter's 25% and its record stands still.
TRICKLE_RATE = 8.0
TRICKLE_STEP = 1.5
#: The causes `drive.stop` names for the sends M1's producer fails on a scaling topic.
KNOWN_SEND_FAILURES = {"segment gone", "routed on the old layout", "segment fenced"}


def ks_active(broker: ScalableBroker) -> list[ks.Segment]:
    """The topic's active segments, in range order."""
    return list(layout_of(broker.layout(TOPIC_NAME)).active_segments())


def keys_of(segment: ks.Segment, count: int = 50) -> list[str]:
    """``count`` keys a 5.0.0-M1 producer sends to ``segment``."""
    keys = (f"trickle-{i}" for i in range(1_000_000))
    mine = (
        k for k in keys if segment.hash_range.contains(segment_hash(k, pulsar_version=MILESTONE))
    )
    return list(islice(mine, count))


class Driver:
    """The oracle's ``drive.*`` and ``metadata.*`` ops on one broker."""

    def __init__(self, oracle: Oracle, broker: ScalableBroker) -> None:
        self.oracle = oracle
        self.broker = broker
        self.client = oracle.call("v5.client", service_url=broker.service_url)
        # The consumers share a client of their own: closing it is how they leave.
        self.consumer_client: int | None = oracle.call("v5.client", service_url=broker.service_url)
        self.watch = oracle.call(
            "metadata.watch", connect=broker.metadata_connect, path=ROOT, timeout_ms=20_000
        )
        self.records: list[dict[str, Any]] = []
        self.consumers: list[int] = []

    def events(self) -> list[dict[str, Any]]:
        self.records += self.oracle.call("metadata.events", handle=self.watch)
        return self.records

    def active(self) -> list[int]:
        md = self.broker.layout(TOPIC_NAME)
        return sorted(s["segmentId"] for s in md["segments"].values() if s["state"] == "ACTIVE")

    def consumer(self) -> None:
        name = f"c{len(self.consumers)}"
        self.consumers.append(
            self.oracle.call(
                "drive.consumer",
                client=self.consumer_client,
                topic=TOPIC_NAME,
                subscription=SUBSCRIPTION,
                name=name,
                timeout_ms=30_000,
            )
        )

    def consumers_leave(self) -> None:
        """Closes every consumer and their client's connection: the broker evicts them
        after its grace period."""
        while self.consumers:
            self.oracle.call("drive.close", handle=self.consumers.pop())
        if self.consumer_client is not None:
            self.oracle.call("v5.close", handle=self.consumer_client)
            self.consumer_client = None

    def registered(self) -> int:
        """The consumers the broker still has registered on the subscription."""
        subscriptions = self.broker.stats(TOPIC_NAME).get("subscriptions", {})
        count: int = subscriptions.get(SUBSCRIPTION, {}).get("consumerCount", 0)
        return count

    def load(self, rate: float, keys: list[str] = KEYS) -> int:
        handle: int = self.oracle.call(
            "drive.load", client=self.client, topic=TOPIC_NAME, rate=rate, keys=keys
        )
        return handle

    def stop(self, load: int) -> None:
        """Stops a load. Its sends may fail only in M1's producer's three known ways, each a
        failure the sender sees while the broker's load records, which the comparison reads,
        are unaffected: it gave up on a sealed segment (it retries ten times over about 4 s,
        and on a loaded machine the new layout can reach it later), it routed a send on the
        old layout and found the segment gone from the new one before making its producer,
        or the broker kept the segment fenced until the producer's creation deadline ran out
        (docs/pulsar.md: neither of the last two is retried)."""
        answer = self.oracle.call("drive.stop", handle=load)
        assert set(answer["causes"]) <= KNOWN_SEND_FAILURES, answer

    def close(self) -> None:
        self.consumers_leave()
        self.oracle.call("v5.close", handle=self.client)
        self.oracle.call("metadata.unwatch", handle=self.watch)


def wait_for(what: str, done: Any, timeout_s: float, driver: Driver) -> None:
    """Polls ``done()`` every 0.25 s; fails naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout_s} s; active segments {driver.active()}")
        time.sleep(0.25)


def settled(driver: Driver, quiet_s: float, timeout_s: float) -> None:
    """Waits until the layout has not changed for ``quiet_s``."""
    deadline = time.monotonic() + timeout_s
    last, since = driver.active(), time.monotonic()
    while time.monotonic() - since < quiet_s:
        if time.monotonic() > deadline:
            pytest.fail(f"the layout kept changing for {timeout_s} s: {last}")
        time.sleep(0.25)
        now = driver.active()
        if now != last:
            last, since = now, time.monotonic()


def at_rest(driver: Driver, quiet_ms: int, timeout_s: float) -> None:
    """Waits until no record the watch shows (layout, override, load, consumers) has changed
    for ``quiet_ms``."""
    deadline = time.monotonic() + timeout_s
    while True:
        changes = MetadataHistory(ROOT, driver.events()).change_times
        if changes and time.time() * 1000 - changes[-1] >= quiet_ms:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"the topic's records kept changing for {timeout_s} s")
        time.sleep(0.25)


def caught_up(driver: Driver, timeout_s: float) -> list[dict[str, Any]]:
    """The watch's records once they show the layout the admin API shows: on a loaded
    machine the watch may report the last merge seconds after the layout has it."""
    deadline = time.monotonic() + timeout_s
    while True:
        versions = MetadataHistory(ROOT, driver.events()).versions()
        watched = [s.segment_id for s in layout_of(versions[-1][1]).active_segments()]
        if sorted(watched) == driver.active():
            return driver.records
        if time.monotonic() > deadline:
            pytest.fail(
                f"the watch shows active segments {watched} {timeout_s} s after the admin API"
                f" showed {driver.active()}"
            )
        time.sleep(0.25)


@pytest.fixture(scope="module")
def run(m1_broker: ScalableBroker, oracle_milestone: Oracle) -> Iterator[dict[str, Any]]:
    """Drives the topic through the three phases; the records, the broker's decisions and
    the run's start and end."""
    broker = m1_broker
    broker.create(TOPIC_NAME, segments=1)
    broker.scalable(TOPIC_NAME, "autoScalePolicy", "POST", OVERRIDE)
    driver = Driver(oracle_milestone, broker)
    started_ms = int(time.time() * 1000)
    try:
        # 1. Consumers: three STREAM consumers on the one segment, before any load (a
        #    segment sealed under load may refuse new subscriptions on M1): splits by
        #    consumer count, one per cooldown, up to three segments.
        for _ in range(CONSUMERS):
            driver.consumer()
        wait_for("splits by consumer count", lambda: len(driver.active()) >= CONSUMERS, 30, driver)
        settled(driver, quiet_s=2, timeout_s=30)
        # 2. Load: a steady keyed load; the half-ring segment takes half of it, above the
        #    split threshold, the quarter-ring ones a quarter, below it.
        load = driver.load(LOAD_RATE)
        wait_for("a split by load", lambda: len(driver.active()) > CONSUMERS, 30, driver)
        settled(driver, quiet_s=3, timeout_s=30)
        # 3. Cold: the consumers leave (gone before the load changes, so that no merge leaves
        #    more consumers than segments), then each segment gets a steady trickle of its
        #    own, below a merge threshold raised for it: the segments merge down to one, the
        #    coldest pair first, and no two pairs are ever exactly as cold.
        driver.consumers_leave()
        wait_for("the consumers' eviction", lambda: driver.registered() == 0, 30, driver)
        broker.scalable(TOPIC_NAME, "autoScalePolicy", "POST", COLD_OVERRIDE)
        driver.stop(load)
        trickles = [
            driver.load(TRICKLE_RATE + step * TRICKLE_STEP, keys_of(segment))
            for step, segment in enumerate(ks_active(broker))
        ]
        wait_for("merges down to one segment", lambda: len(driver.active()) == 1, 60, driver)
        for trickle in trickles:
            driver.stop(trickle)
        # At rest on one segment for a whole window and more: test_no_action_missed checks
        # the broker wherever the inputs stood still, and on a loaded machine the earlier
        # phases may never stand still that long.
        at_rest(driver, INTERVAL_MS + SLACK_MS + READ_AHEAD_MS + 1_000, timeout_s=90)
        records = caught_up(driver, timeout_s=30)
    finally:
        driver.close()
    ended_ms = int(time.time() * 1000)
    decisions = auto_scale_decisions(broker.log_lines(), TOPIC_NAME, started_ms)
    yield {
        "history": MetadataHistory(ROOT, records),
        "decisions": decisions,
        "started_ms": started_ms,
        "ended_ms": ended_ms,
    }


def check(broker: BrokerDecision, history: MetadataHistory) -> str | None:
    """None when keyshared decides as the broker did on the inputs in force then, or on
    those in force a moment earlier, before a record changed that the broker may not have
    read yet (READ_AHEAD_MS, CACHE_LAG_MS); else the name of the Pulsar behaviour that
    explains the difference. Fails on any other."""
    recent = [
        t - 1
        for t in history.change_times
        if broker.at_ms - READ_AHEAD_MS - CACHE_LAG_MS < t <= broker.at_ms
    ]
    moments = [broker.at_ms, *sorted(recent, reverse=True)]
    ours = []
    for t in moments:
        inputs = history.at(t)
        decision = inputs.decide(broker.at_ms)
        if decision == broker.decision:
            return None
        kept = merge_difference(broker.decision, decision, inputs, broker.at_ms)
        if kept is not None:
            return kept
        ours.append(decision)
    pytest.fail(f"the broker decided {broker} where keyshared decides {ours}")


def master_difference(inputs: Inputs, now_ms: int) -> str | None:
    """The name of the PIP-486 rule by which master decides otherwise than 5.0.0-M1 on the
    same inputs, or None when the two agree. Fails on any other difference."""
    m1, master = inputs.decide(now_ms), inputs.decide(now_ms, "master")
    if m1 == master:
        return None
    if isinstance(m1, ks.scalable.Split) and m1.reason == "consumer-count":
        assert isinstance(master, ks.scalable.Rebucket | ks.scalable.NoAction), (m1, master)
        return "master serves surplus consumers of a quiet topic with entry buckets, not a split"
    if isinstance(m1, ks.scalable.Merge):
        assert isinstance(master, ks.scalable.NoAction) and "consumers use" in master.reason, master
        return "master's capacity guard holds back a merge that idles a consumer"
    pytest.fail(f"master decides {master} where 5.0.0-M1 decides {m1}")


def merge_difference(
    theirs: ks.Decision, ours: ks.Decision, inputs: Inputs, now_ms: int
) -> str | None:
    """The name of M1's hash-map order when it explains a different merge: the same pair
    named the other way round, or another pair keyshared finds exactly as cold (keyshared,
    given only that pair's samples, merges it, and its combined rate is the coldest)."""
    if not (isinstance(theirs, ks.scalable.Merge) and isinstance(ours, ks.scalable.Merge)):
        return None
    pair, our_pair = (
        {theirs.segment_id_1, theirs.segment_id_2},
        {ours.segment_id_1, ours.segment_id_2},
    )
    if pair == our_pair:
        return NAMING
    only = {sid: inputs.samples[sid] for sid in pair if sid in inputs.samples}
    alone = ks.decide(
        inputs.layout,
        only,
        inputs.consumers,
        policy_of(inputs.override),
        now_ms,
        inputs.last_split_at_ms,
        inputs.last_merge_at_ms,
        pulsar_version=MILESTONE,
    )

    def combined(ids: set[int]) -> float:
        return sum(inputs.samples[sid].stats.combined_rate for sid in ids)

    assert isinstance(alone, ks.scalable.Merge), (theirs, alone)
    assert {alone.segment_id_1, alone.segment_id_2} == pair, (theirs, alone)
    assert combined(pair) == combined(our_pair), (theirs, ours)
    return "M1 merges the first of equally cold pairs in hash-map order"


def test_auto_scale_decisions(run: dict[str, Any]) -> None:
    """Each split and merge the broker logged is keyshared's decision on the layout, load
    samples, consumer counts and cooldown clocks in force when it took it: by load, by
    consumer count and of cold segments, each at least once."""
    history: MetadataHistory = run["history"]
    decisions: list[BrokerDecision] = run["decisions"]
    kinds = {
        ("split", d.decision.reason)
        if isinstance(d.decision, ks.scalable.Split)
        else ("merge", "cold")
        for d in decisions
    }
    assert {("split", "msgRateIn"), ("split", "consumer-count"), ("merge", "cold")} <= kinds, (
        decisions
    )
    kept: dict[str, int] = {}
    by_master: dict[str, int] = {}
    for d in decisions:
        why = check(d, history)
        if why is not None:
            kept[why] = kept.get(why, 0) + 1
        why = master_difference(history.at(d.at_ms), d.at_ms)
        if why is not None:
            by_master[why] = by_master.get(why, 0) + 1
    area = f"{MILESTONE} broker auto split and merge"
    # A pair named the other way round is still the same merge, in the same order.
    record(area, len(decisions) - sum(n for why, n in kept.items() if why != NAMING))
    for why, count in kept.items():
        record_kept(area, why, count)
    for why, count in by_master.items():
        record_kept(f"{area} (master's rules)", why, count)


def test_no_action_missed(run: dict[str, Any]) -> None:
    """Wherever the inputs stood still for an evaluation interval and some slack and
    keyshared would split or merge, the broker did act within that time; and at the end,
    settled on one segment, keyshared does nothing either."""
    history: MetadataHistory = run["history"]
    decisions: list[BrokerDecision] = run["decisions"]
    assert history.controller_since_ms is not None
    window = INTERVAL_MS + SLACK_MS
    start = history.controller_since_ms + INTERVAL_MS
    cases = 0
    for t in range(start, run["ended_ms"] - window, 200):
        if history.changed_between(t - READ_AHEAD_MS, t + window):
            continue
        decision = history.at(t).decide(t)
        cases += 1
        if isinstance(decision, ks.scalable.NoAction):
            continue
        acted = [d for d in decisions if t <= d.at_ms <= t + window]
        assert acted, f"keyshared would {decision} at {t}, the broker did nothing for {window} ms"
    final = history.at(run["ended_ms"]).decide(run["ended_ms"])
    assert isinstance(final, ks.scalable.NoAction), final
    assert cases > 0
    record(f"{MILESTONE} broker auto-scale inaction", cases + 1)
