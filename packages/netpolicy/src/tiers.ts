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

export function composeTiers(input: TierInput): TieredRules {
  const links: ChainLink[] = [];
  if (input.isolation.length > 0) {
    const rules = [
      ...input.np.map((r) => ({ section: 'np', name: r.id, value: r })),
      ...input.isolation.map((i) => ({ section: 'np', name: `isolation:${i.policy}`, value: i })),
    ];
    links.push({ policy: synthetic('NetworkPolicy', 'intent', 'atomic', rules), level: 3 });
  }
  if (input.baseline.length > 0) {
    links.push({
      policy: synthetic(
        'Baseline',
        'default',
        'atomic',
        input.baseline.map((r) => ({ section: 'baseline', name: r.id, value: r })),
      ),
      level: 1,
    });
  }
  if (input.admin.length > 0) {
    links.push({
      policy: synthetic(
        'Admin',
        'override',
        'merge',
        input.admin.map((r) => ({ section: 'admin', name: r.id, value: r })),
      ),
      level: 0,
    });
  }
  const result = resolveChain(links, SECTIONS);
  const out: TieredRules = { admin: [], isolation: [], np: [], baseline: [] };
  for (const r of result.rules.values()) {
    if (r.section === 'admin') out.admin.push(r.value as Rule);
    else if (r.section === 'baseline') out.baseline.push(r.value as Rule);
    else if (r.name.startsWith('isolation:')) out.isolation.push(r.value as Isolation);
    else out.np.push(r.value as Rule);
  }
  // The fold returns rules in key order; evaluation order is the tiers' own.
  const byOrder = (rules: Rule[], from: Rule[]) => {
    const keep = new Set(rules);
    return from.filter((r) => keep.has(r));
  };
  out.admin = byOrder(out.admin, input.admin);
  out.np = byOrder(out.np, input.np);
  out.baseline = byOrder(out.baseline, input.baseline);
  return out;
}
