// NetworkPolicy rules that an admin rule makes dead: every connection the NetworkPolicy rule would
// allow, in the cluster as it is, is decided (Allow or Deny, not Pass) by the admin tier before
// NetworkPolicy is consulted. The check is exact for the current pods, nodes and ports: the admin
// decision is constant between consecutive "boundaries" (port range ends, named-port numbers, CIDR
// ends), so one representative per piece is enough. Pods that every rule treats alike (same
// namespace, labels and named ports, and as remotes the same CIDRs around their address) are
// evaluated once for all of them, and connections are counted with their multiplicity: the cost
// follows the label sets, not the pods.
import { matchesSelector } from '@cascade/core';
import { contains, formatPrefix, hostPrefix, type Prefix, prefixKey } from './cidr.ts';
import type { NetpolEngine } from './engine.ts';
import { peerMatches, type Remote, type RuleSet, ruleMatches } from './evaluate.ts';
import type { Pod } from './model.ts';
import { PROTO } from './ports.ts';
import type { Rule } from './rules.ts';
import { namespaceMatches } from './selection.ts';
import { ruleSetOf } from './verdict.ts';

const policyOf = (r: Rule) =>
  r.source.namespace
    ? `${r.source.kind}/${r.source.namespace}/${r.source.name}`
    : `${r.source.kind}/${r.source.name}`;

/** Evaluations allowed for the dead-rule analysis; beyond it the analysis stops and says so. */
export const DEAD_RULE_BUDGET = 2_000_000;

const ALL_PROTOS = [PROTO.TCP, PROTO.UDP, PROTO.SCTP, 1];

export function portBoundaries(engine: NetpolEngine): Map<number, number[]> {
  const by = new Map<number, Set<number>>();
  const add = (proto: number, p: number) => {
    if (p < 0 || p > 65535) return;
    let s = by.get(proto);
    if (!s) by.set(proto, (s = new Set([0])));
    s.add(p);
  };
  for (const proto of ALL_PROTOS) add(proto, 0);
  for (const r of engine.rules.admin)
    for (const m of r.ports ?? []) {
      if (m.kind === 'range') {
        add(m.proto, m.range.start);
        add(m.proto, m.range.end + 1);
      }
    }
  // Named ports resolve to container ports: each is a piece of its own.
  for (const p of engine.pods.values())
    for (const cp of p.ports) {
      add(PROTO[cp.protocol], cp.port);
      add(PROTO[cp.protocol], cp.port + 1);
    }
  return new Map([...by].map(([k, v]) => [k, [...v].sort((a, b) => a - b)]));
}

/**
 * (proto, port) points that represent every piece of a rule's port space, by rule: named ports are
 * resolved from an index of every pod's container ports built once, and rules with the same ports
 * share their points.
 */
export function portPoints(
  engine: NetpolEngine,
  bounds: Map<number, number[]>,
): (r: Rule) => [number, number][] {
  const named = new Map<string, Map<string, [number, number]>>();
  for (const p of engine.pods.values())
    for (const cp of p.ports) {
      if (!cp.name) continue;
      let m = named.get(cp.name);
      if (!m) named.set(cp.name, (m = new Map()));
      m.set(`${cp.protocol}/${cp.port}`, [PROTO[cp.protocol], cp.port]);
    }
  const memo = new Map<string, [number, number][]>();
  return (r) => {
    const key = r.ports ? JSON.stringify(r.ports) : '*';
    const known = memo.get(key);
    if (known) return known;
    const out: [number, number][] = [];
    const within = (proto: number, start: number, end: number) => {
      if (proto === 1) {
        if (start === 0) out.push([1, 0]);
        return;
      }
      out.push([proto, start]);
      for (const b of bounds.get(proto) ?? []) if (b > start && b <= end) out.push([proto, b]);
    };
    if (!r.ports) for (const proto of ALL_PROTOS) within(proto, 0, 65535);
    for (const m of r.ports ?? []) {
      if (m.kind === 'range') within(m.proto, m.range.start, m.range.end);
      else
        for (const [proto, port] of named.get(m.name)?.values() ?? [])
          if (m.proto === undefined || m.proto === proto) out.push([proto, port]);
    }
    const seen = new Set<string>();
    const points = out.filter(([a, b]) => !seen.has(`${a}/${b}`) && seen.add(`${a}/${b}`));
    memo.set(key, points);
    return points;
  };
}

