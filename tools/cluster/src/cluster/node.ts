// A node's services: containerd (its own root, state and socket) with the node's CNI configuration
// (the harness's bridge chained with cascade-cni, or flannel's), the images imported into it, kubelet
// and kube-proxy (flanneld: flannel.ts). On the host (one node) or inside the node's namespaces
// (machine.ts).
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Bins } from './control-plane.ts';
import { flannelConflist, flanneld } from './flannel.ts';
import { BRIDGE, DNS_IP, type NodeSpec, PIN_DIR, PKI, POD_RANGE, STATE } from './layout.ts';
import { kubeconfig, nodePki } from './pki.ts';
import { log, run, type Stoppable, start, stopAll, waitFor } from './proc.ts';

export const SERVICES = ['containerd', 'kubelet', 'kube-proxy'] as const;
export const socket = (n: NodeSpec) => join(n.run, 'containerd.sock');
export const pidFile = (n: NodeSpec, what: string) => join(n.run, `${what}.pid`);
const logFile = (n: NodeSpec, what: string) => join(n.hostDir, 'logs', `${what}.log`);

/**
 * containerd, and the node's CNI configuration: with host-gw, the harness's own (bridge + host-local
 * over the node's subnet, cascade-cni chained); with flannel (`flannelBin`), a flannel node's
 * (flannel.ts), which Cascade's agent chains itself.
 */
export function containerdUp(n: NodeSpec, enter?: number, flannelBin?: string): void {
  for (const d of ['containerd', 'cni/net.d', 'cni/bin', 'cni/ipam'])
    mkdirSync(join(n.hostDir, d), { recursive: true });
  const plugins = (dir: string, names: string[]) => {
    for (const p of names) {
      const link = join(n.hostDir, 'cni/bin', p);
      if (!existsSync(link)) symlinkSync(join(dir, p), link);
    }
  };
  plugins('/usr/lib/cni', readdirSync('/usr/lib/cni'));
  if (flannelBin) {
    plugins(flannelBin, ['flannel']);
    writeFileSync(join(n.hostDir, 'cni/net.d/10-flannel.conflist'), flannelConflist(n));
  } else cascadeConflist(n);
  if (enter === undefined) hostNetnsMountPoint();
  containerdStart(n, enter);
}

/**
 * A node on the host: /run/netns made a shared mount point before containerd puts its pods' network
 * namespaces there, as the first `ip netns add` on a real node leaves it. Otherwise the first `ip
 * netns add` run later on the host (the kernel tests run beside the e2e, and do) binds /run/netns
 * onto itself: the pods made before then keep their namespace mounts underneath, containerd can no
 * longer remove them (unmount "not mounted", unlink "busy"), and those pods never finish
 * terminating (seen on a fresh machine: the upstream suites' namespace deletion timed out). Left in
 * place by `down`, as iproute2 leaves it.
 */
function hostNetnsMountPoint(): void {
  mkdirSync('/run/netns', { recursive: true });
  run('bash', [
    '-c',
    'mountpoint -q /run/netns || mount --rbind /run/netns /run/netns; mount --make-shared /run/netns',
  ]);
}

function cascadeConflist(n: NodeSpec): void {
  // cascade-cni itself is copied into the node's CNI directory by the agent's init container, which
  // also chains it here (as on a user's node); written here too, so pods started before the first
  // install wait for the agent (fail closed) rather than run unenforced
  writeFileSync(
    join(n.hostDir, 'cni/net.d/10-cascade.conflist'),
    `${JSON.stringify(
      {
        cniVersion: '1.0.0',
        name: 'cascade-cluster',
        plugins: [
          {
            type: 'bridge',
            bridge: BRIDGE,
            isGateway: true,
            ipMasq: false,
            hairpinMode: true,
            ipam: {
              type: 'host-local',
              ranges: [[{ subnet: n.podCidr, gateway: n.gateway }]],
              routes: [{ dst: '0.0.0.0/0' }],
              dataDir: join(n.dir, 'cni/ipam'),
            },
          },
          {
            type: 'cascade-cni',
            pinDir: PIN_DIR,
            recordDir: '/run/cascade/cni',
            exemptNamespace: 'cascade-system',
          },
        ],
      },
      null,
      2,
    )}\n`,
  );
}

function containerdStart(n: NodeSpec, enter?: number): void {
  const toml = join(n.hostDir, 'containerd.toml');
  writeFileSync(
    toml,
    `version = 2
root = "${join(n.dir, 'containerd')}"
state = "${join(n.run, 'containerd')}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "${socket(n)}"
[ttrpc]
  address = "${socket(n)}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "${join(n.dir, 'opt')}"
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
    bin_dir = "${join(n.dir, 'cni/bin')}"
    conf_dir = "${join(n.hostDir, 'cni/net.d')}"
    max_conf_num = 1
`,
  );
  start({
    pidFile: pidFile(n, 'containerd'),
    logFile: logFile(n, 'containerd'),
    cmd: 'containerd',
    args: ['--config', toml],
    enter,
  });
  waitFor(30, `containerd of ${n.name}`, () => run('ctr', ['-a', socket(n), 'version'], { timeoutMs: 5000 }));
}

