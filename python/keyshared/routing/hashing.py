"""The pinned key hash (MurmurHash3_x86_32, seed 0), its split into segment and bucket
halves, Pulsar's sticky key hash over a key hash range, and the sticky key Pulsar takes
from a message's metadata. ``HASH_VERSION`` changes only if the hash ever does; routing
depends on it."""

from __future__ import annotations

import base64
import binascii

from keyshared._checks import check_int
from keyshared._core import (
    HASH_VERSION,
    bucket_hash,
    get_num_threads,
    key_hash,
    key_hashes,
    make_sticky_key_hash,
    make_sticky_key_hashes,
    segment_hash,
    set_num_threads,
    split_hashes,
    sticky_key_hash,
    sticky_key_hashes,
)
from keyshared.errors import ArgumentTypeError, InvalidArgument

#: The sticky key of a message with no key, no ordering key and no producer name or sequence
#: id (Pulsar's ``Commands.NONE_KEY``).
NONE_KEY = b"NONE_KEY"

__all__ = [
    "HASH_VERSION",
    "NONE_KEY",
    "bucket_hash",
    "get_num_threads",
    "key_hash",
    "key_hashes",
    "make_sticky_key_hash",
    "make_sticky_key_hashes",
    "message_sticky_key_hash",
    "resolve_sticky_key",
    "segment_hash",
    "set_num_threads",
    "split_hashes",
    "sticky_key_hash",
    "sticky_key_hashes",
]


def resolve_sticky_key(
    key: str | bytes | None = None,
    *,
    ordering_key: bytes | None = None,
    producer_name: str | None = None,
    sequence_id: int | None = None,
    key_is_base64: bool = False,
) -> bytes:
    """The sticky key a Pulsar 4.0+ broker takes from a message's (an entry's) metadata,
    as ``Commands.resolveStickyKey`` does (apache/pulsar#23219, in 4.0, 4.2 and master):

    1. the ordering key, when the message has one (it takes precedence over the key);
    2. else the key (``partitionKey``): a str as UTF-8, bytes as they are; with
       ``key_is_base64`` (``partitionKeyB64Encoded``, a key set as bytes by the Java
       client) the base64 text decoded;
    3. else ``producer_name + "-" + sequence_id`` as UTF-8, so that keyless messages spread
       over the consumers instead of all going to the one owning ``NONE_KEY``;
    4. else ``NONE_KEY``.

    ``None`` means the field is absent. An empty key is a key (the Java client's
    ``key("")`` hashes ``""``); the Python and C++ clients send an empty key as none.
    Pulsar before 4.0 skipped step 3. For a batch, the fields are the batch entry's: its
    producer and the sequence id of its first message. The result is the key every selector
    and dispatcher takes (``selector.make_sticky_key_hash(resolve_sticky_key(...))``)."""
    if ordering_key is not None:
        if not isinstance(ordering_key, bytes):
            raise ArgumentTypeError(
                f"ordering_key must be bytes, got {type(ordering_key).__name__}",
                argument="ordering_key",
            )
        return ordering_key
    if key is not None:
        return _partition_key(key, key_is_base64)
    if producer_name is not None and sequence_id is not None:
        if not isinstance(producer_name, str):
            raise ArgumentTypeError(
                f"producer_name must be a str, got {type(producer_name).__name__}",
                argument="producer_name",
            )
        # A producer's sequence ids count up from 0; Java prints the long in decimal.
        seq = check_int("sequence_id", sequence_id, minimum=0, maximum=2**63 - 1)
        return _java_utf8(f"{producer_name}-{seq}")
    return NONE_KEY


def _partition_key(key: str | bytes, key_is_base64: bool) -> bytes:
    if isinstance(key, bytes):
        text = key
    elif isinstance(key, str):
        text = _java_utf8(key)
    else:
        raise ArgumentTypeError(
            f"key must be str or bytes, got {type(key).__name__}", argument="key"
        )
    if not key_is_base64:
        return text
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument(
            f"key {key!r} is not base64 (key_is_base64 is set)", argument="key"
        ) from None


def _java_utf8(text: str) -> bytes:
    # Java's String.getBytes(UTF_8) writes '?' for a lone surrogate, as "replace" does.
    return text.encode("utf-8", "replace")


def message_sticky_key_hash(
    key: str | bytes | None = None,
    *,
    ordering_key: bytes | None = None,
    producer_name: str | None = None,
    sequence_id: int | None = None,
    key_is_base64: bool = False,
) -> int:
    """The consistent-hashing selector's sticky key hash, in ``[1, 65535]``, of a message:
    :func:`sticky_key_hash` of :func:`resolve_sticky_key`."""
    return sticky_key_hash(
        resolve_sticky_key(
            key,
            ordering_key=ordering_key,
            producer_name=producer_name,
            sequence_id=sequence_id,
            key_is_base64=key_is_base64,
        )
    )
