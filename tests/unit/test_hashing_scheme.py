"""Pulsar's HashingScheme and the v4 producer's partition choice (keyshared.routing.router)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keyshared._core import java_utf8
from keyshared.routing import (
    HashingScheme,
    SegmentRouter,
    choose_partition,
    java_string_hash_code,
    key_hash,
)


@pytest.mark.parametrize(
    ("key", "code"),
    [
        ("", 0),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        # Java's own corner: the one ASCII word whose hashCode is Integer.MIN_VALUE.
        ("polygenelubricants", -(2**31)),
        # U+1F600 is the surrogate pair D83D DE00 in UTF-16: 0xD83D * 31 + 0xDE00.
        ("\U0001f600", 1772899),
        ("é", 233),
    ],
)
def test_java_string_hash_code_known_values(key: str, code: int) -> None:
    assert java_string_hash_code(key) == code


@given(st.text())
def test_java_string_hash_code_is_the_polynomial_over_utf16_units(key: str) -> None:
    units = key.encode("utf-16-le", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = h * 31 + int.from_bytes(units[i : i + 2], "little")
    assert java_string_hash_code(key) % 2**32 == h % 2**32
    assert -(2**31) <= java_string_hash_code(key) < 2**31


def test_make_hash_clears_bit_31() -> None:
    assert HashingScheme.JavaStringHash.make_hash("polygenelubricants") == 0
    assert HashingScheme.JavaStringHash.make_hash("hello") == 99162322
    assert HashingScheme.Murmur3_32Hash.make_hash("hello") == 0x248BFA47
    assert HashingScheme.Murmur3_32Hash.make_hash("hello") == SegmentRouter.make_hash("hello")


@given(st.binary())
def test_bytes_keys(key: bytes) -> None:
    """Both schemes hash the string ``new String(bytes, UTF_8)`` a bytes key stands for: its
    UTF-16 units, or its UTF-8 bytes (malformed input replaced as the JDK replaces it, which
    test_partitioners checks against a JVM)."""
    text = java_utf8(key)
    assert HashingScheme.JavaStringHash.make_hash(key) == java_string_hash_code(key) & 0x7FFFFFFF
    assert HashingScheme.JavaStringHash.make_hash(key) == java_string_hash_code(text) & 0x7FFFFFFF
    assert HashingScheme.Murmur3_32Hash.make_hash(key) == key_hash(text) & 0x7FFFFFFF
    assert HashingScheme.Murmur3_32Hash.make_hash(b"\xff") == key_hash("\ufffd") & 0x7FFFFFFF


@given(st.text())
def test_utf8_bytes_hash_as_their_text(text: str) -> None:
    assert java_string_hash_code(text.encode()) == java_string_hash_code(text)


@given(st.text(), st.integers(1, 1000), st.sampled_from(list(HashingScheme)))
def test_choose_partition_is_sign_safe_mod_of_make_hash(
    key: str, partitions: int, scheme: HashingScheme
) -> None:
    partition = choose_partition(key, partitions, scheme)
    assert partition == scheme.make_hash(key) % partitions
    assert 0 <= partition < partitions


def test_choose_partition_defaults_to_the_java_clients_scheme() -> None:
    assert choose_partition("hello", 7) == 99162322 % 7
    assert choose_partition("hello", 7, HashingScheme.Murmur3_32Hash) == 0x248BFA47 % 7


def test_choose_partition_checks_its_arguments() -> None:
    with pytest.raises(ValueError):
        choose_partition("k", 0)
    with pytest.raises(TypeError):
        choose_partition("k", 3, "JavaStringHash")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        HashingScheme.JavaStringHash.make_hash(3)  # type: ignore[arg-type]
