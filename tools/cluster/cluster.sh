#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, with Cascade installed from the checkout.
#
#   npm run cluster -- up [--no-cascade]   start (idempotent: what runs is left alone)
#   npm run cluster -- down                stop and remove everything it made
#   npm run cluster -- status              what runs, the node, the pods
#   npm run cluster -- install [TAG [TIMEOUT]]  helm upgrade --install of the chart (images TAG)
#   npm run cluster -- env                 prints `export KUBECONFIG=...`
#
# Processes on the host (no systemd needed): etcd and kube-apiserver (the envtest build), kube-
# controller-manager, kube-scheduler, kubelet and kube-proxy (iptables mode) built from the same
# k8s.io/kubernetes version, containerd and runc from Debian, the CNI bridge plugin from Debian chained
# with cascade-cni. Every image (pause, CoreDNS, the e2e workload, Cascade's) is built here and
# imported into containerd: nothing is pulled. The pod CIDR is blackholed and the Service CIDR routed
# onto the pod bridge, so no packet of this cluster leaves the machine. State: /var/lib/cascade-cluster and /run/cascade-cluster.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
STATE=${CASCADE_CLUSTER_STATE:-/var/lib/cascade-cluster}
RUN=${CASCADE_CLUSTER_RUN:-/run/cascade-cluster}
NODE=cascade-node
POD_RANGE=10.244.0.0/16
POD_CIDR=10.244.0.0/24
POD_GW=10.244.0.1
SVC_RANGE=10.96.0.0/16
API_SVC_IP=10.96.0.1
DNS_IP=10.96.0.10
BRIDGE=cascade0
PIN_DIR=/sys/fs/bpf/cascade
ETCD_PORT=23790
TAG=${CASCADE_IMAGE_TAG:-0.1.0}
SOCK="$RUN/containerd.sock"
PKI="$STATE/pki"
LOGS="$STATE/logs"
export KUBECONFIG="$STATE/admin.kubeconfig"

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }
[[ -x /usr/local/go/bin/go ]] && export PATH="$PATH:/usr/local/go/bin"

host_ip() {
  local dev
  dev=$(ip -4 route show default | awk '{for (i=1;i<NF;i++) if ($i=="dev") {print $(i+1); exit}}')
  [[ -n $dev ]] || dev=$(ip -4 -o addr show scope global | awk '{print $2; exit}')
  [[ -n $dev ]] || die "no IPv4 interface with a global address: the API server needs one the pods can reach"
  ip -4 -o addr show dev "$dev" scope global | awk '{split($4,a,"/"); print a[1]; exit}'
}

bins() {
  ENVTEST_BIN=$(bash "$root/tools/envtest/build/build.sh")
  CLUSTER_BIN=$(bash "$root/tools/cluster/build/build.sh")
  export PATH="$CLUSTER_BIN:$PATH"
}

running() { # NAME: true when its recorded process lives
  local pid
  pid=$(cat "$RUN/$1.pid" 2>/dev/null) || return 1
  [[ -n $pid && -d /proc/$pid ]] && grep -q "$1" "/proc/$pid/cmdline" 2>/dev/null
}

start() { # NAME BINARY ARGS...: a detached process with its log and pid file, unless it runs already
  local name=$1
  shift
  if running "$name"; then return 0; fi
  log "starting $name"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  echo $! >"$RUN/$name.pid"
}

wait_for() { # SECONDS WHAT COMMAND...: retries the command until it succeeds, at most SECONDS
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$what not ready after $(($1)) s (logs: $LOGS)"
    sleep 1
  done
}

# ---------------------------------------------------------------------------------------------------
pki() {
  [[ -f $PKI/.done ]] && return 0
  log "issuing certificates (EC P-256)"
  mkdir -p "$PKI"
  local ip=$1
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=cascade-cluster-ca" -days 3650 -out "$PKI/ca.crt" 2>/dev/null
  issue() { # NAME CN O SAN(optional)
    local name=$1 cn=$2 o=$3 san=${4:-}
    openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
    local subj="/CN=$cn"
    [[ -n $o ]] && subj="/O=$o$subj"
    openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
    local ext="$PKI/$name.ext"
    if [[ -n $san ]]; then
      printf 'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' "$san" >"$ext"
    else
      printf 'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$ext"
    fi
    openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
      -days 3650 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
    rm -f "$PKI/$name.csr" "$ext"
  }
  issue apiserver kube-apiserver "" "IP:$ip,IP:$API_SVC_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  issue apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  issue admin cascade-admin system:masters
  issue controller-manager system:kube-controller-manager ""
  issue scheduler system:kube-scheduler ""
  issue kube-proxy system:kube-proxy ""
  issue kubelet "system:node:$NODE" system:nodes
  issue kubelet-serving "system:node:$NODE" system:nodes "IP:$ip,DNS:$NODE"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/sa.key" 2>/dev/null
  openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  touch "$PKI/.done"
}

