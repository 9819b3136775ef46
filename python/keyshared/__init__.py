"""keyshared: routing and policy kernels for Key_Shared consumption of scalable topics.

The names a user starts from are here; every other name lives in the package of its concept:

- :mod:`keyshared.routing`: the pinned key hash and its halves, hash ranges and bucket lookup,
  the segment router, legacy partitioned-topic schemes and other systems' partitioners;
- :mod:`keyshared.scalable`: segment layouts and topic names, segment assignment, the auto
  split / merge / rebucket policy, load reports, entry-bucketed batching and migration;
- :mod:`keyshared.dispatch`: the dispatchers, selectors, draining hashes and pending acks,
  redelivery, bucket ownership, the safe cursor and the in-flight window;
- :mod:`keyshared.explain`: a live subscription or scalable topic, explained;
- :mod:`keyshared.loadbalance`, :mod:`keyshared.simulate`: Pulsar's load-balancer policies and
  the Key_Shared simulator;
- :mod:`keyshared.errors`: the library's exceptions; :mod:`keyshared.versions`: the Pulsar
  releases it can reproduce.

The native kernels live in ``keyshared._core``.
"""

from typing import TYPE_CHECKING

from keyshared import _deprecated, dispatch, errors, explain, routing, scalable, versions
from keyshared._core import __version__
from keyshared.dispatch import (
    ConsistentHashingStickyKeyConsumerSelector,
    DispatchResult,
    DrainingHashesTracker,
    EntryBucketDispatcher,
    InFlightWindow,
    PendingAcksMap,
    SafeCursor,
    StickyKeyDispatcher,
)
from keyshared.explain import explain_subscription, read_subscription
from keyshared.routing import (
    HASH_VERSION,
    NONE_KEY,
    HashRange,
    Partitioner,
    RoutingTable,
    SegmentRouter,
    bucket_index,
    key_hash,
    key_hashes,
    partition,
    partitions,
    set_num_threads,
    split_hashes,
    sticky_key_hash,
)
from keyshared.scalable import (
    AutoScalePolicy,
    BucketedBatcher,
    Decision,
    Segment,
    SegmentState,
    SubscriptionCoordinator,
    TopicLayout,
    TopicName,
    apply_decision,
    audit_migration,
    compute_assignment,
    create_migrated_metadata,
    decide,
)

# With the concept packages, so that ``keyshared.routing.bucket_ranges`` and the like work after
# ``import keyshared``.
__all__ = [
    "HASH_VERSION",
    "NONE_KEY",
    "AutoScalePolicy",
    "BucketedBatcher",
    "ConsistentHashingStickyKeyConsumerSelector",
    "Decision",
    "DispatchResult",
    "DrainingHashesTracker",
    "EntryBucketDispatcher",
    "HashRange",
    "InFlightWindow",
    "Partitioner",
    "PendingAcksMap",
    "RoutingTable",
    "SafeCursor",
    "Segment",
    "SegmentRouter",
    "SegmentState",
    "StickyKeyDispatcher",
    "SubscriptionCoordinator",
    "TopicLayout",
    "TopicName",
    "__version__",
    "apply_decision",
    "audit_migration",
    "bucket_index",
    "compute_assignment",
    "create_migrated_metadata",
    "decide",
    "dispatch",
    "errors",
    "explain",
    "explain_subscription",
    "key_hash",
    "key_hashes",
    "partition",
    "partitions",
    "read_subscription",
    "routing",
    "scalable",
    "set_num_threads",
    "split_hashes",
    "sticky_key_hash",
    "versions",
]

_deprecated.install()

# Hidden from type checkers: a name that moved is an error there, a warning at run time.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        return _deprecated.moved_name(name)
