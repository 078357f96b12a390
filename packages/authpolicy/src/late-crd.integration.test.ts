// Authorino installed after Cascade (the usual order): the AuthConfig CRD appears while the controller
// runs, with no policy change after it. The controller notices the resource is served (its informer
// lists it again every 10 s while it is missing) and renders every gateway's AuthConfigs at once,
// logging it (issue 28: before, nothing appeared until an unrelated change).
import { resolve } from 'node:path';
import { effectivePolicyCrd, type PolicyController, policyCrd } from '@cascade/core';
import { createObjects, readObjects, startController } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authConfigCrd } from './authconfig-crd.ts';
import { authPolicyKind } from './kind.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../../examples/gateway');
const AUTHCONFIGS = '/apis/authorino.kuadrant.io/v1beta3/authconfigs';

describe.skipIf(!apiServerTestsEnabled())('a rendered kind installed after the controller', () => {
  let env: Envtest;
  let controller: PolicyController;
  const logs: { msg: string; fields?: Record<string, unknown> }[] = [];

  beforeAll(async () => {
    env = await Envtest.start({ crdObjects: [effectivePolicyCrd, policyCrd(authPolicyKind)] });
    // the example's gateways, routes and AuthPolicies (its RateLimitPolicies are another kind's)
    await createObjects(
      env,
      readObjects(EXAMPLES).filter((o) => (o as { kind: string }).kind !== 'RateLimitPolicy'),
    );
    controller = await startController(env, authPolicyKind, {
      log: (_level, msg, fields) => logs.push({ msg, ...(fields ? { fields } : {}) }),
    });
  }, 120_000);
  afterAll(async () => {
    await controller?.stop().catch(() => {});
    await env?.stop();
  });

  it('renders every AuthConfig within one relist of the CRD being served, with no other change', async () => {
    await waitFor('the EffectivePolicies (the controller runs)', async () => {
      const r = await env.call('GET', '/apis/cascade.dev/v1alpha1/effectivepolicies');
      return (r.body as { items: unknown[] }).items.length > 0 ? true : undefined;
    });
    await controller.idle();
    expect((await env.call('GET', AUTHCONFIGS)).status).toBe(404);
    const created = await env.call(
      'POST',
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
      authConfigCrd,
    );
    expect(created.status).toBe(201);
    const t0 = Date.now();
    const items = await waitFor(
      'AuthConfigs rendered',
      async () => {
        const r = await env.call('GET', AUTHCONFIGS);
        const l = r.status === 200 ? (r.body as { items: unknown[] }).items : [];
        return l.length > 0 ? l : undefined;
      },
      30_000,
    );
    expect(items.length).toBeGreaterThan(0);
    expect(Date.now() - t0).toBeLessThan(25_000);
    expect(logs.some((l) => l.msg === 'rendered resource now served: rendering every gateway')).toBe(true);
  }, 60_000);
});
