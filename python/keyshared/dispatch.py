"""The dispatchers of a Key_Shared subscription (native, in the kernels' ``dispatch``
module), over one selector interface and one rule for connecting and disconnecting
consumers:

- ``StickyKeyDispatcher``: Pulsar's ``PersistentStickyKeyDispatcherMultipleConsumers``
  (PIP-379) over the consistent-hashing selector, with its redelivery queue, consumer
  permits, look-ahead limit and draining hashes; a whole read is decided natively.
- ``EntryBucketDispatcher``: PIP-486's entry-bucket dispatcher over the entry-bucket
  selector.
- ``DispatchResult``: what happened to one entry of a read; ``HoldReason``: why an entry was
  held (an ``enum.Enum``).
"""

from keyshared._core import (
    DispatchResult,
    EntryBucketDispatcher,
    HoldReason,
    StickyKeyDispatcher,
)

__all__ = ["DispatchResult", "EntryBucketDispatcher", "HoldReason", "StickyKeyDispatcher"]
