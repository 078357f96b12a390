// Lowering: one endpoint direction's tiered rules -> two MapState layers with precedence. Admin rules
// take their rank among the admin rules of this endpoint. The layers are shared between endpoints
// separately (an ANP's rules are the same for a whole team; NetworkPolicies differ per app). Entries
// of the key-only identities (any, all pods) go in first so that identity entries they make redundant
// are never inserted; identities the same rules select share one bucket (see lowerLayer).
import { ID, type IdentityInfo, isPodIdentity } from './identities.ts';
import { MapState, type MapStateEntry, type MapStateKey, parentsOf, type Verdict } from './mapstate.ts';
import { mergeRanges, type PortRange, rangeToPrefixes } from './ports.ts';
import { adminBand, baselineL, encodePrecedence, L_NP_ALLOW, L_NP_ISOLATION } from './precedence.ts';
import type { Direction, PortMatch, Rule } from './rules.ts';
import { denseIds, identitySlot, identitySlots, type Selection, type SetSelection } from './selection.ts';
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

interface Emitter {
  /** One key of one identity. */
  one(identity: number, pk: PortKey): void;
  /** The same port key for every identity of a set selection. */
  many(sel: SetSelection, pk: PortKey): void;
}

const keyOnly = (id: number) => id === ID.WILDCARD || id === ID.ALL_PODS;

/**
 * The keys a rule's peers and ports produce, before precedence. With `only`, just that identity's
 * (never one of the key-only identities: any, all pods). Per identity, keys come in rule, peer, port
 * order.
 */
function forEachRuleKey(rule: Rule, ctx: LowerContext, only: number | undefined, out: Emitter): void {
  const wild = only === undefined;
  const hasNamed = hasNamedPorts(rule);
  const ingress = ctx.direction === 'ingress';
  for (let i = 0; i < rule.peers.length; i++) {
    const sel = ctx.select(rule, i);
    if (sel.kind === 'set') {
      if (only !== undefined) {
        if (sel.ids.has(only)) {
          const owner = ingress ? ctx.local : ctx.identities.get(only);
          for (const pk of hasNamed ? portKeys(rule.ports, owner) : fixedPortKeys(rule)) out.one(only, pk);
        }
      } else if (hasNamed) {
        for (const id of sel.ids)
          for (const pk of portKeys(rule.ports, ingress ? ctx.local : ctx.identities.get(id)))
            out.one(id, pk);
      } else for (const pk of fixedPortKeys(rule)) out.many(sel, pk);
      if (!sel.allPods) continue;
    }
    const wildId = sel.kind === 'all' ? ID.WILDCARD : ID.ALL_PODS;
    if (ingress || !hasNamed) {
      if (wild)
        for (const pk of hasNamed ? portKeys(rule.ports, ctx.local) : fixedPortKeys(rule))
          out.one(wildId, pk);
      continue;
    }
    // Egress named ports resolve per destination: numbered ports stay wildcard, names expand.
    const numbered = rule.ports!.filter((p) => p.kind === 'range');
    if (wild && numbered.length > 0) for (const pk of portKeys(numbered, undefined)) out.one(wildId, pk);
    const named = rule.ports!.filter((p) => p.kind === 'named');
    const byName = new Set<number>();
    for (const p of named)
      for (const id of ctx.byPortName.get(p.name) ?? [])
        if (only === undefined || id === only) byName.add(id);
    for (const id of byName) for (const pk of portKeys(named, ctx.identities.get(id))) out.one(id, pk);
  }
}

const namedPorts = new WeakMap<Rule, boolean>();
function hasNamedPorts(rule: Rule): boolean {
  let n = namedPorts.get(rule);
  if (n === undefined) namedPorts.set(rule, (n = rule.ports?.some((p) => p.kind === 'named') ?? false));
  return n;
}

/**
 * The keys of a rule. Those of rules with named ports (resolved per identity) are cached per rule when
 * they do not depend on the endpoint; the others come straight from the (cached) selections.
 */
