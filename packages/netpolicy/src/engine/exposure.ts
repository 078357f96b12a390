// Exposure: per workload, who can reach it and what it can reach, across every tier (admin,
// NetworkPolicy, baseline), computed with the direct evaluation (evaluate.ts) and no sampling:
// - a workload is the pods of one identity (or one pod, when its identity is capped), so every pod
//   of it is judged alike; its representative is its first pod by name;
// - the port space is cut where any rule that can judge the pair starts or ends a range, or where the
//   destination names a port, so one port of each piece stands for the whole piece;
// - the address space outside the cluster is cut at every prefix and exception any rule names, so
//   one address of each piece stands for the whole piece;
// - "a new namespace" is a pod with no labels in a namespace with none but its name, at a free address
//   of the pod network (newPodAddress): what any namespace created later gets, which a
//   namespaceSelector {} admits and a named namespace does not.

import { formatPrefix, type Prefix } from './cidr.ts';
import type { NetpolEngine } from './engine.ts';
import { evaluateDirection, type Remote, type RuleSet } from './evaluate.ts';
import type { Pod } from './model.ts';
import { PROTO } from './ports.ts';
import type { Direction } from './rules.ts';
import { probeRuleSet } from './verdict.ts';

export interface Workload {
  key: string;
  namespace: string;
  /** `app.kubernetes.io/name` or `app` of its pods, else its first pod's name */
  name: string;
  pods: string[];
}

export type ExposurePeer =
  | { kind: 'workload'; workload: string; namespace: string }
  | { kind: 'new-namespace' }
  /** a node other than the one the pod runs on */
  | { kind: 'node'; node: string }
  /** the node each pod of the workload runs on (a NetworkPolicy cannot block it) */
  /**
   * the node each pod runs on; `node` set only when the workload's pods judge their own nodes
   * differently (pods on nodes of different labels): then one edge per such node
   */
  | { kind: 'own-node'; node?: string }
  | { kind: 'outside'; family: 4 | 6; from: bigint; to: bigint };

/** Ports of one protocol, both ends included. */
export interface PortSpan {
  proto: number;
  from: number;
  to: number;
}

export interface ExposureEdge {
  workload: string;
  /** ingress: the peer reaches the workload; egress: the workload reaches the peer */
  direction: Direction;
  peer: ExposurePeer;
  ports: PortSpan[];
}

export const EXPOSURE_PROTOCOLS = [PROTO.TCP, PROTO.UDP, PROTO.SCTP] as const;
/** The namespace that stands for any namespace created later (not a valid name: never a real one). */
export const NEW_NAMESPACE = '(new namespace)';
const WIDTH = { 4: 32, 6: 128 } as const;

export function workloadsOf(engine: NetpolEngine): Workload[] {
  const groups = new Map<string, Pod[]>();
  for (const pod of [...engine.pods.values()].sort((a, b) =>
    `${a.namespace}/${a.name}`.localeCompare(`${b.namespace}/${b.name}`),
  )) {
    if (!pod.ips.length || engine.nodeAt(pod.ips[0]!)) continue;
    const id = engine.podIdentity.get(`${pod.namespace}/${pod.name}`);
    const shared = id !== undefined && !engine.identities.get(id)?.capped;
    const k = shared ? `${pod.namespace}|id:${id}` : `${pod.namespace}|pod:${pod.name}`;
    const g = groups.get(k);
    if (g) g.push(pod);
    else groups.set(k, [pod]);
  }
  const out: Workload[] = [];
  const taken = new Map<string, number>();
  for (const pods of groups.values()) {
    const first = pods[0]!;
    const label = first.labels['app.kubernetes.io/name'] ?? first.labels.app ?? first.name;
    const base = `${first.namespace}/${label}`;
    const n = (taken.get(base) ?? 0) + 1;
    taken.set(base, n);
    out.push({
      key: n === 1 ? base : `${base}#${n}`,
      namespace: first.namespace,
      name: label,
      pods: pods.map((p) => p.name),
    });
  }
  return out;
}

