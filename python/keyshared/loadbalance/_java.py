"""Java number semantics for the load-balancer ports: Pulsar's arithmetic, bit for bit."""

from __future__ import annotations

import math

__all__ = ["java_div", "java_int", "java_round", "java_sqrt", "java_wrap_int"]

_JAVA_INT_MIN = -(2**31)
_JAVA_INT_MAX = 2**31 - 1


def java_int(value: float) -> int:
    """Java's ``(int) value``: truncation toward zero, saturating at the 32-bit range."""
    if math.isnan(value):
        return 0
    if value >= _JAVA_INT_MAX:
        return _JAVA_INT_MAX
    if value <= _JAVA_INT_MIN:
        return _JAVA_INT_MIN
    return math.trunc(value)


def java_wrap_int(value: int) -> int:
    """Java's 32-bit ``int`` arithmetic on an exact integer: wrapped around the int range."""
    return (value - _JAVA_INT_MIN) % 2**32 + _JAVA_INT_MIN


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
