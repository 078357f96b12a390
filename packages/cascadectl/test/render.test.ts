// cascadectl render on the example story: what the controllers publish, from the semantics.
import { resolve } from 'node:path';
import type { WasmConfig } from '@cascade/wiring';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { run } from './run.ts';

const GW = resolve(import.meta.dirname, '../../../examples/gateway');
type Obj = {
  kind: string;
  metadata: { name: string; namespace: string; annotations?: Record<string, string> };
  spec?: Record<string, Record<string, unknown>> & { hosts: string[] };
  data?: Record<string, string>;
};

describe('cascadectl render -o json on examples/gateway', async () => {
  const r = await run('render', GW, '-o', 'json');
  const objs = JSON.parse(r.stdout) as Obj[];
  /** The AuthConfig of a route (names carry a hash of route and gateway: found by the annotation). */
  const ac = (ns: string, route: string) =>
    objs.find(
      (o) =>
        o.kind === 'AuthConfig' &&
        o.metadata.namespace === ns &&
        o.metadata.annotations?.['cascade.dev/route'] === `HTTPRoute/${route}`,
    )!;

  it('one AuthConfig per route, placed where its Secret references resolve, one limits ConfigMap, the wiring', () => {
    expect(r.code).toBe(0);
    expect(
      objs.map(
        (o) =>
          `${o.kind} ${o.metadata.namespace}/${o.metadata.annotations?.['cascade.dev/route'] ?? o.metadata.name}`,
      ),
    ).toEqual([
      // team-b/c/d keep the platform's API-key rule: its Secrets are in infra, the example's
      // ReferenceGrant allows their routes to use them, so their AuthConfigs live in infra.
      'AuthConfig infra/HTTPRoute/team-d/admin',
      'AuthConfig infra/HTTPRoute/team-b/orders',
      'AuthConfig infra/HTTPRoute/team-c/status',
      // team-a replaced the API key by its own JWT: nothing to resolve elsewhere.
      'AuthConfig team-a/HTTPRoute/team-a/catalog',
      'ConfigMap infra/limitador-limits-main',
      // the gateway's wiring (its class is Istio's): the wasm-shim and the two service clusters
      'EnvoyFilter infra/cascade-main-auth',
      'EnvoyFilter infra/cascade-main-ratelimit',
      'WasmPlugin infra/cascade-main',
    ]);
    for (const o of objs.filter((x) => x.kind === 'AuthConfig'))
      expect(o.metadata.name).toMatch(/^[a-z0-9-]+-[0-9a-f]{10}$/);
  });

  it('AuthConfigs carry the effective rules only, with each rule where Authorino expects it', () => {
    const catalog = ac('team-a', 'team-a/catalog');
    expect(Object.keys(catalog.spec!.authentication!)).toEqual(['primary']);
    expect((catalog.spec!.authentication!.primary as { jwt: unknown }).jwt).toEqual({
      issuerUrl: 'https://sso.example.com/realms/catalog',
    });
    expect(Object.keys(catalog.spec!.authorization!)).toEqual(['deny-anonymous']);
    const admin = ac('infra', 'team-d/admin');
    // The override is still there (the unset was refused) and team-d's anonymous authenticator is
    // added (the platform's API key is a default; its deny-anonymous authorization override stays).
    expect(Object.keys(admin.spec!.authentication!).sort()).toEqual(['anonymous', 'primary']);
    expect(Object.keys(admin.spec!.authorization!)).toEqual(['deny-anonymous']);
    expect(admin.spec!.hosts[0]).toBe('admin.apps.example.com');
    expect(admin.metadata.annotations!['cascade.dev/refused-references']).toBeUndefined();
  });

  it('the Limitador limits: 100/min per route, team-b clipped to 1000/min (its 50000/h kept), team-c without', () => {
    const cm = objs.find((o) => o.kind === 'ConfigMap')!;
    expect(Object.keys(cm.data!)).toEqual(['limits.yaml']);
    const limits = parse(cm.data!['limits.yaml']!) as {
      namespace: string;
      max_value: number;
      seconds: number;
      variables: string[];
      name: string;
    }[];
    expect(limits.map((l) => [l.namespace, l.name, l.max_value, l.seconds])).toEqual([
      ['team-a/catalog', 'global from RateLimitPolicy infra/platform-limits (default), scope route', 100, 60],
      ['team-b/orders', 'global from RateLimitPolicy infra/platform-limits (default), scope route', 100, 60],
      [
        'team-b/orders',
        'per-user[0] from RateLimitPolicy infra/platform-cap (override), scope route',
        50000,
        3600,
      ],
      [
        'team-b/orders',
        'per-user[1] from RateLimitPolicy infra/platform-cap (override), scope route',
        1000,
        60,
      ],
      ['team-d/admin', 'global from RateLimitPolicy infra/platform-limits (default), scope route', 100, 60],
    ]);
    expect(limits[2]!.variables).toEqual(['descriptors[0]["auth.identity.userid"]']);
    expect(limits[3]!.variables).toEqual(['descriptors[0]["auth.identity.userid"]']);
  });

  it("the gateway's wasm-shim wiring: a WasmPlugin and two EnvoyFilters for the Istio class", () => {
    const plugin = objs.find((o) => o.kind === 'WasmPlugin') as unknown as {
      metadata: { namespace: string; name: string };
      spec: { targetRefs: unknown[]; phase: string; url: string; pluginConfig: WasmConfig };
    };
    expect(plugin.metadata).toMatchObject({ namespace: 'infra', name: 'cascade-main' });
    expect(plugin.spec).toMatchObject({
      targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'main' }],
      phase: 'STATS',
    });
    expect(plugin.spec.url).toMatch(/^oci:\/\/quay\.io\/kuadrant\/wasm-shim:/);
    expect(objs.filter((o) => o.kind === 'EnvoyFilter').map((o) => o.metadata.name)).toEqual([
      'cascade-main-auth',
      'cascade-main-ratelimit',
    ]);
    const config = plugin.spec.pluginConfig;
    expect(Object.keys(config.services)).toEqual(['auth-service', 'ratelimit-service']);
    // team-c/status has no limit: auth only; team-b/orders' limit reads auth.*: auth runs first
    const byRoute = (r: string) => config.actionSets.find((s) => s.name.startsWith(`HTTPRoute/${r}#`))!;
    expect(byRoute('team-c/status').actions.map((a) => a.service)).toEqual(['auth-service']);
    expect(byRoute('team-b/orders').actions.map((a) => a.service)).toEqual([
      'auth-service',
      'ratelimit-service',
    ]);
    expect(byRoute('team-a/catalog').actions.map((a) => a.service)).toEqual([
      'ratelimit-service',
      'auth-service',
    ]);
    const orders = byRoute('team-b/orders').actions[1]!;
    expect(orders.scope).toBe('team-b/orders');
    expect(orders.conditionalData!.map((b) => b.predicates ?? [])).toEqual([
      [],
      ['request.method == "POST"'],
    ]);
  });

  it('exits 2 on unknown flags', async () => {
    expect((await run('render', GW, '--nope')).code).toBe(2);
    expect((await run('render', GW, '-o', 'table')).code).toBe(2);
  });
});
