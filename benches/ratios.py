"""Prints, per benchmark group, how each peer compares with keyshared, and checks the floors
and the ceilings.

Usage: python benches/ratios.py RESULTS.json  (pytest-benchmark's --benchmark-json output).
Exits 1 when a ratio that ran is below its floor, or a time per key above its ceiling.
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OURS = "keyshared"
#: keyshared's extra_info key, followed by a peer's name, for the median over rounds of the
#: peer's time over keyshared's when each round was paired with a run of the peer just before
#: it: the floor then compares rounds run side by side rather than two tests' medians.
PAIRED = "paired ratio vs "
#: The extra_info key of how many keys one round of a benchmark handles.
KEYS = "keys"
#: The extra_info key of the median process CPU time of a round, per key, in nanoseconds.
CPU_NS = "cpu ns/key"
#: The extra_info key of how many units of work (operations, segments, ...) one round does,
#: and of the median process CPU time of a round per unit, in nanoseconds: what Scaling
#: compares between sizes.
UNITS = "units"
CPU_NS_UNIT = "cpu ns/unit"


@dataclass(frozen=True)
class Floor:
    """median(peer) / median(ours) must be at least `at_least` in `group`, `ours` being one of
    keyshared's variants there (keyshared over a Python list, keyshared-arrow, ...)."""

    group: str
    peer: str
    at_least: float
    ours: str = OURS


@dataclass(frozen=True)
class Ceiling:
    """`lib`'s time per key must be at most `ns_per_key` nanoseconds in `group`: an absolute
    speed, where a floor is relative to a peer. The time is the process CPU time the
    benchmark recorded (extra_info[CPU_NS]), the median over rounds: a machine's other work
    stretches the wall clock (waiting for the core) but not the one core's work. Without
    it, the wall-clock median over extra_info[KEYS]."""

    group: str
    lib: str
    ns_per_key: float


LAYOUT_OPS = ("split", "merge", "rebucket")

PARTITIONER_GROUPS = (
    "kafka-partition",
    "murmur3-partition",
    "java-string-hash-partition",
    "iceberg-bucket-string",
)

