// RateLimitPolicy (cascade.dev/v1alpha1): field-compatible with Kuadrant's v1 RateLimitPolicy, plus
// the D/O extensions core provides (targetRefs, unset, condition) and an explicit counter scope.
import { celFieldIssues, definePolicyKind, type EffectiveRule, predicateListSchema } from '@cascade/core';
import { z } from 'zod';
import { clipLimit, ratePer } from './rates.ts';
import {
  combineLimits,
  effectiveLimit,
  publishedLimits,
  rateLimitActions,
  renderLimitador,
} from './render.ts';

/** Kuadrant's duration format: up to four number+unit groups, e.g. `1m`, `1h30m`, `500ms`. */
export const WINDOW_PATTERN = /^([0-9]{1,5}(h|m|s|ms)){1,4}$/;

export const rateSchema = z.strictObject({
  limit: z
    .number()
    .int()
    .min(0)
    .max(2 ** 31 - 1),
  window: z.string().regex(WINDOW_PATTERN, 'must be a duration like 1m, 30s, 1h30m or 500ms'),
});

export const counterSchema = z.strictObject({ expression: z.string().min(1).max(1024) });

/**
 * Where one counter is kept. By default every limit counts per route (`route`), whatever the level of
 * the policy that wrote it, as kuadrant-operator counts (a gateway default of 100/min gives each
 * route its own 100/min). `gateway` keeps one counter for every route of the gateway, `shared` one for
 * every gateway the limit reaches. The resolved scope is shown in the effective policy.
 */
export const scopeSchema = z.enum(['route', 'gateway', 'shared']);

export const limitSchema = z.strictObject({
  rates: z.array(rateSchema).min(1).max(16),
  counters: z.array(counterSchema).max(16).optional(),
  when: predicateListSchema.optional(),
  scope: scopeSchema.optional(),
});
export type Limit = z.infer<typeof limitSchema>;

/**
 * What every kind of limits shares (RateLimitPolicy, TokenRateLimitPolicy): targets, the rule set
 * (`limits` and a top-level `when`), constraints on normalized rates, the predicates' checks, and
 * the Limitador ConfigMaps they render.
 */
export const LIMIT_KIND_PARTS = {
  targetKinds: ['Gateway', 'HTTPRoute', 'GRPCRoute'],
  ruleSet: {
    limits: z.record(z.string().min(1).max(63), limitSchema).optional(),
    when: predicateListSchema.optional(),
  },
  // a constraint compares rates per second, never raw numbers across windows (rates.ts)
  sections: [{ name: 'limits', path: ['limits'], clip: clipLimit }],
  conditionFunctions: [{ signature: 'ratePer(map, string): double', impl: ratePer }],
  contextFields: ['when'],
  // predicates and counters are CEL: each must be a whole expression (wasm-shim's typed form places
  // counters inside its message builders, beside other policies' entries)
  validate: (spec: unknown) => celFieldIssues(spec, ['predicate', 'expression']),
  effectiveValue: (rule: EffectiveRule) => effectiveLimit(rule),
  // Limitador reads its limits in its own namespace (as in Kuadrant): with the setting, every
  // ConfigMap goes there and the controller may write ConfigMaps there only
  renders: [
    {
      group: '',
      version: 'v1',
      kind: 'ConfigMap',
      plural: 'configmaps',
      namespaceSetting: 'limitadorNamespace',
    },
  ],
} as const;

export const rateLimitPolicyKind = definePolicyKind({
  group: 'cascade.dev',
  version: 'v1alpha1',
  kind: 'RateLimitPolicy',
  plural: 'ratelimitpolicies',
  shortNames: ['rlp'],
  ...LIMIT_KIND_PARTS,
  render: (ctx) => renderLimitador(ctx),
  actions: (ctx) => rateLimitActions(ctx),
  // limitador-operator's Limitador CR (--limitador-cr NAME, in Limitador's namespace): its spec.limits
  // gets every gateway's limits, beside the ConfigMaps
  aggregate: {
    resource: {
      group: 'limitador.kuadrant.io',
      version: 'v1alpha1',
      kind: 'Limitador',
      plural: 'limitadors',
    },
    nameSetting: 'limitadorCr',
    namespaceSetting: 'limitadorNamespace',
    part: (ctx) => publishedLimits(ctx),
    combine: (parts) => combineLimits(parts),
    // limitador-operator reports status.conditions Ready
    ready: (live) => {
      const c = (
        live.status as { conditions?: { type: string; status: string }[] } | undefined
      )?.conditions?.find((x) => x.type === 'Ready');
      return c ? c.status === 'True' : undefined;
    },
  },
});

export { windowSeconds } from './rates.ts';
