// What a policy author must hear about a policy that does nothing: a NetworkPolicy whose podSelector
// selects no pod (`app: wbe`), a rule whose named port matches no container port of the pods it
// applies to (`port: htpp`). For a NetworkPolicy, only what its author may read is looked at: its own
// namespace's pods. An ingress named port resolves on the pods the policy selects; an egress one on
// the destination pods, checked only when every peer of the rule is a pod of the same namespace (a
// peer elsewhere would make the finding an oracle on other namespaces' pods: not checked). Admin
// policies (trusted authors) get the "selects no pod" finding too. Plain functions of the engine's
// identities: pod churn inside existing label sets changes none of it.
import { matchesSelector } from '@cascade/core';
import type { NetpolEngine } from './engine.ts';
import type { IdentityInfo } from './identities.ts';
import type { LintFinding } from './lint.ts';
import type { PortMatch, Rule } from './rules.ts';
import { subjectSelects } from './selection.ts';

const PROTOCOL_NUMBER = { TCP: 6, UDP: 17, SCTP: 132 } as const;

const hasPort = (info: IdentityInfo, m: Extract<PortMatch, { kind: 'named' }>) =>
  (info.ports ?? []).some(
    (p) => p.name === m.name && (m.proto === undefined || PROTOCOL_NUMBER[p.protocol] === m.proto),
  );

const selector = (s: { matchLabels?: Record<string, string>; matchExpressions?: unknown[] }) => {
  const labels = Object.entries(s.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  const exprs = (s.matchExpressions ?? []).length;
  return `{${labels.join(',')}${exprs ? `${labels.length ? ', ' : ''}${exprs} expression${exprs === 1 ? '' : 's'}` : ''}}`;
};

export function lintTenantFeedback(engine: NetpolEngine): LintFinding[] {
  const out: LintFinding[] = [];
  const pods = [...engine.identities.values()].filter((i) => i.kind === 'pod');
  const inNs = new Map<string, IdentityInfo[]>();
  for (const p of pods) {
    let l = inNs.get(p.namespace!);
    if (!l) inNs.set(p.namespace!, (l = []));
    l.push(p);
  }
  for (const [key, { built }] of engine.policies) {
    if (built.errors.length) continue;
    const iso = built.isolation;
    if (iso) {
      // a NetworkPolicy: its own namespace only
      const own = inNs.get(iso.namespace) ?? [];
      const selected = own.filter((p) => matchesSelector(iso.subject, p.labels!));
      if (selected.length === 0) {
        out.push({
          severity: 'warning',
          policy: key,
          code: 'NoPods',
          message: `selects no pod: podSelector ${selector(iso.subject)} matches none of the pods in namespace ${iso.namespace}; the policy has no effect now`,
        });
        continue;
      }
      for (const r of built.rules) namedPortFindings(key, r, selected, own, out);
      continue;
    }
    const subjects = [...new Set(built.rules.map((r) => r.subject))];
    if (subjects.length && !pods.some((p) => subjects.some((s) => subjectSelects(s, p))))
      out.push({
        severity: 'warning',
        policy: key,
        code: 'NoPods',
        message: 'selects no pod: no subject matches a pod now; the policy has no effect now',
      });
  }
  return out;
}

function namedPortFindings(
  key: string,
  r: Rule,
  selected: IdentityInfo[],
  own: IdentityInfo[],
  out: LintFinding[],
): void {
  const named = (r.ports ?? []).filter((m): m is Extract<PortMatch, { kind: 'named' }> => m.kind === 'named');
  if (!named.length) return;
  let reach: IdentityInfo[];
  if (r.direction === 'ingress') reach = selected;
  else {
    // egress: the destinations, when they are all pods of the policy's own namespace
    const ns = r.source.namespace!;
    const local = r.peers.every(
      (p) => p.kind === 'pods' && 'name' in p.namespaces && p.namespaces.name === ns,
    );
    if (!local || r.peers.length === 0) return;
    reach = own.filter((i) => r.peers.some((p) => p.kind === 'pods' && matchesSelector(p.pods, i.labels!)));
    if (!reach.length) return; // its peers select nobody: not a port problem
  }
  for (const m of named)
    if (!reach.some((i) => hasPort(i, m)))
      out.push({
        severity: 'warning',
        policy: key,
        code: 'UnknownNamedPort',
        message: `${r.direction}[${r.source.index}]: named port "${m.name}" matches no container port of the pods it ${r.direction === 'ingress' ? 'selects' : 'reaches'}: that port allows nothing`,
      });
}
