// npm run cluster -- up [--nodes N] [--cni flannel|host-gw] [--netpol cascade|kube-network-policies]
//                       [--no-cascade] [--npapi-crds v0.2.0]
//                    | down | status | install [TAG [TIMEOUT]] | node stop|start NAME | import ARCHIVE... | env
//
// A real Kubernetes cluster on this machine, with Cascade installed from the checkout (layout.ts says
// where each part lives). `up` is idempotent: what runs is left alone; `up --nodes N` on a running
// cluster of fewer namespaced nodes adds the missing ones.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CONTROL_PLANE, controlPlane, controlPlanePidFile } from './control-plane.ts';
import { CNIS, type Cni, flannelAccess, flanneldUp } from './flannel.ts';
import {
  BRIDGE,
  KUBECONFIG,
  type Layout,
  LINK_BRIDGE,
  LOGS,
  layout,
  type NodeSpec,
  netnsNode,
  PIN_DIR,
  POD_RANGE,
  RUN,
  STATE,
  SVC_RANGE,
} from './layout.ts';
import { linkUp, machineDown, machinePidFile, machineTag, machineUp } from './machine.ts';
import {
  containerdUp,
  importArchives,
  kubeletUp,
  kubeProxyUp,
  pidFile,
  SERVICES,
  services,
  servicesDown,
  socket,
} from './node.ts';
import { NETPOLS, type Netpol, peerBins, peerUp } from './peer.ts';
import { controlPlanePki } from './pki.ts';
import {
  attempt,
  ClusterError,
  fail,
  kill,
  livePid,
  log,
  pidsMatching,
  run,
  sleepMs,
  stop,
  stopAll,
  waitFor,
} from './proc.ts';
import { addons, install } from './release.ts';
import {
  bins,
  binsMemo,
  env,
  flannelBins,
  hostIp,
  kubectl,
  kubectlApply,
  LAYOUT_FILE,
  type Recorded,
  ROOT,
  recorded,
  recordedFile,
  TAG,
} from './state.ts';

