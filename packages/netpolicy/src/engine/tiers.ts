// The tiering of network policy for one endpoint direction, expressed through the core D/O engine:
// admin rules (ANP, CNP Admin) are merge overrides, the endpoint's NetworkPolicies are its intent
// (one atomic rule set: NetworkPolicy is a union), the baseline (CNP Baseline, BANP) is an atomic
// default. The fold therefore yields exactly: admin rules, plus NetworkPolicy rules where a
// NetworkPolicy selects the endpoint in that direction, else the baseline rules. Order inside the
// result comes from precedence (see precedence.ts); Pass is lowered in lower.ts.
import { type ChainLink, type NormalizedPolicy, resolveChain } from '@cascade/core';
import type { Isolation, Rule } from './rules.ts';

export interface TierInput {
  admin: Rule[];
  isolation: Isolation[];
  np: Rule[];
  baseline: Rule[];
}

export interface TieredRules {
  admin: Rule[];
  /** NetworkPolicies isolating the endpoint (non-empty: the NP tier governs, baseline does not). */
  isolation: Isolation[];
  np: Rule[];
  baseline: Rule[];
}

const SECTIONS = [
  { name: 'admin', path: ['admin'] },
  { name: 'np', path: ['np'] },
  { name: 'baseline', path: ['baseline'] },
] as const;

function synthetic(
  name: string,
  as: 'override' | 'intent' | 'default',
  strategy: 'atomic' | 'merge',
  rules: { section: string; name: string; value: unknown }[],
): NormalizedPolicy {
  return {
    id: `tier:${name}`,
    ref: { kind: 'NetworkPolicyTier', namespace: '', name },
    createdAt: 0,
    sequence: 0,
    generation: undefined,
    targets: [],
    blocks: [{ as, strategy, rules: rules.map((r) => ({ ...r, key: `${r.section}.${r.name}` })) }],
    unset: [],
  };
}

/**
 * Each tier goes into the fold as one rule (its whole, already ordered, rule list): the D/O semantics
 * act on the tiers as units (admin always merged in; NetworkPolicy, when it governs, replacing the
 * baseline atomically), so bundling gives the same result as one fold entry per rule at a fraction of
 * the cost (an endpoint can be selected by hundreds of admin rules).
 */
export function composeTiers(input: TierInput): TieredRules {
  const links: ChainLink[] = [];
  if (input.isolation.length > 0)
    links.push({
      policy: synthetic('NetworkPolicy', 'intent', 'atomic', [
        { section: 'np', name: 'networkpolicy', value: { np: input.np, isolation: input.isolation } },
      ]),
      level: 3,
    });
  if (input.baseline.length > 0)
    links.push({
      policy: synthetic('Baseline', 'default', 'atomic', [
        { section: 'baseline', name: 'baseline', value: input.baseline },
      ]),
      level: 1,
    });
  if (input.admin.length > 0)
    links.push({
      policy: synthetic('Admin', 'override', 'merge', [
        { section: 'admin', name: 'admin', value: input.admin },
      ]),
      level: 0,
    });
  const result = resolveChain(links, SECTIONS);
  const out: TieredRules = { admin: [], isolation: [], np: [], baseline: [] };
  for (const r of result.rules.values()) {
    if (r.section === 'admin') out.admin = r.value as Rule[];
    else if (r.section === 'baseline') out.baseline = r.value as Rule[];
    else {
      const v = r.value as { np: Rule[]; isolation: Isolation[] };
      out.np = v.np;
      out.isolation = v.isolation;
    }
  }
  return out;
}
