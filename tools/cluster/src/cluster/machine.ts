// A namespaced node's "machine": its network namespace (an end on the shared link, its pod bridge,
// routes to the other nodes' pod subnets), its mount namespace (its own bpffs, /run/cascade and pod
// log directories) held by one long-lived process, and its cgroup root. Everything a node runs is
// started inside the namespaces of that process; stopping a node's services leaves the machine (and
// so its pins and its pods' interfaces) in place, as a real machine's would be.
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmdirSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import {
  BRIDGE,
  type Layout,
  LINK_BRIDGE,
  LINK_HOST_IP,
  LINK_PREFIX_LEN,
  NODE_PRIVATE_DIRS,
  NODE_VIEW,
  type NodeSpec,
  POD_RANGE,
  SVC_RANGE,
} from './layout.ts';
import { attempt, fail, kill, livePid, log, run, sleepMs, start } from './proc.ts';

const ipn = (n: NodeSpec, ...args: string[]) => run('ip', ['-n', n.netns!, ...args]);
export const hostVeth = (n: NodeSpec) => `cl-${n.index}`;
export const machinePidFile = (n: NodeSpec) => join(n.run, 'machine.pid');
export const machineTag = (n: NodeSpec) => `cascade-machine ${n.name}`;

/** The host's side of the nodes' link: the bridge, and routes that keep pod and Service packets here. */
export function linkUp(l: Layout): void {
  if (attempt('ip', ['link', 'show', LINK_BRIDGE]) === '')
    run('ip', ['link', 'add', LINK_BRIDGE, 'type', 'bridge']);
  run('ip', ['addr', 'replace', `${LINK_HOST_IP}/${LINK_PREFIX_LEN}`, 'dev', LINK_BRIDGE]);
  run('ip', ['link', 'set', LINK_BRIDGE, 'up']);
  // the host runs no kube-proxy here: a pod or Service address no node owns ends here, never upstream
  run('ip', ['route', 'replace', 'blackhole', POD_RANGE]);
  run('ip', ['route', 'replace', 'blackhole', SVC_RANGE]);
  for (const n of l.nodes) run('ip', ['route', 'replace', n.podCidr, 'via', n.ip]);
}

/** The node's namespaces and its end of the link, then the routes every node needs to every other. */
/**
 * The machine's holder has finished setting up: it is `sleep` (the script's last step execs it) in a
 * mount namespace of its own. Its pid lives, and its command line holds its tag (the tag is in the
 * script's text), from the moment it is spawned, before `unshare` and the mounts have run: a service
 * entering its namespaces then would enter the host's mount namespace, and share another node's
 * containerd root, bpffs and pod logs.
 */
function machineReady(pid: number): boolean {
  try {
    return (
      readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'sleep' &&
      readlinkSync(`/proc/${pid}/ns/mnt`) !== readlinkSync('/proc/self/ns/mnt')
    );
  } catch {
    return false;
  }
}

/** The node's machine; `hostGw`: its routes to the other nodes' pods too (a CNI such as flannel writes its own). */
export function machineUp(n: NodeSpec, l: Layout, hostGw = true): number {
  mkdirSync(n.hostDir, { recursive: true });
  mkdirSync(n.run, { recursive: true });
  if (!existsSync(`/run/netns/${n.netns}`)) {
    log(`node ${n.name}: network namespace, link address ${n.ip}, pod subnet ${n.podCidr}`);
    run('ip', ['netns', 'add', n.netns!]);
  }
  if (attempt('ip', ['link', 'show', hostVeth(n)]) === '')
    run('ip', ['link', 'add', hostVeth(n), 'type', 'veth', 'peer', 'name', 'eth0', 'netns', n.netns!]);
  run('ip', ['link', 'set', hostVeth(n), 'master', LINK_BRIDGE, 'up']);
  ipn(n, 'link', 'set', 'lo', 'up');
  ipn(n, 'addr', 'replace', `${n.ip}/${LINK_PREFIX_LEN}`, 'dev', 'eth0');
  ipn(n, 'link', 'set', 'eth0', 'up');
  ipn(n, 'route', 'replace', 'default', 'via', LINK_HOST_IP);
  if (attempt('ip', ['-n', n.netns!, 'link', 'show', BRIDGE]) === '')
    ipn(n, 'link', 'add', BRIDGE, 'type', 'bridge');
  ipn(n, 'link', 'set', BRIDGE, 'up');
  ipn(n, 'route', 'replace', 'blackhole', POD_RANGE);
  // as on the one-node host: a ClusterIP the node itself dials is routed before kube-proxy's DNAT
  ipn(n, 'route', 'replace', SVC_RANGE, 'dev', BRIDGE);
  for (const k of [
    'net.ipv4.ip_forward=1',
    'net.bridge.bridge-nf-call-iptables=1',
    'net.bridge.bridge-nf-call-ip6tables=1',
  ])
    run('nsenter', [`--net=/run/netns/${n.netns}`, 'sysctl', '-qw', k]);
  cgroupRootUp(n.cgroupRoot!);
  const pid = holder(n);
  if (hostGw) routes(l);
  return pid;
}