function eachRuleKey(rule: Rule, ctx: LowerContext, only: number | undefined, out: Emitter): void {
  // Keys of ingress rules with named ports depend on the endpoint's own ports: not shared.
  const cacheable = ctx.keyCache && only === undefined && hasNamedPorts(rule) && ctx.direction === 'egress';
  if (!cacheable) {
    forEachRuleKey(rule, ctx, only, out);
    return;
  }
  let keys = ctx.keyCache!.get(rule);
  if (!keys) {
    const all: MapStateKey[] = [];
    const push = (identity: number, pk: PortKey) =>
      all.push({ identity, proto: pk.proto, port: pk.port, plen: pk.plen });
    forEachRuleKey(rule, ctx, undefined, {
      one: push,
      many: (sel, pk) => {
        for (const id of sel.ids) push(id, pk);
      },
    });
    ctx.keyCache!.set(rule, (keys = all));
  }
  for (const k of keys) out.one(k.identity, k);
}

export type Layer = 'admin' | 'lower';

/**
 * Per-identity scratch of a full lowering, indexed by identity slot and reused across lowerings
 * (`stamp` says which lowering wrote a slot): each identity's entries as a linked list of templates.
 */
const scratch = {
  epoch: 0,
  stamp: new Int32Array(1024),
  head: new Int32Array(1024),
  tail: new Int32Array(1024),
  id: new Float64Array(1024),
  next: new Int32Array(1 << 16),
  template: new Int32Array(1 << 16),
};
function growSlots(n: number): void {
  if (n <= scratch.stamp.length) return;
  const size = Math.max(n, scratch.stamp.length * 2);
  const grow = <T extends Int32Array | Float64Array>(a: T): T => {
    const b = new (a.constructor as new (n: number) => T)(size);
    b.set(a);
    return b;
  };
  scratch.stamp = grow(scratch.stamp);
  scratch.head = grow(scratch.head);
  scratch.tail = grow(scratch.tail);
  scratch.id = grow(scratch.id);
}
function growNodes(n: number): void {
  if (n < scratch.next.length) return;
  const size = Math.max(n + 1, scratch.next.length * 2);
  const next = new Int32Array(size);
  next.set(scratch.next);
  const template = new Int32Array(size);
  template.set(scratch.template);
  scratch.next = next;
  scratch.template = template;
}

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
  // One pass over the rules in tier order (descending precedence) collects the key-only identities'
  // entries (any, all pods) and records, per other identity, the sequence of entries the rules give it
  // (set selections at once, through identity slots). Then the key-only entries go in first, so that
  // identity entries they make redundant are never inserted, and each recorded sequence after them:
  // identities with the same sequence (the same rules selected them, and both pods or both not) get
  // the same bucket, built once and shared. With `only`, that identity's entries go straight in.
  const keyed: [MapStateEntry[], MapStateEntry[]] = [[], []];
  let precedence = 0;
  let verdict: Verdict = 'allow';
  let deny = false;
  let rule = '';
  const entry = (identity: number, pk: PortKey): MapStateEntry => ({
    identity,
    proto: pk.proto,
    port: pk.port,
    plen: pk.plen,
    precedence,
    verdict,
    deny,
    rule,
  });
  const templates: MapStateEntry[] = [];
  let lastPk: PortKey | undefined;
  let template = -1;
  const epoch = ++scratch.epoch;
  const touched: number[] = [];
  let nodes = 0;
  const record = (slot: number, identity: number) => {
    growNodes(nodes + 1);
    const { stamp, tail, next } = scratch;
    if (stamp[slot] !== epoch) {
      stamp[slot] = epoch;
      scratch.head[slot] = nodes;
      scratch.id[slot] = identity;
      touched.push(slot);
    } else next[tail[slot]!] = nodes;
    tail[slot] = nodes;
    next[nodes] = -1;
    scratch.template[nodes] = template;
    nodes++;
  };
  const templateFor = (pk: PortKey) => {
    if (pk !== lastPk) {
      lastPk = pk;
      template = templates.push(entry(ID.WILDCARD, pk)) - 1;
    }
  };
  const out: Emitter = {
    one(identity, pk) {
      if (keyOnly(identity)) keyed[identity === ID.WILDCARD ? 0 : 1].push(entry(identity, pk));
      else if (only !== undefined) into.insert(entry(identity, pk));
      else {
        const slot = identitySlot(identity);
        growSlots(slot + 1);
        templateFor(pk);
        record(slot, identity);
      }
    },
    many(sel, pk) {
      if (only !== undefined) {
        for (const id of sel.ids) this.one(id, pk);
        return;
      }
      const { list, slots } = denseIds(sel);
      growSlots(identitySlots());
      growNodes(nodes + list.length);
      templateFor(pk);
      const { stamp, head, tail, id, next, template: tpl } = scratch;
      for (let j = 0; j < slots.length; j++) {
        const slot = slots[j]!;
        if (stamp[slot] !== epoch) {
          stamp[slot] = epoch;
          head[slot] = nodes;
          id[slot] = list[j]!;
          touched.push(slot);
        } else next[tail[slot]!] = nodes;
        tail[slot] = nodes;
        next[nodes] = -1;
        tpl[nodes] = template;
        nodes++;
      }
    },
  };
  /** Every key of `r` at one precedence and verdict. */
  const lowerRule = (r: Rule, a: number, l: number, v: Verdict) => {
    precedence = encodePrecedence(a, l, v === 'deny');
    verdict = v;
    deny = v === 'deny';
    rule = r.id;
    lastPk = undefined;
    eachRuleKey(r, ctx, only, out);
  };
  const lowerAll = () => {
    if (layer === 'admin') {
      t.admin.forEach((r, rank) => lowerRule(r, adminBand(rank), 0, r.action));
    } else if (t.isolation.length > 0) {
      for (const r of t.np) lowerRule(r, 0, L_NP_ALLOW, 'allow');
    } else {
      // Baseline Pass (ClusterNetworkPolicy v1alpha2) means "default allow".
      t.baseline.forEach((r, rank) =>
        lowerRule(r, 0, baselineL(rank), r.action === 'pass' ? 'allow' : r.action),
      );
    }
  };
  if (only !== undefined) into.clear(only);
  lowerAll();
  if (only === undefined) {
    if (layer === 'lower' && t.isolation.length > 0) {
      precedence = encodePrecedence(0, L_NP_ISOLATION, true);
      verdict = 'deny';
      deny = true;
      rule = t.isolation.map((i) => i.policy).join(',');
      out.one(ID.WILDCARD, ANY_PORT);
    }
    for (const list of keyed) for (const e of list) into.insert(e);
    buildBuckets(into, templates, touched);
  }
  return into;
}

