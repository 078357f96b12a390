#!/usr/bin/env bash
# The real single-node cluster's parts (tools/cluster): containerd, runc, the CNI plugins, iptables,
# conntrack and openssl from Debian; kubelet, kube-proxy, kube-controller-manager, kube-scheduler,
# kubectl, CoreDNS and helm from their Go modules; pause and the e2e probe from C. All cached; the
# first build runs in the background.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
log() { printf '[setup:cluster] %s\n' "$*" >&2; }
need=()
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
command -v iptables >/dev/null || need+=(iptables)
command -v conntrack >/dev/null || need+=(conntrack)
command -v openssl >/dev/null || need+=(openssl)
[[ -f /etc/ssl/certs/ca-certificates.crt ]] || need+=(ca-certificates)
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]]; then log "missing ${need[*]} and not root: the cluster cannot run here"; exit 0; fi
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# The first build compiles for about 6 minutes on two cores and nothing needs the binaries until the
# cluster e2e starts, so it runs in the background (a little below the tests' priority) while the
# unit and integration tests run; build.sh holds a lock, and the e2e's call to it (harness.ts
# clusterBin) waits for it to finish (and builds in the foreground, failing with its error, if it
# failed).
cache=${CASCADE_CACHE:-$HOME/.cache/cascade}
if bin=$(CLUSTER_CACHED_ONLY=1 bash "$root/tools/cluster/build/build.sh" 2>/dev/null); then
  log "binaries in $bin"
else
  mkdir -p "$cache/cluster"
  setsid nice -n 5 bash "$root/tools/cluster/build/build.sh" </dev/null >"$cache/cluster/build.log" 2>&1 &
  log "building the binaries into $bin in the background (pid $!, log $cache/cluster/build.log); the cluster e2e waits for them"
fi
mkdir -p "$root/tools/cluster/.local"
printf '{"bin":"%s"}\n' "$bin" > "$root/tools/cluster/.local/paths.json"
