"""Dispatching a Key_Shared subscription's entries to its consumers (native, in the kernels'
``dispatch`` module), over one selector interface and one rule for connecting and
disconnecting consumers:

- ``StickyKeyDispatcher``: Pulsar's ``PersistentStickyKeyDispatcherMultipleConsumers``
  (PIP-379) over the consistent-hashing selector, with its redelivery queue
  (``MessageRedeliveryController``), consumer permits, look-ahead limit and draining hashes
  (``DrainingHashesTracker``, ``PendingAcksMap``); a whole read is decided natively.
- ``EntryBucketDispatcher``: PIP-486's entry-bucket dispatcher over the entry-bucket selector
  (the broker's bucket ownership and hand-off are :mod:`keyshared.scalable.ownership`).
- Consumer selection rings: Pulsar's consistent-hashing selector on the key hash range
  ``[1, 65535]`` with the impacted consumers of each change and snapshots of its assignments,
  and Danube's Key-Shared consumer state with glob key filters.
- The safe cursor and per-(segment, bucket) checkpoints, and Danube's in-flight window
  with its failure policy: per-key blocking, per-consumer caps, retries, backoff, ack timeouts
  and poison handling driven by ``now_ms``.
- ``DispatchResult``: what happened to one entry of a read; ``HoldReason``: why an entry was
  held (an ``enum.Enum``).
"""

from keyshared._core import (
    BucketCheckpoints,
    ConsistentHashingStickyKeyConsumerSelector,
    ConsumerHashAssignmentsSnapshot,
    DispatchResult,
    EntryBucketDispatcher,
    HoldReason,
    InFlightEntry,
    InFlightWindow,
    KeySharedConsumerState,
    MessageRedeliveryController,
    SafeCursor,
    StickyKeyDispatcher,
    SubscriptionFailurePolicy,
    WindowAction,
    get_available_permits,
    get_effective_look_ahead_limit,
)
from keyshared.dispatch import draining
from keyshared.dispatch.draining import *

__all__ = [
    "BucketCheckpoints",
    "ConsistentHashingStickyKeyConsumerSelector",
    "ConsumerHashAssignmentsSnapshot",
    "DispatchResult",
    "EntryBucketDispatcher",
    "HoldReason",
    "InFlightEntry",
    "InFlightWindow",
    "KeySharedConsumerState",
    "MessageRedeliveryController",
    "SafeCursor",
    "StickyKeyDispatcher",
    "SubscriptionFailurePolicy",
    "WindowAction",
    "get_available_permits",
    "get_effective_look_ahead_limit",
]
__all__ += draining.__all__
