// Status as plain data: the Accepted and Enforced conditions of a policy, and the <Kind>Affected
// condition of a targeted Gateway or route. Messages name the other policies, rules and routes.
import type { PolicyEngine } from '../merge/engine.ts';
import type { ChainResult } from '../merge/fold.ts';
import { type PolicyRef, policyId, policyName } from '../merge/policy.ts';

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  observedGeneration?: number;
}

const LIST_MAX = 5;

function list(items: Iterable<string>, max = LIST_MAX): string {
  const all = [...items].sort();
  return all.length <= max ? all.join(', ') : `${all.slice(0, max).join(', ')} and ${all.length - max} more`;
}

function cond(
  type: string,
  status: Condition['status'],
  reason: string,
  message: string,
  gen?: number,
): Condition {
  const c: Condition = { type, status, reason, message };
  if (gen !== undefined) c.observedGeneration = gen;
  return c;
}

function describeTarget(key: string): string {
  // "Gateway:ns/name#section" -> "Gateway ns/name (section section)"
  const [obj, section] = key.split('#') as [string, string | undefined];
  const [kind, name] = obj.split(':') as [string, string];
  return section ? `${kind} ${name} section ${section}` : `${kind} ${name}`;
}

/** Accepted and Enforced conditions for one policy; [] when the engine does not know it. */
export function policyConditions(engine: PolicyEngine, id: string): Condition[] {
  const state = engine.policy(id);
  if (!state) return [];
  const gen = state.object.metadata.generation;
  const p = state.policy;
  if (!p) {
    return [
      cond('Accepted', 'False', 'Invalid', `Policy is invalid: ${state.errors.join('; ')}`, gen),
      invalidEnforced(engine, id, gen),
    ];
  }
  // a condition that hit the run-time cost limit is refused from then on: the policy is invalid
  const exceeded = p.blocks.flatMap((b) =>
    b.condition?.exceeded
      ? [`spec.${b.as === 'override' ? 'overrides' : 'defaults'}.condition: ${b.condition.exceeded}`]
      : [],
  );
  if (exceeded.length) {
    return [
      cond('Accepted', 'False', 'Invalid', `Policy is invalid: ${exceeded.join('; ')}`, gen),
      enforcedCondition(engine, id, gen),
    ];
  }
  const found = p.targets.filter((t) => engine.topology.exists(t.key));
  const missing = p.targets.filter((t) => !engine.topology.exists(t.key));
  if (found.length === 0) {
    const msg = `Policy target ${list(missing.map((t) => describeTarget(t.key)))} was not found`;
    return [
      cond('Accepted', 'False', 'TargetNotFound', msg, gen),
      cond('Enforced', 'False', 'Unknown', msg, gen),
    ];
  }
  const live = found.filter((t) => !engine.isConflictedAt(id, t.key));
  if (live.length === 0) {
    const winners = found.flatMap((t) =>
      engine.attachedAt(t.key).filter((o) => !engine.isConflictedAt(o, t.key)),
    );
    const msg = `Policy is conflicted by ${list(new Set(winners.map((w) => w.split(':')[1] ?? w)))}: ${engine.kind.kind} allows ${engine.kind.maxPoliciesPerTarget} per target`;
    return [
      cond('Accepted', 'False', 'Conflicted', msg, gen),
      cond('Enforced', 'False', 'Unknown', msg, gen),
    ];
  }
  const notes: string[] = [];
  if (missing.length > 0) notes.push(`target ${list(missing.map((t) => describeTarget(t.key)))} not found`);
  for (const t of live) {
    const peers = engine.attachedAt(t.key).filter((o) => o !== id);
    if (peers.length > 0) {
      notes.push(
        `${describeTarget(t.key)} is also targeted by ${list(peers.map((o) => o.split(':')[1] ?? o))} (older wins for overrides, newer for defaults)`,
      );
    }
  }
  const accepted = cond(
    'Accepted',
    'True',
    'Accepted',
    `Policy has been accepted${notes.length ? `; ${notes.join('; ')}` : ''}`,
    gen,
  );
  return [accepted, enforcedCondition(engine, id, gen)];
}

/** The route of a path, as `ns/name`. */
function routeOfPath(engine: PolicyEngine, pk: string): string {
  const r = engine.topology.paths.get(pk)?.route;
  return r ? `${r.namespace}/${r.name}` : pk;
}

