#!/usr/bin/env bash
# The Kubernetes build set: every Go binary this project builds from the Kubernetes module family, in
# one throwaway module with one build list, cached in $CASCADE_CACHE/kube-set/<versions>/bin:
#   kube-apiserver, etcd                                    the API server (envtest and the cluster)
#   kubelet, kube-proxy, kube-controller-manager,
#   kube-scheduler, kubectl, coredns, helm                  the cluster (tools/cluster)
#   agnhost, netpol.test                                    the upstream NetworkPolicy suite (tools/conformance)
# Built in separate modules, each tool resolved its own versions of what they all link (grpc,
# protobuf, golang.org/x/net, client-go, etcd's client), and a fresh machine compiled each of those
# once per tool. In one module a shared package is compiled once, and the binaries a caller asks for
# come from one `go build`, which keeps both cores busy while the largest ones link.
# Kubernetes' own modules (its staging repositories) stay pinned at K8S_VERSION by `replace`; every
# other module is the highest version any of the tools requires (Go's minimal version selection), so
# a binary may link a newer grpc or x/net than its own release pins (`go version -m BINARY` lists
# them). The directory's name carries every version, so changing one rebuilds the set.
# Usage: kube-set.sh NAME... builds what is missing of NAME... and prints the directory. Whoever needs
# a binary already built reads it without the lock; one build runs at a time and a second waits.
# kube-set.sh --module resolves the set's module without building and prints its directory: the Go
# tools built beside the set (lib.sh align_to_kube_set) take its build list.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-v1.34.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.5}
COREDNS_VERSION=${COREDNS_VERSION:-v1.12.4}
HELM_VERSION=${HELM_VERSION:-v3.19.0}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cache=${CASCADE_CACHE:-$HOME/.cache/cascade}
out="$cache/kube-set/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-coredns-$COREDNS_VERSION-helm-$HELM_VERSION"
log() { printf '[kube-set] %s\n' "$*" >&2; }
# the sources of this project's own two packages in the module: CoreDNS's plugin list, and the
# NetworkPolicy suite's entry point; a change rebuilds the binary made from it
coredns_main="$root/tools/cluster/build/coredns/main.go"
netpol_main="$root/tools/conformance/build/netpol_test.go"
sum() { sha256sum "$1" | cut -c1-16; }
declare -A source_of=([coredns]=$coredns_main [netpol.test]=$netpol_main)
missing_of() {
  local b
  for b in "$@"; do
    if [[ ! -x $out/bin/$b ]]; then echo "$b"; continue; fi
    if [[ -n ${source_of[$b]:-} && $(cat "$out/bin/.$b.sum" 2>/dev/null) != $(sum "${source_of[$b]}") ]]; then echo "$b"; fi
  done
}
# every binary of the set and the package it is built from (netpol.test: `go test -c` of ./netpol)
declare -A package_of=(
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver [kubelet]=k8s.io/kubernetes/cmd/kubelet
  [kube-proxy]=k8s.io/kubernetes/cmd/kube-proxy [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler [kubectl]=k8s.io/kubernetes/cmd/kubectl
  [etcd]=go.etcd.io/etcd/server/v3 [coredns]=./coredns [helm]=helm.sh/helm/v3/cmd/helm
  [agnhost]=k8s.io/kubernetes/test/images/agnhost [netpol.test]=./netpol
)
(($#)) || { echo "usage: kube-set.sh NAME... | --module" >&2; exit 2; }
module_only=0
if [[ $1 == --module ]]; then
  module_only=1
  shift
  (($# == 0)) || { echo "kube-set: --module takes no binary names" >&2; exit 2; }
fi
for b in "$@"; do
  [[ -n ${package_of[$b]:-} ]] || { echo "kube-set: no binary named $b in the set (have: ${!package_of[*]})" >&2; exit 2; }
done
if ((!module_only)) && [[ -z $(missing_of "$@") ]]; then
  log "$* cached in $out/bin"
  echo "$out/bin"
  exit 0
fi
mkdir -p "$out"
exec 9>"$out/.lock"
if ! flock -n 9; then
  log "another build of the set is running: waiting"
  flock 9
fi
mapfile -t missing < <(missing_of "$@")
if ((!module_only && ${#missing[@]} == 0)); then
  log "$* cached in $out/bin"
  echo "$out/bin"
  exit 0
fi
# shellcheck source=lib.sh
source "$here/lib.sh"
go_build_setup kube-set "$out" "${missing[@]}"

# The module: requirements, staging replaces, the two local packages and a tools.go importing every
# command; tidied once per change of any of them (the stamp is their checksum).
src="$out/src"
mkdir -p "$src/coredns" "$src/netpol"
cp "$coredns_main" "$src/coredns/main.go"
cp "$netpol_main" "$src/netpol/netpol_test.go"
# the commands' packages (the local ones, ./coredns and ./netpol, are in the module already), kubectl's
# commands in their own staging module, and what netpol_test.go imports
mapfile -t imports < <(printf '%s\n' "${package_of[@]}" | grep -v '^\./' | sort)
imports+=(k8s.io/kubectl/pkg/cmd k8s.io/kubernetes/test/e2e/network/netpol k8s.io/kubernetes/test/e2e/framework)
module_sum=$(printf '%s\n' "$K8S_VERSION" "$ETCD_VERSION" "$COREDNS_VERSION" "$HELM_VERSION" "${imports[@]}" |
  cat - "$src/coredns/main.go" "$src/netpol/netpol_test.go" | sha256sum | cut -c1-16)
if [[ $(cat "$src/.tidy-sum" 2>/dev/null) != "$module_sum" ]]; then
  log "resolving one build list for the set (Kubernetes $K8S_VERSION, etcd $ETCD_VERSION, CoreDNS $COREDNS_VERSION, helm $HELM_VERSION)"
  k8s_module "$src" kube-set "$K8S_VERSION"
  printf 'require go.etcd.io/etcd/server/v3 %s\nrequire github.com/coredns/coredns %s\nrequire helm.sh/helm/v3 %s\n' \
    "$ETCD_VERSION" "$COREDNS_VERSION" "$HELM_VERSION" >> "$src/go.mod"
  printf '%s\n' "${imports[@]}" | tool_module "$src" kube-set
  # tool_module's tidy is forgiving (-e); here an unresolved import is an error worth seeing now
  (cd "$src" && go list -mod=readonly -deps -test ./coredns ./netpol "${imports[@]}" >/dev/null)
  echo "$module_sum" > "$src/.tidy-sum"
fi
if ((module_only)); then
  echo "$src"
  exit 0
fi

# One `go build` of every command asked for. -X of a symbol a binary does not link is ignored, so
# one set of flags serves all: the version Kubernetes' binaries report (clients such as helm check
# it), CoreDNS's (-version, the build_info metric), and helm's own and the Kubernetes version it
# assumes without a cluster (template, lint), its client-go's, as helm's Makefile sets it.
need() { [[ " ${missing[*]} " == *" $1 "* ]]; }
ldflags=$(k8s_ldflags "$K8S_VERSION")
ldflags+=" -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION"
minor=$(cd "$src" && go list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2)
ldflags+=" -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for p in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=$minor"
done
pkgs=()
for b in "${missing[@]}"; do
  [[ $b == netpol.test ]] || pkgs+=("${package_of[$b]}")
done
tmp="$out/bin.tmp"
rm -rf "$tmp" && mkdir -p "$tmp" "$out/bin"
if ((${#pkgs[@]})); then
  log "building ${pkgs[*]##*/} (one go build; on a fresh machine, minutes)"
  (cd "$src" && go build -mod=readonly -trimpath -ldflags="$ldflags" -o "$tmp/" "${pkgs[@]}")
  # go names a command after its path's last element that is not a major version: etcd's is server
  [[ -f $tmp/server ]] && mv "$tmp/server" "$tmp/etcd"
fi
if need netpol.test; then
  log "building netpol.test (the NetworkPolicy e2e tests with the e2e framework)"
  # -vet=off: `go test -c` vets every package the test links, dependencies included (with the
  # conformance suites' builds, 1,555 vet runs and 40 s of CPU in a fresh npm test); these are
  # upstream's tests, built to be run, not checked
  (cd "$src" && go test -c -vet=off -mod=readonly -trimpath -ldflags="$ldflags" -o "$tmp/netpol.test" "${package_of[netpol.test]}")
fi
for b in "${missing[@]}"; do
  [[ -x $tmp/$b ]] || { echo "kube-set: $b was not built" >&2; exit 1; }
  mv -f "$tmp/$b" "$out/bin/$b"
  if [[ -n ${source_of[$b]:-} ]]; then sum "${source_of[$b]}" > "$out/bin/.$b.sum"; fi
done
rm -rf "$tmp"
log "built into $out/bin"
echo "$out/bin"
