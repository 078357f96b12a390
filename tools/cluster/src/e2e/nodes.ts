// Three nodes on this machine (npm run cluster -- up --nodes 3): cross-node enforcement on real
// traffic, NodePorts dialled on nodes without a backend, and a node that fails and comes back.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import {
  CASCADECTL,
  CLUSTER_SH,
  cascadectl,
  clusterBin,
  KUBECONFIG,
  kubectlJson,
  NODE,
  sh,
  shAsync,
  until,
} from '../harness.ts';
import { agreesWithSimulate, applyExample, liveMapsHold, tracesAgree } from './netpol.ts';
import { measured, mismatches, predicted, probesFor } from './probes.ts';
import { figures, NODE_PORT, net, work } from './shared.ts';

export const NODES = 3;
const servers: ChildProcess[] = [];

export interface LiveNode {
  name: string;
  ip: string;
}
export const liveNodes = (): LiveNode[] =>
  kubectlJson<{
    items: { metadata: { name: string }; status: { addresses: { type: string; address: string }[] } }[];
  }>('get', 'nodes')
    .items.map((n) => ({
      name: n.metadata.name,
      ip: n.status.addresses.find((a) => a.type === 'InternalIP')!.address,
    }))
    .sort((a, b) => a.name.localeCompare(b.name));

/** The pid of the process holding a namespaced node's namespaces. */
export const machinePid = (node: string) =>
  readFileSync(`/run/cascade-cluster/nodes/${node}/machine.pid`, 'utf8').trim();

/** A command run inside a node's network namespace (a process on that "machine"). */
export const onNode = (node: string, cmd: string, args: string[]) =>
  ['nsenter', ['-t', machinePid(node), '-n', '--', cmd, ...args]] as const;

export function stopServers(): void {
  for (const s of servers.splice(0)) s.kill();
}

