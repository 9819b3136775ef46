"""Paired rounds: each timed round of one run just after a round of another, timed too, so
that a ratio is taken within one stretch of a busy machine's time rather than between two
medians taken minutes apart."""

import statistics
import time
from collections.abc import Callable
from typing import Any


def paired(
    benchmark: Any,
    ours: Callable[[], object],
    peer: Callable[[], object],
    *,
    rounds: int,
    warmup_rounds: int,
    setup: Callable[[], None] = lambda: None,
) -> tuple[float, list[int]]:
    """Times `rounds` rounds of `ours`, each just after an untimed `setup` and a round of
    `peer`; returns the median over those pairs of the peer's time over ours, and the peer's
    timed rounds (ns)."""
    theirs: list[int] = []

    def before() -> None:
        setup()
        start = time.perf_counter_ns()
        peer()
        theirs.append(time.perf_counter_ns() - start)

    benchmark.pedantic(ours, setup=before, rounds=rounds, iterations=1, warmup_rounds=warmup_rounds)
    mine = benchmark.stats.stats.data
    theirs = theirs[-len(mine) :]
    ratio = statistics.median(p * 1e-9 / max(m, 1e-12) for p, m in zip(theirs, mine, strict=True))
    return ratio, theirs
