"""Consumer selection rings (SPEC 7): Pulsar's consistent-hashing selector on the key hash
range ``[1, 65535]`` with the impacted consumers of each change and snapshots of its
assignments, and Danube's Key-Shared consumer state with glob key filters."""

from keyshared._core import (
    ConsistentHashingStickyKeyConsumerSelector,
    ConsumerHashAssignmentsSnapshot,
    ImpactedConsumersResult,
    KeySharedConsumerState,
)

__all__ = [
    "ConsistentHashingStickyKeyConsumerSelector",
    "ConsumerHashAssignmentsSnapshot",
    "ImpactedConsumersResult",
    "KeySharedConsumerState",
]
