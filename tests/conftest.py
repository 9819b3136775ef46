"""Shared test settings."""

from hypothesis import HealthCheck, settings

# Two shared cores make wall-clock deadlines meaningless; correctness is what is tested here.
settings.register_profile(
    "keyshared", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("keyshared")
