// Network policy on real pods: the example's truth table measured with real connections equals
// `cascadectl netpol simulate`, and the netpolicy-controller's EffectivePolicies explain a refusal.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import {
  CASCADECTL,
  cascadectl,
  clusterBin,
  env,
  KUBECONFIG,
  kubectl,
  kubectlJson,
  NODE,
  ROOT,
  sh,
  shAsync,
  until,
} from '../harness.ts';
import { netpolWorkloads } from '../netpol-workloads.ts';
import { measured, mismatches, predicted, probesFor } from './probes.ts';
import { docs, figures, NODE_PORT, NS, net, type Obj } from './shared.ts';

/**
 * The example's namespaces, pods (on `spread`'s nodes in turn, when given: nodeName set, so every node
 * holds some of each namespace) and admin and namespace policies, applied and Ready; what later steps
 * need is in `net`. Returns each example pod's node.
 */
export function applyExample(spread?: string[]): Map<string, string> {
  const cluster = docs('examples/netpol/00-cluster.yaml');
  net.exampleNamespaces = cluster.filter((o) => o.kind === 'Namespace').map((o) => o.metadata.name);
  const tables = JSON.parse(
    cascadectl('netpol', 'simulate', '-f', join(ROOT, 'examples/netpol'), '-o', 'json'),
  ) as {
    port: string;
  }[];
  net.ports = tables.map((t) => Number(t.port.split('/')[1]));
  net.pods = cluster.filter((o) => o.kind === 'Pod');
  // the workloads examples/netpol-cluster/ holds for a newcomer, built the same way
  let i = 0;
  const manifests = netpolWorkloads(cluster as never, net.ports).map((m) =>
    spread && (m as Obj).kind === 'Pod'
      ? { ...m, spec: { ...(m as Obj).spec, nodeName: spread[i++ % spread.length] } }
      : m,
  );
  sh('kubectl', ['apply', '-f', '-'], { input: manifests.map((m) => stringify(m)).join('---\n') });
  // The baseline's egress deny to 0.0.0.0/0 matches pod addresses too (upstream ipBlock/networks
  // semantics, and Services are judged by their backend pods): unscoped, it would take DNS from every
  // pod of every other namespace without a NetworkPolicy, as it says. The e2e scopes it to the
  // example's namespaces to leave the cluster's own workloads alone; the comparison reads the objects
  // back, so it judges what was applied.
  const admin = docs('examples/netpol/10-admin.yaml').map((o) =>
    o.kind === 'BaselineAdminNetworkPolicy'
      ? {
          ...o,
          spec: {
            ...o.spec,
            subject: {
              namespaces: {
                matchExpressions: [
                  { key: 'kubernetes.io/metadata.name', operator: 'In', values: net.exampleNamespaces },
                ],
              },
            },
          },
        }
      : o,
  );
  sh('kubectl', ['apply', '--server-side', '-f', '-'], {
    input: admin.map((o) => stringify(o)).join('---\n'),
  });
  kubectl('apply', '--server-side', '-f', join(ROOT, 'examples/netpol/20-namespaces.yaml'));
  for (const ns of net.exampleNamespaces)
    sh('kubectl', ['wait', '-n', ns, '--for=condition=Ready', 'pod', '--all', '--timeout=120s'], {
      timeoutMs: 130_000,
    });
  const nodeOf = new Map<string, string>();
  for (const p of net.pods) {
    const live = kubectlJson<{ spec: { nodeName: string }; status: { podIP: string } }>(
      'get',
      'pod',
      '-n',
      p.metadata.namespace!,
      p.metadata.name,
    );
    const key = `${p.metadata.namespace}/${p.metadata.name}`;
    net.podIp.set(key, live.status.podIP);
    nodeOf.set(key, live.spec.nodeName);
  }
  return nodeOf;
}

