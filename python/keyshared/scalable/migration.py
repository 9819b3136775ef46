"""Migrating a regular topic to a scalable one (PIP-475; Pulsar's
``ScalableTopicController.createMigratedMetadata``).

Each of the ``N`` old partitions (or the whole topic, if it was not partitioned) becomes a
sealed *legacy* parent that wraps the existing ``persistent://`` topic and spans the whole
ring: v4 producers routed keys by ``signSafeMod(hash, N)``
(:func:`keyshared.routing.router.choose_partition`), so any key range may sit in every partition.
``N`` new active children tile the ring as an initial layout does and share the topic's
entry-bucket budget; each lists every parent, so that a consumer gets a child only once all
the parents have drained (per-key order across the migration). The parents take no new
writes and keep one bucket, and may record the :class:`~keyshared.routing.router.HashingScheme` the
old producers used (which :func:`keyshared.scalable.audit.audit_migration` reads).
"""

from __future__ import annotations

from keyshared._checks import check_int
from keyshared._core import RING_SIZE, HashRange, buckets_for_budget, equal_width_splits
from keyshared.errors import ArgumentTypeError, InvalidArgument
from keyshared.routing.router import HashingScheme, check_scheme
from keyshared.scalable.layout import Segment, SegmentState, TopicLayout, equal_width_ranges
from keyshared.scalable.topic_name import TopicDomain, TopicName


def create_migrated_metadata(
    persistent_base: TopicName | str,
    partitions: int,
    entry_bucket_budget: int = 4,
    now_ms: int = 0,
    hashing_scheme: HashingScheme | None = None,
) -> TopicLayout:
    """The epoch-0 layout of a migrated topic: sealed legacy parents ``0..N-1`` (parent
    ``k`` wraps ``persistent_base-partition-k``, or ``persistent_base`` itself when
    ``partitions <= 0``), active children ``N..2N-1`` with
    ``buckets_for_budget(entry_bucket_budget, N)`` equal-width buckets each, next id
    ``2N``. ``now_ms`` is every segment's creation and the parents' seal time;
    ``hashing_scheme``, when given, is recorded on each parent as its producers' scheme
    (Pulsar's ``createMigratedMetadata`` records none)."""
    base = TopicName.get(persistent_base) if isinstance(persistent_base, str) else persistent_base
    if not isinstance(base, TopicName):
        raise ArgumentTypeError(
            f"persistent_base must be a TopicName or str, got {type(persistent_base).__name__}",
            argument="persistent_base",
        )
    if base.domain is not TopicDomain.persistent:
        raise InvalidArgument(
            f"persistent_base must be a persistent:// topic, got {base}", argument="persistent_base"
        )
    check_int("partitions", partitions, maximum=RING_SIZE)
    check_int("entry_bucket_budget", entry_bucket_budget, minimum=1)
    check_int("now_ms", now_ms, minimum=0)
    check_scheme("hashing_scheme", hashing_scheme)
    n = max(partitions, 1)
    parent_ids = tuple(range(n))
    child_ids = tuple(range(n, 2 * n))
    segments = [
        Segment(
            k,
            HashRange.full(),
            state=SegmentState.SEALED,
            child_ids=child_ids,
            created_at_ms=now_ms,
            sealed_at_ms=now_ms,
            sealed_at_epoch=0,
            legacy_topic_name=str(base if partitions <= 0 else base.get_partition(k)),
            legacy_hashing_scheme=hashing_scheme,
        )
        for k in parent_ids
    ]
    splits = tuple(equal_width_splits(buckets_for_budget(entry_bucket_budget, n)))
    segments += [
        Segment(n + j, r, parent_ids=parent_ids, bucket_splits=splits, created_at_ms=now_ms)
        for j, r in enumerate(equal_width_ranges(n))
    ]
    return TopicLayout(0, 2 * n, {s.segment_id: s for s in segments})


__all__ = ["create_migrated_metadata"]
