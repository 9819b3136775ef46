"""Argument checks for every layer. Every error names the offending field, so that a bad
snapshot or call says what is wrong with it rather than failing somewhere deeper.

Paths follow one convention: ``parent.field`` for a field, ``name[index]`` or
``name['key']`` for an item, and ``name key`` for a mapping's key itself. A message starts
with the path (``policy.max_segments must be >= 1``); a rule about a value as a whole rather
than one of its parts follows the path with a colon (``layout: active segments must tile
...``)."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from keyshared.errors import ArgumentTypeError, InvalidArgument

_T = TypeVar("_T")


def check_int(
    name: str, value: object, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` if it is an ``int`` (``bool`` is refused) within the bounds."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be an int, got {type(value).__name__}", argument=name)
    if minimum is not None and value < minimum:
        raise InvalidArgument(
            f"{name} must be >= {minimum}, got {value}", kind="too_small", argument=name
        )
    if maximum is not None and value > maximum:
        raise InvalidArgument(
            f"{name} must be <= {maximum}, got {value}", kind="out_of_range", argument=name
        )
    return value


def _plain_int(name: str, value: object) -> int:
    """``value`` as a plain int, from anything with ``__index__`` (a NumPy integer too) but
    ``bool``, as the native core takes integers."""
    if isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be an int, got bool", argument=name)
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ArgumentTypeError(
            f"{name} must be an int, got {type(value).__name__}", argument=name
        ) from None


def check_integer(
    name: str, value: object, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """:func:`check_int` of ``value`` as a plain int, from anything with ``__index__`` (a
    NumPy integer too) but ``bool``: for a Python function beside native ones that take
    such integers."""
    return check_int(name, _plain_int(name, value), minimum=minimum, maximum=maximum)


def check_index(name: str, value: object, minimum: int, maximum: int) -> int:
    """``value`` as a plain int within bounds, from anything with ``__index__`` (a NumPy
    integer too) but ``bool``, as the native core takes integers."""
    number = _plain_int(name, value)
    if not minimum <= number <= maximum:
        raise InvalidArgument(
            f"{name} must be in [{minimum}, {maximum}], got {number}",
            kind="out_of_range",
            argument=name,
        )
    return number


def check_consumer_id(name: str, value: object) -> int:
    """A consumer id, in ``[0, 2**64 - 1]``."""
    return check_index(name, value, 0, 2**64 - 1)


def check_instance(name: str, value: object, cls: type[_T]) -> _T:
    """``value`` if it is a ``cls``; a clear TypeError naming ``name`` otherwise."""
    if not isinstance(value, cls):
        raise ArgumentTypeError(
            f"{name} must be a {cls.__name__}, got {type(value).__name__}", argument=name
        )
    return value


def check_optional_int(name: str, value: object, *, minimum: int | None = None) -> int | None:
    """``None``, or ``value`` checked by :func:`check_int`."""
    return None if value is None else check_int(name, value, minimum=minimum)


def _finite_float(name: str, value: object) -> float:
    """``value`` (an int or float, not bool) as a finite float, ``-0.0`` as ``0.0``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentTypeError(
            f"{name} must be a number, got {type(value).__name__}", argument=name
        )
    try:
        number = float(value)
    except OverflowError:  # only an int this large overflows
        bits = value.bit_length() if isinstance(value, int) else 0
        raise InvalidArgument(
            f"{name} must be finite, got an int of {bits} bits, beyond float range",
            argument=name,
        ) from None
    if not math.isfinite(number):
        raise InvalidArgument(f"{name} must be finite, got {number}", argument=name)
    return number + 0.0


