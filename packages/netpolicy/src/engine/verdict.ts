// Verdicts read from the lowered state, the way the datapath reaches them: address -> identity in the
// ipcache (as the node agent of the judging pod sees it), then the endpoint's table for that
// direction. Used by the CLI's simulate/explain and as the middle leg of the differential tests.

import { isNetworkPolicyPrecedence } from '@cascade/bpf-datapath/layout';
import type { NetpolEngine, View } from './engine.ts';
import { evaluateConnection, type Remote, type RuleSet, rulesAt } from './evaluate.ts';
import { ID } from './identities.ts';
import type { MapStateEntry } from './mapstate.ts';
import type { Pod } from './model.ts';
import type { Direction } from './rules.ts';

export interface MapDecision {
  verdict: 'allow' | 'deny';
  /**
   * self, host (own node: no admin or baseline entry for its node identity decided, and a
   * NetworkPolicy cannot block it), admin / lower (that layer's entry decided), miss (no entry:
   * default allow).
   */
  by: 'self' | 'host' | 'admin' | 'lower' | 'miss';
  remoteIdentity: number;
  entry?: MapStateEntry;
  /** The admin Pass entry the traffic went through, if any. */
  passed?: MapStateEntry;
  table?: string;
}

export function mapDirection(
  engine: NetpolEngine,
  local: Pod,
  remoteIp: string,
  d: Direction,
  proto: number,
  port: number,
  view: View = 'enforced',
): MapDecision {
  if (local.ips.includes(remoteIp))
    return {
      verdict: 'allow',
      by: 'self',
      remoteIdentity: engine.podIdentity.get(`${local.namespace}/${local.name}`) ?? 0,
    };
  const remoteIdentity = engine.identityOf(remoteIp, local.node);
  // The pod's own node (HOST) is looked up as its node identity, as the datapath does
  // (DesiredState.hostIdentity); unknown: allowed.
  const host = remoteIdentity === ID.HOST;
  const lookup =
    host && local.node !== undefined ? (engine.nodeIdentity.get(local.node) ?? 0) : remoteIdentity;
  if (host && !lookup) return { verdict: 'allow', by: 'host', remoteIdentity };
  const layers = engine.tableOf(local.namespace, local.name, d, view);
  // A pod without tables (no identity yet) is judged fail-closed.
  if (!layers) return { verdict: 'deny', by: 'miss', remoteIdentity };
  const admin = layers.admin.state.lookup(lookup, proto, port);
  if (admin && admin.verdict !== 'pass')
    return { verdict: admin.verdict, by: 'admin', remoteIdentity, entry: admin, table: layers.admin.id };
  const lower = layers.lower.state.lookup(lookup, proto, port);
  const passed = admin ? { passed: admin } : {};
  // a NetworkPolicy's entries (its allows, its isolation) never block the pod's own node
  if (host && (!lower || isNetworkPolicyPrecedence(lower.precedence)))
    return { verdict: 'allow', by: 'host', remoteIdentity, ...passed };
  if (!lower) return { verdict: 'allow', by: 'miss', remoteIdentity, ...passed };
  return {
    verdict: lower.deny ? 'deny' : 'allow',
    by: 'lower',
    remoteIdentity,
    entry: lower,
    table: layers.lower.id,
    ...passed,
  };
}

export interface MapConnection {
  verdict: 'allow' | 'deny';
  egress?: MapDecision;
  ingress?: MapDecision;
}

/** Source and destination addresses; a pod is the owner of its address. */
export function mapConnection(
  engine: NetpolEngine,
  fromIp: string,
  toIp: string,
  proto: number,
  port: number,
  view: View = 'enforced',
): MapConnection {
  const src = engine.podAt(fromIp);
  const dst = engine.podAt(toIp);
  const out: MapConnection = { verdict: 'allow' };
  if (src) out.egress = mapDirection(engine, src, toIp, 'egress', proto, port, view);
  if (dst) out.ingress = mapDirection(engine, dst, fromIp, 'ingress', proto, port, view);
  if (out.egress?.verdict === 'deny' || out.ingress?.verdict === 'deny') out.verdict = 'deny';
  return out;
}

/** The oracle on the same inputs: direct evaluation of the ordered rules (evaluate.ts). */
export function oracleConnection(
  engine: NetpolEngine,
  fromIp: string,
  toIp: string,
  proto: number,
  port: number,
) {
  return evaluateConnection(
    probeRuleSet(engine),
    remoteOf(engine, fromIp),
    remoteOf(engine, toIp),
    proto,
    port,
  );
}