/** Every exposure edge of every workload, ingress and egress, in a stable order. */
export function exposure(engine: NetpolEngine): { workloads: Workload[]; edges: ExposureEdge[] } {
  const workloads = workloadsOf(engine);
  const rs = probeRuleSet(engine);
  const pod = (w: Workload, i = 0) => engine.pods.get(`${w.namespace}/${w.pods[i]}`)!;
  const freshIp = newPodAddress(engine);
  const fresh: Pod = { namespace: NEW_NAMESPACE, name: '(any pod)', labels: {}, ips: [freshIp], ports: [] };
  const regions = outsideRegions(engine);
  const edges: ExposureEdge[] = [];
  for (const w of workloads) {
    const p = pod(w);
    for (const d of ['ingress', 'egress'] as const) {
      const add = (peer: ExposurePeer, ports: PortSpan[]) => {
        if (ports.length) edges.push({ workload: w.key, direction: d, peer, ports });
      };
      for (const o of workloads) {
        // a workload and itself: two of its pods (one pod alone always reaches itself)
        const q = o === w ? (w.pods.length > 1 ? pod(w, 1) : undefined) : pod(o);
        if (!q) continue;
        const ports =
          d === 'ingress'
            ? podToPod(engine, rs, q, p, q.ips[0]!, p.ips[0]!)
            : podToPod(engine, rs, p, q, p.ips[0]!, q.ips[0]!);
        add({ kind: 'workload', workload: o.key, namespace: o.namespace }, ports);
      }
      add(
        { kind: 'new-namespace' },
        d === 'ingress'
          ? podToPod(engine, rs, fresh, p, freshIp, p.ips[0]!)
          : podToPod(engine, rs, p, fresh, p.ips[0]!, freshIp),
      );
      // a node as a node other than the pod's own (the same pod, placed nowhere), then its own node
      const placedNowhere: Pod = { ...p, node: undefined };
      const at = rs.forLocal?.(p, d) ?? rs;
      for (const node of [...engine.nodes.values()].sort((a, b) => a.name.localeCompare(b.name))) {
        if (!node.ips.length) continue;
        const remote: Remote = { kind: 'node', node, ip: node.ips[0]! };
        add({ kind: 'node', node: node.name }, oneSide(at, placedNowhere, remote, d));
      }
      // its own node, from each node its pods run on (a node's labels can decide: an admin's nodes peer)
      const owns = new Map<string, PortSpan[]>();
      for (let i = 0; i < w.pods.length; i++) {
        const q = pod(w, i);
        const own = q.node === undefined ? undefined : engine.nodes.get(q.node);
        if (!own?.ips.length || owns.has(own.name)) continue;
        owns.set(
          own.name,
          oneSide(rs.forLocal?.(q, d) ?? rs, q, { kind: 'node', node: own, ip: own.ips[0]! }, d),
        );
      }
      const alike = new Set([...owns.values()].map((x) => JSON.stringify(x))).size <= 1;
      if (alike) add({ kind: 'own-node' }, [...owns.values()][0] ?? []);
      else
        for (const [node, ports] of [...owns].sort((a, b) => a[0].localeCompare(b[0])))
          add({ kind: 'own-node', node }, ports);
      for (const r of regions) {
        const remote: Remote = { kind: 'external', ip: addressText(r.family, r.from) };
        add(r, oneSide(at, p, remote, d));
      }
    }
  }
  return { workloads, edges };
}

/** The pod's own rules in `d` (rulesAt), or the whole set for a pod the engine does not hold. */
function rulesOf(engine: NetpolEngine, rs: RuleSet, pod: Pod, d: Direction): RuleSet {
  return engine.pods.get(`${pod.namespace}/${pod.name}`) === pod ? (rs.forLocal?.(pod, d) ?? rs) : rs;
}

/** Ports on which `src` reaches `dst`: egress allowed at the source and ingress at the destination. */
function podToPod(
  engine: NetpolEngine,
  rs: RuleSet,
  src: Pod,
  dst: Pod,
  srcIp: string,
  dstIp: string,
): PortSpan[] {
  const out = rulesOf(engine, rs, src, 'egress');
  const inn = rulesOf(engine, rs, dst, 'ingress');
  const to: Remote = { kind: 'pod', pod: dst, ip: dstIp };
  const from: Remote = { kind: 'pod', pod: src, ip: srcIp };
  return spans(
    [out, inn],
    dst,
    (proto, port) =>
      evaluateDirection(out, src, to, 'egress', proto, port).verdict === 'allow' &&
      evaluateDirection(inn, dst, from, 'ingress', proto, port).verdict === 'allow',
  );
}

/**
 * Ports allowed at `local` alone, judged with `at`, its own rule set (the remote is a node or outside:
 * only the pod's side judges, and a named port resolves against the pod only on its ingress).
 */
function oneSide(at: RuleSet, local: Pod, remote: Remote, d: Direction): PortSpan[] {
  return spans(
    [at],
    d === 'ingress' ? local : undefined,
    (proto, port) => evaluateDirection(at, local, remote, d, proto, port).verdict === 'allow',
  );
}

/**
 * The allowed spans of each protocol: `allowed` is asked once per piece of the port space, the
 * pieces cut where a rule of `sets` starts or ends a range or `named` (the destination) names a port.
 */
