// TokenRateLimitPolicy: Kuadrant's shape accepted, defaults and overrides resolved by core's engine
// like every kind, and what it renders: Limitador limits keyed `tokenlimit.*` counted per route,
// and per path a check (0 hits, before the request) and a report (the response's tokens).
import { PolicyEngine, pathKey, renderContext, renderGateway } from '@cascade/core';
import { policy, standardEngine } from '@cascade/core/testing';
import { rateLimitActions, TOKEN_LIMITS, TOKENS_READ } from '@cascade/ratelimitpolicy';
import {
  buildWasmConfig,
  DEFAULT_WIRING,
  PHASE,
  RATELIMIT_CHECK_SERVICE,
  RATELIMIT_REPORT_SERVICE,
  traceRequest,
  type WasmAction,
} from '@cascade/wiring';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { tokenRateLimitPolicyKind } from './kind.ts';

const TRLP = { kind: 'TokenRateLimitPolicy' };
const route = { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'r1' };
const errorsOf = (spec: unknown) => {
  const e = new PolicyEngine(tokenRateLimitPolicyKind);
  e.upsertPolicy({ kind: 'TokenRateLimitPolicy', metadata: { namespace: 'app', name: 'p' }, spec });
  return e.policy('TokenRateLimitPolicy:app/p')!.errors;
};

const perUser = (limit: number, window = '1h') => ({
  rates: [{ limit, window }],
  counters: [{ expression: 'auth.identity.userid' }],
});

