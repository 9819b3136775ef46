"""Danube's in-flight window for Key-Shared dispatch (SPEC 8), with its failure policy:
per-key blocking, a safe cursor, per-consumer caps, and retries, backoff, ack timeouts and
poison handling driven by ``now_ms``."""

from keyshared._core import (
    InFlightEntry,
    InFlightWindow,
    SubscriptionFailurePolicy,
    WindowAction,
)

__all__ = ["InFlightEntry", "InFlightWindow", "SubscriptionFailurePolicy", "WindowAction"]
