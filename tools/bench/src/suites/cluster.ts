// The real cluster (tools/cluster): `npm run bench -- cluster`. Needs root and the cluster binaries
// (scripts/setup.sh); without them it reports nothing and says why. Run for one node (the host) and
// for three (each its own namespaces): cluster up with cached binaries, helm install to Ready, pod
// Running to its address in every agent's kernel maps (median, p99 over 50 pods spread over the
// nodes), a NetworkPolicy change to every agent synced, each agent's memory, and the first packet
// of a new connection (TCP connect) between pods on one node and across nodes. Leaves the cluster
// down afterwards.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { CLUSTER_SH, clusterBin, env as clusterEnv, onNode as nodeCommand } from '@cascade/cluster/harness';
import type { Figure } from '../report.ts';
import { summarize } from '../report.ts';

const PODS = 50;
const CONNECTS = 200;

export async function run(): Promise<Figure[]> {
  if (process.getuid?.() !== 0 || !clusterBin()) {
    process.stderr.write('[bench] cluster: skipped (needs root and scripts/setup.sh)\n');
    return [];
  }
  const counts = (process.env.CASCADE_BENCH_NODES ?? '1,3').split(',').map(Number);
  const figures: Figure[] = [];
  for (const n of counts) figures.push(...(await measure(n)));
  return figures;
}

type Node = { name: string; ip: string };

