"""Consumer selection rings (SPEC 7): Pulsar's consistent-hashing selector on the 16-bit
sticky-key-hash ring, and Danube's Key-Shared consumer state with glob key filters."""

from keyshared._core import ConsistentHashingStickyKeyConsumerSelector, KeySharedConsumerState

__all__ = ["ConsistentHashingStickyKeyConsumerSelector", "KeySharedConsumerState"]
