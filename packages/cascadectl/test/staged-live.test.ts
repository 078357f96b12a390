// Staged policies on a real kube-apiserver: the staged CRDs the chart installs admit a NetworkPolicy
// copied with only kind and apiVersion changed (stagedAction defaults to Set, the spec kept as
// written), refuse any other stagedAction naming the field, and `netpol simulate --staged
// --kubeconfig` judges what the cluster has staged.
import { resolve } from 'node:path';
import { ApiError } from '@cascade/core/kube';
import { clientOf } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest } from '@cascade/envtest';
import { stagedCrds } from '@cascade/netpolicy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from './run.ts';

const NP = resolve(import.meta.dirname, '../../../examples/netpol');
const SNP = '/apis/cascade.dev/v1alpha1/namespaces/sandbox/stagednetworkpolicies';

describe.skipIf(!apiServerTestsEnabled())('staged policies on a live API server', () => {
  let env: Envtest;
  beforeAll(async () => {
    env = await Envtest.start({ crdObjects: stagedCrds() });
    await clientOf(env).request('POST', '/api/v1/namespaces', { metadata: { name: 'sandbox' } });
  }, 120_000);
  afterAll(async () => env?.stop());

  it('admits a NetworkPolicy with only kind and apiVersion changed; Set by default, the spec kept', async () => {
    const c = clientOf(env);
    const made = await c.request<{ spec: Record<string, unknown> }>('POST', SNP, {
      apiVersion: 'cascade.dev/v1alpha1',
      kind: 'StagedNetworkPolicy',
      metadata: { name: 'default-deny' },
      spec: { podSelector: {}, policyTypes: ['Ingress'] },
    });
    expect(made.spec).toEqual({ stagedAction: 'Set', podSelector: {}, policyTypes: ['Ingress'] });
  });

  it('refuses any other stagedAction, naming the field and what it may be', async () => {
    const e = await clientOf(env)
      .request('POST', SNP, {
        apiVersion: 'cascade.dev/v1alpha1',
        kind: 'StagedNetworkPolicy',
        metadata: { name: 'maybe' },
        spec: { stagedAction: 'Maybe' },
      })
      .catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).status).toBe(422);
    expect(JSON.stringify((e as ApiError).body)).toMatch(
      /spec\.stagedAction: Unsupported value: \\"Maybe\\": supported values: \\"Set\\", \\"Delete\\"/,
    );
  });

  it('the cluster-scoped staged kinds are cluster-scoped', async () => {
    const c = clientOf(env);
    await c.request('POST', '/apis/cascade.dev/v1alpha1/stagedclusternetworkpolicies', {
      apiVersion: 'cascade.dev/v1alpha1',
      kind: 'StagedClusterNetworkPolicy',
      metadata: { name: 'try' },
      spec: { stagedAction: 'Delete' },
    });
    const e = await c
      .request('GET', '/apis/cascade.dev/v1alpha1/namespaces/sandbox/stagedclusternetworkpolicies')
      .catch((x: unknown) => x);
    expect((e as ApiError).status).toBe(404);
  });

  it('netpol simulate --staged --kubeconfig judges what the cluster has staged', async () => {
    const r = await run('netpol', 'simulate', NP, '--staged', '--kubeconfig', env.kubeconfig);
    // the Delete of a ClusterNetworkPolicy that does not exist is named; the staged deny is judged
    expect(r.stderr).toMatch(
      /StagedClusterNetworkPolicy try.*there is no ClusterNetworkPolicy try to delete/,
    );
    expect(r.stdout).toMatch(
      /shop\/web -> sandbox\/toy +TCP\/443 +allow -> DENY +ingress: networkpolicy StagedNetworkPolicy sandbox\/default-deny isolation/,
    );
  });
});