/** Enforced of an invalid policy: for a kind that fails closed, the routes it closes. */
function invalidEnforced(engine: PolicyEngine, id: string, gen: number | undefined): Condition {
  const fc = engine.kind.failClosed;
  if (!fc) return cond('Enforced', 'False', 'Unknown', 'Policy is not enforced: it is invalid', gen);
  const closed: string[] = [];
  for (const [result, pks] of engine.reach(id).results)
    if (result.failedClosed?.by.some((r) => policyId(r) === id)) closed.push(...pks);
  if (closed.length === 0)
    return cond('Enforced', 'False', 'Unknown', 'Policy is not enforced: it is invalid', gen);
  return cond(
    'Enforced',
    'False',
    'FailedClosed',
    `Policy is not enforced: it is invalid and ${fc.effect.replace(/^it /, '')} (${closed.length} path(s), routes ${list(new Set(closed.map((pk) => routeOfPath(engine, pk))))})`,
    gen,
  );
}

function enforcedCondition(engine: PolicyEngine, id: string, gen: number | undefined): Condition {
  const { paths, results } = engine.reach(id);
  if (paths.length === 0) {
    return cond(
      'Enforced',
      'False',
      'Unknown',
      'Policy is not enforced: no route is attached to its target yet',
      gen,
    );
  }
  const isSelf = (r: PolicyRef) => policyId(r) === id;
  let enforced = 0;
  let lostCount = 0;
  const lostBy = new Map<string, { rules: Set<string>; routes: Set<string> }>();
  const refused = new Map<string, Set<string>>();
  const condErrors = new Map<string, { paths: number; applied: boolean }>();
  let condFalse = 0;
  let closedCount = 0;
  const closedBy = new Map<string, Set<string>>();
  const routeOf = (pk: string) => routeOfPath(engine, pk);
  for (const [result, pks] of results as Map<ChainResult, string[]>) {
    for (const rule of result.rules.values()) if (isSelf(rule.source)) enforced += pks.length;
    for (const l of result.lost) {
      if (!isSelf(l.source)) continue;
      if (l.reason === 'failed-closed') {
        lostCount += pks.length;
        closedCount += pks.length;
        const k = l.by.map(policyName).join(', ');
        let e = closedBy.get(k);
        if (!e) closedBy.set(k, (e = new Set()));
        for (const pk of pks) e.add(routeOf(pk));
        continue;
      }
      // A clipped rule is still enforced, with the constraint's bounds: partial, not overridden.
      if (l.reason === 'clipped') enforced += pks.length;
      lostCount += pks.length;
      for (const by of l.by) {
        const k = policyName(by);
        let e = lostBy.get(k);
        if (!e) lostBy.set(k, (e = { rules: new Set(), routes: new Set() }));
        e.rules.add(l.reason === 'unset' || l.reason === 'clipped' ? `${l.key} (${l.reason})` : l.key);
        for (const pk of pks) e.routes.add(routeOf(pk));
      }
    }
    for (const u of result.refusedUnsets) {
      if (!isSelf(u.by)) continue;
      const k = policyName(u.override);
      let s = refused.get(k);
      if (!s) refused.set(k, (s = new Set()));
      s.add(u.key);
    }
    for (const e of result.conditionErrors) {
      if (!isSelf(e.policy)) continue;
      const prev = condErrors.get(e.message);
      condErrors.set(e.message, { paths: (prev?.paths ?? 0) + pks.length, applied: e.applied });
    }
    for (const s of result.steps)
      if (isSelf(s.policy) && s.outcome === 'condition-false') condFalse += pks.length;
  }
  // every list in a message in a fixed order: the same state gives the same text whatever the order
  // of events was (a restarted controller must compare equal and write nothing)
  const byKey = <V>(m: Map<string, V>) => [...m].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const notes: string[] = [];
  for (const [by, set] of byKey(refused))
    notes.push(`unset of ${list(set)} refused: an override of ${by} cannot be unset`);
  for (const [msg, e] of byKey(condErrors))
    notes.push(
      `condition failed on ${e.paths} path(s): ${msg} (${e.applied ? 'the override was applied: fail safe' : 'the default was skipped'})`,
    );
  const overriders = byKey(lostBy).map(([by, e]) => `${list(e.rules)} by ${by} (routes ${list(e.routes)})`);
  for (const [by, routes] of byKey(closedBy))
    notes.unshift(`routes ${list(routes)} fail closed: ${by} invalid (its rules are not in force there)`);
  const tail = notes.length ? `; ${notes.join('; ')}` : '';
  if (enforced === 0 && lostCount > 0 && closedCount === lostCount)
    return cond('Enforced', 'False', 'FailedClosed', `Policy is not in force${tail}`, gen);
  if (enforced === 0 && lostCount > 0) {
    return cond(
      'Enforced',
      'False',
      'Overridden',
      `Policy has been overridden: ${overriders.join('; ')}${tail}`,
      gen,
    );
  }
  if (lostCount > 0) {
    return cond(
      'Enforced',
      'True',
      'PartiallyEnforced',
      `Policy has been partially enforced on ${paths.length} path(s)${overriders.length ? `; overridden: ${overriders.join('; ')}` : ''}${tail}`,
      gen,
    );
  }
  // What the policy asked for and did not get: a refused unset, a default skipped for its condition.
  const partial =
    [...refused.values()].some((s) => s.size > 0) || [...condErrors.values()].some((e) => !e.applied);
  if (partial)
    return cond(
      'Enforced',
      'True',
      'PartiallyEnforced',
      `Policy has been partially enforced on ${paths.length} path(s)${tail}`,
      gen,
    );
  const quiet = enforced === 0 && condFalse > 0 ? '; no block applied: its conditions did not hold' : '';
  return cond(
    'Enforced',
    'True',
    'Enforced',
    `Policy has been enforced on ${paths.length} path(s)${quiet}${tail}`,
    gen,
  );
}

