// The real cluster (tools/cluster): `npm run bench -- cluster`. Needs root and the cluster binaries
// (scripts/setup.sh); without them it reports nothing and says why. Figures: cluster up with cached
// binaries, helm install to Ready, pod Running to its endpoint in the kernel (median, p99 over 50
// pods), a NetworkPolicy change to its rules written on the node, each component's memory. Leaves the
// cluster down afterwards.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { CLUSTER_SH, clusterBin, env as clusterEnv } from '@cascade/cluster/harness';
import type { Figure } from '../report.ts';
import { summarize } from '../report.ts';

const PODS = 50;

export async function run(): Promise<Figure[]> {
  if (process.getuid?.() !== 0 || !clusterBin()) {
    process.stderr.write('[bench] cluster: skipped (needs root and scripts/setup.sh)\n');
    return [];
  }
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
  const fig = (name: string, value: number, unit: string, input: string) =>
    figures.push({ suite: 'cluster', name, value, unit, input });
  const cluster = CLUSTER_SH;

  sh('bash', [cluster, 'down']);
  let t0 = Date.now();
  sh('bash', [cluster, 'up', '--no-cascade'], undefined, 1_800_000);
  fig(
    'cluster up (binaries and images cached)',
    (Date.now() - t0) / 1000,
    's',
    'one node, Cascade not installed',
  );
  let watcher: ChildProcess | undefined;
  try {
    t0 = Date.now();
    sh('bash', [cluster, 'install', '0.1.0', '5m']);
    fig(
      'helm install to every Cascade pod Ready',
      (Date.now() - t0) / 1000,
      's',
      '2+2 controller replicas, 1 agent',
    );

    // 50 pods: the local time each is seen Running (a watch), and the time its address appears in the
    // kernel's endpoint map (polled every 20 ms)
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
          const ev = JSON.parse(text) as {
            object: { metadata: { name: string }; status: { phase?: string; podIP?: string } };
          };
          const p = ev.object;
          if (p.status.phase === 'Running' && p.status.podIP && !running.has(p.metadata.name)) {
            running.set(p.metadata.name, Date.now());
            ipOf.set(p.metadata.name, p.status.podIP);
          }
        } catch {}
      }
    });
    const inKernel = new Map<string, number>();
    const endpoints = (): Set<string> => {
      const dump = JSON.parse(
        sh('bpftool', ['-j', 'map', 'dump', 'pinned', '/sys/fs/bpf/cascade/maps/cascade_endpoints']),
      ) as { key?: string[]; formatted?: { key?: { addr?: number[] } } }[];
      const out = new Set<string>();
      for (const e of dump) {
        const bytes = e.formatted?.key?.addr ?? (e.key ?? []).map((h) => Number.parseInt(h, 16));
        if (bytes.length === 16 && bytes[10] === 255 && bytes[11] === 255) out.add(bytes.slice(12).join('.'));
      }
      return out;
    };
    const pods = Array.from({ length: PODS }, (_, i) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `p${i}`, namespace: 'bench', labels: { app: 'bench', shard: String(i % 5) } },
      spec: {
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
    const deadline = Date.now() + 300_000;
    while (inKernel.size < PODS && Date.now() < deadline) {
      const now = Date.now();
      const have = endpoints();
      for (const [name, ip] of ipOf) if (!inKernel.has(name) && have.has(ip)) inKernel.set(name, now);
      await new Promise((r) => setTimeout(r, 20));
    }
    const lat = [...inKernel].map(([n, t]) => Math.max(0, t - (running.get(n) ?? t)));
    const s = summarize(lat);
    const input = `${inKernel.size} of ${PODS} pods created at once on one node, kernel map polled every 20 ms`;
    fig('pod Running to its endpoint in the kernel, median', s.median, 'ms', input);
    fig('pod Running to its endpoint in the kernel, p99', s.p99, 'ms', input);

    // a NetworkPolicy change to its rules written on the node (the agent's sync count and entries)
    const metrics = () =>
      execFileSync('curl', ['-s', '--max-time', '2', 'http://127.0.0.1:9090/metrics']).toString();
    const syncs = () => Number(/^cascade_datapath_syncs_total (\d+)/m.exec(metrics())?.[1] ?? 0);
    const changes: number[] = [];
    for (let i = 0; i < 10; i++) {
      const before = syncs();
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
      while (syncs() <= before && Date.now() - t < 30_000) await new Promise((r) => setTimeout(r, 10));
      changes.push(Date.now() - t);
    }
    const c = summarize(changes);
    const cin = `10 changes of one NetworkPolicy over ${PODS} pods, from kubectl apply returning to the agent's sync done`;
    fig('NetworkPolicy change to written on the node, median', c.median, 'ms', cin);
    fig('NetworkPolicy change to written on the node, max', c.max, 'ms', cin);

    // memory: resident set of each component's process
    const rss = (pattern: string) =>
      sh('bash', ['-c', `ps -eo rss,args | grep -F '${pattern}' | grep -v grep | awk '{print $1}'`])
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((k) => Number(k) / 1024);
    const min = `one node, ${PODS + 11} pods, a handful of policies`;
    for (const [name, pattern] of [
      ['authpolicy-controller', 'packages/authpolicy/src/main.ts'],
      ['ratelimitpolicy-controller', 'packages/ratelimitpolicy/src/main.ts'],
      ['netpolicy-agent', 'packages/netpolicy/src/agent/main.ts'],
    ] as const) {
      const r = rss(pattern);
      if (r.length) fig(`${name} resident memory (largest replica)`, Math.max(...r), 'MiB', min);
    }
  } finally {
    watcher?.kill();
    sh('bash', [cluster, 'down']);
  }
  return figures;
}
