// Three nodes on this machine (npm run cluster -- up --nodes 3, wired by flannel): the nodes and
// flannel as they come up, cross-node enforcement on real traffic, a pod's own node (nodeports.ts:
// NodePorts dialled on nodes without a backend; node-churn.ts: failure, drain, a new node).
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import { netnsNode } from '../cluster/layout.ts';
import { pidFile } from '../cluster/node.ts';
import {
  CLUSTER_SH,
  cascadectl,
  clusterBin,
  KUBECONFIG,
  kubectlJson,
  onNode,
  sh,
  shAsync,
  until,
} from '../harness.ts';
import { agreesWithSimulate, applyExample, liveMapsHold, tracesAgree } from './netpol.ts';
import { probesFor } from './probes.ts';
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

export function stopServers(): void {
  for (const s of servers.splice(0)) s.kill();
}

/** npm run cluster -- up --nodes 3 (flannel): every node Ready, an agent Ready on each */
export async function threeNodesUp(): Promise<void> {
  const t0 = Date.now();
  // with network-policy-api v0.2.0's CRDs applied as a user would have: a later step upgrades them
  sh('bash', [CLUSTER_SH, 'up', '--nodes', String(NODES), '--npapi-crds', 'v0.2.0'], {
    timeoutMs: 20 * 60_000,
  });
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
  // each node is its own machine: its containerd, kubelet and kube-proxy in its machine's network and
  // mount namespaces (none in the host's: a service started before the machine's namespaces were set
  // up once shared another node's containerd root), its agent pinned into its own bpffs
  const ns = (pid: string, kind: 'mnt' | 'net') => readlinkSync(`/proc/${pid}/ns/${kind}`);
  // the harness's own pid files (cluster/node.ts), so CASCADE_CLUSTER_RUN is honoured here too
  const pidOf = (node: string, what: string) =>
    readFileSync(pidFile(netnsNode(Number(node.split('-').pop())), what), 'utf8').trim();
  const machines = new Set<string>();
  for (const n of nodes) {
    const machine = pidOf(n.name, 'machine');
    machines.add(ns(machine, 'mnt'));
    for (const svc of ['containerd', 'kubelet', 'kube-proxy'])
      for (const kind of ['mnt', 'net'] as const)
        expect(ns(pidOf(n.name, svc), kind), `${n.name} ${svc} ${kind}`).toBe(ns(machine, kind));
  }
  expect(machines.size).toBe(nodes.length);
  expect(machines.has(readlinkSync('/proc/self/ns/mnt'))).toBe(false);
  for (const n of nodes) {
    const [cmd, args] = onNode(n.name, 'ip', ['-o', 'link', 'show']);
    const links = sh(...onNode(n.name, 'ls', ['/sys/fs/bpf/cascade/progs'], { mount: true }));
    expect(links).toContain('from_endpoint');
    expect(sh(cmd, [...args])).toContain('cascade0');
  }
  await onFlannel(nodes);
}

/**
 * The cluster's CNI is flannel, as its users run it: flanneld in each node's namespaces with its
 * lease (the Node's podCIDR, its VTEP in the Node's annotations), a vxlan device holding the subnet's
 * first address, the other nodes' subnets routed through it (no host-gw route of the harness's); the
 * node's CNI configuration is flannel's with cascade-cni chained after it by the agent's init
 * container (agent.cni.chain, this release's namespace exempt); each agent's report says its node's
 * tunnel address, which every node then judges as that node (crossNodeEnforcement probes it).
 */
