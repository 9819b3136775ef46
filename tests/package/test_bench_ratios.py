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


def bench(lib: str, median: float, **extra: Any) -> dict[str, Any]:
    return {
        "group": "spark-job-step",
        "param": lib,
        "stats": {"median": median},
        "extra_info": extra,
    }


def run(results: dict[str, Any]) -> list[str]:
    failed: list[str] = ratios.report(
        ratios.medians(results), ratios.measures(results), ratios.paired_ratios(results)
    )
    return failed


def test_floor_compares_medians_without_paired_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    results = {"benchmarks": [bench("keyshared", 5.0), bench("spark-groupby", 3.5)]}
    assert run(results) == ["spark-job-step: 0.70x vs spark-groupby, floor 0.769231"]
    assert "(medians): 0.70" in capsys.readouterr().out


def test_paired_rounds_decide_the_floor_when_recorded(capsys: pytest.CaptureFixture[str]) -> None:
    # The two tests' medians came from different stretches of time; the paired rounds did not.
    paired = {ratios.PAIRED + "spark-groupby": 0.85}
    results = {"benchmarks": [bench("keyshared", 5.0, **paired), bench("spark-groupby", 3.5)]}
    assert run(results) == []
    assert "(paired rounds): 0.85 >= 0.769231  ok" in capsys.readouterr().out
    failing = {ratios.PAIRED + "spark-groupby": 0.7}
    results = {"benchmarks": [bench("keyshared", 4.0, **failing), bench("spark-groupby", 4.0)]}
    assert run(results) == ["spark-job-step: 0.70x vs spark-groupby, floor 0.769231"]