FLOORS = [
    Floor("hash-split-arrow", "mmh3-loop", 6.0),
    Floor("hash-split-arrow", "polars", 1.0),
    Floor("hash-list", "mmh3-loop", 3.0),
    Floor("hash-numpy-unicode", "mmh3-loop", 3.0),
    Floor("bucket-index", "bisect-loop", 20.0),
    Floor("entry-bucket-select-batch", "python", 20.0),
    Floor("entry-bucket-dispatch", "python", 2.0),
    Floor("entry-bucket-dispatch-batch", "python", 3.0),
    Floor("bucketed-batcher", "python", 10.0),
    Floor("should-block-batch", "python", 20.0),
    Floor("sticky-dispatch-read", "python", 5.0),
    Floor("cursor-ack-batch", "python", 20.0),
    Floor("ring-select-batch", "python", 20.0),
    # Other systems' partitioners over Python lists, beside the per-key Python peers.
    Floor("kafka-partition", "kafka-python-loop", 50.0),
    Floor("iceberg-bucket-string", "pyiceberg-loop", 20.0),
    Floor("iceberg-bucket-long", "pyiceberg-loop", 30.0),
    Floor("murmur3-partition", "mmh3-loop", 1.5),
    # Each partitioner at twice the speed of its JVM implementation or more, one thread each,
    # over Arrow (benches/test_partitioners.py says how the JVM is timed).
    *(Floor(group, "jvm", 2.0, "keyshared-arrow") for group in PARTITIONER_GROUPS),
    # Over a Python list the bound is reading the list's objects (1M of them, 80 MB of str):
    # within 1.67x of a loop that only reads each key's bytes through the list (read-objects,
    # benches/limits.c; each of its rounds, like keyshared's, just after a JVM pass), and
    # never slower than the JVM. Measured: 1.2-1.4x the read on the hosts of earlier runs;
    # 1.7-2.0x on an AVX-512 EPYC, where this floor is missed (docs/benchmarks.md says what
    # was tried).
    *(Floor(group, "read-objects", 0.6) for group in PARTITIONER_GROUPS),
    *(Floor(group, "jvm", 1.0) for group in PARTITIONER_GROUPS),
    Floor("ring-select-batch", "jvm", 2.0),
    # Small calls (benches/test_calls.py): a batch of one key within 1.5x of one key_hash call,
    # of 8 keys no slower than mmh3's loop, and further ahead the larger the batch; one select
    # no slower than one key_hash call (the binding's floor: one small argument in, one small
    # result out). With a binary search over the ring's points select measured 0.87-1.17x of
    # key_hash's speed from run to run; searching only the points of the hash's slice of 256
    # (rust/kernels/src/sorted_hashes.rs), 1.3x.
    # key_hash, key_hashes, select, dispatch and ack take their positional calls through
    # rust/bindings/src/fastcall.rs, which skips pyo3's argument parsing. The one-key batch
    # measures 1.0x one key_hash call: its result array is the one the caller dropped after
    # the call before (rust/bindings/src/spare.rs); a fresh one, through NumPy's memory
    # handler, made it 1.9x.
    Floor("key-hashes-1", "key_hash", 1 / 1.5),
    # The same array made by hand, np.array([key_hash(k)], dtype=np.uint32): NumPy's own
    # making of a one-element array from Python costs more than all of key_hashes([k]).
    Floor("key-hashes-1", "key_hash-array", 1.0),
    # One key_hash call at or below one mmh3.hash call on the same key (the same work: one
    # argument, its UTF-8 or bytes, the hash, the int), str and bytes.
    Floor("key-hash-1-str", "mmh3", 1.0),
    Floor("key-hash-1-bytes", "mmh3", 1.0),
    Floor("key-hashes-8", "mmh3-loop", 1.0),
    Floor("key-hashes-64", "mmh3-loop", 3.0),
    Floor("key-hashes-512", "mmh3-loop", 5.0),
    Floor("key-hashes-4096", "mmh3-loop", 8.0),
    Floor("select-1", "key_hash", 1.0),
    # One entry dispatched, one acked, and the two in turn, each against as many key_hash
    # calls in the same loop. Before the one-entry path a dispatch and its ack took 1,125-1,158
    # ns, about 8x two key_hash calls. With fastcall.rs, a one-entry read that allocates
    # nothing, looks its consumer up once and hashes with FxHash: dispatch 2.8x one key_hash
    # call (the 3x), ack 1.5-1.6x. The pair measured 5-7.7x two key_hash calls on a
    # noisy machine (an ack that empties a hash's pending count removes it from the draining
    # tracker, which the next dispatch inserts again): its floor stays where it was.
    Floor("dispatch-1", "key_hash", 1 / 3.0),
    Floor("ack-1", "key_hash", 1 / 2.0),
    Floor("dispatch-ack-1", "key_hash", 1 / 5.6),
    # Layouts of 8,192 segments (benches/test_layout_sizes.py): each operation and decision
    # no slower than Pulsar 5.0.0-M1's Java (M1 has no rebucket), paired rounds of CPU time.
    *(Floor(f"layout-{op}", "jvm-8192", 1.0, "keyshared-8192") for op in ("split", "merge")),
    Floor("layout-decide", "jvm-8192", 1.0, "keyshared-8192"),
    Floor("layout-assign", "jvm-8192", 1.0, "keyshared-8192"),
    # Sixteen threads, where a machine has them, within 1.3x of the memory's own speed (a
    # parallel read of the same bytes that hashes nothing, benches/test_hashing.py).
    Floor("key-hashes-threads", "read-16-threads", 1 / 1.3, "keyshared-16-threads"),
    # keyshared is the JVM ks_route here: 2.5x faster than the Arrow UDF and the pandas UDF,
    # within 1.6x of Spark's built-in hash() (1 / 1.6 = 0.625).
    Floor("spark-route-5m", "keyshared-arrow", 2.5),
    Floor("spark-route-5m", "pandas-mmh3", 2.5),
    Floor("spark-route-5m", "spark-hash", 0.625),
    # The Arrow engine's SQL ks_bucket_hash within 1.15x of a trivial Arrow UDF over the same
    # keys (the transfer between the JVM and the Python worker is the floor of either).
    Floor("spark-bucket-hash-arrow", "trivial-arrow-udf", 1 / 1.15),
    # The job's routing step within 1.3x of Spark generating and grouping the same messages.
    Floor("spark-job-step", "spark-groupby", 1 / 1.3),
    # keyshared verify's checker over a run of 1M messages (2M events) within 20x of a plain
    # Python pass that only counts the events by kind (paired rounds; benches/test_verify.py).
    # Measured on a loaded 2-core VM: 5x (paired), 2.5 s of CPU.
    Floor("verify-check", "count-events", 1 / 20),
]