/**
 * The `<Kind>Affected` condition of a Gateway or route (object key without section): Affected when a
 * policy on the whole object is enforced, PartiallyAffected when only policies on sections are.
 */
export function affectedCondition(
  engine: PolicyEngine,
  objectKey: string,
  sections: readonly string[],
): Condition {
  const type = `${engine.kind.kind}Affected`;
  // a route an invalid policy closes: what is in force there is the deny-all, named first
  if (engine.kind.failClosed && /^(HTTPRoute|GRPCRoute):/.test(objectKey)) {
    const by = new Map<string, string>();
    for (const pk of engine.topology.routePathKeys(objectKey))
      for (const r of engine.result(pk)?.failedClosed?.by ?? []) by.set(policyId(r), policyName(r));
    if (by.size > 0)
      return cond(
        type,
        'True',
        'FailedClosed',
        `The object is affected by ${engine.kind.kind} ${list(by.values())}, which ${by.size > 1 ? 'are' : 'is'} invalid: ${engine.kind.failClosed.effect}`,
      );
  }
  const isEnforced = (id: string) =>
    policyConditions(engine, id).some((c) => c.type === 'Enforced' && c.status === 'True');
  const enforcedIds = (key: string) => engine.attachedAt(key).filter(isEnforced);
  const name = (id: string) => id.split(':')[1]!;
  // a route is also affected by every policy whose rules reach its paths (a gateway default or
  // override), named beside the ones attached to it: both Affected conditions name every policy
  // that applies, whichever kind
  const inherited = (exclude: readonly string[]) => {
    if (!/^(HTTPRoute|GRPCRoute):/.test(objectKey)) return [];
    const ids = new Set<string>();
    for (const pk of engine.topology.routePathKeys(objectKey))
      for (const r of engine.result(pk)?.rules.values() ?? [])
        ids.add(`${r.source.kind}:${r.source.namespace}/${r.source.name}`);
    return [...ids].filter((id) => !exclude.includes(id) && isEnforced(id)).sort();
  };
  const andInherited = (ids: readonly string[], lead = ' and by') =>
    ids.length ? `${lead} ${list(ids.map(name))} (inherited)` : '';
  const whole = enforcedIds(objectKey);
  if (whole.length > 0) {
    return cond(
      type,
      'True',
      'Affected',
      `The object is affected by ${engine.kind.kind} ${list(whole.map(name))}${andInherited(inherited(whole))}`,
    );
  }
  const bySection = new Map<string, string[]>();
  for (const s of sections) {
    const ids = enforcedIds(`${objectKey}#${s}`);
    if (ids.length) bySection.set(s, ids);
  }
  if (bySection.size > 0) {
    const attached = [...new Set([...bySection.values()].flat())];
    return cond(
      type,
      'True',
      'PartiallyAffected',
      `The following sections of the object are affected by ${engine.kind.kind} ${list(attached.map(name))}: ${list(bySection.keys(), 20)}${andInherited(inherited(attached), '; the object is also affected by')}`,
    );
  }
  // Inherited only: a route is affected by every policy whose rules reach its paths (a gateway default).
  const only = inherited([]);
  if (only.length > 0)
    return cond(
      type,
      'True',
      'Affected',
      `The object is affected by ${engine.kind.kind} ${list(only.map(name))} (inherited)`,
    );
  return cond(type, 'False', 'Unaffected', `The object is not affected by any ${engine.kind.kind}`);
}
