#!/usr/bin/env bash
# The main job: sets up (scripts/setup.sh), then buckets a synthetic Zipf-skewed key set on
# local Spark and writes report.json, report.md and report.png to out/. Extra arguments go to
# the job (python -m spark_udfs.job --help), e.g. --input keys.parquet --key-column key.
set -euo pipefail
cd "$(dirname "$0")/.."
KEYSHARED_BUILD=release scripts/setup.sh
exec .venv/bin/python -m spark_udfs.job --out out "$@"
