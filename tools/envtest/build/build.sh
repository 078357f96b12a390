#!/usr/bin/env bash
# The envtest API server's binaries: kube-apiserver (from the k8s.io/kubernetes Go module) and etcd
# (from its Go module), built once as part of the Kubernetes build set (kube-set.sh: one module, one
# build list with the cluster's binaries). Prints the directory that holds them; a second run finds
# them and does nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec bash "$here/kube-set.sh" kube-apiserver etcd
