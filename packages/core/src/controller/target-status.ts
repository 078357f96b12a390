// `<Kind>Affected` on targeted objects, merged into their status without clobbering what others
// wrote. Gateways: status.conditions is a map keyed by type, so server-side apply of our one
// condition merges (the caller applies). Routes: status.parents is an atomic list, so this computes a
// read-modify-write: our entry per parent (controllerName cascade.dev/policy-controller) gets our
// condition type; other controllers' entries and other condition types stay as they are.
import type { ParentRef } from '../topology/types.ts';

export const POLICY_CONTROLLER_NAME = 'cascade.dev/policy-controller';
const GROUP = 'gateway.networking.k8s.io';

/** A condition as any writer may have set it (status is a free string for others' conditions). */
export interface StatusCondition {
  type: string;
  status: string;
  reason: string;
  message: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

/** A route's parentRef as written (Gateway API defaults not filled in). */
export type RouteParentRef = ParentRef;

interface ParentStatus {
  parentRef: RouteParentRef;
  controllerName: string;
  conditions: StatusCondition[];
}

/** parentRef with Gateway API defaults filled in, for comparison. */
function norm(p: RouteParentRef, routeNamespace: string): string {
  return JSON.stringify([
    p.group ?? GROUP,
    p.kind ?? 'Gateway',
    p.namespace ?? routeNamespace,
    p.name,
    p.sectionName ?? '',
    p.port ?? 0,
  ]);
}

const sameCondition = (a: StatusCondition, b: StatusCondition) =>
  a.status === b.status &&
  a.reason === b.reason &&
  a.message === b.message &&
  (a.observedGeneration ?? 0) === (b.observedGeneration ?? 0);

/** Our condition merged into an existing list: undefined removes our type. Keeps lastTransitionTime while status holds. */
export function mergeCondition(
  list: readonly StatusCondition[],
  cond: StatusCondition | undefined,
  type: string,
  now: string,
): StatusCondition[] {
  const prev = list.find((c) => c.type === type);
  const rest = list.filter((c) => c.type !== type);
  if (!cond) return rest;
  const lastTransitionTime =
    prev && prev.status === cond.status && prev.lastTransitionTime ? prev.lastTransitionTime : now;
  return [...rest, { ...cond, lastTransitionTime }];
}

/**
 * The route status with our condition (`cond`, or none: removed) on our entry for each Gateway
 * parentRef; undefined when nothing would change.
 */
export function mergeRouteAffected(
  status: { parents?: ParentStatus[] } | undefined,
  routeNamespace: string,
  parentRefs: readonly RouteParentRef[],
  type: string,
  cond: StatusCondition | undefined,
  now: string,
): { parents: ParentStatus[] } | undefined {
  const parents = [...(status?.parents ?? [])];
  const wanted = new Map(
    parentRefs.filter((p) => (p.kind ?? 'Gateway') === 'Gateway').map((p) => [norm(p, routeNamespace), p]),
  );
  let changed = false;
  const out: ParentStatus[] = [];
  const ours = new Set<string>();
  for (const e of parents) {
    if (e.controllerName !== POLICY_CONTROLLER_NAME) {
      out.push(e);
      continue;
    }
    const key = norm(e.parentRef, routeNamespace);
    ours.add(key);
    const want = wanted.has(key) ? cond : undefined;
    const prev = e.conditions.find((c) => c.type === type);
    if ((prev && want && sameCondition(prev, want)) || (!prev && !want)) {
      out.push(e);
      continue;
    }
    changed = true;
    const conditions = mergeCondition(e.conditions, want, type, now);
    if (conditions.length > 0) out.push({ ...e, conditions });
  }
  if (cond) {
    for (const [key, p] of wanted) {
      if (ours.has(key) || out.length >= 32) continue;
      changed = true;
      out.push({
        parentRef: {
          group: GROUP,
          kind: 'Gateway',
          namespace: p.namespace ?? routeNamespace,
          name: p.name,
          ...(p.sectionName ? { sectionName: p.sectionName } : {}),
          ...(p.port ? { port: p.port } : {}),
        },
        controllerName: POLICY_CONTROLLER_NAME,
        conditions: [{ ...cond, lastTransitionTime: now }],
      });
    }
  }
  return changed ? { parents: out } : undefined;
}
