#!/usr/bin/env bash
# The Kubernetes build set's binaries that npm test needs from its start (tools/envtest/build/kube-set.sh):
# the API server's (kube-apiserver, etcd) and the cluster's (kubelet, kube-proxy,
# kube-controller-manager, kube-scheduler, kubectl, CoreDNS, helm), in one go build: one module and
# one build list, so what they share is compiled once and both cores stay busy while the largest link.
# The envtest and cluster steps after it find them built. Cached: a second run does nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bash "$root/tools/envtest/build/kube-set.sh" kube-apiserver etcd kubelet kube-proxy kube-controller-manager \
  kube-scheduler kubectl coredns helm >/dev/null
