// `netpol recommend`'s two halves around the pure recommendation (engine/recommend.ts): the observed
// connections of a namespace from flow records, and the proof: the recommended policies enforced
// beside everything else in the world, every observed connection judged again (each judgement also
// through the lowered maps, as simulate checks), and what else the policies admit.
import { matchesSelector } from '@cascade/core';
import {
  type NetpolEngine,
  type Pod,
  PROTO,
  type Recommendation,
  type RecommendConnection,
  type RecommendEnd,
  type ServiceCatalog,
} from '@cascade/netpolicy';
import type { NetpolWorld } from '../netpol-world.ts';
import { simulateProbe } from './netpol.ts';
import { serviceDestination } from './netpol-services.ts';
import { ProbeMemo } from './probe-memo.ts';
import type { ObservedFlow } from './recommend-flows.ts';

export interface Observed {
  connections: RecommendConnection[];
  /** flow records that named the namespace */
  records: number;
  notes: string[];
}

/** `ns/name` of a pod end, or its address. */
export const endName = (e: RecommendEnd): string =>
  'pod' in e ? `${e.pod.namespace}/${e.pod.name}` : e.address;

/**
 * The namespace's connections: one per source, destination, protocol and port, kept when it was
 * allowed and not denied after its last allow (a connection one end allowed and the other denied
 * never happened: it is no evidence). Pods are named as the records name them (gone pods are left
 * out, said in notes); an address that is a pod's now is that pod; a ClusterIP is its backends.
 */
export function observedConnections(
  flows: readonly ObservedFlow[],
  world: Pick<NetpolWorld, 'engine' | 'services'>,
  namespace: string,
  since?: number,
): Observed {
  const { engine, services } = world;
  const mine = (x: string) => x.startsWith(`${namespace}/`) || engine.podAt(x)?.namespace === namespace;
  const byKey = new Map<string, { f: ObservedFlow; allowed?: number; denied?: number; count: number }>();
  let records = 0;
  let undated = 0;
  for (const f of flows) {
    if (since !== undefined && (f.at === undefined || f.at < since)) {
      if (f.at === undefined) undated++;
      continue;
    }
    const k = `${f.from}|${f.to}|${f.protocol}|${f.port}`;
    // a ClusterIP destination is decided by its backends: checked below
    if (!mine(f.from) && !mine(f.to) && (f.to.includes('/') || !services.find(f.to))) continue;
    records++;
    const e = byKey.get(k) ?? { f, count: 0 };
    const at = f.at ?? 0;
    if (f.verdict === 'allow') {
      e.allowed = Math.max(e.allowed ?? at, at);
      e.count += f.count;
    } else e.denied = Math.max(e.denied ?? at, at);
    byKey.set(k, e);
  }
  const notes: string[] = [];
  if (undated) notes.push(`${undated} flow record(s) without a time left out by --since`);
  const gone = new Set<string>();
  let contradicted = 0;
  const connections: RecommendConnection[] = [];
  const inNamespace = (e: RecommendEnd) => 'pod' in e && e.pod.namespace === namespace;
  const endOf = (x: string): RecommendEnd | undefined => {
    if (x.includes('/')) {
      const pod = engine.pods.get(x);
      if (!pod) gone.add(x);
      return pod ? { pod } : undefined;
    }
    const pod = engine.podAt(x);
    if (pod) return { pod };
    const node = engine.nodeAt(x)?.name;
    return { address: x, ...(node ? { node } : {}) };
  };
  for (const e of byKey.values()) {
    if (e.allowed === undefined) continue;
    if (e.denied !== undefined && e.denied >= e.allowed) {
      contradicted++;
      continue;
    }
    const { f } = e;
    const src = endOf(f.from);
    const dst = endOf(f.to);
    if (!src || !dst) continue;
    for (const d of backendsOf(engine, services, src, dst, f)) {
      if (!inNamespace(src) && !inNamespace(d.end)) continue;
      connections.push({ src, dst: d.end, protocol: f.protocol, port: d.port, flows: e.count });
    }
  }
  if (gone.size)
    notes.push(
      `${gone.size} pod(s) named by flows no longer exist (${[...gone].slice(0, 3).join(', ')}${gone.size > 3 ? ', ...' : ''}): their flows are left out`,
    );
  if (contradicted)
    notes.push(
      `${contradicted} connection(s) allowed by one end and denied by the other are no evidence: left out`,
    );
  return { connections, records, notes };
}

