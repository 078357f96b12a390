// Test kinds and a small standard topology, for this package's tests and for dependants' tests.
// Not used by production code.
import { z } from 'zod';
import { definePolicyKind, type PolicyKind } from '../kind.ts';
import { PolicyEngine } from '../merge/engine.ts';
import type { PolicyObject } from '../merge/policy.ts';
import type { GatewayObject, RouteObject } from '../topology/types.ts';

const rate = z.strictObject({
  limit: z.number().int().positive(),
  window: z.string().regex(/^\d+(ms|s|m|h)$/),
});
const limit = z.strictObject({ rates: z.array(rate).min(1), counters: z.array(z.string()).optional() });

/** A rate-limit-shaped test kind: one section `limits`, request predicates in `when`. */
export const testLimitKind = definePolicyKind({
  group: 'test.cascade.dev',
  version: 'v1',
  kind: 'LimitPolicy',
  plural: 'limitpolicies',
  targetKinds: ['GatewayClass', 'Gateway', 'HTTPRoute', 'GRPCRoute'],
  ruleSet: { limits: z.record(z.string(), limit).optional(), when: z.array(z.string()).optional() },
  sections: [{ name: 'limits', path: ['limits'] }],
  contextFields: ['when'],
});

/** An auth-shaped test kind: two sections under `rules`. */
export const testAuthKind = definePolicyKind({
  group: 'test.cascade.dev',
  version: 'v1',
  kind: 'GuardPolicy',
  plural: 'guardpolicies',
  targetKinds: ['Gateway', 'HTTPRoute'],
  ruleSet: {
    rules: z
      .strictObject({
        authentication: z.record(z.string(), z.unknown()).optional(),
        authorization: z.record(z.string(), z.unknown()).optional(),
      })
      .optional(),
  },
  sections: [
    { name: 'authentication', path: ['rules', 'authentication'] },
    { name: 'authorization', path: ['rules', 'authorization'] },
  ],
});

/** `{ rates: [{ limit: n, window: '1m' }] }` */
export const L = (n: number) => ({ rates: [{ limit: n, window: '1m' }] });

export function policy(
  name: string,
  namespace: string,
  targetRef: { kind: string; name: string; sectionName?: string },
  spec: Record<string, unknown>,
  opts: { created?: string; kind?: string } = {},
): PolicyObject {
  return {
    kind: opts.kind ?? 'LimitPolicy',
    metadata: { name, namespace, ...(opts.created ? { creationTimestamp: opts.created } : {}) },
    spec: { targetRef: { group: 'gateway.networking.k8s.io', ...targetRef }, ...spec },
  };
}

/**
 * infra/gw (class gc) with listeners http (*.example.com) and admin (admin.example.com), infra/gw2
 * (class gc) with one listener; app/r1 (api.example.com; rules read, rule-2) on gw; app/r2 on gw and gw2;
 * app/r3 (no hostnames, one unnamed rule) on gw.
 */
export function standardTopology(): { gateways: GatewayObject[]; routes: RouteObject[] } {
  const all = { namespaces: { from: 'All' as const } };
  return {
    gateways: [
      {
        namespace: 'infra',
        name: 'gw',
        gatewayClassName: 'gc',
        listeners: [
          { name: 'http', hostname: '*.example.com', port: 80, protocol: 'HTTP', allowedRoutes: all },
          { name: 'admin', hostname: 'admin.example.com', port: 8080, protocol: 'HTTP', allowedRoutes: all },
        ],
      },
      {
        namespace: 'infra',
        name: 'gw2',
        gatewayClassName: 'gc',
        listeners: [{ name: 'web', port: 80, protocol: 'HTTP', allowedRoutes: all }],
      },
    ],
    routes: [
      {
        kind: 'HTTPRoute',
        namespace: 'app',
        name: 'r1',
        hostnames: ['api.example.com'],
        parentRefs: [{ name: 'gw', namespace: 'infra' }],
        rules: [{ name: 'read' }, {}],
      },
      {
        kind: 'HTTPRoute',
        namespace: 'app',
        name: 'r2',
        hostnames: ['shop.example.com'],
        parentRefs: [
          { name: 'gw', namespace: 'infra' },
          { name: 'gw2', namespace: 'infra' },
        ],
        rules: [{ name: 'main' }],
      },
      {
        kind: 'HTTPRoute',
        namespace: 'app',
        name: 'r3',
        parentRefs: [{ name: 'gw', namespace: 'infra' }],
        rules: [{}],
      },
    ],
  };
}

/** An engine over the standard topology (with GatewayClass gc) and the given policies, flushed. */
export function standardEngine(policies: PolicyObject[], kind: PolicyKind = testLimitKind): PolicyEngine {
  const e = new PolicyEngine(kind);
  e.upsertGatewayClass({ name: 'gc' });
  const t = standardTopology();
  for (const g of t.gateways) e.upsertGateway(g);
  for (const r of t.routes) e.upsertRoute(r);
  for (const p of policies) e.upsertPolicy(p);
  e.flush();
  return e;
}
