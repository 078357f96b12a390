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

  it('promote --dry-run writes nothing and says what would change', async () => {
    const r = await run(
      'netpol',
      'promote',
      'snetpol/default-deny',
      '-n',
      'sandbox',
      '--kubeconfig',
      env.kubeconfig,
      NP,
      '--dry-run',
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^would apply NetworkPolicy sandbox\/default-deny\nwould delete StagedNetworkPolicy sandbox\/default-deny\n/,
    );
    expect(r.stdout).toMatch(/shop\/web -> sandbox\/toy +TCP\/443 +allow -> DENY/);
    const c = clientOf(env);
    const gone = await c
      .request('GET', '/apis/networking.k8s.io/v1/namespaces/sandbox/networkpolicies/default-deny')
      .catch((x: unknown) => x);
    expect((gone as ApiError).status).toBe(404);
    await c.request('GET', `${SNP}/default-deny`);
  });

  it('promote writes the standard policy as staged, then deletes the staged one; Delete deletes both', async () => {
    const c = clientOf(env);
    const r = await run(
      'netpol',
      'promote',
      'snetpol/default-deny',
      '-n',
      'sandbox',
      '--kubeconfig',
      env.kubeconfig,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^applied NetworkPolicy sandbox\/default-deny\ndeleted StagedNetworkPolicy sandbox\/default-deny\n/,
    );
    const np = await c.request<{ spec: unknown }>(
      'GET',
      '/apis/networking.k8s.io/v1/namespaces/sandbox/networkpolicies/default-deny',
    );
    expect(np.spec).toEqual({ podSelector: {}, policyTypes: ['Ingress'] });
    expect(
      ((await c.request('GET', `${SNP}/default-deny`).catch((x: unknown) => x)) as ApiError).status,
    ).toBe(404);
    // staging its removal, then promoting that
    await c.request('POST', SNP, {
      apiVersion: 'cascade.dev/v1alpha1',
      kind: 'StagedNetworkPolicy',
      metadata: { name: 'default-deny' },
      spec: { stagedAction: 'Delete' },
    });
    const d = await run(
      'netpol',
      'promote',
      'stagednetworkpolicy/default-deny',
      '-n',
      'sandbox',
      '--kubeconfig',
      env.kubeconfig,
    );
    expect(d.code, d.stderr).toBe(0);
    expect(d.stdout).toMatch(
      /^deleted NetworkPolicy sandbox\/default-deny\ndeleted StagedNetworkPolicy sandbox\/default-deny\n/,
    );
    const gone = await c
      .request('GET', '/apis/networking.k8s.io/v1/namespaces/sandbox/networkpolicies/default-deny')
      .catch((x: unknown) => x);
    expect((gone as ApiError).status).toBe(404);
  });

  it('promote: a missing staged policy, a kind not served, a bad name or no cluster are clear errors', async () => {
    const missing = await run('netpol', 'promote', 'nope', '-n', 'sandbox', '--kubeconfig', env.kubeconfig);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/StagedNetworkPolicy sandbox\/nope: not found/);
    // a staged policy its standard kind would refuse is not written
    await clientOf(env).request('POST', '/apis/cascade.dev/v1alpha1/stagedclusternetworkpolicies', {
      apiVersion: 'cascade.dev/v1alpha1',
      kind: 'StagedClusterNetworkPolicy',
      metadata: { name: 'try-set' },
      spec: { priority: 10, subject: { namespaces: {} }, ingress: [] },
    });
    const invalid = await run('netpol', 'promote', 'scnp/try-set', '--kubeconfig', env.kubeconfig);
    expect(invalid.code, invalid.stderr).toBe(2);
    expect(invalid.stderr).toMatch(
      /\(StagedClusterNetworkPolicy try-set\) \[staged\]: spec\.tier: Invalid option/,
    );
    expect(invalid.stderr).toMatch(
      /error: StagedClusterNetworkPolicy try-set: not promoted: its spec has errors/,
    );
    const cnp = await clientOf(env)
      .request('GET', '/apis/policy.networking.k8s.io/v1beta1/clusternetworkpolicies/try-set')
      .catch((x: unknown) => x);
    expect((cnp as ApiError).status).toBe(404);
    const badKind = await run('netpol', 'promote', 'pods/x', '--kubeconfig', env.kubeconfig);
    expect(badKind.code).toBe(2);
    expect(badKind.stderr).toMatch(/"pods" is not a staged kind \(snetpol \(StagedNetworkPolicy\)/);
    const offline = await run('netpol', 'promote', 'snetpol/x', NP);
    expect(offline.code).toBe(2);
    expect(offline.stderr).toMatch(/promote writes to a live cluster/);
  });
});
