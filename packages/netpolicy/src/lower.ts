// Lowering: one endpoint direction's tiered rules -> two MapState layers with precedence. Admin rules
// take their rank among the admin rules of this endpoint. The layers are shared between endpoints
// separately (an ANP's rules are the same for a whole team; NetworkPolicies differ per app). Entries
// of the key-only identities (any, all pods) go in first so that identity entries they make redundant
// are never inserted.
import { ID, type IdentityInfo } from './identities.ts';
import { MapState, type MapStateEntry, type MapStateKey, parentsOf, type Verdict } from './mapstate.ts';
import { mergeRanges, type PortRange, rangeToPrefixes } from './ports.ts';
import { adminBand, baselineL, encodePrecedence, L_NP_ALLOW, L_NP_ISOLATION } from './precedence.ts';
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
  /** Keys per rule, shared by every table lowered in one pass (valid while selections hold). */
  keyCache?: WeakMap<Rule, MapStateKey[]>;
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

/** Port keys of rules without named ports do not depend on the remote: computed once per rule. */
const fixedPorts = new WeakMap<Rule, PortKey[]>();
function fixedPortKeys(rule: Rule): PortKey[] {
  let k = fixedPorts.get(rule);
  if (!k) fixedPorts.set(rule, (k = portKeys(rule.ports, undefined)));
  return k;
}

type Emit = (identity: number, pk: PortKey) => void;

/**
 * The keys a rule's peers and ports produce, before precedence, emitted one by one. With `only`,
 * just the keys of that identity plus (when `wild`) the key-only identities' keys.
 */
function forEachRuleKey(
  rule: Rule,
  ctx: LowerContext,
  only: number | undefined,
  wild: boolean,
  emit: Emit,
): void {
  const hasNamed = rule.ports?.some((p) => p.kind === 'named') ?? false;
  const ingress = ctx.direction === 'ingress';
  const remotePorts = (id: number) =>
    hasNamed ? portKeys(rule.ports, ingress ? ctx.local : ctx.identities.get(id)) : fixedPortKeys(rule);
  for (let i = 0; i < rule.peers.length; i++) {
    const sel = ctx.select(rule, i);
    if (sel.kind === 'set') {
      if (only !== undefined) {
        if (sel.ids.has(only)) for (const pk of remotePorts(only)) emit(only, pk);
      } else if (hasNamed) {
        for (const id of sel.ids) for (const pk of remotePorts(id)) emit(id, pk);
      } else {
        const pks = fixedPortKeys(rule);
        for (const id of sel.ids) for (const pk of pks) emit(id, pk);
      }
      if (!sel.allPods) continue;
    }
    const wildId = sel.kind === 'all' ? ID.WILDCARD : ID.ALL_PODS;
    if (ingress || !hasNamed) {
      if (wild)
        for (const pk of hasNamed ? portKeys(rule.ports, ctx.local) : fixedPortKeys(rule)) emit(wildId, pk);
      continue;
    }
    // Egress named ports resolve per destination: numbered ports stay wildcard, names expand.
    const numbered = rule.ports!.filter((p) => p.kind === 'range');
    if (wild && numbered.length > 0) for (const pk of portKeys(numbered, undefined)) emit(wildId, pk);
    const named = rule.ports!.filter((p) => p.kind === 'named');
    const ids = new Set<number>();
    for (const p of named)
      for (const id of ctx.byPortName.get(p.name) ?? []) if (only === undefined || id === only) ids.add(id);
    for (const id of ids) for (const pk of portKeys(named, ctx.identities.get(id))) emit(id, pk);
  }
}

/** The keys of a rule (cached per rule when they do not depend on the endpoint), emitted one by one. */
function eachRuleKey(
  rule: Rule,
  ctx: LowerContext,
  only: number | undefined,
  wild: boolean,
  emit: Emit,
): void {
  const ingress = ctx.direction === 'ingress';
  // Keys of ingress rules with named ports depend on the endpoint's own ports: not shared.
  const cacheable =
    ctx.keyCache && only === undefined && wild && !(ingress && rule.ports?.some((p) => p.kind === 'named'));
  if (!cacheable) {
    forEachRuleKey(rule, ctx, only, wild, emit);
    return;
  }
  let keys = ctx.keyCache!.get(rule);
  if (!keys) {
    const out: MapStateKey[] = [];
    forEachRuleKey(rule, ctx, only, wild, (identity, pk) =>
      out.push({ identity, proto: pk.proto, port: pk.port, plen: pk.plen }),
    );
    ctx.keyCache!.set(rule, (keys = out));
  }
  for (const k of keys) emit(k.identity, k);
}

export type Layer = 'admin' | 'lower';

/**
 * Lowers one layer of an endpoint direction into `into` (a new MapState by default). The admin layer
 * holds the admin rules at their rank (Pass rules as "pass" entries); the lower layer holds the
 * NetworkPolicy tier if a NetworkPolicy governs the endpoint in that direction, else the baseline.
 * With `only`, produces just the entries of that identity (for an identity that appeared).
 */
export function lowerLayer(
  layer: Layer,
  t: TieredRules,
  ctx: LowerContext,
  into = new MapState(),
  only?: number,
): MapState {
  // Key-only identities first (any, then all pods), then the others; inside each class the rules come
  // in tier order, which is descending precedence: a partition, not a sort.
  const classes: [MapStateEntry[], MapStateEntry[], MapStateEntry[]] = [[], [], []];
  const add = (identity: number, pk: PortKey, precedence: number, verdict: Verdict, rule: string) => {
    const e: MapStateEntry = {
      identity,
      proto: pk.proto,
      port: pk.port,
      plen: pk.plen,
      precedence,
      verdict,
      deny: verdict === 'deny',
      rule,
    };
    classes[identity === ID.WILDCARD ? 0 : identity === ID.ALL_PODS ? 1 : 2].push(e);
  };
  /** Every key of `r` at one precedence and verdict. */
  const lowerRule = (r: Rule, a: number, l: number, verdict: Verdict) => {
    const precedence = encodePrecedence(a, l, verdict === 'deny');
    eachRuleKey(r, ctx, only, only === undefined, (id, pk) => add(id, pk, precedence, verdict, r.id));
  };
  if (layer === 'admin') {
    t.admin.forEach((r, rank) => lowerRule(r, adminBand(rank), 0, r.action));
  } else if (t.isolation.length > 0) {
    for (const r of t.np) lowerRule(r, 0, L_NP_ALLOW, 'allow');
    if (only === undefined)
      add(
        ID.WILDCARD,
        ANY_PORT,
        encodePrecedence(0, L_NP_ISOLATION, true),
        'deny',
        t.isolation.map((i) => i.policy).join(','),
      );
  } else {
    // Baseline Pass (ClusterNetworkPolicy v1alpha2) means "default allow".
    t.baseline.forEach((r, rank) =>
      lowerRule(r, 0, baselineL(rank), r.action === 'pass' ? 'allow' : r.action),
    );
  }
  if (only !== undefined) into.clear(only);
  for (const list of classes) for (const e of list) into.insert(e);
  return into;
}

export { parentsOf };
