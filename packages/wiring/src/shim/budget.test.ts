// The configuration budget shared between namespaces (budget.ts, size.ts): a namespace within its
// share is never touched, the one over it loses its own largest routes, the build always ends within
// the limit, and when nothing fits every request is denied.

import type { RouteMatch } from '@cascade/core';
import { describe, expect, it } from 'vitest';
import { testWiringPath } from '../testing.ts';
import { fairShare, planRefusals } from './budget.ts';
import { traceRequest } from './request.ts';
import { buildWasmConfig, DEFAULT_WIRING, DENY_SCOPE } from './wasm.ts';

const path = (ns: string, name: string, matches: RouteMatch[], host = 'shared.example.com') =>
  testWiringPath(ns, name, matches, [host]);

const exact = (p: string): RouteMatch => ({ path: { type: 'Exact', value: p } });
const GET = (p: string) => ({ host: 'shared.example.com', method: 'GET', path: p });

describe('fair share', () => {
  it('water-filling: small namespaces keep all, the rest share what is left', () => {
    expect(fairShare([10, 40, 60], 100)).toBe(50);
    expect(fairShare([10, 20], 100)).toBe(Number.POSITIVE_INFINITY);
    expect(fairShare([300, 300, 300], 300)).toBe(100);
  });

  it('only the namespace over its share loses routes, largest first', () => {
    const plan = planRefusals(
      [
        { route: 'a/big', namespace: 'a', bytes: 500, sets: 5, hostnames: ['h'] },
        { route: 'a/mid', namespace: 'a', bytes: 200, sets: 2, hostnames: ['h'] },
        { route: 'a/small', namespace: 'a', bytes: 100, sets: 1, hostnames: ['h'] },
        { route: 'b/one', namespace: 'b', bytes: 300, sets: 3, hostnames: ['h'] },
      ],
      { bytes: 800, setsPerNamespace: 100, denyBytes: () => 50 },
    );
    // b's 300 is within the share (400); a has 500 left and loses only its largest route
    expect([...plan.keys()]).toEqual(['a/big']);
    expect(plan.get('a/big')).toMatch(/namespace a's action sets take 800 bytes, over its share of 500/);
  });

  it('a namespace over its set cap loses routes until it is within it', () => {
    const plan = planRefusals(
      [
        { route: 'a/1', namespace: 'a', bytes: 10, sets: 3, hostnames: ['h'] },
        { route: 'a/2', namespace: 'a', bytes: 20, sets: 3, hostnames: ['h'] },
      ],
      { bytes: 10_000, setsPerNamespace: 4, denyBytes: () => 1 },
    );
    expect([...plan.keys()]).toEqual(['a/2']);
    expect(plan.get('a/2')).toMatch(/6 action sets on this gateway, over the 4/);
  });
});

describe('building within the limit', () => {
  it('5,000 tenant routes cannot take a victim namespace down: it keeps its set, the loop ends', () => {
    const tenant = Array.from({ length: 5000 }, (_, i) =>
      path('tenant', `r${i}`, [exact(`/t/${'x'.repeat(80)}/${i}`)]),
    );
    const victim = path('shop', 'orders', [{ path: { type: 'PathPrefix', value: '/orders' } }]);
    const settings = { ...DEFAULT_WIRING, maxConfigBytes: 200_000 };
    const r = buildWasmConfig([...tenant, victim], settings);
    expect(r.bytes).toBeLessThanOrEqual(200_000);
    expect(r.failedClosed).toBeUndefined();
    expect(r.problems.some((p) => p.route.startsWith('HTTPRoute/shop/'))).toBe(false);
    expect(r.problems.length).toBeGreaterThan(0);
    expect(r.problems.every((p) => /namespace tenant/.test(p.reason))).toBe(true);
    expect(traceRequest(r.config, GET('/orders/1')).actions[0]?.scope).toBe('shop/orders');
    // a refused tenant route is denied, not served under another route's policy
    const refused = r.problems[0]!.route.split('/')[2]!;
    const i = Number(refused.slice(1));
    expect(traceRequest(r.config, GET(`/t/${'x'.repeat(80)}/${i}`)).actions[0]?.scope).toBe(DENY_SCOPE);
  });

  it('a refused route is denied at its own place: a catch-all of another namespace does not take its requests', () => {
    const many = Array.from({ length: 64 }, (_, i) => exact(`/big/${'y'.repeat(200)}/${i}`));
    const big = path('team-a', 'big', many);
    const catchAll = path('team-b', 'all', [{ path: { type: 'PathPrefix', value: '/' } }]);
    const r = buildWasmConfig([big, catchAll], { ...DEFAULT_WIRING, maxConfigBytes: 8_000 });
    expect(r.problems.map((p) => p.route)).toEqual(['HTTPRoute/team-a/big']);
    expect(traceRequest(r.config, GET(`/big/${'y'.repeat(200)}/3`)).actions[0]?.scope).toBe(DENY_SCOPE);
    expect(traceRequest(r.config, GET('/other')).actions[0]?.scope).toBe('team-b/all');
  });

  it('when nothing fits, every request is denied and the result says why', () => {
    const r = buildWasmConfig([path('a', 'r', [exact('/a')])], { ...DEFAULT_WIRING, maxConfigBytes: 300 });
    expect(r.failedClosed).toMatch(/every request is denied/);
    expect(r.config.actionSets).toHaveLength(1);
    expect(traceRequest(r.config, GET('/a')).actions[0]?.scope).toBe(DENY_SCOPE);
    expect(traceRequest(r.config, { ...GET('/a'), host: 'Any.Other' }).actions[0]?.scope).toBe(DENY_SCOPE);
  });
});
