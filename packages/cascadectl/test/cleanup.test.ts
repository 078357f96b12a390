// cascadectl cleanup against a real kube-apiserver: the AuthPolicy and RateLimitPolicy controllers
// run the example story (EffectivePolicies, AuthConfigs, the Limitador ConfigMap in its namespace,
// Affected conditions, Leases), stop as `helm uninstall` stops them, and cleanup removes what they
// wrote, nothing else: a ConfigMap of someone else, other managers' Gateway conditions and the routes
// stay. A ConfigMap an earlier limitadorNamespace left behind is found by its label.
import { resolve } from 'node:path';
import { authConfigCrd, authPolicyKind } from '@cascade/authpolicy';
import { effectivePolicyCrd, type PolicyController, policyCrd } from '@cascade/core';
import {
  clientOf,
  createNamespace,
  createObjects,
  readObjects,
  startController,
} from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { rateLimitPolicyKind } from '@cascade/ratelimitpolicy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from './run.ts';

const GW = resolve(import.meta.dirname, '../../../examples/gateway');
const items = async (env: Envtest, path: string) =>
  ((await env.call('GET', path)).body as { items: { metadata: { name: string; namespace?: string } }[] })
    .items;

describe.skipIf(!apiServerTestsEnabled())('cascadectl cleanup (after helm uninstall)', () => {
  let env: Envtest;
  const controllers: PolicyController[] = [];
  beforeAll(async () => {
    env = await Envtest.start({
      crdObjects: [
        effectivePolicyCrd,
        policyCrd(authPolicyKind),
        policyCrd(rateLimitPolicyKind),
        authConfigCrd,
      ],
    });
    await createNamespace(env, 'kuadrant-system');
    await createNamespace(env, 'old-limitador');
    await createNamespace(env, 'cascade-system');
    await createObjects(env, readObjects(GW));
    controllers.push(await startController(env, authPolicyKind, { leaseNamespace: 'cascade-system' }));
    controllers.push(
      await startController(env, rateLimitPolicyKind, {
        leaseNamespace: 'cascade-system',
        settings: { limitadorNamespace: 'kuadrant-system' },
      }),
    );
  }, 120_000);
  afterAll(async () => {
    for (const c of controllers) await c.stop().catch(() => {});
    await env?.stop();
  });

  it('removes what the controllers wrote, and only that', async () => {
    await waitFor('AuthConfigs, the Limitador ConfigMap and Affected conditions', async () => {
      const acs = await items(env, '/apis/authorino.kuadrant.io/v1beta3/authconfigs');
      const cms = await items(env, '/api/v1/namespaces/kuadrant-system/configmaps');
      const route = (
        await env.call('GET', '/apis/gateway.networking.k8s.io/v1/namespaces/team-b/httproutes/orders')
      ).body as { status?: { parents?: unknown[] } };
      return acs.length > 0 &&
        cms.some((c) => c.metadata.name.startsWith('limitador-limits')) &&
        route.status?.parents?.length
        ? true
        : undefined;
    });
    for (const c of controllers) await c.idle();
    for (const c of controllers) await c.stop();
    // what an earlier limitadorNamespace left behind, and a ConfigMap that is not Cascade's
    const stale = (await env.call('GET', '/api/v1/namespaces/kuadrant-system/configmaps')).body as {
      items: { metadata: { name: string; labels: Record<string, string> }; data: unknown }[];
    };
    const ours = stale.items.find((c) => c.metadata.name.startsWith('limitador-limits'))!;
    await env.call('POST', '/api/v1/namespaces/old-limitador/configmaps', {
      metadata: { name: ours.metadata.name, labels: ours.metadata.labels },
      data: ours.data,
    });
    await env.call('POST', '/api/v1/namespaces/kuadrant-system/configmaps', {
      metadata: { name: 'not-cascades' },
      data: {},
    });

    const dry = await run(
      'cleanup',
      '--kubeconfig',
      env.kubeconfig,
      '--release-namespace',
      'cascade-system',
      '--dry-run',
    );
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('would remove ConfigMap old-limitador/');
    expect((await items(env, '/apis/cascade.dev/v1alpha1/effectivepolicies')).length).toBeGreaterThan(0);

    const r = await run(
      'cleanup',
      '--kubeconfig',
      env.kubeconfig,
      '--release-namespace',
      'cascade-system',
      '-o',
      'json',
    );
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as { removed: string[]; failed: string[] };
    expect(report.failed).toEqual([]);
    expect(report.removed).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^EffectivePolicy team-b\//),
        expect.stringMatching(/^AuthConfig /),
        expect.stringMatching(/^ConfigMap kuadrant-system\/limitador-limits/),
        expect.stringMatching(/^ConfigMap old-limitador\/limitador-limits/),
        'Lease cascade-system/authpolicy-controller-leader',
        'Lease cascade-system/ratelimitpolicy-controller-leader',
        'AuthPolicyAffected on Gateway infra/main',
        'RateLimitPolicyAffected on Gateway infra/main',
        'Affected conditions on HTTPRoute team-b/orders',
      ]),
    );
    await waitFor('nothing of Cascade left', async () => {
      const eps = await items(env, '/apis/cascade.dev/v1alpha1/effectivepolicies');
      const acs = await items(env, '/apis/authorino.kuadrant.io/v1beta3/authconfigs');
      const cms = [
        ...(await items(env, '/api/v1/namespaces/kuadrant-system/configmaps')),
        ...(await items(env, '/api/v1/namespaces/old-limitador/configmaps')),
      ].filter((c) => c.metadata.name.startsWith('limitador-limits'));
      return eps.length + acs.length + cms.length === 0 ? true : undefined;
    });
    expect(
      (await items(env, '/api/v1/namespaces/kuadrant-system/configmaps')).map((c) => c.metadata.name),
    ).toContain('not-cascades');
    const gw = (await env.call('GET', '/apis/gateway.networking.k8s.io/v1/namespaces/infra/gateways/main'))
      .body as {
      status: { conditions: { type: string }[] };
    };
    // the Gateway's own conditions stay (here the CRD's defaults), ours are gone
    expect(gw.status.conditions.map((c) => c.type).sort()).toEqual(['Accepted', 'Programmed']);
    const route = (
      await env.call('GET', '/apis/gateway.networking.k8s.io/v1/namespaces/team-b/httproutes/orders')
    ).body as {
      status?: { parents?: unknown[] };
    };
    expect(route.status?.parents ?? []).toEqual([]);
    // run again: nothing to do
    const again = await run(
      'cleanup',
      '--kubeconfig',
      env.kubeconfig,
      '--release-namespace',
      'cascade-system',
    );
    expect(again.stdout).toMatch(/^0 removed, 0 failed/m);
  }, 120_000);

  it("removes the netpolicy-controller's conditions on admin network policies, and only those", async () => {
    const client = clientOf(env);
    const ANP = '/apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies';
    const created = await env.call('POST', ANP, {
      apiVersion: 'policy.networking.k8s.io/v1alpha1',
      kind: 'AdminNetworkPolicy',
      metadata: { name: 'deny-dev' },
      spec: {
        priority: 10,
        subject: { namespaces: { matchLabels: { team: 'shop' } } },
        ingress: [{ action: 'Deny', from: [{ namespaces: { matchLabels: { team: 'dev' } } }] }],
      },
    });
    expect(created.status).toBe(201);
    const condition = (type: string) => ({
      type,
      status: 'True',
      reason: type,
      message: 'm',
      lastTransitionTime: '2026-11-28T00:00:00Z',
    });
    const status = (type: string) => ({
      apiVersion: 'policy.networking.k8s.io/v1alpha1',
      kind: 'AdminNetworkPolicy',
      metadata: { name: 'deny-dev' },
      status: { conditions: [condition(type)] },
    });
    await client.apply(`${ANP}/deny-dev/status`, status('Accepted'), 'netpolicy-controller');
    await client.apply(`${ANP}/deny-dev/status`, status('SomeoneElses'), 'someone-else');
    const r = await run('cleanup', '--kubeconfig', env.kubeconfig, '--release-namespace', 'cascade-system');
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('conditions on AdminNetworkPolicy deny-dev');
    const live = (await env.call('GET', `${ANP}/deny-dev`)).body as {
      status: { conditions: { type: string }[] };
    };
    expect(live.status.conditions.map((c) => c.type)).toEqual(['SomeoneElses']);
    const again = await run(
      'cleanup',
      '--kubeconfig',
      env.kubeconfig,
      '--release-namespace',
      'cascade-system',
    );
    expect(again.stdout).toMatch(/^0 removed, 0 failed/m);
  }, 60_000);
});
