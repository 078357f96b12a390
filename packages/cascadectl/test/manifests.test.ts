import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { manifestsYaml } from '../src/commands/manifests.ts';

describe('cascadectl manifests', () => {
  it('writes no YAML anchors or aliases (deploy/ included)', () => {
    expect(manifestsYaml()).not.toMatch(/[&*]a\d+\b/);
    const deploy = readFileSync(resolve(import.meta.dirname, '../../../deploy/cascade.yaml'), 'utf8');
    expect(deploy).not.toMatch(/: [&*]a\d+\b/);
  });

  it('has the CRDs, the aggregated view/edit roles and one least-privilege role per controller', () => {
    // biome-ignore lint/suspicious/noExplicitAny: navigating generated manifests
    const docs = parseAllDocuments(manifestsYaml()).map((d) => d.toJS() as Record<string, any>);
    const names = docs.map(
      (d) => `${d.kind}/${d.metadata.namespace ? `${d.metadata.namespace}/` : ''}${d.metadata.name}`,
    );
    expect(names).toEqual([
      'Namespace/cascade-system',
      'CustomResourceDefinition/effectivepolicies.cascade.dev',
      'CustomResourceDefinition/podaddressslices.cascade.dev',
      'CustomResourceDefinition/netpolnodereports.cascade.dev',
      'CustomResourceDefinition/authpolicies.cascade.dev',
      'CustomResourceDefinition/ratelimitpolicies.cascade.dev',
      'CustomResourceDefinition/tokenratelimitpolicies.cascade.dev',
      'ClusterRole/cascade-view',
      'ClusterRole/cascade-edit',
      'ServiceAccount/cascade-system/authpolicy-controller',
      'ClusterRole/authpolicy-controller',
      'ClusterRoleBinding/authpolicy-controller',
      'Role/cascade-system/authpolicy-controller',
      'RoleBinding/cascade-system/authpolicy-controller',
      'ServiceAccount/cascade-system/ratelimitpolicy-controller',
      'ClusterRole/ratelimitpolicy-controller',
      'ClusterRoleBinding/ratelimitpolicy-controller',
      // its Lease only in its own namespace, Limitador's ConfigMaps only in Limitador's
      'Role/cascade-system/ratelimitpolicy-controller',
      'RoleBinding/cascade-system/ratelimitpolicy-controller',
      'Role/kuadrant-system/ratelimitpolicy-controller',
      'RoleBinding/kuadrant-system/ratelimitpolicy-controller',
      'ServiceAccount/cascade-system/tokenratelimitpolicy-controller',
      'ClusterRole/tokenratelimitpolicy-controller',
      'ClusterRoleBinding/tokenratelimitpolicy-controller',
      'Role/cascade-system/tokenratelimitpolicy-controller',
      'RoleBinding/cascade-system/tokenratelimitpolicy-controller',
      'Role/kuadrant-system/tokenratelimitpolicy-controller',
      'RoleBinding/kuadrant-system/tokenratelimitpolicy-controller',
    ]);
    // kubectl short names (`kubectl get rlp`), none that a built-in resource has (`ep` is Endpoints')
    const shortNames = Object.fromEntries(
      docs
        .filter((d) => d.kind === 'CustomResourceDefinition')
        .map((d) => [d.spec.names.plural, d.spec.names.shortNames ?? []]),
    );
    expect(shortNames).toMatchObject({
      effectivepolicies: ['effpol'],
      podaddressslices: ['pas'],
      netpolnodereports: ['nnr'],
      authpolicies: ['authpol'],
      ratelimitpolicies: ['rlp'],
    });
    const view = docs.find((d) => d.metadata.name === 'cascade-view')!;
    expect(view.metadata.labels['rbac.authorization.k8s.io/aggregate-to-view']).toBe('true');
    expect(
      view.rules
        .flatMap((r: { verbs: string[] }) => r.verbs)
        .every((v: string) => ['get', 'list', 'watch'].includes(v)),
    ).toBe(true);
    const edit = docs.find((d) => d.metadata.name === 'cascade-edit')!;
    // Users never write EffectivePolicies or policy status.
    expect(JSON.stringify(edit.rules)).not.toContain('effectivepolicies');
    expect(JSON.stringify(edit.rules)).not.toContain('/status');
    const rl = docs.find(
      (d) => d.kind === 'ClusterRole' && d.metadata.name === 'ratelimitpolicy-controller',
    )!;
    expect(JSON.stringify(rl.rules)).not.toContain('authpolicies');
    expect(JSON.stringify(rl.rules)).not.toContain('secrets');
    // nothing cluster-wide on Leases or ConfigMaps
    expect(JSON.stringify(rl.rules)).not.toContain('leases');
    expect(JSON.stringify(rl.rules)).not.toContain('configmaps');
  });
});
