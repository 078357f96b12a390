// A configuration split over WasmPlugins acts as the whole: for generated gateways (routes of several
// namespaces under exact and wildcard hostnames, `*` now and then, with and without policy) and
// requests over their hosts (any case) and paths, the sets the shards run are exactly the one the
// whole configuration runs (a host-case denial may come from several shards: each is the same deny).
import type { RouteMatch } from '@cascade/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WIRING_FLAGS, wiringFlags } from '../controller/flags.ts';
import { testWiringPath } from '../testing.ts';
import { traceRequest } from './request.ts';
import { hostnameGroups, MAX_SHARDS, shardConfig, shardCount } from './shards.ts';
import { buildWasmConfig, DEFAULT_WIRING, hasActions, isHostCaseGuard, type WasmConfig } from './wasm.ts';

const HOSTS = [
  'shop.example.com',
  'ops.example.com',
  '*.example.com',
  'a.shop.example.com',
  '*.shop.example.com',
  'other.org',
  '*.other.org',
  'api.other.org',
  'solo.net',
  'x.solo.net',
];
const REQUEST_HOSTS = [
  ...HOSTS.filter((h) => !h.startsWith('*')),
  'b.shop.example.com',
  'z.example.com',
  'deep.a.other.org',
  'Shop.example.com',
  'OPS.EXAMPLE.COM',
  'unknown.io',
  'y.solo.net',
];
const PATHS = ['/', '/orders', '/orders/42', '/admin', '/o'];

const arbRoute = fc.record({
  hostnames: fc.uniqueArray(
    fc.oneof(
      { weight: 30, arbitrary: fc.constantFrom(...HOSTS) },
      { weight: 1, arbitrary: fc.constant('*') },
    ),
    {
      minLength: 1,
      maxLength: 3,
    },
  ),
  prefix: fc.option(fc.constantFrom(...PATHS), { nil: undefined }),
  policy: fc.boolean(),
  ns: fc.constantFrom('a', 'b', 'c'),
});

interface GenRoute {
  hostnames: string[];
  prefix: string | undefined;
  policy: boolean;
  ns: string;
}

function build(routes: GenRoute[]): { config: WasmConfig; bytes: number } {
  const paths = routes.map((r, i) =>
    testWiringPath(
      r.ns,
      `r${i}`,
      r.prefix ? [{ path: { type: 'PathPrefix', value: r.prefix } } as RouteMatch] : undefined,
      r.hostnames,
      { policy: r.policy, createdAt: `2026-01-01T00:00:${String(i).padStart(2, '0')}Z` },
    ),
  );
  const w = buildWasmConfig(paths, DEFAULT_WIRING, { precedence: 'istio' });
  return { config: w.config, bytes: w.bytes };
}

/** The set a configuration runs for a request, when it does something. */
const acting = (config: WasmConfig, host: string, path: string) => {
  const t = traceRequest(config, { host, method: 'GET', path, headers: {} });
  const set = config.actionSets.find((s) => s.name === t.matched);
  return set && set.actions.length > 0 ? set : undefined;
};

