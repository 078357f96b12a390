// What the netpolicy-controller publishes, as plain functions of the engine:
// - one EffectivePolicy per (namespace, pod label set): the ordered rules that apply to those pods
//   per direction (admin tier, NetworkPolicy tier with its isolation, baseline tier), each with its
//   policy, rule, action, priority, peers (as selectors, with how many label sets they select) and
//   ports. Pod churn inside existing label sets changes none of them: an object appears with the
//   first pod of a label set and goes with the last.
// - status conditions for every admin policy (Accepted or Invalid naming the field, what it selects
//   counted in label sets, equal-priority overlaps, dead and shadowed rules from the exact lint).
import { createHash } from 'node:crypto';
import type { LabelSelector } from '@cascade/core';
import { effectiveSummary, matchesSelector } from '@cascade/core';
import type { NetpolEngine } from '../engine/engine.ts';
import { PROTO_NAMES } from '../engine/ports.ts';
import type { Isolation, NamespaceMatch, Peer, PortMatch, Rule, SubjectMatch } from '../engine/rules.ts';
import { namespaceMatches } from '../engine/selection.ts';

/** Rules listed per direction at most (a bigger list is cut and says so). */
export const MAX_PUBLISHED_RULES = 500;
/** Characters of a label-set text kept in targetRef.name (the printer column). */
const MAX_TARGET_TEXT = 253;

export interface PublishedPeer {
  /** The peer as written: `namespaces {team=a} pods {app=web}`, `10.0.0.0/8 except 10.1.0.0/16`, ... */
  peer: string;
  /**
   * true when the peer selects no pod now (a selector that matches nothing, often a typo). Said only
   * of peers confined to the object's own namespace, whose pods its readers can list anyway: of a peer
   * reaching other namespaces it would tell a tenant whether pods with guessed labels exist where they
   * cannot look (the ANP/BANP/CNP conditions, read by admins, still count what each peer selects). No count:
   * counts change whenever a label set appears or goes anywhere in the cluster, and every object
   * naming a broad peer would be rewritten with them (2,001 writes for one new label set at 10,000
   * pods with exact counts; power-of-ten buckets still flapped when a rollout crossed a boundary).
   */
  selectsNone?: true;
}

export interface PublishedRule {
  tier: 'admin' | 'networkpolicy' | 'baseline';
  policy: string;
  rule: string;
  action: 'Allow' | 'Deny' | 'Pass';
  priority?: number;
  peers: PublishedPeer[];
  /** `TCP/80`, `UDP/53-60`, `TCP/http` (named); absent: every protocol and port. */
  ports?: string[];
}

export interface NetworkEffective {
  namespace: string;
  labels: Record<string, string>;
  /** The object's name: `network-` and a hash of the namespace and label set (tenant text never). */
  name: string;
  sources: { kind: string; namespace: string; name: string }[];
  ingress: PublishedRule[];
  egress: PublishedRule[];
  /** Directions whose list was cut at MAX_PUBLISHED_RULES. */
  truncated?: ('ingress' | 'egress')[];
}

const sorted = (o: Record<string, string>) =>
  Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