/** Real connections get what `netpol simulate --kubeconfig` predicts, within a bounded time. */
export async function agreesWithSimulate(probes: ReturnType<typeof probesFor>): Promise<string[]> {
  const want = predicted(probes);
  expect(want.filter((v) => v === 'ALLOW').length).toBeGreaterThan(0);
  expect(want.filter((v) => v === 'DENY').length).toBeGreaterThan(0);
  let diff: string[] = [];
  // the agent may still be loading the new pods: the table must agree within a bounded time
  await until('kernel verdicts equal to simulate', 90, async () => {
    diff = mismatches(probes, want, await measured(probes));
    return diff.length === 0 ? true : undefined;
  }).catch(() => undefined);
  expect(diff).toEqual([]);
  return want;
}

/** A node's live maps, read by the agent image's debug command through pods/exec (`netpol maps --node`). */
export async function liveMaps(node: string): Promise<{
  live: { endpoints: { address: string }[]; hosts: { address: string }[] };
  drift: string[];
}> {
  const text = await shAsync(NODE, [
    CASCADECTL,
    'netpol',
    'maps',
    '--node',
    node,
    '--kubeconfig',
    KUBECONFIG,
    '-o',
    'json',
  ]).catch((e: unknown) => {
    // exit 1 (drift) keeps its output on the error
    const m = /\{[\s\S]*\}\s*$/.exec(String((e as { stdout?: string }).stdout ?? (e as Error).message));
    if (!m) throw e;
    return m[0];
  });
  return JSON.parse(text);
}

/**
 * Every address in `local` is an endpoint the node's kernel holds, and nothing is stale; other drift
 * is reported and counted.
 */
export async function liveMapsHold(node: string, local: string[]): Promise<number> {
  const maps = await liveMaps(node);
  const bound = new Set(maps.live.endpoints.map((e) => e.address));
  expect(local.filter((ip) => !bound.has(ip))).toEqual([]);
  if (maps.drift.length) console.log(`netpol maps --node ${node} drift:\n  ${maps.drift.join('\n  ')}`);
  // the kernel holds nothing the model does not: no endpoint, host address or Service of a pod or
  // object that is gone (issue 28 reported 15 "stale" hosts: the comparison read none of the model's
  // host prefixes, they were all live pods and the node)
  expect(maps.drift.filter((l) => l.includes('(stale)'))).toEqual([]);
  return maps.drift.length;
}