describe('shards', () => {
  it('run exactly the set the whole configuration runs, for every request', () => {
    fc.assert(
      fc.property(
        fc.array(arbRoute, { minLength: 1, maxLength: 14 }),
        fc.array(fc.tuple(fc.constantFrom(...REQUEST_HOSTS), fc.constantFrom(...PATHS)), {
          minLength: 1,
          maxLength: 12,
        }),
        (routes, requests) => {
          const { config, bytes } = build(routes);
          // split as far as it goes: every group a shard of its own where the hash allows
          const shards = shardConfig(config, { ...DEFAULT_WIRING, shardBytes: 1 }, bytes);
          // a configuration without actions is not published at all (hasActions)
          const published = hasActions(config);
          for (const [host, path] of requests) {
            const whole = published ? acting(config, host, path) : undefined;
            const parts = shards.map((s) => acting(s.config, host, path)).filter((s) => s !== undefined);
            if (whole && isHostCaseGuard(whole)) {
              expect(parts.length).toBeGreaterThan(0);
              for (const p of parts) expect(isHostCaseGuard(p)).toBe(true);
            } else expect(parts.map((p) => p.name)).toEqual(whole ? [whole.name] : []);
          }
        },
      ),
      { numRuns: 400 },
    );
  });

  it('keep the order of the whole and leave out shards with nothing to do', () => {
    const { config, bytes } = build(
      HOSTS.map((h, i) => ({ hostnames: [h], prefix: '/o', policy: i % 3 !== 0, ns: 'a' })),
    );
    const shards = shardConfig(config, { ...DEFAULT_WIRING, shardBytes: 1 }, bytes);
    expect(shards.length).toBeGreaterThan(1);
    const order = config.actionSets.map((s) => s.name);
    for (const s of shards) {
      const names = s.config.actionSets.map((x) => x.name);
      expect(names).toEqual(order.filter((n) => names.includes(n)));
      expect(s.config.actionSets.some((x) => x.actions.length > 0 && !isHostCaseGuard(x))).toBe(true);
      expect(s.count).toBe(shards[0]!.count);
    }
    // every set but the `*` guard is in exactly one shard
    const placed = shards.flatMap((s) => s.config.actionSets.map((x) => x.name));
    for (const s of config.actionSets)
      if (!(isHostCaseGuard(s) && s.routeRuleConditions.hostnames[0] === '*'))
        expect(placed.filter((n) => n === s.name).length).toBeLessThanOrEqual(1);
  });

  it('a route under `*` keeps the configuration whole; a small one is not split', () => {
    const star = build([
      { hostnames: ['*'], prefix: '/', policy: true, ns: 'a' },
      { hostnames: ['shop.example.com'], prefix: '/', policy: true, ns: 'b' },
      { hostnames: ['solo.net'], prefix: '/', policy: true, ns: 'c' },
    ]);
    expect(shardConfig(star.config, { ...DEFAULT_WIRING, shardBytes: 1 }, star.bytes)).toHaveLength(1);
    const small = build([{ hostnames: ['solo.net'], prefix: '/', policy: true, ns: 'a' }]);
    const [only] = shardConfig(small.config, DEFAULT_WIRING, small.bytes);
    expect(only!.config).toBe(small.config);
    expect(only!.count).toBe(1);
  });

  it('a route change rewrites only its own shard', () => {
    const routes = HOSTS.filter((h) => !h.startsWith('*')).map((h, i) => ({
      hostnames: [h],
      prefix: PATHS[i % PATHS.length],
      policy: true,
      ns: 'a',
    }));
    const before = build(routes);
    const changed = routes.map((r, i) => (i === 2 ? { ...r, prefix: '/admin' as string | undefined } : r));
    const after = build(changed);
    const settings = { ...DEFAULT_WIRING, shardBytes: 1 };
    const a = shardConfig(before.config, settings, before.bytes);
    const b = shardConfig(after.config, settings, after.bytes);
    expect(b.map((s) => s.index)).toEqual(a.map((s) => s.index));
    const differ = a.filter((s, i) => JSON.stringify(s.config) !== JSON.stringify(b[i]!.config));
    expect(differ).toHaveLength(1);
  });

  it('groups hostnames that one host can match, and counts shards by size', () => {
    const g = hostnameGroups(['a.x.io', '*.x.io', 'b.x.io', 'y.io', '*.z.io', 'q.r.z.io']);
    expect(g.get('a.x.io')).toBe('*.x.io');
    expect(g.get('b.x.io')).toBe('*.x.io');
    expect(g.get('y.io')).toBe('y.io');
    expect(g.get('q.r.z.io')).toBe('*.z.io');
    expect(new Set(hostnameGroups(['a.io', '*', 'b.io']).values())).toEqual(new Set(['*']));
    expect(shardCount(60_000, 65_536)).toBe(1);
    expect(shardCount(560_000, 65_536)).toBe(16);
    expect(shardCount(50_000_000, 65_536)).toBe(MAX_SHARDS);
    expect(shardCount(560_000, 0)).toBe(1);
  });

  it('--wasm-shard-bytes: 0 never splits; a bad value names the flag', () => {
    const defaults = Object.fromEntries(Object.entries(WIRING_FLAGS).map(([k, v]) => [k, v.default]));
    const ok = wiringFlags(defaults);
    expect('error' in ok ? -1 : ok.wiring.shardBytes).toBe(65_536);
    const off = wiringFlags({ ...defaults, 'wasm-shard-bytes': '0' });
    expect('error' in off ? -1 : off.wiring.shardBytes).toBe(0);
    expect(wiringFlags({ ...defaults, 'wasm-shard-bytes': '500' })).toEqual({
      error: '--wasm-shard-bytes: "500" is not 0 or a whole number from 10000 to 1400000',
    });
  });
});
