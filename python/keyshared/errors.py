"""The library's exceptions.

Every exception keyshared raises for a caller's mistake, from Python code or from the native
kernels, is a :class:`KeysharedError`, and also the built-in exception an ``except`` clause
written before this module existed would catch:

- :class:`InvalidArgument` is a ``ValueError``: an argument has the right type but a value the
  call cannot take (out of range, malformed, inconsistent with another argument or with the
  object's state);
- :class:`RefusedChange` is an :class:`InvalidArgument`: a change to a topic layout that the
  layout's current state does not allow (splitting a segment of one hash, merging segments that
  are not adjacent, changing a sealed segment);
- :class:`ScenarioError` is an :class:`InvalidArgument`: a simulator scenario that cannot run;
- :class:`OutOfRange` is an :class:`InvalidArgument` and an ``IndexError``: a value outside
  what an object spans (a hash beyond a namespace's bundles), where Python looks up by index;
- :class:`ArgumentTypeError` is a ``TypeError``: an argument of a type the call does not take;
- :class:`NotFound` is a ``KeyError``: something a stateful object was asked about that it does
  not hold (a cursor's bucket that is not open);
- :class:`UnknownConsumer` is a :class:`NotFound`: a consumer the dispatcher, selector or
  tracker does not know;
- :class:`ClusterAccessError` is an ``OSError``: a Pulsar cluster that cannot be reached with
  the settings given (nothing listens at its address, its certificate is not trusted or is
  for another host name, it refuses the credentials or the role lacks a permission); its
  one-line message says what to change, and ``argument`` names the setting.

Each message names the argument (and in a batch, the index) that was wrong, and the exception
carries the same parts for a program to read:

- ``kind``: a stable snake_case name of the mistake, one of :data:`KINDS`; an error a kernel
  refuses takes its name from the kernel's, one raised without a more definite kind its
  class's own (``invalid_argument``, ``wrong_type``, ...);
- ``argument``: the name of the argument that was wrong (a record's field by its path,
  ``policy.max_segments``), or None;
- ``index``: the index of the wrong item of a batch argument, or None.

They survive pickling. A call that raises leaves every object it was given as it was.

Kinds (:data:`KINDS`):

{kinds}
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

__all__ = [
    "KINDS",
    "ArgumentTypeError",
    "ClusterAccessError",
    "InvalidArgument",
    "KeysharedError",
    "NotFound",
    "OutOfRange",
    "RefusedChange",
    "ScenarioError",
    "UnknownConsumer",
]

#: Every ``kind`` an error can have, with what it means.
KINDS: Mapping[str, str] = MappingProxyType(
    {
        # An exception class's own, for a mistake of no more definite kind.
        "invalid_argument": "an argument's value is one the call cannot take",
        "wrong_type": "an argument's type is one the call does not take",
        "refused_change": "a layout change the layout's current state does not allow",
        "scenario_error": "a simulator scenario that cannot run",
        "not_found": "something a stateful object was asked about that it does not hold",
        "unknown_consumer": "a consumer the dispatcher, selector or tracker does not hold",
        # Records read from JSON or TOML.
        "missing_field": "a record leaves out a field it needs",
        "unknown_field": "a record has a field its class does not know",
        # The kernels'.
        "out_of_range": "a number outside the range the argument takes",
        "too_small": "a number below the least the argument takes",
        "exceeds": "a number above another argument that bounds it",
        "not_ring_hash": "a hash outside the 16-bit ring [0, 0xffff]",
        "reserved_hash": "a sticky key hash of 0, which means not set",
        "negative_position": "a message position with a negative ledger or entry id",
        "length_mismatch": "arguments read in step that are not equally long",
        "reversed_range": "a hash range whose start is above its end",
        "unsplittable": "a hash range of one hash, which has no halves",
        "not_adjacent": "hash ranges to merge that do not touch",
        "not_a_hash_range": 'text that is not a hash range like "0a0b-f0f0"',
        "straddles": "an entry's hash range that spans two buckets",
        "no_such_bucket": "a bucket index outside a layout's buckets",
        "out_of_sequence": "a call that comes without the call it closes",
        "no_tracker": "a call on draining hashes to a map created without a tracker",
        "consumer_exists": "a consumer added or connected a second time",
        "not_utf8": "a name that is not UTF-8",
        "empty_filter": "an empty key filter, which would match only the empty key",
        "no_dead_letter_topic": "the dead-letter poison policy without a topic",
        "int_keys_unsupported": "int keys for a partitioner that hashes only str or bytes",
        "int_too_wide": "int keys wider than Spark's long",
        "null_key": "a null key in a batch without a stand-in key for nulls",
        "split_outside_ring": "a bucket split point outside [1, 0xffff]",
        "first_split_too_low": "a first split point that leaves bucket 0 narrower than [0, 1]",
        "splits_not_ascending": "bucket split points that are not strictly ascending",
        "no_buckets": "entry-bucket boundaries with no bucket",
        "boundary_misplaced": "an entry-bucket range that does not start where the last ended",
        "boundaries_short": "entry-bucket ranges that end short of 0xffff",
        "first_bucket_too_narrow": "an entry-bucket 0 narrower than [0, 1]",
        "no_segments": "a layout without an active segment",
        "segment_overlaps": "an active segment that overlaps the one before it",
        "segment_gap": "an active segment that leaves a gap before it",
        "segments_short": "active segments that end short of 0xffff",
        "overlapping": "range assignments not sorted, or overlapping",
        "duplicate_position": "a read's entry position given twice",
        "duplicate_segment_id": "a segment id two segments share",
        "duplicate_open_bucket": "a cursor's bucket opened while open",
        "duplicate_offset": "an offset the in-flight window already holds",
        "draining": "a hash that drains on another consumer",
        "ref_count_overflow": "a draining hash whose reference count is at its maximum",
        "hash_changed": "a pending entry given again with another sticky key hash",
        "consumer_full": "a consumer with as many messages in flight as it may have",
        "skipped_in_flight": "an offset skipped while in flight",
        "skipped_queued": "an offset skipped while queued",
        "key_held": "a key held by an in-flight message",
        "key_queued": "a key with older messages queued",
        "key_other_key": "an offset taken from the queue with another key",
        "delivered_without_consumer": "a delivered entry without its consumer",
        "delivered_queued": "a delivered entry queued for redelivery",
        "look_ahead_taken": "an entry held by the look-ahead limit but taken",
        "refused_not_queued": "an entry a consumer's map refused but did not queue",
        "drainer_mismatch": "a draining consumer without the draining hold reason, or back",
        "unknown_bucket": "a cursor's bucket that is not open",
        # Reaching a Pulsar cluster (keyshared.connection).
        "missing_file": "a file a setting names that does not exist",
        "unreachable": "a cluster address that cannot be reached (its name not found, no route)",
        "connection_refused": "a cluster address where nothing listens",
        "timed_out": "a cluster that gave no whole answer within the timeout",
        "untrusted_certificate": "a server certificate no trusted certificate authority signed",
        "hostname_mismatch": "a server certificate for another host name",
        "tls_failed": "a TLS handshake that failed for another reason than the certificate",
        "unauthorized": "credentials the cluster refused, or none where it needs some",
        "forbidden": "a role without the permission a request needs",
        "oauth2_refused": "client credentials an OAuth 2.0 issuer refused",
    }
)

__doc__ = __doc__.format(
    kinds="\n".join(f"- ``{kind}``: {meaning};" for kind, meaning in KINDS.items())
)


class KeysharedError(Exception):
    """The base of every exception keyshared raises for a caller's mistake: ``message``, and
    ``kind``, ``argument`` and ``index`` as the module says."""

    #: The kind of an error raised without one.
    default_kind: ClassVar[str] = "invalid_argument"

    kind: str
    argument: str | None
    index: int | None

    def __init__(
        self,
        message: object = "",
        *,
        kind: str | None = None,
        argument: str | None = None,
        index: int | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind or self.default_kind
        self.argument = argument
        self.index = index


class InvalidArgument(KeysharedError, ValueError):
    """An argument's value is one the call cannot take."""


