#!/usr/bin/env bash
# Builds kube-apiserver (from the k8s.io/kubernetes Go module) and etcd (from its Go module) into
# $CASCADE_CACHE/envtest/<versions>/bin, once. A second run finds the binaries and does nothing.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-v1.34.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.5}
here=$(cd "$(dirname "$0")" && pwd)
cache=${CASCADE_CACHE:-$HOME/.cache/cascade}
# -r2: kube-apiserver carries its version (ldflags), which clients such as helm check
out="$cache/envtest/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-r2"
log() { printf '[envtest] %s\n' "$*" >&2; }
if [[ -x $out/bin/kube-apiserver && -x $out/bin/etcd ]]; then
  log "binaries cached in $out/bin"
  echo "$out/bin"
  exit 0
fi
# shellcheck source=lib.sh
source "$here/lib.sh"
go_build_setup envtest "$out" kube-apiserver etcd

if [[ ! -x $out/bin/kube-apiserver ]]; then
  log "building kube-apiserver $K8S_VERSION (first time only; takes minutes)"
  src="$out/src/kube"
  k8s_module "$src" envtest-kube "$K8S_VERSION"
  tool_module "$src" envtest-kube <<<"k8s.io/kubernetes/cmd/kube-apiserver"
  (cd "$src" && go build -trimpath -ldflags="$(k8s_ldflags "$K8S_VERSION")" -o "$out/bin/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
fi

if [[ ! -x $out/bin/etcd ]]; then
  log "building etcd $ETCD_VERSION (first time only)"
  src="$out/src/etcd"
  tool_module "$src" envtest-etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" <<<"go.etcd.io/etcd/server/v3"
  (cd "$src" && go build -trimpath -ldflags='-s -w' -o "$out/bin/etcd" go.etcd.io/etcd/server/v3)
fi
log "built into $out/bin"
echo "$out/bin"
