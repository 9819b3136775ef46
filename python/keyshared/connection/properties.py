"""Java properties files (``java.util.Properties.load``), the form of pulsar-admin's
``client.conf``."""

from __future__ import annotations

import re
from collections.abc import Iterator

from keyshared.errors import InvalidArgument

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def read_properties(data: bytes | str, name: str = "properties") -> dict[str, str]:
    """A Java properties file (``java.util.Properties.load``) as a dict: ``key=value``,
    ``key: value`` and ``key value``; ``#`` and ``!`` comment lines; a line ending in an
    odd number of backslashes continued on the next; ``\\t``, ``\\n``, ``\\uXXXX`` and the
    other escapes. Bytes are UTF-8 (ISO-8859-1, Java's own encoding, where they are not).
    A later key wins. Errors name ``name`` and the line."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError:
            text = data.decode("latin-1")
    else:
        text = data
    found: dict[str, str] = {}
    for number, line in _logical_lines(re.split(r"\r\n|\r|\n", text)):
        key, value = _split_property(line)
        found[_unescape(key, name, number)] = _unescape(value, name, number)
    return found


def _logical_lines(lines: list[str]) -> Iterator[tuple[int, str]]:
    """Each logical line (continuations joined) and the number of its first line."""
    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i == len(lines):
                break
            line += lines[i].lstrip(_WHITESPACE)
            i += 1
        yield number, line


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    """The raw key and value of a logical line: the key ends at the first unescaped ``=``,
    ``:`` or whitespace; whitespace, one ``=`` or ``:`` and whitespace follow it."""
    end = 0
    while end < len(line):
        char = line[end]
        if char == "\\":
            end += 2
            continue
        if char in "=:" or char in _WHITESPACE:
            break
        end += 1
    end = min(end, len(line))
    rest = line[end:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":") and rest:
        rest = rest[1:].lstrip(_WHITESPACE)
    return line[:end], rest


def _unescape(text: str, name: str, number: int) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        i += 1
        if char != "\\":
            out.append(char)
            continue
        if i == len(text):
            break
        char = text[i]
        i += 1
        if char == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise InvalidArgument(
                    f"{name}, line {number}: malformed \\uxxxx escape", argument=name
                )
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(char, char))
    return "".join(out)


__all__ = ["read_properties"]
