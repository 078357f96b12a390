// @cascade/ratelimitpolicy: the RateLimitPolicy kind (its schema and what it renders for Limitador
// and the gateway's data plane), and the structural Limitador CRD its tests write against. See README.md.
// what TokenRateLimitPolicy shares: the limit's schema, rates and the Limitador rendering (flavoured)
export { LIMIT_KIND_PARTS, limitSchema, rateLimitPolicyKind, WINDOW_PATTERN } from './kind.ts';
export { limitadorCrd } from './limitador-crd.ts';
export { clipLimit, ratePer, windowSeconds } from './rates.ts';
export {
  combineLimits,
  effectiveLimit,
  type LimitFlavour,
  publishedLimits,
  rateLimitActions,
  renderLimitador,
  TOKEN_LIMITS,
  TOKENS_READ,
} from './render.ts';
