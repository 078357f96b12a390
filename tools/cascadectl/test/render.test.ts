// cascadectl render on the example story: what the controllers publish, from the semantics.
import { resolve } from 'node:path';
import { type ActionGroup, expandActions } from '@cascade/ratelimitpolicy';
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

  it('one AuthConfig per route, placed where its Secret references resolve, and one limits ConfigMap', () => {
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

  it('the Limitador limits: 100/min per gateway, team-b clipped to 1000/min per route, team-c without', () => {
    const cm = objs.find((o) => o.kind === 'ConfigMap')!;
    const limits = parse(cm.data!['limits.yaml']!) as {
      max_value: number;
      seconds: number;
      variables: string[];
      name: string;
    }[];
    expect(limits.map((l) => [l.name, l.max_value, l.seconds])).toEqual([
      ['global from RateLimitPolicy infra/platform-limits (default), scope gateway', 100, 60],
      ['per-user from RateLimitPolicy infra/platform-cap (override), scope route', 1000, 60],
    ]);
    expect(limits[1]!.variables).toEqual([
      'descriptors[0]["auth.identity.userid"]',
      'descriptors[0]["cascade.route"]',
    ]);
    const actions = expandActions(parse(cm.data!['actions.yaml']!) as ActionGroup[]);
    // Grouped in the ConfigMap: the three routes with only the gateway's limit share one entry.
    expect((parse(cm.data!['actions.yaml']!) as ActionGroup[]).length).toBe(2);
    expect(actions.map((a) => a.route)).not.toContain('HTTPRoute/team-c/status');
    const orders = actions.find((a) => a.route === 'HTTPRoute/team-b/orders')!;
    expect(orders.actions.map((a) => a.predicates)).toEqual([[], ['request.method == "POST"']]);
  });

  it('exits 2 on unknown flags', async () => {
    expect((await run('render', GW, '--nope')).code).toBe(2);
    expect((await run('render', GW, '-o', 'table')).code).toBe(2);
  });
});
