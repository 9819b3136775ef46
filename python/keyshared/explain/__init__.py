"""Explaining a live Key_Shared subscription from Pulsar's topic stats (who owns which
hashes, who is stuck and why, what a key would do) and a scalable topic from a 5.0 broker's
admin REST (its segment DAG, draining sealed segments, key -> segment -> consumer); the
``keyshared explain`` command and its PNG pictures (``keyshared[simulate]``) are
:mod:`keyshared.explain.command` and :mod:`keyshared.explain.plot`.
"""

from keyshared.explain import scalable_topic, subscription
from keyshared.explain.scalable_topic import *
from keyshared.explain.subscription import *

__all__: list[str] = []
__all__ += scalable_topic.__all__
__all__ += subscription.__all__
