#!/usr/bin/env bash
# Builds the upstream network-policy test suites, once, into $CASCADE_CACHE/conformance/<versions>/bin:
#   netpol.test     the Kubernetes NetworkPolicy e2e tests (k8s.io/kubernetes test/e2e/network/netpol)
#                   with the e2e framework, same version as the cluster
#   agnhost         their workload binary (k8s.io/kubernetes test/images/agnhost)
#                   (these two come from the Kubernetes build set, tools/envtest/build/kube-set.sh)
#   npapi-v0.1.test the network-policy-api conformance suite for AdminNetworkPolicy and
#                   BaselineAdminNetworkPolicy (sigs.k8s.io/network-policy-api v0.1.x)
#   npapi-v0.2.test the same suite at v0.2.x (ClusterNetworkPolicy v1alpha2)
#   npapi-v0.3.test the same suite at v0.3.x (ClusterNetworkPolicy v1beta1; conformance profiles and
#                   their report)
# This machine's kernel has no SCTP: the network-policy-api suite's base workloads include SCTP servers
# (agnhost porter with SERVE_SCTP_PORT_*), which exit when they cannot listen, so no base pod would
# ever be Ready and no test could run. The suite is built with those two variables renamed (the
# servers stay up, serving TCP/UDP) and its SCTP tests are skipped by the runner, saying why.
# Set NPAPI_KEEP_SCTP=1 on a kernel with SCTP to build it unchanged.
# On one node (the default, CONFORMANCE_NODES=1) the suite's host-network StatefulSet (centaur, 2
# replicas binding the same ports), the server of the node-peer tests only, cannot roll out, and the
# set-up waits for two ready replicas of every StatefulSet. It is built without that StatefulSet (and
# the set-up does not wait for it); the node-peer tests are skipped by the runner, saying why. With
# CONFORMANCE_NODES=2 or more (npm run conformance -- --nodes 3) the suite is built unchanged but for
# SCTP, into a directory of its own.
# A second run finds them and prints the directory. One build runs at a time (a lock in the cache);
# a second caller waits for it.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-v1.34.4}
NPAPI_V1=${NPAPI_V1:-v0.1.7}
NPAPI_V2=${NPAPI_V2:-v0.2.0}
# a binary's name says its line (v0.3); the version is pinned here, not in the directory's name, so
# adding a line builds only that binary in a warm cache
NPAPI_V3=${NPAPI_V3:-v0.3.0}
here=$(cd "$(dirname "$0")" && pwd)
cache=${CASCADE_CACHE:-$HOME/.cache/cascade}
sctp=$([[ ${NPAPI_KEEP_SCTP:-} == 1 ]] && echo sctp || echo nosctp)
multinode=$([[ ${CONFORMANCE_NODES:-1} -gt 1 ]] && echo 1 || echo 0)
# -rN: the recipe's revision (r3: the suites take the build set's build list)
out="$cache/conformance/k8s-$K8S_VERSION-npapi-$NPAPI_V1-$NPAPI_V2-$sctp-1node-r3"
((multinode)) && out="$cache/conformance/k8s-$K8S_VERSION-npapi-$NPAPI_V1-$NPAPI_V2-$sctp-nnode-r2"
log() { printf '[conformance-build] %s\n' "$*" >&2; }
# build.sh BINARY... builds only those (npm test's subsets need netpol.test, agnhost, npapi-v0.1.test
# and npapi-v0.3.test: tools/conformance/src/run.ts SUBSET_SUITES); no argument builds every one.
all=(netpol.test agnhost npapi-v0.1.test npapi-v0.2.test npapi-v0.3.test)
want=("$@")
((${#want[@]})) || want=("${all[@]}")
for b in "${want[@]}"; do
  [[ " ${all[*]} " == *" $b "* ]] || { echo "conformance-build: no suite binary named $b (have: ${all[*]})" >&2; exit 2; }
done
missing_of() { local b; for b in "${want[@]}"; do [[ -x $out/bin/$b ]] || echo "$b"; done; }
# What is built is read without the lock: a binary appears only once whole (built aside, then moved)
if [[ -z $(missing_of) ]]; then
  log "${want[*]} cached in $out/bin"
  echo "$out/bin"
  exit 0
fi
# CONFORMANCE_CACHED_ONLY=1: only say whether they are built (the set-up's check before it starts a build)
[[ ${CONFORMANCE_CACHED_ONLY:-} == 1 ]] && exit 3
# One build at a time: the set-up starts one in the background (scripts/setup.d/50-conformance.sh), and
# whoever needs a suite it has not built yet (npm test's cluster e2e, npm run conformance) waits here
mkdir -p "$cache/conformance"
exec 9>"$cache/conformance/.build.lock"
if ! flock -n 9; then
  log "the suites are being built (by the set-up, in the background; its log: $cache/conformance/build.log): waiting"
  flock 9
fi
mapfile -t missing < <(missing_of)
if ((${#missing[@]} == 0)); then
  log "${want[*]} cached in $out/bin"
  echo "$out/bin"
  exit 0
fi
# shellcheck source=../../envtest/build/lib.sh
source "$here/../../envtest/build/lib.sh"
go_build_setup conformance-build "$out" "${missing[@]}"
need() { [[ " ${missing[*]} " == *" $1 "* ]]; }

if need netpol.test || need agnhost; then
  # the Kubernetes suite and agnhost are part of the Kubernetes build set (one module and build list
  # with the cluster's binaries, so what they share is compiled once), the same for any node count:
  # linked from there
  log "building the NetworkPolicy e2e tests and agnhost $K8S_VERSION (first time only; takes minutes)"
  set_bin=$(K8S_VERSION=$K8S_VERSION bash "$here/../../envtest/build/kube-set.sh" netpol.test agnhost)
  for b in netpol.test agnhost; do
    ln -f "$set_bin/$b" "$out/bin/$b.tmp" 2>/dev/null || cp -f "$set_bin/$b" "$out/bin/$b.tmp"
    mv -f "$out/bin/$b.tmp" "$out/bin/$b"
  done
fi

for pair in "npapi-v0.1.test:$NPAPI_V1" "npapi-v0.2.test:$NPAPI_V2" "npapi-v0.3.test:$NPAPI_V3"; do
  bin=${pair%%:*} version=${pair#*:}
  need "$bin" || continue
  log "building the network-policy-api conformance suite $version"
  src="$out/src/${bin%.test}"
  rm -rf "$src" && mkdir -p "$src"
  module=$(cd "$src" && go mod download -json "sigs.k8s.io/network-policy-api@$version" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  cp -r "$module" "$src/module" && chmod -R u+w "$src/module"
  if [[ $sctp == nosctp ]]; then
    sed -i 's/SERVE_SCTP_PORT_/NO_SCTP_IN_THIS_KERNEL_PORT_/' "$src"/module/conformance/base/*.yaml
  fi
  if ((!multinode)); then
    perl -0pi -e 's/\n---\napiVersion: apps\/v1\nkind: StatefulSet\nmetadata:\n  name: centaur\n(?:(?!\n---\n).)*//s' \
      "$src/module/conformance/base/manifests.yaml"
    perl -0pi -e 's/\n\s*"network-policy-conformance-forbidden-forrest",//; s/\n\s*"centaur",//' \
      "$src/module/conformance/utils/suite/suite.go"
    if grep -q 'name: centaur$' "$src/module/conformance/base/manifests.yaml" ||
      grep -q '"centaur"' "$src/module/conformance/utils/suite/suite.go"; then
      echo "conformance-build: could not take the two-node fixture (centaur) out" >&2
      exit 1
    fi
  fi
  # the wrapper module's go line: the suite's own (v0.3.0 wants 1.26.6), at least 1.24
  gover=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$src/module/go.mod")
  [[ $(printf '%s\n1.24\n' "$gover" | sort -V | head -1) == 1.24 ]] || gover=1.24
  printf 'module cascade.dev/%s\ngo %s\nrequire sigs.k8s.io/network-policy-api %s\nreplace sigs.k8s.io/network-policy-api => ./module\n' \
    "conformance-${bin%.test}" "$gover" "$version" > "$src/go.mod"
  # A suite whose client-go is no newer than the Kubernetes build set's (v0.1.7 pins v0.33) is built on
  # the set's build list (lib.sh align_to_kube_set): the set's client-go is the cluster's own, the
  # suite only creates, reads and deletes objects through typed clients that client-go keeps
  # compatible, and a fresh machine then compiles client-go and its kin once, not again for the suite
  # (about 90 s of CPU). A suite on a newer Kubernetes (v0.3.0 pins v0.36) keeps its own build list:
  # the set would lower its libraries.
  suite_client_go=$(awk '$1 == "k8s.io/client-go" { print $2 }' "$src/module/go.mod")
  kube_set_list "$src"
  aligned=0
  if [[ -n $suite_client_go && $(printf '%s\n%s\n' "$suite_client_go" "$(kube_set_version "$src" k8s.io/client-go)" | sort -V | head -1) == "$suite_client_go" ]]; then
    align_to_kube_set "$src"
    aligned=1
  fi
  tool_module "$src" "conformance-${bin%.test}" <<<"sigs.k8s.io/network-policy-api/conformance/tests"
  if ((aligned)); then
    differ=$(kube_set_differences "$src" sigs.k8s.io/network-policy-api/conformance)
    [[ -z $differ ]] || log "$bin takes newer versions than the build set of (compiled for it alone): ${differ//$'\n'/; }"
  fi
  # -vet=off: upstream's suite, built to be run; vetting it vets every package it links
  (cd "$src" && go test -c -vet=off -trimpath -ldflags='-s -w' -o "$out/bin/$bin.tmp" sigs.k8s.io/network-policy-api/conformance)
  mv -f "$out/bin/$bin.tmp" "$out/bin/$bin"
done
log "suites built in $out/bin"
echo "$out/bin"
