// Admin tooling the AdminNetworkPolicy proposal asks for: overlapping ANPs of equal priority (their
// order is this project's tie-break, not upstream's), baseline rules that an earlier baseline rule
// with the same peers and ports always decides first, and NetworkPolicy rules that admin rules make
// dead in the cluster as it is.

import { budgetOverruns, DEFAULT_NAMESPACE_ENTRY_BUDGET, networkPolicyCosts } from './budget.ts';
import { formatPrefix, type Prefix, prefixKey } from './cidr.ts';
import type { NetpolEngine } from './engine.ts';
import { type Remote, type RuleSet, ruleMatches } from './evaluate.ts';
import type { Pod } from './model.ts';
import { PROTO } from './ports.ts';
import type { Rule } from './rules.ts';
import { namespaceMatches, subjectSelects } from './selection.ts';
import { ruleSetOf } from './verdict.ts';

export interface LintFinding {
  severity: 'warning';
  policy: string;
  message: string;
  /**
   * The message without the counts that move with every pod (connections, entries): what status
   * conditions and Events say, so that pod churn does not rewrite them.
   */
  summary?: string;
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
): LintFinding[] {
  return [...lintDeadNetworkPolicyRules(engine), ...lintEntryBudget(engine, entryBudget)];
}

/**
 * NetworkPolicies a node agent would refuse for their namespace's policy-map budget: the entries of
 * each namespace's NetworkPolicies in each node's rule sets, as the agent counts them.
 */