/** A trace through the source node's real program on its live maps gives the connections' verdicts. */
export async function tracesAgree(probes: ReturnType<typeof probesFor>, want: string[]): Promise<void> {
  for (const verdict of ['ALLOW', 'DENY']) {
    const i = probes.findIndex((p, j) => want[j] === verdict && p.to.includes('/'));
    const p = probes[i]!;
    const args = [CASCADECTL, 'netpol', 'trace', '--from', p.from, '--to', p.to, '--port', String(p.port)];
    const text = await shAsync(NODE, [
      ...args,
      '--proto',
      p.protocol.toLowerCase(),
      '--kubeconfig',
      KUBECONFIG,
      '-o',
      'json',
    ]).catch((e: unknown) => String((e as { stdout?: string }).stdout ?? ''));
    const t = JSON.parse(text) as {
      verdict: string;
      hops: { kernel: string; reference: string; rule?: string; entry?: string }[];
    };
    expect(t.verdict.toUpperCase(), `${p.from} -> ${p.to}:${p.port}`).toBe(verdict);
    for (const h of t.hops) expect(h.kernel).toBe(h.reference);
    // the entry's identity: the node's own number, named by a label set or a fixed name, never bare
    for (const h of t.hops.filter((x) => x.entry))
      expect(h.entry).toMatch(/identity (.+ \()?#\d+ on this node/);
    if (verdict === 'DENY') expect(t.hops.some((h) => h.rule)).toBe(true);
  }
}

/** examples/netpol on real pods: the verdicts of real TCP and UDP connections equal netpol simulate */
export async function netpolExampleOnRealPods(): Promise<void> {
  net.nodeIp = sh('bash', ['-c', "ip -4 route get 1.1.1.1 | sed -n 's/.* src \\([0-9.]*\\).*/\\1/p'"]).trim();
  net.nodeServer = spawn(join(clusterBin()!, 'cascade-probe'), ['serve', String(NODE_PORT)], {
    stdio: 'ignore',
  });
  applyExample();
  const probes = probesFor(net.pods);
  const want = await agreesWithSimulate(probes);
  figures.netpolProbes = probes.length;
  const node = kubectl('get', 'nodes', '-o', 'jsonpath={.items[0].metadata.name}').trim();
  figures.liveMapsDriftLines = await liveMapsHold(node, [...net.podIp.values()]);
  await tracesAgree(probes, want);
}

/** kubectl get effectivepolicies -n shop explains a refused connection with the deciding rule; the admin policies have status */
export async function effectivePoliciesExplain(): Promise<void> {
  // sandbox/toy -> shop/cart TCP/9000 was refused by the kernel above; the controller publishes why
  const cartRules = await until('the Network EffectivePolicy of shop app=cart', 60, () => {
    const eps = kubectlJson<{
      items: {
        spec: {
          policyKind: string;
          network?: {
            podSelector: { matchLabels: Record<string, string> };
            ingress: {
              tier: string;
              policy: string;
              rule: string;
              action: string;
              peers: { peer: string }[];
            }[];
          };
        };
      }[];
    }>('get', 'effectivepolicies', '-n', 'shop', '-o', 'json').items;
    const cart = eps.find(
      (e) => e.spec.policyKind === 'Network' && e.spec.network?.podSelector.matchLabels.app === 'cart',
    );
    return cart?.spec.network?.ingress;
  });
  const deciding = cartRules.findIndex((r) => r.policy === 'AdminNetworkPolicy/dev-never-reaches-prod');
  expect(deciding).toBe(0);
  expect(cartRules[0]).toMatchObject({ tier: 'admin', rule: 'deny-dev', action: 'Deny' });
  expect(cartRules[0]!.peers[0]!.peer).toMatch(/env=dev/);
  // the table kubectl prints: one row per label set, kind Network, the label set as target
  expect(kubectl('get', 'effectivepolicies', '-n', 'shop')).toMatch(/\bNetwork\s+app=cart\b/);
  const conds = kubectlJson<{ status: { conditions: { type: string; status: string }[] } }>(
    'get',
    'adminnetworkpolicy',
    'dev-never-reaches-prod',
    '-o',
    'json',
  ).status.conditions;
  expect(conds.find((c) => c.type === 'Accepted')?.status).toBe('True');
  expect(conds.find((c) => c.type === 'Selecting')?.status).toBe('True');
  // the agents read other nodes' pods from the PodAddressSlices (the chart's default with the
  // controller): the marker is out, and shop's pods are there with their node and addresses
  const slices = kubectlJson<{
    items: {
      metadata: { name: string };
      spec: { namespace: string; pods: { node?: string; ips: string[] }[] };
    }[];
  }>('get', 'podaddressslices').items;
  expect(slices.map((x) => x.metadata.name)).toContain('pas-published');
  const shop = slices.filter((x) => x.spec.namespace === 'shop').flatMap((x) => x.spec.pods);
  expect(shop.length).toBeGreaterThan(0);
  for (const p of shop) expect(p).toMatchObject({ node: expect.any(String), ips: [expect.any(String)] });
  const agent = kubectlJson<{
    spec: { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } };
  }>('get', 'daemonset', 'netpolicy-agent', '-n', NS);
  const env = agent.spec.template.spec.containers[0]!.env;
  expect(env.find((e) => e.name === 'CASCADE_POD_SOURCE')?.value).toBe('slices');
}

interface FlowLine {
  from: string;
  to: string;
  protocol: string;
  port: number;
  verdict: string;
  rule?: string;
}
/** sandbox/toy -> shop/cart TCP/9000, refused at cart's ingress by the ANP rule deny-dev */
const isRefusal = (f: FlowLine) =>
  f.from === 'sandbox/toy' &&
  f.to === 'shop/cart' &&
  f.protocol === 'TCP' &&
  f.port === 9000 &&
  f.verdict === 'deny' &&
  /^AdminNetworkPolicy\/dev-never-reaches-prod#ingress\[0\]/.test(f.rule ?? '');
const flowLines = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as FlowLine);

