// Both controllers at once against a real kube-apiserver, on the example story (examples/gateway):
// EffectivePolicies, policy status, <Kind>Affected on targets, Authorino AuthConfigs and the Limitador
// ConfigMap; then a policy edited, a route deleted, a gateway deleted: everything converges, nothing is
// left behind. Then 200 invalid policies next to valid ones: each gets a precise answer (rejected by
// the API server with the field named, or Accepted=False with the reason), the valid ones stay
// Enforced, no controller restarts.
import { resolve } from 'node:path';
import { effectivePolicyCrd, type PolicyController, policyCrd } from '@cascade/core';
import {
  createGateway,
  createObjects,
  createRoute,
  readObjects,
  startController,
} from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { rateLimitPolicyKind } from '@cascade/ratelimitpolicy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authConfigCrd } from './authconfig-crd.ts';
import { authPolicyKind } from './kind.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../../examples/gateway');
type Obj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [k: string]: unknown };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  data?: Record<string, string>;
};
type Cond = { type: string; status: string; reason: string; message: string };

describe.skipIf(!apiServerTestsEnabled())(
  'AuthPolicy and RateLimitPolicy controllers on the example story',
  () => {
    let env: Envtest;
    const controllers: PolicyController[] = [];
    const get = async (path: string) => {
      const r = await env.call('GET', path);
      return r.status === 200 ? (r.body as Obj) : undefined;
    };
    const list = async (path: string) => ((await env.call('GET', path)).body as { items: Obj[] }).items;
    const managed = (plural: string, api: string) =>
      list(`${api}/${plural}?labelSelector=${encodeURIComponent('cascade.dev/managed-by')}`);
    const EP = '/apis/cascade.dev/v1alpha1/namespaces';
    const conds = (o: Obj | undefined) =>
      ((o?.status as { conditions?: Cond[] } | undefined)?.conditions ?? []) as Cond[];

    beforeAll(async () => {
      env = await Envtest.start({
        crdObjects: [
          effectivePolicyCrd,
          policyCrd(authPolicyKind),
          policyCrd(rateLimitPolicyKind),
          authConfigCrd,
        ],
      });
      await createObjects(env, readObjects(EXAMPLES));
      for (const kind of [authPolicyKind, rateLimitPolicyKind])
        controllers.push(await startController(env, kind));
    }, 120_000);
    afterAll(async () => {
      for (const c of controllers) await c.stop().catch(() => {});
      await env?.stop();
    });

    it('publishes EffectivePolicies, status, Affected conditions, AuthConfigs and the Limitador ConfigMap', async () => {
      // RateLimitPolicy on team-b/orders: team-b's 5000/min clipped to the platform cap, counted per route.
      const orders = await waitFor('orders EffectivePolicy', async () => {
        const o = await get(`${EP}/team-b/effectivepolicies/ratelimitpolicy-httproute-orders`);
        return o && JSON.stringify(o.spec).includes('per-user') ? o : undefined;
      });
      const rules = (
        orders.spec!.paths as {
          rules: Record<string, { value: Record<string, unknown>; source: { name: string } }>;
        }[]
      )[0]!.rules;
      expect(rules['limits.per-user']!.value).toMatchObject({
        rates: [
          { limit: 50000, window: '1h' },
          { limit: 1000, window: '1m' },
        ],
        scope: 'route',
      });
      // a gateway default counts per route too (kuadrant-operator's counting)
      expect(rules['limits.global']!.value).toMatchObject({
        rates: [{ limit: 100, window: '1m' }],
        scope: 'route',
      });
      // AuthPolicy on team-a/catalog: its own JWT replaces the default API key; the override stays.
      const catalog = await waitFor('catalog EffectivePolicy', () =>
        get(`${EP}/team-a/effectivepolicies/authpolicy-httproute-catalog`),
      );
      const arules = (
        catalog.spec!.paths as { rules: Record<string, { source: { name: string }; as: string }> }[]
      )[0]!.rules;
      expect(arules['authentication.primary']).toMatchObject({
        source: { name: 'catalog-jwt' },
        as: 'intent',
      });
      expect(arules['authorization.deny-anonymous']).toMatchObject({
        source: { name: 'platform-auth' },
        as: 'override',
      });

      // Status: the refused unset is named on the policy that tried it.
      const adminOpen = await waitFor('admin-open status', async () => {
        const o = await get(`${EP}/team-d/authpolicies/admin-open`);
        return conds(o).some((c) => c.type === 'Enforced') ? o : undefined;
      });
      expect(conds(adminOpen).find((c) => c.type === 'Enforced')!.message).toContain(
        'unset of authorization.deny-anonymous refused: an override of infra/platform-auth cannot be unset',
      );
      const perUser = await waitFor('orders-per-user status', async () => {
        const o = await get(`${EP}/team-b/ratelimitpolicies/orders-per-user`);
        return conds(o).some((c) => c.type === 'Enforced') ? o : undefined;
      });
      expect(conds(perUser).find((c) => c.type === 'Enforced')).toMatchObject({
        status: 'True',
        reason: 'PartiallyEnforced',
        message: expect.stringContaining(
          'limits.per-user (clipped) by infra/platform-cap (routes team-b/orders)',
        ),
      });

      // <Kind>Affected: on the Gateway (both kinds, merged) and in our entry of each route's status.parents.
      const gw = await waitFor('gateway Affected conditions', async () => {
        const o = await get('/apis/gateway.networking.k8s.io/v1/namespaces/infra/gateways/main');
        const types = conds(o).map((c) => c.type);
        return types.includes('AuthPolicyAffected') && types.includes('RateLimitPolicyAffected')
          ? o
          : undefined;
      });
      for (const t of ['AuthPolicyAffected', 'RateLimitPolicyAffected'])
        expect(conds(gw).find((c) => c.type === t)).toMatchObject({ status: 'True', reason: 'Affected' });
      // The CRD's own default conditions (Accepted/Programmed: Pending) are still there: nothing clobbered.
      expect(conds(gw).some((c) => c.type === 'Accepted')).toBe(true);
      const ordersRoute = await waitFor('orders route Affected', async () => {
        const o = await get('/apis/gateway.networking.k8s.io/v1/namespaces/team-b/httproutes/orders');
        const parents =
          (o?.status as { parents?: { controllerName: string; conditions: Cond[] }[] })?.parents ?? [];
        return parents.some((p) => p.conditions.some((c) => c.type === 'RateLimitPolicyAffected'))
          ? parents
          : undefined;
      });
      const ours = ordersRoute.find((p) => p.controllerName === 'cascade.dev/policy-controller')!;
      // its own policy and the gateway's that reach it, both named (as AuthPolicyAffected does below)
      await waitFor('orders route RateLimitPolicyAffected naming both', async () => {
        const o = await get('/apis/gateway.networking.k8s.io/v1/namespaces/team-b/httproutes/orders');
        const c = (
          (o?.status as { parents?: { controllerName: string; conditions: Cond[] }[] })?.parents ?? []
        )
          .find((p) => p.controllerName === 'cascade.dev/policy-controller')
          ?.conditions.find((x) => x.type === 'RateLimitPolicyAffected');
        return c?.message ===
          'The object is affected by RateLimitPolicy team-b/orders-per-user and by infra/platform-cap, infra/platform-limits (inherited)'
          ? c
          : undefined;
      });
      expect(ours.conditions.find((c) => c.type === 'RateLimitPolicyAffected')).toMatchObject({
        status: 'True',
        reason: 'Affected',
      });
      // team-b has no AuthPolicy of its own, but the platform's gateway-level AuthPolicy reaches its
      // route: the route is affected by it (inherited).
      await waitFor('orders route AuthPolicyAffected (inherited)', async () => {
        const o = await get('/apis/gateway.networking.k8s.io/v1/namespaces/team-b/httproutes/orders');
        const parents =
          (o?.status as { parents?: { controllerName: string; conditions: Cond[] }[] })?.parents ?? [];
        const c = parents
          .find((p) => p.controllerName === 'cascade.dev/policy-controller')
          ?.conditions.find((x) => x.type === 'AuthPolicyAffected');
        return c?.status === 'True' && /platform-auth.*\(inherited\)/.test(c.message) ? c : undefined;
      });

      // AuthConfigs: team-a's own JWT in team-a; the routes that carry the platform's API-key rule in
      // infra (where its Secrets are; the example's ReferenceGrant allows it).
      const acs = await waitFor('AuthConfigs', async () => {
        const l = await managed('authconfigs', '/apis/authorino.kuadrant.io/v1beta3');
        return l.length === 4 ? l : undefined;
      });
      expect(
        acs.map((a) => `${a.metadata.namespace}/${a.metadata.name.replace(/-[0-9a-f]{10}$/, '')}`).sort(),
      ).toEqual(['infra/admin-main', 'infra/orders-main', 'infra/status-main', 'team-a/catalog-main']);
      const catalogAc = acs.find((a) => a.metadata.name.startsWith('catalog-main-'))!;
      expect(catalogAc.spec!.hosts).toEqual([
        'catalog.apps.example.com',
        expect.stringMatching(/^[0-9a-f]{20}\.authconfig\.cascade\.internal$/),
      ]);
      expect(Object.keys(catalogAc.spec!.authentication as object)).toEqual(['primary']);
      // Limitador: one ConfigMap for the gateway.
      const cm = await waitFor('limits ConfigMap', () =>
        get('/api/v1/namespaces/infra/configmaps/limitador-limits-main'),
      );
      expect(cm.data!['limits.yaml']).toContain('max_value: 1000');
      expect(cm.data!['limits.yaml']).toContain(
        'name: global from RateLimitPolicy infra/platform-limits (default), scope route',
      );
    });

    it('Enforced waits for Authorino: an AuthConfig reported not ready makes its policies Pending, naming it', async () => {
      const catalogAc = async () =>
        (await managed('authconfigs', '/apis/authorino.kuadrant.io/v1beta3')).find(
          (a) =>
            (a.metadata.annotations as Record<string, string> | undefined)?.['cascade.dev/route'] ===
            'HTTPRoute/team-a/catalog',
        )!;
      const setReady = async (ready: boolean) => {
        const ac = await catalogAc();
        const path = `/apis/authorino.kuadrant.io/v1beta3/namespaces/${ac.metadata.namespace}/authconfigs/${ac.metadata.name}/status`;
        const r = await env.call('PUT', path, { ...ac, status: { summary: { ready, hostsReady: [] } } });
        expect(r.status).toBe(200);
        return ac;
      };
      const enforced = async () =>
        conds(await get(`${EP}/team-a/authpolicies/catalog-jwt`)).find((c) => c.type === 'Enforced');
      const ac = await setReady(false);
      const pending = await waitFor('catalog-jwt Pending', async () => {
        const c = await enforced();
        return c?.reason === 'Pending' ? c : undefined;
      });
      expect(pending.status).toBe('False');
      expect(pending.message).toContain(`AuthConfig ${ac.metadata.namespace}/${ac.metadata.name}`);
      await setReady(true);
      await waitFor('catalog-jwt Enforced again', async () =>
        (await enforced())?.status === 'True' ? true : undefined,
      );
    });

    it('a policy edit, a route deletion and a gateway deletion converge with nothing left behind', async () => {
      const path = `${EP}/team-b/ratelimitpolicies/orders-per-user`;
      const cur = (await get(path))!;
      const spec = JSON.parse(JSON.stringify(cur.spec).replace('"limit":5000', '"limit":500'));
      expect((await env.call('PUT', path, { ...cur, spec })).status).toBe(200);
      await waitFor('orders limit 500, now team-b intent', async () => {
        const o = await get(`${EP}/team-b/effectivepolicies/ratelimitpolicy-httproute-orders`);
        return JSON.stringify(o?.spec).includes('"limit":500') ? o : undefined;
      });
      await waitFor('ConfigMap has 500', async () => {
        const o = await get('/api/v1/namespaces/infra/configmaps/limitador-limits-main');
        return o?.data?.['limits.yaml']?.includes('max_value: 500') ? o : undefined;
      });

      expect(
        (await env.call('DELETE', '/apis/gateway.networking.k8s.io/v1/namespaces/team-c/httproutes/status'))
          .status,
      ).toBe(200);
      await waitFor('status route objects gone', async () => {
        const ep = await get(`${EP}/team-c/effectivepolicies/ratelimitpolicy-httproute-status`);
        const ac = (await managed('authconfigs', '/apis/authorino.kuadrant.io/v1beta3')).find(
          (a) =>
            (a.metadata.annotations as Record<string, string> | undefined)?.['cascade.dev/route'] ===
            'HTTPRoute/team-c/status',
        );
        return !ep && !ac ? true : undefined;
      });
      // team-c's policy lost its target.
      await waitFor('status-unlimited TargetNotFound', async () => {
        const o = await get(`${EP}/team-c/ratelimitpolicies/status-unlimited`);
        return conds(o).some((c) => c.type === 'Accepted' && c.reason === 'TargetNotFound') ? o : undefined;
      });

      expect(
        (await env.call('DELETE', '/apis/gateway.networking.k8s.io/v1/namespaces/infra/gateways/main'))
          .status,
      ).toBe(200);
      await waitFor('everything we published is gone', async () => {
        const eps = await managed('effectivepolicies', '/apis/cascade.dev/v1alpha1');
        const acs = await managed('authconfigs', '/apis/authorino.kuadrant.io/v1beta3');
        const cms = await managed('configmaps', '/api/v1');
        return eps.length + acs.length + cms.length === 0 ? true : undefined;
      });
      for (const c of controllers) {
        await c.idle();
        expect(c.ready).toBe(true);
      }
    }, 60_000);

    it('200 invalid policies next to valid ones: each gets a precise answer, valid RateLimitPolicies stay Enforced, invalid AuthPolicies close their routes in every view', async () => {
      const G = 'gateway.networking.k8s.io';
      await createGateway(env, { namespace: 'bulk' });
      for (let i = 0; i < 10; i++)
        await createRoute(env, { namespace: 'bulk', name: `r${i}`, rules: [{ name: 'main' }] });
      const route = (i: number) => ({ group: G, kind: 'HTTPRoute', name: `r${i % 10}` });
      const limit = (n: number) => ({ rates: [{ limit: n, window: '1m' }] });
      const RLP = { kind: 'RateLimitPolicy', plural: 'ratelimitpolicies' };
      const AP = { kind: 'AuthPolicy', plural: 'authpolicies' };
      type Case = { k: typeof RLP; name: string; spec: unknown; rejected?: RegExp; invalid?: RegExp };
      const cases: Case[] = [];
      for (let i = 0; i < 60; i++)
        cases.push({
          k: i % 2 ? RLP : AP,
          name: `wrong-kind-${i}`,
          spec: {
            targetRef: { group: '', kind: 'Service', name: 'svc' },
            ...(i % 2
              ? { limits: { a: limit(1) } }
              : { rules: { authentication: { a: { anonymous: {} } } } }),
          },
          invalid: /spec\.targetRef\.kind: (RateLimitPolicy|AuthPolicy) cannot target Service \(group ""\)/,
        });
      for (let i = 0; i < 60; i++)
        cases.push({
          k: RLP,
          name: `bad-cel-${i}`,
          spec: {
            targetRef: route(i),
            limits: { a: { ...limit(1), when: [{ predicate: `request.method == ${i} ==` }] } },
          },
          invalid: /spec\.limits\.a\.when\[0\]\.predicate: /,
        });
      for (let i = 0; i < 50; i++)
        cases.push({
          k: i % 2 ? RLP : AP,
          name: `conflicting-${i}`,
          spec: {
            targetRef: route(i),
            ...(i % 2
              ? { limits: { a: limit(1) }, defaults: { limits: { b: limit(2) } } }
              : {
                  rules: { authentication: { a: { anonymous: {} } } },
                  overrides: { rules: { authentication: { b: { anonymous: {} } } } },
                }),
          },
          rejected:
            /spec: Invalid value: "object": bare rules and defaults\/overrides are mutually exclusive/,
        });
      for (let i = 0; i < 10; i++)
        cases.push({
          k: AP,
          name: `two-methods-${i}`,
          spec: {
            targetRef: route(i),
            rules: { authentication: { a: { jwt: { issuerUrl: 'https://x' }, anonymous: {} } } },
          },
          invalid: /spec\.rules\.authentication\.a: sets jwt and anonymous; exactly one is allowed/,
        });
      for (let i = 0; i < 10; i++)
        cases.push({
          k: RLP,
          name: `bad-condition-${i}`,
          spec: {
            targetRef: route(i),
            overrides: {
              strategy: 'merge',
              condition: 'rule.value.rates.exists(r, ',
              limits: { '*': limit(5) },
            },
          },
          invalid: /spec\.overrides\.condition: /,
        });
      for (let i = 0; i < 10; i++) {
        const limits: Record<string, unknown> = {};
        for (let j = 0; j < 2200; j++)
          limits[`l${j}`] = {
            ...limit(1),
            when: [{ predicate: `request.path == "/${'x'.repeat(400)}${j}"` }],
          };
        cases.push({
          k: RLP,
          name: `huge-${i}`,
          spec: { targetRef: route(i), limits },
          invalid: /spec: \d+\.\d MiB exceeds the 1 MiB limit/,
        });
      }
      expect(cases).toHaveLength(200);
      const errs = async (c: PolicyController) =>
        /cascade_reconcile_errors_total (\d+)/.exec(await c.metrics.render())?.[1];
      const errorsBefore = await Promise.all(controllers.map(errs));
      const post = (k: typeof RLP, name: string, spec: unknown) =>
        env.call('POST', `${EP}/bulk/${k.plural}`, {
          apiVersion: 'cascade.dev/v1alpha1',
          kind: k.kind,
          metadata: { name, namespace: 'bulk' },
          spec,
        });
      // Valid ones first and last, the invalid ones in between.
      for (let i = 0; i < 5; i++)
        expect(
          (await post(RLP, `valid-rl-${i}`, { targetRef: route(i), limits: { own: limit(10 + i) } })).status,
        ).toBe(201);
      for (const c of cases) {
        const r = await post(c.k, c.name, c.spec);
        if (c.rejected) {
          expect(r.status, c.name).toBe(422);
          expect((r.body as { message: string }).message, c.name).toMatch(c.rejected);
        } else expect(r.status, `${c.name}: ${JSON.stringify(r.body).slice(0, 300)}`).toBe(201);
      }
      for (let i = 5; i < 10; i++)
        expect(
          (
            await post(AP, `valid-auth-${i}`, {
              targetRef: route(i),
              rules: { authentication: { sso: { jwt: { issuerUrl: 'https://sso' } } } },
            })
          ).status,
        ).toBe(201);
      for (const c of cases.filter((x) => x.invalid)) {
        const o = await waitFor(
          `${c.name} Accepted=False`,
          async () => {
            const x = await get(`${EP}/bulk/${c.k.plural}/${c.name}`);
            return conds(x).some((y) => y.type === 'Accepted' && y.status === 'False') ? x : undefined;
          },
          60_000,
        );
        const acc = conds(o).find((y) => y.type === 'Accepted')!;
        expect(acc.reason, c.name).toBe('Invalid');
        expect(acc.message, c.name).toMatch(c.invalid!);
      }
      // AuthPolicy fails closed: two-methods-i (invalid) names every route, so the valid AuthPolicies'
      // rules are not in force there (each request is denied), and every view says so
      for (const i of [5, 6, 7, 8, 9]) {
        const n = `valid-auth-${i}`;
        const o = await waitFor(`${n} FailedClosed`, async () => {
          const x = await get(`${EP}/bulk/authpolicies/${n}`);
          return conds(x).some((y) => y.type === 'Enforced' && y.reason === 'FailedClosed') ? x : undefined;
        });
        expect(conds(o).find((y) => y.type === 'Enforced')).toMatchObject({
          status: 'False',
          message: `Policy is not in force; routes bulk/r${i} fail closed: bulk/two-methods-${i} invalid (its rules are not in force there)`,
        });
        const bad = conds(await get(`${EP}/bulk/authpolicies/two-methods-${i}`)).find(
          (y) => y.type === 'Enforced',
        );
        expect(bad).toMatchObject({ status: 'False', reason: 'FailedClosed' });
        expect(bad!.message).toContain(`routes bulk/r${i})`);
        const ep = await waitFor(`r${i} EffectivePolicy shows the deny-all`, async () => {
          const x = await get(`${EP}/bulk/effectivepolicies/authpolicy-httproute-r${i}`);
          return JSON.stringify(x?.spec ?? {}).includes('cascade-invalid-policy') ? x : undefined;
        });
        const path = (ep.spec!.paths as { rules: Record<string, { source: { name: string } }> }[])[0]!;
        expect(Object.keys(path.rules)).toEqual(['authorization.cascade-invalid-policy']);
        expect(path.rules['authorization.cascade-invalid-policy']!.source.name).toBe(`two-methods-${i}`);
        const rt = (await get(`/apis/${G}/v1/namespaces/bulk/httproutes/r${i}`)) as {
          status?: { parents?: { conditions?: { type: string; reason: string; message: string }[] }[] };
        };
        expect(
          rt.status?.parents?.[0]?.conditions?.find((c) => c.type === 'AuthPolicyAffected'),
        ).toMatchObject({
          reason: 'FailedClosed',
          message: expect.stringContaining(`bulk/two-methods-${i}`),
        });
      }
      const events = await waitFor('FailedClosed Events', async () => {
        const l = (await env.call('GET', '/api/v1/namespaces/bulk/events')).body as {
          items: { reason: string; involvedObject: { name: string } }[];
        };
        const names = l.items.filter((e) => e.reason === 'FailedClosed').map((e) => e.involvedObject.name);
        return names.includes('two-methods-5') && names.includes('valid-auth-5') ? names : undefined;
      });
      expect(events.length).toBeGreaterThanOrEqual(2);
      for (const [plural, names] of [
        ['ratelimitpolicies', [0, 1, 2, 3, 4].map((i) => `valid-rl-${i}`)],
      ] as const)
        for (const n of names) {
          const o = await waitFor(
            `${n} Enforced`,
            async () => {
              const x = await get(`${EP}/bulk/${plural}/${n}`);
              return conds(x).some((y) => y.type === 'Enforced' && y.status === 'True') ? x : undefined;
            },
            60_000,
          );
          expect(conds(o).find((y) => y.type === 'Accepted')).toMatchObject({
            status: 'True',
            reason: 'Accepted',
          });
        }
      // The valid limits reached the gateway's Limitador ConfigMap; no reconcile failed on the way.
      const cm = await waitFor('bulk ConfigMap', async () => {
        const o = await get('/api/v1/namespaces/bulk/configmaps/limitador-limits-gw');
        return o?.data?.['limits.yaml']?.includes('max_value: 14') ? o : undefined;
      });
      for (let i = 0; i < 5; i++) expect(cm.data!['limits.yaml']).toContain(`max_value: ${10 + i}`);
      for (const [i, c] of controllers.entries()) {
        expect(c.ready).toBe(true);
        expect(await errs(c)).toBe(errorsBefore[i]);
      }
    }, 240_000);
  },
);
