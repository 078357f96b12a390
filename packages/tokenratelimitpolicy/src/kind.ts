// TokenRateLimitPolicy (cascade.dev/v1alpha1): field-compatible with Kuadrant's v1alpha1
// TokenRateLimitPolicy (limits counted in the tokens an LLM backend reports in its response), plus the
// D/O extensions core provides (targetRefs, unset, condition) and the explicit counter scope of
// RateLimitPolicy. Resolved by core's engine like every kind; rendered for Limitador and wasm-shim by
// ratelimitpolicy's renderer with the token flavour (TOKEN_LIMITS: a check before the request with
// 0 hits, a report on the response with `usage.total_tokens`).
import { definePolicyKind } from '@cascade/core';
import { LIMIT_KIND_PARTS, rateLimitActions, renderLimitador, TOKEN_LIMITS } from '@cascade/ratelimitpolicy';

export const tokenRateLimitPolicyKind = definePolicyKind({
  group: 'cascade.dev',
  version: 'v1alpha1',
  kind: 'TokenRateLimitPolicy',
  plural: 'tokenratelimitpolicies',
  shortNames: ['trlp'],
  // RateLimitPolicy's schema, constraints (tokens per second, whatever the windows), checks and
  // ConfigMaps in Limitador's namespace
  ...LIMIT_KIND_PARTS,
  render: (ctx) => renderLimitador(ctx, TOKEN_LIMITS),
  actions: (ctx) => rateLimitActions(ctx, TOKEN_LIMITS),
});
