// Lowering: one endpoint direction's tiered rules -> MapState entries with precedence.
// Admin rules take their rank among the admin rules of this endpoint; Pass becomes copies of the lower
// tiers' entries it covers (see precedence.ts). Entries of the key-only identities (any, all pods) go
// in first so that identity entries they make redundant are never inserted.
import { ID, type IdentityInfo, isPodIdentity } from './identities.ts';
import { MapState, type MapStateEntry, type MapStateKey, parentsOf } from './mapstate.ts';
import { mergeRanges, type PortRange, rangeToPrefixes } from './ports.ts';
import {
  adminBand,
  baselineL,
  encodePrecedence,
  L_DEFAULT,
  L_NP_ALLOW,
  L_NP_ISOLATION,
} from './precedence.ts';
import type { Direction, PortMatch, Rule } from './rules.ts';
import type { Selection } from './selection.ts';
import type { TieredRules } from './tiers.ts';

export interface LowerContext {
  direction: Direction;
  /** The endpoint's own identity (named ports of ingress rules resolve against it). */
  local: IdentityInfo;
  identities: ReadonlyMap<number, IdentityInfo>;
  /** Pod identities by named port (name -> ids), for egress named ports with wildcard peers. */
  byPortName: ReadonlyMap<string, number[]>;
  select(rule: Rule, peerIndex: number): Selection;
}

type PortKey = Pick<MapStateKey, 'proto' | 'port' | 'plen'>;
const ANY_PORT: PortKey = { proto: 0, port: 0, plen: 0 };

/** Port keys of a rule's ports as seen for one remote (undefined remote: no pod to resolve names). */
export function portKeys(ports: PortMatch[] | undefined, namedOwner: IdentityInfo | undefined): PortKey[] {
  if (!ports) return [ANY_PORT];
  const byProto = new Map<number, PortRange[]>();
  const add = (proto: number, r: PortRange) => {
    let l = byProto.get(proto);
    if (!l) byProto.set(proto, (l = []));
    l.push(r);
  };
  for (const m of ports) {
    if (m.kind === 'range') add(m.proto, m.range);
    else if (namedOwner?.ports) {
      for (const cp of namedOwner.ports) {
        const proto = cp.protocol === 'TCP' ? 6 : cp.protocol === 'UDP' ? 17 : 132;
        if (cp.name === m.name && (m.proto === undefined || m.proto === proto))
          add(proto, { start: cp.port, end: cp.port });
      }
    }
  }
  const out: PortKey[] = [];
  for (const [proto, ranges] of [...byProto].sort((a, b) => a[0] - b[0])) {
    for (const r of mergeRanges(ranges))
      for (const p of rangeToPrefixes(r)) out.push({ proto, port: p.port, plen: p.len });
  }
  return out;
}

interface Draft {
  key: MapStateKey;
  a: number;
  l: number;
  deny: boolean;
  rule: string;
  passedBy?: string;
}

/** The entries a rule's peers and ports produce, before precedence. */
function ruleKeys(rule: Rule, ctx: LowerContext): MapStateKey[] {
  const out: MapStateKey[] = [];
  const hasNamed = rule.ports?.some((p) => p.kind === 'named') ?? false;
  const ingress = ctx.direction === 'ingress';
  rule.peers.forEach((_, i) => {
    const sel = ctx.select(rule, i);
    if (sel.kind === 'set') {
      for (const id of sel.ids) {
        const remote = ctx.identities.get(id);
        for (const pk of portKeys(rule.ports, ingress ? ctx.local : remote))
          out.push({ identity: id, ...pk });
      }
      return;
    }
    const wildId = sel.kind === 'all' ? ID.WILDCARD : ID.ALL_PODS;
    if (ingress || !hasNamed) {
      for (const pk of portKeys(rule.ports, ingress ? ctx.local : undefined))
        out.push({ identity: wildId, ...pk });
      return;
    }
    // Egress named ports resolve per destination: numbered ports stay wildcard, names expand.
    const numbered = rule.ports!.filter((p) => p.kind === 'range');
    if (numbered.length > 0)
      for (const pk of portKeys(numbered, undefined)) out.push({ identity: wildId, ...pk });
    const ids = new Set<number>();
    for (const p of rule.ports!)
      if (p.kind === 'named') for (const id of ctx.byPortName.get(p.name) ?? []) ids.add(id);
    for (const id of ids) {
      const named = rule.ports!.filter((p) => p.kind === 'named');
      for (const pk of portKeys(named, ctx.identities.get(id))) out.push({ identity: id, ...pk });
    }
  });
  return out;
}

