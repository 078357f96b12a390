// @cascade/ratelimitpolicy: the RateLimitPolicy kind (its schema and what it renders for Limitador
// and the gateway's data plane), and the structural Limitador CRD its tests write against. See README.md.
export { rateLimitPolicyKind } from './kind.ts';
export { limitadorCrd } from './limitador-crd.ts';