class RefusedChange(InvalidArgument):
    """A layout change the layout's current state does not allow; the layout is unchanged."""

    default_kind = "refused_change"


class ScenarioError(InvalidArgument):
    """A simulator scenario that cannot run: the message names the field."""

    default_kind = "scenario_error"


class OutOfRange(InvalidArgument, IndexError):
    """A value outside what an object spans; the message names the argument and its range."""

    default_kind = "out_of_range"


class ArgumentTypeError(KeysharedError, TypeError):
    """An argument's type is one the call does not take."""

    default_kind = "wrong_type"


class NotFound(KeysharedError, KeyError):
    """Something a stateful object was asked about that it does not hold."""

    default_kind = "not_found"

    def __str__(self) -> str:
        # KeyError quotes its argument (repr); the message is a sentence.
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class UnknownConsumer(NotFound):
    """A consumer the dispatcher, selector or tracker does not know."""

    default_kind = "unknown_consumer"


class ClusterAccessError(KeysharedError, OSError):
    """A Pulsar cluster that cannot be reached, or that refuses the settings it is reached
    with. The message is one line: the address, what happened and what to change;
    ``argument`` names the setting to change (a flag), ``kind`` says what happened, and
    ``status`` is the HTTP status of the cluster's answer where it gave one (401, 403), else
    None. No message holds a secret (a token, a client secret)."""

    default_kind = "unreachable"

    status: int | None

    def __init__(
        self,
        message: object = "",
        *,
        kind: str | None = None,
        argument: str | None = None,
        index: int | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message, kind=kind, argument=argument, index=index)
        self.status = status
