import { PolicyEngine } from '@cascade/core';
import { describe, expect, it } from 'vitest';
import { rateLimitPolicyKind, windowSeconds } from './kind.ts';

const route = { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'r' };
const errorsOf = (spec: unknown) => {
  const e = new PolicyEngine(rateLimitPolicyKind);
  e.upsertPolicy({ kind: 'RateLimitPolicy', metadata: { namespace: 'ns', name: 'p' }, spec });
  return e.policy('RateLimitPolicy:ns/p')!.errors;
};

describe('RateLimitPolicy schema', () => {
  it('accepts a Kuadrant v1 manifest spec unchanged', () => {
    expect(
      errorsOf({
        targetRef: route,
        defaults: {
          strategy: 'merge',
          when: [{ predicate: 'request.path != "/health"' }],
          limits: {
            'per-user': {
              rates: [
                { limit: 50, window: '1m' },
                { limit: 1000, window: '1h30m' },
              ],
              counters: [{ expression: 'auth.identity.username' }],
              when: [{ predicate: 'request.method == "GET"' }],
            },
          },
        },
      }),
    ).toEqual([]);
  });

  it.each([
    [
      { targetRef: route, limits: { x: { rates: [{ limit: 1, window: '1 minute' }] } } },
      'spec.limits.x.rates.0.window: must be a duration like 1m, 30s, 1h30m or 500ms',
    ],
    [
      { targetRef: route, limits: { x: { rates: [] } } },
      'spec.limits.x.rates: Too small: expected array to have >=1 items',
    ],
    [
      {
        targetRef: route,
        limits: { x: { rates: [{ limit: 1, window: '1m' }], when: [{ predicate: 'request.method ==' }] } },
      },
      'spec.limits.x.when[0].predicate: CEL does not parse',
    ],
    [
      // a counter is a whole CEL expression: one that closes what the typed message builder opened
      // around it (to add or hide other policies' descriptor entries) does not parse alone
      {
        targetRef: route,
        limits: {
          x: {
            rates: [{ limit: 1, window: '1m' }],
            counters: [
              {
                expression:
                  'request.path) }] : []) + ((true) ? [envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry { key: "limit.other", value: string(1',
              },
            ],
          },
        },
      },
      'spec.limits.x.counters[0].expression: CEL does not parse',
    ],
    [
      { targetRef: { ...route, kind: 'Service' }, limits: {} },
      'spec.targetRef.kind: RateLimitPolicy cannot target Service',
    ],
    [
      { targetRef: route, limits: { x: { rates: [{ limit: 1, window: '1m' }], scope: 'cluster' } } },
      'spec.limits.x.scope: Invalid option',
    ],
  ])('rejects %j', (spec, message) => {
    expect(errorsOf(spec).join('\n')).toContain(message);
  });
});

describe('windowSeconds', () => {
  it.each([
    ['1m', 60],
    ['30s', 30],
    ['1h30m', 5400],
    ['500ms', 1],
    ['1500ms', 2],
    ['2h', 7200],
  ])('%s = %d s', (w, s) => expect(windowSeconds(w)).toBe(s));
});
