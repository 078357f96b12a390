// Three nodes under churn: a node fails and comes back, a node is drained, a node joins.
import { expect } from 'vitest';
import { stringify } from 'yaml';
import { CLUSTER_SH, kubectlJson, sh, until } from '../harness.ts';
import { liveMaps } from './netpol.ts';
import { type LiveNode, liveNodes, NODES } from './nodes.ts';
import {
  expectNoWrongVerdict,
  type LoopResult,
  measured,
  mismatches,
  predicted,
  probeLoop,
  probesFor,
} from './probes.ts';
import { figures, net, probePod } from './shared.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const podKey = (p: { metadata: { name: string; namespace?: string } }) =>
  `${p.metadata.namespace}/${p.metadata.name}`;

/**
 * A probe loop over `probes`, judged against what simulate predicts of them. Each is stopped in a
 * `finally`, as restartAndUpgrade's is: a loop left running after its step failed would probe pods
 * the cluster's `down` removes, and its rejection would come after the step's own failure, unhandled.
 */
const loopOver = (probes: ReturnType<typeof probesFor>) => probeLoop(probes, predicted(probes), 600);

/**
 * The loops' figures under `name`, and in each: no wrong verdict (late answers rare, none refused by a
 * kernel), at least `minRounds` rounds, and every probe measured (a probe that returned no verdict
 * fails these steps, as it did before they shared the loop of probes.ts).
 */
async function expectRight(name: string, since: number, minRounds: number, ...loops: LoopResult[]) {
  const sum = (f: (r: LoopResult) => number) => loops.reduce((n, r) => n + f(r), 0);
  figures[`${name}ProbeRounds`] = sum((r) => r.rounds);
  figures[`${name}LateAnswers`] = sum((r) => r.late.length);
  let wrong = 0;
  for (const r of loops) {
    await expectNoWrongVerdict(r, since, (n) => {
      figures[`${name}WrongVerdicts`] = wrong += n;
    });
    expect(r.unmeasured).toBe(0);
    expect(r.rounds).toBeGreaterThanOrEqual(minRounds);
  }
}

const agentReadyOn = (node: string, after = '') =>
  until(`the agent on ${node} Ready`, 180, () => {
    const a = kubectlJson<{
      items: {
        metadata: { uid: string };
        spec: { nodeName: string };
        status: {
          phase?: string;
          conditions?: { type: string; status: string }[];
          containerStatuses?: {
            restartCount: number;
            ready: boolean;
            state?: Record<string, unknown>;
            lastState?: Record<string, unknown>;
          }[];
        };
      }[];
    }>('get', 'pods', '-n', 'cascade-system', '-l', 'app.kubernetes.io/name=netpolicy-agent').items.find(
      (p) => p.spec.nodeName === node,
    );
    const c = a?.status.containerStatuses?.[0];
    if (c?.ready && `${a!.metadata.uid}/${c.restartCount}` !== after)
      return `${a!.metadata.uid}/${c.restartCount}`;
    // not yet: what the pod says, which the timeout's error carries (a failed wait says why)
    throw new Error(
      a
        ? `pod ${a.metadata.uid} ${a.status.phase ?? ''}, container ready ${c?.ready ?? false}, restarts ${c?.restartCount ?? '-'} (before: ${after || 'none'}), state ${JSON.stringify(c?.state ?? {})}, last ${JSON.stringify(c?.lastState ?? {})}`
        : 'no agent pod on the node',
    );
  });

/** A node's live hosts map (the addresses its kernel knows), through its agent. */
async function liveHosts(node: string): Promise<Set<string>> {
  const { live } = await liveMaps(node);
  return new Set(live.hosts.map((h) => h.address.replace(/\/\d+$/, '')));
}