def check_weights(name: str, weights: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``weights`` as a one-dimensional float64 array of finite, non-negative real numbers
    (integers or floats: a complex weight would lose its imaginary part silently)."""
    arr = np.asarray(weights)
    if arr.ndim != 1 or not (arr.dtype.kind in "iuf" or arr.size == 0):
        kind = f", got {arr.dtype} values" if arr.ndim == 1 else ""
        raise ArgumentTypeError(
            f"{name} must be a one-dimensional array of real numbers{kind}", argument=name
        )
    values = arr.astype(np.float64)
    if not np.isfinite(values).all():
        index = int(np.argmin(np.isfinite(values)))
        raise InvalidArgument(f"{name} must be finite (index {index})", argument=name, index=index)
    if (values < 0).any():
        index = int(np.argmax(values < 0))
        raise InvalidArgument(
            f"{name} must not be negative (index {index})", argument=name, index=index
        )
    return values


def check_rate(name: str, value: object) -> float:
    """``value`` as a finite, non-negative float (a rate in msg/s or B/s, or a threshold)."""
    number = _finite_float(name, value)
    if number < 0:
        raise InvalidArgument(f"{name} must not be negative, got {number}", argument=name)
    return number


def check_bool(name: str, value: object) -> bool:
    """``value`` if it is a ``bool``."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{name} must be a bool, got {type(value).__name__}", argument=name)
    return value


def check_mapping(name: str, value: object) -> Mapping[Any, Any]:
    """``value`` if it is a mapping (a JSON object)."""
    if not isinstance(value, Mapping):
        raise ArgumentTypeError(
            f"{name} must be a mapping (JSON object), got {type(value).__name__}",
            argument=name,
        )
    return value


def check_keys(name: str, data: Mapping[Any, Any], allowed: Collection[str]) -> None:
    """Refuses keys outside ``allowed``, so that a misspelt field is not silently ignored."""
    unknown = sorted(str(k) for k in data if k not in allowed)
    if unknown:
        raise InvalidArgument(
            f"{name} has unknown field(s) {', '.join(unknown)}", kind="unknown_field", argument=name
        )


def parse_id(name: str, key: object) -> int:
    """A segment id given as a JSON object key (a decimal string in canonical form, so that
    two keys never name one id: "0" and "00", "+5", " 5" and "5_0" are refused) or as an
    int."""
    if isinstance(key, str):
        if not (key.isascii() and key.isdigit() and key == str(int(key))):
            raise InvalidArgument(
                f"{name} key {key!r} is not a segment id (decimal, no leading 0)", argument=name
            )
        key = int(key)
    return check_int(f"{name} key", key, minimum=0)


def check_real(name: str, value: object, *, minimum: float | None = 0.0) -> float:
    """Return ``value`` as a finite float, at least ``minimum`` (no bound when ``None``).

    ``-0.0`` comes back as ``0.0``: Java's ``Double.compare`` orders the two zeros apart,
    and a negative zero would otherwise sort differently from Pulsar.
    """
    number = _finite_float(name, value)
    if minimum is not None and number < minimum:
        raise InvalidArgument(f"{name} must be >= {minimum}, got {number}", argument=name)
    return number


def check_name(name: str, value: object) -> str:
    """Return ``value`` if it is a non-empty ``str``, else raise."""
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be a str, got {type(value).__name__}", argument=name)
    if not value:
        raise InvalidArgument(f"{name} must not be empty", argument=name)
    return value


def check_names(name: str, values: object) -> frozenset[str]:
    """Return a collection of non-empty names as a frozenset (a lone ``str`` is refused)."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ArgumentTypeError(
            f"{name} must be a collection of str, got {type(values).__name__}", argument=name
        )
    return frozenset(check_name(f"{name}[{i}]", item) for i, item in enumerate(values))


def check_mapping_items(
    name: str, value: object, check_item: Callable[[str, Any], _T]
) -> dict[str, _T]:
    """A mapping with non-empty ``str`` keys, each item checked as ``name[key]``."""
    if not isinstance(value, Mapping):
        raise ArgumentTypeError(
            f"{name} must be a mapping, got {type(value).__name__}", argument=name
        )
    return {
        check_name(f"{name} key", key): check_item(f"{name}[{key!r}]", item)
        for key, item in value.items()
    }
