"""PIP-475 migration on a running Pulsar 5.0.0-M1 broker: a partitioned topic written by a 4.x
producer, then by V5 producers through the not-yet-migrated topic, migrated, and written by
V5 producers again; against :func:`keyshared.create_migrated_metadata` and
:func:`keyshared.audit_migration`.

The 4.x Java client places a key by its default hashing scheme, JavaStringHash; the V5
client places a key on a not-yet-migrated topic by ``signSafeMod(Murmur3_32Hash, N)``. A key
both wrote is at risk where the two disagree (audit_migration's rule): its older message sits
in one legacy partition and its newer one in another, and a consumer reads the legacy
partitions side by side. To make every such break show, the test puts a backlog in partition 0
before the keys' first messages and picks its keys among those the 4.x client places in
partition 0 (the newer message then sits near the head of a short partition, the older one
behind the backlog) or that both clients place alike. Every key's third message, written
after the migration, lands in a new segment, which the broker hands out only once the legacy
partitions have drained: no key's order breaks there.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from support.pulsar_broker import MANUAL_NAMESPACE, AdminError, ScalableBroker
from support.pulsar_oracle import MILESTONE, Oracle, OracleError, record, record_kept

import keyshared as ks
from keyshared.routing import Partitioner, partitions
from keyshared.scalable import Risk, TopicName

PARTITIONS = 3
LOCAL = "migrated"
BASE = f"persistent://{MANUAL_NAMESPACE}/{LOCAL}"
TOPIC = f"topic://{MANUAL_NAMESPACE}/{LOCAL}"
BACKLOG = 2_000
KEYS_PER_KIND = 40
TIMEOUT_MS = 60_000


def pick_keys() -> tuple[list[str], list[str], list[str]]:
    """Two key sets, each with as many keys that both clients place alike (outside
    partition 0) as keys that the 4.x client places in partition 0 and the V5 client
    elsewhere: one drained before the V5 producer writes, one not; and the backlog's keys,
    which the 4.x client places in partition 0."""
    candidates = [f"order-{i}" for i in range(8_000)]
    v4 = partitions(candidates, PARTITIONS, Partitioner.PULSAR_JAVA_STRING_HASH)
    v5 = partitions(candidates, PARTITIONS, Partitioner.PULSAR_MURMUR3_32_HASH)
    alike = [k for k, a, b in zip(candidates, v4, v5, strict=True) if a == b and a != 0]
    apart = [k for k, a, b in zip(candidates, v4, v5, strict=True) if a == 0 and b != 0]
    n = KEYS_PER_KIND
    drained = alike[:n] + apart[:n]
    undrained = alike[n : 2 * n] + apart[n : 2 * n]
    fillers = [f"backlog-{i}" for i in range(4 * BACKLOG)]
    first = partitions(fillers, PARTITIONS, Partitioner.PULSAR_JAVA_STRING_HASH) == 0
    backlog = [k for k, zero in zip(fillers, first, strict=True) if zero][:BACKLOG]
    return drained, undrained, backlog


def without_buckets(layout: ks.TopicLayout) -> ks.TopicLayout:
    """The layout with one bucket per segment, as M1 (which has no entry buckets) has it."""
    segments = {sid: dataclasses.replace(s, bucket_splits=()) for sid, s in layout.segments.items()}
    return ks.TopicLayout(layout.epoch, layout.next_segment_id, segments)


def migrate(broker: ScalableBroker) -> None:
    """POST .../migrate. On a loaded machine M1 has answered 409 "Topic is already
    scalable" to the one request that migrated it (2 of 6 runs here); the layout the test
    then compares with create_migrated_metadata tells a migration from any other layout."""
    try:
        broker.scalable(TOPIC, "migrate", "POST")
    except AdminError as e:
        if e.status != 409 or "already scalable" not in e.reason:
            raise


def test_migration(m1_broker: ScalableBroker, oracle_milestone: Oracle) -> None:
    """The migrated layout is create_migrated_metadata's; each message lands in the
    partition keyshared places it in (JavaStringHash for the 4.x producer, Murmur3_32Hash
    mod N for the V5 one) or in a new segment; the keys whose order the 4.x consumer saw
    break are exactly audit_migration's at-risk keys, and none broke among the keys read to
    the end before the V5 producer wrote."""
    from support.broker_history import layout_of

    oracle = oracle_milestone
    drained, keys, backlog = pick_keys()
    url = m1_broker.service_url
    m1_broker.admin(f"persistent/{MANUAL_NAMESPACE}/{LOCAL}/partitions", "PUT", PARTITIONS)
    placed: list[int] = []
    written: list[str] = []  # every message's value, in the order written

    def v4_produce(messages: list[list[str]]) -> None:
        got = oracle.call(
            "drive.v4_produce",
            service_url=url,
            topic=BASE,
            messages=messages,
            timeout_ms=TIMEOUT_MS,
        )
        ours = partitions([k for k, _ in messages], PARTITIONS, Partitioner.PULSAR_JAVA_STRING_HASH)
        assert got == ours.tolist()
        placed.extend(got)
        written.extend(v for _, v in messages)

    def v4_consume(values: list[str]) -> list[dict[str, Any]]:
        """The first delivery of each of ``values``, in the order they came: a message whose
        ack the closed consumer before had not yet persisted comes again, as at-least-once
        allows, and is read past."""
        wanted, first = set(values), dict[str, dict[str, Any]]()
        while missing := len(values) - len(first):
            got: list[dict[str, Any]] = oracle.call(
                "drive.v4_consume",
                service_url=url,
                topic=BASE,
                subscription="legacy-reader",
                count=missing,
                timeout_ms=TIMEOUT_MS,
            )
            assert len(got) == missing
            for m in got:
                if m["value"] in wanted:
                    first.setdefault(m["value"], m)
        return list(first.values())

    client = oracle.call("v5.client", service_url=url)
    try:

        def v5_produce(topic: str, keys: list[str], number: int) -> list[int]:
            got: list[int] = oracle.call(
                "v5.produce",
                client=client,
                topic=topic,
                keys=keys,
                values=[f"{k}:{number}" for k in keys],
            )
            return got

        # 1. The first key set: a 4.x producer writes, a 4.x consumer reads it all (the
        #    legacy partitions drain), then a V5 producer writes through the topic's
        #    persistent:// name, under which it is a layout of legacy segments.
        v4_produce([[k, f"{k}:1"] for k in drained])
        received = v4_consume([f"{k}:1" for k in drained])
        legacy = v5_produce(BASE, drained, 2)
        # 2. The second: a backlog in partition 0 and each key's first message from the 4.x
        #    producer, then its second from the V5 producer, nothing read in between.
        v4_produce([[k, f"{k}:0"] for k in backlog] + [[k, f"{k}:1"] for k in keys])
        legacy += v5_produce(BASE, keys, 2)
        assert (
            legacy
            == partitions(drained + keys, PARTITIONS, Partitioner.PULSAR_MURMUR3_32_HASH).tolist()
        )
        placed.extend(legacy)
        written.extend([f"{k}:2" for k in drained + keys])
        # 3. The migration.
        migrate(m1_broker)
        metadata = m1_broker.layout(TOPIC)
        layout = layout_of(metadata)
        created = layout.segments[0].created_at_ms
        assert layout == without_buckets(
            ks.create_migrated_metadata(BASE, PARTITIONS, now_ms=created)
        )
        # 4. V5 again, on the migrated topic: each key's third message, in a new segment.
        fresh = oracle.call(
            "v5.produce", client=client, topic=TOPIC, keys=keys, values=[f"{k}:3" for k in keys]
        )
        assert set(fresh) <= {s.segment_id for s in layout.active_segments()}
        # 5. M1's STREAM consumer cannot read a migrated topic: the controller hands it the
        #    legacy partitions under segment:// names (the names compute_assignment gives
        #    them too), which no topic has, and its drain check asks the same names, so the
        #    new segments never come.
        first = ks.compute_assignment(layout, TopicName.get(TOPIC), ["reader"], [])["reader"]
        with pytest.raises(OracleError, match="does not exist") as refused:
            oracle.call(
                "v5.stream_consumer",
                client=client,
                topic=TOPIC,
                subscription="audit",
                consumer_name="reader",
            )
        assert first.assigned_segments[0].segment_topic_name in str(refused.value)
        record_kept(
            f"{MILESTONE} broker migration",
            "M1's STREAM consumer subscribes to a legacy partition by a segment:// name",
        )
    finally:
        oracle.call("v5.close", handle=client)
    # 6. The 4.x consumer reads the rest of the legacy partitions, side by side, as the
    #    topic's 4.x consumers do.
    read = {m["value"] for m in received}
    received += v4_consume([v for v in written if v not in read])
    placement = dict(zip(written, placed, strict=True))
    assert [m["partition"] for m in received] == [placement[m["value"]] for m in received]
    seen = order_by_key(received)
    assert all(sorted(seen[k]) == [1, 2] for k in drained + keys)
    assert all(seen[k] == [0] for k in backlog)

    def at_risk(key_set: list[str]) -> set[str]:
        audit = ks.audit_migration(
            key_set,
            Partitioner.PULSAR_JAVA_STRING_HASH,
            PARTITIONS,
            layout,
            sample_size=len(key_set),
        )
        assert audit.risk == Risk.LEGACY_SCHEME_DIFFERS.value
        return set(audit.at_risk_sample)

    def broken(key_set: list[str]) -> set[str]:
        return {k for k in key_set if seen[k] != [1, 2]}

    # Written by both producers with nothing read in between: the keys at risk broke.
    assert at_risk(keys) == broken(keys)
    assert len(broken(keys)) == KEYS_PER_KIND
    # Read to the end before the V5 producer wrote: as many keys at risk, none broke.
    assert len(at_risk(drained)) == KEYS_PER_KIND
    assert not broken(drained)
    record(f"{MILESTONE} broker migrated layout", 1)
    record(f"{MILESTONE} broker 4.x and V5 placement before migration", len(placed))
    record(f"{MILESTONE} broker migration order at risk", len(keys))
    record(f"{MILESTONE} broker migration order once drained", len(drained))


def order_by_key(received: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Each key's message numbers in the order the consumer got them."""
    seen: dict[str, list[int]] = {}
    for m in received:
        key, number = m["value"].rsplit(":", 1)
        assert key == m["key"], m
        seen.setdefault(key, []).append(int(number))
    return seen
