// The staged view inside one engine: the rules the staged set (staged.ts: the enforced policies with
// every staged action applied) would enforce, lowered over the same identities as the enforced rules,
// so a node can judge a flow by both with the same remote identity. Identities are shaped by rules
// (CIDR prefixes, networks peers matching pods): the engine builds them from the union of both views'
// rules, so the enforced view may hold identities only a staged rule asked for (more, finer
// identities; never another verdict). Tables are content-addressed and shared: a staged view that
// equals the enforced one for an endpoint costs nothing and is not recorded (endpointTables holds
// only the endpoints whose staged tables differ).
import { type EngineRules, RuleGroups } from './rule-groups.ts';
import { type BuiltPolicy, buildPolicy, compareRules } from './rules.ts';
import { STAGED_KINDS, type StagedKindName, type StagedPolicy, stagedTarget } from './staged.ts';
import type { LayerIds } from './table-store.ts';

const PREFIX = 'Staged';

/** The key the engine gives a staged object: its kind and name (`StagedNetworkPolicy/shop/x`). */
export const stagedKey = (s: StagedPolicy): string => `${PREFIX}${stagedTarget(s)}`;

/** The same key from a staged object as the API serves it (also one that cannot be read). */
export const stagedObjectKey = (kind: StagedKindName, m: { name: string; namespace?: string }): string =>
  `${kind}/${STAGED_KINDS[kind].namespaced ? `${m.namespace}/` : ''}${m.name}`;

/**
 * The enforced policy a staged key stands for (`StagedNetworkPolicy/shop/x` -> `NetworkPolicy/shop/x`),
 * or undefined for a key that is not a staged object's (a standard policy's key, a rule's policy part).
 */
export const stagedTargetKey = (key: string): string | undefined =>
  key.startsWith(PREFIX) ? key.slice(PREFIX.length) : undefined;

export interface StagedEntry {
  staged: StagedPolicy;
  /** A Set's policy built under the staged key (its rules' ids name the staged object); none for Delete. */
  built: BuiltPolicy | null;
  revision: number;
}

/** A Set's policy built as the standard kind would be, its ids and isolation renamed to the staged key. */
export function buildStaged(s: StagedPolicy): BuiltPolicy | null {
  if (s.action === 'Delete') return null;
  const b = buildPolicy(s.policy);
  const key = stagedKey(s);
  return {
    ...b,
    key,
    rules: b.rules.map((r) => ({ ...r, id: `${key}${r.id.slice(r.id.indexOf('#'))}` })),
    ...(b.isolation ? { isolation: { ...b.isolation, policy: key } } : {}),
  };
}

export class StagedView {
  readonly entries = new Map<string, StagedEntry>();
  readonly groups: RuleGroups;
  /** The staged set's rules by tier, or null when nothing is staged (the view is then off). */
  rules: EngineRules | null = null;
  /** Subject identity -> its staged table ids, only where they differ from its enforced ones. */
  readonly endpointTables = new Map<number, LayerIds>();

  constructor(revisionOf: (policyKey: string) => number) {
    this.groups = new RuleGroups(revisionOf);
  }

  /** Builds the staged set's rules from the enforced policies; returns the rules only staging adds. */
  rebuild(enforced: readonly BuiltPolicy[]): BuiltPolicy[] {
    if (this.entries.size === 0) {
      // the endpoints' staged tables go in the flush, as their subjects are assigned again
      this.rules = null;
      return [];
    }
    const hidden = new Set([...this.entries.values()].map((e) => stagedTarget(e.staged)));
    const added = [...this.entries.values()].flatMap((e) => (e.built ? [e.built] : []));
    const all = [...enforced.filter((b) => !hidden.has(b.key)), ...added];
    this.rules = splitTiers(all);
    this.groups.rebuild(this.rules);
    return added;
  }
}

/** Policies' rules by tier (admin and baseline in evaluation order). */
export function splitTiers(all: readonly BuiltPolicy[]): EngineRules {
  return {
    admin: all.flatMap((b) => b.rules.filter((r) => r.tier === 'admin')).sort(compareRules),
    np: all.flatMap((b) => b.rules.filter((r) => r.tier === 'np')),
    isolation: all.flatMap((b) => (b.isolation ? [b.isolation] : [])),
    baseline: all.flatMap((b) => b.rules.filter((r) => r.tier === 'baseline')).sort(compareRules),
  };
}