function covers(a: number, b: number): boolean {
  return a === b || a === ID.WILDCARD || (a === ID.ALL_PODS && isPodIdentity(b));
}

/** The intersection of two keys, or undefined. */
export function intersectKeys(a: MapStateKey, b: MapStateKey): MapStateKey | undefined {
  const identity = covers(a.identity, b.identity)
    ? b.identity
    : covers(b.identity, a.identity)
      ? a.identity
      : undefined;
  if (identity === undefined) return undefined;
  if (a.proto === 0) return { identity, proto: b.proto, port: b.port, plen: b.plen };
  if (b.proto === 0) return { identity, proto: a.proto, port: a.port, plen: a.plen };
  if (a.proto !== b.proto) return undefined;
  const [short, long] = a.plen <= b.plen ? [a, b] : [b, a];
  const shift = 16 - short.plen;
  if (short.plen > 0 && long.port >>> shift !== short.port >>> shift) return undefined;
  return { identity, proto: long.proto, port: long.port, plen: long.plen };
}

/**
 * Lowers one endpoint direction. With `only`, produces just the entries of that identity (for an
 * identity that appeared) into `into`, which already holds the other entries.
 */
export function lowerTable(
  t: TieredRules,
  ctx: LowerContext,
  into = new MapState(),
  only?: number,
): MapState {
  const drafts: Draft[] = [];
  const wanted = (k: MapStateKey) => only === undefined || k.identity === only;

  // Lower tiers (A = 0): NetworkPolicy if it governs the endpoint, else the baseline.
  const lower: Draft[] = [];
  if (t.isolation.length > 0) {
    for (const r of t.np)
      for (const key of ruleKeys(r, ctx)) lower.push({ key, a: 0, l: L_NP_ALLOW, deny: false, rule: r.id });
    lower.push({
      key: { identity: ID.WILDCARD, ...ANY_PORT },
      a: 0,
      l: L_NP_ISOLATION,
      deny: true,
      rule: t.isolation.map((i) => i.policy).join(','),
    });
  } else {
    t.baseline.forEach((r, rank) => {
      for (const key of ruleKeys(r, ctx))
        lower.push({ key, a: 0, l: baselineL(rank), deny: r.action === 'deny', rule: r.id });
    });
  }

  t.admin.forEach((r, rank) => {
    const a = adminBand(rank);
    const keys = ruleKeys(r, ctx);
    if (r.action !== 'pass') {
      for (const key of keys)
        if (wanted(key)) drafts.push({ key, a, l: 0, deny: r.action === 'deny', rule: r.id });
      return;
    }
    for (const key of keys) {
      if (wanted(key))
        drafts.push({ key, a, l: L_DEFAULT, deny: false, rule: 'default-allow', passedBy: r.id });
      for (const e of lower) {
        const k = intersectKeys(key, e.key);
        if (k && wanted(k)) drafts.push({ key: k, a, l: e.l, deny: e.deny, rule: e.rule, passedBy: r.id });
      }
    }
  });
  for (const d of lower) if (wanted(d.key)) drafts.push(d);

  const classOrder = (id: number) => (id === ID.WILDCARD ? 0 : id === ID.ALL_PODS ? 1 : 2);
  const entries: MapStateEntry[] = drafts.map((d) => {
    const e: MapStateEntry = {
      ...d.key,
      precedence: encodePrecedence(d.a, d.l, d.deny),
      deny: d.deny,
      rule: d.rule,
    };
    if (d.passedBy) e.passedBy = d.passedBy;
    return e;
  });
  entries.sort((x, y) => classOrder(x.identity) - classOrder(y.identity) || y.precedence - x.precedence);
  if (only !== undefined) into.clear(only);
  for (const e of entries) into.insert(e);
  return into;
}

export { parentsOf };
