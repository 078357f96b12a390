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
# ClusterNetworkPolicy (v1alpha2) lives in the v0.2.x line; ANP/BANP (v1alpha1) in v0.1.x.
NETPOL_API_V2=${NETPOL_API_V2:-v0.2.0}
stamp="$crds/.stamp-$GATEWAY_API-$NETPOL_API-$NETPOL_API_V2-experimental"
if [[ ! -f $stamp ]]; then
  command -v go >/dev/null || { log "go is missing: cannot fetch the CRDs; the integration tests will fail"; exit 0; }
  log "fetching CRDs: sigs.k8s.io/gateway-api@$GATEWAY_API, sigs.k8s.io/network-policy-api@$NETPOL_API and @$NETPOL_API_V2"
  rm -rf "$crds" && mkdir -p "$crds"
  dir() { (cd "$cache" && GOFLAGS=-mod=mod go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p'); }
  gw=$(dir "sigs.k8s.io/gateway-api@$GATEWAY_API")
  np=$(dir "sigs.k8s.io/network-policy-api@$NETPOL_API")
  np2=$(dir "sigs.k8s.io/network-policy-api@$NETPOL_API_V2")
  cp "$gw"/config/crd/standard/gateway.networking.k8s.io_{gatewayclasses,gateways,httproutes,grpcroutes,referencegrants}.yaml "$crds/"
  # experimental: the superset with nodes, networks and namedPort, which the resolver supports
  cp "$np"/config/crd/experimental/policy.networking.k8s.io_*.yaml "$crds/"
  cp "$np2"/config/crd/experimental/policy.networking.k8s.io_clusternetworkpolicies.yaml "$crds/"
  chmod u+w "$crds"/*.yaml
  touch "$stamp"
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
printf '{"bin":"%s","crds":"%s","providerCrds":"%s"}\n' "$bin" "$crds" "$providers" > "$root/tools/envtest/.local/paths.json"
log "binaries in $bin, CRDs in $crds"
