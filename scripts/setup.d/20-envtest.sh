#!/usr/bin/env bash
# The envtest API server: kube-apiserver and etcd built from their Go modules (cached), and the
# upstream Gateway API and network-policy-api CRDs taken from their pinned Go modules (cached).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
log() { printf '[setup:envtest] %s\n' "$*" >&2; }
# Go is needed only to build what is not cached yet; look in its usual place too.
[[ -x /usr/local/go/bin/go ]] && export PATH="$PATH:/usr/local/go/bin"
bin=$(bash "$root/tools/envtest/build/build.sh")
cache=${CASCADE_CACHE:-$HOME/.cache/cascade}/envtest
crds="$cache/crds"
GATEWAY_API=${GATEWAY_API:-v1.4.0}
NETPOL_API=${NETPOL_API:-v0.1.7}
# ClusterNetworkPolicy: v1beta1 (storage) and v1alpha2 in v0.3.x; v1alpha2 alone in v0.2.x, kept in
# crds-older/ for the tests of an upgrade. ANP/BANP (v1alpha1) live in the v0.1.x line only.
NETPOL_API_V2=${NETPOL_API_V2:-v0.2.0}
NETPOL_API_V3=${NETPOL_API_V3:-v0.3.0}
older="$cache/crds-older"
stamp="$crds/.stamp-$GATEWAY_API-$NETPOL_API-$NETPOL_API_V2-$NETPOL_API_V3-experimental"
if [[ ! -f $stamp ]]; then
  command -v go >/dev/null || { log "go is missing: cannot fetch the CRDs; the integration tests will fail"; exit 0; }
  log "fetching CRDs: sigs.k8s.io/gateway-api@$GATEWAY_API, sigs.k8s.io/network-policy-api@$NETPOL_API, @$NETPOL_API_V2 and @$NETPOL_API_V3"
  rm -rf "$crds" "$older" && mkdir -p "$crds" "$older/$NETPOL_API_V2"
  dir() { (cd "$cache" && GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'); }
  gw=$(dir "sigs.k8s.io/gateway-api@$GATEWAY_API")
  np=$(dir "sigs.k8s.io/network-policy-api@$NETPOL_API")
  np2=$(dir "sigs.k8s.io/network-policy-api@$NETPOL_API_V2")
  np3=$(dir "sigs.k8s.io/network-policy-api@$NETPOL_API_V3")
  cp "$gw"/config/crd/standard/gateway.networking.k8s.io_{gatewayclasses,gateways,httproutes,grpcroutes,referencegrants}.yaml "$crds/"
  # experimental: the superset with nodes, networks and namedPort, which the resolver supports
  cp "$np"/config/crd/experimental/policy.networking.k8s.io_*.yaml "$crds/"
  cp "$np3"/config/crd/experimental/policy.networking.k8s.io_clusternetworkpolicies.yaml "$crds/"
  cp "$np2"/config/crd/experimental/policy.networking.k8s.io_clusternetworkpolicies.yaml "$older/$NETPOL_API_V2/"
  # what the chart installs, each channel: ANP/BANP from v0.1.x beside v0.3.x's ClusterNetworkPolicy
  for channel in standard experimental; do
    mkdir -p "$crds/chart/$channel"
    cp "$np"/config/crd/$channel/policy.networking.k8s.io_*.yaml "$np3"/config/crd/$channel/policy.networking.k8s.io_*.yaml "$crds/chart/$channel/"
  done
  chmod -R u+w "$crds" "$older"
  touch "$stamp"
fi
# the chart's copy (charts/cascade/files/network-policy-api, not in git), put back on every run: a
# fresh clone with a warm cache has none
chartfiles="$root/charts/cascade/files/network-policy-api"
if [[ -d $crds/chart ]]; then
  rm -rf "$chartfiles" && mkdir -p "$chartfiles" && cp -r "$crds/chart/." "$chartfiles/"
fi
# The data-plane providers' CRDs (Istio's WasmPlugin and EnvoyFilter, Envoy Gateway's
# EnvoyExtensionPolicy and EnvoyPatchPolicy), for the gateway wiring's server-side dry runs and tests.
ISTIO_API=${ISTIO_API:-v1.28.0}
ENVOY_GATEWAY=${ENVOY_GATEWAY:-v1.9.1}
providers="$cache/provider-crds"
pstamp="$providers/.stamp-$ISTIO_API-$ENVOY_GATEWAY"
if [[ ! -f $pstamp ]] && command -v go >/dev/null; then
  log "fetching CRDs: istio.io/api@$ISTIO_API, github.com/envoyproxy/gateway@$ENVOY_GATEWAY"
  rm -rf "$providers" && mkdir -p "$providers"
  dir() { (cd "$cache" && GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'); }
  istio=$(dir "istio.io/api@$ISTIO_API")
  eg=$(dir "github.com/envoyproxy/gateway@$ENVOY_GATEWAY")
  cp "$istio/kubernetes/customresourcedefinitions.gen.yaml" "$providers/istio.yaml"
  cp "$eg"/charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_{envoyextensionpolicies,envoypatchpolicies}.yaml "$providers/"
  chmod u+w "$providers"/*.yaml
  touch "$pstamp"
fi
mkdir -p "$root/tools/envtest/.local"
printf '{"bin":"%s","crds":"%s","olderCrds":"%s","providerCrds":"%s"}\n' "$bin" "$crds" "$older" "$providers" > "$root/tools/envtest/.local/paths.json"
log "binaries in $bin, CRDs in $crds"
