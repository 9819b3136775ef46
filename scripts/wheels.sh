#!/usr/bin/env bash
# The release artifacts in dist/: a manylinux wheel for each supported CPython and the source
# distribution. Then each wheel is installed into a new virtual environment of its Python whose
# PATH has no Rust toolchain, as a user without one installs it, and tests/smoke runs there.
# maturin and ziglang (which links against glibc 2.17) come from .venv, the JVM functions' jar
# that the wheel carries from scripts/setup.sh.
#
# A wheel per version, not one abi3 wheel: the stable ABI hides the layout of lists and str,
# and a list of keys hashed 15-30% slower through its calls.
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

scripts/setup.sh
bare_path=$(without_rust)
export PATH="$PWD/.venv/bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf dist
for version in "${pythons[@]}"; do
  log "building the CPython $version wheel ($manylinux)"
  # One target folder for every version, apart from the development build's (zig's linker
  # and C compiler differ): what does not depend on the interpreter (Arrow, rayon, mimalloc)
  # is built once, and only pyo3 and the crates above it again for each version.
  CARGO_TARGET_DIR=target/wheels maturin build --release --quiet --zig \
    --compatibility "$manylinux" --interpreter "$(interpreter "$version")" --out dist
done
if ! maturin sdist --out dist >"$work/sdist.log" 2>&1; then
  cat "$work/sdist.log" >&2
  exit 1
fi
log "built $(cd dist && echo *)"

for version in "${pythons[@]}"; do
  started=$SECONDS
  tag=cp${version/./}
  wheel=$(ls dist/keyshared-*-"$tag-$tag"-*"$manylinux"_x86_64.whl)
  env_dir="$work/py$version"
  "$(interpreter "$version")" -m venv "$env_dir"
  run() { PATH="$env_dir/bin:$bare_path" "$@"; }
  # PySpark too: every supported version runs every smoke test, Spark's included. The
  # simulate extra (matplotlib) as the docs tell users to install it: tests/smoke runs the
  # docs' commands, and some draw (explain --png, simulate's plots).
  run python -m pip install -q "$wheel[simulate]" pytest numpy pyarrow pyspark
  log "smoke tests on CPython $version"
  # From tests/smoke, so that keyshared and spark_udfs come from the wheel, not the checkout.
  (cd tests/smoke && run python -m pytest -q)
  log "CPython $version passed in $((SECONDS - started)) s"
done
