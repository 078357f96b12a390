// Least-privilege NetworkPolicies from observed connections (`cascadectl netpol recommend`): a plain
// function of the pods and the connections, no I/O. Pods are grouped into workloads by their stable
// labels (app.kubernetes.io/{name,instance,component}, then app, then k8s-app; never
// pod-template-hash and the other per-revision labels), peers into the same groups (another
// namespace by its immutable kubernetes.io/metadata.name), addresses outside the cluster into /32
// (/128) ipBlocks. Every workload of the namespace with an observed connection gets one policy that
// isolates it both ways and admits exactly the observed peer groups on the observed ports (named
// when every pod that answers names the port the same), DNS kept.
import { matchesSelector } from '@cascade/core';
import type { ContainerPort, Pod } from './model.ts';

type Labels = Readonly<Record<string, string>>;
export type Protocol = ContainerPort['protocol'];

/** One end of an observed connection: a pod, or an address that is none (outside, a node). */
export type RecommendEnd = { pod: Pod } | { address: string; node?: string };

export interface RecommendConnection {
  src: RecommendEnd;
  dst: RecommendEnd;
  protocol: Protocol;
  port: number;
  /** flow records behind it */
  flows: number;
}

export interface RecommendOptions {
  namespace: string;
  /** every pod known (targets, peers, DNS servers) */
  pods: Iterable<Pod>;
  connections: readonly RecommendConnection[];
  /** keep DNS: an egress rule to the cluster's DNS on UDP and TCP 53 (default true) */
  dns?: boolean;
}

interface PolicyPeer {
  podSelector?: { matchLabels?: Record<string, string> };
  namespaceSelector?: { matchLabels: Record<string, string> };
  ipBlock?: { cidr: string };
}
interface PolicyPort {
  protocol: Protocol;
  port: number | string;
}
export interface RecommendedPolicy {
  apiVersion: 'networking.k8s.io/v1';
  kind: 'NetworkPolicy';
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
  };
  spec: {
    podSelector: { matchLabels: Record<string, string> };
    /** both, but a direction seen with another node's address (no NetworkPolicy admits one) */
    policyTypes: ('Ingress' | 'Egress')[];
    ingress?: { from: PolicyPeer[]; ports: PolicyPort[] }[];
    egress?: { to: PolicyPeer[]; ports: PolicyPort[] }[];
  };
}

export interface Recommendation {
  /** the workload: `ns/name` */
  workload: string;
  pods: string[];
  policy: RecommendedPolicy;
  /** the observed connections this policy is written from */
  connections: number;
}

export interface RecommendResult {
  recommendations: Recommendation[];
  /** what was left out, and why (one line each) */
  notes: string[];
}

/** Labels that change with every rollout or name one pod: never part of a workload's selector. */
const VOLATILE = new Set([
  'pod-template-hash',
  'controller-revision-hash',
  'pod-template-generation',
  'statefulset.kubernetes.io/pod-name',
  'apps.kubernetes.io/pod-index',
  'controller-uid',
  'batch.kubernetes.io/controller-uid',
  'job-name',
  'batch.kubernetes.io/job-name',
  'batch.kubernetes.io/job-completion-index',
  'app.kubernetes.io/version',
  'app.kubernetes.io/managed-by',
  'helm.sh/chart',
  'version',
]);
const RECOMMENDED_KEYS = [
  'app.kubernetes.io/name',
  'app.kubernetes.io/instance',
  'app.kubernetes.io/component',
];

/**
 * The labels that name a pod's workload across rollouts: app.kubernetes.io/{name,instance,component}
 * (part-of when none of them), else app, else k8s-app, else every label but the volatile ones;
 * undefined for a pod with none (no selector picks it alone).
 */
export function stableSelector(labels: Labels): Record<string, string> | undefined {
  const pick = (keys: string[]) =>
    Object.fromEntries(keys.filter((k) => k in labels).map((k) => [k, labels[k]!]));
  const recommended = pick(RECOMMENDED_KEYS);
  if (Object.keys(recommended).length) return recommended;
  for (const k of ['app.kubernetes.io/part-of', 'app', 'k8s-app']) if (k in labels) return pick([k]);
  const rest = Object.keys(labels)
    .filter((k) => !VOLATILE.has(k) && !k.endsWith('-hash'))
    .sort();
  return rest.length ? pick(rest) : undefined;
}

const selectorKey = (ns: string, sel: Record<string, string> | undefined) =>
  `${ns}|${sel ? JSON.stringify(Object.entries(sel).sort()) : '*'}`;
const NS_NAME = 'kubernetes.io/metadata.name';

/** A DNS-1123 name part from label values: lower case, [a-z0-9-], at most 40 characters. */
function namePart(sel: Record<string, string>): string {
  const values = [...new Set(Object.values(sel))];
  const s = values
    .join('-')
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .slice(0, 40)
    .replace(/^-+|-+$/g, '');
  return s || 'workload';
}