/** npm run cluster -- up --nodes 3: every node Ready, an agent Ready on each */
export function threeNodesUp(): void {
  const t0 = Date.now();
  sh('bash', [CLUSTER_SH, 'up', '--nodes', String(NODES)], { timeoutMs: 20 * 60_000 });
  figures.threeNodeUpSeconds = (Date.now() - t0) / 1000;
  const nodes = liveNodes();
  expect(nodes.map((n) => n.name)).toEqual(['cascade-node-1', 'cascade-node-2', 'cascade-node-3']);
  const agents = kubectlJson<{
    items: { spec: { nodeName: string }; status: { conditions?: { type: string; status: string }[] } }[];
  }>('get', 'pods', '-n', 'cascade-system', '-l', 'app.kubernetes.io/name=netpolicy-agent').items;
  expect(
    agents
      .filter((a) => a.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
      .map((a) => a.spec.nodeName)
      .sort(),
  ).toEqual(nodes.map((n) => n.name));
  // each node is its own machine: its agent pinned into its own bpffs, not the host's
  for (const n of nodes) {
    const [cmd, args] = onNode(n.name, 'ip', ['-o', 'link', 'show']);
    const links = sh('nsenter', [
      '-t',
      machinePid(n.name),
      '-m',
      '-n',
      '--',
      'ls',
      '/sys/fs/bpf/cascade/progs',
    ]);
    expect(links).toContain('from_endpoint');
    expect(sh(cmd, [...args])).toContain('cascade0');
  }
}

/** examples/netpol spread over three nodes: every connection gets the verdict netpol simulate gives */
export async function crossNodeEnforcement(): Promise<void> {
  const nodes = liveNodes();
  const probe = join(clusterBin()!, 'cascade-probe');
  for (const n of nodes) {
    const [cmd, args] = onNode(n.name, probe, ['serve', String(NODE_PORT)]);
    servers.push(spawn(cmd, [...args], { stdio: 'ignore' }));
  }
  const nodeOf = applyExample(nodes.map((n) => n.name));
  expect(new Set(nodeOf.values()).size).toBe(nodes.length);
  const ipOf = new Map(nodes.map((n) => [n.name, n.ip]));
  const probes = probesFor(
    net.pods,
    true,
    nodes.map((n) => n.ip),
  );
  const cross = probes.filter((p) =>
    p.to.includes('/') ? nodeOf.get(p.from) !== nodeOf.get(p.to) : ipOf.get(nodeOf.get(p.from)!) !== p.to,
  );
  figures.crossNodeProbes = cross.length;
  figures.threeNodeProbes = probes.length;
  const want = await agreesWithSimulate(probes);
  // both verdicts occur across nodes, to pods and to nodes
  const crossWant = new Set(
    cross.map((p) => `${p.to.includes('/') ? 'pod' : 'node'} ${want[probes.indexOf(p)]}`),
  );
  expect([...crossWant].sort()).toEqual(['node ALLOW', 'node DENY', 'pod ALLOW', 'pod DENY']);
  let drift = 0;
  for (const n of nodes)
    drift += await liveMapsHold(
      n.name,
      [...nodeOf].filter(([, node]) => node === n.name).map(([pod]) => net.podIp.get(pod)!),
    );
  figures.threeNodeDriftLines = drift;
  await tracesAgree(probes, want);
}

/**
 * NodePorts dialled on nodes without the backend: judged against the backend's ingress with the
 * source the packet carries, never as the backend's own node.
 */
export async function nodePortAcrossNodes(): Promise<void> {
  const [n1, n2, n3] = liveNodes() as [LiveNode, LiveNode, LiveNode];
  const NS = 'np-e2e';
  const pod = (name: string, labels: Record<string, string>, node: string) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NS, labels },
    spec: {
      nodeName: node,
      terminationGracePeriodSeconds: 1,
      securityContext: { runAsNonRoot: true, runAsUser: 65532 },
      containers: [
        {
          name: 'app',
          image: 'cascade.local/cascade-probe:cluster',
          imagePullPolicy: 'Never',
          args: ['serve', '8080'],
          ports: [{ name: 'http', containerPort: 8080 }],
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ['ALL'] },
          },
        },
      ],
    },
  });
  const objects = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } },
    pod('web', { app: 'web' }, n3.name),
    pod('client', { role: 'client' }, n1.name),
    pod('stranger', { role: 'stranger' }, n1.name),
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: NS },
      spec: {
        type: 'NodePort',
        selector: { app: 'web' },
        ports: [{ name: 'http', port: 80, targetPort: 'http' }],
      },
    },
    {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'web-from-clients', namespace: NS },
      spec: {
        podSelector: { matchLabels: { app: 'web' } },
        policyTypes: ['Ingress'],
        ingress: [
          { from: [{ podSelector: { matchLabels: { role: 'client' } } }], ports: [{ port: 'http' }] },
        ],
      },
    },
  ];
  sh('kubectl', ['apply', '-f', '-'], { input: objects.map((o) => stringify(o)).join('---\n') });
  sh('kubectl', ['wait', '-n', NS, '--for=condition=Ready', 'pod', '--all', '--timeout=120s'], {
    timeoutMs: 130_000,
  });
  const svc = kubectlJson<{ spec: { clusterIP: string; ports: { nodePort: number }[] } }>(
    'get',
    'service',
    '-n',
    NS,
    'web',
  ).spec;
  const nodePort = svc.ports[0]!.nodePort;
  const probe = join(clusterBin()!, 'cascade-probe');
  const fromPod = (name: string, ip: string, port: number) =>
    shAsync(
      'kubectl',
      ['exec', '-n', NS, name, '--', '/usr/local/bin/cascade-probe', 'probe', 'tcp', ip, String(port), '800'],
      60_000,
    ).then(
      (o) => o.trim().split(' ')[0],
      (e: unknown) =>
        String((e as { stdout?: string }).stdout ?? e)
          .trim()
          .split(' ')[0],
    );
  // outside the cluster: the host, on the nodes' link (10.250.0.1)
  const fromOutside = (ip: string, port: number) =>
    shAsync(probe, ['probe', 'tcp', ip, String(port), '800'], 30_000).then(
      (o) => o.trim().split(' ')[0],
      (e: unknown) =>
        String((e as { stdout?: string }).stdout ?? e)
          .trim()
          .split(' ')[0],
    );
  const checks: {
    what: string;
    from: string;
    to: string;
    port: number;
    run: () => Promise<string | undefined>;
  }[] = [
    {
      what: 'client -> ClusterIP (backend on another node)',
      from: `${NS}/client`,
      to: svc.clusterIP,
      port: 80,
      run: () => fromPod('client', svc.clusterIP, 80),
    },
    {
      what: 'stranger -> ClusterIP',
      from: `${NS}/stranger`,
      to: svc.clusterIP,
      port: 80,
      run: () => fromPod('stranger', svc.clusterIP, 80),
    },
    {
      what: "client -> its own node's NodePort (backend elsewhere)",
      from: `${NS}/client`,
      to: n1.ip,
      port: nodePort,
      run: () => fromPod('client', n1.ip, nodePort),
    },
    {
      what: "stranger -> its own node's NodePort",
      from: `${NS}/stranger`,
      to: n1.ip,
      port: nodePort,
      run: () => fromPod('stranger', n1.ip, nodePort),
    },
    {
      what: 'client -> NodePort of a node without the backend',
      from: `${NS}/client`,
      to: n2.ip,
      port: nodePort,
      run: () => fromPod('client', n2.ip, nodePort),
    },
    {
      what: 'stranger -> NodePort of a node without the backend',
      from: `${NS}/stranger`,
      to: n2.ip,
      port: nodePort,
      run: () => fromPod('stranger', n2.ip, nodePort),
    },
    {
      what: 'outside -> NodePort of a node without the backend',
      from: '10.250.0.1',
      to: n2.ip,
      port: nodePort,
      run: () => fromOutside(n2.ip, nodePort),
    },
    {
      what: "outside -> NodePort of the backend's node",
      from: '10.250.0.1',
      to: n3.ip,
      port: nodePort,
      run: () => fromOutside(n3.ip, nodePort),
    },
  ];
  const file = join(work, 'nodeport-probes.yaml');
  writeFileSync(
    file,
    checks
      .map((c) => `- ${JSON.stringify({ from: c.from, to: c.to, protocol: 'TCP', port: c.port })}`)
      .join('\n'),
  );
  const sim = JSON.parse(
    cascadectl('netpol', 'simulate', '--kubeconfig', KUBECONFIG, '--probes', file, '-o', 'json'),
  ) as {
    verdict: string;
    service?: { source?: string };
  }[];
  // one backend: one result per probe
  expect(sim.length).toBe(checks.length);
  const want = sim.map((r) => r.verdict.toUpperCase());
  // the security property first: nobody but the client reaches the backend, whichever node is dialled
  expect(want).toEqual(['ALLOW', 'DENY', 'ALLOW', 'DENY', 'DENY', 'DENY', 'DENY', 'DENY']);
  expect(sim[4]!.service?.source).toBe(n2.ip);
  let wrong: string[] = [];
  await until('NodePort verdicts as netpol simulate says', 60, async () => {
    wrong = [];
    for (const [i, c] of checks.entries()) {
      const have = await c.run();
      if (have !== want[i]) wrong.push(`${c.what}: simulate ${want[i]}, kernel ${have}`);
    }
    return wrong.length ? undefined : true;
  }).catch(() => undefined);
  expect(wrong).toEqual([]);
  figures.nodePortChecks = checks.length;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const podKey = (p: { metadata: { name: string; namespace?: string } }) =>
  `${p.metadata.namespace}/${p.metadata.name}`;