/**
 * Imports the image archives (each with its .json beside it) whose image (ref and digest) a node
 * lacks, into every node given; returns each node's refs whose image was rebuilt: the node had that
 * ref with another digest, so what runs it must restart. A ref new to the node (a node joining)
 * restarts nothing. The nodes import side by side, each into its own containerd; one node's archives
 * go in one after another, as they always did. Three nodes' imports took 43 s one node after another
 * (2026-12-02, 2 cores).
 */
export function importArchives(nodes: NodeSpec[], archives: string[]): string[][] {
  const plans = nodes.map((n) => {
    const had = new Map(
      run('ctr', ['-a', socket(n), '-n', 'k8s.io', 'images', 'ls'])
        .split('\n')
        .slice(1)
        .map((l) => l.split(/\s+/))
        .filter((f) => f[0])
        .map((f) => [f[0]!, f[2]] as const),
    );
    const todo: string[] = [];
    const rebuilt: string[] = [];
    for (const archive of archives) {
      const meta = JSON.parse(readFileSync(`${archive}.json`, 'utf8')) as { ref: string; digest: string };
      if (had.get(meta.ref) === meta.digest) continue;
      log(`importing ${meta.ref} into ${n.name}`);
      todo.push(archive);
      if (had.has(meta.ref)) rebuilt.push(meta.ref);
    }
    return { n, todo, rebuilt };
  });
  const q = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;
  const loops = plans
    .filter((p) => p.todo.length)
    .map(
      (p) =>
        `(for a in ${p.todo.map(q).join(' ')}; do ctr -a ${q(socket(p.n))} -n k8s.io images import --no-unpack=false "$a" >/dev/null || { echo "import of $a into ${p.n.name} failed" >&2; exit 1; }; done) & pids+=($!)`,
    );
  if (loops.length)
    run(
      'bash',
      [
        '-c',
        `pids=(); ${loops.join('\n')}\nst=0; for p in "\${pids[@]}"; do wait "$p" || st=1; done; exit $st`,
      ],
      {
        timeoutMs: 600_000,
      },
    );
  return plans.map((p) => p.rebuilt);
}

function writeIfChanged(file: string, text: string): void {
  if (!existsSync(file) || readFileSync(file, 'utf8') !== text) writeFileSync(file, text);
}

export function kubeletUp(n: NodeSpec, bins: Bins, server: string, enter?: number): void {
  const stem = nodePki(n.name, n.ip);
  const kc = kubeconfig(`kubelet-${n.name}`, stem, server);
  mkdirSync(join(n.hostDir, 'kubelet'), { recursive: true });
  writeFileSync(join(n.hostDir, 'resolv.conf'), 'nameserver 127.0.0.1\noptions ndots:1\n');
  const config = join(n.hostDir, 'kubelet.yaml');
  writeFileSync(
    config,
    `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "${join(PKI, 'ca.crt')}"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
${n.cgroupRoot ? `cgroupRoot: "${n.cgroupRoot}"\n` : ''}failCgroupV1: false
containerRuntimeEndpoint: "unix://${socket(n)}"
clusterDomain: cluster.local
clusterDNS: ["${DNS_IP}"]
resolvConf: "${join(n.hostDir, 'resolv.conf')}"
failSwapOn: false
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: "${join(PKI, `${stem}-serving.crt`)}"
tlsPrivateKeyFile: "${join(PKI, `${stem}-serving.key`)}"
# images are imported, never pulled: never collect them
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
maxPods: 110
`,
  );
  start({
    pidFile: pidFile(n, 'kubelet'),
    logFile: logFile(n, 'kubelet'),
    cmd: join(bins.cluster, 'kubelet'),
    args: [
      '--config',
      config,
      '--kubeconfig',
      kc,
      '--root-dir',
      join(n.hostDir, 'kubelet'),
      '--hostname-override',
      n.name,
      '--node-ip',
      n.ip,
      '--v=1',
    ],
    enter,
  });
}

export function kubeProxyUp(n: NodeSpec, bins: Bins, enter?: number): void {
  const config = join(n.hostDir, 'kube-proxy.yaml');
  // written only when it changes: kube-proxy watches its file and exits when it is written at all
  // ("content of the proxy server's configuration file was updated"), so an `up` that adds a node
  // stopped every running node's kube-proxy
  writeIfChanged(
    config,
    `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "${join(STATE, 'kube-proxy.kubeconfig')}"}
mode: iptables
clusterCIDR: "${POD_RANGE}"
hostnameOverride: "${n.name}"
conntrack: {maxPerCore: 0}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
`,
  );
  start({
    pidFile: pidFile(n, 'kube-proxy'),
    logFile: logFile(n, 'kube-proxy'),
    cmd: join(bins.cluster, 'kube-proxy'),
    args: ['--config', config, '--v=1'],
    enter,
  });
}

/** The node's kubelet, kube-proxy and flanneld (when it runs one) stopped together (TERM, KILL after `graceMs`). */
export function servicesDown(n: NodeSpec, graceMs = 10_000): void {
  stopAll(services(n, graceMs));
}

/** A node's kubelet, kube-proxy and flanneld, to stop (with other processes: `down` stops every node's at once). */
export const services = (n: NodeSpec, graceMs = 10_000): Stoppable[] => [
  ...(['kubelet', 'kube-proxy'] as const).map((s) => ({ pidFile: pidFile(n, s), match: s, graceMs })),
  flanneld(n, graceMs),
];
