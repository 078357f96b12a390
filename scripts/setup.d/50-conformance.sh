#!/usr/bin/env bash
# The upstream network-policy suites (tools/conformance): the Kubernetes NetworkPolicy e2e tests and
# agnhost from k8s.io/kubernetes, the network-policy-api conformance suites, built from their Go
# modules once and cached. `npm test` runs a subset of three of them on the real cluster (netpol,
# npapi-v0.1, npapi-v0.3: SUBSET_SUITES in tools/conformance/src/run.ts), so the set-up builds those
# three; `npm run conformance` builds the fourth (npapi-v0.2) when it first needs it.
# The first build compiles for minutes on two cores, and nothing needs the suites until the cluster
# e2e is well under way, so it runs in the background at the lowest CPU and I/O priority, using what
# the tests leave idle; build.sh holds a lock, and the e2e's call to it waits for the build to finish
# (and re-runs it in the foreground, failing with its error, if it failed).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${CASCADE_CACHE:-$HOME/.cache/cascade}
log() { printf '[setup:conformance] %s\n' "$*" >&2; }
subset=(netpol.test agnhost npapi-v0.1.test npapi-v0.3.test)
if bin=$(CONFORMANCE_CACHED_ONLY=1 bash "$root/tools/conformance/build/build.sh" "${subset[@]}" 2>/dev/null); then
  log "suites in $bin"
  exit 0
fi
# shellcheck source=../lib/background.sh
source "$root/scripts/lib/background.sh"
pid=$(in_background "$cache/conformance/build.log" bash "$root/tools/conformance/build/build.sh" "${subset[@]}")
log "building the suites npm test runs in the background (pid $pid, log $cache/conformance/build.log); the cluster e2e waits for them"
