"""The keys to explain: a sample of keys with message counts, read from a file or given as a
mapping, and lists of keys, checked before anything is computed from them."""

from __future__ import annotations

import base64
import binascii
import csv
import re
from collections.abc import Iterable
from pathlib import Path

from keyshared._checks import check_int, check_mapping
from keyshared.errors import ArgumentTypeError, InvalidArgument


def decode_utf8(source: str, data: bytes) -> str:
    """``data`` decoded as UTF-8 (a BOM dropped); a ValueError naming ``source`` and the
    offset of the first bad byte otherwise."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InvalidArgument(
            f"{source}: not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})", argument=None
        ) from None


#: The largest message count of a key sample: counts add up in float64, exact to 2**53.
MAX_COUNT = 2**53


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, split at ``\n`` and ``\r\n`` only: a key may hold any other
    character (``str.splitlines`` would also split at ``\v``, U+001C, U+0085, U+2028...).
    A final line break ends the last line rather than starting an empty one."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


_COUNT = re.compile(r"[+-]?[0-9]+", re.ASCII)


def load_keys(path: str | Path) -> dict[str, int]:
    """A key sample with message counts: a ``.csv`` file (any letter case) of
    ``key[,count]`` rows (a first row whose count is not a number is a header), else one
    key per line, each counting once. A key listed twice adds up. Lines end at ``\n`` or
    ``\r\n``; counts are decimal digits, at most ``MAX_COUNT`` in all. Errors name the
    file (and line)."""
    lines = split_lines(decode_utf8(str(path), Path(path).read_bytes()))
    sample: dict[str, int] = {}
    if Path(path).suffix.lower() != ".csv":
        for key in lines:
            sample[key] = sample.get(key, 0) + 1
        return sample
    for line, row in enumerate(csv.reader(lines), start=1):
        if not row:
            continue
        if len(row) > 2:
            # A key holding a comma is quoted ("a,b",3): a third column is a mistake.
            raise InvalidArgument(
                f"{path}:{line}: {len(row)} columns, where a row is key[,count]"
                " (quote a key that holds a comma)",
                argument="path",
            )
        count = row[1].strip() if len(row) > 1 else "1"
        if not _COUNT.fullmatch(count):
            if line == 1:
                continue
            raise InvalidArgument(
                f"{path}:{line}: count {count[:40]!r} is not an integer", argument="path"
            )
        sample[row[0]] = sample.get(row[0], 0) + check_int(
            f"{path}:{line} count", int(count), minimum=0, maximum=MAX_COUNT
        )
    check_int(f"{path}: the total count", sum(sample.values()), maximum=MAX_COUNT)
    return sample


#: How keys are written (``key_encoding``): as text (hashed as its UTF-8 bytes), or a
#: binary key's bytes in hex or base64. A key is shown as written, as ``keyshared route`` does.
KEY_ENCODINGS = ("utf-8", "hex", "base64")


def check_key_encoding(key_encoding: object) -> str:
    """``key_encoding``, one of ``KEY_ENCODINGS``."""
    if key_encoding not in KEY_ENCODINGS:
        raise InvalidArgument(
            f"key_encoding must be one of {', '.join(KEY_ENCODINGS)}, got {key_encoding!r}",
            argument="key_encoding",
        )
    return str(key_encoding)


def hashed_key(key: str, key_encoding: str = "utf-8", name: str = "key") -> str | bytes:
    """What ``key``, written in ``key_encoding``, is hashed as: the text itself for
    ``utf-8``, else the bytes its hex or base64 form stands for; an error naming ``name``
    when it is not that encoding."""
    if check_key_encoding(key_encoding) == "utf-8":
        return key
    try:
        if key_encoding == "hex":
            return bytes.fromhex(key)
        return base64.b64decode(key, validate=True)
    except (ValueError, binascii.Error):
        raise InvalidArgument(
            f"{name} {key[:40]!r} is not {key_encoding} (key_encoding {key_encoding!r})",
            argument=name,
        ) from None


def hashed_keys(keys: Iterable[str], key_encoding: str = "utf-8") -> list[str | bytes]:
    """:func:`hashed_key` of each of ``keys`` (checked ones: an error names the key)."""
    return [hashed_key(k, key_encoding) for k in keys]


def check_sample(sample: object, key_encoding: str = "utf-8") -> dict[str, int] | None:
    """A key sample (key -> messages) checked: str keys (written in ``key_encoding``), int
    counts >= 0, at most ``MAX_COUNT`` in all; errors name ``sample[key]``."""
    if sample is None:
        return None
    checked = {
        check_str(f"sample key {k!r}", k): check_int(
            f"sample[{k!r}]", v, minimum=0, maximum=MAX_COUNT
        )
        for k, v in check_mapping("sample", sample).items()
    }
    check_int("sample: the total count", sum(checked.values()), maximum=MAX_COUNT)
    if check_key_encoding(key_encoding) != "utf-8":
        for k in checked:
            hashed_key(k, key_encoding, "sample key")
    return checked


def check_keys(keys: object, key_encoding: str = "utf-8") -> tuple[str, ...]:
    """``keys``, a sequence of str (a lone str is refused: it is not seven keys), each
    written in ``key_encoding``."""
    if isinstance(keys, str | bytes):
        raise ArgumentTypeError(
            f"keys must be a sequence of str, got one {type(keys).__name__}", argument="keys"
        )
    if not isinstance(keys, Iterable):
        raise ArgumentTypeError(
            f"keys must be a sequence of str, got {type(keys).__name__}", argument="keys"
        )
    checked = tuple(check_str(f"keys[{i}]", k) for i, k in enumerate(keys))
    if check_key_encoding(key_encoding) != "utf-8":
        for i, k in enumerate(checked):
            hashed_key(k, key_encoding, f"keys[{i}]")
    return checked


def check_str(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a str, got {type(value).__name__}", argument=name)
    return value


__all__ = [
    "KEY_ENCODINGS",
    "MAX_COUNT",
    "check_key_encoding",
    "check_keys",
    "check_sample",
    "check_str",
    "decode_utf8",
    "hashed_key",
    "hashed_keys",
    "load_keys",
    "split_lines",
]