function hostNodeNetwork(): void {
  // Packets of this cluster never leave the machine. The pod range is blackholed (the node's subnet
  // on the bridge is more specific). The Service range is routed onto the pod bridge rather than
  // blackholed: a packet the host itself sends to a ClusterIP (the host-network agent to the API
  // server) is routed before kube-proxy's DNAT, and a blackhole fails that lookup.
  if (attempt('ip', ['link', 'show', BRIDGE]) === '') run('ip', ['link', 'add', BRIDGE, 'type', 'bridge']);
  run('ip', ['link', 'set', BRIDGE, 'up']);
  run('ip', ['route', 'replace', 'blackhole', POD_RANGE]);
  run('ip', ['route', 'replace', SVC_RANGE, 'dev', BRIDGE]);
  attempt('sysctl', [
    '-qw',
    'net.ipv4.ip_forward=1',
    'net.bridge.bridge-nf-call-iptables=1',
    'net.bridge.bridge-nf-call-ip6tables=1',
  ]) || run('sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
  // the agent mounts bpffs with HostToContainer propagation, which needs a shared mount
  run('mount', ['--make-shared', '/sys/fs/bpf']);
}

function archives(): string[] {
  const dir = join(ROOT, 'build/images');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.tar'))
    .map((f) => join(dir, f));
}

/** A node's machine (its namespaces, when it has them) and containerd; returns the pid to enter. */
function nodeMachine(n: NodeSpec, l: Layout, cni: Cni): number | undefined {
  const flannel = cni === 'flannel';
  const enter = n.placement === 'netns' ? machineUp(n, l, !flannel) : undefined;
  containerdUp(n, enter, flannel ? flannelBins() : undefined);
  return enter;
}

/** A node's services once its images are in: kubelet, kube-proxy (with flannel: flanneld, once it has its lease). */
function nodeServices(n: NodeSpec, l: Layout, cni: Cni, enter: number | undefined): void {
  kubeletUp(n, bins(), `https://${l.hostIp}:6443`, enter);
  kubeProxyUp(n, bins(), enter);
  if (cni === 'flannel') flanneldUp(n, flannelBins(), `https://${l.hostIp}:6443`, kubectl, enter);
}

/**
 * Nodes up: every machine and containerd, then every node's images side by side, then each node's
 * services; returns the refs of images rebuilt since a node had them.
 */
function nodesUp(nodes: NodeSpec[], l: Layout, images: string[], cni: Cni): string[] {
  const enters = nodes.map((n) => nodeMachine(n, l, cni));
  const rebuilt = importArchives(nodes, images).flat();
  nodes.forEach((n, i) => nodeServices(n, l, cni, enters[i]));
  return rebuilt;
}

/**
 * The value of `flag` (one of `allowed`), else what the running cluster had (`had`), else `fallback`;
 * a different value than a running cluster's asks for `down` first (chosen when the cluster is made).
 */
function chosen<T extends string>(
  args: string[],
  flag: string,
  allowed: readonly T[],
  had: T | undefined,
  fallback: T,
): T {
  const at = args.indexOf(flag);
  const asked = at >= 0 ? args[at + 1] : undefined;
  if (asked !== undefined && !(allowed as readonly string[]).includes(asked))
    fail(`${flag}: want one of ${allowed.join(', ')}, got ${asked}`);
  const value = (asked ?? had ?? fallback) as T;
  if (had && value !== had)
    fail(`${flag}: the running cluster has ${had}: npm run cluster -- down first (chosen when it is made)`);
  return value;
}

/** `--netpol`: what enforces network policy (Cascade, or a peer on flannel). */
function netpolOf(args: string[], cni: Cni, before?: Recorded): Netpol {
  const netpol = chosen(args, '--netpol', NETPOLS, before && (before.netpol ?? 'cascade'), 'cascade');
  if (netpol !== 'cascade' && cni !== 'flannel')
    fail(`--netpol ${netpol}: wants a CNI to chain nothing into (--nodes 2 or more, flannel)`);
  return netpol;
}

/** `--cni`, else what the running cluster uses, else flannel on namespaced nodes (host-gw on the host). */
function cniOf(args: string[], l: Layout, before?: Recorded): Cni {
  const onHost = l.nodes[0]!.placement === 'host';
  const cni = chosen(
    args,
    '--cni',
    CNIS,
    before && (before.cni ?? 'host-gw'),
    onHost ? 'host-gw' : 'flannel',
  );
  if (cni === 'flannel' && onHost)
    fail('--cni flannel: wants --nodes 2 or more (one node on the host has no other node to reach)');
  return cni;
}

function up(args: string[]): void {
  if (process.getuid?.() !== 0) fail('needs root (kubelet, containerd, namespaces, routes, bpffs)');
  const withCascade = !args.includes('--no-cascade');
  const at = args.indexOf('--nodes');
  const rec = recordedFile();
  const before = rec && layout(rec.count, rec.hostIp);
  const count =
    at >= 0 ? Number(args[at + 1]) : before?.nodes.filter((n) => n.placement === 'netns').length || 1;
  const t0 = Date.now();
  const l = layout(count, before?.hostIp ?? hostIp());
  if (
    before &&
    (before.nodes[0]!.placement !== l.nodes[0]!.placement || before.nodes.length > l.nodes.length)
  )
    fail(
      `a cluster of ${before.nodes.length} node(s) runs: npm run cluster -- down first (a node count only grows on a running cluster)`,
    );
  const cni = cniOf(args, l, rec);
  const netpol = netpolOf(args, cni, rec);
  const peer = netpol === 'kube-network-policies' ? peerBins() : undefined;
  bins();
  if (cni === 'flannel') flannelBins();
  run('bash', [join(ROOT, 'scripts/setup.d/10-bpf.sh')], { timeoutMs: 600_000 });
  for (const d of [STATE, RUN, LOGS]) mkdirSync(d, { recursive: true });
  // findmnt prints the mount when there is one (mountpoint -q prints nothing either way)
  if (attempt('findmnt', ['-n', '/sys/fs/bpf']) === '') run('mount', ['-t', 'bpf', 'bpf', '/sys/fs/bpf']);
  if (l.nodes[0]!.placement === 'host') hostNodeNetwork();
  else linkUp(l);
  const npapiAt = args.indexOf('--npapi-crds');
  const npapiCrds = npapiAt >= 0 ? args[npapiAt + 1] : rec?.npapiCrds;
  writeFileSync(
    LAYOUT_FILE,
    `${JSON.stringify({ count, hostIp: l.hostIp, ...(npapiCrds ? { npapiCrds } : {}), ...(cni !== 'host-gw' ? { cni } : {}), ...(peer ? { netpol } : {}) } satisfies Recorded)}\n`,
  );
  controlPlanePki(l.hostIp);
  controlPlane(bins(), l.hostIp, env());
  if (cni === 'flannel') flannelAccess(kubectlApply);
  log('building images (cached when inputs are unchanged)');
  run(
    join(ROOT, 'node_modules/.bin/node'),
    [
      join(ROOT, 'packages/distribution/src/images.ts'),
      '--tag',
      TAG,
      '--cluster-bin',
      bins().cluster,
      ...(peer ? ['--peer-bin', peer] : []),
    ],
    {
      timeoutMs: 1_800_000,
    },
  );
  const images = archives();
  // images rebuilt since the nodes had them (a node joining imports everything: that restarts nothing)
  const rebuilt = new Set(nodesUp(l.nodes, l, images, cni));
  for (const n of l.nodes)
    waitFor(
      120,
      `node ${n.name}`,
      () => kubectl('wait', '--for=condition=Ready', `node/${n.name}`, '--timeout=2s'),
      LOGS,
    );
  // the older bundle only when the cluster is made: a later `up` (a node added) must not put it back
  // over what the chart has upgraded since
  addons(before ? undefined : npapiCrds, Boolean(peer));
  if (peer) {
    log('kube-network-policies instead of Cascade (its own manifest, the image built here)');
    try {
      peerUp(peer, kubectl, kubectlApply);
    } catch (e) {
      process.stderr.write(
        attempt('kubectl', [
          '--kubeconfig',
          KUBECONFIG,
          '-n',
          'kube-system',
          'logs',
          'daemonset/kube-network-policies',
          '--tail=30',
        ]),
      );
      throw e;
    }
  }
  // pods start only once the agent has pinned its programs (cascade-cni fails closed): CoreDNS waits for it
  if (withCascade && !peer) {
    install();
    // a rebuilt image under the same tag changes no pod template: what runs it is restarted
    if (before && [...rebuilt].some((ref) => ref.endsWith(`:${TAG}`))) {
      log('restarting Cascade on its rebuilt images');
      kubectl('-n', 'cascade-system', 'rollout', 'restart', 'deployment,daemonset');
      for (const w of kubectl('-n', 'cascade-system', 'get', 'deployment,daemonset', '-o', 'name')
        .split('\n')
        .filter(Boolean))
        kubectl('-n', 'cascade-system', 'rollout', 'status', w, '--timeout=300s');
    }
    kubectl('-n', 'kube-system', 'rollout', 'status', 'deploy/coredns', '--timeout=120s');
  }
  log(
    `up (${l.nodes.length} node(s)) in ${Math.round((Date.now() - t0) / 1000)} s; use: export KUBECONFIG=${KUBECONFIG}`,
  );
}

/** Stops a namespaced node's services as a crash would: kubelet, kube-proxy, the agent, containerd. */
function nodeStop(n: NodeSpec): void {
  servicesDown(n);
  // the agent's container: found by its command line among the node's processes
  for (const pid of pidsMatching('agent/main')) {
    let cg = '';
    try {
      cg = readFileSync(`/proc/${pid}/cgroup`, 'utf8');
    } catch {
      /* gone already */
    }
    if (n.cgroupRoot && cg.includes(`${n.cgroupRoot}/`)) kill(pid, 'SIGKILL');
  }
  stop(pidFile(n, 'containerd'), 'containerd');
  log(`node ${n.name}: kubelet, kube-proxy, agent and containerd stopped; its machine, pods and pins stay`);
}

/**
 * A node's pod containers and containerd stopped. A namespaced node's containerd is stopped beforehand,
 * with every other node's (down); its containers are all under its cgroup root, killed with its machine.
 */
function containersDown(n: NodeSpec): void {
  if (n.placement === 'host' && livePid(pidFile(n, 'containerd'), 'containerd')) {
    for (const t of attempt('ctr', ['-a', socket(n), '-n', 'k8s.io', 'tasks', 'ls', '-q'])
      .split('\n')
      .filter(Boolean))
      attempt('ctr', ['-a', socket(n), '-n', 'k8s.io', 'tasks', 'kill', '-s', 'SIGKILL', t]);
    sleepMs(1000);
  }
  if (n.placement === 'host') stop(pidFile(n, 'containerd'), 'containerd');
  // the shims outlive containerd; they and their containers belong to this node's socket
  for (const pid of pidsMatching(`-address ${socket(n)}`)) kill(pid, 'SIGKILL');
}

/** Every namespaced node this machine holds, whether or not the layout file says so. */
function leftoverNodes(): NodeSpec[] {
  const names = new Set<number>();
  for (const d of [join(RUN, 'nodes'), join(STATE, 'nodes')])
    if (existsSync(d))
      for (const f of readdirSync(d)) if (/^cascade-node-\d+$/.test(f)) names.add(Number(f.split('-')[2]));
  if (existsSync('/run/netns'))
    for (const f of readdirSync('/run/netns'))
      if (/^cascade-node-\d+$/.test(f)) names.add(Number(f.split('-')[2]));
  return [...names].map(netnsNode);
}

function down(): void {
  if (process.getuid?.() !== 0) fail('needs root');
  const t0 = Date.now();
  const l = recorded();
  const nodes = [...(l?.nodes.filter((n) => n.placement === 'host') ?? []), ...leftoverNodes()];
  if (!l && existsSync(join(RUN, 'kubelet.pid'))) nodes.push(layout(1, '127.0.0.1').nodes[0]!);
  // everything goes, all at once: a namespaced node's services get one second to leave
  stopAll([
    ...nodes.flatMap((n) => services(n, n.placement === 'host' ? 10_000 : 1_000)),
    ...['kube-scheduler', 'kube-controller-manager'].map((c) => ({
      pidFile: controlPlanePidFile(c),
      match: c,
    })),
  ]);
  // a namespaced node's containerd too (its containers die with its machine's cgroup)
  stopAll(
    nodes
      .filter((n) => n.placement === 'netns')
      .map((n) => ({ pidFile: pidFile(n, 'containerd'), match: 'containerd', graceMs: 1_000 })),
  );
  for (const n of nodes) {
    if (n.placement === 'host') log(`killing the pod containers of ${n.name}`);
    containersDown(n);
    if (n.placement === 'netns') machineDown(n);
  }
  // their state is removed below, so no graceful drain: kube-apiserver waited out 10 s of it
  stopAll(
    ['kube-apiserver', 'etcd'].map((c) => ({ pidFile: controlPlanePidFile(c), match: c, graceMs: 2_000 })),
  );
  // anything else still started from this cluster's state (a pid file lost by hand, say)
  for (const pid of pidsMatching(`${STATE}/`)) kill(pid, 'SIGKILL');
  if (nodes.some((n) => n.placement === 'host') || existsSync(join(STATE, 'cni/bin'))) hostNodeDown();
  if (attempt('ip', ['link', 'show', LINK_BRIDGE]) !== '') attempt('ip', ['link', 'del', LINK_BRIDGE]);
  attempt('ip', ['route', 'del', 'blackhole', POD_RANGE]);
  attempt('ip', ['route', 'del', 'blackhole', SVC_RANGE]);
  attempt('ip', ['route', 'del', SVC_RANGE]);
  for (const m of attempt('findmnt', ['-rn', '-o', 'TARGET'])
    .split('\n')
    .filter((m) => m === STATE || m.startsWith(`${STATE}/`) || m === RUN || m.startsWith(`${RUN}/`))
    .sort()
    .reverse())
    attempt('umount', ['-l', m]);
  rmSync(PIN_DIR, { recursive: true, force: true });
  rmSync('/run/cascade/cni', { recursive: true, force: true });
  rmSync(STATE, { recursive: true, force: true });
  rmSync(RUN, { recursive: true, force: true });
  log(
    `down in ${Math.round((Date.now() - t0) / 1000)} s: processes, namespaces, mounts, interfaces, iptables chains, routes, pins and state removed`,
  );
}

/** The host node's leftovers: pod namespaces, the bridge, kube-proxy's and kubelet's chains. */
function hostNodeDown(): void {
  if (existsSync('/run/netns'))
    for (const f of readdirSync('/run/netns').filter((f) => f.startsWith('cni-'))) {
      // mounted more than once when a CNI ADD was cut short (a run killed mid-way): every mount goes
      const path = join('/run/netns', f);
      for (let i = 0; i < 8 && attempt('findmnt', ['-n', path]) !== ''; i++) attempt('umount', ['-l', path]);
      try {
        rmSync(path, { force: true });
      } catch (e) {
        log(`${path}: not removed (${(e as Error).message})`);
      }
    }
  // the bridge's ports first: a pod torn down while `down` ran (its CNI DEL cut short) can leave its
  // host-side veth behind, its peer's namespace still held
  for (const line of attempt('ip', ['-o', 'link', 'show', 'master', BRIDGE]).split('\n')) {
    const port = /^\d+: ([^@:]+)/.exec(line)?.[1];
    if (port) attempt('ip', ['link', 'del', port]);
  }
  attempt('ip', ['link', 'del', BRIDGE]);
  // kube-proxy's own cleanup of its chains: the binary that ran, else one built earlier (`down`
  // never builds): the Kubernetes build set's, or the cluster build's before there was one
  let proxy = binsMemo?.cluster;
  if (!proxy) {
    const cache = process.env.CASCADE_CACHE ?? join(process.env.HOME ?? '/root', '.cache/cascade');
    proxy = ['kube-set', 'cluster']
      .map((d) => join(cache, d))
      .flatMap((d) => (existsSync(d) ? readdirSync(d).map((v) => join(d, v, 'bin')) : []))
      .find((d) => existsSync(join(d, 'kube-proxy')));
  }
  if (proxy) attempt(join(proxy, 'kube-proxy'), ['--cleanup']);
  else log('no kube-proxy binary found: its chains are removed below, without its own cleanup');
  // kubelet's own chains (KUBE-FIREWALL, KUBE-KUBELET-CANARY, ...) after kube-proxy's
  for (const t of ['filter', 'nat', 'mangle'])
    for (const cmd of ['iptables', 'ip6tables']) {
      const rules = attempt(cmd, ['-t', t, '-S']).split('\n');
      const chains = rules.filter((r) => /^-N KUBE-/.test(r)).map((r) => r.split(' ')[1]!);
      // through a shell: a rule's comment is quoted and holds spaces (the rules are the node's own)
      for (const ch of chains)
        for (const r of rules.filter((r) => r.startsWith('-A ') && new RegExp(`-j ${ch}( |$)`).test(r)))
          attempt('sh', ['-c', `${cmd} -t ${t} ${r.replace(/^-A/, '-D')}`]);
      for (const ch of chains) attempt(cmd, ['-t', t, '-F', ch]);
      for (const ch of chains) attempt(cmd, ['-t', t, '-X', ch]);
    }
}

function status(): void {
  const line = (name: string, pid: number | undefined) =>
    process.stdout.write(`${name.padEnd(36)}${pid ? `running (pid ${pid})` : 'stopped'}\n`);
  for (const c of CONTROL_PLANE) line(c, livePid(controlPlanePidFile(c), c));
  const l = recorded();
  for (const n of l?.nodes ?? []) {
    process.stdout.write(
      `node ${n.name} (${n.placement === 'host' ? 'the host' : `netns ${n.netns}`}, ${n.ip}, pods ${n.podCidr})\n`,
    );
    if (n.placement === 'netns') line(`  machine`, livePid(machinePidFile(n), machineTag(n)));
    for (const s of SERVICES) line(`  ${s}`, livePid(pidFile(n, s), s));
    if (recordedFile()?.cni === 'flannel') line('  flanneld', livePid(pidFile(n, 'flanneld'), 'flanneld'));
  }
  if (livePid(controlPlanePidFile('kube-apiserver'), 'kube-apiserver')) {
    process.stdout.write(attempt('kubectl', ['--kubeconfig', KUBECONFIG, 'get', 'nodes', '-o', 'wide']));
    process.stdout.write(attempt('kubectl', ['--kubeconfig', KUBECONFIG, 'get', 'pods', '-A', '-o', 'wide']));
    process.stdout.write(`export KUBECONFIG=${KUBECONFIG}\n`);
  }
}

function node(args: string[]): void {
  const [verb, name] = args;
  const l = recorded() ?? fail('no cluster runs');
  const n = l.nodes.find((m) => m.name === name);
  if (n?.placement !== 'netns')
    fail(
      `node ${name ?? '(none)'}: not a namespaced node of this cluster (${l.nodes.map((m) => m.name).join(', ')})`,
    );
  if (verb === 'stop') nodeStop(n!);
  else if (verb === 'start') {
    nodesUp([n!], l, archives(), recordedFile()?.cni ?? 'host-gw');
    waitFor(
      120,
      `node ${n!.name}`,
      () => kubectl('wait', '--for=condition=Ready', `node/${n!.name}`, '--timeout=2s'),
      LOGS,
    );
  } else fail('usage: npm run cluster -- node stop|start NAME');
}

const USAGE =
  'usage: npm run cluster -- up [--nodes N] [--cni flannel|host-gw] [--netpol cascade|kube-network-policies] [--no-cascade] [--npapi-crds v0.2.0] | down | status | install [TAG [TIMEOUT]] | node stop|start NAME | import ARCHIVE... | env';

try {
  const [cmd, ...rest] = process.argv.slice(2);
  switch (cmd) {
    case 'up':
      up(rest);
      break;
    case 'down':
      down();
      break;
    case 'status':
      status();
      break;
    case 'install':
      install(rest[0], rest[1]);
      break;
    case 'node':
      node(rest);
      break;
    case 'import': {
      const l = recorded() ?? fail('no cluster runs');
      importArchives(
        l.nodes,
        rest.map((a) => resolve(a)),
      );
      break;
    }
    case 'env':
      process.stdout.write(`export KUBECONFIG=${KUBECONFIG}\nexport PATH="${bins().cluster}:$PATH"\n`);
      break;
    default:
      process.stderr.write(`${USAGE}\n`);
      process.exit(2);
  }
} catch (e) {
  if (e instanceof ClusterError) {
    process.stderr.write(`[cluster] error: ${e.message}\n`);
    process.exit(1);
  }
  throw e;
}
