"""Explaining a live Key_Shared subscription from Pulsar's topic stats (who owns which
hashes, who is stuck and why, what a key would do) and a scalable topic from a 5.0 broker's
admin REST (its segment DAG, draining sealed segments, key -> segment -> consumer).

A subscription's stats are read by :mod:`~keyshared.explain.stats` (from a file) or fetched by
:mod:`~keyshared.explain.admin`; :mod:`~keyshared.explain.answers` answers questions about them
(with the keys of :mod:`~keyshared.explain.keys`), :mod:`~keyshared.explain.verdicts` says who
waits on whom, :mod:`~keyshared.explain.explanation` gathers every answer, and
:mod:`~keyshared.explain.watch` says what changed between two. The ``keyshared explain``
command and its PNG pictures (``keyshared[simulate]``) are :mod:`keyshared.explain.command` and
:mod:`keyshared.explain.plot`.
"""

from keyshared.explain import (
    admin,
    answers,
    explanation,
    keys,
    scalable_topic,
    stats,
    verdicts,
    watch,
)
from keyshared.explain.admin import *
from keyshared.explain.answers import *
from keyshared.explain.explanation import *
from keyshared.explain.keys import *
from keyshared.explain.scalable_topic import *
from keyshared.explain.stats import *
from keyshared.explain.verdicts import *
from keyshared.explain.watch import *

__all__: list[str] = []
__all__ += admin.__all__
__all__ += answers.__all__
__all__ += explanation.__all__
__all__ += keys.__all__
__all__ += scalable_topic.__all__
__all__ += stats.__all__
__all__ += verdicts.__all__
__all__ += watch.__all__