/** A ClusterIP destination: one end per backend (with its target port); anything else: itself. */
function backendsOf(
  engine: NetpolEngine,
  services: ServiceCatalog,
  src: RecommendEnd,
  dst: RecommendEnd,
  f: ObservedFlow,
): { end: RecommendEnd; port: number }[] {
  if (!('address' in dst) || !services.find(dst.address)) return [{ end: dst, port: f.port }];
  const srcIp = 'pod' in src ? src.pod.ips[0]! : src.address;
  try {
    const hop = serviceDestination(engine, services, srcIp, dst.address, PROTO[f.protocol], String(f.port));
    if (!hop || hop.forwardedBy) return [{ end: dst, port: f.port }];
    return hop.backends.flatMap((b) => {
      const pod = engine.pods.get(b.name);
      return pod ? [{ end: { pod }, port: b.port }] : [];
    });
  } catch {
    return [{ end: dst, port: f.port }]; // a port the Service does not have: the address as dialled
  }
}

export interface Proof {
  connections: number;
  allowed: number;
  /** connections the recommended policies do not admit, with what decides them */
  refused: { from: string; to: string; protocol: string; port: number; decidedBy: string }[];
  /** pod pairs the policies admit that were not observed (the first `limit`) */
  beyond: { policy: string; from: string; to: string; protocol: string; port: number }[];
  beyondCount: number;
}

/**
 * Judges every observed connection in `world` (the recommended policies enforced) and lists the pod
 * pairs the recommended rules admit beyond them (DNS rules aside: kept on purpose).
 */
export function prove(
  world: Pick<NetpolWorld, 'engine'>,
  recs: readonly Recommendation[],
  connections: readonly RecommendConnection[],
  limit = 1000,
): Proof {
  const { engine } = world;
  const memo = new ProbeMemo();
  const proof: Proof = {
    connections: connections.length,
    allowed: 0,
    refused: [],
    beyond: [],
    beyondCount: 0,
  };
  const seen = new Set<string>();
  for (const c of connections) {
    const [from, to] = [endName(c.src), endName(c.dst)];
    seen.add(`${from}|${to}|${c.protocol}|${c.port}`);
    const r = simulateProbe(engine, from, to, PROTO[c.protocol], c.port, memo);
    if (r.verdict === 'allow') proof.allowed++;
    else {
      const d = r.egress?.verdict === 'deny' ? r.egress : r.ingress;
      proof.refused.push({
        from,
        to,
        protocol: c.protocol,
        port: c.port,
        decidedBy: d ? `${d.decidedBy.tier}${d.decidedBy.policy ? ` ${d.decidedBy.policy}` : ''}` : 'unknown',
      });
    }
  }
  const pods = [...engine.pods.values()];
  type Peer = NonNullable<Recommendation['policy']['spec']['ingress']>[number]['from'][number];
  const selects = (peer: Peer, home: string) => {
    const ns = peer.namespaceSelector?.matchLabels['kubernetes.io/metadata.name'] ?? home;
    return pods.filter((p) => p.namespace === ns && matchesSelector(peer.podSelector ?? {}, p.labels));
  };
  const portsOn = (pod: Pod, ports: { protocol: string; port: number | string }[]) =>
    ports.flatMap((p) =>
      typeof p.port === 'number'
        ? [{ protocol: p.protocol, port: p.port }]
        : pod.ports
            .filter((c) => c.name === p.port && c.protocol === p.protocol)
            .map((c) => ({ protocol: c.protocol, port: c.port })),
    );
  // the ports a rule names, on the pod that answers them (named ports are the destination's)
  const consider = (
    policy: string,
    from: Pod,
    to: Pod,
    ports: { protocol: string; port: number | string }[],
  ) => {
    if (from === to) return;
    for (const p of portsOn(to, ports)) {
      const [f, t] = [`${from.namespace}/${from.name}`, `${to.namespace}/${to.name}`];
      if (seen.has(`${f}|${t}|${p.protocol}|${p.port}`)) continue;
      const r = simulateProbe(engine, f, t, PROTO[p.protocol as keyof typeof PROTO], p.port, memo);
      if (r.verdict !== 'allow') continue;
      seen.add(`${f}|${t}|${p.protocol}|${p.port}`);
      proof.beyondCount++;
      if (proof.beyond.length < limit)
        proof.beyond.push({ policy, from: f, to: t, protocol: p.protocol, port: p.port });
    }
  };
  for (const rec of recs) {
    const name = `${rec.policy.metadata.namespace}/${rec.policy.metadata.name}`;
    const targets = rec.pods.map((k) => engine.pods.get(k)).filter((p): p is Pod => !!p);
    for (const rule of rec.policy.spec.ingress ?? [])
      for (const peer of rule.from)
        if (!peer.ipBlock)
          for (const from of selects(peer, rec.policy.metadata.namespace))
            for (const to of targets) consider(name, from, to, rule.ports);
    for (const rule of rec.policy.spec.egress ?? [])
      for (const peer of rule.to) {
        // the DNS rule is kept on purpose, whatever was seen
        if (peer.ipBlock || peer.podSelector?.matchLabels?.['k8s-app'] === 'kube-dns') continue;
        for (const to of selects(peer, rec.policy.metadata.namespace))
          for (const from of targets) consider(name, from, to, rule.ports);
      }
  }
  return proof;
}