function spans(
  sets: RuleSet[],
  named: Pod | undefined,
  allowed: (proto: number, port: number) => boolean,
): PortSpan[] {
  // the cuts of every protocol, in one pass over the rules
  const cutsOf = new Map<number, Set<number>>(EXPOSURE_PROTOCOLS.map((p) => [p, new Set([1, 65536])]));
  for (const s of sets)
    for (const tier of [s.admin, s.np, s.baseline])
      for (const r of tier)
        for (const m of r.ports ?? [])
          if (m.kind === 'range')
            cutsOf
              .get(m.proto)
              ?.add(m.range.start)
              .add(m.range.end + 1);
  for (const cp of named?.ports ?? [])
    cutsOf
      .get(PROTO[cp.protocol])
      ?.add(cp.port)
      .add(cp.port + 1);
  const out: PortSpan[] = [];
  for (const [proto, cuts] of cutsOf) {
    const points = [...cuts].filter((c) => c >= 1 && c <= 65536).sort((a, b) => a - b);
    for (let i = 0; i + 1 < points.length; i++) {
      const [from, next] = [points[i]!, points[i + 1]!];
      if (!allowed(proto, from)) continue;
      const last = out[out.length - 1];
      if (last && last.proto === proto && last.to === from - 1) last.to = next - 1;
      else out.push({ proto, from, to: next - 1 });
    }
  }
  return out;
}

/** The address space of both families cut at every prefix and exception the rules name. */
function outsideRegions(engine: NetpolEngine): Extract<ExposurePeer, { kind: 'outside' }>[] {
  const cuts = { 4: new Set<bigint>([0n]), 6: new Set<bigint>([0n]) };
  const add = (p: Prefix) => {
    const size = 1n << BigInt(WIDTH[p.family] - p.len);
    cuts[p.family].add(p.bits).add(p.bits + size);
  };
  const { admin, np, baseline } = engine.rules;
  for (const r of [...admin, ...np, ...baseline])
    for (const peer of r.peers)
      if (peer.kind === 'cidr') {
        add(peer.cidr);
        peer.except.forEach(add);
      }
  const out: Extract<ExposurePeer, { kind: 'outside' }>[] = [];
  for (const family of [4, 6] as const) {
    const end = 1n << BigInt(WIDTH[family]);
    const points = [...cuts[family]].filter((c) => c <= end);
    points.push(end);
    const sorted = [...new Set(points)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    for (let i = 0; i + 1 < sorted.length; i++)
      out.push({ kind: 'outside', family, from: sorted[i]!, to: sorted[i + 1]! - 1n });
  }
  return out;
}

/**
 * The address a pod of a new namespace stands at: the first free address of the smallest prefix (at
 * most a /24) holding every pod's IPv4 address, so that a rule on the pod network's addresses (an
 * admin `networks` peer) judges it as it would a new pod there; 10.0.0.1 in a cluster without pods.
 */
export function newPodAddress(engine: NetpolEngine): string {
  const held = new Set<bigint>();
  for (const pod of engine.pods.values()) for (const ip of pod.ips) if (!ip.includes(':')) held.add(v4(ip));
  for (const node of engine.nodes.values())
    for (const ip of node.ips) if (!ip.includes(':')) held.add(v4(ip));
  const pods = [...engine.pods.values()].flatMap((p) => p.ips.filter((ip) => !ip.includes(':')).map(v4));
  if (!pods.length) return '10.0.0.1';
  let len = 24;
  const first = pods[0]!;
  while (len > 0 && pods.some((a) => a >> BigInt(32 - len) !== first >> BigInt(32 - len))) len--;
  const base = (first >> BigInt(32 - len)) << BigInt(32 - len);
  const size = 1n << BigInt(32 - len);
  for (let i = 1n; i < size - 1n && i < 65_536n; i++)
    if (!held.has(base + i)) return addressText(4, base + i);
  return addressText(4, base);
}

const v4 = (ip: string): bigint => ip.split('.').reduce((a, x) => (a << 8n) | BigInt(Number(x)), 0n);

function addressText(family: 4 | 6, bits: bigint): string {
  return formatPrefix({ family, bits, len: WIDTH[family] }).replace(/\/\d+$/, '');
}

/** The fewest prefixes that cover exactly from..to (both included). */
export function rangeToPrefixes(family: 4 | 6, from: bigint, to: bigint): string[] {
  const w = WIDTH[family];
  const out: string[] = [];
  let at = from;
  while (at <= to) {
    let len = w;
    // the largest aligned block starting at `at` that ends by `to`
    while (len > 0) {
      const size = 1n << BigInt(w - len + 1);
      if (at % size !== 0n || at + size - 1n > to) break;
      len--;
    }
    out.push(formatPrefix({ family, bits: at, len }));
    at += 1n << BigInt(w - len);
  }
  return out;
}
