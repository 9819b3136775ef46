"""The one lock order of the native objects (rust/bindings/src/state.rs): every pair of calls
that take more than one lock, raced on two threads over shared objects, must finish. The
race runs in a child process with a deadline, since a deadlocked thread holds the GIL in
native code and nothing in the process could report it: a hang fails the test and names the
pair, rather than hanging the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "support" / "lock_order_stress.py"
SECONDS_PER_PAIR = 0.1
DEADLINE = 300


def race(seconds: float, only: str = "") -> str:
    try:
        done = subprocess.run(
            [sys.executable, str(SCRIPT), str(seconds), only],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )
    except subprocess.TimeoutExpired as hung:
        out = hung.stdout.decode() if isinstance(hung.stdout, bytes) else hung.stdout or ""
        last = out.strip().splitlines()[-1:] or ["(before the first pair)"]
        raise AssertionError(f"deadlock: {last[0]} did not finish in {DEADLINE} s") from None
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_pair_of_multi_lock_calls_finishes() -> None:
    out = race(SECONDS_PER_PAIR)
    pairs = [line for line in out.splitlines() if line.startswith("pair: ")]
    # 16 calls: every pair of two different ones and each with itself.
    assert len(pairs) == 16 * 17 // 2
    assert out.strip().endswith(f"done: {len(pairs)} pairs")
    print(f"{len(pairs)} pairs of multi-lock calls raced, {SECONDS_PER_PAIR} s each")


def test_a_dispatch_and_a_handoff_over_the_same_maps_finish() -> None:
    """The deadlock that was: a dispatcher locked its maps by consumer id while
    ``register_draining_hashes`` locked them by address, maps lying in memory in the
    opposite order of their ids; within half a second of racing the two hung."""
    out = race(0.5, "register_draining_hashes(sticky maps)")
    assert "pair: sticky.dispatch_read | register_draining_hashes(sticky maps)" in out