export function lintEntryBudget(engine: NetpolEngine, budget: number): LintFinding[] {
  const nodes = new Set<string | undefined>([...engine.pods.values()].map((p) => p.node));
  const out: LintFinding[] = [];
  const seen = new Set<string>();
  for (const node of [...nodes].sort()) {
    for (const o of budgetOverruns(networkPolicyCosts(engine, node), budget)) {
      if (seen.has(o.refuse.policy)) continue;
      seen.add(o.refuse.policy);
      out.push({
        severity: 'warning',
        policy: o.refuse.policy,
        message: `namespace ${o.namespace} needs ${o.entries} policy map entries${node ? ` on node ${node}` : ''}, over its budget of ${o.budget}: the agent refuses ${o.refuse.policy} (${o.refuse.entries} entries, the largest) and keeps its pods isolated`,
        summary: `namespace ${o.namespace} needs more policy map entries than its budget of ${o.budget}${node ? ` on a node` : ''}: the agent refuses ${o.refuse.policy} (the largest) and keeps its pods isolated`,
      });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// NetworkPolicy rules that an admin rule makes dead: every connection the NetworkPolicy rule
// would allow, in the cluster as it is, is decided (Allow or Deny, not Pass) by the admin tier
// before NetworkPolicy is consulted. The check is exact for the current pods, nodes and ports: the
// admin decision is constant between consecutive "boundaries" (port range ends, named-port
// numbers, CIDR ends), so one representative per piece is enough.
// ---------------------------------------------------------------------------------------------

/** Evaluations allowed for the dead-rule analysis; beyond it the analysis stops and says so. */
export const DEAD_RULE_BUDGET = 2_000_000;

const ALL_PROTOS = [PROTO.TCP, PROTO.UDP, PROTO.SCTP, 1];

function portBoundaries(engine: NetpolEngine): Map<number, number[]> {
  const by = new Map<number, Set<number>>();
  const add = (proto: number, p: number) => {
    if (p < 0 || p > 65535) return;
    let s = by.get(proto);
    if (!s) by.set(proto, (s = new Set([0])));
    s.add(p);
  };
  for (const proto of ALL_PROTOS) add(proto, 0);
  for (const r of engine.rules.admin)
    for (const m of r.ports ?? []) {
      if (m.kind === 'range') {
        add(m.proto, m.range.start);
        add(m.proto, m.range.end + 1);
      }
    }
  // Named ports resolve to container ports: each is a piece of its own.
  for (const p of engine.pods.values())
    for (const cp of p.ports) {
      add(PROTO[cp.protocol], cp.port);
      add(PROTO[cp.protocol], cp.port + 1);
    }
  return new Map([...by].map(([k, v]) => [k, [...v].sort((a, b) => a - b)]));
}

/** (proto, port) points that represent every piece of the rule's port space. */
function portPoints(r: Rule, bounds: Map<number, number[]>, engine: NetpolEngine): [number, number][] {
  const out: [number, number][] = [];
  const within = (proto: number, start: number, end: number) => {
    if (proto === 1) {
      if (start === 0) out.push([1, 0]);
      return;
    }
    out.push([proto, start]);
    for (const b of bounds.get(proto) ?? []) if (b > start && b <= end) out.push([proto, b]);
  };
  if (!r.ports) {
    for (const proto of ALL_PROTOS) within(proto, 0, 65535);
    return out;
  }
  for (const m of r.ports) {
    if (m.kind === 'range') within(m.proto, m.range.start, m.range.end);
    else
      for (const p of engine.pods.values())
        for (const cp of p.ports)
          if (cp.name === m.name && (m.proto === undefined || m.proto === PROTO[cp.protocol]))
            out.push([PROTO[cp.protocol], cp.port]);
  }
  const seen = new Set<string>();
  return out.filter(([a, b]) => !seen.has(`${a}/${b}`) && seen.add(`${a}/${b}`));
}

/** One external address per piece of the address space cut by every CIDR in the rules. */
function externalPoints(engine: NetpolEngine): Remote[] {
  const taken = new Set<string>();
  for (const p of engine.pods.values()) for (const ip of p.ips) taken.add(ip);
  for (const n of engine.nodes.values()) for (const ip of n.ips) taken.add(ip);
  const points = new Map<string, Prefix>();
  const addPoint = (family: 4 | 6, bits: bigint) => {
    const width = family === 4 ? 32 : 128;
    if (bits < 0n || bits >= 1n << BigInt(width)) return;
    const p: Prefix = { family, bits, len: width };
    points.set(prefixKey(p), p);
  };
  addPoint(4, 0n);
  addPoint(6, 0n);
  for (const r of [...engine.rules.admin, ...engine.rules.np])
    for (const peer of r.peers)
      if (peer.kind === 'cidr')
        for (const c of [peer.cidr, ...peer.except]) {
          const width = c.family === 4 ? 32 : 128;
          addPoint(c.family, c.bits);
          addPoint(c.family, c.bits + (1n << BigInt(width - c.len)));
        }
  const out: Remote[] = [];
  for (const p of points.values()) {
    const ip = formatPrefix(p).split('/')[0]!;
    if (!taken.has(ip)) out.push({ kind: 'external', ip });
  }
  return out;
}

interface DeadRule {
  rule: Rule;
  deciders: Map<string, { action: string; count: number }>;
  connections: number;
}

function adminDecision(rs: RuleSet, local: Pod, remote: Remote, r: Rule, proto: number, port: number) {
  for (const a of rs.admin) {
    if (!ruleMatches(a, local, remote, r.direction, proto, port, rs)) continue;
    return a.action === 'pass' ? undefined : a;
  }
  return undefined;
}

export function deadNetworkPolicyRules(engine: NetpolEngine): { dead: DeadRule[]; skipped: number } {
  const rs = ruleSetOf(engine);
  if (rs.admin.length === 0) return { dead: [], skipped: 0 };
  const bounds = portBoundaries(engine);
  const remotes: Remote[] = [
    ...[...engine.pods.values()].map((pod): Remote => ({ kind: 'pod', pod, ip: pod.ips[0]! })),
    ...[...engine.nodes.values()].map((node): Remote => ({ kind: 'node', node, ip: node.ips[0]! })),
    ...externalPoints(engine),
  ];
  const pods = [...engine.pods.values()];
  let budget = DEAD_RULE_BUDGET;
  let skipped = 0;
  const dead: DeadRule[] = [];
  for (const r of engine.rules.np) {
    if (budget <= 0) {
      skipped++;
      continue;
    }
    const points = portPoints(r, bounds, engine);
    const deciders = new Map<string, { action: string; count: number }>();
    let connections = 0;
    let live = false;
    outer: for (const local of pods) {
      if (
        local.namespace !== r.source.namespace ||
        !namespaceMatches(r.subject.namespaces, local.namespace, rs.nsLabels(local.namespace))
      )
        continue;
      for (const remote of remotes) {
        if (remote.kind === 'pod' && remote.pod === local) continue; // a pod always reaches itself
        if (remote.kind === 'node' && remote.node.name === local.node) continue; // and its node
        for (const [proto, port] of points) {
          if (--budget <= 0) {
            live = true; // unknown: say nothing rather than something wrong
            skipped++;
            break outer;
          }
          if (!ruleMatches(r, local, remote, r.direction, proto, port, rs)) continue;
          const a = adminDecision(rs, local, remote, r, proto, port);
          if (!a) {
            live = true;
            break outer;
          }
          connections++;
          const name = a.source.ruleName ? `${policyOf(a)}#${a.source.ruleName}` : a.id;
          const d = deciders.get(name) ?? { action: a.action, count: 0 };
          d.count++;
          deciders.set(name, d);
        }
      }
    }
    if (!live && connections > 0) dead.push({ rule: r, deciders, connections });
  }
  return { dead, skipped };
}

export function lintDeadNetworkPolicyRules(engine: NetpolEngine): LintFinding[] {
  const { dead, skipped } = deadNetworkPolicyRules(engine);
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
