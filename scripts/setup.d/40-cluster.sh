#!/usr/bin/env bash
# The real cluster's parts (tools/cluster) that are built: kubelet, kube-proxy, kube-controller-manager,
# kube-scheduler, kubectl, CoreDNS and helm (the Kubernetes build set, step 18), flannel from its Go
# module, pause and the e2e probe from C; the Debian packages come from step 16. All cached.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
log() { printf '[setup:cluster] %s\n' "$*" >&2; }
bin=$(bash "$root/tools/cluster/build/build.sh")
# flanneld and the flannel CNI plugin: the three-node cluster's CNI (up --cni flannel, its default).
# Nothing needs them until npm test's three-node phase, well into the run: a first build (about 4
# minutes on two cores) runs in the background at the lowest CPU and I/O priority, as the upstream
# suites' does; flannel.sh holds a lock, and the cluster's call to it waits for that build.
flannel=$(FLANNEL_PATH_ONLY=1 bash "$root/tools/cluster/build/flannel.sh")
if [[ ! -x $flannel/flanneld || ! -x $flannel/flannel ]]; then
  # shellcheck source=../lib/background.sh
  source "$root/scripts/lib/background.sh"
  flannel_log=${CASCADE_CACHE:-$HOME/.cache/cascade}/cluster/flannel-build.log
  pid=$(in_background "$flannel_log" bash "$root/tools/cluster/build/flannel.sh")
  log "building flannel in the background (pid $pid, log $flannel_log); the three-node cluster waits for it"
fi
mkdir -p "$root/tools/cluster/.local"
printf '{"bin":"%s","flannel":"%s"}\n' "$bin" "$flannel" > "$root/tools/cluster/.local/paths.json"
log "binaries in $bin and $flannel"
