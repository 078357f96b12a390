// @cascade/tokenratelimitpolicy: the TokenRateLimitPolicy kind (limits counted in LLM tokens). See README.md.
export { tokenRateLimitPolicyKind } from './kind.ts';
