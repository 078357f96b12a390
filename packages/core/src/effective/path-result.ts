// The published unit of resolution: one path's effective rules, in the JSON shape that
// `cascadectl effective -o json` prints and EffectivePolicy objects store.
import type { PolicyKind } from '../kind.ts';
import type { ChainResult, LossReason } from '../merge/fold.ts';
import type { PolicyRef, RuleOrigin } from '../merge/policy.ts';
import type { PathRef } from '../topology/types.ts';

export interface PathResultRule {
  value: unknown;
  source: PolicyRef;
  as: RuleOrigin;
  /** Request predicates etc. of the rule's own policy rule set, when any. */
  context?: Record<string, unknown>;
}

export interface PathResult {
  policyKind: string;
  path: {
    gatewayClass: string;
    gateway: string;
    listener: string;
    routeKind: string;
    route: string;
    rule: string;
  };
  rules: Record<string, PathResultRule>;
  overridden: { rule: string; source: PolicyRef; as: RuleOrigin; by: PolicyRef[]; reason: LossReason }[];
}

const ref = (r: PolicyRef): PolicyRef => ({ kind: r.kind, namespace: r.namespace, name: r.name });

export function toPathResult(
  policyKind: string,
  path: PathRef,
  result: ChainResult,
  kind?: Pick<PolicyKind, 'effectiveValue'>,
): PathResult {
  const rules: Record<string, PathResultRule> = {};
  const value = kind?.effectiveValue;
  for (const [key, r] of result.rules) {
    const entry: PathResultRule = { value: value ? value(r) : r.value, source: ref(r.source), as: r.as };
    if (r.context) entry.context = r.context;
    rules[key] = entry;
  }
  return {
    policyKind,
    path: {
      gatewayClass: path.gatewayClass,
      gateway: `${path.gateway.namespace}/${path.gateway.name}`,
      listener: path.listener,
      routeKind: path.route.kind,
      route: `${path.route.namespace}/${path.route.name}`,
      rule: path.rule,
    },
    rules,
    overridden: result.lost.map((l) => ({
      rule: l.key,
      source: ref(l.source),
      as: l.as,
      by: l.by.map(ref),
      reason: l.reason,
    })),
  };
}

/** Stable order for output: gateway, listener, route, rule. */
export function comparePathResults(a: PathResult, b: PathResult): number {
  const ka = `${a.path.gateway}\u0000${a.path.listener}\u0000${a.path.route}\u0000${a.path.rule}`;
  const kb = `${b.path.gateway}\u0000${b.path.listener}\u0000${b.path.route}\u0000${b.path.rule}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}