@dataclass(frozen=True)
class Speedup:
    """`lib`'s speedup from one thread to `threads` (paired: the median over rounds on
    `threads`, each just after a round on one, of the one's time over its) must be at least
    `at_least` times `limit`'s in `group`: a share of what the machine's cores give in the
    same run, rather than a multiple that a machine whose cores are shared with other work
    cannot give. Each runs as "{name}-1-thread" and "{name}-{threads}-threads"."""

    group: str
    lib: str
    limit: str
    threads: int
    at_least: float


#: The limit is `spin`, work that touches no memory split over the threads: on two whole
#: cores it gives 2x, so 0.9 of it is 1.8x; on sixteen, 16x, so 0.75 of it is 12x.
SPEEDUPS = [
    Speedup("key-hashes-threads", OURS, "spin", 2, 0.9),
    Speedup("key-hashes-threads", OURS, "spin", 16, 0.75),
]


def speedup(
    group: str,
    libs: dict[str, float],
    paired: dict[tuple[str, str, str], float],
    name: str,
    threads: int,
) -> float | None:
    """`name`'s speedup at `threads`: the median over rounds each run just after a round on
    one thread where the benchmark recorded it, else its median on one over its median on
    `threads`."""
    one, many = f"{name}-1-thread", f"{name}-{threads}-threads"
    if (group, many, one) in paired:
        return paired[group, many, one]
    if one not in libs or many not in libs:
        return None
    return libs[one] / libs[many]


def check_speedups(
    group: str, libs: dict[str, float], paired: dict[tuple[str, str, str], float]
) -> list[str]:
    failed = []
    for s in (s for s in SPEEDUPS if s.group == group):
        ours = speedup(group, libs, paired, s.lib, s.threads)
        limit = speedup(group, libs, paired, s.limit, s.threads)
        if ours is None or limit is None:
            print(f"  speedup {s.lib} at {s.threads} threads: not run")
            continue
        share = ours / limit
        ok = share >= s.at_least
        print(
            f"  speedup {s.lib} at {s.threads} threads: {ours:.2f}x, {s.limit} {limit:.2f}x: "
            f"{share:.2f} >= {s.at_least:g}  {'ok' if ok else 'FAIL'}"
        )
        if not ok:
            failed.append(
                f"{group}: {s.lib} {ours:.2f}x at {s.threads} threads, {share:.2f} of "
                f"{s.limit}'s {limit:.2f}x, floor {s.at_least:g}"
            )
    return failed


CEILINGS = [
    Ceiling("key-hashes-arrow-1thread", OURS, 2.5),
    # keyshared verify's checker: a recorded run of 1M messages checked in under 10 s of CPU.
    Ceiling("verify-check", OURS, 10_000.0),
]


@dataclass(frozen=True)
class Scaling:
    """In `group`, `large`'s time per unit of work must be at most `within` times `small`'s:
    the cost of a size against a smaller one. A unit is what the benchmark says it counts
    (extra_info[UNITS] a round: an operation, an active segment, ...); the time per unit is
    extra_info[CPU_NS_UNIT] (process CPU time) where recorded, else the wall-clock median
    over the units."""

    group: str
    small: str
    large: str
    within: float