interface Group {
  ns: string;
  sel: Record<string, string> | undefined;
  pods: Pod[];
}

export function recommend(opts: RecommendOptions): RecommendResult {
  const notes: string[] = [];
  const pods = [...opts.pods];
  // every group of every namespace, by selector (a peer's group too: its pods name its ports)
  const groups = new Map<string, Group>();
  const groupOf = (p: Pod): Group => {
    const sel = stableSelector(p.labels);
    const k = selectorKey(p.namespace, sel);
    let g = groups.get(k);
    if (!g) {
      g = {
        ns: p.namespace,
        sel,
        pods: pods.filter(
          (q) => q.namespace === p.namespace && matchesSelector({ matchLabels: sel ?? {} }, q.labels),
        ),
      };
      groups.set(k, g);
    }
    return g;
  };
  const podKey = (p: Pod) => `${p.namespace}/${p.name}`;
  const unlabelled = new Set<string>();
  const peerOf = (end: RecommendEnd, target: Group): { key: string; peer: PolicyPeer; group?: Group } => {
    if ('address' in end) {
      const cidr = end.address.includes(':') ? `${end.address}/128` : `${end.address}/32`;
      return { key: `ip|${cidr}`, peer: { ipBlock: { cidr } } };
    }
    const g = groupOf(end.pod);
    if (!g.sel) unlabelled.add(podKey(end.pod));
    const podSelector = g.sel ? { matchLabels: { ...g.sel } } : {};
    const peer: PolicyPeer =
      g.ns === target.ns
        ? { podSelector }
        : { namespaceSelector: { matchLabels: { [NS_NAME]: g.ns } }, podSelector };
    return { key: `pod|${selectorKey(g.ns, g.sel)}`, peer, group: g };
  };
  // a port as the pods that answer it name it: the name when every one names it the same
  const portOf = (answering: Pod[] | undefined, protocol: Protocol, port: number): PolicyPort => {
    if (!answering?.length) return { protocol, port };
    let name: string | undefined;
    for (const p of answering) {
      const cp = p.ports.find((c) => c.port === port && c.protocol === protocol && c.name);
      if (!cp || (name !== undefined && cp.name !== name)) return { protocol, port };
      name = cp.name;
    }
    return { protocol, port: name! };
  };

  // the namespace's workloads, and each one's connections, both ways
  interface Side {
    group: Group;
    ingress: Map<string, { peer: PolicyPeer; ports: Map<string, PolicyPort> }>;
    egress: Map<string, { peer: PolicyPeer; ports: Map<string, PolicyPort> }>;
    connections: number;
    /** a direction left unisolated: the first connection with another node that needs it */
    open: { ingress?: string; egress?: string };
  }
  const sides = new Map<Group, Side>();
  const side = (g: Group) => {
    let s = sides.get(g);
    if (!s) {
      s = { group: g, ingress: new Map(), egress: new Map(), connections: 0, open: {} };
      sides.set(g, s);
    }
    return s;
  };
  const add = (rules: Side['ingress'], peer: { key: string; peer: PolicyPeer }, port: PolicyPort) => {
    let r = rules.get(peer.key);
    if (!r) {
      r = { peer: peer.peer, ports: new Map() };
      rules.set(peer.key, r);
    }
    r.ports.set(`${port.protocol}/${port.port}`, port);
  };
  let ownNode = 0;
  for (const c of opts.connections) {
    for (const dir of ['egress', 'ingress'] as const) {
      const [me, them] = dir === 'egress' ? [c.src, c.dst] : [c.dst, c.src];
      if (!('pod' in me) || me.pod.namespace !== opts.namespace) continue;
      const g = groupOf(me.pod);
      if (!g.sel) {
        unlabelled.add(podKey(me.pod));
        continue;
      }
      const s = side(g);
      if ('address' in them && them.node) {
        // a pod's own node reaches it and is reached whatever a NetworkPolicy says (kubelet's
        // probes): no rule. Another node's address no NetworkPolicy can admit (an ipBlock never
        // matches a node's address: README); that direction is left unisolated, and said
        if (them.node === me.pod.node) ownNode++;
        else if (!s.open[dir]) s.open[dir] = `${them.address} (node ${them.node}) ${c.protocol}/${c.port}`;
        continue;
      }
      s.connections++;
      const peer = peerOf(them, g);
      const answering = dir === 'ingress' ? g.pods : peer.group?.pods;
      add(dir === 'ingress' ? s.ingress : s.egress, peer, portOf(answering, c.protocol, c.port));
    }
  }
  for (const k of [...unlabelled].sort())
    notes.push(
      k.startsWith(`${opts.namespace}/`)
        ? `${k}: has no labels a selector can pick it by: no policy written for it (a peer rule for it admits every pod of ${opts.namespace})`
        : `${k}: has no labels: a peer rule for it admits every pod of its namespace`,
    );
  if (ownNode)
    notes.push(
      `${ownNode} connection(s) with a pod's own node need no rule: a NetworkPolicy never blocks them`,
    );

  // DNS: the cluster's DNS servers (kube-system's k8s-app=kube-dns, as kubeadm and most distributions
  // label CoreDNS), on UDP and TCP 53, for every workload that gets an egress policy
  const dnsPods = pods.filter((p) => p.namespace === 'kube-system' && p.labels['k8s-app'] === 'kube-dns');
  const dnsPeer: PolicyPeer = {
    namespaceSelector: { matchLabels: { [NS_NAME]: 'kube-system' } },
    podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
  };
  const dnsKey = dnsPods.length
    ? `pod|${selectorKey('kube-system', stableSelector(dnsPods[0]!.labels))}`
    : '';

  const used = new Set<string>();
  const recommendations: Recommendation[] = [];
  const ordered = [...sides.values()].sort((a, b) =>
    selectorKey(a.group.ns, a.group.sel) < selectorKey(b.group.ns, b.group.sel) ? -1 : 1,
  );
  for (const s of ordered) {
    if (opts.dns !== false) {
      // observed DNS flows fold into the DNS rule (53 only; other ports of the DNS pods stay theirs)
      const seen = s.egress.get(dnsKey);
      if (seen) {
        for (const k of [...seen.ports.keys()])
          if (/^(UDP|TCP)\/(53|dns|dns-tcp)$/.test(k)) seen.ports.delete(k);
        if (!seen.ports.size) s.egress.delete(dnsKey);
      }
    }
    const rules = <T extends 'from' | 'to'>(
      m: Side['ingress'],
      field: T,
    ): ({ ports: PolicyPort[] } & Record<T, PolicyPeer[]>)[] => {
      // peers that share one port list share one rule
      const byPorts = new Map<string, { peers: PolicyPeer[]; ports: PolicyPort[] }>();
      for (const [, r] of [...m].sort(([a], [b]) => (a < b ? -1 : 1))) {
        const ports = [...r.ports.values()].sort((a, b) =>
          a.protocol === b.protocol
            ? String(a.port).localeCompare(String(b.port), 'en', { numeric: true })
            : a.protocol < b.protocol
              ? -1
              : 1,
        );
        const k = JSON.stringify(ports);
        const e = byPorts.get(k) ?? { peers: [], ports };
        e.peers.push(r.peer);
        byPorts.set(k, e);
      }
      return [...byPorts.values()].map(
        (e) => ({ [field]: e.peers, ports: e.ports }) as { ports: PolicyPort[] } & Record<T, PolicyPeer[]>,
      );
    };
    const egress = rules(s.egress, 'to');
    if (opts.dns !== false)
      egress.push({
        to: [dnsPeer],
        ports: [
          { protocol: 'UDP', port: 53 },
          { protocol: 'TCP', port: 53 },
        ],
      });
    const workload = `${s.group.ns}/${namePart(s.group.sel!)}`;
    for (const dir of ['ingress', 'egress'] as const)
      if (s.open[dir])
        notes.push(
          `${workload}: ${dir} left unisolated: it was seen with ${s.open[dir]}, another node's address, which no NetworkPolicy admits (an admin policy's nodes peer can)`,
        );
    if (!s.connections) {
      notes.push(
        `${workload} (${s.group.pods.length} pod(s)): seen only with nodes: no policy written (a default deny written blind would cut what the window did not see)`,
      );
      continue;
    }
    const types = (['Ingress', 'Egress'] as const).filter(
      (t) => !s.open[t === 'Ingress' ? 'ingress' : 'egress'],
    );
    if (!types.length) continue;
    const base = `recommended-${namePart(s.group.sel!)}`;
    let name = base;
    for (let i = 2; used.has(name); i++) name = `${base}-${i}`;
    used.add(name);
    recommendations.push({
      workload,
      pods: s.group.pods.map(podKey).sort(),
      connections: s.connections,
      policy: {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: {
          name,
          namespace: s.group.ns,
          labels: { 'app.kubernetes.io/managed-by': 'cascadectl-recommend' },
          annotations: {
            'cascade.dev/recommended-from': `${s.connections} observed connection(s) of ${s.group.pods.length} pod(s)`,
          },
        },
        spec: {
          podSelector: { matchLabels: { ...s.group.sel! } },
          policyTypes: [...types],
          ...(s.open.ingress ? {} : { ingress: rules(s.ingress, 'from') }),
          ...(s.open.egress ? {} : { egress }),
        },
      },
    });
  }
  const seen = new Set(ordered.map((s) => s.group));
  for (const p of pods) {
    if (p.namespace !== opts.namespace) continue;
    const g = groupOf(p);
    if (g.sel && !seen.has(g)) {
      seen.add(g);
      notes.push(
        `${opts.namespace}/${namePart(g.sel)} (${g.pods.length} pod(s)): no connection observed: no policy written (a default deny written blind would cut what the window did not see)`,
      );
    }
  }
  return { recommendations, notes };
}
