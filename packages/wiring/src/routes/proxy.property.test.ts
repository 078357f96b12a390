// The set wasm-shim runs belongs to the route the proxy routes to, for every request: generated
// gateways (listeners on one or two ports, with and without hostnames) shared by routes of several
// namespaces (HTTPRoutes and GRPCRoutes; hostnames with wildcards, every path and gRPC method match
// kind, methods, headers, query parameters, routes with and without policy), and requests over their
// hosts (any case), ports and paths (gRPC methods among them).
// Checked for both providers' precedence.

import type { PathRef, RouteMatch, RouteObject } from '@cascade/core';
import { pathHostnames } from '@cascade/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type HttpRequest, traceRequest } from '../shim/request.ts';
import {
  AUTH_SERVICE,
  buildWasmConfig,
  DEFAULT_WIRING,
  hasActions,
  isHostCaseGuard,
  type WiringPath,
} from '../shim/wasm.ts';
import type { Precedence } from './matches.ts';
import { proxyRoute } from './proxy.ts';

const HOSTS = [
  'shop.example.com',
  'ops.example.com',
  '*.example.com',
  'a.shop.example.com',
  '*.shop.example.com',
];
const PATHS = ['/', '/orders', '/orders/42', '/orders/42/items', '/admin', '/o', '/ordersx'];
const REGEXES = ['/', '.*', '/orders/[0-9]+', '/o.*', '/(admin|orders)', '/orders/.*'];

const arbMatch: fc.Arbitrary<RouteMatch | undefined> = fc.option(
  fc.record(
    {
      path: fc.oneof(
        fc.record({ type: fc.constant('Exact' as const), value: fc.constantFrom(...PATHS) }),
        fc.record({ type: fc.constant('PathPrefix' as const), value: fc.constantFrom(...PATHS, '/orders/') }),
        fc.record({ type: fc.constant('RegularExpression' as const), value: fc.constantFrom(...REGEXES) }),
      ),
      method: fc.constantFrom('GET', 'POST'),
      headers: fc.array(
        fc.oneof(
          fc.record({
            type: fc.constant('Exact' as const),
            name: fc.constantFrom('X-Env', 'x-tenant'),
            value: fc.constantFrom('prod', 't1'),
          }),
          fc.record({
            type: fc.constant('RegularExpression' as const),
            name: fc.constant('x-tenant'),
            value: fc.constantFrom('t.*', '.'),
          }),
        ),
        { maxLength: 2 },
      ),
      queryParams: fc.array(
        fc.record({
          type: fc.constantFrom('Exact' as const, 'RegularExpression' as const),
          name: fc.constant('v'),
          value: fc.constantFrom('1', '.*'),
        }),
        { maxLength: 1 },
      ),
    },
    { requiredKeys: [] },
  ),
  { nil: undefined },
);

interface Listener {
  name: string;
  port: number;
  hostname?: string;
}

const arbListeners: fc.Arbitrary<Listener[]> = fc
  .array(
    fc.record({
      port: fc.constantFrom(80, 8443),
      hostname: fc.option(fc.constantFrom(...HOSTS), { nil: undefined }),
    }),
    { minLength: 1, maxLength: 3 },
  )
  .map((ls) =>
    ls.map((l, i) => ({ name: `l${i}`, port: l.port, ...(l.hostname ? { hostname: l.hostname } : {}) })),
  );

/** A GRPCRoute match: the method (exact or regular expression, service and/or method) and headers. */
const arbGrpcMatch: fc.Arbitrary<RouteMatch | undefined> = fc.option(
  fc.record(
    {
      grpc: fc.oneof(
        fc.record(
          {
            type: fc.constant('Exact' as const),
            service: fc.constantFrom('shop.Orders', 'ops.Admin'),
            method: fc.constantFrom('Get', 'List'),
          },
          { requiredKeys: ['type'] },
        ),
        fc.record(
          {
            type: fc.constant('RegularExpression' as const),
            service: fc.constantFrom('shop\\..*', '.*\\.Admin', 'ops.Admin'),
            method: fc.constantFrom('Get', 'L.*'),
          },
          { requiredKeys: ['type'] },
        ),
      ),
      headers: fc.array(
        fc.record({
          type: fc.constant('Exact' as const),
          name: fc.constant('x-tenant'),
          value: fc.constantFrom('t1', 'tt'),
        }),
        { maxLength: 1 },
      ),
    },
    { requiredKeys: [] },
  ),
  { nil: undefined },
);

