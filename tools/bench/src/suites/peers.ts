// Cascade beside the peer a user would pick instead, on the same cluster shape and workload:
// `npm run bench -- peers`. For each enforcer (no enforcement, the floor; SIG Network's
// kube-network-policies; Cascade) a fresh three-node flannel cluster of `tools/cluster`, the workload
// of ../peers/workload.ts, and the same measurements:
// - agent CPU seconds and resident memory at 0, 100 and 1,000 NetworkPolicies (taking them in, idle);
// - new TCP connections between pods on two nodes (10,000, connect() to established, p50/p99);
// - an established transfer between pods on two nodes (throughput, the host's CPU per GiB);
// - a new pod's first packets: how many got the wrong verdict before the policy held;
// - a policy change to enforced on every node, read off live traffic (`cascade-probe watch` from a
//   client on each node to a server on each node; 200 changes; p50/p99).
// A fresh cluster per enforcer: nothing one leaves (tc programs, nftables) meets the next. Needs root
// and the cluster binaries; CASCADE_BENCH_PEERS picks enforcers, CASCADE_BENCH_CHANGES the count.
import { spawn } from 'node:child_process';
import { CLUSTER_SH, clusterBin, env, KUBECONFIG, sh } from '@cascade/cluster/harness';
import { KubeClient } from '@cascade/core/kube';
import { KubeConfig } from '@kubernetes/client-node';
import { type Attempt, changeLatencies, firstVerdict, parseWatch, settled } from '../peers/enforcement.ts';
import { cpuBetween, enforcerProcs, hostBusy, processes } from '../peers/procs.ts';
import {
  allowClients,
  backgroundPolicy,
  clientName,
  defaultDeny,
  HTTP,
  NS,
  newPod,
  newPodEgress,
  SINK,
  serverName,
  workload,
} from '../peers/workload.ts';
import type { Figure } from '../report.ts';
import { percentile, summarize } from '../report.ts';

type Enforcer = 'none' | 'kube-network-policies' | 'cascade';
const UP: Record<Enforcer, string[]> = {
  none: ['--no-cascade'],
  'kube-network-policies': ['--netpol', 'kube-network-policies'],
  cascade: [],
};
const LABEL: Record<Enforcer, string> = {
  none: 'no enforcement',
  'kube-network-policies': 'kube-network-policies v0.8.0',
  cascade: 'cascade',
};
const NODES = 3;
const CONNECTS = 10_000;
const TRANSFER_MIB = 1024;
const NEW_PODS = 5;
const WATCH_TIMEOUT_MS = 100;
const WATCH_INTERVAL_MS = 20;
/** A change not enforced on every pair within this is counted as not enforced. */
const CHANGE_LIMIT_MS = 10_000;
const PROBE = '/usr/local/bin/cascade-probe';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function run(): Promise<Figure[]> {
  if (process.getuid?.() !== 0 || !clusterBin())
    throw new Error('peers: needs root and the cluster binaries (scripts/setup.sh)');
  const which = (process.env.CASCADE_BENCH_PEERS ?? 'none,kube-network-policies,cascade').split(
    ',',
  ) as Enforcer[];
  const changes = Number(process.env.CASCADE_BENCH_CHANGES ?? 200);
  const figures: Figure[] = [];
  for (const e of which) {
    if (!(e in UP)) throw new Error(`peers: unknown enforcer ${e} (none, kube-network-policies, cascade)`);
    figures.push(...(await measure(e, changes)));
  }
  return figures;
}

type Obj = { kind: string; metadata: { name: string; namespace?: string } };
const pathOf = (o: Obj) =>
  o.kind === 'Namespace'
    ? '/api/v1/namespaces'
    : o.kind === 'Pod'
      ? `/api/v1/namespaces/${o.metadata.namespace}/pods`
      : `/apis/networking.k8s.io/v1/namespaces/${o.metadata.namespace}/networkpolicies`;

