#!/usr/bin/env bash
# Builds SIG Network's kube-network-policies (sigs.k8s.io/kube-network-policies, its Go module: the
# binary its image runs as /bin/netpol) for `npm run cluster -- up --netpol kube-network-policies`,
# once, into $CASCADE_CACHE/cluster/kube-network-policies-<version>/bin. Static, as its Dockerfile
# builds it (CGO_ENABLED=0). A second run finds the binary and prints the directory.
set -euo pipefail
KNP_VERSION=${KNP_VERSION:-v0.8.0}
here=$(cd "$(dirname "$0")" && pwd)
cache=${CASCADE_CACHE:-$HOME/.cache/cascade}
out="$cache/cluster/kube-network-policies-$KNP_VERSION"
log() { printf '[knp-build] %s\n' "$*" >&2; }
if [[ -x $out/bin/netpol ]]; then
  log "binary cached in $out/bin"
  echo "$out/bin"
  exit 0
fi
# shellcheck source=../../envtest/build/lib.sh
source "$here/../../envtest/build/lib.sh"
go_build_setup knp-build "$out" netpol
log "building kube-network-policies $KNP_VERSION (first time only; about a minute)"
src="$out/src"
tool_module "$src" cluster-knp sigs.k8s.io/kube-network-policies "$KNP_VERSION" <<<"sigs.k8s.io/kube-network-policies/cmd"
(cd "$src" && go build -trimpath -ldflags="-s -w" -o "$out/bin/netpol.tmp" sigs.k8s.io/kube-network-policies/cmd)
mv "$out/bin/netpol.tmp" "$out/bin/netpol"
# its manifest (the DaemonSet, ServiceAccount and RBAC the harness applies, with the image built here)
cp "$(cd "$src" && go list -m -f '{{.Dir}}' sigs.k8s.io/kube-network-policies)/install-anp.yaml" "$out/bin/install-anp.yaml"
chmod 644 "$out/bin/install-anp.yaml"
log "built into $out/bin"
echo "$out/bin"
