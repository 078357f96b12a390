#!/usr/bin/env bash
# Builds flannel for `npm run cluster -- up --cni flannel`, once, into
# $CASCADE_CACHE/cluster/flannel-<versions>/bin:
#   flanneld  from github.com/flannel-io/flannel (its Go module, the daemon kube-flannel.yml runs);
#   flannel   the CNI plugin a flannel node chains (reads flanneld's subnet.env, delegates to bridge
#             + host-local). Its own module (github.com/flannel-io/cni-plugin) is not served by the Go
#             module proxy here (403), so it comes from github.com/containernetworking/plugins
#             v0.9.1, the last release that carried it, the same code the flannel project took over.
# bridge, host-local and portmap come from Debian's containernetworking-plugins (scripts/setup.d/16-node-packages.sh).
# A second run finds the binaries and prints the directory.
set -euo pipefail
FLANNEL_VERSION=${FLANNEL_VERSION:-v0.28.10}
FLANNEL_CNI_MODULE_VERSION=${FLANNEL_CNI_MODULE_VERSION:-v0.9.1}
here=$(cd "$(dirname "$0")" && pwd)
cache=${CASCADE_CACHE:-$HOME/.cache/cascade}
out="$cache/cluster/flannel-$FLANNEL_VERSION-cni-$FLANNEL_CNI_MODULE_VERSION"
log() { printf '[flannel-build] %s\n' "$*" >&2; }
# FLANNEL_PATH_ONLY=1: where the binaries are (or will be), built or not
if [[ ${FLANNEL_PATH_ONLY:-} == 1 ]]; then
  echo "$out/bin"
  exit 0
fi
cached() { [[ -x $out/bin/flanneld && -x $out/bin/flannel ]]; }
if cached; then
  log "binaries cached in $out/bin"
  echo "$out/bin"
  exit 0
fi
# The set-up starts the first build in the background (scripts/setup.d/40-cluster.sh): whoever needs
# flannel (the three-node cluster) waits here for it, then finds the binaries, or builds them itself
# (failing with the build's error) when that build failed.
mkdir -p "$cache/cluster"
exec 9>"$cache/cluster/.flannel-build.lock"
if ! flock -n 9; then
  log "flannel is being built (by the set-up, in the background; its log: $cache/cluster/flannel-build.log): waiting"
  flock 9
fi
if cached; then
  log "binaries cached in $out/bin"
  echo "$out/bin"
  exit 0
fi
# shellcheck source=../../envtest/build/lib.sh
source "$here/../../envtest/build/lib.sh"
go_build_setup flannel-build "$out" flanneld flannel

if [[ ! -x $out/bin/flanneld ]]; then
  log "building flanneld $FLANNEL_VERSION (first time only; about a minute)"
  src="$out/src/flanneld"
  tool_module "$src" cluster-flanneld github.com/flannel-io/flannel "$FLANNEL_VERSION" <<<"github.com/flannel-io/flannel"
  # flanneld links every backend; its tencentvpc backend's SDK (v1.3.188) is refused by the Go module
  # proxy here (403), so the newest version it serves of that SDK stands in (it compiles against it;
  # the tencentvpc backend is never used here: vxlan is)
  (cd "$src" && go mod edit -replace \
    "github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc=github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc@v1.0.1100" &&
    { go mod tidy -e >/dev/null 2>&1 || true; })
  # cgo, as flannel's Makefile builds it: the udp backend is C
  (cd "$src" && CGO_ENABLED=1 go build -trimpath \
    -ldflags="-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$FLANNEL_VERSION" \
    -o "$out/bin/flanneld.tmp" github.com/flannel-io/flannel)
  mv "$out/bin/flanneld.tmp" "$out/bin/flanneld"
fi

if [[ ! -x $out/bin/flannel ]]; then
  log "building the flannel CNI plugin (containernetworking/plugins $FLANNEL_CNI_MODULE_VERSION)"
  src="$out/src/flannel-cni"
  tool_module "$src" cluster-flannel-cni github.com/containernetworking/plugins "$FLANNEL_CNI_MODULE_VERSION" \
    <<<"github.com/containernetworking/plugins/plugins/meta/flannel"
  (cd "$src" && go build -trimpath -ldflags="-s -w" -o "$out/bin/flannel.tmp" \
    github.com/containernetworking/plugins/plugins/meta/flannel)
  mv "$out/bin/flannel.tmp" "$out/bin/flannel"
fi
log "built into $out/bin"
echo "$out/bin"
