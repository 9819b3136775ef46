"""What the command line's users typed, checked in their own words: every error names the
flag or positional as typed (``--segments``, not the library's ``num_segments``), and each
check runs before the work starts, so that a run that cannot finish never begins."""

from __future__ import annotations

import base64
import binascii
import math
import os
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from keyshared._checks import check_int
from keyshared._jsonfile import STDIN, load_json, parse_json
from keyshared.errors import InvalidArgument, KeysharedError
from keyshared.versions import Releases, nearest_release

#: How ``--key-encoding`` reads a key typed or read: as text, or bytes written in hex or base64.
KEY_ENCODINGS = ("utf-8", "hex", "base64")

#: A release number as users write it (``5.0.1``, ``v4.2.4``, ``5.0.0-M1``).
_RELEASE_NUMBER = re.compile(r"v?\d+\.\d+(?:\.\d+)*(?:-M\d+)?(?:[-.][A-Za-z0-9.]+)?")


def in_words(error: KeysharedError, flags: Mapping[str, str]) -> str:
    """``error``'s message with the flag its library ``argument`` stands for in front, where
    ``flags`` maps that argument to a flag and the message does not name it already."""
    message = str(error)
    flag = flags.get(error.argument or "")
    if flag is None or message.startswith(flag):
        return message
    # The library's name leads the message ("num_segments must be >= 1"): say the flag's.
    if error.argument and message.startswith(error.argument):
        return flag + message[len(error.argument) :]
    return f"{flag}: {message}"


def check_count(flag: str, value: int | None, minimum: int, maximum: int | None = None) -> None:
    """``value`` (None: not given) within the bounds, or an error naming ``flag``."""
    if value is not None:
        check_int(flag, value, minimum=minimum, maximum=maximum)


def check_positive(flag: str, value: float | None) -> None:
    """A finite number above 0 (None: not given), or an error naming ``flag``."""
    if value is not None and not (0 < value < math.inf):
        raise InvalidArgument(
            f"{flag} must be a finite number above 0, got {value:g}", argument=flag
        )


def pulsar_release(value: str, flag: str, releases: Releases) -> tuple[str, str | None]:
    """The profile of the release ``value`` names, as users name releases (``master``,
    ``5.0.0-M1``, or a release number such as ``5.0.1``), and a note when that profile is
    only the nearest; an error naming ``flag`` with the supported list otherwise."""
    accepted = ", ".join(releases.accepted)
    if value in releases.accepted:
        return value, None
    if not _RELEASE_NUMBER.fullmatch(value):
        raise InvalidArgument(
            f"{flag} {value!r} is not a Pulsar release: give one of {accepted},"
            " or a release number such as 5.0.1",
            argument=flag,
        )
    profile, note = nearest_release(value)
    if profile not in releases.accepted:
        raise InvalidArgument(
            f"{flag} {value!r}: {releases.refusal or 'give one of'} {accepted},"
            " or a release number they stand for",
            argument=flag,
        )
    return profile, note


def read_input(flag: str, path: str) -> bytes:
    """The bytes of the file ``path`` that ``flag`` names; an error naming both when it is
    missing, a folder or unreadable, rather than the system's bare ``[Errno 2]``."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise InvalidArgument(f"{flag} {path}: no such file", argument=flag) from None
    except IsADirectoryError:
        raise InvalidArgument(f"{flag} {path}: a folder, not a file", argument=flag) from None
    except PermissionError:
        raise InvalidArgument(
            f"{flag} {path}: cannot be read (permission denied)", argument=flag
        ) from None
    except OSError as e:
        raise InvalidArgument(
            f"{flag} {path}: cannot be read ({e.strerror})", argument=flag
        ) from None


def read_json(flag: str, path: str) -> Any:
    """The JSON document of the file ``path`` (``-``: standard input) that ``flag`` names;
    errors name the flag and the file."""
    if path == "-":
        try:
            return load_json("-")
        except KeysharedError as e:
            raise InvalidArgument(f"{flag} -: {e}", argument=flag) from None
    return parse_json(read_input(flag, path), f"{flag} {path}")


def check_output_dir(flag: str, path: str) -> None:
    """That the folder ``path`` can be made (or is there) and written to, before the work
    whose results go there; an error naming ``flag`` otherwise. Nothing is left behind."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise InvalidArgument(f"{flag} {path}: a file, where a folder was expected", argument=flag)
    # The nearest folder that exists is the one the run would write into (or make folders in).
    there = folder
    while not there.exists():
        there = there.parent
    if not there.is_dir():
        raise InvalidArgument(f"{flag} {path}: {there} is not a folder", argument=flag)
    _probe(flag, path, there)


