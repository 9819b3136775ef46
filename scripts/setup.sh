#!/usr/bin/env bash
# Prepares a fresh machine (or refreshes this one): a virtual environment in .venv with the
# Python dependencies, Java for Spark, and a release build of the native extension installed
# into it. Each step is skipped when its inputs have not changed, so a second run is quick.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv

log() { printf '[setup] %s\n' "$*" >&2; }

fingerprint() { cat "$@" 2>/dev/null | sha256sum | cut -d' ' -f1; }

if ! command -v cargo >/dev/null; then
  log "cargo is missing: install a Rust toolchain (1.83 or newer) first"
  exit 1
fi

if [ ! -x "$venv/bin/python" ]; then
  python=$(command -v python3.11 || command -v python3)
  log "creating $venv with $python"
  "$python" -m venv "$venv"
fi

want=$(fingerprint requirements-dev.txt)
if [ "$(cat "$venv/.requirements" 2>/dev/null)" != "$want" ]; then
  log "installing Python dependencies"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -r requirements-dev.txt
  echo "$want" >"$venv/.requirements"
fi

if ! command -v java >/dev/null; then
  log "installing Java 17 for Spark"
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo=sudo; fi
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi

sources=$(find rust -name '*.rs' | sort)
want=$(fingerprint Cargo.toml Cargo.lock pyproject.toml $sources)
if [ "$(cat "$venv/.extension" 2>/dev/null)" != "$want" ] \
  || ! ls python/keyshared/_core*.so >/dev/null 2>&1; then
  log "building the native extension (release)"
  VIRTUAL_ENV="$PWD/$venv" PATH="$PWD/$venv/bin:$PATH" maturin develop --release -q
  echo "$want" >"$venv/.extension"
fi
