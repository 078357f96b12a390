// Admin tooling the AdminNetworkPolicy proposal asks for: overlapping ANPs of equal priority (their
// order is this project's tie-break, not upstream's), and baseline rules that an earlier baseline
// rule with the same peers and ports always decides first.
import type { NetpolEngine } from './engine.ts';
import type { Rule } from './rules.ts';
import { subjectSelects } from './selection.ts';

export interface LintFinding {
  severity: 'warning';
  policy: string;
  message: string;
}

const policyOf = (r: Rule) =>
  r.source.namespace
    ? `${r.source.kind}/${r.source.namespace}/${r.source.name}`
    : `${r.source.kind}/${r.source.name}`;

export function lintNetpol(engine: NetpolEngine): LintFinding[] {
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
  return out;
}
