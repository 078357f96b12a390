#!/usr/bin/env bash
# The upstream network-policy suites (tools/conformance): the Kubernetes NetworkPolicy e2e tests and
# agnhost from k8s.io/kubernetes, the network-policy-api conformance suites v0.1 and v0.2, built from
# their Go modules once and cached. `npm test` runs a subset of each on the real cluster; `npm run
# conformance` runs them in full.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(bash "$root/tools/conformance/build/build.sh")
printf '[setup:conformance] suites in %s\n' "$bin" >&2
