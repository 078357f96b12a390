// TokenRateLimitPolicy (cascade.dev/v1alpha1): field-compatible with Kuadrant's v1alpha1
// TokenRateLimitPolicy (limits counted in the tokens an LLM backend reports in its response), plus the
// D/O extensions core provides (targetRefs, unset, condition) and the explicit counter scope of
// RateLimitPolicy. Resolved by core's engine like every kind; rendered for Limitador and wasm-shim by
// ratelimitpolicy's renderer with the token flavour (TOKEN_LIMITS: a check before the request with
// 0 hits, a report on the response with `usage.total_tokens`).
import { definePolicyKind, predicateIssues, predicateListSchema } from '@cascade/core';
import {
  clipLimit,
  effectiveLimit,
  limitSchema,
  rateLimitActions,
  ratePer,
  renderLimitador,
  TOKEN_LIMITS,
} from '@cascade/ratelimitpolicy';
import { z } from 'zod';

export const tokenRateLimitPolicyKind = definePolicyKind({
  group: 'cascade.dev',
  version: 'v1alpha1',
  kind: 'TokenRateLimitPolicy',
  plural: 'tokenratelimitpolicies',
  shortNames: ['trlp'],
  targetKinds: ['Gateway', 'HTTPRoute', 'GRPCRoute'],
  ruleSet: {
    limits: z.record(z.string().min(1).max(63), limitSchema).optional(),
    when: predicateListSchema.optional(),
  },
  // a constraint compares rates (tokens) per second, never raw numbers across windows
  sections: [{ name: 'limits', path: ['limits'], clip: clipLimit }],
  conditionFunctions: [{ signature: 'ratePer(map, string): double', impl: ratePer }],
  contextFields: ['when'],
  validate: (spec) => predicateIssues(spec),
  render: (ctx) => renderLimitador(ctx, TOKEN_LIMITS),
  actions: (ctx) => rateLimitActions(ctx, TOKEN_LIMITS),
  renders: [
    {
      group: '',
      version: 'v1',
      kind: 'ConfigMap',
      plural: 'configmaps',
      namespaceSetting: 'limitadorNamespace',
    },
  ],
  effectiveValue: (rule) => effectiveLimit(rule),
});
