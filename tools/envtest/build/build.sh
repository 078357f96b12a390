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
[[ -x /usr/local/go/bin/go ]] && export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "envtest: go is required to build kube-apiserver" >&2; exit 1; }
mkdir -p "$out/bin" "$out/src"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

if [[ ! -x $out/bin/kube-apiserver ]]; then
  log "building kube-apiserver $K8S_VERSION (first time only; takes minutes)"
  src="$out/src/kube"
  mkdir -p "$src"
  gomod=$(cd "$src" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  staging_version="v0${K8S_VERSION#v1}"
  {
    echo "module cascade.dev/envtest-kube"
    echo "go 1.24"
    echo "require k8s.io/kubernetes $K8S_VERSION"
    # Every staging module that k8s.io/kubernetes replaces with ./staging/... comes from its own module.
    sed -n 's#^\s*\(k8s\.io/[a-z0-9-]*\) => ./staging/src/.*#replace \1 => \1 '"$staging_version"'#p' "$gomod"
  } > "$src/go.mod"
  cat > "$src/tools.go" <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
  (cd "$src" && go mod tidy -e >/dev/null 2>&1 || true; go build -trimpath -ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)" -o "$out/bin/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
fi

if [[ ! -x $out/bin/etcd ]]; then
  log "building etcd $ETCD_VERSION (first time only)"
  src="$out/src/etcd"
  mkdir -p "$src"
  printf 'module cascade.dev/envtest-etcd\ngo 1.24\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > "$src/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > "$src/tools.go"
  (cd "$src" && go mod tidy -e >/dev/null 2>&1 || true; go build -trimpath -ldflags='-s -w' -o "$out/bin/etcd" go.etcd.io/etcd/server/v3)
fi
log "built into $out/bin"
echo "$out/bin"
