// The tenant attacks on a shared Gateway (issue 40): each one a request the proxy sends to one
// route while wasm-shim ran another route's set. Every test failed before the fix.
import { describe, expect, it } from 'vitest';
import { type HttpRequest, traceRequest } from '../shim/request.ts';
import { buildWasmConfig, DEFAULT_WIRING, DENY_SCOPE, type WiringPath } from '../shim/wasm.ts';
import { testWiringPath } from '../testing.ts';
import type { Precedence } from './matches.ts';
import { proxyRoute } from './proxy.ts';

const path = testWiringPath;

/** The auth scope wasm-shim sends for the request and the route the proxy picks. */
function outcome(paths: WiringPath[], req: HttpRequest, precedence: Precedence = 'envoy-gateway') {
  const ports = [...new Set(paths.flatMap((p) => (p.port === undefined ? [] : [p.port])))];
  const { config, origins } = buildWasmConfig(paths, DEFAULT_WIRING, { precedence, ports });
  const t = traceRequest(config, req);
  return {
    scope: t.actions.find((a) => a.type === 'auth')?.scope,
    set: t.matched ? origins[t.matched]?.route : undefined,
    proxy: proxyRoute(paths, req, precedence)?.route,
  };
}

const GET = (host: string, p: string, port?: number): HttpRequest => ({
  host,
  method: 'GET',
  path: p,
  ...(port ? { port } : {}),
});

describe('a tenant cannot take another route’s requests', () => {
  const victim = path(
    'shop',
    'orders',
    [{ path: { type: 'PathPrefix', value: '/orders' } }],
    ['shop.example.com'],
  );

  it('an unanchored regular expression matches the whole path, as Envoy’s does', () => {
    const tenant = path(
      'tenant',
      'grab',
      [{ path: { type: 'RegularExpression', value: '/' } }],
      ['shop.example.com'],
    );
    const o = outcome([victim, tenant], GET('shop.example.com', '/orders/42'));
    expect(o).toEqual({ scope: 'shop/orders', set: 'HTTPRoute/shop/orders', proxy: 'HTTPRoute/shop/orders' });
    // and a header regex `.` no longer holds for any value
    const hdr = path(
      'tenant',
      'hdr',
      [{ headers: [{ type: 'RegularExpression', name: 'x-a', value: '.' }] }],
      ['shop.example.com'],
    );
    expect(
      outcome([victim, hdr], { ...GET('shop.example.com', '/orders/1'), headers: { 'x-a': 'abc' } }).set,
    ).toBe('HTTPRoute/shop/orders');
  });

  it('the order is the provider’s: Istio tries prefixes before regular expressions', () => {
    const tenant = path(
      'tenant',
      'grab',
      [{ path: { type: 'RegularExpression', value: '/orders/.*' } }],
      ['shop.example.com'],
    );
    const istio = outcome([victim, tenant], GET('shop.example.com', '/orders/42'), 'istio');
    expect(istio).toEqual({
      scope: 'shop/orders',
      set: 'HTTPRoute/shop/orders',
      proxy: 'HTTPRoute/shop/orders',
    });
    // Envoy Gateway tries regular expressions first: its proxy does send this request to the tenant
    const eg = outcome([victim, tenant], GET('shop.example.com', '/orders/42'), 'envoy-gateway');
    expect(eg.set).toBe('HTTPRoute/tenant/grab');
    expect(eg.proxy).toBe('HTTPRoute/tenant/grab');
  });

  it('listeners on other ports: a hostname claimed on :80 does not take :8443’s requests', () => {
    const admin = path('infra', 'admin', undefined, ['*'], { listener: 'admin', port: 8443 });
    const tenant = path('tenant', 'claim', undefined, ['ops.example.com'], { port: 80 });
    const o = outcome([admin, tenant], GET('ops.example.com:8443', '/', 8443));
    expect(o).toEqual({ scope: 'infra/admin', set: 'HTTPRoute/infra/admin', proxy: 'HTTPRoute/infra/admin' });
    expect(outcome([admin, tenant], GET('ops.example.com', '/', 80)).set).toBe('HTTPRoute/tenant/claim');
  });

  it('a host in capitals is denied, not let past its policies', () => {
    const wild = path('tenant', 'wild', undefined, ['*.example.com'], { policy: false });
    for (const host of ['SHOP.example.com', 'Shop.Example.Com', 'shop.example.COM'])
      expect(outcome([victim, wild], GET(host, '/orders/1')).scope, host).toBe(DENY_SCOPE);
    expect(outcome([victim, wild], GET('shop.example.com', '/orders/1')).scope).toBe('shop/orders');
  });

  it('a route without policy gets an empty set: another tenant’s catch-all does not apply to it', () => {
    const free = path(
      'team-b',
      'public',
      [{ path: { type: 'PathPrefix', value: '/public' } }],
      ['shop.example.com'],
      {
        policy: false,
      },
    );
    const catchAll = path('team-a', 'all', undefined, ['shop.example.com']);
    const o = outcome([free, catchAll], GET('shop.example.com', '/public/x'));
    expect(o).toEqual({ scope: undefined, set: 'HTTPRoute/team-b/public', proxy: 'HTTPRoute/team-b/public' });
  });
});
