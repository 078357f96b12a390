import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiServerTestsEnabled, Envtest } from './envtest.ts';

describe.skipIf(!apiServerTestsEnabled())('envtest', () => {
  let env: Envtest;
  beforeAll(async () => {
    env = await Envtest.start();
  }, 120_000);
  afterAll(async () => env?.stop());

  it('serves the API with the upstream CRDs established', async () => {
    const r = await env.call('GET', '/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes');
    expect(r.status).toBe(200);
    const anp = await env.call('GET', '/apis/policy.networking.k8s.io/v1alpha1/adminnetworkpolicies');
    expect(anp.status).toBe(200);
  });

  it('survives an API server restart with its data', async () => {
    await env.call('POST', '/api/v1/namespaces', { metadata: { name: 'kept' } });
    await env.stopApiServer();
    await env.startApiServer();
    expect((await env.call('GET', '/api/v1/namespaces/kept')).status).toBe(200);
  }, 120_000);
});
