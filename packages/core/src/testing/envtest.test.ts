// The fixture's API paths: the plural the API server uses and where a cluster-scoped kind lives.
import { describe, expect, it } from 'vitest';
import { apiPath, pluralOf } from './envtest.ts';

describe('envtest fixture paths', () => {
  it('plurals as the API server names them', () => {
    expect(
      [
        'Gateway',
        'GatewayClass',
        'HTTPRoute',
        'GuardPolicy',
        'LimitPolicy',
        'Namespace',
        'ReferenceGrant',
      ].map(pluralOf),
    ).toEqual([
      'gateways',
      'gatewayclasses',
      'httproutes',
      'guardpolicies',
      'limitpolicies',
      'namespaces',
      'referencegrants',
    ]);
  });
  it('namespaced and cluster-scoped paths', () => {
    const gw = {
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'Gateway',
      metadata: { name: 'gw', namespace: 'infra' },
    };
    expect(apiPath(gw)).toBe('/apis/gateway.networking.k8s.io/v1/namespaces/infra/gateways');
    expect(apiPath(gw, 'gw')).toBe('/apis/gateway.networking.k8s.io/v1/namespaces/infra/gateways/gw');
    expect(apiPath({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'a', namespace: 'a' } })).toBe(
      '/api/v1/namespaces',
    );
    expect(
      apiPath({
        apiVersion: 'gateway.networking.k8s.io/v1',
        kind: 'GatewayClass',
        metadata: { name: 'c', namespace: 'x' },
      }),
    ).toBe('/apis/gateway.networking.k8s.io/v1/gatewayclasses');
  });
});