/** `k=v,k2=v2` for a label set (empty: `(no labels)`). */
export function labelSetText(labels: Record<string, string>): string {
  const t = sorted(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  return t || '(no labels)';
}

export function selectorText(s: LabelSelector): string {
  const parts = sorted(s.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of s.matchExpressions ?? [])
    parts.push(
      e.operator === 'Exists'
        ? e.key
        : e.operator === 'DoesNotExist'
          ? `!${e.key}`
          : `${e.key} ${e.operator === 'In' ? 'in' : 'notin'} (${(e.values ?? []).join(',')})`,
    );
  return parts.length ? `{${parts.join(',')}}` : '{}';
}

const nsText = (m: NamespaceMatch) => ('name' in m ? m.name : selectorText(m.selector));

function peerText(p: Peer): string {
  switch (p.kind) {
    case 'all':
      return 'everything';
    case 'unknown':
      return 'an unknown peer (matches nothing when allowing, everything when denying)';
    case 'pods':
      return `namespaces ${nsText(p.namespaces)} pods ${selectorText(p.pods)}`;
    case 'nodes':
      return `nodes ${selectorText(p.selector)}`;
    case 'cidr':
      return p.text;
  }
}

function portText(m: PortMatch): string {
  if (m.kind === 'named')
    return `${m.proto === undefined ? 'any' : (PROTO_NAMES[m.proto] ?? m.proto)}/${m.name}`;
  const proto = PROTO_NAMES[m.proto] ?? String(m.proto);
  const [a, b] = [m.range.start, m.range.end];
  return a === b ? `${proto}/${a}` : a === 0 && b === 65535 ? proto : `${proto}/${a}-${b}`;
}

const ACTION = { allow: 'Allow', deny: 'Deny', pass: 'Pass' } as const;
const TIER = { admin: 'admin', np: 'networkpolicy', baseline: 'baseline' } as const;

function policyOf(r: Rule): string {
  return r.source.namespace
    ? `${r.source.kind}/${r.source.namespace}/${r.source.name}`
    : `${r.source.kind}/${r.source.name}`;
}

export function effectiveName(namespace: string, labels: Record<string, string>): string {
  const h = createHash('sha256')
    .update(JSON.stringify([namespace, sorted(labels)]))
    .digest('hex');
  return `network-${h.slice(0, 20)}`;
}

export interface LabelSet {
  namespace: string;
  nsLabels: Record<string, string>;
  labels: Record<string, string>;
}

/** A label set's key: namespace, labels and the namespace's labels (a namespace relabelled is new). */
export const labelSetKey = (s: LabelSet): string =>
  JSON.stringify([s.namespace, sorted(s.labels), sorted(s.nsLabels)]);

/** `namespace/name` of a label set's EffectivePolicy. */
export const effectiveKey = (s: LabelSet): string => `${s.namespace}/${effectiveName(s.namespace, s.labels)}`;

/** The (namespace, label set) pairs of live pods, with their namespace's labels, by labelSetKey. */
export function liveLabelSets(engine: NetpolEngine): Map<string, LabelSet> {
  const byPod = new Map<string, LabelSet>();
  for (const p of engine.pods.values()) {
    const key = JSON.stringify([p.namespace, sorted(p.labels)]);
    if (!byPod.has(key))
      byPod.set(key, {
        namespace: p.namespace,
        nsLabels: engine.namespaces.get(p.namespace)?.labels ?? {},
        labels: p.labels,
      });
  }
  return new Map([...byPod.values()].map((s) => [labelSetKey(s), s]));
}

const selectsSet = (p: Extract<Peer, { kind: 'pods' }>, s: LabelSet) =>
  namespaceMatches(p.namespaces, s.namespace, s.nsLabels) && matchesSelector(p.pods, s.labels);

/**
 * Whether each pod peer of the rules selects some label set, kept with one witness per peer: a set
 * that appears can only turn "none" into "some", and only the removal of its witness can turn a peer
 * back to "none" (then the others are searched).
 */
export class PeerWitnesses {
  private readonly witness = new Map<Peer, string | undefined>();

  constructor(engine: NetpolEngine, sets: ReadonlyMap<string, LabelSet>) {
    this.sync(engine, sets);
  }

  /** After the rules changed: peers of new rules get a witness, peers of rules gone are forgotten. */
  sync(engine: NetpolEngine, sets: ReadonlyMap<string, LabelSet>): void {
    const live = new Set<Peer>();
    for (const r of [...engine.rules.admin, ...engine.rules.np, ...engine.rules.baseline])
      for (const p of r.peers) {
        if (p.kind !== 'pods') continue;
        live.add(p);
        if (!this.witness.has(p)) this.witness.set(p, find(p, sets));
      }
    for (const p of this.witness.keys()) if (!live.has(p)) this.witness.delete(p);
  }

  /** A pod peer that selects no pod now (other peers: false). */
  selectsNone(p: Peer): boolean {
    return p.kind === 'pods' && this.witness.get(p) === undefined;
  }

  /** After `added` sets appeared and `removed` went (`sets` is the new whole): whether any peer flipped. */
  update(sets: ReadonlyMap<string, LabelSet>, added: readonly string[], removed: readonly string[]): boolean {
    let flipped = false;
    const gone = new Set(removed);
    for (const [p, w] of this.witness) {
      if (p.kind !== 'pods') continue;
      if (w !== undefined && !gone.has(w)) continue;
      let next: string | undefined;
      if (w === undefined) next = added.find((k) => selectsSet(p, sets.get(k)!));
      else next = find(p, sets);
      if ((w === undefined) !== (next === undefined)) flipped = true;
      this.witness.set(p, next);
    }
    return flipped;
  }
}

function find(p: Peer, sets: ReadonlyMap<string, LabelSet>): string | undefined {
  if (p.kind !== 'pods') return undefined;
  for (const [k, s] of sets) if (selectsSet(p, s)) return k;
  return undefined;
}

/**
 * Builds the EffectivePolicy of one label set from the rules (fixed for one build: a policy change
 * makes a new builder). A rule is published once and shared by every object that lists it.
 */
export class EffectiveBuilder {
  private readonly none: (p: Peer) => boolean;
  private readonly npByNs = new Map<string, Rule[]>();
  private readonly isolations: Isolation[];
  private readonly published = new Map<Rule, PublishedRule>();
  /** Rules with a peer in their own namespace that selects no pod: their copy per namespace. */
  private readonly publishedIn = new Map<Rule, Map<string, PublishedRule>>();
  /**
   * The admin and baseline rules by subject (a policy's rules share theirs), each with its place in
   * its tier's order: a build matches every subject once and takes the rules of those that match,
   * instead of walking every rule of the tier for every label set.
   */
  private readonly bySubject: Record<
    'admin' | 'baseline',
    { subject: SubjectMatch; rules: [number, Rule][] }[]
  >;

  constructor(engine: NetpolEngine, none: (p: Peer) => boolean) {
    this.none = none;
    const group = (rules: Rule[]) => {
      const m = new Map<SubjectMatch, [number, Rule][]>();
      rules.forEach((r, i) => {
        let l = m.get(r.subject);
        if (!l) m.set(r.subject, (l = []));
        l.push([i, r]);
      });
      return [...m].map(([subject, rules]) => ({ subject, rules }));
    };
    this.bySubject = { admin: group(engine.rules.admin), baseline: group(engine.rules.baseline) };
    // NetworkPolicy rules have no order among themselves (their allows add up), and the engine keeps
    // them in the order the policies arrived: sorted here by policy and rule, so that a controller
    // that listed them in another order (a restart, a new leader) publishes the same objects.
    const policy = new Map(engine.rules.np.map((r) => [r, policyOf(r)]));
    const byPolicy = (a: Rule, b: Rule) => {
      const [pa, pb] = [policy.get(a)!, policy.get(b)!];
      if (pa !== pb) return pa < pb ? -1 : 1;
      if (a.direction !== b.direction) return a.direction < b.direction ? -1 : 1;
      return a.source.index - b.source.index;
    };
    for (const r of [...engine.rules.np].sort(byPolicy)) {
      const ns = 'name' in r.subject.namespaces ? r.subject.namespaces.name : '*';
      let l = this.npByNs.get(ns);
      if (!l) this.npByNs.set(ns, (l = []));
      l.push(r);
    }
    this.isolations = [...engine.rules.isolation].sort((a, b) =>
      a.policy < b.policy ? -1 : a.policy > b.policy ? 1 : 0,
    );
  }

  /**
   * The rule as published on an object of namespace `ns`: shared by every object, except that a peer
   * confined to `ns` that selects no pod says so (one copy per namespace for the rules that have one).
   */
  private publish(r: Rule, ns: string): PublishedRule {
    let out = this.published.get(r);
    if (!out) {
      out = {
        tier: TIER[r.tier],
        policy: policyOf(r),
        rule: r.source.ruleName ?? `${r.direction}[${r.source.index}]`,
        action: ACTION[r.action],
        peers: r.peers.map((p) => ({ peer: peerText(p) })),
      };
      if (r.priority !== undefined && r.tier === 'admin') out.priority = r.priority;
      if (r.ports) out.ports = r.ports.map(portText);
      this.published.set(r, out);
    }
    const own = (p: Peer) => p.kind === 'pods' && 'name' in p.namespaces && p.namespaces.name === ns;
    if (!r.peers.some((p) => own(p) && this.none(p))) return out;
    let perNs = this.publishedIn.get(r);
    if (!perNs) this.publishedIn.set(r, (perNs = new Map()));
    let local = perNs.get(ns);
    if (!local) {
      local = {
        ...out,
        peers: r.peers.map((p) =>
          own(p) && this.none(p) ? { peer: peerText(p), selectsNone: true as const } : { peer: peerText(p) },
        ),
      };
      perNs.set(ns, local);
    }
    return local;
  }

  build(s: LabelSet): NetworkEffective {
    // rules of one policy share their subject: each distinct subject is matched once per label set
    const seen = new Map<unknown, boolean>();
    const subject = (r: { subject: SubjectMatch }) => {
      let v = seen.get(r.subject);
      if (v === undefined) {
        v =
          namespaceMatches(r.subject.namespaces, s.namespace, s.nsLabels) &&
          matchesSelector(r.subject.pods, s.labels);
        seen.set(r.subject, v);
      }
      return v;
    };
    // the tier's rules whose subject selects this label set, in the tier's order
    const tier = (t: 'admin' | 'baseline'): Rule[] => {
      const picked: [number, Rule][] = [];
      for (const g of this.bySubject[t]) if (subject(g)) for (const x of g.rules) picked.push(x);
      return picked.sort((a, b) => a[0] - b[0]).map((x) => x[1]);
    };
    const admin = tier('admin');
    const baseline = tier('baseline');
    const npRules = [...(this.npByNs.get(s.namespace) ?? []), ...(this.npByNs.get('*') ?? [])];
    const e: NetworkEffective = {
      namespace: s.namespace,
      labels: s.labels,
      name: effectiveName(s.namespace, s.labels),
      sources: [],
      ingress: [],
      egress: [],
    };
    const sources = new Map<string, { kind: string; namespace: string; name: string }>();
    for (const d of ['ingress', 'egress'] as const) {
      const list: PublishedRule[] = [];
      for (const r of admin) if (r.direction === d) list.push(this.publish(r, s.namespace));
      for (const r of npRules) if (r.direction === d && subject(r)) list.push(this.publish(r, s.namespace));
      for (const i of this.isolations)
        if (i.namespace === s.namespace && i.directions.includes(d) && matchesSelector(i.subject, s.labels))
          list.push(isolationRule(i, d));
      for (const r of baseline) if (r.direction === d) list.push(this.publish(r, s.namespace));
      for (const r of list) {
        const [kind, ...rest] = r.policy.split('/');
        const name = rest.pop()!;
        sources.set(r.policy, { kind: kind!, namespace: rest[0] ?? '', name });
      }
      if (list.length > MAX_PUBLISHED_RULES) {
        list.length = MAX_PUBLISHED_RULES;
        (e.truncated ??= []).push(d);
      }
      e[d] = list;
    }
    e.sources = [...sources.values()].sort((a, b) =>
      `${a.kind}/${a.namespace}/${a.name}` < `${b.kind}/${b.namespace}/${b.name}` ? -1 : 1,
    );
    return e;
  }
}

const isolationRule = (i: Isolation, d: 'ingress' | 'egress'): PublishedRule => ({
  tier: 'networkpolicy',
  policy: i.policy,
  rule: `${d} isolation`,
  action: 'Deny',
  peers: [{ peer: 'everything no NetworkPolicy rule above allows' }],
});

/** Every (namespace, label set) with at least one pod: its published rules, by name. */
export function networkEffectives(engine: NetpolEngine): NetworkEffective[] {
  const sets = liveLabelSets(engine);
  const witnesses = new PeerWitnesses(engine, sets);
  const builder = new EffectiveBuilder(engine, (p) => witnesses.selectsNone(p));
  return [...sets.values()].map((s) => builder.build(s)).sort((a, b) => (a.name < b.name ? -1 : 1));
}

/** The EffectivePolicy spec of one label set (the CRD's shape: policyKind Network, spec.network). */
export function networkEffectiveSpec(e: NetworkEffective): Record<string, unknown> {
  const text = labelSetText(e.labels);
  return {
    policyKind: 'Network',
    targetRef: {
      group: '',
      kind: 'Pod',
      name: text.length > MAX_TARGET_TEXT ? `${text.slice(0, MAX_TARGET_TEXT - 3)}...` : text,
    },
    sources: e.sources,
    summary: effectiveSummary(
      text || '<no labels>',
      e.sources,
      'NetworkPolicy',
      Object.keys(e.labels).length,
    ),
    ruleCount: e.ingress.length + e.egress.length,
    paths: [],
    network: {
      podSelector: { matchLabels: Object.fromEntries(sorted(e.labels)) },
      ingress: e.ingress,
      egress: e.egress,
      ...(e.truncated ? { truncated: e.truncated } : {}),
    },
  };
}