async function measure(nodes: number): Promise<Figure[]> {
  const env = clusterEnv();
  const sh = (cmd: string, args: string[], input?: string, timeout = 600_000) =>
    execFileSync(cmd, args, {
      env,
      input,
      timeout,
      maxBuffer: 64 << 20,
      stdio: ['pipe', 'pipe', 'pipe'],
    }).toString();
  const kubectl = (...args: string[]) => sh('kubectl', args);
  const figures: Figure[] = [];
  const where = nodes === 1 ? 'one node (the host)' : `${nodes} nodes (own namespaces)`;
  const fig = (name: string, value: number, unit: string, input: string) =>
    figures.push({
      suite: 'cluster',
      name: `${name} [${nodes} node${nodes > 1 ? 's' : ''}]`,
      value,
      unit,
      input,
    });
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  sh('bash', [CLUSTER_SH, 'down']);
  let t0 = Date.now();
  sh('bash', [CLUSTER_SH, 'up', '--nodes', String(nodes), '--no-cascade'], undefined, 1_800_000);
  fig(
    'cluster up (binaries and images cached)',
    (Date.now() - t0) / 1000,
    's',
    `${where}, Cascade not installed`,
  );
  let watcher: ChildProcess | undefined;
  try {
    t0 = Date.now();
    sh('bash', [CLUSTER_SH, 'install', '0.1.0', '5m']);
    fig(
      'helm install to every Cascade pod Ready',
      (Date.now() - t0) / 1000,
      's',
      `2+2 controller replicas, ${nodes} agent(s)`,
    );
    const list = (
      JSON.parse(kubectl('get', 'nodes', '-o', 'json')) as {
        items: { metadata: { name: string }; status: { addresses: { type: string; address: string }[] } }[];
      }
    ).items.map((x) => ({
      name: x.metadata.name,
      ip: x.status.addresses.find((a) => a.type === 'InternalIP')!.address,
    }));
    // a command in a node's namespaces (network and mount: its own bpffs); on the host for one node
    const onNode = (node: Node, cmd: string, args: string[]) =>
      sh(...nodeCommand(node.name, cmd, args, { mount: true }));
    // the IPv4 addresses a pinned map of the node holds as keys (endpoint map: local pods; hosts map:
    // every pod and node address the agent learned)
    const keys = (node: Node, map: string): Set<string> => {
      const dump = JSON.parse(
        onNode(node, 'bpftool', ['-j', 'map', 'dump', 'pinned', `/sys/fs/bpf/cascade/maps/${map}`]),
      ) as {
        key?: string[];
        formatted?: { key?: { addr?: number[] } };
      }[];
      const out = new Set<string>();
      for (const e of dump) {
        const bytes = e.formatted?.key?.addr ?? (e.key ?? []).map((h) => Number.parseInt(h, 16));
        if (bytes.length >= 16 && bytes[10] === 255 && bytes[11] === 255)
          out.add(bytes.slice(12, 16).join('.'));
      }
      return out;
    };

    // 50 pods, spread over the nodes: the local time each is seen Running (a watch), and the time its
    // address is in every agent's maps (its own node's endpoints, every other node's hosts), polled
    kubectl('create', 'namespace', 'bench');
    const running = new Map<string, number>();
    const ipOf = new Map<string, string>();
    watcher = spawn(
      'kubectl',
      ['get', 'pods', '-n', 'bench', '--watch', '-o', 'json', '--output-watch-events'],
      { env },
    );
    let buf = '';
    watcher.stdout?.on('data', (d: Buffer) => {
      buf += d.toString();
      let i: number;
      // one compact JSON event per line
      while ((i = buf.indexOf('\n')) >= 0) {
        const text = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try {
          const p = (
            JSON.parse(text) as {
              object: { metadata: { name: string }; status: { phase?: string; podIP?: string } };
            }
          ).object;
          if (p.status.phase === 'Running' && p.status.podIP && !running.has(p.metadata.name)) {
            running.set(p.metadata.name, Date.now());
            ipOf.set(p.metadata.name, p.status.podIP);
          }
        } catch {}
      }
    });
    const nodeOfPod = (i: number) => list[i % list.length]!;
    const pods = Array.from({ length: PODS }, (_, i) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `p${i}`, namespace: 'bench', labels: { app: 'bench', shard: String(i % 5) } },
      spec: {
        nodeName: nodeOfPod(i).name,
        terminationGracePeriodSeconds: 1,
        securityContext: { runAsNonRoot: true, runAsUser: 65532 },
        containers: [
          {
            name: 'probe',
            image: 'cascade.local/cascade-probe:cluster',
            imagePullPolicy: 'Never',
            args: ['serve', '8080'],
          },
        ],
      },
    }));
    sh('kubectl', ['apply', '-f', '-'], pods.map((p) => JSON.stringify(p)).join('\n'));
    const everywhere = new Map<string, number>();
    const deadline = Date.now() + 300_000;
    const pollStart = Date.now();
    let polls = 0;
    while (everywhere.size < PODS && Date.now() < deadline) {
      polls++;
      const now = Date.now();
      const views = list.map((node) => ({
        node,
        endpoints: keys(node, 'cascade_endpoints'),
        hosts: keys(node, 'cascade_hosts'),
      }));
      for (const [name, ip] of ipOf) {
        if (everywhere.has(name)) continue;
        const home = nodeOfPod(Number(name.slice(1))).name;
        if (views.every((v) => (v.node.name === home ? v.endpoints.has(ip) : v.hosts.has(ip))))
          everywhere.set(name, now);
      }
      await sleep(20);
    }
    const lat = [...everywhere].map(([n, t]) => Math.max(0, t - (running.get(n) ?? t)));
    const s = summarize(lat);
    // the poll's period is the figure's resolution: reading every node's two maps takes time
    const period = Math.round((Date.now() - pollStart) / Math.max(1, polls));
    const input = `${everywhere.size} of ${PODS} pods created at once, spread over ${where}; every node's maps polled, one poll every ${period} ms on average (the resolution)`;
    fig('pod Running to its address in every agent, median', s.median, 'ms', input);
    fig('pod Running to its address in every agent, p99', s.p99, 'ms', input);

    // a NetworkPolicy change to its rules written on every node (each agent's sync count)
    const syncs = (node: Node) =>
      Number(
        /^cascade_datapath_syncs_total (\d+)/m.exec(
          onNode(node, 'curl', ['-s', '--max-time', '2', 'http://127.0.0.1:9090/metrics']),
        )?.[1] ?? 0,
      );
    const changes: number[] = [];
    for (let i = 0; i < 10; i++) {
      const before = list.map(syncs);
      const np = {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { name: 'bench', namespace: 'bench' },
        spec: {
          podSelector: { matchLabels: { shard: String(i % 5) } },
          ingress: [
            {
              from: [{ podSelector: { matchLabels: { shard: String((i + 1) % 5) } } }],
              ports: [{ port: 8080 + i }],
            },
          ],
        },
      };
      const t = Date.now();
      sh('kubectl', ['apply', '-f', '-'], JSON.stringify(np));
      const pending = new Set(list.map((_, k) => k));
      while (pending.size && Date.now() - t < 30_000) {
        for (const k of [...pending]) if (syncs(list[k]!) > before[k]!) pending.delete(k);
        if (pending.size) await sleep(10);
      }
      changes.push(Date.now() - t);
    }
    const c = summarize(changes);
    const cin = `10 changes of one NetworkPolicy over ${PODS} pods on ${where}, from kubectl apply returning to every agent's sync done`;
    fig('NetworkPolicy change to every agent synced, median', c.median, 'ms', cin);
    fig('NetworkPolicy change to every agent synced, max', c.max, 'ms', cin);

    // memory: resident set of each agent (its node from its cgroup) and of the controllers
    const procs = sh('bash', ['-c', "ps -eo pid,rss,args | grep -F 'src/' | grep -v grep || true"])
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => l.trim().split(/\s+/))
      .map(([pid, rss, ...args]) => ({ pid: pid!, rss: Number(rss) / 1024, args: args.join(' ') }));
    const min = `${where}, ${PODS + 11} pods, a handful of policies`;
    const agents = procs.filter((p) => p.args.includes('packages/netpolicy/src/agent/main.ts'));
    for (const a of agents) {
      const cg = existsSync(`/proc/${a.pid}/cgroup`) ? readFileSync(`/proc/${a.pid}/cgroup`, 'utf8') : '';
      const node = /\/(cascade-node-\d+)\//.exec(cg)?.[1] ?? 'the host';
      fig(`netpolicy-agent resident memory on ${node}`, a.rss, 'MiB', min);
    }
    for (const [name, pattern] of [
      ['authpolicy-controller', 'packages/authpolicy/src/main.ts'],
      ['ratelimitpolicy-controller', 'packages/ratelimitpolicy/src/main.ts'],
    ] as const) {
      const r = procs.filter((p) => p.args.includes(pattern)).map((p) => p.rss);
      if (r.length) fig(`${name} resident memory (largest replica)`, Math.max(...r), 'MiB', min);
    }

    // the first packet of new connections: TCP connects from p0 (first node) to a pod on its node and
    // to one on the next node (each SYN a new flow: egress and ingress judged, conntrack written)
    const samePeer = list.length > 1 ? `p${list.length}` : 'p1';
    for (const [what, peer] of [
      ['same node', samePeer],
      ...(list.length > 1 ? [['across nodes', 'p1']] : []),
    ] as const) {
      const ip = ipOf.get(peer);
      if (!ip) continue;
      const out = sh('kubectl', [
        'exec',
        '-n',
        'bench',
        'p0',
        '--',
        '/usr/local/bin/cascade-probe',
        'connect-times',
        ip,
        '8080',
        String(CONNECTS),
      ]).trim();
      const times = out
        .split(/\s+/)
        .map(Number)
        .filter((x) => Number.isFinite(x));
      if (times.length < CONNECTS / 2) continue;
      const t = summarize(times.map((us) => us / 1000));
      const tin = `${times.length} new TCP connections pod to pod (${what}), connect() to established, in the source pod`;
      fig(`first packet round trip (TCP connect), ${what}, median`, t.median, 'ms', tin);
      fig(`first packet round trip (TCP connect), ${what}, p99`, t.p99, 'ms', tin);
    }
  } finally {
    watcher?.kill();
    sh('bash', [CLUSTER_SH, 'down']);
  }
  return figures;
}
