"""JSON documents read from a file or standard input, with errors that name where from.

One rule for both: the encoding is found as RFC 8259 and Python's ``json`` find it (UTF-8,
with or without a byte order mark, which Windows tools write; UTF-16 or UTF-32 by their byte
order mark or their zero bytes, as PowerShell's ``>`` writes), and the text is decoded
strictly. An empty, truncated or undecodable document is a ValueError naming the file (or
``<stdin>``) and what is wrong with it, where the line and column say."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from keyshared.errors import InvalidArgument

#: The name standard input goes by in errors.
STDIN = "<stdin>"


def load_json(source: str | Path) -> Any:
    """The JSON document of the file ``source``, or of standard input for ``"-"``. OSError
    (naming the file) when it cannot be read, ValueError when it is not a JSON document."""
    if str(source) == "-":
        return parse_json(read_stdin(), STDIN)
    return parse_json(Path(source).read_bytes(), str(source))


def read_stdin() -> bytes | str:
    """All of standard input: bytes, or text from a text stream without bytes underneath
    (a StringIO); a ValueError when there is none to read (closed)."""
    stream = sys.stdin
    if stream is None or stream.closed:
        raise InvalidArgument(f"{STDIN} is closed: give a file instead of '-'", argument=None)
    raw = getattr(stream, "buffer", None)
    try:
        data: bytes | str = stream.read() if raw is None else raw.read()
    except (OSError, ValueError) as e:
        raise InvalidArgument(f"{STDIN} cannot be read ({e})", argument=None) from None
    return data


def parse_json(data: bytes | str, name: str) -> Any:
    """``data`` (bytes in any encoding JSON allows, or text) as a JSON document; ValueError
    naming ``name`` otherwise."""
    text = _decode(data, name) if isinstance(data, bytes) else data.removeprefix("\ufeff")
    if not text.strip():
        raise InvalidArgument(f"{name}: empty, where a JSON document was expected", argument=None)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        if not text[e.pos :].strip():
            raise InvalidArgument(
                f"{name}: the JSON ends early (line {e.lineno}, column {e.colno}): {e.msg}; "
                "is the file truncated?",
                argument=None,
            ) from None
        raise InvalidArgument(
            f"{name}: not valid JSON at line {e.lineno}, column {e.colno}: {e.msg}", argument=None
        ) from None
    except RecursionError:
        raise InvalidArgument(f"{name}: JSON nested too deeply", argument=None) from None


def _decode(data: bytes, name: str) -> str:
    encoding = json.detect_encoding(data)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        what = "UTF-8" if encoding.startswith("utf-8") else encoding.upper()
        raise InvalidArgument(
            f"{name}: not {what} text: bytes {data[e.start : e.end].hex(' ')} at offset "
            f"{e.start} ({e.reason}); JSON files are UTF-8",
            argument=None,
        ) from None
