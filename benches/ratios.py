"""Prints, per benchmark group, how each peer compares with keyshared, and checks the floors.

Usage: python benches/ratios.py RESULTS.json  (pytest-benchmark's --benchmark-json output).
Exits 1 when a ratio that ran is below its floor.
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path

OURS = "keyshared"
#: keyshared's extra_info key, followed by a peer's name, for the median over rounds of the
#: peer's time over keyshared's when each round was paired with a run of the peer just before
#: it: the floor then compares rounds run side by side rather than two tests' medians.
PAIRED = "paired ratio vs "


@dataclass(frozen=True)
class Floor:
    """median(peer) / median(keyshared) must be at least `at_least` in `group`."""

    group: str
    peer: str
    at_least: float


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
    Floor("cursor-ack-batch", "python", 20.0),
    Floor("ring-select-batch", "python", 20.0),
    # Other systems' partitioners over Python lists, beside the per-key Python peers.
    Floor("kafka-partition", "kafka-python-loop", 50.0),
    Floor("iceberg-bucket-string", "pyiceberg-loop", 20.0),
    Floor("iceberg-bucket-long", "pyiceberg-loop", 100.0),
    Floor("murmur3-partition", "mmh3-loop", 2.0),
    # keyshared is the JVM ks_route here: 2.5x faster than the Arrow UDF and the pandas UDF,
    # within 1.6x of Spark's built-in hash() (1 / 1.6 = 0.625).
    Floor("spark-route-5m", "keyshared-arrow", 2.5),
    Floor("spark-route-5m", "pandas-mmh3", 2.5),
    Floor("spark-route-5m", "spark-hash", 0.625),
    # The job's routing step within 1.3x of Spark generating and grouping the same messages.
    Floor("spark-job-step", "spark-groupby", 1 / 1.3),
]


def paired_ratios(results: dict) -> dict[tuple[str, str], float]:
    """(group, peer) -> the paired ratio keyshared's benchmark in that group recorded."""
    return {
        (bench["group"], key.removeprefix(PAIRED)): value
        for bench in results["benchmarks"]
        if (bench.get("param") or bench["name"]) == OURS
        for key, value in bench.get("extra_info", {}).items()
        if key.startswith(PAIRED)
    }


def medians(results: dict) -> dict[str, dict[str, float]]:
    by_group: dict[str, dict[str, float]] = {}
    for bench in results["benchmarks"]:
        lib = bench.get("param") or bench["name"]
        by_group.setdefault(bench["group"], {})[lib] = bench["stats"]["median"]
    return by_group


def measures(results: dict) -> dict[str, list[str]]:
    """What benchmarks report besides time (memory, rates), as lines per group."""
    lines: dict[str, list[str]] = {}
    for bench in results["benchmarks"]:
        lib = bench.get("param") or bench["name"]
        for key, value in bench.get("extra_info", {}).items():
            shown = f"{value:,}" if isinstance(value, int | float) else value
            lines.setdefault(bench["group"], []).append(f"  {lib}: {key} = {shown}")
    return lines


def report(
    by_group: dict[str, dict[str, float]],
    extra: dict[str, list[str]],
    paired: dict[tuple[str, str], float],
) -> list[str]:
    """Prints one table per group; returns the floors that failed."""
    failed = []
    for group, libs in sorted(by_group.items()):
        ours = libs.get(OURS)
        print(f"\n{group}")
        for lib, median in sorted(libs.items(), key=lambda kv: kv[1]):
            ratio = "" if ours is None else f"{median / ours:8.2f}x keyshared's time"
            print(f"  {lib:<22} {median * 1e3:12.3f} ms  {ratio}")
        print(*extra.get(group, []), sep="\n")
        for floor in (f for f in FLOORS if f.group == group):
            if ours is None or floor.peer not in libs:
                print(f"  floor vs {floor.peer}: not run")
                continue
            how = "paired rounds" if (group, floor.peer) in paired else "medians"
            ratio = paired.get((group, floor.peer), libs[floor.peer] / ours)
            ok = ratio >= floor.at_least
            verdict = "ok" if ok else "FAIL"
            print(f"  floor vs {floor.peer} ({how}): {ratio:.2f} >= {floor.at_least:g}  {verdict}")
            if not ok:
                failed.append(f"{group}: {ratio:.2f}x vs {floor.peer}, floor {floor.at_least:g}")
    return failed


def main(path: str) -> int:
    results = json.loads(Path(path).read_text())
    failed = report(medians(results), measures(results), paired_ratios(results))
    for line in failed:
        print(f"FLOOR FAILED: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
