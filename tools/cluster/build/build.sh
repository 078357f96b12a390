#!/usr/bin/env bash
# Builds what a real single-node cluster needs beyond the envtest API server, once, and prints the
# directory that holds it:
#   kubelet, kube-proxy, kube-controller-manager, kube-scheduler and kubectl from the k8s.io/kubernetes
#   Go module (the same version as kube-apiserver), CoreDNS (with only the plugins in coredns/main.go)
#   and helm from their Go modules: all part of the Kubernetes build set
#   (tools/envtest/build/kube-set.sh: one module, one build list, one go build);
#   pause and the e2e workload (cascade-probe) from tools/cluster/images/*.c, into the same directory,
#   rebuilt when their source changes (a second each).
# A second run finds the binaries and prints the directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log() { printf '[cluster-build] %s\n' "$*" >&2; }
bin=$(bash "$here/../../envtest/build/kube-set.sh" kubelet kube-proxy kube-controller-manager kube-scheduler kubectl coredns helm)
native_sum=$(cat "$here"/../images/*.c | sha256sum | cut -c1-16)
if [[ ! -x $bin/pause || ! -x $bin/cascade-probe || $(cat "$bin/.native-sum" 2>/dev/null) != "$native_sum" ]]; then
  log "building pause and cascade-probe (the e2e workload) from tools/cluster/images/*.c"
  tmp=$(mktemp -d "$bin/.native.XXXXXX")
  gcc -Os -static -Wall -Werror -o "$tmp/pause" "$here/../images/pause.c"
  gcc -Os -static -Wall -Werror -o "$tmp/cascade-probe" "$here/../images/probe.c" "$here/../images/probe-hold.c"
  strip "$tmp/pause" "$tmp/cascade-probe"
  mv -f "$tmp/pause" "$tmp/cascade-probe" "$bin/"
  rmdir "$tmp"
  echo "$native_sum" > "$bin/.native-sum"
fi
log "binaries in $bin"
echo "$bin"
