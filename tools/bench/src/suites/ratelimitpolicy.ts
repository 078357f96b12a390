// RateLimitPolicy: resolution + Limitador rendering at 20,000 routes / 10,000 policies.
import { rateLimitPolicyKind } from '@cascade/ratelimitpolicy';
import { bumpFirstLimit, generateGatewayWorld } from '../gateway-topology.ts';
import { KIND_SCALE, runKind } from '../kinds-common.ts';
import type { Figure } from '../report.ts';

const bump = bumpFirstLimit;

export async function run(): Promise<Figure[]> {
  return runKind(
    'ratelimitpolicy',
    rateLimitPolicyKind,
    generateGatewayWorld(KIND_SCALE, 'RateLimitPolicy'),
    bump,
  );
}
