// limitador-operator's Limitador CR (issue 27 item 3): with --limitador-cr, the controller writes every
// gateway's limits into its spec.limits (owning that field only: the operator's other fields stay),
// only when they differ, never creating the object; a policy change updates them; a Limitador that is
// not there yet is picked up when it appears.

import { resolve } from 'node:path';
import { effectivePolicyCrd, type PolicyController, policyCrd } from '@cascade/core';
import { createNamespace, createObjects, readObjects, startController } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rateLimitPolicyKind } from './kind.ts';
import { limitadorCrd } from './limitador-crd.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../../examples/gateway');
const CR = '/apis/limitador.kuadrant.io/v1alpha1/namespaces/kuadrant-system/limitadors/limitador';

type Limit = { namespace: string; max_value: number; name?: string };
type Cr = { metadata: { resourceVersion: string }; spec: { replicas?: number; limits?: Limit[] } };

describe.skipIf(!apiServerTestsEnabled())('Limitador.spec.limits', () => {
  let env: Envtest;
  let controller: PolicyController;
  const get = async () => (await env.call('GET', CR)).body as Cr;

  beforeAll(async () => {
    env = await Envtest.start({
      crdObjects: [effectivePolicyCrd, policyCrd(rateLimitPolicyKind), limitadorCrd],
    });
    await createNamespace(env, 'kuadrant-system');
    await createObjects(
      env,
      readObjects(EXAMPLES).filter((o) => (o as { kind: string }).kind !== 'AuthPolicy'),
    );
    controller = await startController(env, rateLimitPolicyKind, {
      settings: { limitadorNamespace: 'kuadrant-system', limitadorCr: 'limitador' },
      requireReady: true,
    });
  }, 120_000);
  afterAll(async () => {
    await controller?.stop().catch(() => {});
    await env?.stop();
  });

  const enforced = async () =>
    (
      (await env.call('GET', '/apis/cascade.dev/v1alpha1/namespaces/infra/ratelimitpolicies/platform-limits'))
        .body as { status?: { conditions?: { type: string; reason: string; message: string }[] } }
    ).status?.conditions?.find((c) => c.type === 'Enforced');
  const waitEnforced = (reason: string, text: string) =>
    waitFor(`platform-limits ${reason}`, async () => {
      const e = await enforced();
      return e?.reason === reason && e.message.includes(text) ? e : undefined;
    });

  it('the Limitador created by its operator afterwards gets every limit; its own fields stay', async () => {
    await controller.idle();
    expect((await env.call('GET', CR)).status).toBe(404); // never created by the controller
    // --require-ready: the limits are not in force while the Limitador does not exist
    await waitEnforced('MissingDependency', 'Limitador kuadrant-system/limitador (it does not exist');
    const created = await env.call(
      'POST',
      '/apis/limitador.kuadrant.io/v1alpha1/namespaces/kuadrant-system/limitadors',
      {
        apiVersion: 'limitador.kuadrant.io/v1alpha1',
        kind: 'Limitador',
        metadata: { name: 'limitador', namespace: 'kuadrant-system' },
        spec: { replicas: 2 },
      },
    );
    expect(created.status).toBe(201);
    // ... nor while its operator has not reported it Ready; then the gateway is what is left
    await waitEnforced(
      'Pending',
      'Limitador kuadrant-system/limitador (its operator has reported nothing on it yet)',
    );
    // the operator's status write (again if the controller's spec write came between: 409)
    await waitFor('the Limitador reported Ready', async () => {
      const live = (await env.call('GET', CR)).body as Record<string, unknown>;
      const r = await env.call('PUT', `${CR}/status`, {
        ...live,
        status: {
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              reason: 'Ready',
              message: '',
              lastTransitionTime: '2026-01-01T00:00:00Z',
            },
          ],
        },
      });
      return r.status === 200 ? true : undefined;
    });
    await waitEnforced('TargetNotProgrammed', 'gateway infra/main has not been programmed by any controller');
    const cr = await waitFor(
      'the limits',
      async () => ((await get()).spec.limits?.length ? get() : undefined),
      30_000,
    );
    expect(cr.spec.replicas).toBe(2);
    // the example: 100/min per route for three routes, team-b's 1000/min (clipped) and 50000/h per user
    expect(cr.spec.limits!.map((l) => [l.namespace, l.max_value]).sort()).toEqual([
      ['team-a/catalog', 100],
      ['team-b/orders', 100],
      ['team-b/orders', 1000],
      ['team-b/orders', 50000],
      ['team-d/admin', 100],
    ]);
    // the same limits as the ConfigMap
    const cm = (await env.call('GET', '/api/v1/namespaces/kuadrant-system/configmaps')).body as {
      items: { data?: Record<string, string> }[];
    };
    expect(cm.items.some((c) => c.data?.['limits.yaml']?.includes('team-b/orders'))).toBe(true);
  }, 60_000);

  it('steady state: no write; a policy change: the limits updated', async () => {
    await controller.idle();
    const before = (await get()).metadata.resourceVersion;
    controller.resyncNow();
    await controller.idle();
    expect((await get()).metadata.resourceVersion).toBe(before);
    const patched = await env.call(
      'PATCH',
      '/apis/cascade.dev/v1alpha1/namespaces/infra/ratelimitpolicies/platform-limits',
      { spec: { defaults: { limits: { global: { rates: [{ limit: 250, window: '1m' }] } } } } },
      'application/merge-patch+json',
    );
    expect(patched.status).toBe(200);
    await waitFor('250/min in the Limitador', async () =>
      (await get()).spec.limits?.some((l) => l.max_value === 250) ? true : undefined,
    );
    expect((await get()).spec.replicas).toBe(2);
  }, 60_000);
});
