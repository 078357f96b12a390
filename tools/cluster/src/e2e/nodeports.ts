// NodePorts dialled on nodes without the backend, on three nodes (npm run cluster -- up --nodes 3,
// flannel): judged by the backend's ingress with the source the packet carries, as netpol simulate
// says; the dialled node's pod bridge and tunnel addresses as sources.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import { cascadectl, clusterBin, KUBECONFIG, kubectlJson, sh, shAsync, until } from '../harness.ts';
import { deviceAddress, type LiveNode, liveNodes, tunnelOf } from './nodes.ts';
import { figures, probePod, work } from './shared.ts';

/** A connection a NodePort step makes for real, and the probe netpol simulate answers for it. */
interface Check {
  what: string;
  from: string;
  to: string;
  port: number;
  run: () => Promise<string | undefined>;
}

/** What `netpol simulate --kubeconfig` answers for the checks' probes (a probes file named `name`). */
function simulateChecks(name: string, checks: Check[]): { verdict: string; service?: { source?: string } }[] {
  const file = join(work, name);
  writeFileSync(
    file,
    checks
      .map((c) => `- ${JSON.stringify({ from: c.from, to: c.to, protocol: 'TCP', port: c.port })}`)
      .join('\n'),
  );
  return JSON.parse(
    cascadectl('netpol', 'simulate', '--kubeconfig', KUBECONFIG, '--probes', file, '-o', 'json'),
  ) as { verdict: string; service?: { source?: string } }[];
}

/** Runs the checks until the kernel gives every verdict `want` says (60 s): the ones it did not. */
async function kernelDisagrees(what: string, checks: Check[], want: string[]): Promise<string[]> {
  let wrong: string[] = [];
  await until(what, 60, async () => {
    wrong = [];
    for (const [i, c] of checks.entries()) {
      const have = await c.run();
      if (have !== want[i]) wrong.push(`${c.what}: simulate ${want[i]}, kernel ${have}`);
    }
    return wrong.length ? undefined : true;
  }).catch(() => undefined);
  return wrong;
}

/**
 * NodePorts dialled on nodes without the backend: judged against the backend's ingress with the
 * source the packet carries, never as the backend's own node.
 */
export async function nodePortAcrossNodes(): Promise<void> {
  const [n1, n2, n3] = liveNodes() as [LiveNode, LiveNode, LiveNode];
  const NS = 'np-e2e';
  const pod = (name: string, labels: Record<string, string>, node: string) =>
    probePod(NS, name, labels, node);
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
  const checks: Check[] = [
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
    {
      what: "stranger -> NodePort of the backend's node",
      from: `${NS}/stranger`,
      to: n3.ip,
      port: nodePort,
      run: () => fromPod('stranger', n3.ip, nodePort),
    },
  ];
  const sim = simulateChecks('nodeport-probes.yaml', checks);
  // one backend: one result per probe
  expect(sim.length).toBe(checks.length);
  const want = sim.map((r) => r.verdict.toUpperCase());
  // the security property first: nobody but the client reaches the backend, whichever node is dialled
  expect(want).toEqual(['ALLOW', 'DENY', 'ALLOW', 'DENY', 'DENY', 'DENY', 'DENY', 'DENY', 'DENY']);
  // flannel's vxlan carries it from n2 to n3: it leaves n2 with n2's tunnel address (flannel.1's)
  expect(sim[4]!.service?.source).toBe(tunnelOf(n2));
  expect(await kernelDisagrees('NodePort verdicts as netpol simulate says', checks, want)).toEqual([]);
  await bridgeSourceAdmitted(n3, NS, checks);
  await tunnelSourceIsTheNode(n2, NS, checks);
  figures.nodePortChecks = checks.length;
}

/**
 * A NodePort flow kube-proxy masquerades to a backend on the dialled node leaves with that node's
 * pod-bridge address: the agent reports it (NetpolNodeReport, checked against the bridge itself), and
 * an ipBlock holding it admits such flows in the kernel exactly as `netpol simulate --kubeconfig` says
 * (before, simulate judged them as 0.0.0.0 and said deny where the kernel allowed).
 */
