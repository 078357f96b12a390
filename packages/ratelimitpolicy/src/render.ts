// RateLimitPolicy -> Limitador and the gateway's wasm-shim. Rendered from the effective policy of
// every path through a gateway (never from a single policy):
//
// - the Limitador limits (`limits.yaml` of one ConfigMap per gateway, or Limitador.spec.limits): one
//   entry per (effective limit, rate, counter namespace). `namespace` is where the limit counts:
//   `<route-ns>/<route-name>` for scope `route` (the default at every level, as kuadrant-operator
//   counts), `cascade:gateway/<ns>/<gateway>` for scope `gateway`, `cascade:shared` for `shared` (a
//   colon never appears in a route's namespace/name, so the three cannot collide).
//   `max_value`/`seconds` from the rate, `conditions` select the limit by its key
//   (`limit.<name>__<hash>` = "1"), `variables` are the counters. `name` shows the limit, the source
//   policy and how it got there.
// - the wasm-shim actions of each path (PolicyKind.actions): one rate-limit action per counter
//   namespace (its `scope`), one `conditionalData` block per limit: predicates = the top-level `when`
//   of the policy that wrote the limit, then the limit's own `when` (never the winning policy's: a
//   default merged into a route keeps its own predicates); data = the limit key with value "1", then
//   one entry per counter. The actions run before auth unless a limit reads `auth.*`.
import { createHash } from 'node:crypto';
import {
  type EffectiveRule,
  labelValue,
  objectName,
  pathKey,
  REFUSED_POLICIES_ANNOTATION,
  type RenderContext,
  type RenderedObject,
  type RenderPath,
  toYaml,
} from '@cascade/core';
import {
  type ConditionalData,
  type ContributedAction,
  HITS_ADDEND,
  PHASE,
  RATELIMIT_CHECK_SERVICE,
  RATELIMIT_REPORT_SERVICE,
  RATELIMIT_SERVICE,
  type WasmAction,
} from '@cascade/wiring';
import type { Limit } from './kind.ts';
import { windowSeconds } from './rates.ts';

export type Scope = 'route' | 'gateway' | 'shared';

