// Policy map capacity per tenant. One node's policy map is shared by every namespace on it: without a
// bound, one tenant's NetworkPolicies (a 159 KB policy lowers to 171,020 entries) fill it and every
// later rule set, admin Deny rules included, is refused. Two bounds:
//   - a per-namespace budget: the entries the NetworkPolicies of one namespace add to the rule sets of
//     one node's endpoints. Over it, the namespace's largest NetworkPolicy is refused alone: it is
//     replaced by its isolation (its pods stay isolated in its directions: fail closed) and reported;
//   - a reserve for the admin tier in the loader (bpf-datapath: namespaced rule sets cannot take it).
// Plain functions of the engine's lowered state, so `cascadectl netpol lint` predicts the same offline.
import type { NetpolEngine } from './engine.ts';
import type { MapState } from './mapstate.ts';
import type { NetPolicyObject } from './model.ts';

export const DEFAULT_NAMESPACE_ENTRY_BUDGET = 100_000;

export interface PolicyCost {
  policy: string;
  namespace: string;
  /** Entries its rules add to the distinct rule sets of the node's endpoints. */
  entries: number;
}

export interface BudgetOverrun {
  namespace: string;
  entries: number;
  budget: number;
  /** The namespace's largest NetworkPolicy: the one refused. */
  refuse: PolicyCost;
}

/** Entries per NetworkPolicy in one rule set, counted once per MapState version (steady state: free). */
const perTable = new WeakMap<MapState, { version: number; counts: Map<string, number> }>();
function tableCosts(state: MapState): Map<string, number> {
  const known = perTable.get(state);
  if (known?.version === state.version) return known.counts;
  const counts = new Map<string, number>();
  for (const e of state.entries()) {
    const hash = e.rule.indexOf('#');
    if (hash < 0 || !e.rule.startsWith('NetworkPolicy/')) continue; // isolation, baseline, admin
    const policy = e.rule.slice(0, hash);
    counts.set(policy, (counts.get(policy) ?? 0) + 1);
  }
  perTable.set(state, { version: state.version, counts });
  return counts;
}

/** Entries per NetworkPolicy in the rule sets of `node`'s endpoints (every pod's when undefined). */
export function networkPolicyCosts(engine: NetpolEngine, node?: string): PolicyCost[] {
  const tableIds = new Set<string>();
  for (const [key, pod] of engine.pods) {
    if (node !== undefined && pod.node !== node) continue;
    const id = engine.podIdentity.get(key);
    const refs = id === undefined ? undefined : engine.endpointTables.get(id);
    if (!refs) continue;
    for (const d of ['ingress', 'egress'] as const) tableIds.add(refs[d].lower);
  }
  const counts = new Map<string, number>();
  for (const id of tableIds) {
    const t = engine.tables.get(id);
    if (!t) continue;
    for (const [policy, n] of tableCosts(t.state)) counts.set(policy, (counts.get(policy) ?? 0) + n);
  }
  return [...counts].map(([policy, entries]) => ({ policy, namespace: policy.split('/')[1]!, entries }));
}

/** Namespaces over budget, each with the NetworkPolicy to refuse (the largest; ties by name). */
export function budgetOverruns(costs: readonly PolicyCost[], budget: number): BudgetOverrun[] {
  const byNs = new Map<string, PolicyCost[]>();
  for (const c of costs) byNs.set(c.namespace, [...(byNs.get(c.namespace) ?? []), c]);
  const out: BudgetOverrun[] = [];
  for (const [namespace, list] of byNs) {
    const entries = list.reduce((s, c) => s + c.entries, 0);
    if (entries <= budget) continue;
    const refuse = [...list].sort((a, b) => b.entries - a.entries || a.policy.localeCompare(b.policy))[0]!;
    out.push({ namespace, entries, budget, refuse });
  }
  return out.sort((a, b) => a.namespace.localeCompare(b.namespace));
}

/**
 * A refused NetworkPolicy as enforced: the same pods isolated in the same directions, no rule allows
 * anything (fail closed: refusing a policy never opens what it isolated).
 */
export function isolationOnly(obj: NetPolicyObject): NetPolicyObject {
  const spec = (obj.spec ?? {}) as { podSelector?: unknown; policyTypes?: string[]; egress?: unknown[] };
  const policyTypes =
    spec.policyTypes ?? (spec.egress && spec.egress.length > 0 ? ['Ingress', 'Egress'] : ['Ingress']);
  return { ...obj, spec: { podSelector: spec.podSelector ?? {}, policyTypes } };
}

export interface Refusal {
  policy: string;
  namespace: string;
  entries: number;
  reason: string;
  /** The policy as written (the engine now holds its isolation only). */
  original: NetPolicyObject;
}

/**
 * Refuses NetworkPolicies until every namespace fits its budget on `node`: each refused one is
 * replaced in the engine by its isolation (and flushed). Returns what was refused and why. Bounded:
 * at most one refusal per NetworkPolicy of the node's rule sets.
 */
export function enforceNamespaceBudget(engine: NetpolEngine, budget: number, node?: string): Refusal[] {
  const refused: Refusal[] = [];
  for (let guard = 0; guard < 1000; guard++) {
    const over = budgetOverruns(networkPolicyCosts(engine, node), budget);
    if (!over.length) break;
    for (const o of over) {
      const p = engine.policies.get(o.refuse.policy);
      if (!p) continue;
      engine.upsertPolicy(isolationOnly(p.obj));
      refused.push({
        original: p.obj,
        policy: o.refuse.policy,
        namespace: o.namespace,
        entries: o.refuse.entries,
        reason: `namespace ${o.namespace} needs ${o.entries} policy map entries${node ? ` on node ${node}` : ''}, over its budget of ${o.budget}; ${o.refuse.policy} (${o.refuse.entries} entries, the largest) is refused: its pods stay isolated, none of its rules allow`,
      });
    }
    engine.flush();
  }
  return refused;
}
