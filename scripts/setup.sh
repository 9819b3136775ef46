#!/usr/bin/env bash
# Prepares a fresh machine (or refreshes this one): a virtual environment in .venv with the
# Python dependencies, a JDK for Spark, the jar of keyshared's JVM functions, and a build of
# the native extension installed into it. Each step is skipped when its inputs have not
# changed, so a second run is quick.
#   KEYSHARED_BUILD=release (the default): the optimised build that benchmarks and wheels use.
#   KEYSHARED_BUILD=dev: a fast-compiling build for working on the Rust code.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
build=${KEYSHARED_BUILD:-release}
case "$build" in
  release) maturin_profile=(--release) ;;
  dev) maturin_profile=(--profile python-dev) ;;
  *) printf '[setup] KEYSHARED_BUILD must be release or dev, got %s\n' "$build" >&2; exit 2 ;;
esac

log() { printf '[setup] %s\n' "$*" >&2; }

fingerprint() { cat "$@" 2>/dev/null | sha256sum | cut -d' ' -f1; }

if ! command -v cargo >/dev/null; then
  log "cargo is missing: install a Rust toolchain (1.95 or newer) first"
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

# A JDK, not just a JRE: Spark runs on it, and javac builds the keyshared jar below.
if ! command -v javac >/dev/null; then
  log "installing the Java 17 JDK for Spark and the keyshared jar"
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo=sudo; fi
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
fi

# Go, for the tests that run Sarama's and kafka-go's partitioners themselves; an older Go
# fetches the toolchain tests/go_partitioners/go.mod names from the Go module proxy.
if ! command -v go >/dev/null; then
  log "installing Go for the Sarama and kafka-go partitioner tests"
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo=sudo; fi
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq golang-go >/dev/null
fi

# The JVM functions (spark_udfs/java), compiled against the jars PySpark ships: no Maven or
# Gradle download. The wheel carries the jar; it is rebuilt when a source or Spark changes.
jar=spark_udfs/jars/keyshared-spark.jar
spark_jars=$("$venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/jars
java_sources=$(find spark_udfs/java -name '*.java' | sort)
want=$( (fingerprint $java_sources; ls "$spark_jars") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$venv/.jar" 2>/dev/null)" != "$want" ] || [ ! -f "$jar" ]; then
  log "building $jar"
  classes=$(mktemp -d)
  trap 'rm -rf "$classes"' EXIT
  javac --release 17 -nowarn -Xlint:-path -cp "$spark_jars/*" -d "$classes" $java_sources
  mkdir -p "$(dirname "$jar")"
  jar --create --file "$jar" -C "$classes" .
  echo "$want" >"$venv/.jar"
fi

# The stub is an input too: the module's docstrings are built from it (rust/bindings/build.rs).
sources=$(find rust -name '*.rs' -o -name Cargo.toml | sort)
want=$( (echo "$build"; fingerprint Cargo.toml Cargo.lock pyproject.toml python/keyshared/_core.pyi $sources) | sha256sum)
if [ "$(cat "$venv/.extension" 2>/dev/null)" != "$want" ] \
  || ! ls python/keyshared/_core*.so >/dev/null 2>&1; then
  log "building the native extension ($build)"
  VIRTUAL_ENV="$PWD/$venv" PATH="$PWD/$venv/bin:$PATH" maturin develop "${maturin_profile[@]}" -q
  echo "$want" >"$venv/.extension"
fi
