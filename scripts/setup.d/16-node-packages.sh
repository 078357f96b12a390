#!/usr/bin/env bash
# The real cluster's Debian packages (tools/cluster): containerd, runc, the CNI plugins, iptables,
# conntrack, openssl and the CA certificates. A step of its own, before the Kubernetes build set's
# (18), so that downloading and unpacking them overlaps that build (scripts/setup.sh). Installed once.
set -euo pipefail
log() { printf '[setup:node-packages] %s\n' "$*" >&2; }
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
