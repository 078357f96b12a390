// Scale generator for the Gateway API side: gateways with listeners, routes with rules, and a mix of
// gateway-, listener-, route- and rule-level policies (defaults/overrides, atomic/merge, conditions).
import type { GatewayObject, PolicyObject, RouteObject } from '@cascade/core';

export interface GatewayScale {
  gateways: number;
  listenersPerGateway: number;
  routes: number;
  rulesPerRoute: number;
  policies: number;
}

export interface GatewayWorld {
  gateways: GatewayObject[];
  routes: RouteObject[];
  policies: PolicyObject[];
}

/** Deterministic PRNG (mulberry32) so every run measures the same input. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const limit = (n: number) => ({ rates: [{ limit: n, window: '1m' }] });

export function generateGatewayWorld(scale: GatewayScale, kind = 'RateLimitPolicy', seed = 42): GatewayWorld {
  const rand = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const gateways: GatewayObject[] = [];
  for (let g = 0; g < scale.gateways; g++) {
    gateways.push({
      namespace: `infra-${g % 20}`,
      name: `gw-${g}`,
      gatewayClassName: 'cascade',
      listeners: Array.from({ length: scale.listenersPerGateway }, (_, l) => ({
        name: `l${l}`,
        hostname: `*.l${l}.g${g}.example.com`,
        port: 443,
        protocol: 'HTTPS',
        allowedRoutes: { namespaces: { from: 'All' as const } },
      })),
    });
  }
  const routes: RouteObject[] = [];
  for (let r = 0; r < scale.routes; r++) {
    const g = gateways[r % scale.gateways]!;
    const l = (r >> 3) % scale.listenersPerGateway;
    routes.push({
      kind: 'HTTPRoute',
      namespace: `team-${r % 200}`,
      name: `route-${r}`,
      hostnames: [`app${r}.l${l}.g${r % scale.gateways}.example.com`],
      parentRefs: [{ namespace: g.namespace, name: g.name }],
      rules: Array.from({ length: scale.rulesPerRoute }, (_, i) => (i === 0 ? { name: 'main' } : {})),
    });
  }
  const policies: PolicyObject[] = [];
  const gwPolicies = Math.round(scale.policies * 0.1);
  const t0 = Date.parse('2026-01-01T00:00:00Z');
  const stamp = (i: number) => new Date(t0 + i * 1000).toISOString();
  for (let i = 0; i < gwPolicies; i++) {
    const g = gateways[i % scale.gateways]!;
    const listenerLevel = i % 5 === 4;
    const strategy = pick(['atomic', 'merge'] as const);
    const block = { strategy, limits: { global: limit(1000 + i), [`gw-${i}`]: limit(500) } };
    const spec =
      i % 3 === 0
        ? {
            overrides: {
              ...block,
              strategy: 'merge',
              condition: "'per-user' in self.limits && self.limits['per-user'].rates[0].limit > 1000",
              limits: { 'per-user': limit(1000) },
            },
          }
        : i % 3 === 1
          ? { defaults: block }
          : {
              overrides: { ...block, limits: { [`gw-${i}`]: limit(100) } },
              defaults: { strategy: 'merge', limits: { global: limit(2000) } },
            };
    policies.push({
      kind,
      metadata: { namespace: g.namespace, name: `gw-policy-${i}`, creationTimestamp: stamp(i) },
      spec: {
        targetRef: {
          group: 'gateway.networking.k8s.io',
          kind: 'Gateway',
          name: g.name,
          ...(listenerLevel ? { sectionName: `l${i % scale.listenersPerGateway}` } : {}),
        },
        ...spec,
      },
    });
  }
  for (let i = 0; i < scale.policies - gwPolicies; i++) {
    const route = routes[i % scale.routes]!;
    const ruleLevel = i % 10 === 9;
    const strategy = pick(['atomic', 'merge'] as const);
    const own = { 'per-user': limit(100 + (i % 2000)), [`r-${i}`]: limit(10) };
    const spec =
      i % 4 === 0
        ? { defaults: { strategy, limits: own } }
        : i % 4 === 1
          ? { limits: own, unset: ['global'] }
          : { limits: own };
    policies.push({
      kind,
      metadata: {
        namespace: route.namespace,
        name: `route-policy-${i}`,
        creationTimestamp: stamp(gwPolicies + i),
      },
      spec: {
        targetRef: {
          group: 'gateway.networking.k8s.io',
          kind: 'HTTPRoute',
          name: route.name,
          ...(ruleLevel ? { sectionName: 'main' } : {}),
        },
        ...spec,
      },
    });
  }
  return { gateways, routes, policies };
}

/** The policy with its first limit (in its defaults, overrides or bare rules) set to 1 + n per minute. */
export function bumpFirstLimit(p: PolicyObject, n: number): PolicyObject {
  const spec = structuredClone(p.spec) as Record<string, Record<string, unknown>>;
  const block = (spec.overrides ?? spec.defaults ?? spec) as { limits: Record<string, unknown> };
  const first = Object.keys(block.limits)[0]!;
  block.limits[first] = { rates: [{ limit: 1 + n, window: '1m' }] };
  return { ...p, spec };
}
