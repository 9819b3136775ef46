"""The JVM peers of the benchmarks: each system's partitioner from its released jar, looped
on one thread inside the Pulsar oracle (oracle/, its ``bench.*`` ops in BenchOps.java, built
by scripts/pulsar.sh), over the keys the benchmark gives keyshared.

The JVM times itself: ``Loop.run`` answers the ``System.nanoTime`` span of each pass and the
CPU time it took, the loop alone, so that neither the request's round trip nor JSON enters a
JVM time. Every wait has a timeout; a JVM that refuses a request, dies or hangs raises
:class:`JvmError`.
"""

from __future__ import annotations

import json
import queue
import statistics
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from ratios import CPU_NS, KEYS, PAIRED

ROOT = Path(__file__).resolve().parents[1]
#: The release whose oracle runs the loops (the newest Maven Central serves whole).
PULSAR = "4.2.4"
TIMEOUT_S = 300.0
#: The serial collector keeps the JVM on one core, as keyshared runs on one thread here: the
#: garbage of a loop that builds a String per key is collected on the loop's thread, and its
#: cost counts in the loop's time. A fixed heap, so that no pass resizes it.
JVM_FLAGS = ["-Xms3g", "-Xmx3g", "-XX:+UseSerialGC", "-Dfile.encoding=UTF-8"]


class JvmError(RuntimeError):
    """The oracle refused a request, died, or did not answer in time."""


def classpath(version: str) -> str:
    target = ROOT / "oracle" / "target" / version
    cp_file = target / "classpath.txt"
    if not cp_file.is_file():
        raise JvmError(f"{cp_file} is missing: run scripts/pulsar.sh (scripts/bench.sh does)")
    return f"{target / 'classes'}:{cp_file.read_text().strip()}"


def write_keys(path: Path, keys: list[bytes]) -> None:
    """The key file ``bench.load`` reads: a big-endian int32 count, the int32 lengths, then
    the keys' bytes."""
    lengths = np.fromiter(map(len, keys), dtype=">i4", count=len(keys))
    with path.open("wb") as out:
        out.write(struct.pack(">i", len(keys)))
        out.write(lengths.tobytes())
        out.write(b"".join(keys))


def checksum(results: np.ndarray) -> int:
    """``sum((i + 1) * results[i])`` modulo 2^64, as ``bench.run`` reports it."""
    weights = np.arange(1, len(results) + 1, dtype=np.uint64)
    return int((weights * results.astype(np.int64).view(np.uint64)).sum(dtype=np.uint64))


class Jvm:
    """One oracle JVM. Use as a context manager."""

    def __init__(self, version: str = PULSAR) -> None:
        command = ["java", *JVM_FLAGS, "-cp", classpath(version), "org.keyshared.oracle.Oracle"]
        self._dir = tempfile.TemporaryDirectory(prefix="keyshared-bench-")
        self._log = (Path(self._dir.name) / "jvm.log").open("w+", encoding="utf-8")
        self._proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            encoding="utf-8",
            bufsize=1,
        )
        self._answers: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._next_id = 0
        running = self.call("version")["pulsar_version"]
        if running != version:
            self.close()
            raise JvmError(f"asked for Pulsar {version}, the oracle runs {running}")

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._answers.put(line)
        self._answers.put(None)

    def call(self, op: str, **args: Any) -> Any:
        """Runs ``op`` with ``args`` in the oracle and returns its result."""
        assert self._proc.stdin is not None
        self._next_id += 1
        try:
            self._proc.stdin.write(json.dumps({"id": self._next_id, "op": op, "args": args}) + "\n")
            self._proc.stdin.flush()
            line = self._answers.get(timeout=TIMEOUT_S)
        except queue.Empty:
            self._proc.kill()
            raise JvmError(f"{op}: no answer within {TIMEOUT_S} s") from None
        except BrokenPipeError:
            line = None
        if line is None:
            self._log.seek(0)
            raise JvmError(f"{op}: the JVM died:\n{self._log.read()[-2000:]}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise JvmError(f"{op}: {answer['error']}")
        return answer.get("result")

    def load(self, keys: list[bytes]) -> int:
        """Hands ``keys`` to the JVM once; answers the handle loops name."""
        path = Path(self._dir.name) / f"keys-{self._next_id}.bin"
        write_keys(path, keys)
        handle: int = self.call("bench.load", path=str(path))
        path.unlink()
        return handle

    def loop(self, keys: int, task: str, **args: int) -> Loop:
        """A handle on ``task``'s loop over the key set ``keys`` (BenchOps.java lists them)."""
        return Loop(self, self.call("bench.loop", keys=keys, task=task, **args))

    def results(self, loop: Loop) -> np.ndarray:
        path = Path(self._dir.name) / "results.bin"
        count = self.call("bench.dump", handle=loop.handle, path=str(path))
        out = np.fromfile(path, dtype="<i4")
        path.unlink()
        assert len(out) == count
        return out

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=30)
        self._log.close()
        self._dir.cleanup()

    def __enter__(self) -> Jvm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Passes(NamedTuple):
    """What ``bench.run`` answers: per pass, its wall-clock and CPU nanoseconds (the loop
    thread's, plus the collector's pauses: BenchOps.cpuNanos); the last pass's checksum."""

    nanos: list[int]
    cpu_nanos: list[int]
    checksum: int


