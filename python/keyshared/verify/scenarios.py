"""The scenarios of ``keyshared verify``: each a schedule of consumer changes over the seeded
keyed workload, on a subscription of its own.

Every change is made while the consumers are quiet, so that what the broker decided before
it and after it is told apart; where a scenario wants keys in flight across a change, its
consumers hold what they receive (they do not acknowledge) until the change is made.
:data:`SCENARIOS` lists them with what each does to the cluster, for the help and the docs.
"""

from __future__ import annotations

from collections.abc import Callable

from keyshared.verify.record import Leave
from keyshared.verify.runner import Run


def _names(run: Run) -> list[str]:
    return [f"c{i}" for i in range(run.workload.consumers)]


def _halves(run: Run) -> tuple[int, int]:
    first = run.workload.messages // 2
    return first, run.workload.messages - first


def steady(run: Run) -> None:
    """Every consumer joins, then the whole workload, each message acknowledged on receipt."""
    for name in _names(run):
        run.join(name)
    run.stats()
    sent = run.publish(run.workload.messages)
    run.wait_acked(sent)
    run.stats()


def join(run: Run) -> None:
    """A consumer joins while the others hold unacknowledged messages of keys it takes over:
    those keys' hashes drain, and their new messages wait until the old ones are acked."""
    *first, newcomer = _names(run)
    holders = [run.join(name, "hold") for name in first]
    a, b = _halves(run)
    before = run.publish(a)
    run.wait_delivered(before)
    run.stats()
    late = run.join(newcomer, "hold")
    run.stats()
    after = run.publish(b)
    run.quiet()
    run.stats()
    run.release([*holders, late])
    run.wait_acked([*before, *after])
    run.stats()


def leave(run: Run) -> None:
    """A consumer closes while holding unacknowledged messages: the broker sends them again
    to the consumers that take over its keys, before those keys' newer messages."""
    _change_membership(run, Leave.CLOSE)


def crash(run: Run) -> None:
    """A consumer's process is killed (-9) while it holds unacknowledged messages, then
    started again under its name: the broker sees a dropped connection, sends what it held
    to the others, and takes the restarted consumer back."""
    _change_membership(run, Leave.CRASH)


def _change_membership(run: Run, how: Leave) -> None:
    names = _names(run)
    consumers = [run.join(name, "hold") for name in names]
    a, b = _halves(run)
    before = run.publish(a)
    run.wait_delivered(before)
    run.stats()
    gone = consumers[-1]
    run.leave(gone, how)
    run.quiet()
    run.stats()
    rest = consumers[:-1]
    if how is Leave.CRASH:
        rest.append(run.join(gone.name, "hold"))
        run.stats()
    run.release(rest)
    after = run.publish(b)
    run.wait_acked([*before, *after])
    run.stats()


def stall(run: Run) -> None:
    """A consumer stops acknowledging while the others go on, then resumes; a consumer's
    process is stopped for a moment within the broker's keep-alive and continued; and one is
    stopped past the keep-alive, so that the broker drops it and sends what it held to the
    others (this waits up to twice the broker's keepAliveIntervalSeconds, --keep-alive)."""
    consumers = [run.join(name) for name in _names(run)]
    third = run.workload.messages // 3
    slow = consumers[0]
    run.hold(slow)
    first = run.publish(third)
    run.wait_delivered(first)
    run.stats()
    run.release([slow])
    run.pause(consumers[1], min(1.0, run.keep_alive_s / 2))
    run.wait_acked(first)
    stopped = consumers[-1]
    run.hold(stopped)
    second = run.publish(third)
    run.wait_delivered(second)
    run.stall(stopped)
    run.quiet()
    run.stats()
    third_part = run.publish(run.workload.messages - 2 * third)
    run.wait_acked([*first, *second, *third_part])
    run.stats()


def nack(run: Run) -> None:
    """Every consumer negatively acknowledges every fifth message on its first delivery and
    acknowledges the rest; the client asks the broker to send the nacked ones again."""
    for name in _names(run):
        run.join(name, "nack")
    sent = run.publish(run.workload.messages)
    run.wait_acked(sent)
    run.stats()


#: Every scenario by name, in the order ``all`` runs them.
SCENARIOS: dict[str, Callable[[Run], None]] = {
    "steady": steady,
    "join": join,
    "leave": leave,
    "crash": crash,
    "stall": stall,
    "nack": nack,
}


__all__ = ["SCENARIOS", "crash", "join", "leave", "nack", "stall", "steady"]
