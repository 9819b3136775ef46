"""What users install: the release wheel carries keyshared with its compiled core and the
spark_udfs package, and the development setup makes both importable from anywhere."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

# Builds a release wheel: minutes, so only scripts/test.sh runs it.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import keyshared, spark_udfs
from keyshared import _core
assert keyshared.key_hash("foo") == 4138058784, keyshared.key_hash("foo")
assert callable(spark_udfs.with_routing) and callable(spark_udfs.register)
print(_core.__file__)
print(spark_udfs.__file__)
"""


def probe(cwd: Path, env: dict[str, str]) -> list[Path]:
    """Where the probe imported the compiled core and spark_udfs from."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return [Path(line) for line in done.stdout.split()]


def test_the_development_setup_imports_both_packages_from_any_directory(tmp_path: Path) -> None:
    core, udfs = probe(tmp_path, dict(os.environ))
    assert core.resolve().is_relative_to(ROOT / "python" / "keyshared")
    assert udfs.resolve().is_relative_to(ROOT / "spark_udfs")


def test_the_release_wheel_carries_the_core_and_spark_udfs(tmp_path: Path) -> None:
    # The build scripts/wheels.sh makes for this interpreter, in its target folder, so that
    # the one build serves both (and the development build's folder stays warm).
    env = {**os.environ, "CARGO_TARGET_DIR": str(ROOT / "target" / "wheels")}
    dist, site = tmp_path / "dist", tmp_path / "site"
    interpreter = Path(sys.executable).with_name(
        f"python{sys.version_info[0]}.{sys.version_info[1]}"
    )
    build = [sys.executable, "-m", "maturin", "build", "--release", "--quiet", "--zig"]
    build += ["--compatibility", "manylinux_2_17", "--interpreter", interpreter, "--out", dist]
    subprocess.run(build, cwd=ROOT, env=env, check=True)
    (wheel,) = dist.glob("keyshared-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert any(name.endswith(".dist-info/licenses/LICENSE") for name in archive.namelist())
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site]
    subprocess.run([*install, wheel], check=True)

    imported = probe(tmp_path, {**os.environ, "PYTHONPATH": str(site)})
    assert [p.parent.name for p in imported] == ["keyshared", "spark_udfs"]
    assert all(p.is_relative_to(site) for p in imported), imported