kubeconfig() { # NAME CERT SERVER
  local f="$STATE/$1.kubeconfig"
  cat >"$f" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: cascade
    cluster: {server: "$3", certificate-authority: "$PKI/ca.crt"}
users:
  - name: $1
    user: {client-certificate: "$PKI/$2.crt", client-key: "$PKI/$2.key"}
contexts:
  - name: cascade
    context: {cluster: cascade, user: $1}
current-context: cascade
EOF
}

control_plane() {
  local ip=$1 server="https://$1:6443"
  start etcd "$ENVTEST_BIN/etcd" --data-dir "$STATE/etcd" --name cascade \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
    --initial-cluster "cascade=http://127.0.0.1:$((ETCD_PORT + 10))" --unsafe-no-fsync --log-level=warn
  start kube-apiserver "$ENVTEST_BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address "$ip" --advertise-address "$ip" --secure-port 6443 \
    --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged=true \
    --kubelet-preferred-address-types InternalIP \
    --service-cluster-ip-range "$SVC_RANGE" --enable-priority-and-fairness=false --profiling=false --v=1
  for c in admin controller-manager scheduler kube-proxy kubelet; do kubeconfig "$c" "$c" "$server"; done
  wait_for 90 kube-apiserver kubectl get --raw /readyz
  start kube-controller-manager "$CLUSTER_BIN/kube-controller-manager" \
    --kubeconfig "$STATE/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$STATE/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --use-service-account-credentials --service-cluster-ip-range "$SVC_RANGE" --cluster-cidr "$POD_RANGE" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port 10257 --profiling=false --v=1
  start kube-scheduler "$CLUSTER_BIN/kube-scheduler" --kubeconfig "$STATE/scheduler.kubeconfig" \
    --authentication-kubeconfig "$STATE/scheduler.kubeconfig" --authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port 10259 --profiling=false --v=1
}

containerd_up() {
  mkdir -p "$STATE/containerd" "$STATE/cni/net.d" "$STATE/cni/bin" "$STATE/cni/ipam"
  for p in /usr/lib/cni/*; do ln -sf "$p" "$STATE/cni/bin/"; done
  # cascade-cni itself is copied here by the agent's init container (the chart's agent.cni.binDir)
  cat >"$STATE/cni/net.d/10-cascade.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "cascade-cluster",
  "plugins": [
    {
      "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$POD_GW"}]],
               "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$STATE/cni/ipam"}
    },
    {"type": "cascade-cni", "pinDir": "$PIN_DIR", "recordDir": "/run/cascade/cni", "exemptNamespace": "cascade-system"}
  ]
}
EOF
  cat >"$STATE/containerd.toml" <<EOF
version = 2
root = "$STATE/containerd"
state = "$RUN/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$RUN/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "cascade.local/pause:3.10"
  enable_selinux = false
  # this machine grants no CAP_SYS_RESOURCE: a negative oom_score_adj (kubelet's -998 for sandboxes,
  # -997 for critical pods) cannot be set, so it is clamped to containerd's own (0)
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$STATE/cni/bin"
    conf_dir = "$STATE/cni/net.d"
    max_conf_num = 1
EOF
  start containerd containerd --config "$STATE/containerd.toml"
  wait_for 30 containerd ctr -a "$SOCK" version
}

import_images() {
  log "building images (cached when inputs are unchanged)"
  "$root/node_modules/.bin/node" "$root/tools/cluster/src/images.ts" --tag "$TAG" --cluster-bin "$CLUSTER_BIN" >&2
  import_archives "$root"/build/images/*.tar
}

# import_archives ARCHIVE...: each image archive (with its .json beside it) into containerd, unless
# the same reference and digest are there already
import_archives() {
  local have
  have=$(ctr -a "$SOCK" -n k8s.io images ls 2>/dev/null | awk 'NR>1 {print $1" "$3}')
  for archive in "$@"; do
    local meta=$archive.json
    local ref digest
    ref=$(sed -n 's/.*"ref": "\(.*\)".*/\1/p' "$meta")
    digest=$(sed -n 's/.*"digest": "\(.*\)".*/\1/p' "$meta")
    grep -qxF "$ref $digest" <<<"$have" && continue
    log "importing $ref"
    ctr -a "$SOCK" -n k8s.io images import --no-unpack=false "${meta%.json}" >/dev/null
  done
}