def check_output_file(flag: str, path: str, suffixes: tuple[str, ...] | None = None) -> None:
    """That the file ``path`` can be written: its folder there and writable, or one the
    writer can make, and its suffix one of ``suffixes`` (None: any); an error naming ``flag``
    otherwise."""
    target = Path(path)
    if suffixes is not None and target.suffix.lower().lstrip(".") not in suffixes:
        raise InvalidArgument(
            f"{flag} {path}: unknown suffix {target.suffix or '(none)'!r}; use one of"
            f" {', '.join('.' + s for s in suffixes)}",
            argument=flag,
        )
    if target.is_dir():
        raise InvalidArgument(f"{flag} {path}: a folder, where a file was expected", argument=flag)
    check_output_dir(flag, str(target.parent))


def _probe(flag: str, path: str, folder: Path) -> None:
    # Permission bits do not tell (root, read-only mounts, /proc): writing a file does.
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise InvalidArgument(
            f"{flag} {path}: cannot write in {folder} ({e.strerror})", argument=flag
        ) from None


def decode_key(text: str, encoding: str, source: str) -> str | bytes:
    """One key as typed or read, by ``--key-encoding``: the text itself for ``utf-8``, else
    the bytes its hex or base64 form stands for; an error naming ``source`` otherwise."""
    if encoding == "utf-8":
        return text
    try:
        if encoding == "hex":
            return bytes.fromhex(text)
        return base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        raise InvalidArgument(
            f"{source} {text[:40]!r} is not {encoding} (--key-encoding {encoding})",
            argument="--key-encoding",
        ) from None


def argv_key(text: str, source: str) -> str:
    """A key typed as an argument, checked as UTF-8: Python reads a byte that is not UTF-8
    as a lone surrogate, which names neither the byte nor where it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raw = os.fsencode(text)
        first = _first_bad(raw)
        raise InvalidArgument(
            f"{source}: not UTF-8 (byte 0x{raw[first]:02x} at offset {first});"
            " give binary keys with --key-encoding hex or base64",
            argument=source,
        ) from None
    return text


def _first_bad(raw: bytes) -> int:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start
    return 0


def stdin_lines(instead: str, flag: str = "--stdin") -> list[str]:
    """Standard input's lines (split at ``\\n`` and ``\\r\\n``; a first byte order mark
    dropped), each a key. An empty line is the empty key. Errors name ``flag``: no input to
    read (and ``instead``, the other ways to give keys), none given (empty), or bytes that
    are not UTF-8 (the byte and its offset)."""
    from keyshared.explain.keys import split_lines

    stream = sys.stdin
    if stream is None or stream.closed:
        raise InvalidArgument(
            f"{flag}: standard input is closed, where keys were expected one a line;"
            f" give {instead}",
            argument=flag,
        )
    raw = getattr(stream, "buffer", None)
    data: bytes | str = stream.read() if raw is None else raw.read()
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise InvalidArgument(
                f"{flag}: {STDIN} is not UTF-8 (byte 0x{data[e.start]:02x} at offset"
                f" {e.start}); give binary keys with --key-encoding hex or base64",
                argument=flag,
            ) from None
    else:
        text = data.removeprefix("\ufeff")
    if not text:
        raise InvalidArgument(
            f"{flag}: standard input is empty, where keys were expected one a line",
            argument=flag,
        )
    return split_lines(text)


__all__ = [
    "KEY_ENCODINGS",
    "argv_key",
    "check_count",
    "check_output_dir",
    "check_output_file",
    "check_positive",
    "decode_key",
    "in_words",
    "pulsar_release",
    "read_input",
    "read_json",
    "stdin_lines",
]