#: Layouts by size (benches/test_layout_sizes.py): an operation at 8,192 segments within 3x
#: its cost at 64 (an operation costs what it changes, not what the layout holds), decide
#: and compute_assignment per active segment (and consumer) within 2x.
SCALINGS = [
    *(Scaling(f"layout-{op}", "keyshared-64", "keyshared-8192", 3.0) for op in LAYOUT_OPS),
    Scaling("layout-decide", "keyshared-64", "keyshared-8192", 2.0),
    Scaling("layout-assign", "keyshared-64", "keyshared-8192", 2.0),
]


def per_unit(bench: dict[str, Any]) -> float | None:
    extra = bench.get("extra_info", {})
    if CPU_NS_UNIT in extra:
        return float(extra[CPU_NS_UNIT])
    if extra.get(UNITS):
        return float(bench["stats"]["median"] * 1e9 / extra[UNITS])
    return None


def unit_times(results: dict[str, Any]) -> dict[tuple[str, str], float]:
    """(group, lib) -> nanoseconds per unit of work, where the benchmark counted units."""
    out = {}
    for bench in results["benchmarks"]:
        ns = per_unit(bench)
        if ns is not None:
            out[(bench["group"], lib_name(bench))] = ns
    return out


def check_scalings(group: str, units: dict[tuple[str, str], float]) -> list[str]:
    failed = []
    for s in (s for s in SCALINGS if s.group == group):
        small, large = units.get((group, s.small)), units.get((group, s.large))
        if small is None or large is None:
            print(f"  scaling {s.large} vs {s.small}: not run")
            continue
        ratio = large / small
        ok = ratio <= s.within
        print(
            f"  scaling {s.large} vs {s.small}: {large:,.1f} vs {small:,.1f} ns a unit, "
            f"{ratio:.2f}x <= {s.within:g}  {'ok' if ok else 'FAIL'}"
        )
        if not ok:
            failed.append(
                f"{group}: {s.large} {ratio:.2f}x {s.small}'s time a unit, within {s.within:g}"
            )
    return failed


def lib_name(bench: dict[str, Any]) -> str:
    """The benchmark's name in its group: what it recorded as extra_info["lib"], else its
    ``lib`` parameter, else its whole parameter id or name."""
    named = bench.get("extra_info", {}).get("lib") or (bench.get("params") or {}).get("lib")
    return str(named or bench.get("param") or bench["name"])


def paired_ratios(results: dict[str, Any]) -> dict[tuple[str, str, str], float]:
    """(group, ours, peer) -> the paired ratio the benchmark `ours` in that group recorded."""
    return {
        (bench["group"], lib_name(bench), key.removeprefix(PAIRED)): value
        for bench in results["benchmarks"]
        for key, value in bench.get("extra_info", {}).items()
        if key.startswith(PAIRED)
    }


def cpu_times(results: dict[str, Any]) -> dict[tuple[str, str], float]:
    """(group, lib) -> the median CPU time per key the benchmark recorded, where it did."""
    return {
        (bench["group"], lib_name(bench)): bench["extra_info"][CPU_NS]
        for bench in results["benchmarks"]
        if CPU_NS in bench.get("extra_info", {})
    }


def key_counts(results: dict[str, Any]) -> dict[tuple[str, str], int]:
    """(group, lib) -> the keys one round handles, where the benchmark recorded them."""
    return {
        (bench["group"], lib_name(bench)): bench["extra_info"][KEYS]
        for bench in results["benchmarks"]
        if KEYS in bench.get("extra_info", {})
    }


