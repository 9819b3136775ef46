"""The sticky key of a message as Pulsar's broker resolves it (Commands.resolveStickyKey,
4.0 and later): the ordering key, else the key, else producerName-sequenceId, else NONE_KEY.
The broker side is checked end to end in tests/broker/test_broker_explain.py."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keyshared import NONE_KEY, sticky_key_hash
from keyshared.routing import message_sticky_key_hash, resolve_sticky_key

keys = st.none() | st.text() | st.binary()
ordering_keys = st.none() | st.binary()
producers = st.none() | st.text()
sequence_ids = st.none() | st.integers(0, 2**63 - 1)


def test_peek_sticky_key() -> None:
    """CommandsTest.testPeekStickyKey: a plain key is its UTF-8 bytes; a base64 key (the
    Java client's keyBytes) is decoded."""
    assert resolve_sticky_key("key1", producer_name="testProducer", sequence_id=1) == b"key1"
    encoded = base64.b64encode(b"key2").decode()
    assert resolve_sticky_key(encoded, key_is_base64=True, producer_name="p", sequence_id=1) == (
        b"key2"
    )


@given(keys, ordering_keys, producers, sequence_ids)
def test_the_first_field_present_wins(
    key: str | bytes | None,
    ordering_key: bytes | None,
    producer: str | None,
    sequence_id: int | None,
) -> None:
    got = resolve_sticky_key(
        key, ordering_key=ordering_key, producer_name=producer, sequence_id=sequence_id
    )
    if ordering_key is not None:
        want = ordering_key
    elif key is not None:
        want = key if isinstance(key, bytes) else key.encode("utf-8", "replace")
    elif producer is not None and sequence_id is not None:
        want = f"{producer}-{sequence_id}".encode("utf-8", "replace")
    else:
        want = NONE_KEY
    assert got == want
    assert message_sticky_key_hash(
        key, ordering_key=ordering_key, producer_name=producer, sequence_id=sequence_id
    ) == sticky_key_hash(want)


def test_an_empty_key_is_a_key_and_keyless_messages_spread() -> None:
    assert resolve_sticky_key("", producer_name="p", sequence_id=3) == b""
    hashes = {message_sticky_key_hash(producer_name="p", sequence_id=i) for i in range(100)}
    assert len(hashes) > 90
    assert resolve_sticky_key(producer_name="p") == NONE_KEY == b"NONE_KEY"
    # A lone surrogate is written as '?', as Java's String.getBytes(UTF_8) does.
    assert resolve_sticky_key("a\ud800") == b"a?"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"key": 5}, TypeError, "key must be str or bytes, got int"),
        ({"ordering_key": "k"}, TypeError, "ordering_key must be bytes, got str"),
        ({"producer_name": b"p", "sequence_id": 1}, TypeError, "producer_name must be a str"),
        ({"producer_name": "p", "sequence_id": -1}, ValueError, "sequence_id must be >= 0"),
        ({"producer_name": "p", "sequence_id": 2**63}, ValueError, "sequence_id must be <="),
        ({"producer_name": "p", "sequence_id": True}, TypeError, "sequence_id must be an int"),
        ({"key": "not base64!", "key_is_base64": True}, ValueError, "is not base64"),
    ],
)
def test_bad_fields_are_named(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        resolve_sticky_key(**kwargs)  # type: ignore[arg-type]


@given(st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=5, unique=True), st.data())
def test_a_selector_places_a_resolved_key_as_the_broker_would(
    names: list[str], data: st.DataObject
) -> None:
    from keyshared import ConsistentHashingStickyKeyConsumerSelector

    selector = ConsistentHashingStickyKeyConsumerSelector(20)
    for i, name in enumerate(names):
        selector.add_consumer(i, name)
    sequence_id = data.draw(st.integers(0, 2**63 - 1))
    key = resolve_sticky_key(producer_name="p", sequence_id=sequence_id)
    h = message_sticky_key_hash(producer_name="p", sequence_id=sequence_id)
    assert selector.make_sticky_key_hash(key) == h
    assert selector.select(h) == selector.select(sticky_key_hash(f"p-{sequence_id}"))
