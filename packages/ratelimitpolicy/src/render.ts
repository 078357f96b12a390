// RateLimitPolicy -> Limitador. One ConfigMap per gateway, rendered from the effective policy of every
// path through it (never from a single policy):
//
// - `limits.yaml`: Limitador's limits file. One entry per (effective limit, rate): `namespace` is the
//   gateway's rate-limit domain (`<ns>/<gateway>`, or `cascade/shared` for scope `shared`),
//   `max_value`/`seconds` from the rate, `conditions` select the limit by its id descriptor, and
//   `variables` are the counters plus, for scope `route`, the route itself (one counter per route).
//   `name` shows the limit, the source policy and how it got there.
// - `actions.yaml`: what the gateway's rate-limit filter does per path (hostnames, route rule), with
//   the paths that do the same grouped: for each limit, the descriptors to send and the request
//   predicates that gate it. The predicates are
//   the limit's own `when` plus the top-level `when` of the policy that wrote it (its context), never
//   the winning policy's: a default merged into a route keeps its own predicates.
import { createHash } from 'node:crypto';
import {
  type EffectiveRule,
  labelValue,
  objectName,
  REFUSED_POLICIES_ANNOTATION,
  type RenderContext,
  type RenderedObject,
  toYaml,
} from '@cascade/core';
import { type Limit, windowSeconds } from './kind.ts';

export type Scope = 'route' | 'gateway' | 'shared';

/** An explicit scope wins; otherwise route-level limits count per route, gateway-level ones per gateway (Kuadrant's sharing). */
export function scopeOf(rule: Pick<EffectiveRule, 'value' | 'level'>): Scope {
  const explicit = (rule.value as Limit | undefined)?.scope;
  if (explicit) return explicit;
  return rule.level >= 3 ? 'route' : 'gateway';
}

/** The effective value with its scope made explicit (what EffectivePolicy and the CLI show). */
export function effectiveLimit(rule: EffectiveRule): unknown {
  const v = rule.value as Limit;
  return v && typeof v === 'object' ? { ...v, scope: scopeOf(rule) } : v;
}

export interface LimitadorLimit {
  namespace: string;
  max_value: number;
  seconds: number;
  conditions: string[];
  variables: string[];
  name: string;
}

export interface LimitAction {
  /** The limit id: the descriptor key `cascade.limit.<id>` the filter sends with value "1". */
  limit: string;
  /** Descriptor entries to send: the counters' expressions (and the route for scope `route`). */
  data: { key: string; expression: string }[];
  /** All must hold for the limit to apply: the limit's own `when`, then its policy's top-level `when`. */
  predicates: string[];
}

export interface PathActions {
  route: string;
  rule: string;
  listener: string;
  hostnames: string[];
  domain: string;
  actions: LimitAction[];
}

/** `actions.yaml` groups the paths that do exactly the same (most paths share the gateway's limits). */
export interface ActionGroup {
  domain: string;
  actions: LimitAction[];
  paths: Pick<PathActions, 'route' | 'rule' | 'listener' | 'hostnames'>[];
}

export function groupActions(paths: PathActions[]): ActionGroup[] {
  const groups = new Map<string, ActionGroup>();
  for (const p of paths) {
    const k = JSON.stringify([p.domain, p.actions]);
    let g = groups.get(k);
    if (!g) groups.set(k, (g = { domain: p.domain, actions: p.actions, paths: [] }));
    g.paths.push({ route: p.route, rule: p.rule, listener: p.listener, hostnames: p.hostnames });
  }
  return [...groups.values()];
}

/** One entry per path again (what a filter configuration per route needs). */
export function expandActions(groups: ActionGroup[]): PathActions[] {
  return groups.flatMap((g) => g.paths.map((p) => ({ ...p, domain: g.domain, actions: g.actions })));
}

const ROUTE_DESCRIPTOR = 'cascade.route';
const descriptor = (key: string) => `descriptors[0][${JSON.stringify(key)}]`;
const sourceText = (r: EffectiveRule) =>
  `${r.source.kind} ${r.source.namespace}/${r.source.name} (${r.as === 'intent' ? 'own rule' : r.as})`;

/** Ids by rule object: paths with the same chain share their EffectiveRule objects. */
const ids = new WeakMap<EffectiveRule, Map<string, string>>();

function limitId(r: EffectiveRule, scope: Scope, domain: string): string {
  let byDomain = ids.get(r);
  if (!byDomain) ids.set(r, (byDomain = new Map()));
  const k = `${scope}|${domain}`;
  let id = byDomain.get(k);
  if (id === undefined) byDomain.set(k, (id = computeLimitId(r, scope, domain)));
  return id;
}

function computeLimitId(r: EffectiveRule, scope: Scope, domain: string): string {
  const h = createHash('sha256')
    .update(JSON.stringify([r.key, r.source, r.as, r.value, r.context ?? null, scope, domain]))
    .digest('hex')
    .slice(0, 12);
  return `${r.name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 40)}__${h}`;
}

const predicatesOf = (when: unknown): string[] =>
  Array.isArray(when)
    ? when.map((p) => (p as { predicate?: string }).predicate).filter((p): p is string => Boolean(p))
    : [];