/** One external address per piece of the address space cut by every CIDR in the rules. */
export function externalPoints(engine: NetpolEngine): Remote[] {
  const taken = new Set<string>();
  for (const p of engine.pods.values()) for (const ip of p.ips) taken.add(ip);
  for (const n of engine.nodes.values()) for (const ip of n.ips) taken.add(ip);
  const points = new Map<string, Prefix>();
  const addPoint = (family: 4 | 6, bits: bigint) => {
    const width = family === 4 ? 32 : 128;
    if (bits < 0n || bits >= 1n << BigInt(width)) return;
    const p: Prefix = { family, bits, len: width };
    points.set(prefixKey(p), p);
  };
  addPoint(4, 0n);
  addPoint(6, 0n);
  for (const r of [...engine.rules.admin, ...engine.rules.np])
    for (const peer of r.peers)
      if (peer.kind === 'cidr')
        for (const c of [peer.cidr, ...peer.except]) {
          const width = c.family === 4 ? 32 : 128;
          addPoint(c.family, c.bits);
          addPoint(c.family, c.bits + (1n << BigInt(width - c.len)));
        }
  const out: Remote[] = [];
  for (const p of points.values()) {
    const ip = formatPrefix(p).split('/')[0]!;
    if (!taken.has(ip)) out.push({ kind: 'external', ip });
  }
  return out;
}

export interface DeadRule {
  rule: Rule;
  deciders: Map<string, { action: string; count: number }>;
  connections: number;
}

export function adminDecision(rs: RuleSet, local: Pod, remote: Remote, r: Rule, proto: number, port: number) {
  for (const a of rs.admin) {
    if (!ruleMatches(a, local, remote, r.direction, proto, port, rs)) continue;
    return a.action === 'pass' ? undefined : a;
  }
  return undefined;
}

/** Pods that every rule treats alike, with one of them to evaluate. */
interface PodClass {
  rep: Pod;
  members: Pod[];
}

const sortedText = (o: Record<string, string>) =>
  Object.entries(o)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
const portsText = (p: Pod) =>
  p.ports
    .map((cp) => `${cp.name ?? ''}/${cp.protocol}/${cp.port}`)
    .sort()
    .join(',');

function classes(pods: Iterable<Pod>, key: (p: Pod) => string): PodClass[] {
  const by = new Map<string, PodClass>();
  for (const p of pods) {
    const k = key(p);
    const c = by.get(k);
    if (c) c.members.push(p);
    else by.set(k, { rep: p, members: [p] });
  }
  return [...by.values()];
}

/** The CIDRs of pod-matching peers (and their excepts) containing the pod's address, as a key. */
function cidrKeyOf(engine: NetpolEngine): (p: Pod) => string {
  const cidrs = new Map<string, Prefix>();
  for (const r of [...engine.rules.admin, ...engine.rules.np, ...engine.rules.baseline])
    for (const peer of r.peers)
      if (peer.kind === 'cidr' && peer.pods)
        for (const c of [peer.cidr, ...peer.except]) cidrs.set(prefixKey(c), c);
  const list = [...cidrs.values()];
  return (p) => {
    const ip = p.ips[0] === undefined ? undefined : hostPrefix(p.ips[0]);
    if (!ip) return '';
    let out = '';
    for (let i = 0; i < list.length; i++) if (contains(list[i]!, ip)) out += `${i},`;
    return out;
  };
}

