"""Secrets that never show: :class:`Secret`, which holds a token and prints as ``***``; the
tokens read from a file or an environment variable; and a URL without the password a user
may have put in it."""

from __future__ import annotations

import hmac
import os
import urllib.parse
import urllib.request
from pathlib import Path
from typing import NoReturn

from keyshared.errors import ArgumentTypeError, InvalidArgument


class Secret:
    """A secret string (a token): :meth:`reveal` gives it; its ``repr`` and ``str`` are
    ``Secret('***')`` and ``***``, and it refuses to be pickled, so that it never reaches a
    log, a message or a file by accident. Two are equal when their values are."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise ArgumentTypeError(
                f"value must be a str, got {type(value).__name__}", argument="value"
            )
        self._value = value

    def reveal(self) -> str:
        """The secret itself, for the one place that sends it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __format__(self, spec: str) -> str:
        return format("***", spec)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(
            self._value.encode("utf-8", "surrogatepass"),
            other._value.encode("utf-8", "surrogatepass"),
        )

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret is not pickled: it would be written out as plain text")

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: object) -> Secret:
        return self


def token_from_file(path: str | os.PathLike[str], name: str = "--token-file") -> Secret:
    """The token in the file ``path`` (or a ``file:`` URL, as Pulsar's ``file:///path``),
    without the spaces and line breaks around it; errors name ``name`` and the path, never
    the file's text."""
    text = str(path)
    file = file_url_path(text) if text.startswith("file:") else Path(text)
    try:
        token = file.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise InvalidArgument(
            f"{name}: no such file: {file}", kind="missing_file", argument=name
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidArgument(
            f"{name}: {file} cannot be read ({type(e).__name__})", argument=name
        ) from None
    if not token:
        raise InvalidArgument(f"{name}: {file} is empty", argument=name)
    return Secret(token)


def token_from_env(variable: str, name: str = "--token-env") -> Secret:
    """The token in the environment variable ``variable``; errors name ``name`` and the
    variable, never its value."""
    value = os.environ.get(variable, "").strip()
    if not value:
        raise InvalidArgument(
            f"{name}: the environment variable {variable} is not set or empty", argument=name
        )
    return Secret(value)


def file_url_path(url: str) -> Path:
    """The path of a ``file:`` URL (``file:///p``, ``file:/p``, ``file://localhost/p``)."""
    parts = urllib.parse.urlsplit(url)
    return Path(urllib.request.url2pathname(parts.path))


def safe_url(url: str) -> str:
    """``url`` without the password a user may have put in it."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


__all__ = ["Secret", "file_url_path", "safe_url", "token_from_env", "token_from_file"]
