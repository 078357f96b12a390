// @cascade/ratelimitpolicy: the RateLimitPolicy kind. See README.md.
export * from './kind.ts';
export { limitadorCrd } from './limitador-crd.ts';
export * from './render.ts';