/** Inserts each recorded identity's entries, or shares the bucket of an identity with the same ones. */
function buildBuckets(into: MapState, templates: MapStateEntry[], touched: number[]): void {
  const { head, next, template, id } = scratch;
  /** Whether two slots recorded the same template sequence (walking both lists, no allocation). */
  const same = (a: number, b: number) => {
    let x = head[a]!;
    let y = head[b]!;
    while (x !== -1 && y !== -1) {
      if (template[x] !== template[y]) return false;
      x = next[x]!;
      y = next[y]!;
    }
    return x === y;
  };
  // Slots whose bucket was built, by a hash of (pod or not, sequence); who shares each.
  const built = new Map<number, number[]>();
  const sharers = new Map<number, number[]>();
  for (const slot of touched) {
    const identity = id[slot]!;
    const pod = isPodIdentity(identity);
    let h = pod ? 0x811c9dc5 : 0x01000193;
    for (let n = head[slot]!; n !== -1; n = next[n]!) h = Math.imul(h ^ template[n]!, 0x01000193);
    const candidates = built.get(h);
    let from = -1;
    if (candidates)
      for (const c of candidates)
        if (isPodIdentity(id[c]!) === pod && same(c, slot)) {
          from = c;
          break;
        }
    if (from !== -1) {
      const list = sharers.get(from);
      if (list) list.push(identity);
      else sharers.set(from, [identity]);
      continue;
    }
    for (let n = head[slot]!; n !== -1; n = next[n]!) {
      const t = templates[template[n]!]!;
      into.insert({
        identity,
        proto: t.proto,
        port: t.port,
        plen: t.plen,
        precedence: t.precedence,
        verdict: t.verdict,
        deny: t.deny,
        rule: t.rule,
      });
    }
    if (!into.bucket(identity).length) continue;
    if (candidates) candidates.push(slot);
    else built.set(h, [slot]);
  }
  for (const [slot, identities] of sharers) into.share(into.bucket(id[slot]!), identities);
}

export { parentsOf };