node_up() {
  local ip=$1
  mkdir -p "$STATE/kubelet"
  printf 'nameserver 127.0.0.1\noptions ndots:1\n' >"$STATE/resolv.conf"
  cat >"$STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$PKI/ca.crt"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
containerRuntimeEndpoint: "unix://$SOCK"
clusterDomain: cluster.local
clusterDNS: ["$DNS_IP"]
resolvConf: "$STATE/resolv.conf"
failSwapOn: false
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: "$PKI/kubelet-serving.crt"
tlsPrivateKeyFile: "$PKI/kubelet-serving.key"
# images are imported, never pulled: never collect them
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
maxPods: 110
EOF
  start kubelet "$CLUSTER_BIN/kubelet" --config "$STATE/kubelet.yaml" --kubeconfig "$STATE/kubelet.kubeconfig" \
    --root-dir "$STATE/kubelet" --hostname-override "$NODE" --node-ip "$ip" --v=1
  cat >"$STATE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$STATE/kube-proxy.kubeconfig"}
mode: iptables
clusterCIDR: "$POD_RANGE"
hostnameOverride: "$NODE"
conntrack: {maxPerCore: 0}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
EOF
  start kube-proxy "$CLUSTER_BIN/kube-proxy" --config "$STATE/kube-proxy.yaml" --v=1
  wait_for 120 "node $NODE" kubectl wait --for=condition=Ready "node/$NODE" --timeout=2s
}

addons() {
  log "applying upstream CRDs and CoreDNS"
  local crds
  crds=$(sed -n 's/.*"crds":"\([^"]*\)".*/\1/p' "$root/tools/envtest/.local/paths.json" 2>/dev/null || true)
  [[ -d $crds ]] || crds="${CASCADE_CACHE:-$HOME/.cache/cascade}/envtest/crds"
  kubectl apply --server-side -f "$crds" >/dev/null
  sed -e "s/@DNS_IP@/$DNS_IP/" "$root/tools/cluster/manifests/coredns.yaml" | kubectl apply --server-side -f - >/dev/null
  kubectl create namespace kuadrant-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
}

install_cascade() { # [TAG] [TIMEOUT]: install, or upgrade to, the chart with this cluster's settings
  local tag=${1:-$TAG} timeout=${2:-3m}
  log "helm upgrade --install cascade (images $tag)"
  local t0=$SECONDS
  helm upgrade --install cascade "$root/charts/cascade" -n cascade-system --create-namespace \
    --set image.tag="$tag" --set image.pullPolicy=Never --set agent.pinDir="$PIN_DIR" --set agent.cni.binDir="$STATE/cni/bin" --wait --timeout "$timeout" >/dev/null ||
    { kubectl get pods -A -o wide >&2; die "cascade did not become ready"; }
  log "cascade ready in $((SECONDS - t0)) s"
}

up() {
  [[ $(id -u) -eq 0 ]] || die "needs root (kubelet, containerd, routes, bpffs)"
  local with_cascade=1
  [[ ${1:-} == --no-cascade ]] && with_cascade=0
  local t0=$SECONDS ip
  ip=$(host_ip)
  bins
  bash "$root/scripts/setup.d/10-bpf.sh"
  mkdir -p "$STATE" "$RUN" "$LOGS"
  # Packets of this cluster never leave the machine. The pod range is blackholed (the node's pod
  # subnet on the bridge is more specific). The Service range cannot be: a packet the host itself sends
  # to a ClusterIP (the host-network agent to the API server) is routed before kube-proxy's DNAT, and a
  # blackhole fails that lookup. It is routed onto the pod bridge instead: DNAT still reroutes it, and a
  # ClusterIP without a backend ends on the bridge, never at the default gateway.
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip link set "$BRIDGE" up
  ip route replace blackhole "$POD_RANGE"
  ip route replace "$SVC_RANGE" dev "$BRIDGE"
  sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1 2>/dev/null ||
    sysctl -qw net.ipv4.ip_forward=1
  mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
  # the agent mounts it with HostToContainer propagation, which needs a shared mount (systemd hosts
  # have one; this machine has no systemd)
  mount --make-shared /sys/fs/bpf
  pki "$ip"
  control_plane "$ip"
  containerd_up
  import_images
  node_up "$ip"
  addons
  # pods start only once the agent has pinned its programs (cascade-cni fails closed): CoreDNS waits for it
  if ((with_cascade)); then
    install_cascade
    kubectl -n kube-system rollout status deploy/coredns --timeout=120s >/dev/null || die "CoreDNS did not become ready"
  fi
  log "up in $((SECONDS - t0)) s; use: export KUBECONFIG=$KUBECONFIG"
}

