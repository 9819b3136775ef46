#!/usr/bin/env bash
# The whole test suite as CI runs it: setup, Rust lints and tests, Python lints, stub check
# and pytest. Fails on the first failing step; pytest finding no tests is a failure too.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/pulsar.sh
export PATH="$PWD/.venv/bin:$PATH" PYO3_PYTHON="$PWD/.venv/bin/python"

# Each step's heading says how long the run has taken so far, for CI's time limit.
step() { printf '\n== %s (at %d s)\n' "$*" "$SECONDS"; }

step "cargo fmt";    cargo fmt --check
step "cargo clippy"; cargo clippy --all-targets -q -- -D warnings
step "cargo test";   cargo test -q
# The kernels crate alone, as a Rust user takes it: without the `arrow` feature.
step "kernels without arrow"
cargo clippy -q -p keyshared-kernels --no-default-features --all-targets -- -D warnings
cargo test -q -p keyshared-kernels --no-default-features
# What crates.io would take: the manifest's metadata, and a build of the packaged files alone;
# and the crate's docs, every public item documented, with no warning.
step "cargo publish --dry-run"; cargo publish --dry-run -q -p keyshared-kernels --allow-dirty
step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc -q -p keyshared-kernels --no-deps --all-features
step "ruff";         ruff check .
step "ruff format";  ruff format --check .
step "mypy";         mypy python/keyshared spark_udfs
step "stubtest";     python -m mypy.stubtest keyshared._core
# -m "" runs every test; plain `pytest` leaves out the Spark and slow ones. Two workers: much
# of the suite waits on brokers and JVMs, and the other worker's tests fill that time
# (tests/conftest.py makes the scopes: the broker tests on one worker, the Spark tests on one).
# In collection order, not largest first: the release-wheel test then builds while the broker
# tests wait, rather than alone at the end.
step "pytest"
python -m pytest -q -m "" -n 2 --dist loadscope --no-loadscope-reorder --durations=20 "$@"
# A short coverage-guided run of each fuzz target (scripts/fuzz.sh runs them for long).
fuzz_log=$(mktemp)
for target in keys state; do
  step "fuzz $target"
  if ! python "fuzz/fuzz_$target.py" -runs=3000 -artifact_prefix="${TMPDIR:-/tmp}/" \
    >"$fuzz_log" 2>&1; then
    cat "$fuzz_log"
    exit 1
  fi
  tail -n 1 "$fuzz_log"
done
# The same for the kernels' cargo-fuzz targets (libFuzzer on the nightly toolchain, which
# cargo-fuzz needs; the toolchain and cargo-fuzz are installed the first time).
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
cargo fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz --locked --quiet
# The fuzz crate's Cargo.lock is committed; cargo fuzz would rewrite a stale one in place and
# leave the clone modified, so a stale lock fails here instead.
step "cargo fuzz lock"
if ! (cd rust/kernels/fuzz && cargo +nightly metadata --locked --format-version 1 >/dev/null); then
  echo "rust/kernels/fuzz/Cargo.lock is stale: run 'cargo +nightly update --workspace'" \
    "in rust/kernels/fuzz and commit it" >&2
  exit 1
fi
for target in routing draining; do
  step "cargo fuzz $target"
  if ! (cd rust/kernels && cargo +nightly fuzz run -O "$target" -- -runs=20000 -max_len=4096) \
    >"$fuzz_log" 2>&1; then
    cat "$fuzz_log"
    exit 1
  fi
  tail -n 1 "$fuzz_log"
done
# The release wheel on every supported CPython, installed where there is no Rust toolchain.
step "wheels";       scripts/wheels.sh
step "done"