@dataclass(frozen=True)
class Loop:
    """One task's loop in the JVM."""

    jvm: Jvm
    handle: int

    def run(self, rounds: int = 1) -> Passes:
        """Runs ``rounds`` passes."""
        answer = self.jvm.call("bench.run", handle=self.handle, rounds=rounds)
        return Passes(answer["nanos"], answer["cpu_nanos"], answer["checksum"] % 2**64)

    def results(self) -> np.ndarray:
        """One pass's results (partitions or consumer ids), as int32."""
        return self.jvm.results(self)


#: Passes each loop runs before it is timed: enough for the JIT's top tier to compile it.
WARM_PASSES = 40
#: Timed rounds of each variant in a group beside the JVM.
ROUNDS = 15


def warmed(jvm: Jvm, keys: int, task: str, **args: int) -> Loop:
    """``task``'s loop over ``keys``, after WARM_PASSES untimed passes."""
    loop = jvm.loop(keys, task, **args)
    loop.run(WARM_PASSES)
    return loop


def time_jvm(benchmark: Any, loop: Loop, expected: np.ndarray) -> None:
    """Times one pass per round, each checked against ``expected`` (keyshared's answer) by
    checksum after the whole array was compared once. pytest-benchmark's time is the request
    (the pass and the round trip through the pipe); the JVM's own times of each pass go to
    extra_info."""
    assert np.array_equal(loop.results(), expected)
    want = checksum(expected)
    wall: list[int] = []
    cpu: list[int] = []

    def one_pass() -> None:
        passes = loop.run()
        assert passes.checksum == want
        wall.append(passes.nanos[0])
        cpu.append(passes.cpu_nanos[0])

    benchmark.pedantic(one_pass, rounds=ROUNDS, iterations=1, warmup_rounds=1)
    n = len(expected)
    benchmark.extra_info[KEYS] = n
    benchmark.extra_info["jvm self-timed ns/key"] = round(statistics.median(wall[-ROUNDS:]) / n, 2)
    benchmark.extra_info["jvm cpu ns/key"] = round(statistics.median(cpu[-ROUNDS:]) / n, 2)


def time_beside_jvm(benchmark: Any, run: Callable[[], object], loop: Loop, keys: int) -> None:
    """Times keyshared's ``run``, each round just after one JVM pass, and records two paired
    ratios, each the median over rounds of the JVM pass's time over keyshared's round's:
    of process CPU time (the one the floor checks, ``PAIRED + "jvm"``) and of wall-clock time.

    Both sides are one thread of work, so CPU time compares like with like, and unlike
    wall-clock time it does not count the time a process waits for a core: on a machine other
    work shares, a wall-clock pass is as long as the scheduler makes it, on either side."""
    jvm_wall: list[int] = []
    jvm_cpu: list[int] = []
    ours_cpu: list[int] = []

    def jvm_pass() -> None:
        passes = loop.run()
        jvm_wall.append(passes.nanos[0])
        jvm_cpu.append(passes.cpu_nanos[0])

    def ours() -> None:
        start = time.process_time_ns()
        run()
        ours_cpu.append(time.process_time_ns() - start)

    benchmark.pedantic(ours, setup=jvm_pass, rounds=ROUNDS, iterations=1, warmup_rounds=2)
    wall_pairs = zip(jvm_wall[-ROUNDS:], benchmark.stats.stats.data, strict=True)
    cpu_pairs = zip(jvm_cpu[-ROUNDS:], ours_cpu[-ROUNDS:], strict=True)
    benchmark.extra_info[KEYS] = keys
    benchmark.extra_info[CPU_NS] = round(statistics.median(ours_cpu[-ROUNDS:]) / keys, 2)
    benchmark.extra_info[PAIRED + "jvm"] = round(
        statistics.median(theirs / max(mine, 1) for theirs, mine in cpu_pairs), 3
    )
    benchmark.extra_info["paired wall-clock ratio vs jvm"] = round(
        statistics.median(theirs * 1e-9 / mine for theirs, mine in wall_pairs), 3
    )
