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
  tracker does not know.

Each message names the argument (and in a batch, the index) that was wrong. A call that raises
leaves every object it was given as it was.
"""

from __future__ import annotations

__all__ = [
    "ArgumentTypeError",
    "InvalidArgument",
    "KeysharedError",
    "NotFound",
    "OutOfRange",
    "RefusedChange",
    "ScenarioError",
    "UnknownConsumer",
]


class KeysharedError(Exception):
    """The base of every exception keyshared raises for a caller's mistake."""


class InvalidArgument(KeysharedError, ValueError):
    """An argument's value is one the call cannot take."""


class RefusedChange(InvalidArgument):
    """A layout change the layout's current state does not allow; the layout is unchanged."""


class ScenarioError(InvalidArgument):
    """A simulator scenario that cannot run: the message names the field."""


class OutOfRange(InvalidArgument, IndexError):
    """A value outside what an object spans; the message names the argument and its range."""


class ArgumentTypeError(KeysharedError, TypeError):
    """An argument's type is one the call does not take."""


class NotFound(KeysharedError, KeyError):
    """Something a stateful object was asked about that it does not hold."""

    def __str__(self) -> str:
        # KeyError quotes its argument (repr); the message is a sentence.
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class UnknownConsumer(NotFound):
    """A consumer the dispatcher, selector or tracker does not know."""