/** Runs rounds of `probes` until stopped; every disagreement with `want` is kept. */
function probeLoop(probes: ReturnType<typeof probesFor>) {
  const want = predicted(probes);
  const wrong: string[] = [];
  let rounds = 0;
  let running = true;
  const done = (async () => {
    while (running) {
      const have = await measured(probes).catch((e: unknown) => [`error ${String(e).slice(0, 200)}`]);
      if (have.length !== probes.length) wrong.push(have[0]!);
      else wrong.push(...mismatches(probes, want, have));
      rounds++;
    }
  })();
  return {
    stop: async () => {
      running = false;
      await done;
      return { rounds, wrong };
    },
  };
}

const agentReadyOn = (node: string, after = '') =>
  until(`the agent on ${node} Ready`, 180, () => {
    const a = kubectlJson<{
      items: {
        metadata: { uid: string };
        spec: { nodeName: string };
        status: {
          conditions?: { type: string; status: string }[];
          containerStatuses?: { restartCount: number; ready: boolean }[];
        };
      }[];
    }>('get', 'pods', '-n', 'cascade-system', '-l', 'app.kubernetes.io/name=netpolicy-agent').items.find(
      (p) => p.spec.nodeName === node,
    );
    const c = a?.status.containerStatuses?.[0];
    return c?.ready && `${a!.metadata.uid}/${c.restartCount}` !== after
      ? `${a!.metadata.uid}/${c.restartCount}`
      : undefined;
  });

/** A node's live hosts map (the addresses its kernel knows), through its agent. */
async function liveHosts(node: string): Promise<Set<string>> {
  const out = await shAsync(NODE, [
    CASCADECTL,
    'netpol',
    'maps',
    '--node',
    node,
    '--kubeconfig',
    KUBECONFIG,
    '-o',
    'json',
  ]).catch((e: unknown) => String((e as { stdout?: string }).stdout ?? ''));
  const m = /\{[\s\S]*\}\s*$/.exec(out);
  const live = (JSON.parse(m![0]) as { live: { hosts: { address: string }[] } }).live;
  return new Set(live.hosts.map((h) => h.address.replace(/\/\d+$/, '')));
}