stop() { # NAME: TERM, then KILL after 10 s
  local pid
  pid=$(cat "$RUN/$1.pid" 2>/dev/null) || return 0
  if running "$1"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do [[ -d /proc/$pid ]] || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$RUN/$1.pid"
}

down() {
  [[ $(id -u) -eq 0 ]] || die "needs root"
  local t0=$SECONDS
  for c in kubelet kube-proxy kube-scheduler kube-controller-manager; do stop "$c"; done
  if running containerd; then
    log "killing pod containers"
    for t in $(ctr -a "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$SOCK" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true; done
    sleep 1
  fi
  stop containerd
  # the shims outlive containerd; they and their containers belong to this cluster's socket
  pkill -9 -f "containerd-shim.*-address $SOCK" 2>/dev/null || true
  stop kube-apiserver
  stop etcd
  # anything else still started from this cluster's state (a pid file lost by hand, say)
  pkill -9 -f -- "$STATE/" 2>/dev/null || true
  if [[ -d $STATE/cni/bin ]] || ip link show "$BRIDGE" >/dev/null 2>&1; then
    # pod network namespaces made by containerd's CNI calls, then the bridge and its veths
    for ns in /run/netns/cni-*; do
      [[ -e $ns ]] || continue
      umount "$ns" 2>/dev/null || true
      rm -f "$ns"
    done
    ip link del "$BRIDGE" 2>/dev/null || true
  fi
  for m in $(findmnt -rn -o TARGET | grep -E "^($STATE|$RUN)(/|$)" | sort -r); do umount -l "$m" 2>/dev/null || true; done
  if [[ -x ${CLUSTER_BIN:-}/kube-proxy ]] || CLUSTER_BIN=$(ls -d "${CASCADE_CACHE:-$HOME/.cache/cascade}"/cluster/*/bin 2>/dev/null | head -1); then
    [[ -x $CLUSTER_BIN/kube-proxy ]] && "$CLUSTER_BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  fi
  # kubelet's own chains (KUBE-FIREWALL, KUBE-KUBELET-CANARY, ...) after kube-proxy's
  for t in filter nat mangle; do
    for cmd in iptables ip6tables; do
      chains=$($cmd -t $t -S 2>/dev/null | awk '$1=="-N" && $2 ~ /^KUBE-/ {print $2}') || continue
      for ch in $chains; do
        { $cmd -t $t -S 2>/dev/null | grep -E -- "-j $ch( |$)" || true; } | sed 's/^-A/-D/' | while read -r rule; do eval "$cmd -t $t $rule" 2>/dev/null || true; done
      done
      for ch in $chains; do $cmd -t $t -F "$ch" 2>/dev/null || true; done
      for ch in $chains; do $cmd -t $t -X "$ch" 2>/dev/null || true; done
    done
  done
  ip route del blackhole "$POD_RANGE" 2>/dev/null || true
  ip route del "$SVC_RANGE" 2>/dev/null || true
  rm -rf "$PIN_DIR" /run/cascade/cni
  rm -rf "$STATE" "$RUN"
  log "down in $((SECONDS - t0)) s: processes, mounts, interfaces, iptables chains, routes, pins and state removed"
}

status() {
  local c
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy; do
    if running "$c"; then printf '%-24s running (pid %s)\n' "$c" "$(cat "$RUN/$c.pid")"; else printf '%-24s stopped\n' "$c"; fi
  done
  if running kube-apiserver; then
    bins >/dev/null 2>&1 || true
    kubectl get nodes -o wide 2>/dev/null || true
    kubectl get pods -A -o wide 2>/dev/null || true
    echo "export KUBECONFIG=$KUBECONFIG"
  fi
}

case ${1:-} in
  up) shift; up "$@" ;;
  down) down ;;
  status) status ;;
  install) shift; bins; install_cascade "$@" ;;
  import) shift; import_archives "$@" ;;
  env) # what a shell needs to use this cluster: its kubeconfig, and the kubectl and helm built for it
    bin=$(bash "$root/tools/cluster/build/build.sh")
    echo "export KUBECONFIG=$KUBECONFIG"
    echo "export PATH=\"$bin:\$PATH\"" ;;
  *) echo "usage: npm run cluster -- up [--no-cascade] | down | status | install [TAG [TIMEOUT]] | import ARCHIVE... | env" >&2; exit 2 ;;
esac
