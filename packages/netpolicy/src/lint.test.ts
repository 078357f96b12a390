import { describe, expect, it } from 'vitest';
import { NetpolEngine } from './engine.ts';
import { lintNetpol } from './lint.ts';

const base = {
  namespaces: [{ name: 'x', labels: { ns: 'x' } }],
  nodes: [],
  pods: [{ namespace: 'x', name: 'a', labels: { app: 'a' }, ips: ['10.0.0.1'], ports: [] }],
};

describe('lintNetpol', () => {
  it('warns about overlapping ANPs of equal priority, naming both and the tie-break', () => {
    const e = NetpolEngine.fromCluster({
      ...base,
      policies: [
        {
          kind: 'AdminNetworkPolicy',
          name: 'b',
          spec: {
            priority: 5,
            subject: { namespaces: {} },
            ingress: [{ action: 'Allow', from: [{ namespaces: {} }] }],
          },
        },
        {
          kind: 'AdminNetworkPolicy',
          name: 'a',
          spec: {
            priority: 5,
            subject: { namespaces: { matchLabels: { ns: 'x' } } },
            ingress: [{ action: 'Deny', from: [{ namespaces: {} }] }],
          },
        },
        {
          kind: 'AdminNetworkPolicy',
          name: 'c',
          spec: {
            priority: 6,
            subject: { namespaces: {} },
            ingress: [{ action: 'Deny', from: [{ namespaces: {} }] }],
          },
        },
      ],
    });
    const f = lintNetpol(e);
    expect(f).toHaveLength(1);
    expect(f[0]!.message).toContain(
      'AdminNetworkPolicy/a and AdminNetworkPolicy/b have the same priority 5 and both select 1 pod identity',
    );
    expect(f[0]!.message).toContain('here AdminNetworkPolicy/a goes first');
  });

  it('does not warn when equal-priority ANPs select disjoint pods', () => {
    const e = NetpolEngine.fromCluster({
      ...base,
      policies: [
        {
          kind: 'AdminNetworkPolicy',
          name: 'a',
          spec: {
            priority: 5,
            subject: { namespaces: { matchLabels: { ns: 'x' } } },
            ingress: [{ action: 'Deny', from: [{ namespaces: {} }] }],
          },
        },
        {
          kind: 'AdminNetworkPolicy',
          name: 'b',
          spec: {
            priority: 5,
            subject: { namespaces: { matchLabels: { ns: 'y' } } },
            ingress: [{ action: 'Deny', from: [{ namespaces: {} }] }],
          },
        },
      ],
    });
    expect(lintNetpol(e)).toEqual([]);
  });

  it('reports a baseline rule that repeats an earlier one', () => {
    const rule = { action: 'Deny', from: [{ namespaces: {} }] };
    const e = NetpolEngine.fromCluster({
      ...base,
      policies: [
        {
          kind: 'BaselineAdminNetworkPolicy',
          name: 'default',
          spec: { subject: { namespaces: {} }, ingress: [rule, { ...rule, action: 'Allow' }] },
        },
      ],
    });
    expect(lintNetpol(e).map((f) => f.message)).toEqual([
      'BaselineAdminNetworkPolicy/default#ingress[1] is shadowed: BaselineAdminNetworkPolicy/default#ingress[0] has the same subject, peers and ports and comes first',
    ]);
  });
});
