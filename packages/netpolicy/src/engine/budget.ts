// Policy map capacity per tenant. One node's policy map is shared by every namespace on it: without a
// bound, one tenant's NetworkPolicies (a 159 KB policy lowers to 171,020 entries) fill it and every
// later rule set, admin Deny rules included, is refused. Two bounds:
//   - a per-tenant budget (tenants.ts: the namespaces sharing the admin's tenant label, or one
//     namespace): the entries the NetworkPolicies of one tenant add to the rule sets of one node's
//     endpoints. Over it, the tenant's newest NetworkPolicy is refused (what was admitted before is
//     never pushed out by what comes later; by size when the policies' ages are unknown), then the
//     next newest, until it fits: each is replaced by its isolation (its pods stay isolated in its
//     directions: fail closed) and reported;
//   - a reserve for the admin tier in the loader (bpf-datapath: namespaced rule sets cannot take it).
// A tenant is charged only for what it controls: entries for its own pods' identities, addresses,
// nodes and the all-pods classes. Entries for another tenant's pods (a `namespaceSelector` peer
// selecting them) are not charged to it: how many there are is the other tenant's doing, bounded by
// that tenant's identity cap (identity-cap.ts), and charging them let seven namespaces at the cap
// refuse a victim's policy, and let a tenant learn from its refusal whether a guessed label selects
// pods elsewhere (round three). So a refusal, and its message, depend only on what the tenant may
// read. Plain functions of the engine's lowered state, so `cascadectl netpol lint` predicts the same
// offline.
import type { NetpolEngine } from './engine.ts';
import type { MapState } from './mapstate.ts';
import type { NetPolicyObject } from './model.ts';
import { describeTenant, type TenantId } from './tenants.ts';

export const DEFAULT_NAMESPACE_ENTRY_BUDGET = 100_000;

export interface PolicyCost {
  policy: string;
  namespace: string;
  /** the tenant charged (tenants.ts) */
  tenant: TenantId;
  /** Entries its rules add to the distinct rule sets of the node's endpoints, charged to its tenant. */
  entries: number;
  /** its creationTimestamp ('' when unknown) */
  created: string;
}

export interface BudgetOverrun {
  /** the tenant over budget (a namespace's name when it is its own tenant) */
  namespace: TenantId;
  entries: number;
  budget: number;
  /** The tenant's newest NetworkPolicy (the largest when ages are unknown): the one refused. */
  refuse: PolicyCost;
}

/** Charged entries per NetworkPolicy in one rule set, counted once per MapState version and tenancy. */
const perTable = new WeakMap<MapState, { version: string; counts: Map<string, number> }>();
function tableCosts(engine: NetpolEngine, state: MapState): Map<string, number> {
  const version = `${state.version}/${engine.tenancyRevision}`;
  const known = perTable.get(state);
  if (known?.version === version) return known.counts;
  const counts = new Map<string, number>();
  // a namespace's tenant, once per namespace of this table (entries run to the hundred thousand)
  const tenants = new Map<string, string>();
  const tenant = (ns: string) => {
    let t = tenants.get(ns);
    if (t === undefined) tenants.set(ns, (t = engine.tenantOf(ns)));
    return t;
  };
  for (const e of state.entries()) {
    const hash = e.rule.indexOf('#');
    if (hash < 0 || !e.rule.startsWith('NetworkPolicy/')) continue; // isolation, baseline, admin
    const policy = e.rule.slice(0, hash);
    const peer = engine.identities.get(e.identity);
    if (peer?.kind === 'pod' && peer.namespace !== undefined) {
      const ns = policy.split('/')[1]!;
      if (tenant(peer.namespace) !== tenant(ns)) continue; // another tenant's pods
    }
    counts.set(policy, (counts.get(policy) ?? 0) + 1);
  }
  perTable.set(state, { version, counts });
  return counts;
}

/** Charged entries per NetworkPolicy in the rule sets of `node`'s endpoints (every pod's when undefined). */
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
    for (const [policy, n] of tableCosts(engine, t.state)) counts.set(policy, (counts.get(policy) ?? 0) + n);
  }
  return [...counts].map(([policy, entries]) => {
    const namespace = policy.split('/')[1]!;
    const created = engine.policies.get(policy)?.obj.creationTimestamp ?? '';
    return { policy, namespace, tenant: engine.tenantOf(namespace), entries, created };
  });
}

/** Newest first (what came last is refused first), then the largest, then by name. */
const refusalOrder = (a: PolicyCost, b: PolicyCost) =>
  a.created !== b.created
    ? a.created < b.created
      ? 1
      : -1
    : b.entries - a.entries || a.policy.localeCompare(b.policy);

/** Tenants over budget, each with the NetworkPolicy to refuse (its newest; the largest when unknown). */
export function budgetOverruns(costs: readonly PolicyCost[], budget: number): BudgetOverrun[] {
  const byTenant = new Map<string, PolicyCost[]>();
  for (const c of costs) byTenant.set(c.tenant, [...(byTenant.get(c.tenant) ?? []), c]);
  const out: BudgetOverrun[] = [];
  for (const [tenant, list] of byTenant) {
    const entries = list.reduce((s, c) => s + c.entries, 0);
    if (entries <= budget) continue;
    const refuse = [...list].filter((c) => c.entries > 0).sort(refusalOrder)[0]!;
    out.push({ namespace: tenant, entries, budget, refuse });
  }
  return out.sort((a, b) => a.namespace.localeCompare(b.namespace));
}

/** What a refusal says: the tenant's own figures only (the entries its budget is charged). */
export function overrunMessage(o: BudgetOverrun, node?: string): string {
  return `${describeTenant(o.namespace)} needs ${o.entries} policy map entries${node ? ` on node ${node}` : ''} for peers it controls (its own pods, addresses, nodes), over its budget of ${o.budget}`;
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
        namespace: o.refuse.namespace,
        entries: o.refuse.entries,
        reason: `${overrunMessage(o, node)}; ${o.refuse.policy} (${o.refuse.entries} entries, ${o.refuse.created ? 'its newest' : 'the largest'}) is refused: its pods stay isolated, none of its rules allow`,
      });
    }
    engine.flush();
  }
  return refused;
}
