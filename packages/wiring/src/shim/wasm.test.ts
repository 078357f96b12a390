// The wasm-shim wiring from its semantics: match predicates as Gateway API means them, precedence,
// fail-closed refusals, and the request evaluator that `cascadectl request` and the Kuadrant
// compatibility tests rely on.

import type { RouteMatch } from '@cascade/core';
import { describe, expect, it } from 'vitest';
import { compareCandidates, type MatchCandidate, matchPredicates } from '../routes/matches.ts';
import { testWiringPath } from '../testing.ts';
import { traceRequest } from './request.ts';
import { type ActionSet, buildWasmConfig, DEFAULT_WIRING, DENY_SCOPE, isHostCaseGuard } from './wasm.ts';

/** The first action's scope of every set but the host-case guards. */
const scopes = (sets: ActionSet[]) => sets.filter((s) => !isHostCaseGuard(s)).map((s) => s.actions[0]?.scope);

const holds = (
  predicates: string[],
  req: { path: string; method?: string; headers?: Record<string, string> },
) => {
  const config = buildWasmConfig([wiringPath('r', 'rule-1', [{}], 'h.io')]).config;
  // one set with exactly these predicates
  config.actionSets[0]!.routeRuleConditions.predicates = predicates;
  return (
    traceRequest(config, {
      host: 'h.io',
      method: req.method ?? 'GET',
      path: req.path,
      headers: req.headers ?? {},
    }).matched !== undefined
  );
};

/** A route `ns/<name>` of one rule on `host`, its auth action scoped `<name>.auth`. */
const wiringPath = (name: string, _rule: string, matches: (RouteMatch | undefined)[], host: string) =>
  testWiringPath('ns', name, matches[0] === undefined ? undefined : (matches as RouteMatch[]), [host], {
    scope: `${name}.auth`,
  });

describe('match predicates', () => {
  it('PathPrefix matches element by element (Gateway API), Exact exactly, regex with RE2', () => {
    const prefix = matchPredicates('HTTPRoute', { path: { type: 'PathPrefix', value: '/v1/' } });
    expect(holds(prefix, { path: '/v1' })).toBe(true);
    expect(holds(prefix, { path: '/v1/x?q=1' })).toBe(true);
    expect(holds(prefix, { path: '/v1x' })).toBe(false);
    const exact = matchPredicates('HTTPRoute', { path: { type: 'Exact', value: '/health' } });
    expect(holds(exact, { path: '/health?x' })).toBe(true);
    expect(holds(exact, { path: '/health/' })).toBe(false);
    const re = matchPredicates('HTTPRoute', { path: { type: 'RegularExpression', value: '^/v2/[a-z]+$' } });
    expect(holds(re, { path: '/v2/abc' })).toBe(true);
    expect(holds(re, { path: '/v2/ABC' })).toBe(false);
  });

  it('methods, headers (case-insensitive names, missing = no match, never an error) and query parameters', () => {
    const p = matchPredicates('HTTPRoute', {
      method: 'POST',
      headers: [
        { type: 'Exact', name: 'X-Env', value: 'prod' },
        { type: 'RegularExpression', name: 'x-tenant', value: '^t-[0-9]+$' },
      ],
      queryParams: [{ type: 'Exact', name: 'debug', value: 'true' }],
    });
    const ok = { path: '/a?debug=true', method: 'POST', headers: { 'x-env': 'prod', 'X-Tenant': 't-42' } };
    expect(holds(p, ok)).toBe(true);
    expect(holds(p, { ...ok, method: 'GET' })).toBe(false);
    expect(holds(p, { ...ok, headers: { 'x-env': 'prod' } })).toBe(false);
    expect(holds(p, { ...ok, headers: { 'x-env': 'prod', 'x-tenant': 't-x' } })).toBe(false);
    expect(holds(p, { ...ok, path: '/a?debug=false' })).toBe(false);
    expect(holds(p, { ...ok, path: '/a' })).toBe(false);
  });

  it('quotes every value: a value cannot escape its string literal', () => {
    const p = matchPredicates('HTTPRoute', { path: { type: 'Exact', value: "/a' || true || '" } });
    expect(holds(p, { path: '/b' })).toBe(false);
    expect(holds(p, { path: "/a' || true || '" })).toBe(true);
  });

  it('gRPC method matches are paths /service/method', () => {
    const both = matchPredicates('GRPCRoute', { grpc: { type: 'Exact', service: 'pkg.Svc', method: 'Get' } });
    expect(both).toEqual(["request.url_path == '/pkg.Svc/Get'"]);
    expect(matchPredicates('GRPCRoute', { grpc: { type: 'Exact', service: 'pkg.Svc' } })).toEqual([
      "request.url_path.startsWith('/pkg.Svc/')",
    ]);
    expect(matchPredicates('GRPCRoute', undefined)).toEqual([]);
  });
});

