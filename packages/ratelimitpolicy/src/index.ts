// @cascade/ratelimitpolicy: the RateLimitPolicy kind. See README.md.
export * from './kind.ts';
export * from './render.ts';