async function bridgeSourceAdmitted(backendNode: LiveNode, ns: string, checks: Check[]): Promise<void> {
  const bridge = deviceAddress(backendNode, 'cascade0');
  await reportNames(backendNode, 'podBridgeAddresses', bridge);
  await whileWebAdmits(ns, 'web-from-bridge', `${bridge}/32`, async () => {
    // stranger (another node) and outside, dialling the backend's node, come from its bridge; stranger
    // dialling a node without the backend still comes from that node (its tunnel address), which it
    // does not hold
    const these = [
      'stranger -> NodePort of a node without the backend',
      "outside -> NodePort of the backend's node",
      "stranger -> NodePort of the backend's node",
    ].map((w) => checks.find((c) => c.what === w)!);
    const sim = await until('simulate sees the bridge policy', 30, () => {
      const r = simulateChecks('nodeport-bridge-probes.yaml', these);
      return r[1]?.verdict === 'allow' ? r : undefined;
    });
    expect(sim.map((r) => [r.verdict.toUpperCase(), r.service?.source])).toEqual([
      ['DENY', tunnelOf(liveNodes().find((n) => n.ip === these[0]!.to)!)],
      ['ALLOW', bridge],
      ['ALLOW', bridge],
    ]);
    const want = sim.map((r) => r.verdict.toUpperCase());
    expect(await kernelDisagrees('NodePort verdicts with the bridge admitted', these, want)).toEqual([]);
    figures.nodePortBridgeChecks = these.length;
  });
}

/** Until the node's NetpolNodeReport lists `address` in `field`. */
const reportNames = (n: LiveNode, field: 'podBridgeAddresses' | 'tunnelAddresses', address: string) =>
  until(`${n.name}'s report names ${address} (${field})`, 60, () =>
    kubectlJson<{ spec: Record<string, string[] | undefined> }>('get', 'netpolnodereport', n.name).spec[
      field
    ]?.includes(address)
      ? true
      : undefined,
  );

/** `run` while a NetworkPolicy admits web's ingress from `cidr` only (then deleted). */
async function whileWebAdmits<T>(ns: string, name: string, cidr: string, run: () => Promise<T>): Promise<T> {
  const policy = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name, namespace: ns },
    spec: {
      podSelector: { matchLabels: { app: 'web' } },
      policyTypes: ['Ingress'],
      ingress: [{ from: [{ ipBlock: { cidr } }] }],
    },
  };
  sh('kubectl', ['apply', '-f', '-'], { input: stringify(policy) });
  try {
    return await run();
  } finally {
    sh('kubectl', ['delete', 'networkpolicy', '-n', ns, name, '--ignore-not-found']);
  }
}

/**
 * A NodePort flow kube-proxy masquerades towards a backend on another node leaves the dialled node
 * through flannel's vxlan, with that node's tunnel address (flannel.1's): the agent reports it and
 * every node counts it as that node, so an ipBlock naming exactly that address admits nothing (an
 * ipBlock never matches a node's address), in the kernel as in `netpol simulate --kubeconfig` (which
 * gives the dialled node's tunnel address as the source). Before, simulate judged the address as the
 * ipBlock's and stopped on its own lowering check ("lowering disagrees"), the kernel as the node.
 */
async function tunnelSourceIsTheNode(dialled: LiveNode, ns: string, checks: Check[]): Promise<void> {
  const tunnel = tunnelOf(dialled);
  await reportNames(dialled, 'tunnelAddresses', tunnel);
  await whileWebAdmits(ns, 'web-from-tunnel', `${tunnel}/32`, async () => {
    const these = [
      'client -> NodePort of a node without the backend',
      'stranger -> NodePort of a node without the backend',
      'outside -> NodePort of a node without the backend',
    ].map((w) => checks.find((c) => c.what === w)!);
    // the policy is seen once simulate names it among the backend's ingress policies
    const sim = await until('simulate sees the tunnel policy', 30, () => {
      const r = simulateChecks('nodeport-tunnel-probes.yaml', these) as {
        verdict: string;
        ingress?: { decidedBy?: { policy?: string } };
        service?: { source?: string };
      }[];
      return r.some((x) => x.ingress?.decidedBy?.policy?.includes('web-from-tunnel')) ? r : undefined;
    });
    // the isolation the two policies make decides: the ipBlock admits none of them
    expect(sim.map((r) => [r.verdict.toUpperCase(), r.service?.source])).toEqual([
      ['DENY', tunnel],
      ['DENY', tunnel],
      ['DENY', tunnel],
    ]);
    const want = sim.map((r) => r.verdict.toUpperCase());
    expect(
      await kernelDisagrees('NodePort verdicts beside an ipBlock of the tunnel address', these, want),
    ).toEqual([]);
    figures.nodePortTunnelChecks = these.length;
  });
}