/** An explicit scope wins; otherwise every limit counts per route (kuadrant-operator's counting). */
export function scopeOf(rule: Pick<EffectiveRule, 'value' | 'level'>): Scope {
  return (rule.value as Limit | undefined)?.scope ?? 'route';
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

export const SHARED_NAMESPACE = 'cascade:shared';

/** The Limitador namespace a limit counts in, for one path. */
export function counterNamespace(
  scope: Scope,
  p: RenderPath,
  gateway: { namespace: string; name: string },
): string {
  if (scope === 'shared') return SHARED_NAMESPACE;
  if (scope === 'gateway') return `cascade:gateway/${gateway.namespace}/${gateway.name}`;
  return `${p.path.route.namespace}/${p.path.route.name}`;
}

const descriptor = (key: string) => `descriptors[0][${JSON.stringify(key)}]`;
const sourceText = (r: EffectiveRule) =>
  `${r.source.kind} ${r.source.namespace}/${r.source.name} (${r.as === 'intent' ? 'own rule' : r.as})`;
const sourceId = (r: EffectiveRule) => `${r.source.kind}:${r.source.namespace}/${r.source.name}`;

/** Keys by rule object: paths with the same chain share their EffectiveRule objects. */
const keys = new WeakMap<EffectiveRule, Map<string, string>>();

/**
 * The limit key (`limit.<name>__<hash>`, Kuadrant's form; `tokenlimit.` for token limits): the
 * descriptor entry that selects the limit.
 */
function limitKey(r: EffectiveRule, namespace: string, prefix: string): string {
  let byNs = keys.get(r);
  if (!byNs) keys.set(r, (byNs = new Map()));
  let k = byNs.get(namespace);
  if (k === undefined) {
    const h = createHash('sha256')
      .update(JSON.stringify([r.key, r.source, r.as, r.value, r.context ?? null, namespace]))
      .digest('hex')
      .slice(0, 8);
    byNs.set(namespace, (k = `${prefix}${r.name.replace(/[^A-Za-z0-9_]/g, '_').slice(0, 40)}__${h}`));
  }
  return k;
}

/**
 * What a kind's limits count and how wasm-shim calls Limitador for them: requests (RateLimitPolicy:
 * one ShouldRateLimit call per counter namespace, 1 hit) or tokens (TokenRateLimitPolicy: a
 * CheckRateLimit call before the request with 0 hits (Limitador checks one: 429 once a counter holds its limit),
 * and a Report call on the response adding the tokens it reports, as kuadrant-operator main does).
 */
export interface LimitFlavour {
  /** The kind whose policies these are (labels, messages). */
  kind: string;
  keyPrefix: string;
  configMapPrefix: string;
  /** The actions of one counter namespace from its blocks. */
  actions(namespace: string, blocks: ConditionalData[]): WasmAction[];
  /** The phase: before auth, or after it when a limit reads `auth.*`. */
  phase(readsAuth: boolean): number;
}

/** Where the tokens a response used are read (OpenAI-style `usage`, also in a stream's last chunk). */
export const TOKENS_READ = 'responseBodyJSON("/usage/total_tokens")';

export const REQUEST_LIMITS: LimitFlavour = {
  kind: 'RateLimitPolicy',
  keyPrefix: 'limit.',
  configMapPrefix: 'limitador-limits-',
  actions: (namespace, blocks) => [{ service: RATELIMIT_SERVICE, scope: namespace, conditionalData: blocks }],
  phase: (auth) => (auth ? PHASE.rateLimitAfterAuth : PHASE.rateLimit),
};

const withHits = (blocks: ConditionalData[], hits: string): ConditionalData[] =>
  blocks.map((b) => ({ ...b, data: [...b.data, { expression: { key: HITS_ADDEND, value: hits } }] }));

export const TOKEN_LIMITS: LimitFlavour = {
  kind: 'TokenRateLimitPolicy',
  keyPrefix: 'tokenlimit.',
  configMapPrefix: 'limitador-token-limits-',
  actions: (namespace, blocks) => [
    { service: RATELIMIT_CHECK_SERVICE, scope: namespace, conditionalData: withHits(blocks, '0') },
    { service: RATELIMIT_REPORT_SERVICE, scope: namespace, conditionalData: withHits(blocks, TOKENS_READ) },
  ],
  phase: (auth) => (auth ? PHASE.tokenLimitAfterAuth : PHASE.tokenLimit),
};

const predicatesOf = (when: unknown): string[] =>
  Array.isArray(when)
    ? when.map((p) => (p as { predicate?: string }).predicate).filter((p): p is string => Boolean(p))
    : [];

const readsAuth = (texts: string[]) => texts.some((t) => /(^|[^A-Za-z0-9_.])auth\./.test(t));

/** The limits and the wasm-shim actions of one gateway. */
export function limitadorConfig(
  ctx: RenderContext,
  flavour: LimitFlavour = REQUEST_LIMITS,
): {
  limits: LimitadorLimit[];
  actions: Map<string, ContributedAction[]>;
} {
  const limits = new Map<string, LimitadorLimit[]>();
  const actions = new Map<string, ContributedAction[]>();
  for (const p of ctx.paths) {
    const byNs = new Map<string, { blocks: ConditionalData[]; sources: Set<string> }>();
    let auth = false;
    for (const r of p.result.rules.values()) {
      if (r.section !== 'limits') continue;
      const v = r.value as Limit;
      const namespace = counterNamespace(scopeOf(r), p, ctx.gateway);
      const key = limitKey(r, namespace, flavour.keyPrefix);
      const counters = (v.counters ?? []).map((c) => c.expression);
      const id = `${namespace}\u0000${key}`;
      if (!limits.has(id))
        limits.set(
          id,
          v.rates.map((rate, i) => ({
            namespace,
            max_value: rate.limit,
            seconds: windowSeconds(rate.window),
            conditions: [`${descriptor(key)} == "1"`],
            variables: counters.map(descriptor),
            name: `${r.name}${v.rates.length > 1 ? `[${i}]` : ''} from ${sourceText(r)}, scope ${scopeOf(r)}`,
          })),
        );
      const predicates = [...predicatesOf(r.context?.when), ...predicatesOf(v.when)];
      auth ||= readsAuth([...predicates, ...counters]);
      let a = byNs.get(namespace);
      if (!a) byNs.set(namespace, (a = { blocks: [], sources: new Set() }));
      a.sources.add(sourceId(r));
      a.blocks.push({
        ...(predicates.length ? { predicates } : {}),
        data: [
          { expression: { key, value: '1' } },
          ...counters.map((c) => ({ expression: { key: c, value: c } })),
        ],
      });
    }
    if (byNs.size === 0) continue;
    actions.set(
      pathKey(p.path),
      [...byNs.entries()].flatMap(([namespace, a]) =>
        flavour.actions(namespace, a.blocks).map((action) => ({
          phase: flavour.phase(auth),
          action: { ...action, sources: [...a.sources].sort() },
        })),
      ),
    );
  }
  const all = [...limits.values()]
    .flat()
    .sort((a, b) =>
      a.namespace !== b.namespace
        ? a.namespace < b.namespace
          ? -1
          : 1
        : a.name < b.name
          ? -1
          : a.name > b.name
            ? 1
            : 0,
    );
  return { limits: all, actions };
}

export const LIMITS_CONFIGMAP_PREFIX = REQUEST_LIMITS.configMapPrefix;

/** What a ConfigMap's data may take: under the 1 MiB the API server stores, with room for metadata. */
export const MAX_LIMITS_BYTES = 900_000;

const policyIdOf = sourceId;

/** The limits that fit, the policies left out, and the wasm-shim actions of what is published. */
function limitsPlan(ctx: RenderContext, flavour: LimitFlavour) {
  // Over the size the API server stores, the largest contributor's limits are left out (and said in
  // an annotation, so that policy alone is told), until the rest fits: one tenant's huge policy never
  // keeps the others' limits from being published.
  const refused: { policy: string; reason: string }[] = [];
  let view = ctx;
  let built = limitadorConfig(view, flavour);
  let data = { 'limits.yaml': toYaml(built.limits) };
  for (let guard = 0; guard < 64; guard++) {
    const size = Buffer.byteLength(data['limits.yaml']);
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
    built = limitadorConfig(view, flavour);
    data = { 'limits.yaml': toYaml(built.limits) };
  }
  return { built, data, refused };
}

/** aggregate hook: the limits of one gateway as published (what Limitador.spec.limits gathers). */
export function publishedLimits(ctx: RenderContext, flavour = REQUEST_LIMITS): LimitadorLimit[] {
  return limitsPlan(ctx, flavour).built.limits;
}

/** Every gateway's limits in one list (a limit two gateways share appears once), in a stable order. */
export function combineLimits(parts: unknown[][]): { spec: { limits: LimitadorLimit[] } } {
  const seen = new Map<string, LimitadorLimit>();
  for (const l of parts.flat() as LimitadorLimit[]) seen.set(JSON.stringify(l), l);
  return { spec: { limits: [...seen.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([, l]) => l) } };
}

/** actions hook: the rate-limit actions of every path, for the limits that are published. */
export function rateLimitActions(
  ctx: RenderContext,
  flavour = REQUEST_LIMITS,
): Map<string, ContributedAction[]> {
  return limitsPlan(ctx, flavour).built.actions;
}

/** render hook: one ConfigMap per gateway that has any effective limit. */
export function renderLimitador(ctx: RenderContext, flavour = REQUEST_LIMITS): RenderedObject[] {
  const { built, data, refused } = limitsPlan(ctx, flavour);
  if (built.limits.length === 0 && refused.length === 0) return [];
  // Limitador's namespace when configured (every gateway's limits there: the name carries the
  // gateway's namespace too), else beside the gateway. Names are valid for any gateway name (253
  // characters: hashed and cut); the gateway is in the annotation.
  const namespace = ctx.settings.limitadorNamespace || ctx.gateway.namespace;
  const beside = namespace === ctx.gateway.namespace;
  const name = beside
    ? objectName(`${flavour.configMapPrefix}${ctx.gateway.name}`)
    : objectName(`${flavour.configMapPrefix}${ctx.gateway.namespace}-${ctx.gateway.name}`, {
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
          'cascade.dev/policy-kind': flavour.kind,
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