/** What the cluster says of `ns`'s pods and of the nodes: for a step's failure message. */
function clusterSays(ns: string): string {
  const ask = (what: string, args: string[]) => {
    try {
      return `${what}:\n${sh('kubectl', args).trim()}`;
    } catch (e) {
      return `${what}: ${(e as Error).message.slice(0, 300)}`;
    }
  };
  return [
    ask(`pods of ${ns}`, ['get', 'pods', '-n', ns, '-o', 'wide']),
    ask(`events of ${ns}`, ['get', 'events', '-n', ns, '--sort-by=.lastTimestamp']),
    ask('nodes (Ready since, taints)', [
      'get',
      'nodes',
      '-o',
      'custom-columns=NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,SINCE:.status.conditions[?(@.type=="Ready")].lastTransitionTime,TAINTS:.spec.taints[*].key',
    ]),
  ].join('\n');
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
  const since = Date.now();
  const short = loopOver(toAll);
  try {
    await sleep(3000);
    const t0 = Date.now();
    sh('bash', [CLUSTER_SH, 'node', 'stop', n3.name], { timeoutMs: 120_000 });
    await sleep(8000);
    sh('bash', [CLUSTER_SH, 'node', 'start', n3.name], { timeoutMs: 600_000 });
    await agentReadyOn(n3.name, agentBefore);
    figures.nodeRestartToAgentReadySeconds = (Date.now() - t0) / 1000;
    await sleep(5000);
  } finally {
    await short.stop();
  }
  // 2. a long outage: NotReady, its pods evicted (they still run there, unmanaged: they keep their
  // addresses in every agent's maps until deleted), then back: the evicted pods end and leave
  const toSurvivors = probesFor(survivors, false, []).filter(
    (p) => p.port === net.ports[0] && !onN3.some((q) => podKey(q) === p.to),
  );
  const long = loopOver(toSurvivors);
  try {
    await longOutage(n3.name, onN3);
  } finally {
    await long.stop();
  }
  await expectRight('nodeFailure', since, 3, short.progress(), long.progress());
}