/** NetworkPolicy rules made dead by admin rules (only those of policies in `namespaces` when given). */
export function deadNetworkPolicyRules(
  engine: NetpolEngine,
  namespaces?: ReadonlySet<string>,
): { dead: DeadRule[]; skipped: number } {
  const rs = ruleSetOf(engine);
  if (rs.admin.length === 0) return { dead: [], skipped: 0 };
  const pointsOf = portPoints(engine, portBoundaries(engine));
  const cidrKey = cidrKeyOf(engine);
  const remotePods = classes(
    engine.pods.values(),
    (p) => `${p.namespace}|${sortedText(p.labels)}|${portsText(p)}|${cidrKey(p)}`,
  );
  const remotes: { remote: Remote; members?: Pod[] }[] = [
    ...remotePods.map((c) => ({
      remote: { kind: 'pod', pod: c.rep, ip: c.rep.ips[0]! } as Remote,
      members: c.members,
    })),
    ...[...engine.nodes.values()].map((node) => ({
      remote: { kind: 'node', node, ip: node.ips[0]! } as Remote,
    })),
    ...externalPoints(engine).map((remote) => ({ remote })),
  ];
  // the pods a rule can apply to, by namespace, in classes (what `local` reads: labels, named ports)
  const localsByNs = new Map<string, PodClass[]>();
  const localsOf = (ns: string) => {
    let l = localsByNs.get(ns);
    if (!l) {
      const pods = [...engine.pods.values()].filter((p) => p.namespace === ns);
      localsByNs.set(ns, (l = classes(pods, (p) => `${sortedText(p.labels)}|${portsText(p)}`)));
    }
    return l;
  };
  let budget = DEAD_RULE_BUDGET;
  let skipped = 0;
  const dead: DeadRule[] = [];
  for (const r of engine.rules.np) {
    const ns = r.source.namespace ?? '';
    if (namespaces && !namespaces.has(ns)) continue;
    if (budget <= 0) {
      skipped++;
      continue;
    }
    const points = pointsOf(r);
    const deciders = new Map<string, { action: string; count: number }>();
    let connections = 0;
    let live = false;
    const locals = namespaceMatches(r.subject.namespaces, ns, rs.nsLabels(ns))
      ? localsOf(ns).filter((c) => matchesSelector(r.subject.pods, c.rep.labels))
      : [];
    outer: for (const local of locals) {
      const mine = local.members.length > 1 ? new Set(local.members) : undefined;
      for (const { remote, members } of remotes) {
        if (!r.peers.some((p) => peerMatches(p, remote, r.action, rs))) continue;
        // connections between these locals and remotes: a pod always reaches itself and its node
        let pairs: number;
        if (remote.kind === 'pod') {
          let both = 0;
          if (remote.pod.namespace === ns)
            for (const m of members!) if (mine ? mine.has(m) : m === local.rep) both++;
          pairs = local.members.length * members!.length - both;
        } else if (remote.kind === 'node')
          pairs = local.members.filter((m) => m.node !== remote.node.name).length;
        else pairs = local.members.length;
        if (pairs === 0) continue;
        for (const [proto, port] of points) {
          if (--budget <= 0) {
            live = true; // unknown: say nothing rather than something wrong
            skipped++;
            break outer;
          }
          if (!ruleMatches(r, local.rep, remote, r.direction, proto, port, rs)) continue;
          const a = adminDecision(rs, local.rep, remote, r, proto, port);
          if (!a) {
            live = true;
            break outer;
          }
          connections += pairs;
          const name = a.source.ruleName ? `${policyOf(a)}#${a.source.ruleName}` : a.id;
          const d = deciders.get(name) ?? { action: a.action, count: 0 };
          d.count += pairs;
          deciders.set(name, d);
        }
      }
    }
    if (!live && connections > 0) dead.push({ rule: r, deciders, connections });
  }
  return { dead, skipped };
}
