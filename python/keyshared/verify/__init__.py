"""``keyshared verify``: Key_Shared checked on a user's own cluster against keyshared's model.

:func:`verify` runs named scenarios (:data:`SCENARIOS`) of a seeded keyed workload on a topic
of its own, with Key_Shared consumers in child processes, and records every send, delivery,
acknowledgement and membership change (:class:`RunRecord`); :func:`check` then holds the
record to Key_Shared's promises and to keyshared's dispatcher for that release
(:class:`Verdict`). Records round-trip through JSON, so a run can be checked again later.
The producer and consumers are Pulsar's official Python client (the extra
``keyshared[verify]``); the connection, secured or not, is a
:class:`keyshared.connection.ClusterConnection`.
"""

from keyshared.verify.canary import Outcome, verify
from keyshared.verify.checker import ScenarioResult, Verdict, Violation, check
from keyshared.verify.record import Message, RunRecord, ScenarioRecord
from keyshared.verify.runner import RunFailed, VerifyOptions, Workload
from keyshared.verify.scenarios import SCENARIOS

__all__ = [
    "SCENARIOS",
    "Message",
    "Outcome",
    "RunFailed",
    "RunRecord",
    "ScenarioRecord",
    "ScenarioResult",
    "Verdict",
    "VerifyOptions",
    "Violation",
    "Workload",
    "check",
    "verify",
]