describe('TokenRateLimitPolicy', () => {
  it("accepts Kuadrant's v1alpha1 spec unchanged, and says what is wrong with a bad one", () => {
    expect(
      errorsOf({
        targetRef: route,
        limits: {
          free: {
            rates: [{ limit: 20000, window: '24h' }],
            when: [{ predicate: 'auth.identity.groups.split(",").exists(g, g == "free")' }],
            counters: [{ expression: 'auth.identity.userid' }],
          },
        },
      }),
    ).toEqual([]);
    expect(
      errorsOf({ targetRef: route, limits: { x: { rates: [{ limit: -1, window: '1h' }] } } })[0],
    ).toMatch(/spec\.limits\.x\.rates\.0\.limit/);
    expect(
      errorsOf({ targetRef: route, limits: { x: { rates: [{ limit: 1, window: 'a day' }] } } })[0],
    ).toMatch(/window: must be a duration/);
    expect(errorsOf({ targetRef: route, limits: { x: { rates: [] } } })[0]).toMatch(/spec\.limits\.x\.rates/);
  });

  it('a gateway default merged with a route policy: limits counted per route, check then report', () => {
    const e = standardEngine(
      [
        policy(
          'platform',
          'infra',
          { kind: 'Gateway', name: 'gw' },
          { defaults: { strategy: 'merge', limits: { all: perUser(100000, '24h') } } },
          TRLP,
        ),
        policy(
          'chat',
          'app',
          { kind: 'HTTPRoute', name: 'r1' },
          {
            limits: {
              gold: { ...perUser(5000), when: [{ predicate: "request.headers['x-plan'] == 'gold'" }] },
            },
          },
          TRLP,
        ),
      ],
      tokenRateLimitPolicyKind,
    );
    const objs = [...renderGateway(e, 'infra', 'gw', 'tokenratelimitpolicy-controller', 'uid-1').values()];
    expect(objs.map((o) => (o.metadata as { name: string }).name)).toEqual(['limitador-token-limits-gw']);
    const limits = parse((objs[0] as unknown as { data: Record<string, string> }).data['limits.yaml']!) as {
      namespace: string;
      max_value: number;
      seconds: number;
      conditions: string[];
      variables: string[];
    }[];
    const r1 = limits.filter((l) => l.namespace === 'app/r1');
    expect(r1.map((l) => [l.max_value, l.seconds]).sort()).toEqual([
      [100000, 86400],
      [5000, 3600],
    ]);
    for (const l of r1) {
      expect(l.conditions[0]).toMatch(/^descriptors\[0\]\["tokenlimit\.(all|gold)__[0-9a-f]{8}"\] == "1"$/);
      expect(l.variables).toEqual(['descriptors[0]["auth.identity.userid"]']);
    }
    const ctx = renderContext(e, 'infra', 'gw', 'tokenratelimitpolicy-controller')!;
    const byPath = rateLimitActions(ctx, TOKEN_LIMITS);
    const p = ctx.paths.find((x) => x.path.route.name === 'r1')!;
    const contributed = byPath.get(pathKey(p.path))!;
    // counters read auth.*: after auth, as kuadrant-operator orders them
    expect(contributed.map((c) => c.phase)).toEqual([PHASE.tokenLimitAfterAuth, PHASE.tokenLimitAfterAuth]);
    const [check, report] = contributed.map((c) => c.action as WasmAction);
    expect(check!.service).toBe(RATELIMIT_CHECK_SERVICE);
    expect(report!.service).toBe(RATELIMIT_REPORT_SERVICE);
    const hits = (a: WasmAction) =>
      a.conditionalData!.map(
        (b) => b.data.find((d) => d.expression.key === 'ratelimit.hits_addend')?.expression.value,
      );
    expect(hits(check!)).toEqual(['0', '0']);
    expect(hits(report!)).toEqual([TOKENS_READ, TOKENS_READ]);
    // the route's own `when` gates its limit only; the gateway default has none
    expect(report!.conditionalData!.map((b) => b.predicates ?? [])).toContainEqual([
      "request.headers['x-plan'] == 'gold'",
    ]);
  });

  it('a gateway constraint compares tokens per hour whatever the windows, and caps what is over', () => {
    const e = standardEngine(
      [
        policy(
          'cap',
          'infra',
          { kind: 'Gateway', name: 'gw' },
          {
            overrides: {
              strategy: 'merge',
              condition: "rule.value.rates.exists(r, ratePer(r, '1h') > 50000.0)",
              limits: { '*': { rates: [{ limit: 50000, window: '1h' }] } },
            },
          },
          TRLP,
        ),
        policy(
          'chat',
          'app',
          { kind: 'HTTPRoute', name: 'r1' },
          {
            limits: {
              // 2,000 a minute is 120,000 an hour: over the cap, which adds its 50,000 an hour beside it
              burst: { rates: [{ limit: 2000, window: '1m' }] },
              // 1,000,000 a day is 41,667 an hour: within the cap, kept
              daily: { rates: [{ limit: 1000000, window: '24h' }] },
            },
          },
          TRLP,
        ),
      ],
      tokenRateLimitPolicyKind,
    );
    const ctx = renderContext(e, 'infra', 'gw', 'tokenratelimitpolicy-controller')!;
    const p = ctx.paths.find((x) => x.path.route.name === 'r1')!;
    const rates = (name: string) =>
      (p.result.rules.get(`limits.${name}`)!.value as { rates: unknown[] }).rates;
    expect(rates('daily')).toEqual([{ limit: 1000000, window: '24h' }]);
    // the minute's rate stays (no window gets looser), the hour is capped
    expect(rates('burst')).toEqual([
      { limit: 2000, window: '1m' },
      { limit: 50000, window: '1h' },
    ]);
  });

  it('through wasm-shim: a gold user is checked on both limits and the response tokens reported to both', () => {
    const e = standardEngine(
      [
        policy(
          'chat',
          'app',
          { kind: 'HTTPRoute', name: 'r1' },
          {
            limits: {
              gold: {
                rates: [{ limit: 5000, window: '1h' }],
                counters: [{ expression: "request.headers['x-user']" }],
                when: [{ predicate: "request.headers['x-plan'] == 'gold'" }],
              },
              free: {
                rates: [{ limit: 500, window: '1h' }],
                counters: [{ expression: "request.headers['x-user']" }],
                when: [{ predicate: "request.headers['x-plan'] != 'gold'" }],
              },
            },
          },
          TRLP,
        ),
      ],
      tokenRateLimitPolicyKind,
    );
    const ctx = renderContext(e, 'infra', 'gw', 'tokenratelimitpolicy-controller')!;
    const byPath = rateLimitActions(ctx, TOKEN_LIMITS);
    const paths = ctx.paths.map((p) => ({
      path: p.path,
      hostnames: p.hostnames,
      route: e.topology.routes.get(`HTTPRoute/${p.path.route.namespace}/${p.path.route.name}`),
      actions: byPath.get(pathKey(p.path)) ?? [],
    }));
    const w = buildWasmConfig(paths as Parameters<typeof buildWasmConfig>[0], DEFAULT_WIRING);
    const t = traceRequest(w.config, {
      host: 'api.example.com',
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { 'x-user': 'alice', 'x-plan': 'gold' },
      response: {
        body: 'data: {"usage":{"total_tokens":1234}}\n\ndata: [DONE]\n\n',
        contentType: 'text/event-stream',
      },
    });
    expect(t.actions.map((a) => [a.type, a.run, a.hits])).toEqual([
      ['ratelimit-check', true, 0],
      ['ratelimit-report', true, 1234],
    ]);
    const keys = Object.keys(t.actions[1]!.descriptor!);
    expect(keys.filter((k) => k.startsWith('tokenlimit.gold'))).toHaveLength(1);
    expect(keys.filter((k) => k.startsWith('tokenlimit.free'))).toHaveLength(0);
  });
});
