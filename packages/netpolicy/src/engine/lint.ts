// Admin tooling the AdminNetworkPolicy proposal asks for: overlapping ANPs of equal priority (their
// order is this project's tie-break, not upstream's), baseline rules that an earlier baseline rule
// with the same peers and ports always decides first, and NetworkPolicy rules that admin rules make
// dead in the cluster as it is; and policies that do nothing (feedback.ts).

import {
  budgetOverruns,
  DEFAULT_NAMESPACE_ENTRY_BUDGET,
  networkPolicyCosts,
  overrunMessage,
} from './budget.ts';
import { DEAD_RULE_BUDGET, deadNetworkPolicyRules } from './dead-rules.ts';
import type { NetpolEngine } from './engine.ts';
import { lintTenantFeedback } from './feedback.ts';
import type { Rule } from './rules.ts';
import { subjectSelects } from './selection.ts';
import { describeTenant } from './tenants.ts';

export interface LintFinding {
  severity: 'warning';
  policy: string;
  message: string;
  /**
   * The message without the counts that move with every pod (connections, entries): what status
   * conditions and Events say, so that pod churn does not rewrite them.
   */
  summary?: string;
  /** What kind of finding (status conditions route on it): NoPods, UnknownNamedPort; none for the others. */
  code?: 'NoPods' | 'UnknownNamedPort';
}

const policyOf = (r: Rule) =>
  r.source.namespace
    ? `${r.source.kind}/${r.source.namespace}/${r.source.name}`
    : `${r.source.kind}/${r.source.name}`;

export function lintNetpol(
  engine: NetpolEngine,
  entryBudget = DEFAULT_NAMESPACE_ENTRY_BUDGET,
): LintFinding[] {
  return [...lintStructure(engine), ...lintPopulation(engine, entryBudget)];
}

/**
 * What the rules and the pod identities decide: equal-priority admin policies selecting the same
 * pods, and shadowed baseline rules. Pod churn inside existing identities changes none of it.
 */
export function lintStructure(engine: NetpolEngine): LintFinding[] {
  const out: LintFinding[] = [];
  const pods = [...engine.identities.values()].filter((i) => i.kind === 'pod');
  // Equal-priority admin policies whose subjects share a pod.
  const byPolicy = new Map<string, Rule[]>();
  for (const r of engine.rules.admin) {
    const k = policyOf(r);
    let l = byPolicy.get(k);
    if (!l) byPolicy.set(k, (l = []));
    l.push(r);
  }
  const policies = [...byPolicy.entries()];
  for (let i = 0; i < policies.length; i++) {
    for (let j = i + 1; j < policies.length; j++) {
      const [a, ra] = policies[i]!;
      const [b, rb] = policies[j]!;
      if (ra[0]!.priority !== rb[0]!.priority) continue;
      const shared = pods.filter(
        (p) => subjectSelects(ra[0]!.subject, p) && subjectSelects(rb[0]!.subject, p),
      );
      if (shared.length === 0) continue;
      out.push({
        severity: 'warning',
        policy: a,
        message: `${a} and ${b} have the same priority ${ra[0]!.priority} and both select ${shared.length} pod identit${shared.length === 1 ? 'y' : 'ies'}: upstream leaves their order undefined; here ${[a, b].sort()[0]} goes first (ANP before CNP, then name)`,
      });
    }
  }
  // Baseline rules repeated by an earlier rule with the same direction, subject, peers and ports.
  const seen = new Map<string, Rule>();
  for (const r of engine.rules.baseline) {
    const key = JSON.stringify([r.direction, r.subject, r.peers, r.ports ?? null], (_k, v) =>
      typeof v === 'bigint' ? v.toString(16) : v,
    );
    const first = seen.get(key);
    if (first)
      out.push({
        severity: 'warning',
        policy: policyOf(r),
        message: `${r.id} is shadowed: ${first.id} has the same subject, peers and ports and comes first`,
      });
    else seen.set(key, r);
  }
  // Policies that do nothing: selecting no pod, named ports matching no container port.
  out.push(...lintTenantFeedback(engine));
  return out;
}

/**
 * What every pod's addresses, ports and node decide (exact for the cluster as it is): NetworkPolicy
 * rules made dead by admin rules, and NetworkPolicies over their namespace's entry budget. The costly
 * part: the netpolicy-controller runs it at most every --rules-analysis-interval on pod churn.
 */
export function lintPopulation(
  engine: NetpolEngine,
  entryBudget = DEFAULT_NAMESPACE_ENTRY_BUDGET,
  namespaces?: ReadonlySet<string>,
): LintFinding[] {
  return [
    ...lintDeadNetworkPolicyRules(engine, namespaces),
    ...lintEntryBudget(engine, entryBudget, namespaces),
  ];
}

/**
 * NetworkPolicies a node agent would refuse for their namespace's policy-map budget: the entries of
 * each namespace's NetworkPolicies in each node's rule sets, as the agent counts them (only those of
 * `namespaces` when given).
 */
export function lintEntryBudget(
  engine: NetpolEngine,
  budget: number,
  namespaces?: ReadonlySet<string>,
): LintFinding[] {
  const nodes = new Set<string | undefined>([...engine.pods.values()].map((p) => p.node));
  const out: LintFinding[] = [];
  const seen = new Set<string>();
  for (const node of [...nodes].sort()) {
    for (const o of budgetOverruns(networkPolicyCosts(engine, node), budget)) {
      if (seen.has(o.refuse.policy) || (namespaces && !namespaces.has(o.refuse.namespace))) continue;
      seen.add(o.refuse.policy);
      const which = o.refuse.created ? 'its newest' : 'the largest';
      out.push({
        severity: 'warning',
        policy: o.refuse.policy,
        message: `${overrunMessage(o, node)}: the agent refuses ${o.refuse.policy} (${o.refuse.entries} entries, ${which}) and keeps its pods isolated`,
        summary: `${describeTenant(o.namespace)} needs more policy map entries than its budget of ${o.budget}${node ? ` on a node` : ''}: the agent refuses ${o.refuse.policy} (${which}) and keeps its pods isolated`,
      });
    }
  }
  return out;
}

export function lintDeadNetworkPolicyRules(
  engine: NetpolEngine,
  namespaces?: ReadonlySet<string>,
): LintFinding[] {
  const { dead, skipped } = deadNetworkPolicyRules(engine, namespaces);
  const out: LintFinding[] = dead.map((d) => ({
    severity: 'warning',
    policy: policyOf(d.rule),
    message: `${d.rule.id} is dead: all ${d.connections} connection${d.connections === 1 ? '' : 's'} it would allow ${d.connections === 1 ? 'is' : 'are'} decided first by ${[
      ...d.deciders,
    ]
      .map(([id, x]) => `${id} (${x.action}, ${x.count})`)
      .join(', ')}`,
    summary: `${d.rule.id} is dead: every connection it would allow is decided first by ${[...d.deciders]
      .map(([id, x]) => `${id} (${x.action})`)
      .sort()
      .join(', ')}`,
  }));
  if (skipped > 0)
    out.push({
      severity: 'warning',
      policy: '-',
      message: `dead-rule analysis stopped after ${DEAD_RULE_BUDGET} evaluations: ${skipped} NetworkPolicy rule(s) not checked`,
    });
  return out;
}