const arbRoute = fc.record({
  kind: fc.constantFrom('HTTPRoute' as const, 'HTTPRoute' as const, 'GRPCRoute' as const),
  namespace: fc.constantFrom('team-a', 'team-b', 'infra'),
  hostnames: fc.uniqueArray(fc.constantFrom(...HOSTS), { maxLength: 2 }),
  rules: fc.array(fc.array(arbMatch, { minLength: 1, maxLength: 2 }), { minLength: 1, maxLength: 2 }),
  grpcRules: fc.array(fc.array(arbGrpcMatch, { minLength: 1, maxLength: 2 }), { minLength: 1, maxLength: 2 }),
  listener: fc.option(fc.nat(2), { nil: undefined }),
  policy: fc.boolean(),
  age: fc.nat(3),
});

const arbRequest = fc.record({
  host: fc.constantFrom(
    'shop.example.com',
    'ops.example.com',
    'x.example.com',
    'a.shop.example.com',
    'b.shop.example.com',
    'SHOP.example.com',
    'Ops.Example.Com',
    'other.io',
  ),
  port: fc.constantFrom(80, 8443),
  path: fc.constantFrom(
    ...PATHS,
    '/orders/42?v=1',
    '/admin?v=2',
    '/shop.Orders/Get',
    '/shop.Orders/List',
    '/ops.Admin/Get',
    '/other.Svc/List',
  ),
  method: fc.constantFrom('GET', 'POST'),
  headers: fc.constantFrom<Record<string, string>>(
    {},
    { 'x-tenant': 't1' },
    { 'X-Env': 'prod', 'x-tenant': 'tt' },
  ),
});

type GenRoute = typeof arbRoute extends fc.Arbitrary<infer T> ? T : never;

/** The wiring paths the topology would give: each route through the listeners it attaches to. */
function wiringPaths(listeners: Listener[], routes: GenRoute[]): WiringPath[] {
  const out: WiringPath[] = [];
  routes.forEach((r, i) => {
    const name = `r${i}`;
    const rules = r.kind === 'GRPCRoute' ? r.grpcRules : r.rules;
    const route: RouteObject = {
      kind: r.kind,
      namespace: r.namespace,
      name,
      hostnames: r.hostnames,
      parentRefs: [{ name: 'gw' }],
      rules: rules.map((ms) =>
        ms[0] === undefined ? {} : { matches: ms.filter((m): m is RouteMatch => !!m) },
      ),
      createdAt: `2026-01-0${r.age + 1}T00:00:00Z`,
    };
    for (const l of listeners) {
      if (r.listener !== undefined && listeners[r.listener % listeners.length] !== l) continue;
      const hostnames = pathHostnames(l.hostname, r.hostnames);
      if (hostnames.length === 0) continue;
      rules.forEach((_, ri) => {
        const path: PathRef = {
          gatewayClass: 'c',
          gateway: { namespace: 'gw', name: 'gw' },
          listener: l.name,
          route: { kind: r.kind, namespace: r.namespace, name },
          rule: `rule-${ri + 1}`,
        };
        out.push({
          path,
          hostnames,
          route,
          port: l.port,
          actions: r.policy
            ? [{ phase: 200, action: { service: AUTH_SERVICE, scope: `${r.namespace}/${name}` } }]
            : [],
        });
      });
    }
  });
  return out;
}

function check(precedence: Precedence) {
  fc.assert(
    fc.property(
      arbListeners,
      fc.array(arbRoute, { minLength: 1, maxLength: 5 }),
      fc.array(arbRequest, { minLength: 1, maxLength: 12 }),
      (listeners, routes, requests) => {
        const paths = wiringPaths(listeners, routes);
        const { config, origins } = buildWasmConfig(paths, DEFAULT_WIRING, {
          precedence,
          ports: listeners.map((l) => l.port),
        });
        // without any action nothing is published: the proxy runs no wasm-shim
        if (!hasActions(config)) return;
        for (const r of requests) {
          // a request reaches the proxy only on a port it listens on
          if (!listeners.some((l) => l.port === r.port)) continue;
          const req: HttpRequest = { ...r };
          const t = traceRequest(config, req);
          const matched = t.matched ? config.actionSets.find((s) => s.name === t.matched) : undefined;
          const host = req.host.split(':')[0]!;
          if (host !== host.toLowerCase()) {
            // wasm-shim would look it up under another hostname: the guard denies it
            expect(matched && isHostCaseGuard(matched), `${req.host} meets the guard`).toBe(true);
            continue;
          }
          const proxy = proxyRoute(paths, req, precedence);
          const shim = t.matched ? origins[t.matched] : undefined;
          const msg = `${JSON.stringify(req)}: proxy ${JSON.stringify(proxy)}, wasm-shim ${t.matched}`;
          expect(shim ? `${shim.route}#${shim.rule}` : undefined, msg).toBe(
            proxy ? `${proxy.route}#${proxy.rule}` : undefined,
          );
        }
      },
    ),
    { numRuns: 400 },
  );
}

describe('wasm-shim picks the route the proxy picks', () => {
  it('Envoy Gateway precedence', () => check('envoy-gateway'));
  it('Istio precedence', () => check('istio'));
});
