// The direct, slow evaluation of the ordered policy, straight from the rules: the oracle that the
// lowering (and the kernel) must agree with. No identities, no MapState.
import { matchesSelector } from '@cascade/core';
import { contains, hostPrefix } from './cidr.ts';
import type { Node, Pod } from './model.ts';
import { PROTO, PROTO_NAMES } from './ports.ts';
import type { Direction, Isolation, Peer, PortMatch, Rule, Tier } from './rules.ts';
import { namespaceMatches, selectsEveryPod } from './selection.ts';

export type Remote =
  | { kind: 'pod'; pod: Pod; ip: string }
  | { kind: 'node'; node: Node; ip: string }
  | { kind: 'external'; ip: string };

export interface Decision {
  verdict: 'allow' | 'deny';
  /**
   * admin / networkpolicy / baseline / default, or the built-in exceptions: self (a pod reaching
   * itself), node (its own node, which a NetworkPolicy isolating the pod cannot block).
   */
  tier: Tier | 'networkpolicy' | 'default' | 'self' | 'node';
  policy?: string;
  rule?: string;
  priority?: number;
  /** Admin Pass rules the traffic went through. */
  passedBy?: string[];
}

export interface RuleSet {
  admin: Rule[];
  np: Rule[];
  isolation: Isolation[];
  baseline: Rule[];
  nsLabels(ns: string): Record<string, string>;
  /** Whether a pod's label set is past its namespace's identity cap (identity-cap.ts). */
  capped?(pod: Pod): boolean;
  /** Whether a networks peer holds every pod (then it admits capped pods too: one wildcard entry). */
  coversAllPods?(peer: Extract<Peer, { kind: 'cidr' }>): boolean;
  /** The set as `local` meets it in `direction` (rulesAt), when the caller keeps it per pod. */
  forLocal?(local: Pod, direction: Direction): RuleSet;
  /**
   * Set by rulesAt: every rule here selects the pod (and every pod of its namespace and labels) in
   * this direction and every isolation holds it, so judging that pod skips those checks.
   */
  subjectsChecked?: Direction;
}

/**
 * A capped pod of another namespace meets a NetworkPolicy peer only through a peer that admits every
 * pod at once (identity-cap.ts); the other peers leave it out.
 */
function wildcardPeer(peer: Peer, rs: RuleSet): boolean {
  if (peer.kind === 'all') return true;
  if (peer.kind === 'pods') return selectsEveryPod(peer);
  return peer.kind === 'cidr' && peer.pods && (rs.coversAllPods?.(peer) ?? false);
}

/** Whether `peer` (of a rule with `action`) matches `remote`, ports aside. */
export function peerMatches(peer: Peer, remote: Remote, action: Rule['action'], rs: RuleSet): boolean {
  switch (peer.kind) {
    case 'all':
      return true;
    case 'unknown':
      return action !== 'allow';
    case 'pods':
      return (
        remote.kind === 'pod' &&
        namespaceMatches(peer.namespaces, remote.pod.namespace, rs.nsLabels(remote.pod.namespace)) &&
        matchesSelector(peer.pods, remote.pod.labels)
      );
    case 'nodes':
      return remote.kind === 'node' && matchesSelector(peer.selector, remote.node.labels);
    case 'cidr': {
      if (remote.kind === 'node' || (remote.kind === 'pod' && !peer.pods)) return false;
      const ip = hostPrefix(remote.ip);
      return Boolean(ip && contains(peer.cidr, ip) && !peer.except.some((e) => contains(e, ip)));
    }
  }
}

function portMatches(
  ports: PortMatch[] | undefined,
  proto: number,
  port: number,
  namedOwner: Pod | undefined,
): boolean {
  if (!ports) return true;
  for (const m of ports) {
    if (m.kind === 'range') {
      if (m.proto === proto && port >= m.range.start && port <= m.range.end) return true;
      continue;
    }
    if (m.proto !== undefined && m.proto !== proto) continue;
    for (const cp of namedOwner?.ports ?? [])
      if (cp.name === m.name && cp.port === port && PROTO[cp.protocol] === proto) return true;
  }
  return false;
}

/** Whether rule `r` is of `direction` and its subject selects `local`. */
export function subjectMatches(r: Rule, local: Pod, direction: Direction, rs: RuleSet): boolean {
  return (
    r.direction === direction &&
    namespaceMatches(r.subject.namespaces, local.namespace, rs.nsLabels(local.namespace)) &&
    matchesSelector(r.subject.pods, local.labels)
  );
}

const isolates = (i: Isolation, local: Pod, direction: Direction) =>
  i.namespace === local.namespace &&
  i.directions.includes(direction) &&
  matchesSelector(i.subject, local.labels);

/**
 * The rule set as one pod in one direction meets it: only the rules whose subject selects the pod and
 * the isolations that hold it, in their order. Evaluating with it gives exactly what evaluating with
 * the whole set gives (each rule is checked for its subject first); callers that judge one pod many
 * times (the CLI's probes) compute it once per pod and direction (RuleSet.forLocal).
 */