/**
 * A node stops and comes back, twice: briefly (its agent restarts and adopts its pins), then long
 * enough for the node controller to evict its pods (they leave every other agent once deleted).
 * Probe loops on the other nodes run throughout: no wrong verdict.
 */
export async function nodeFailure(): Promise<void> {
  const [, , n3] = liveNodes() as [LiveNode, LiveNode, LiveNode];
  const nodeOf = new Map(
    net.pods.map((p) => [
      podKey(p),
      kubectlJson<{ spec: { nodeName: string } }>('get', 'pod', '-n', p.metadata.namespace!, p.metadata.name)
        .spec.nodeName,
    ]),
  );
  const survivors = net.pods.filter((p) => nodeOf.get(podKey(p)) !== n3.name);
  const onN3 = net.pods.filter((p) => nodeOf.get(podKey(p)) === n3.name);
  expect(onN3.length).toBeGreaterThan(0);
  // 1. a short outage, back before the node controller notices: the node's kernel keeps enforcing
  // (its pods keep running, their programs stay attached), then its new agent adopts the pins
  const agentBefore = await agentReadyOn(n3.name);
  const toAll = probesFor(survivors, false, []).filter((p) => p.port === net.ports[0]);
  const short = probeLoop(toAll);
  await sleep(3000);
  let t0 = Date.now();
  sh('bash', [CLUSTER_SH, 'node', 'stop', n3.name], { timeoutMs: 120_000 });
  await sleep(8000);
  sh('bash', [CLUSTER_SH, 'node', 'start', n3.name], { timeoutMs: 600_000 });
  await agentReadyOn(n3.name, agentBefore);
  figures.nodeRestartToAgentReadySeconds = (Date.now() - t0) / 1000;
  await sleep(5000);
  const a = await short.stop();
  // 2. a long outage: NotReady, its pods evicted (they still run there, unmanaged: they keep their
  // addresses in every agent's maps until deleted), then back: the evicted pods end and leave
  const long = probeLoop(
    probesFor(survivors, false, []).filter(
      (p) => p.port === net.ports[0] && !onN3.some((q) => podKey(q) === p.to),
    ),
  );
  t0 = Date.now();
  sh('bash', [CLUSTER_SH, 'node', 'stop', n3.name], { timeoutMs: 120_000 });
  await until(`${n3.name} NotReady`, 120, () =>
    kubectlJson<{ status: { conditions: { type: string; status: string }[] } }>(
      'get',
      'node',
      n3.name,
    ).status.conditions.some((c) => c.type === 'Ready' && c.status !== 'True')
      ? true
      : undefined,
  );
  figures.nodeStopToNotReadySeconds = (Date.now() - t0) / 1000;
  await until(`the pods of ${n3.name} evicted`, 180, () =>
    onN3.every(
      (p) =>
        kubectlJson<{ metadata: { deletionTimestamp?: string } }>(
          'get',
          'pod',
          '-n',
          p.metadata.namespace!,
          p.metadata.name,
        ).metadata.deletionTimestamp,
    )
      ? true
      : undefined,
  );
  figures.nodeStopToEvictedSeconds = (Date.now() - t0) / 1000;
  const evicted = onN3.map((p) => net.podIp.get(podKey(p))!);
  const [first] = liveNodes();
  const held = await liveHosts(first!.name);
  expect(evicted.filter((ip) => !held.has(ip))).toEqual([]);
  sh('bash', [CLUSTER_SH, 'node', 'start', n3.name], { timeoutMs: 600_000 });
  await until('the evicted pods deleted', 180, () =>
    sh('kubectl', ['get', 'pods', '-A', '-o', 'name', '--field-selector', `spec.nodeName=${n3.name}`])
      .split('\n')
      .every((l) => !onN3.some((p) => l === `pod/${p.metadata.name}`))
      ? true
      : undefined,
  );
  await until('the evicted pods gone from the other agents', 60, async () => {
    for (const n of liveNodes().filter((n) => n.name !== n3.name)) {
      const h = await liveHosts(n.name);
      if (evicted.some((ip) => h.has(ip))) return undefined;
    }
    return true;
  });
  figures.nodeEvictedPodsLeftAgentsSeconds = (Date.now() - t0) / 1000;
  const b = await long.stop();
  figures.nodeFailureProbeRounds = a.rounds + b.rounds;
  figures.nodeFailureWrongVerdicts = a.wrong.length + b.wrong.length;
  expect([...a.wrong, ...b.wrong].slice(0, 20)).toEqual([]);
  expect(a.rounds).toBeGreaterThan(2);
  expect(b.rounds).toBeGreaterThan(2);
}
