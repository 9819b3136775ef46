"""The ordering state of Pulsar's Key_Shared dispatcher beyond the draining-hashes tracker
(``PersistentStickyKeyDispatcherMultipleConsumers``): the redelivery queue indexed by sticky
key hash, consumer permits, the look-ahead limit, and what one dispatch decided and why."""

import enum
from dataclasses import dataclass

from keyshared._core import (
    MessageRedeliveryController,
    get_available_permits,
    get_effective_look_ahead_limit,
)

__all__ = [
    "DispatchResult",
    "HoldReason",
    "MessageRedeliveryController",
    "get_available_permits",
    "get_effective_look_ahead_limit",
]


class HoldReason(enum.Enum):
    """Why an entry was not sent."""

    NO_CONSUMER = "no_consumer"
    """No consumer serves the hash. With none connected the entry is not queued: Pulsar
    rewinds the cursor instead."""
    BLOCKED_IN_READ = "blocked_in_read"
    """An earlier entry of the same hash was held in this read, so this one waits too."""
    NO_PERMITS = "no_permits"
    """The selected consumer has no permits (flow permits or unacked-messages room)."""
    AWAITING_REDELIVERY = "awaiting_redelivery"
    """A normal read of a hash with entries in the redelivery queue: they go first."""
    DRAINING = "draining"
    """The hash drains on another consumer (PIP-379) until its pending acks are acked."""
    LOOK_AHEAD_LIMIT = "look_ahead_limit"
    """The redelivery queue is at the effective look-ahead limit: Pulsar reads no further,
    so the entry is not taken (not queued); offer it again later."""
    PENDING_ACK_REFUSED = "pending_ack_refused"
    """The consumer's pending-acks map refused the entry (the consumer is closing)."""


@dataclass(frozen=True, slots=True)
class DispatchResult:
    """What happened to one entry. ``consumer_id`` is the consumer it went to or, when held,
    the consumer the selector picked (None when there is none or the hash was already held
    in this read); ``draining_consumer_id`` is set for ``HoldReason.DRAINING``;
    ``queued_for_redelivery`` says the dispatcher's redelivery queue now holds the entry."""

    ledger_id: int
    entry_id: int
    sticky_key_hash: int
    consumer_id: int | None
    held: HoldReason | None = None
    draining_consumer_id: int | None = None
    queued_for_redelivery: bool = False

    @property
    def delivered(self) -> bool:
        """Whether the entry was sent (to ``consumer_id``)."""
        return self.held is None