export function rulesAt(rs: RuleSet, local: Pod, direction: Direction): RuleSet {
  const mine = (r: Rule) => subjectMatches(r, local, direction, rs);
  return {
    ...rs,
    admin: rs.admin.filter(mine),
    np: rs.np.filter(mine),
    baseline: rs.baseline.filter(mine),
    isolation: rs.isolation.filter((i) => isolates(i, local, direction)),
    forLocal: undefined,
    subjectsChecked: direction,
  };
}

/** Whether rule `r` applies to this connection at `local` (subject, peers and ports), ignoring order. */
export function ruleMatches(
  r: Rule,
  local: Pod,
  remote: Remote,
  direction: Direction,
  proto: number,
  port: number,
  rs: RuleSet,
): boolean {
  if (rs.subjectsChecked !== direction && !subjectMatches(r, local, direction, rs)) return false;
  // ports first: a few number comparisons that rule out most rules before any selector is read
  const owner = direction === 'ingress' ? local : remote.kind === 'pod' ? remote.pod : undefined;
  if (!portMatches(r.ports, proto, port, owner)) return false;
  const capped =
    r.tier === 'np' &&
    remote.kind === 'pod' &&
    remote.pod.namespace !== r.source.namespace &&
    (rs.capped?.(remote.pod) ?? false);
  for (const p of r.peers)
    if ((!capped || wildcardPeer(p, rs)) && peerMatches(p, remote, r.action, rs)) return true;
  return false;
}

const describe = (r: Rule): Pick<Decision, 'policy' | 'rule' | 'priority'> => ({
  policy: r.source.namespace
    ? `${r.source.kind}/${r.source.namespace}/${r.source.name}`
    : `${r.source.kind}/${r.source.name}`,
  rule: r.source.ruleName ?? `${r.direction}[${r.source.index}]`,
  ...(r.priority !== undefined && r.tier === 'admin' ? { priority: r.priority } : {}),
});

const NO_PASS: { passedBy?: string[] } = Object.freeze({});

/** One direction at one pod: first the admin tier, then NetworkPolicy (or, if none governs, the baseline), then allow. */
export function evaluateDirection(
  rs: RuleSet,
  local: Pod,
  remote: Remote,
  direction: Direction,
  proto: number,
  port: number,
): Decision {
  if (remote.kind === 'pod' && remote.pod.namespace === local.namespace && remote.pod.name === local.name)
    return { verdict: 'allow', tier: 'self' };
  // The pod's own node is judged like any node (`nodes` peers) in the admin tier and the baseline; only
  // NetworkPolicy cannot block it ("pods cannot block access from their resident node").
  const ownNode = remote.kind === 'node' && local.node !== undefined && remote.node.name === local.node;
  let passed: string | undefined;
  for (const r of rs.admin) {
    if (!ruleMatches(r, local, remote, direction, proto, port, rs)) continue;
    if (r.action === 'pass') {
      passed = r.id;
      break;
    }
    return { verdict: r.action, tier: 'admin', ...describe(r) };
  }
  const extra = passed !== undefined ? { passedBy: [passed] } : NO_PASS;
  const isolating =
    rs.subjectsChecked === direction
      ? rs.isolation
      : rs.isolation.filter((i) => isolates(i, local, direction));
  if (isolating.length > 0) {
    if (ownNode) return { verdict: 'allow', tier: 'node', ...extra };
    const allow = rs.np.find((r) => ruleMatches(r, local, remote, direction, proto, port, rs));
    if (allow) return { verdict: 'allow', tier: 'networkpolicy', ...describe(allow), ...extra };
    return {
      verdict: 'deny',
      tier: 'networkpolicy',
      policy: isolating.map((i) => i.policy).join(','),
      rule: 'isolation',
      ...extra,
    };
  }
  for (const r of rs.baseline) {
    if (!ruleMatches(r, local, remote, direction, proto, port, rs)) continue;
    if (r.action === 'pass') return { verdict: 'allow', tier: 'default', ...describe(r), ...extra };
    return { verdict: r.action, tier: 'baseline', ...describe(r), ...extra };
  }
  return { verdict: 'allow', tier: 'default', ...extra };
}

export interface ConnectionVerdict {
  verdict: 'allow' | 'deny';
  egress?: Decision;
  ingress?: Decision;
}

/** A connection needs egress allowed at the source pod and ingress allowed at the destination pod. */
export function evaluateConnection(
  rs: RuleSet,
  from: Remote,
  to: Remote,
  proto: number,
  port: number,
): ConnectionVerdict {
  const out: ConnectionVerdict = { verdict: 'allow' };
  const at = (pod: Pod, d: Direction) => rs.forLocal?.(pod, d) ?? rs;
  if (from.kind === 'pod')
    out.egress = evaluateDirection(at(from.pod, 'egress'), from.pod, to, 'egress', proto, port);
  if (to.kind === 'pod')
    out.ingress = evaluateDirection(at(to.pod, 'ingress'), to.pod, from, 'ingress', proto, port);
  if (out.egress?.verdict === 'deny' || out.ingress?.verdict === 'deny') out.verdict = 'deny';
  return out;
}

export const protoName = (p: number): string => PROTO_NAMES[p] ?? String(p);
