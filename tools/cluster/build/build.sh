#!/usr/bin/env bash
# Builds what a real single-node cluster needs beyond the envtest API server, once, into
# $CASCADE_CACHE/cluster/<versions>/bin: kubelet, kube-proxy, kube-controller-manager, kube-scheduler
# and kubectl from the k8s.io/kubernetes Go module (the same version as kube-apiserver), CoreDNS (with
# only the plugins in coredns/main.go) and helm from their Go modules, and the pause and e2e workload binaries from tools/cluster/images/*.c. A second run
# finds the binaries and prints the directory.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-v1.34.4}
COREDNS_VERSION=${COREDNS_VERSION:-v1.12.4}
HELM_VERSION=${HELM_VERSION:-v3.19.0}
here=$(cd "$(dirname "$0")" && pwd)
cache=${CASCADE_CACHE:-$HOME/.cache/cascade}
out="$cache/cluster/k8s-$K8S_VERSION-coredns-$COREDNS_VERSION-helm-$HELM_VERSION"
log() { printf '[cluster-build] %s\n' "$*" >&2; }
k8s_bins=(kubelet kube-proxy kube-controller-manager kube-scheduler kubectl)
want=("${k8s_bins[@]}" coredns helm pause cascade-probe)
missing=()
for b in "${want[@]}"; do [[ -x $out/bin/$b ]] || missing+=("$b"); done
# the C programs are rebuilt when their source changes (one second each)
native_sum=$(cat "$here"/../images/*.c | sha256sum | cut -c1-16)
if [[ $(cat "$out/bin/.native-sum" 2>/dev/null) != "$native_sum" ]]; then
  for b in pause cascade-probe; do [[ " ${missing[*]} " == *" $b "* ]] || missing+=("$b"); done
fi
# so is CoreDNS when its plugin list (coredns/main.go) changes
coredns_sum=$(sha256sum "$here/coredns/main.go" | cut -c1-16)
if [[ $(cat "$out/bin/.coredns-sum" 2>/dev/null) != "$coredns_sum" && " ${missing[*]} " != *" coredns "* ]]; then
  missing+=(coredns)
fi
if ((${#missing[@]} == 0)); then
  log "binaries cached in $out/bin"
  echo "$out/bin"
  exit 0
fi
# shellcheck source=../../envtest/build/lib.sh
source "$here/../../envtest/build/lib.sh"
go_build_setup cluster-build "$out" "${missing[@]}"

need() { [[ " ${missing[*]} " == *" $1 "* ]]; }

kube_missing=()
for b in "${k8s_bins[@]}"; do need "$b" && kube_missing+=("$b"); done
if ((${#kube_missing[@]})); then
  log "building ${kube_missing[*]} $K8S_VERSION (first time only; takes minutes)"
  src="$out/src/kube"
  pkgs=()
  for b in "${kube_missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  k8s_module "$src" cluster-kube "$K8S_VERSION"
  # kubectl's commands live in their own staging module
  imports=("${pkgs[@]}")
  if [[ " ${kube_missing[*]} " == *" kubectl "* ]]; then imports+=(k8s.io/kubectl/pkg/cmd); fi
  printf '%s\n' "${imports[@]}" | tool_module "$src" cluster-kube
  (cd "$src" && go build -trimpath -ldflags="$(k8s_ldflags "$K8S_VERSION")" -o "$out/bin/" "${pkgs[@]}")
fi

if need coredns; then
  log "building coredns $COREDNS_VERSION with the plugins in tools/cluster/build/coredns/main.go"
  src="$out/src/coredns"
  rm -rf "$src/coredns" && mkdir -p "$src/coredns"
  cp "$here/coredns/main.go" "$src/coredns/main.go"
  tool_module "$src" cluster-coredns github.com/coredns/coredns "$COREDNS_VERSION" <<<"github.com/coredns/coredns/coremain"
  # the version CoreDNS reports (-version, the build_info metric)
  (cd "$src" && go build -trimpath -ldflags="-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" \
    -o "$out/bin/coredns" ./coredns)
  echo "$coredns_sum" > "$out/bin/.coredns-sum"
fi

if need helm; then
  log "building helm $HELM_VERSION"
  src="$out/src/helm"
  tool_module "$src" cluster-helm helm.sh/helm/v3 "$HELM_VERSION" <<<"helm.sh/helm/v3/cmd/helm"
  (cd "$src"
    # the Kubernetes version helm assumes without a cluster (template, lint): its client-go's, as its Makefile sets it
    minor=$(go list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2)
    x="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
    for p in pkg/lint/rules pkg/chartutil; do x="$x -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=$minor"; done
    go build -trimpath -ldflags="-s -w $x" -o "$out/bin/helm" helm.sh/helm/v3/cmd/helm)
fi

if need pause; then
  log "building pause from tools/cluster/images/pause.c"
  gcc -Os -static -Wall -Werror -o "$out/bin/pause" "$here/../images/pause.c"
  strip "$out/bin/pause"
fi
if need cascade-probe; then
  log "building cascade-probe (the e2e workload) from tools/cluster/images/probe.c and probe-hold.c"
  gcc -Os -static -Wall -Werror -o "$out/bin/cascade-probe" "$here/../images/probe.c" "$here/../images/probe-hold.c"
  strip "$out/bin/cascade-probe"
fi
echo "$native_sum" > "$out/bin/.native-sum"
log "built into $out/bin"
echo "$out/bin"
