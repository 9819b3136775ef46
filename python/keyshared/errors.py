"""The library's exceptions.

Every exception keyshared raises for a caller's mistake is a :class:`KeysharedError`, and also
the built-in exception an ``except`` clause written before this module existed would catch:

- :class:`InvalidArgument` is a ``ValueError``: an argument has the right type but a value the
  call cannot take (out of range, malformed, inconsistent with another argument);
- :class:`ArgumentTypeError` is a ``TypeError``: an argument of a type the call does not take;
- :class:`UnknownConsumer` is a ``KeyError``: a consumer the dispatcher, selector or tracker
  does not know;
- :class:`ScenarioError` is an :class:`InvalidArgument`: a simulator scenario that cannot run.

Each message names the argument (and in a batch, the index) that was wrong. A call that raises
leaves every object it was given as it was.
"""

from __future__ import annotations

__all__ = [
    "ArgumentTypeError",
    "InvalidArgument",
    "KeysharedError",
    "ScenarioError",
    "UnknownConsumer",
]


class KeysharedError(Exception):
    """The base of every exception keyshared raises for a caller's mistake."""


class InvalidArgument(KeysharedError, ValueError):
    """An argument's value is one the call cannot take."""


class ArgumentTypeError(KeysharedError, TypeError):
    """An argument's type is one the call does not take."""


class UnknownConsumer(KeysharedError, KeyError):
    """A consumer the dispatcher, selector or tracker does not know."""

    def __str__(self) -> str:
        # KeyError quotes its argument (repr); the message is a sentence.
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class ScenarioError(InvalidArgument):
    """A simulator scenario that cannot run: the message names the field."""
