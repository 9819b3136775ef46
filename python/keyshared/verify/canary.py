"""A whole verify run: the release to check against, the scenarios on the cluster, and the
checker's verdict on what they recorded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from keyshared.connection import ClusterConnection
from keyshared.verify.checker import Verdict, check
from keyshared.verify.record import RunRecord
from keyshared.verify.runner import Run, VerifyOptions
from keyshared.verify.scenarios import SCENARIOS
from keyshared.versions import KNOWN_RELEASES, nearest_release


@dataclass
class Outcome:
    """What a run found: its ``record``, the checker's ``verdict``, and ``notes`` for the
    reader (the release checked against when the broker's has no profile, a scenario that
    ran out of time)."""

    record: RunRecord
    verdict: Verdict
    notes: list[str] = field(default_factory=list)


def broker_version(connection: ClusterConnection) -> str | None:
    """The release the broker reports (``/admin/v2/brokers/version``), or None when it does
    not answer that request (a proxy, a role that may not ask)."""
    try:
        text = connection.admin("GET", "/admin/v2/brokers/version").decode("utf-8", "replace")
    except OSError:
        return None
    return text.strip().strip('"') or None


def release_to_check(
    connection: ClusterConnection, asked: str | None
) -> tuple[str, str | None, list[str]]:
    """The profile to check against, the broker's own version and the notes on the choice."""
    reported = broker_version(connection)
    if asked is not None:
        notes = [] if reported is None else [f"the broker reports Pulsar {reported}"]
        return asked, reported, notes
    if reported is None:
        return (
            KNOWN_RELEASES[0],
            None,
            [
                f"the broker did not say its version; checking against {KNOWN_RELEASES[0]}"
                " (give --pulsar-version)"
            ],
        )
    profile, note = nearest_release(reported)
    return profile, reported, [] if note is None else [note]


def verify(
    connection: ClusterConnection,
    options: VerifyOptions,
    progress: Callable[[str], None] = lambda _: None,
) -> Outcome:
    """Runs ``options.scenarios`` on the cluster and checks what happened against keyshared's
    model of its release. Raises :class:`keyshared.verify.runner.RunFailed` (or an OSError
    from the connection) when the run cannot go on; a KeyboardInterrupt still removes what
    the run made before it propagates."""
    profile, reported, notes = release_to_check(connection, options.pulsar_version)
    record = RunRecord(
        topic=options.topic_name(),
        partitions=options.partitions,
        pulsar_version=profile,
        broker_version=reported,
        allow_out_of_order=options.allow_out_of_order,
        seed=options.workload.seed,
        points=options.points,
    )
    run = Run(
        connection,
        record,
        options.workload,
        options.duration_s,
        options.keep_alive_s,
        keep=options.keep,
        existing_topic=options.existing_topic,
        progress=progress,
    )
    with run:
        for name in options.scenarios:
            with run.scenario(name):
                SCENARIOS[name](run)
    notes += run.notes
    return Outcome(record, check(record), notes)


__all__ = ["Outcome", "broker_version", "release_to_check", "verify"]
