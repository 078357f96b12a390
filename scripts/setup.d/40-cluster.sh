#!/usr/bin/env bash
# The real single-node cluster's parts (tools/cluster): containerd, runc, the CNI plugins, iptables,
# conntrack and openssl from Debian; kubelet, kube-proxy, kube-controller-manager, kube-scheduler,
# kubectl, CoreDNS, helm and flannel from their Go modules; pause and the e2e probe from C. All cached.
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
