"""How long keyshared waits for a cluster: the default timeout and the longest one, and the
check of a timeout or interval given in seconds."""

from __future__ import annotations

import math

from keyshared.errors import ArgumentTypeError, InvalidArgument

#: Seconds to wait for the admin REST endpoint.
DEFAULT_TIMEOUT_S = 10.0

#: The longest timeout or interval, in seconds: a year. Python's waits overflow well below
#: ``threading.TIMEOUT_MAX`` (a sleep adds the machine's uptime to its deadline).
MAX_SECONDS = 365 * 24 * 3600


def check_timeout(name: str, value: object) -> float:
    """A timeout or interval in seconds: a finite number > 0 and at most a year
    (:data:`MAX_SECONDS`); the error names ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentTypeError(
            f"{name} must be a number of seconds, got {type(value).__name__}", argument=name
        )
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgument(
            f"{name} must be a finite number of seconds > 0, got {value}", argument=name
        )
    if value > MAX_SECONDS:
        raise InvalidArgument(
            f"{name} must be at most {MAX_SECONDS} seconds (a year), got {value}", argument=name
        )
    return float(value)


__all__ = ["DEFAULT_TIMEOUT_S", "MAX_SECONDS", "check_timeout"]
