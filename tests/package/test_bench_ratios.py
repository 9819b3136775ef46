"""The benchmark floors' arithmetic (benches/ratios.py), on made-up results."""

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def load_ratios() -> ModuleType:
    path = Path(__file__).parents[2] / "benches" / "ratios.py"
    spec = importlib.util.spec_from_file_location("ratios", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ratios = load_ratios()


def bench(
    lib: str, median: float, group: str = "spark-job-step", extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"group": group, "param": lib, "stats": {"median": median}, "extra_info": extra or {}}


def run(results: dict[str, Any]) -> list[str]:
    failed: list[str] = ratios.report(
        ratios.medians(results),
        ratios.measures(results),
        ratios.paired_ratios(results),
        ratios.key_counts(results),
        ratios.cpu_times(results),
        ratios.unit_times(results),
    )
    return failed


def test_floor_compares_medians_without_paired_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    results = {"benchmarks": [bench("keyshared", 5.0), bench("spark-groupby", 3.5)]}
    assert run(results) == ["spark-job-step: 0.70x vs spark-groupby, floor 0.769231"]
    assert "(medians): 0.70" in capsys.readouterr().out


def test_paired_rounds_decide_the_floor_when_recorded(capsys: pytest.CaptureFixture[str]) -> None:
    # The two tests' medians came from different stretches of time; the paired rounds did not.
    paired = {ratios.PAIRED + "spark-groupby": 0.85}
    results = {"benchmarks": [bench("keyshared", 5.0, extra=paired), bench("spark-groupby", 3.5)]}
    assert run(results) == []
    assert "(paired rounds): 0.85 >= 0.769231  ok" in capsys.readouterr().out
    failing = {ratios.PAIRED + "spark-groupby": 0.7}
    results = {"benchmarks": [bench("keyshared", 4.0, extra=failing), bench("spark-groupby", 4.0)]}
    assert run(results) == ["spark-job-step: 0.70x vs spark-groupby, floor 0.769231"]


def test_a_floor_names_which_keyshared_variant_it_holds(capsys: pytest.CaptureFixture[str]) -> None:
    # kafka-partition holds keyshared-arrow to 2x the JVM and keyshared over a list to 1x the
    # JVM and to 0.6 of the speed of reading the list, each by the ratio it recorded.
    group = "kafka-partition"
    results = {
        "benchmarks": [
            bench("keyshared", 4e-3, group, {ratios.PAIRED + "jvm": 1.2}),
            bench("keyshared-arrow", 3e-3, group, {ratios.PAIRED + "jvm": 1.9}),
            bench("jvm", 9e-3, group),
            bench("read-objects", 1.9e-3, group),
        ]
    }
    assert run(results) == [
        "kafka-partition: keyshared-arrow 1.90x vs jvm, floor 2",
        "kafka-partition: 0.47x vs read-objects, floor 0.6",
    ]
    out = capsys.readouterr().out
    assert "floor vs jvm (paired rounds): 1.20 >= 1  ok" in out
    assert "floor keyshared-arrow vs jvm (paired rounds): 1.90 >= 2  FAIL" in out
    assert "floor vs read-objects (medians): 0.47 >= 0.6  FAIL" in out


def test_a_benchmark_is_named_by_its_lib(capsys: pytest.CaptureFixture[str]) -> None:
    # By extra_info["lib"], else its lib parameter beside others (the call-size groups); a
    # speedup without its limit's runs is not run.
    sized = bench("x", 1.4e-7, "key-hashes-1")
    sized["params"] = {"lib": "keyshared", "size": 1}
    one = bench("key_hash", 1e-7, "key-hashes-1")
    # pytest-benchmark writes "params": null for a test without parameters.
    one["params"] = None
    threads = [
        bench("x", 1.0, "key-hashes-threads", {"lib": "keyshared-1-thread"}),
        bench("y", 0.5, "key-hashes-threads", {"lib": "keyshared-2-threads"}),
    ]
    assert run({"benchmarks": [sized, one, *threads]}) == []
    out = capsys.readouterr().out
    assert "floor vs key_hash (medians): 0.71 >= 0.666667  ok" in out
    assert "speedup keyshared at 16 threads: not run" in out.split("key-hashes-threads")[1]


def test_a_speedup_is_a_share_of_the_limit_s(capsys: pytest.CaptureFixture[str]) -> None:
    group = "key-hashes-threads"
    medians = {"keyshared": (1.0, 0.9), "spin": (1.0, 0.98)}
    results = {
        "benchmarks": [
            bench("x", t, group, {"lib": f"{name}-{n}"})
            for name, (one, two) in medians.items()
            for n, t in (("1-thread", one), ("2-threads", two))
        ]
    }
    # 1.11x against the cores' 1.02x: 1.09 of what the machine gave.
    assert run(results) == []
    assert "speedup keyshared at 2 threads: 1.11x, spin 1.02x: 1.09 >= 0.9  ok" in (
        capsys.readouterr().out
    )
    results["benchmarks"][1]["stats"]["median"] = 1.2
    assert run(results) == [
        "key-hashes-threads: keyshared 0.83x at 2 threads, 0.82 of spin's 1.02x, floor 0.9"
    ]


def test_a_speedup_recorded_in_pairs_is_read_over_the_medians(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Medians a minute apart say 0.83x; the rounds each run just after one on one thread say
    # 1.8x, against the cores' 1.9x in pairs (2x by medians).
    group = "key-hashes-threads"
    results = {
        "benchmarks": [
            bench("x", 1.0, group, {"lib": "keyshared-1-thread"}),
            bench(
                "y",
                1.2,
                group,
                {"lib": "keyshared-2-threads", ratios.PAIRED + "keyshared-1-thread": 1.8},
            ),
            bench("z", 1.0, group, {"lib": "spin-1-thread"}),
            bench("w", 0.5, group, {"lib": "spin-2-threads", ratios.PAIRED + "spin-1-thread": 1.9}),
        ]
    }
    assert run(results) == []
    assert "speedup keyshared at 2 threads: 1.80x, spin 1.90x: 0.95 >= 0.9  ok" in (
        capsys.readouterr().out
    )


def test_ceiling_holds_the_median_per_key(capsys: pytest.CaptureFixture[str]) -> None:
    group = "key-hashes-arrow-1thread"
    fast = {"benchmarks": [bench("keyshared", 2.4e-3, group, {"keys": 1_000_000})]}
    assert run(fast) == []
    assert "ceiling keyshared: 2.40 ns/key (wall-clock) <= 2.5  ok" in capsys.readouterr().out
    slow = {"benchmarks": [bench("keyshared", 2.6e-3, group, {"keys": 1_000_000})]}
    assert run(slow) == ["key-hashes-arrow-1thread: keyshared 2.60 ns/key, ceiling 2.5"]
    assert "2.60 ns/key" in capsys.readouterr().out


def test_ceiling_holds_the_cpu_time_when_recorded(capsys: pytest.CaptureFixture[str]) -> None:
    # The wall clock stretched by a busy machine (3 ns a key) does not count, the one core's
    # work does (2.4); and a CPU time over the ceiling fails though the wall clock is under.
    group = "key-hashes-arrow-1thread"
    busy = {"keys": 1_000_000, ratios.CPU_NS: 2.4}
    assert run({"benchmarks": [bench("keyshared", 3e-3, group, busy)]}) == []
    assert "ceiling keyshared: 2.40 ns/key (CPU) <= 2.5  ok" in capsys.readouterr().out
    slow = {"keys": 1_000_000, ratios.CPU_NS: 2.7}
    assert run({"benchmarks": [bench("keyshared", 2e-3, group, slow)]}) == [
        "key-hashes-arrow-1thread: keyshared 2.70 ns/key, ceiling 2.5"
    ]


def test_a_ceiling_without_a_key_count_fails() -> None:
    results = {"benchmarks": [bench("keyshared", 1e-3, "key-hashes-arrow-1thread")]}
    assert run(results) == [
        "key-hashes-arrow-1thread: keyshared recorded no key count for its ceiling"
    ]


def test_a_limit_whose_benchmark_did_not_run_passes(capsys: pytest.CaptureFixture[str]) -> None:
    # `scripts/bench.sh -k GROUP` runs some groups: the others' limits are "not run".
    results = {
        "benchmarks": [
            bench("jvm", 9e-3, "kafka-partition"),
            bench("numpy", 1e-3, "key-hashes-arrow-1thread"),
        ]
    }
    assert run(results) == []
    out = capsys.readouterr().out
    assert "floor vs jvm: not run" in out
    assert "ceiling keyshared: not run" in out


def test_a_scaling_compares_the_time_per_unit_of_two_sizes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # layout-decide: the time per active segment at 8,192 within 2x its time at 64; CPU time
    # per unit where recorded, else the median over the units.
    group = "layout-decide"
    small = {"lib": "keyshared-64", ratios.UNITS: 32}
    large = {"lib": "keyshared-8192", ratios.UNITS: 4096}
    results = {
        "benchmarks": [bench("a", 0.032e-3, group, small), bench("b", 4.096e-3 * 1.9, group, large)]
    }
    assert run(results) == []
    assert "1.90x <= 2  ok" in capsys.readouterr().out
    small_cpu = {**small, ratios.CPU_NS_UNIT: 1.0}
    large_cpu = {**large, ratios.CPU_NS_UNIT: 2.5}
    results = {"benchmarks": [bench("a", 9.0, group, small_cpu), bench("b", 1.0, group, large_cpu)]}
    assert run(results) == [
        "layout-decide: keyshared-8192 2.50x keyshared-64's time a unit, within 2"
    ]


def test_a_peer_timed_inside_ours_holds_a_floor_by_its_paired_ratio(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The JVM of the layout groups runs inside keyshared's benchmark: no benchmark of its own.
    extra = {"lib": "keyshared-8192", ratios.PAIRED + "jvm-8192": 0.8}
    assert run({"benchmarks": [bench("x", 1.0, "layout-split", extra)]}) == [
        "layout-split: keyshared-8192 0.80x vs jvm-8192, floor 1"
    ]
    assert "vs jvm-8192 (paired rounds): 0.80 >= 1  FAIL" in capsys.readouterr().out