describe('match precedence', () => {
  const c = (over: Partial<MatchCandidate>): MatchCandidate => ({
    hostname: 'a.io',
    routeKind: 'HTTPRoute',
    routeNamespace: 'ns',
    routeName: 'r',
    ruleIndex: 0,
    matchIndex: 0,
    match: undefined,
    ...over,
  });
  it('exact hostname, then Exact path, longer prefix, method, headers, query, older route, name', () => {
    const order = [
      c({ hostname: '*.io' }),
      c({ match: { path: { type: 'PathPrefix', value: '/a' } } }),
      c({ match: { path: { type: 'PathPrefix', value: '/a/b' } } }),
      c({ match: { path: { type: 'Exact', value: '/a' } } }),
      c({ match: { path: { type: 'PathPrefix', value: '/a' }, method: 'GET' } }),
      c({
        match: {
          path: { type: 'PathPrefix', value: '/a' },
          method: 'GET',
          headers: [{ type: 'Exact', name: 'x', value: '1' }],
        },
      }),
      c({
        routeName: 'old',
        routeCreatedAt: '2020-01-01T00:00:00Z',
        match: { path: { type: 'PathPrefix', value: '/a' } },
      }),
    ].sort(compareCandidates);
    expect(order.map((x) => `${x.hostname} ${x.routeName} ${JSON.stringify(x.match ?? {})}`)).toEqual([
      'a.io r {"path":{"type":"Exact","value":"/a"}}',
      'a.io r {"path":{"type":"PathPrefix","value":"/a/b"}}',
      'a.io r {"path":{"type":"PathPrefix","value":"/a"},"method":"GET","headers":[{"type":"Exact","name":"x","value":"1"}]}',
      'a.io r {"path":{"type":"PathPrefix","value":"/a"},"method":"GET"}',
      'a.io old {"path":{"type":"PathPrefix","value":"/a"}}',
      'a.io r {"path":{"type":"PathPrefix","value":"/a"}}',
      '*.io r {}',
    ]);
  });
});

describe('wasm-shim configuration', () => {
  it('a route whose regex RE2 cannot compile is denied alone, after every other set of its hostname', () => {
    const bad = wiringPath(
      'bad',
      'rule-1',
      [{ path: { type: 'RegularExpression', value: '^/(a)\\1$' } }],
      'h.io',
    );
    const good = wiringPath('good', 'rule-1', [{ path: { type: 'PathPrefix', value: '/g' } }], 'h.io');
    const { config, problems } = buildWasmConfig([bad, good]);
    expect(problems).toHaveLength(1);
    expect(problems[0]!.route).toBe('HTTPRoute/ns/bad');
    expect(problems[0]!.reason).toMatch(/path\.value .* its requests are denied/);
    expect(scopes(config.actionSets)).toEqual(['good.auth', DENY_SCOPE]);
    // its requests meet the deny set; the good route keeps working
    expect(traceRequest(config, { host: 'h.io', method: 'GET', path: '/aa' }).actions[0]!.scope).toBe(
      DENY_SCOPE,
    );
    expect(traceRequest(config, { host: 'h.io', method: 'GET', path: '/g/1' }).actions[0]!.scope).toBe(
      'good.auth',
    );
  });

  it('over the size limit, the largest route is refused (denied) and the others are kept', () => {
    const many = Array.from({ length: 64 }, (_, i) => ({
      path: { type: 'Exact' as const, value: `/p/${'x'.repeat(200)}/${i}` },
    }));
    const big = wiringPath('big', 'rule-1', many, 'h.io');
    const small = wiringPath('small', 'rule-1', [{ path: { type: 'PathPrefix', value: '/s' } }], 'h.io');
    const { config, problems, bytes } = buildWasmConfig([big, small], {
      ...DEFAULT_WIRING,
      maxConfigBytes: 5_000,
    });
    expect(bytes).toBeLessThanOrEqual(5_000);
    expect(problems.map((p) => p.route)).toEqual(['HTTPRoute/ns/big']);
    // the deny set stands where the refused route's sets stood (its Exact paths rank first), with
    // their common prefix: the big route's requests are denied, the small route keeps its set
    expect(scopes(config.actionSets)).toEqual([DENY_SCOPE, 'small.auth']);
    const get = (path: string) =>
      traceRequest(config, { host: 'h.io', method: 'GET', path }).actions[0]?.scope;
    expect(get(`/p/${'x'.repeat(200)}/7`)).toBe(DENY_SCOPE);
    expect(get('/s/1')).toBe('small.auth');
  });

  it('the longest matching hostname decides, as in wasm-shim; no fallback to a wildcard', () => {
    const exact = wiringPath(
      'exact',
      'rule-1',
      [{ path: { type: 'PathPrefix', value: '/only' } }],
      'a.example.com',
    );
    const wild = wiringPath('wild', 'rule-1', [undefined], '*.example.com');
    const { config } = buildWasmConfig([exact, wild]);
    expect(
      traceRequest(config, { host: 'a.example.com', method: 'GET', path: '/only' }).actions[0]!.scope,
    ).toBe('exact.auth');
    const t = traceRequest(config, { host: 'a.example.com:8080', method: 'GET', path: '/other' });
    expect(t.matched).toBeUndefined();
    // the wildcard's set is named as not met because the more specific hostname is used
    expect(
      t.sets.filter((s) => !s.name.startsWith('cascade:host-case')).map((s) => s.result.outcome),
    ).toEqual(['predicate-false', 'other-hostname']);
    expect(traceRequest(config, { host: 'b.example.com', method: 'GET', path: '/x' }).actions[0]!.scope).toBe(
      'wild.auth',
    );
    expect(traceRequest(config, { host: 'example.com', method: 'GET', path: '/x' }).matched).toBeUndefined();
  });
});
