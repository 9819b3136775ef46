"""Argument checks shared by the load-balancer types, and Java number semantics.

Every check names the offending field, so that a bad snapshot says what is wrong with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from keyshared._checks import check_bool, check_int

__all__ = [
    "check_bool",
    "check_instance",
    "check_int",
    "check_mapping",
    "check_name",
    "check_names",
    "check_real",
    "java_div",
    "java_int",
    "java_round",
    "java_sqrt",
]

_JAVA_INT_MIN = -(2**31)
_JAVA_INT_MAX = 2**31 - 1


def check_real(name: str, value: object, *, minimum: float | None = 0.0) -> float:
    """Return ``value`` as a finite float, at least ``minimum`` (no bound when ``None``).

    ``-0.0`` comes back as ``0.0``: Java's ``Double.compare`` orders the two zeros apart,
    and a negative zero would otherwise sort differently from Pulsar.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {number}")
    if minimum is not None and number < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {number}")
    return number + 0.0


def check_name(name: str, value: object) -> str:
    """Return ``value`` if it is a non-empty ``str``, else raise."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{name} must not be empty")
    return value


def check_names(name: str, values: object) -> frozenset[str]:
    """Return a collection of non-empty names as a frozenset (a lone ``str`` is refused)."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a collection of str, got {type(values).__name__}")
    return frozenset(check_name(f"{name} item", item) for item in values)


_T = TypeVar("_T")


def check_instance(name: str, value: object, value_type: type[_T]) -> _T:
    """Return ``value`` if it is a ``value_type``, else raise ``TypeError``."""
    if not isinstance(value, value_type):
        raise TypeError(f"{name} must be a {value_type.__name__}, got {type(value).__name__}")
    return value


def check_mapping(name: str, value: object, check_item: Callable[[str, Any], _T]) -> dict[str, _T]:
    """A mapping with non-empty ``str`` keys, each item checked as ``name[key]``."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping, got {type(value).__name__}")
    return {
        check_name(f"{name} key", key): check_item(f"{name}[{key!r}]", item)
        for key, item in value.items()
    }


def java_int(value: float) -> int:
    """Java's ``(int) value``: truncation toward zero, saturating at the 32-bit range."""
    if math.isnan(value):
        return 0
    if value >= _JAVA_INT_MAX:
        return _JAVA_INT_MAX
    if value <= _JAVA_INT_MIN:
        return _JAVA_INT_MIN
    return math.trunc(value)


def java_round(value: float) -> int:
    """Java's ``Math.round`` of a finite double: the nearest integer, halves rounded up."""
    return math.floor(value + 0.5)


def java_div(numerator: float, denominator: float) -> float:
    """Java's double division: a zero denominator gives an infinity or NaN, not an error."""
    if denominator != 0.0:
        return numerator / denominator
    if numerator == 0.0 or math.isnan(numerator):
        return math.nan
    negative = (numerator < 0) != (math.copysign(1.0, denominator) < 0)
    return -math.inf if negative else math.inf


def java_sqrt(value: float) -> float:
    """Java's ``Math.sqrt``: NaN for a negative argument (rounding can make a variance < 0)."""
    return math.sqrt(value) if value >= 0 else math.nan