/** The ConfigMap contents for one gateway: the Limitador limits and the per-path actions. */
export function limitadorConfig(ctx: RenderContext): { limits: LimitadorLimit[]; paths: PathActions[] } {
  const gatewayDomain = `${ctx.gateway.namespace}/${ctx.gateway.name}`;
  const limits = new Map<string, LimitadorLimit[]>();
  const paths: PathActions[] = [];
  for (const p of ctx.paths) {
    const actions: LimitAction[] = [];
    for (const r of p.result.rules.values()) {
      if (r.section !== 'limits') continue;
      const v = r.value as Limit;
      const scope = scopeOf(r);
      const domain = scope === 'shared' ? 'cascade/shared' : gatewayDomain;
      const id = limitId(r, scope, domain);
      const counters = (v.counters ?? []).map((c) => c.expression);
      if (!limits.has(id)) {
        const variables = [
          ...counters.map(descriptor),
          ...(scope === 'route' ? [descriptor(ROUTE_DESCRIPTOR)] : []),
        ];
        limits.set(
          id,
          v.rates.map((rate, i) => ({
            namespace: domain,
            max_value: rate.limit,
            seconds: windowSeconds(rate.window),
            conditions: [`${descriptor(`cascade.limit.${id}`)} == "1"`],
            variables,
            name: `${r.name}${v.rates.length > 1 ? `[${i}]` : ''} from ${sourceText(r)}, scope ${scope}`,
          })),
        );
      }
      actions.push({
        limit: id,
        data: [
          ...counters.map((c) => ({ key: c, expression: c })),
          ...(scope === 'route'
            ? [
                {
                  key: ROUTE_DESCRIPTOR,
                  expression: JSON.stringify(`${p.path.route.namespace}/${p.path.route.name}`),
                },
              ]
            : []),
        ],
        predicates: [...predicatesOf(v.when), ...predicatesOf(r.context?.when)],
      });
    }
    if (actions.length === 0) continue;
    paths.push({
      route: `${p.path.route.kind}/${p.path.route.namespace}/${p.path.route.name}`,
      rule: p.path.rule,
      listener: p.path.listener,
      hostnames: p.hostnames,
      domain: gatewayDomain,
      actions,
    });
  }
  const all = [...limits.values()].flat().sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { limits: all, paths };
}

export const LIMITS_CONFIGMAP_PREFIX = 'limitador-limits-';

/** render hook: one ConfigMap per gateway that has any effective limit. */
/** What a ConfigMap's data may take: under the 1 MiB the API server stores, with room for metadata. */
export const MAX_LIMITS_BYTES = 900_000;

const policyIdOf = (r: EffectiveRule) => `${r.source.kind}:${r.source.namespace}/${r.source.name}`;

export function renderLimitador(ctx: RenderContext): RenderedObject[] {
  // Over the size the API server stores, the largest contributor's limits are left out (and said in
  // an annotation, so that policy alone is told), until the rest fits: one tenant's huge policy never
  // keeps the others' limits from being published.
  const refused: { policy: string; reason: string }[] = [];
  let view = ctx;
  let built = limitadorConfig(view);
  let data = { 'limits.yaml': toYaml(built.limits), 'actions.yaml': toYaml(groupActions(built.paths)) };
  for (let guard = 0; guard < 64; guard++) {
    const size = Buffer.byteLength(data['limits.yaml']) + Buffer.byteLength(data['actions.yaml']);
    if (size <= MAX_LIMITS_BYTES) break;
    const weight = new Map<string, number>();
    for (const p of view.paths)
      for (const r of p.result.rules.values())
        if (r.section === 'limits')
          weight.set(policyIdOf(r), (weight.get(policyIdOf(r)) ?? 0) + JSON.stringify(r.value).length);
    const worst = [...weight].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0];
    if (!worst) break;
    refused.push({
      policy: worst[0],
      reason: `its limits were left out of the Limitador limits: with them they take ${size.toLocaleString('en')} bytes, over the ${MAX_LIMITS_BYTES.toLocaleString('en')} a ConfigMap may hold (it is the largest contributor; the other policies' limits are published)`,
    });
    view = {
      ...view,
      paths: view.paths.map((p) => ({
        ...p,
        result: {
          ...p.result,
          rules: new Map([...p.result.rules].filter(([, r]) => policyIdOf(r) !== worst[0])),
        },
      })),
    };
    built = limitadorConfig(view);
    data = { 'limits.yaml': toYaml(built.limits), 'actions.yaml': toYaml(groupActions(built.paths)) };
  }
  if (built.limits.length === 0 && refused.length === 0) return [];
  // Limitador's namespace when configured (every gateway's limits there: the name carries the
  // gateway's namespace too), else beside the gateway. Names are valid for any gateway name (253
  // characters: hashed and cut); the gateway is in the annotation.
  const namespace = ctx.settings.limitadorNamespace || ctx.gateway.namespace;
  const beside = namespace === ctx.gateway.namespace;
  const name = beside
    ? objectName(`${LIMITS_CONFIGMAP_PREFIX}${ctx.gateway.name}`)
    : objectName(`${LIMITS_CONFIGMAP_PREFIX}${ctx.gateway.namespace}-${ctx.gateway.name}`, {
        key: `${ctx.gateway.namespace}/${ctx.gateway.name}`,
      });
  return [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name,
        namespace,
        labels: {
          'cascade.dev/managed-by': ctx.controller,
          'cascade.dev/policy-kind': 'RateLimitPolicy',
          'cascade.dev/gateway': labelValue(ctx.gateway.name),
        },
        annotations: {
          'cascade.dev/gateway': `${ctx.gateway.namespace}/${ctx.gateway.name}`,
          ...(refused.length ? { [REFUSED_POLICIES_ANNOTATION]: JSON.stringify(refused) } : {}),
        },
        // an owner must be in the same namespace: elsewhere the controller deletes orphans itself
        ...(ctx.gateway.uid && beside
          ? {
              ownerReferences: [
                {
                  apiVersion: 'gateway.networking.k8s.io/v1',
                  kind: 'Gateway',
                  name: ctx.gateway.name,
                  uid: ctx.gateway.uid,
                },
              ],
            }
          : {}),
      },
      data,
    },
  ];
}