async function measure(enforcer: Enforcer, changes: number): Promise<Figure[]> {
  const figures: Figure[] = [];
  const tag = LABEL[enforcer];
  const fig = (name: string, value: number, unit: string, input: string) =>
    figures.push({ suite: 'peers', name: `${name} [${tag}]`, value, unit, input });
  const log = (m: string) => process.stderr.write(`[bench] peers ${enforcer}: ${m}\n`);

  sh('bash', [CLUSTER_SH, 'down'], { timeoutMs: 300_000 });
  const t0 = Date.now();
  sh('bash', [CLUSTER_SH, 'up', '--nodes', String(NODES), '--cni', 'flannel', ...UP[enforcer]], {
    timeoutMs: 1_800_000,
  });
  log(`cluster up in ${Math.round((Date.now() - t0) / 1000)} s`);
  const kc = new KubeConfig();
  kc.loadFromFile(KUBECONFIG);
  const api = new KubeClient(kc);
  const create = (o: object) => api.request('POST', pathOf(o as Obj), o);
  const remove = (o: object) => api.request('DELETE', `${pathOf(o as Obj)}/${(o as Obj).metadata.name}`);
  const createAll = async (objs: object[], width = 8) => {
    for (let i = 0; i < objs.length; i += width) await Promise.all(objs.slice(i, i + width).map(create));
  };
  try {
    const nodes = (
      await api.request<{ items: { metadata: { name: string } }[] }>('GET', '/api/v1/nodes')
    ).items
      .map((n) => n.metadata.name)
      .sort();
    const objs = workload(nodes);
    await createAll(objs.filter((o) => o.kind === 'Namespace'));
    await createAll([defaultDeny(), allowClients(), ...objs.filter((o) => o.kind !== 'Namespace')]);
    const ips = new Map<string, string>();
    const deadline = Date.now() + 300_000;
    for (;;) {
      const pods = await Promise.all(
        objs
          .filter((o) => o.kind === 'Namespace')
          .map((o) => (o as Obj).metadata.name)
          .map((ns) =>
            api.request<{
              items: {
                metadata: { name: string; namespace: string };
                status: { phase?: string; podIP?: string };
              }[];
            }>('GET', `/api/v1/namespaces/${ns}/pods`),
          ),
      );
      const all = pods.flatMap((p) => p.items);
      for (const p of all)
        if (p.status.podIP) ips.set(`${p.metadata.namespace}/${p.metadata.name}`, p.status.podIP);
      if (
        all.length === objs.filter((o) => o.kind === 'Pod').length &&
        all.every((p) => p.status.phase === 'Running')
      )
        break;
      if (Date.now() > deadline) throw new Error('peers: the workload did not run within 300 s');
      await sleep(500);
    }
    const srv = (i: number) => ips.get(`${NS}/${serverName(i)}`)!;
    const podsIn = `${NODES} nodes (flannel vxlan), ${NODES * 2 + 20} workload pods in 11 namespaces`;

    // agent CPU and memory: idle at 0, then taking in 100 and 900 more policies, idle again
    const agentFigures = async (count: number, added: object[]) => {
      // the floor holds the same policies (nothing reads them)
      if (enforcer === 'none') return void (await createAll(added));
      const a = enforcerProcs();
      if (added.length) {
        await createAll(added);
        await sleep(20_000);
      }
      const b = enforcerProcs();
      await sleep(30_000);
      const c = enforcerProcs();
      const input = `${count} NetworkPolicies in 10 namespaces, ${podsIn}`;
      for (const role of new Set(c.map((p) => p.role))) {
        const procs = c.filter((p) => p.role === role);
        if (added.length)
          fig(
            `${role}: CPU to take in ${added.length} policies (writes + 20 s), all nodes`,
            cpuBetween(a, b).get(role) ?? 0,
            's',
            input,
          );
        fig(
          `${role}: idle CPU at ${count} policies, all nodes`,
          ((cpuBetween(b, c).get(role) ?? 0) * 60) / 30,
          's/min',
          input,
        );
        fig(
          `${role}: resident memory at ${count} policies, largest`,
          Math.max(...procs.map((p) => p.rssMiB)),
          'MiB',
          input,
        );
      }
      if (!c.length) throw new Error(`peers: no ${tag} process found on the host`);
    };
    await agentFigures(0, []);
    await agentFigures(
      100,
      Array.from({ length: 100 }, (_, i) => backgroundPolicy(i)),
    );

    // new connections across nodes
    const probeOut = (pod: string, args: string[], timeoutMs = 600_000) =>
      sh('kubectl', ['exec', '-n', NS, pod, '--', PROBE, ...args], { timeoutMs });
    log('connections');
    const times = probeOut(clientName(0), ['connect-times', srv(1), String(HTTP), String(CONNECTS)])
      .trim()
      .split('\n')
      .map(Number);
    const ok = times.filter((t) => t >= 0).sort((x, y) => x - y);
    const cin = `${CONNECTS} new TCP connections one after another, client and server on two nodes, 100 policies; ${podsIn}`;
    fig('new connection across nodes (connect to established), p50', percentile(ok, 50), 'us', cin);
    fig('new connection across nodes (connect to established), p99', percentile(ok, 99), 'us', cin);
    fig('new connections across nodes that failed', CONNECTS - ok.length, 'connections', cin);

    // an established transfer: throughput, and the host's CPU per GiB above a 1 MiB run's cost
    log('transfer');
    const send = (mib: number) => {
      const c0 = hostBusy();
      const [bytes, us] = probeOut(clientName(0), ['send', srv(1), String(SINK), String(mib)])
        .trim()
        .split(' ')
        .map(Number);
      return { bytes: bytes!, us: us!, cpu: hostBusy() - c0 };
    };
    const runs = [0, 1, 2].map(() => {
      const small = send(1);
      const big = send(TRANSFER_MIB);
      return {
        mibps: big.bytes / 2 ** 20 / (big.us / 1e6),
        cpuPerGiB: (big.cpu - small.cpu) / (TRANSFER_MIB / 1024),
      };
    });
    const tin = `${TRANSFER_MIB} MiB over one TCP connection between pods on two nodes, median of 3; CPU: every CPU of the host, less a 1 MiB run's`;
    fig(
      'established transfer across nodes, throughput',
      summarize(runs.map((r) => r.mibps)).median,
      'MiB/s',
      tin,
    );
    fig(
      'established transfer across nodes, host CPU',
      summarize(runs.map((r) => r.cpuPerGiB)).median,
      's/GiB',
      tin,
    );

    if (enforcer !== 'none') {
      // a new pod's first packets: egress to the sink port is denied from its first packet on
      log('new pods');
      await create(newPodEgress());
      await sleep(5_000);
      // per target: its allowed port (a wrong verdict denies: fails closed) and its denied port (a
      // wrong verdict admits: fails open)
      const kinds = [
        {
          pair: 0,
          allow: true,
          what: 'allowed port, wrongly denied',
          wrong: [] as number[],
          toRight: [] as number[],
          never: 0,
        },
        {
          pair: 1,
          allow: false,
          what: 'denied port, wrongly allowed',
          wrong: [] as number[],
          toRight: [] as number[],
          never: 0,
        },
      ];
      for (let i = 0; i < NEW_PODS; i++) {
        const name = `new-${i}`;
        const target = srv((i + 1) % NODES);
        await create(newPod(name, nodes[i % NODES]!, [`${target}/${HTTP}`, `${target}/${SINK}`], 3000));
        const path = `/api/v1/namespaces/${NS}/pods/${name}`;
        const end = Date.now() + 120_000;
        for (;;) {
          const phase = (await api.request<{ status: { phase?: string } }>('GET', path)).status.phase;
          if (phase === 'Succeeded') break;
          if (phase === 'Failed' || Date.now() > end)
            throw new Error(`peers: pod ${name} did not finish its probes (phase ${phase})`);
          await sleep(250);
        }
        const attempts = parseWatch(name, String(await api.request('GET', `${path}/log`)));
        for (const k of kinds) {
          const v = firstVerdict(attempts, `${name}>${k.pair}`, k.allow);
          if (v.attempts === 0)
            throw new Error(`peers: pod ${name} made no attempt to its ${k.what.split(',')[0]}`);
          k.wrong.push(v.wrong);
          if (v.toRightMs === undefined) k.never++;
          else k.toRight.push(v.toRightMs);
        }
        await api.request('DELETE', `${path}?gracePeriodSeconds=0`);
      }
      const nin = `${NEW_PODS} new pods (on each node in turn), each probing from its start a server on another node every 10 ms for 3 s, on the port its egress allows and on one it denies`;
      for (const k of kinds) {
        fig(`new pod's first packets to its ${k.what}, max`, Math.max(...k.wrong), 'packets', nin);
        fig(`new pod: ${k.what.split(',')[0]} never right within 3 s`, k.never, `of ${NEW_PODS} pods`, nin);
        if (k.toRight.length)
          fig(
            `new pod: first packet to its ${k.what.split(',')[0]} to the right verdict, max`,
            Math.max(...k.toRight),
            'ms',
            nin,
          );
      }

      // policy changes read off live traffic
      log(`${changes} policy changes`);
      const c = await changesEnforced(changes, nodes.length, srv, create, remove, log);
      const chin = `allow-clients deleted and created in turn (${c.done} changes, 100 policies), enforced when every client (one per node) sees it towards every server (one per node); new connections every ${WATCH_INTERVAL_MS} ms per pair (the resolution), ${WATCH_TIMEOUT_MS} ms to answer`;
      fig('policy change enforced on every node', c.enforced, `of ${c.done}`, chin);
      if (c.latencies.length) {
        const s = [...c.latencies].sort((x, y) => x - y);
        fig('policy change to enforced on every node, p50', percentile(s, 50), 'ms', chin);
        fig('policy change to enforced on every node, p99', percentile(s, 99), 'ms', chin);
      }
    }

    await agentFigures(
      1000,
      Array.from({ length: 900 }, (_, i) => backgroundPolicy(100 + i)),
    );
  } finally {
    killWatches();
    sh('bash', [CLUSTER_SH, 'down'], { timeoutMs: 300_000 });
  }
  return figures;
}

