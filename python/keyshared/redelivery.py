"""The ordering state of Pulsar's Key_Shared dispatcher beyond the draining-hashes tracker
(``PersistentStickyKeyDispatcherMultipleConsumers``): the redelivery queue indexed by sticky
key hash, consumer permits and the look-ahead limit (native). The dispatcher that uses them
is in ``keyshared.dispatch``."""

from keyshared._core import (
    MessageRedeliveryController,
    get_available_permits,
    get_effective_look_ahead_limit,
)

__all__ = [
    "MessageRedeliveryController",
    "get_available_permits",
    "get_effective_look_ahead_limit",
]