/** Per engine state: the rule set with each pod's own part of it kept (rulesAt), by pod identity. */
const probeSets = new WeakMap<object, { revision: number; rs: RuleSet }>();

/**
 * ruleSetOf with `forLocal`: a pod's rules are filtered once per pod identity (an identity that is not
 * capped holds everything a subject reads: namespace, its labels, pod labels), so judging a pod costs its own
 * rules, not the cluster's. Rebuilt when the rules or the population change.
 */
export function probeRuleSet(engine: NetpolEngine): RuleSet {
  const known = probeSets.get(engine.rules);
  if (known && known.revision === engine.populationRevision) return known.rs;
  const base = ruleSetOf(engine);
  const byLocal = new Map<string, RuleSet>();
  /** each pod's two sets, found again without building their keys */
  const byPod = new Map<object, Partial<Record<Direction, RuleSet>>>();
  const rs: RuleSet = {
    ...base,
    forLocal: (pod, d) => {
      let mine = byPod.get(pod);
      if (!mine) byPod.set(pod, (mine = {}));
      const known = mine[d];
      if (known) return known;
      // a capped identity stands for several label sets: those pods are kept one by one
      const id = engine.podIdentity.get(`${pod.namespace}/${pod.name}`);
      const shared = id !== undefined && !engine.identities.get(id)?.capped;
      const k = `${d}|${shared ? id : `pod:${pod.namespace}/${pod.name}`}`;
      let at = byLocal.get(k);
      if (!at) byLocal.set(k, (at = rulesAt(base, pod, d)));
      mine[d] = at;
      return at;
    },
  };
  probeSets.set(engine.rules, { revision: engine.populationRevision, rs });
  return rs;
}

/** Small numbers for rules and isolations (by object), so that a class key is short. */
const objectNumbers = new WeakMap<object, number>();
let objectCount = 0;
const numberOf = (o: object): number => {
  let n = objectNumbers.get(o);
  if (n === undefined) objectNumbers.set(o, (n = objectCount++));
  return n;
};
const classes = new WeakMap<RuleSet, string>();

/**
 * A key for everything a judgement at `local` in `direction` reads of the pod itself, given `rs`, its
 * set from probeRuleSet's forLocal: the rules that select it and the isolations that hold it (by
 * object), and for ingress its named ports when one of those rules names a port (a named port
 * resolves against the destination).
 * Past that, evaluateDirection reads the local pod only to recognise the pod itself and its own node,
 * so two pods of one class judge any remote that is neither of them nor a node alike. Each pod's set
 * is its own object, kept per identity (or per pod when capped), so the key is kept per set.
 */
export function judgementClass(rs: RuleSet, local: Pod, direction: Direction): string {
  // a set not filtered for one pod (no forLocal): the pod is its own class
  if (rs.subjectsChecked !== direction) return `${direction}|pod:${local.namespace}/${local.name}`;
  let k = classes.get(rs);
  if (k !== undefined) return k;
  const ids = (xs: readonly object[]) => xs.map(numberOf).join(',');
  k = `${direction}|${ids(rs.admin)}|${ids(rs.np)}|${ids(rs.baseline)}|${ids(rs.isolation)}`;
  // only a named port of an ingress rule reads the pod's ports
  const named = (r: { ports?: readonly { kind: string }[] }) => r.ports?.some((m) => m.kind !== 'range');
  if (direction === 'ingress' && (rs.admin.some(named) || rs.np.some(named) || rs.baseline.some(named)))
    k += `|${local.ports.map((p) => `${p.name ?? ''}/${p.protocol}/${p.port}`).join(',')}`;
  classes.set(rs, k);
  return k;
}

export function ruleSetOf(engine: NetpolEngine): RuleSet {
  return {
    ...engine.rules,
    nsLabels: engine.nsLabels,
    capped: (pod) =>
      engine.identities.get(engine.podIdentity.get(`${pod.namespace}/${pod.name}`) ?? -1)?.capped ?? false,
    coversAllPods: (peer) => engine.coversAllPods(peer),
  };
}

export function remoteOf(engine: NetpolEngine, ip: string): Remote {
  const pod = engine.podAt(ip);
  if (pod) return { kind: 'pod', pod, ip };
  const node = engine.nodeAt(ip);
  if (node) return { kind: 'node', node, ip };
  return { kind: 'external', ip };
}