/** Every `cascade-probe watch` on the host (every node's pods are its processes). */
function killWatches(): void {
  for (const { pid, argv } of processes())
    if (argv[0]?.endsWith('cascade-probe') && argv[1] === 'watch')
      try {
        process.kill(pid, 'SIGKILL');
      } catch {} // gone meanwhile
}

async function changesEnforced(
  count: number,
  nodes: number,
  srv: (i: number) => string,
  create: (o: object) => Promise<unknown>,
  remove: (o: object) => Promise<unknown>,
  log: (m: string) => void,
): Promise<{ done: number; enforced: number; latencies: number[] }> {
  const pairs: string[] = [];
  const attempts: Attempt[] = [];
  const streams = Array.from({ length: nodes }, (_, c) => {
    const client = clientName(c);
    for (let t = 0; t < nodes; t++) pairs.push(`${client}>${t}`);
    const p = spawn(
      'kubectl',
      [
        'exec',
        '-n',
        NS,
        client,
        '--',
        PROBE,
        'watch',
        String(WATCH_TIMEOUT_MS),
        String(WATCH_INTERVAL_MS),
        String(Math.min(3_600_000, count * 15_000 + 60_000)),
        ...Array.from({ length: nodes }, (_, t) => `${srv(t)}/${HTTP}`),
      ],
      { env: env(), stdio: ['ignore', 'pipe', 'ignore'] },
    );
    let buf = '';
    p.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      const cut = buf.lastIndexOf('\n');
      if (cut < 0) return;
      attempts.push(...parseWatch(client, buf.slice(0, cut)));
      buf = buf.slice(cut + 1);
    });
    return p;
  });
  try {
    // the start: every pair allowed (allow-clients exists)
    const start = Date.now();
    while (!settled(attempts, pairs, start, true, 5)) {
      if (Date.now() - start > 30_000)
        throw new Error('peers: the clients do not reach the servers before the changes');
      await sleep(50);
    }
    const writes: { at: number; allow: boolean }[] = [];
    const denies: boolean[] = [];
    let from = attempts.length;
    for (let i = 0; i < count; i++) {
      const allow = i % 2 === 1;
      const at = Date.now();
      await (allow ? create(allowClients()) : remove(allowClients()));
      writes.push({ at, allow });
      const recent = () => attempts.slice(from);
      while (!settled(recent(), pairs, at, allow) && Date.now() - at < CHANGE_LIMIT_MS) await sleep(10);
      const ok = settled(recent(), pairs, at, allow);
      // the attempts still in flight decide before the next change
      await sleep(WATCH_TIMEOUT_MS + 50);
      from = Math.max(0, attempts.length - pairs.length * 50);
      if (!allow) denies.push(ok);
      if ((i + 1) % 20 === 0) log(`${i + 1} changes`);
      // an enforcer that never denies: two deletes show it (its "allows" are what it always does);
      // 200 changes of 10 s each would take over half an hour
      if (denies.length === 2 && !denies.some(Boolean) && allow) break;
    }
    killWatches();
    await sleep(200);
    const latencies = changeLatencies(attempts, pairs, writes, CHANGE_LIMIT_MS).filter(
      (v): v is number => v !== undefined,
    );
    return { done: writes.length, enforced: latencies.length, latencies };
  } finally {
    for (const s of streams) s.kill();
  }
}
