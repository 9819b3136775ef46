#!/usr/bin/env bash
# The release artifacts in dist/: one manylinux wheel for every supported CPython (abi3, the
# stable ABI, so one build serves 3.11 and later) and the source distribution. Then, for each
# supported CPython, the wheel is installed into a new virtual environment whose PATH has no
# Rust toolchain, as a user without one installs it, and tests/smoke runs there.
# Needs .venv from scripts/setup.sh (maturin, and ziglang, which links against glibc 2.17).
set -euo pipefail
cd "$(dirname "$0")/.."

# Keep in step with requires-python and the classifiers in pyproject.toml.
pythons=(3.11 3.12 3.13)
# The oldest glibc the wheel runs on: manylinux2014's, which pip on any current distribution
# accepts.
manylinux=manylinux_2_17

log() { printf '[wheels] %s\n' "$*" >&2; }

# The interpreter of version $1: pythonX.Y on PATH where it runs (a pyenv shim only runs for
# the versions selected), else the newest pyenv build of it.
interpreter() {
  if "python$1" -c '' 2>/dev/null; then
    command -v "python$1"
    return
  fi
  local found
  found=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$1".*/bin/"python$1" 2>/dev/null \
    | sort -V | tail -n 1)
  if [ -z "$found" ]; then
    log "no CPython $1: install it (pyenv install $1) to test the wheel on it"
    exit 1
  fi
  echo "$found"
}

# PATH without any folder holding cargo or rustc.
without_rust() {
  local dir kept=() IFS=:
  for dir in $PATH; do
    if [ -x "$dir/cargo" ] || [ -x "$dir/rustc" ]; then continue; fi
    kept+=("$dir")
  done
  echo "${kept[*]}"
}

bare_path=$(without_rust)
export PATH="$PWD/.venv/bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf dist
# Its own target folder: zig's linker and C compiler would otherwise invalidate the artifacts of
# the development build and of tests/package's wheel.
log "building the abi3 wheel ($manylinux) and the sdist"
CARGO_TARGET_DIR=target/wheels maturin build --release --quiet --features abi3 --zig \
  --compatibility "$manylinux" --interpreter "$(interpreter "${pythons[0]}")" --out dist
if ! maturin sdist --out dist >"$work/sdist.log" 2>&1; then
  cat "$work/sdist.log" >&2
  exit 1
fi
wheel=$(ls dist/keyshared-*-abi3-*"$manylinux"_x86_64.whl)
log "built $(cd dist && echo *)"

for version in "${pythons[@]}"; do
  started=$SECONDS
  env_dir="$work/py$version"
  "$(interpreter "$version")" -m venv "$env_dir"
  run() { PATH="$env_dir/bin:$bare_path" "$@"; }
  run python -m pip install -q "$wheel" pytest numpy pyarrow
  ignore=()
  # Spark's tests only where PySpark itself installs for this Python.
  if ! run python -m pip install -q pyspark; then
    log "PySpark does not install on CPython $version: its smoke test is left out there"
    ignore=(--ignore=test_spark.py)
  fi
  log "smoke tests on CPython $version"
  # From tests/smoke, so that keyshared and spark_udfs come from the wheel, not the checkout.
  (cd tests/smoke && run python -m pytest -q "${ignore[@]}")
  log "CPython $version passed in $((SECONDS - started)) s"
done
