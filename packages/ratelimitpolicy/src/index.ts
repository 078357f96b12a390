// @cascade/ratelimitpolicy: the RateLimitPolicy kind. See README.md.
export * from './kind.ts';