/** Part 2 of nodeFailure: `node` stops until its pods (`onNode`) are evicted, then comes back. */
async function longOutage(node: string, onNode: typeof net.pods): Promise<void> {
  const t0 = Date.now();
  sh('bash', [CLUSTER_SH, 'node', 'stop', node], { timeoutMs: 120_000 });
  await until(`${node} NotReady`, 120, () =>
    kubectlJson<{ status: { conditions: { type: string; status: string }[] } }>(
      'get',
      'node',
      node,
    ).status.conditions.some((c) => c.type === 'Ready' && c.status !== 'True')
      ? true
      : undefined,
  );
  figures.nodeStopToNotReadySeconds = (Date.now() - t0) / 1000;
  await until(`the pods of ${node} evicted`, 180, () =>
    onNode.every(
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
  const evicted = onNode.map((p) => net.podIp.get(podKey(p))!);
  const [first] = liveNodes();
  const held = await liveHosts(first!.name);
  expect(evicted.filter((ip) => !held.has(ip))).toEqual([]);
  sh('bash', [CLUSTER_SH, 'node', 'start', node], { timeoutMs: 600_000 });
  await until('the evicted pods deleted', 180, () =>
    sh('kubectl', ['get', 'pods', '-A', '-o', 'name', '--field-selector', `spec.nodeName=${node}`])
      .split('\n')
      .every((l) => !onNode.some((p) => l === `pod/${p.metadata.name}`))
      ? true
      : undefined,
  );
  await until('the evicted pods gone from the other agents', 60, async () => {
    for (const n of liveNodes().filter((n) => n.name !== node)) {
      const h = await liveHosts(n.name);
      if (evicted.some((ip) => h.has(ip))) return undefined;
    }
    return true;
  });
  figures.nodeEvictedPodsLeftAgentsSeconds = (Date.now() - t0) / 1000;
}

/**
 * kubectl drain of a node under a probe loop on another: its pods leave every agent's maps, no wrong
 * verdict; then a fourth node joins the running cluster and enforces the same policies at once.
 */
export async function drainAndAddNode(): Promise<void> {
  const [n1, n2] = liveNodes() as [LiveNode, LiveNode];
  const nodeOf = new Map<string, string>();
  for (const p of net.pods) {
    const live = kubectlJson<{ items: { metadata: { name: string }; spec: { nodeName: string } }[] }>(
      'get',
      'pods',
      '-n',
      p.metadata.namespace!,
    ).items.find((q) => q.metadata.name === p.metadata.name);
    if (live) nodeOf.set(podKey(p), live.spec.nodeName);
  }
  const onN1 = net.pods.filter((p) => nodeOf.get(podKey(p)) === n1.name);
  const onN2 = net.pods.filter((p) => nodeOf.get(podKey(p)) === n2.name);
  expect(onN1.length).toBeGreaterThan(1);
  expect(onN2.length).toBeGreaterThan(0);
  const since = Date.now();
  const withinN1 = probesFor(onN1, false, []).filter(
    (p) => p.port === net.ports[0] && onN1.some((q) => podKey(q) === p.to),
  );
  const loop = loopOver(withinN1);
  try {
    const t0 = Date.now();
    sh(
      'kubectl',
      [
        'drain',
        n2.name,
        '--ignore-daemonsets',
        '--delete-emptydir-data',
        '--force',
        '--grace-period=1',
        '--timeout=180s',
      ],
      { timeoutMs: 200_000 },
    );
    const drained = onN2.map((p) => net.podIp.get(podKey(p))!);
    await until('the drained pods gone from the other agents', 60, async () => {
      const h = await liveHosts(n1.name);
      return drained.some((ip) => h.has(ip)) ? undefined : true;
    });
    figures.drainToPodsLeftAgentsSeconds = (Date.now() - t0) / 1000;
  } finally {
    await loop.stop();
  }
  await expectRight('drain', since, 1, loop.progress());
  sh('kubectl', ['uncordon', n2.name]);
  // a fourth node joins: its agent starts, learns every pod, and its pods are judged like any other
  const t0 = Date.now();
  sh('bash', [CLUSTER_SH, 'up', '--nodes', String(NODES + 1)], { timeoutMs: 20 * 60_000 });
  figures.addNodeSeconds = (Date.now() - t0) / 1000;
  const n4 = liveNodes().find((n) => n.name === `cascade-node-${NODES + 1}`)!;
  expect(n4).toBeDefined();
  await agentReadyOn(n4.name);
  const NS = 'np-e2e';
  const pod = (name: string, labels: Record<string, string>, node: string) =>
    probePod(NS, name, labels, node);
  // the NodePort step's backend was on the evicted node: a new one on the new node, and clients of
  // this step's own (on node 1 and on the new node), so this step does not rest on the earlier ones'
  // pods. (A CI run once found the NodePort step's client gone by now, cause unknown: its state is
  // kept in the figures to read next time.)
  const earlier = kubectlJson<{
    items: {
      metadata: { name: string };
      spec: { nodeName: string };
      status: { phase: string; podIP?: string; reason?: string };
    }[];
  }>('get', 'pods', '-n', NS).items.map(
    (p) =>
      `${p.metadata.name}@${p.spec.nodeName}:${p.status.phase}/${p.status.podIP ?? '-'}${p.status.reason ? `/${p.status.reason}` : ''}`,
  );
  figures.npE2ePodsBeforeJoinCheck = earlier.join(' ');
  sh('kubectl', ['apply', '-f', '-'], {
    input: [
      pod('web-4', { app: 'web' }, n4.name),
      pod('client-4', { role: 'client' }, n4.name),
      pod('client-1', { role: 'client' }, n1.name),
      pod('stranger-1', { role: 'stranger' }, n1.name),
    ]
      .map((o) => stringify(o))
      .join('---\n'),
  });
  try {
    sh(
      'kubectl',
      [
        'wait',
        '-n',
        NS,
        '--for=condition=Ready',
        'pod',
        'web-4',
        'client-4',
        'client-1',
        'stranger-1',
        '--timeout=120s',
      ],
      { timeoutMs: 130_000 },
    );
  } catch (e) {
    // a fresh run once saw stranger-1 deleted and client-1 never Ready here, with no trace of why:
    // the failure now carries what the cluster said
    throw new Error(`${(e as Error).message}\n${clusterSays(NS)}`);
  }
  const ip = (name: string) =>
    kubectlJson<{ status: { podIP: string } }>('get', 'pod', '-n', NS, name).status.podIP;
  const probes = [
    { from: `${NS}/client-1`, to: `${NS}/web-4`, protocol: 'TCP' as const, port: 8080 },
    { from: `${NS}/stranger-1`, to: `${NS}/web-4`, protocol: 'TCP' as const, port: 8080 },
    { from: `${NS}/client-4`, to: `${NS}/web-4`, protocol: 'TCP' as const, port: 8080 },
  ];
  for (const p of probes) net.podIp.set(p.to, ip('web-4'));
  const want = predicted(probes);
  expect(want).toEqual(['ALLOW', 'DENY', 'ALLOW']);
  let diff: string[] = [];
  await until('the new node enforces as simulate says', 60, async () => {
    diff = mismatches(probes, want, await measured(probes));
    return diff.length ? undefined : true;
  }).catch(() => undefined);
  expect(diff).toEqual([]);
}