def medians(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    by_group: dict[str, dict[str, float]] = {}
    for bench in results["benchmarks"]:
        lib = lib_name(bench)
        by_group.setdefault(bench["group"], {})[lib] = bench["stats"]["median"]
    return by_group


def measures(results: dict[str, Any]) -> dict[str, list[str]]:
    """What benchmarks report besides time (memory, rates), as lines per group."""
    lines: dict[str, list[str]] = {}
    for bench in results["benchmarks"]:
        lib = lib_name(bench)
        for key, value in bench.get("extra_info", {}).items():
            shown = f"{value:,}" if isinstance(value, int | float) else value
            lines.setdefault(bench["group"], []).append(f"  {lib}: {key} = {shown}")
    return lines


def report(
    by_group: dict[str, dict[str, float]],
    extra: dict[str, list[str]],
    paired: dict[tuple[str, str, str], float],
    keys: dict[tuple[str, str], int],
    cpu: dict[tuple[str, str], float],
    units: dict[tuple[str, str], float] | None = None,
) -> list[str]:
    """Prints one table per group; returns the floors, ceilings and scalings that failed."""
    failed = []
    for group, libs in sorted(by_group.items()):
        ours = libs.get(OURS)
        print(f"\n{group}")
        for lib, median in sorted(libs.items(), key=lambda kv: kv[1]):
            count = keys.get((group, lib))
            per_key = "" if count is None else f"{median * 1e9 / count:8.2f} ns/key"
            ratio = "" if ours is None else f"{median / ours:8.2f}x keyshared's time"
            print(f"  {lib:<22} {median * 1e3:12.3f} ms  {per_key}  {ratio}".rstrip())
        print(*extra.get(group, []), sep="\n")
        failed += check_floors(group, libs, paired)
        failed += check_ceilings(group, libs, keys, cpu)
        failed += check_speedups(group, libs, paired)
        failed += check_scalings(group, units or {})
    return failed


def check_floors(
    group: str, libs: dict[str, float], paired: dict[tuple[str, str, str], float]
) -> list[str]:
    failed = []
    for floor in (f for f in FLOORS if f.group == group):
        which = "" if floor.ours == OURS else f" {floor.ours}"
        key = (group, floor.ours, floor.peer)
        # A peer timed inside keyshared's benchmark (a paired ratio) need not be a benchmark.
        if floor.ours not in libs or (floor.peer not in libs and key not in paired):
            print(f"  floor{which} vs {floor.peer}: not run")
            continue
        how = "paired rounds" if key in paired else "medians"
        ratio = paired[key] if key in paired else libs[floor.peer] / libs[floor.ours]
        ok = ratio >= floor.at_least
        verdict = "ok" if ok else "FAIL"
        print(
            f"  floor{which} vs {floor.peer} ({how}): {ratio:.2f} >= {floor.at_least:g}  {verdict}"
        )
        if not ok:
            failed.append(
                f"{group}:{which} {ratio:.2f}x vs {floor.peer}, floor {floor.at_least:g}"
                if which
                else f"{group}: {ratio:.2f}x vs {floor.peer}, floor {floor.at_least:g}"
            )
    return failed


def check_ceilings(
    group: str,
    libs: dict[str, float],
    keys: dict[tuple[str, str], int],
    cpu: dict[tuple[str, str], float],
) -> list[str]:
    failed = []
    for ceiling in (c for c in CEILINGS if c.group == group):
        if ceiling.lib not in libs:
            print(f"  ceiling {ceiling.lib}: not run")
            continue
        count = keys.get((group, ceiling.lib))
        if not count:
            print(f"  ceiling {ceiling.lib}: FAIL, no key count in extra_info[{KEYS!r}]")
            failed.append(f"{group}: {ceiling.lib} recorded no key count for its ceiling")
            continue
        ns = cpu.get((group, ceiling.lib), libs[ceiling.lib] * 1e9 / count)
        clock = "CPU" if (group, ceiling.lib) in cpu else "wall-clock"
        ok = ns <= ceiling.ns_per_key
        verdict = "ok" if ok else "FAIL"
        print(
            f"  ceiling {ceiling.lib}: {ns:.2f} ns/key ({clock}) <= {ceiling.ns_per_key:g}  "
            f"{verdict}"
        )
        if not ok:
            failed.append(f"{group}: {ceiling.lib} {ns:.2f} ns/key, ceiling {ceiling.ns_per_key:g}")
    return failed


def main(path: str) -> int:
    results = json.loads(Path(path).read_text())
    failed = report(
        medians(results),
        measures(results),
        paired_ratios(results),
        key_counts(results),
        cpu_times(results),
        unit_times(results),
    )
    for line in failed:
        print(f"LIMIT FAILED: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
