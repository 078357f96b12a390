// ratelimitpolicy-controller: publishes EffectivePolicies and status for RateLimitPolicy.
import { runPolicyController } from '@cascade/core';
import { rateLimitPolicyKind } from './kind.ts';

await runPolicyController(rateLimitPolicyKind, 'ratelimitpolicy-controller');