/** cascadectl flows --node shows the refused connection with its deciding rule, as a snapshot and followed */
export async function flowsOfRefusedConnection(): Promise<void> {
  const node = kubectl('get', 'nodes', '-o', 'jsonpath={.items[0].metadata.name}').trim();
  const flows = (...more: string[]) => [
    CASCADECTL,
    'flows',
    '--node',
    node,
    '--kubeconfig',
    KUBECONFIG,
    '--verdict',
    'deny',
    '-n',
    'shop',
    ...more,
  ];
  // the probes above were refused by the kernel; the agent read them from its ring buffer
  const snapshot = await until('the refused probe in the flow log', 30, async () => {
    const list = flowLines(await shAsync(NODE, flows('-o', 'json')));
    return list.some(isRefusal) ? list : undefined;
  });
  expect(snapshot.every((f) => f.verdict === 'deny')).toBe(true);
  const table = await shAsync(NODE, flows());
  expect(table).toMatch(/TIME\s+NODE\s+DIRECTION\s+FROM\s+TO\s+PROTO\/PORT\s+VERDICT\s+DECIDED BY/);
  expect(table).toMatch(
    /ingress\s+sandbox\/toy\s+shop\/cart\s+TCP\/9000\s+DENY\s+AdminNetworkPolicy\/dev-never-reaches-prod#ingress\[0\]/,
  );
  // the agent's metrics are on the node's loopback (this node is the host), with the per-policy
  // counts; the node's address, which pods reach, serves nothing (round three: they named every
  // tenant's policies there)
  const metrics = await fetch('http://127.0.0.1:9090/metrics');
  expect(metrics.status).toBe(200);
  const text = await metrics.text();
  expect(text).toContain('cascade_datapath_syncs_total');
  // the flow cache sized at load from the chart's 16Mi over this node's CPUs (a few: 16,384 slots)
  expect(text).toMatch(/^cascade_datapath_flow_cache_slots 16384$/m);
  expect(text).toMatch(/^cascade_datapath_flow_cache_bytes [1-9][0-9]*$/m);
  expect(text).toMatch(
    /cascade_datapath_policy_flows_total\{policy="AdminNetworkPolicy\/dev-never-reaches-prod"/,
  );
  for (const path of ['/metrics', '/flows'])
    await expect(fetch(`http://${net.nodeIp}:9090${path}`), path).rejects.toThrow();
  // --follow: a stream through pods/exec; a refusal made while it runs (after the agent's 5 s per-flow
  // limit) arrives on it
  const follower = spawn(NODE, flows('--follow', '-o', 'json'), { env: env() });
  let streamed = '';
  follower.stdout.on('data', (c) => {
    streamed += String(c);
  });
  try {
    await until('the follow stream replays the log', 30, () =>
      flowLines(streamed).length ? true : undefined,
    );
    const before = flowLines(streamed).filter(isRefusal).length;
    await new Promise((r) => setTimeout(r, 5_500));
    const cart = net.podIp.get('shop/cart')!;
    await shAsync('kubectl', [
      'exec',
      '-n',
      'sandbox',
      'toy',
      '--',
      '/usr/local/bin/cascade-probe',
      'probe-all',
      '600',
      `tcp/${cart}/9000`,
    ]).catch(() => undefined); // DENY exits 1
    await until('the new refusal on the follow stream', 30, () =>
      flowLines(streamed).filter(isRefusal).length > before ? true : undefined,
    );
    expect(follower.exitCode).toBeNull();
  } finally {
    follower.kill();
  }
}
