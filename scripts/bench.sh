#!/usr/bin/env bash
# Runs the benchmarks on a release build and prints each group's ratios against keyshared.
#   scripts/bench.sh [PYTEST ARGS...]          run, print ratios, fail if a floor is missed
#   scripts/bench.sh --save-baseline [...]     the same, and save the run as the baseline
#   scripts/bench.sh --gate [...]              the same, and fail if any benchmark's median is
#                                              more than $BENCH_THRESHOLD (default 25%) slower
#                                              than the saved baseline
set -euo pipefail
cd "$(dirname "$0")/.."
KEYSHARED_BUILD=release scripts/setup.sh
# The JVM peers of the partitioner groups run in the Pulsar oracle of the newest release, those
# of the layout groups in 5.0.0-M1's (the one release with scalable topics).
PULSAR_VERSIONS="4.2.4 5.0.0-M1" scripts/pulsar.sh
export PATH="$PWD/.venv/bin:$PATH"
mode=run
case "${1:-}" in --save-baseline|--gate) mode=${1#--}; shift ;; esac

args=(--benchmark-only --benchmark-json=out/bench.json --benchmark-columns=min,median,max,rounds
      --benchmark-group-by=group -p no:randomly -q)
if [ "$mode" = save-baseline ]; then
  args+=(--benchmark-save=baseline)
elif [ "$mode" = gate ]; then
  baseline=$(ls .benchmarks/*/*_baseline.json 2>/dev/null | sort | tail -n 1)
  if [ -z "$baseline" ]; then
    echo "no baseline saved yet: run scripts/bench.sh --save-baseline first" >&2
    exit 2
  fi
  run=$(basename "$baseline" | cut -d_ -f1)
  args+=(--benchmark-compare="$run" --benchmark-compare-fail="median:${BENCH_THRESHOLD:-25%}")
fi
mkdir -p out
python -m pytest benches "${args[@]}" "$@"
python benches/ratios.py out/bench.json