async function onFlannel(nodes: LiveNode[]): Promise<void> {
  const objs = kubectlJson<{
    items: { metadata: { name: string; annotations?: Record<string, string> }; spec: { podCIDR?: string } }[];
  }>('get', 'nodes').items;
  for (const n of nodes) {
    const node = objs.find((o) => o.metadata.name === n.name)!;
    const subnet = node.spec.podCIDR!;
    expect(subnet).toMatch(/^10\.244\.\d+\.0\/24$/);
    expect(node.metadata.annotations?.['flannel.alpha.coreos.com/public-ip']).toBe(n.ip);
    expect(node.metadata.annotations?.['flannel.alpha.coreos.com/backend-type']).toBe('vxlan');
    const spec = netnsNode(Number(n.name.split('-').pop()));
    const flanneld = readFileSync(pidFile(spec, 'flanneld'), 'utf8').trim();
    const machine = readFileSync(pidFile(spec, 'machine'), 'utf8').trim();
    expect(readlinkSync(`/proc/${flanneld}/ns/net`)).toBe(readlinkSync(`/proc/${machine}/ns/net`));
    const tunnel = subnet.replace(/\/24$/, '');
    expect(sh(...onNode(n.name, 'ip', ['-d', '-o', 'link', 'show', 'dev', 'flannel.1']))).toContain(
      'vxlan id 1',
    );
    expect(tunnelOf(n)).toBe(tunnel);
    const routes = sh(...onNode(n.name, 'ip', ['-4', 'route', 'show']));
    for (const m of objs.filter((o) => o.metadata.name !== n.name)) {
      const cidr = m.spec.podCIDR!;
      expect(routes, `${n.name}: ${cidr}`).toContain(
        `${cidr} via ${cidr.replace(/\/24$/, '')} dev flannel.1 onlink`,
      );
    }
    const conf = JSON.parse(readFileSync(join(spec.hostDir, 'cni/net.d/10-flannel.conflist'), 'utf8')) as {
      plugins: { type: string; exemptNamespace?: string }[];
    };
    expect(conf.plugins.map((p) => p.type)).toEqual(['flannel', 'portmap', 'cascade-cni']);
    expect(conf.plugins[2]!.exemptNamespace).toBe('cascade-system');
    await until(`${n.name}'s report says its tunnel address ${tunnel}`, 90, () =>
      kubectlJson<{ spec: { tunnelAddresses?: string[] } }>(
        'get',
        'netpolnodereport',
        n.name,
      ).spec.tunnelAddresses?.includes(tunnel)
        ? true
        : undefined,
    );
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
  // from node addresses: each node (a host-network process in its namespace) to every pod: the other
  // nodes' pods judge it as that node; its own pods as their own node, which a NetworkPolicy never
  // blocks (the kubelet's path: the agent gave the route to the pod bridge the node's address as its
  // preferred source, agent/host-source.ts)
  const fromNodes = nodes.flatMap((n) =>
    net.pods.map((p) => ({
      from: n.ip,
      to: `${p.metadata.namespace}/${p.metadata.name}`,
      protocol: 'TCP' as const,
      port: net.ports[0]!,
    })),
  );
  const file = join(work, 'from-nodes.yaml');
  writeFileSync(file, fromNodes.map((p) => `- ${JSON.stringify(p)}`).join('\n'));
  const nodeWant = (
    JSON.parse(
      cascadectl('netpol', 'simulate', '--kubeconfig', KUBECONFIG, '--probes', file, '-o', 'json'),
    ) as {
      verdict: string;
    }[]
  ).map((r) => r.verdict.toUpperCase());
  const nodeHave: string[] = [];
  for (const n of nodes) {
    const mine = fromNodes.filter((p) => p.from === n.ip);
    const [cmd, args] = onNode(n.name, probe, [
      'probe-all',
      '600',
      ...mine.map((p) => `tcp/${net.podIp.get(p.to)}/${p.port}`),
    ]);
    const out = await shAsync(cmd, [...args], 60_000).catch((e: unknown) =>
      String((e as { stdout?: string }).stdout ?? ''),
    );
    nodeHave.push(...mine.map((_, k) => out.trim().split('\n')[k]?.split(' ')[1] ?? '?'));
  }
  const nodeDiff = fromNodes
    .map((p, i) => ({ ...p, want: nodeWant[i], have: nodeHave[i] }))
    .filter((r) => r.want !== r.have)
    .map((r) => `node ${r.from} -> ${r.to}:${r.port}: simulate ${r.want}, kernel ${r.have}`);
  figures.fromNodeProbes = fromNodes.length;
  expect(nodeDiff).toEqual([]);
  expect(new Set(nodeWant).size).toBe(2);
}

/**
 * A pod's own node is a node like any other to an admin policy: an ANP denying egress to `nodes: {}`
 * on one port refuses every node's address, its own included (network-policy-api's node-peer tests
 * with the client on the node it dials, which the upstream suites hit only when the scheduler puts it
 * there); the pods it does not select keep reaching their own node through their NetworkPolicies.
 */
export async function ownNodeIsANode(): Promise<void> {
  const nodes = liveNodes();
  const anp = {
    apiVersion: 'policy.networking.k8s.io/v1alpha1',
    kind: 'AdminNetworkPolicy',
    metadata: { name: 'e2e-sandbox-no-node-port' },
    spec: {
      priority: 5,
      subject: { namespaces: { matchLabels: { 'kubernetes.io/metadata.name': 'sandbox' } } },
      egress: [
        {
          name: 'no-node-port',
          action: 'Deny',
          to: [{ nodes: {} }],
          ports: [{ portNumber: { protocol: 'TCP', port: NODE_PORT } }],
        },
      ],
    },
  };
  sh('kubectl', ['apply', '-f', '-'], { input: stringify(anp) });
  try {
    // each node's addresses: its InternalIP and its tunnel address (flannel.1's), which its report
    // adds: dialling the tunnel address is no way round a `nodes` deny
    const tunnels = new Map(nodes.map((n) => [tunnelOf(n), n.ip]));
    const probes = probesFor(net.pods, false, [...nodes.map((n) => n.ip), ...tunnels.keys()]).filter(
      (p) => !p.to.includes('/'),
    );
    const want = await agreesWithSimulate(probes);
    const toyOwn = kubectlJson<{ status: { hostIP: string } }>('get', 'pod', '-n', 'sandbox', 'toy').status
      .hostIP;
    const verdict = (from: string, to: string) =>
      want[probes.findIndex((p) => p.from === from && p.to === to)];
    for (const n of nodes) expect(verdict('sandbox/toy', n.ip), `sandbox/toy -> ${n.ip}`).toBe('DENY');
    for (const t of tunnels.keys()) expect(verdict('sandbox/toy', t), `sandbox/toy -> ${t}`).toBe('DENY');
    expect(nodes.map((n) => n.ip)).toContain(toyOwn);
    // cart's egress is isolated by its NetworkPolicy: its own node only, by either address
    const cartOwn = kubectlJson<{ status: { hostIP: string } }>('get', 'pod', '-n', 'shop', 'cart').status
      .hostIP;
    for (const n of nodes) expect(verdict('shop/cart', n.ip)).toBe(n.ip === cartOwn ? 'ALLOW' : 'DENY');
    for (const [t, ip] of tunnels) expect(verdict('shop/cart', t)).toBe(ip === cartOwn ? 'ALLOW' : 'DENY');
    figures.ownNodeProbes = probes.length;
  } finally {
    sh('kubectl', ['delete', 'adminnetworkpolicy', anp.metadata.name, '--ignore-not-found']);
  }
}

/** A node's tunnel address: the global address of its flannel.1 (its subnet's first address). */
export const tunnelOf = (n: LiveNode): string => deviceAddress(n, 'flannel.1');

/** The global IPv4 address of a device on a node (cascade0, flannel.1). */
export function deviceAddress(n: LiveNode, dev: string): string {
  const [cmd, args] = onNode(n.name, 'ip', ['-j', '-4', 'addr', 'show', 'dev', dev]);
  return (
    JSON.parse(sh(cmd, [...args])) as { addr_info: { local: string; scope: string }[] }[]
  )[0]!.addr_info.find((a) => a.scope === 'global')!.local;
}
