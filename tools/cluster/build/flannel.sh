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
FLANNEL_VERSION=${FLANNEL_VERSION:-v0.27.4}
FLANNEL_CNI_MODULE_VERSION=${FLANNEL_CNI_MODULE_VERSION:-v0.9.1}
here=$(cd "$(dirname "$0")" && pwd)
cache=${CASCADE_CACHE:-$HOME/.cache/cascade}
# -rN: the recipe's revision (r2: without cgo, on the Kubernetes build set's build list)
out="$cache/cluster/flannel-$FLANNEL_VERSION-cni-$FLANNEL_CNI_MODULE_VERSION-r2"
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
  rm -rf "$src" && mkdir -p "$src"
  # a copy of flannel's module (for the stand-in below), built on the Kubernetes build set's build
  # list (lib.sh align_to_kube_set): a fresh machine compiles client-go and its kin once, for the set
  # and flanneld (about 90 s of CPU less). v0.27.4 is the newest release served here whose Kubernetes
  # libraries (client-go v0.31), klog, golang.org/x and gRPC are no newer than the set's; v0.28.x pins
  # client-go v0.32 to v0.34.10 with a newer klog, x/net, gRPC and etcd, which would split the build.
  module=$(cd "$src" && go mod download -json "github.com/flannel-io/flannel@$FLANNEL_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  cp -r "$module" "$src/module" && chmod -R u+w "$src/module"
  # Without cgo, as the build set is: a cgo build compiles the standard library's net package another
  # way, and with it every package above it, the whole of client-go. flannel's Makefile builds with
  # cgo for its udp backend's C proxy; that one backend gets a stand-in that refuses to start
  # (build/flannel/cproxy_nocgo_amd64.go). vxlan, the backend the clusters here use, is pure Go.
  cp "$here/flannel/cproxy_nocgo_amd64.go" "$src/module/pkg/backend/udp/"
  printf 'module cascade.dev/cluster-flanneld\ngo 1.24\nrequire github.com/flannel-io/flannel %s\nreplace github.com/flannel-io/flannel => ./module\n' \
    "$FLANNEL_VERSION" > "$src/go.mod"
  kube_set_list "$src"
  align_to_kube_set "$src"
  tool_module "$src" cluster-flanneld <<<"github.com/flannel-io/flannel"
  differ=$(kube_set_differences "$src" github.com/flannel-io/flannel)
  [[ -z $differ ]] || log "flanneld takes newer versions than the build set of (compiled for it alone): ${differ//$'\n'/; }"
  (cd "$src" && CGO_ENABLED=0 go build -trimpath \
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