/** Every node routes every other node's pod subnet to that node (host-gw). */
export function routes(l: Layout): void {
  const up = l.nodes.filter((n) => existsSync(`/run/netns/${n.netns}`));
  for (const n of up) for (const m of up) if (m !== n) ipn(n, 'route', 'replace', m.podCidr, 'via', m.ip);
}

/** The process that holds the node's mount namespace (and keeps its network namespace busy). */
function holder(n: NodeSpec): number {
  const live = livePid(machinePidFile(n), machineTag(n));
  if (live) return settled(n, live);
  const binds = NODE_PRIVATE_DIRS.map((d) => {
    const own = join(n.hostDir, 'private', d);
    mkdirSync(own, { recursive: true });
    mkdirSync(d, { recursive: true });
    // shared, as `ip netns add` leaves /run/netns on a real node
    return `mount --bind ${own} ${d}${d === '/run/netns' ? ` && mount --make-shared ${d}` : ''}`;
  });
  mkdirSync(NODE_VIEW, { recursive: true });
  const script = [
    'set -e',
    // "/" shared inside the node's own namespace (a new peer group: nothing propagates to or from the
    // host or another node), as systemd leaves it on a real node: containerd refuses a pod's
    // HostToContainer mount under a private "/" (it looks up /var/run/netns without following the
    // /var/run symlink: "is mounted on / but it is not a shared or slave mount", seen with
    // kube-network-policies' DaemonSet)
    'mount --make-shared /',
    `mount --bind ${n.hostDir} ${NODE_VIEW}`,
    `mount --make-rshared ${NODE_VIEW}`,
    // the node's own bpffs: its pins are its own; shared, for the agent's HostToContainer mount
    // (the host's, copied into this namespace, is unmounted first: a stacked mount would hide the
    // propagation containerd checks)
    'while mountpoint -q /sys/fs/bpf; do umount -l /sys/fs/bpf; done',
    'mount -t bpf bpf /sys/fs/bpf',
    'mount --make-shared /sys/fs/bpf',
    ...binds,
    `exec -a '${machineTag(n)}' sleep infinity`,
  ].join('\n');
  const pid = start({
    pidFile: machinePidFile(n),
    logFile: join(n.hostDir, 'logs/machine.log'),
    cmd: 'nsenter',
    args: [
      `--net=/run/netns/${n.netns}`,
      'unshare',
      '--mount',
      '--propagation',
      'private',
      'bash',
      '-c',
      script,
    ],
  });
  return settled(n, pid);
}

/** `pid` once the machine is set up (at most 10 s). */
function settled(n: NodeSpec, pid: number): number {
  for (let t = 0; t < 10_000; t += 100) {
    if (livePid(machinePidFile(n), machineTag(n)) === pid && machineReady(pid)) return pid;
    sleepMs(100);
  }
  return fail(
    `node ${n.name}: its mount namespace did not come up (see ${join(n.hostDir, 'logs/machine.log')})`,
  );
}

/** The cgroup v1 hierarchies mounted here (with `v2`: the cgroup2 mount too, which runc also uses). */
function hierarchies(v2 = false): string[] {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' '))
    .filter((f) => f[2] === 'cgroup' || (v2 && f[2] === 'cgroup2'))
    .map((f) => f[1]!);
}

/** The node's cgroup root in every hierarchy (cpuset's needs its CPUs and memory nodes set). */
function cgroupRootUp(root: string): void {
  for (const h of hierarchies()) {
    const d = join(h, root);
    mkdirSync(d, { recursive: true });
    for (const f of ['cpuset.cpus', 'cpuset.mems'])
      if (existsSync(join(h, f)) && readFileSync(join(d, f), 'utf8').trim() === '')
        writeFileSync(join(d, f), readFileSync(join(h, f), 'utf8'));
  }
}

/** Kills every process under the node's cgroup root and removes it (deepest first). */
export function cgroupRootDown(root: string): void {
  const dirs: string[] = [];
  const walk = (d: string) => {
    dirs.push(d);
    for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) walk(join(d, e.name));
  };
  for (const h of hierarchies(true)) if (existsSync(join(h, root))) walk(join(h, root));
  for (let round = 0; round < 50; round++) {
    let left = 0;
    for (const d of dirs) {
      let procs: string[] = [];
      try {
        procs = readFileSync(join(d, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
      } catch {
        /* removed */
      }
      for (const p of procs) kill(Number(p), 'SIGKILL');
      left += procs.length;
    }
    if (!left) break;
    sleepMs(100);
  }
  for (const d of dirs.sort((a, b) => b.length - a.length))
    for (let i = 0; i < 20; i++) {
      try {
        rmdirSync(d);
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') break;
        sleepMs(100);
      }
    }
}

/** The machine gone: its holder, its namespaces, its end of the link. */
export function machineDown(n: NodeSpec): void {
  const pid = livePid(machinePidFile(n), machineTag(n));
  if (pid) kill(pid, 'SIGKILL');
  cgroupRootDown(n.cgroupRoot!);
  // whatever still runs in the node's network namespace (a host-network container) goes with it
  for (const p of attempt('ip', ['netns', 'pids', n.netns!]).split('\n').filter(Boolean))
    kill(Number(p), 'SIGKILL');
  attempt('ip', ['netns', 'del', n.netns!]);
  attempt('ip', ['link', 'del', hostVeth(n)]);
}
