#!/usr/bin/env bash
# Builds the Pulsar oracle (oracle/: Pulsar's own classes behind a JSON-lines harness) once per
# Pulsar release the tests compare against, into oracle/target/<version>/. Maven downloads
# Pulsar's released jars from Maven Central into ~/.m2 the first time; a rebuild happens only
# when the harness's sources or pom change. The standalone broker of the end-to-end tests runs
# from the newest release's classpath.
#   scripts/pulsar.sh            # build every release in PULSAR_VERSIONS
set -euo pipefail
cd "$(dirname "$0")/.."
# The newest release Maven Central serves whole, the 4.0 LTS line, and the 5.0 milestone that
# holds the scalable-topic classes (their ops build against it alone: oracle/src/scalable).
versions=${PULSAR_VERSIONS:-"4.2.4 4.0.7 5.0.0-M1"}

log() { printf '[pulsar] %s\n' "$*" >&2; }

if ! command -v mvn >/dev/null; then
  log "installing Maven for the Pulsar oracle"
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo=sudo; fi
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq maven >/dev/null
fi

# One build at a time: test runs started side by side share oracle/target.
mkdir -p oracle/target
exec 9>oracle/target/.lock
flock -w 1800 9 || { log "another build of the oracle held oracle/target/.lock for 30 min"; exit 1; }

sources=$(find oracle/src -type f | sort)
want=$(cat oracle/pom.xml $sources | sha256sum | cut -d' ' -f1)
for version in $versions; do
  target=oracle/target/$version
  if [ "$(cat "$target/.built" 2>/dev/null)" != "$want" ] || [ ! -f "$target/classpath.txt" ]; then
    log "building the oracle on Pulsar $version"
    mvn -q -B -f oracle/pom.xml -Dpulsar.version="$version" package
    echo "$want" >"$target/.built"
  fi
done
