#!/usr/bin/env bash
# Long coverage-guided fuzz runs (atheris/libFuzzer) of the key readers and the stateful
# kernels through Python, then of the kernels themselves (cargo-fuzz on the nightly
# toolchain). Each Python target keeps its corpus in fuzz/corpus/<target> (not committed) and
# writes a failing input to fuzz/findings/; replay one with `python fuzz/fuzz_<target>.py
# FILE`. The cargo-fuzz targets keep theirs in rust/kernels/fuzz/{corpus,artifacts}.
#   scripts/fuzz.sh            # 10 minutes per target
#   scripts/fuzz.sh 3600       # an hour per target
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
seconds="${1:-600}"
mkdir -p fuzz/findings
for target in keys state; do
  mkdir -p "fuzz/corpus/$target"
  printf '\n== fuzz %s (%s s)\n' "$target" "$seconds"
  .venv/bin/python "fuzz/fuzz_$target.py" -max_total_time="$seconds" -max_len=4096 \
    -artifact_prefix=fuzz/findings/ "fuzz/corpus/$target"
done
for target in routing draining; do
  printf '\n== cargo fuzz %s (%s s)\n' "$target" "$seconds"
  (cd rust/kernels && cargo +nightly fuzz run -O "$target" -- -max_total_time="$seconds" -max_len=4096)
done
