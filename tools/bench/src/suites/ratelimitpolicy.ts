// RateLimitPolicy: resolution + Limitador rendering at 20,000 routes / 10,000 policies.
import type { PolicyObject } from '@cascade/core';
import { rateLimitPolicyKind } from '@cascade/ratelimitpolicy';
import { generateGatewayWorld } from '../gateway-topology.ts';
import { KIND_SCALE, runKind } from '../kinds-common.ts';
import type { Figure } from '../report.ts';

function bump(p: PolicyObject, n: number): PolicyObject {
  const spec = structuredClone(p.spec) as Record<string, Record<string, unknown>>;
  const block = (spec.overrides ?? spec.defaults ?? spec) as { limits: Record<string, unknown> };
  const first = Object.keys(block.limits)[0]!;
  block.limits[first] = { rates: [{ limit: 1 + n, window: '1m' }] };
  return { ...p, spec };
}

export async function run(): Promise<Figure[]> {
  return runKind('ratelimit', rateLimitPolicyKind, generateGatewayWorld(KIND_SCALE, 'RateLimitPolicy'), bump);
}
