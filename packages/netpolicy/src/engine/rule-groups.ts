// Which rules apply to an identity, in tier order: rules grouped by the policy (and so the subject)
// they share, NetworkPolicy groups indexed by namespace, and the tiered fold shared by every identity
// that matches the same groups and isolations (replicas, and pods alike enough).
import { matchesSelector } from '@cascade/core';
import type { IdentityInfo } from './identities.ts';
import { type BuiltPolicy, compareRules, type Direction, type Isolation, type Rule } from './rules.ts';
import { subjectSelects } from './selection.ts';
import { policyKeyOf } from './selection-cache.ts';
import { composeTiers, type TieredRules } from './tiers.ts';

/** The rules of one ANP / CNP / BANP / NetworkPolicy: they share a subject. */
type Group = { id: number; subject: Rule['subject']; namespace?: string; rules: Rule[] };

export interface EngineRules {
  admin: Rule[];
  np: Rule[];
  isolation: Isolation[];
  baseline: Rule[];
}

export class RuleGroups {
  private readonly revisionOf: (policyKey: string) => number;
  private groups: Group[] = [];
  private clusterGroups: Group[] = [];
  private groupsByNs = new Map<string, Group[]>();
  private isolationByNs = new Map<string, Isolation[]>();
  /** Tiers by (direction, matched groups, matched isolations): identities matching the same share them. */
  private tiersByGroups = new Map<string, TieredRules>();
  /** Tiered rules of an identity and direction; identities with the same rule lists share the fold. */
  private readonly tierCache = new Map<string, TieredRules>();
  /** `id@revision` per rule object: a rule object belongs to one build of its policy, so it never changes. */
  private readonly ruleRevs = new WeakMap<Rule, string>();

  /** `revisionOf`: the revision of a policy's current build (0 when gone). */
  constructor(revisionOf: (policyKey: string) => number) {
    this.revisionOf = revisionOf;
  }

  /** Regroups after the rules changed. */
  rebuild(rules: EngineRules): void {
    const byPolicy = new Map<string, Group>();
    // Group ids are only meaningful within one build: the tiers cached by them go with it.
    this.tiersByGroups = new Map();
    for (const r of [...rules.admin, ...rules.np, ...rules.baseline]) {
      const k = policyKeyOf(r);
      let g = byPolicy.get(k);
      if (!g) {
        g = { id: byPolicy.size, subject: r.subject, rules: [] };
        if ('name' in r.subject.namespaces) g.namespace = r.subject.namespaces.name;
        byPolicy.set(k, g);
      }
      g.rules.push(r);
    }
    this.groups = [...byPolicy.values()];
    // NetworkPolicy groups apply in their own namespace only: index them by it.
    this.clusterGroups = this.groups.filter((g) => g.namespace === undefined);
    this.groupsByNs = new Map();
    for (const g of this.groups) if (g.namespace !== undefined) push(this.groupsByNs, g.namespace, g);
    this.isolationByNs = new Map();
    for (const i of rules.isolation) push(this.isolationByNs, i.namespace, i);
  }

  /** `id@revision` of a rule. */
  rev(r: Rule): string {
    let s = this.ruleRevs.get(r);
    if (s === undefined) this.ruleRevs.set(r, (s = `${r.id}@${this.revisionOf(policyKeyOf(r))}`));
    return s;
  }

  /** The policy groups whose subject selects an identity (the same for both directions). */
  groupsOf(info: IdentityInfo): Group[] {
    const out: Group[] = [];
    for (const g of this.clusterGroups) if (subjectSelects(g.subject, info)) out.push(g);
    for (const g of this.groupsByNs.get(info.namespace!) ?? [])
      if (subjectSelects(g.subject, info)) out.push(g);
    return out;
  }

  /** The tiered rules of an identity in one direction, `groups` being groupsOf(info). */
  tiers(info: IdentityInfo, d: Direction, groups: Group[]): TieredRules {
    const iso = this.isolations(info, d);
    const gkey = `${d}|${groups.map((g) => g.id).join(',')}|${iso.map((i) => i.policy).join(',')}`;
    let t = this.tiersByGroups.get(gkey);
    if (!t) this.tiersByGroups.set(gkey, (t = this.fold(d, groups, iso)));
    return t;
  }

  private isolations(info: IdentityInfo, d: Direction): Isolation[] {
    return (this.isolationByNs.get(info.namespace!) ?? []).filter(
      (i) => i.directions.includes(d) && matchesSelector(i.subject, info.labels!),
    );
  }

  private fold(d: Direction, groups: Group[], isolation: Isolation[]): TieredRules {
    const admin: Rule[] = [];
    const np: Rule[] = [];
    const baseline: Rule[] = [];
    for (const g of groups)
      for (const r of g.rules)
        if (r.direction === d) (r.tier === 'admin' ? admin : r.tier === 'np' ? np : baseline).push(r);
    const input = { admin: admin.sort(compareRules), isolation, np, baseline: baseline.sort(compareRules) };
    const rev = (r: Rule) => this.rev(r);
    const key = `${d}|${input.admin.map(rev).join(',')}|${isolation.map((i) => i.policy).join(',')}|${np.map(rev).join(',')}|${input.baseline.map(rev).join(',')}`;
    let t = this.tierCache.get(key);
    if (!t) {
      if (this.tierCache.size > 50_000) this.tierCache.clear();
      t = composeTiers(input);
      this.tierCache.set(key, t);
    }
    return t;
  }
}

/** Tests for the pods a policy's rules or isolation select (none for no policy). */
export function subjectTests(b: BuiltPolicy | null | undefined): ((i: IdentityInfo) => boolean)[] {
  if (!b) return [];
  const list: ((i: IdentityInfo) => boolean)[] = [];
  const seen = new Set<Rule['subject']>();
  for (const r of b.rules) {
    if (seen.has(r.subject)) continue;
    seen.add(r.subject);
    list.push((i) => subjectSelects(r.subject, i));
  }
  if (b.isolation) {
    const iso = b.isolation;
    list.push((i) => i.namespace === iso.namespace && matchesSelector(iso.subject, i.labels!));
  }
  return list;
}

function push<K, V>(m: Map<K, V[]>, k: K, v: V): void {
  const l = m.get(k);
  if (l) l.push(v);
  else m.set(k, [v]);
}
