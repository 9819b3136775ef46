"""The Spark guide's cluster recipe (docs/guides/spark.md) on a local-cluster master: the
release wheel (with the jar) in a venv-packed environment shipped through spark.archives, the
jar through --jars, and the job run on both engines by executors that import nothing from
this checkout."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pyspark

ROOT = Path(__file__).resolve().parents[2]
JAR_IN_WHEEL = "spark_udfs/jars/keyshared-spark.jar"

DRIVER = """
import json, sys
from spark_udfs.job import main
out = sys.argv[1]
args = ["--synthetic-keys", "20000", "--key-space", "700", "--segments", "3", "--top", "5"]
for engine in ("arrow", "jvm"):
    assert main([*args, "--engine", engine, "--out", f"{out}/{engine}"]) == 0, engine
"""


def run(*args: str | Path, **kwargs: object) -> None:
    subprocess.run([str(a) for a in args], check=True, **kwargs)  # type: ignore[call-overload]


def test_the_cluster_recipe_runs_on_local_cluster(tmp_path: Path) -> None:
    # The wheel's own target directory, shared with the packaging test: `maturin develop` and
    # `maturin build` invalidate each other's artifacts.
    env = {**os.environ, "CARGO_TARGET_DIR": str(ROOT / "target" / "wheel")}
    dist = tmp_path / "dist"
    run(
        sys.executable,
        "-m",
        "maturin",
        "build",
        "--release",
        "--quiet",
        "--out",
        dist,
        cwd=ROOT,
        env=env,
    )
    (wheel,) = dist.glob("keyshared-*.whl")
    assert JAR_IN_WHEEL in zipfile.ZipFile(wheel).namelist()

    ks_env = tmp_path / "ks-env"
    run(sys.executable, "-m", "venv", ks_env)
    run(ks_env / "bin" / "pip", "install", "-q", wheel, "pyarrow", "venv-pack")
    archive = tmp_path / "ks-env.tar.gz"
    run(ks_env / "bin" / "venv-pack", "-q", "-p", ks_env, "-o", archive)

    jar = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER, encoding="utf-8")
    out = tmp_path / "out"
    submit_env = {
        **os.environ,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYSPARK_PYTHON": "./environment/bin/python",
        "SPARK_HOME": str(jar.parents[1]),
    }
    run(
        jar,
        "--master",
        "local-cluster[1,1,1024]",
        "--jars",
        ks_env
        / "lib"
        / f"python{sys.version_info.major}.{sys.version_info.minor}"
        / "site-packages"
        / JAR_IN_WHEEL,
        "--conf",
        f"spark.archives={archive}#environment",
        driver,
        out,
        cwd=tmp_path,
        env=submit_env,
        timeout=900,
    )
    reports = {
        engine: json.loads((out / engine / "report.json").read_text(encoding="utf-8"))
        for engine in ("arrow", "jvm")
    }
    assert {e: r.pop("engine") for e, r in reports.items()} == {"arrow": "arrow", "jvm": "jvm"}
    for report in reports.values():
        report.pop("timings")
        report["balancing"].pop("layout")
    assert reports["arrow"] == reports["jvm"]
    assert reports["jvm"]["totals"]["messages"] == 20_000
