import { describe, expect, it } from 'vitest';
import { budgetOverruns, enforceNamespaceBudget, networkPolicyCosts } from './budget.ts';
import { NetpolEngine } from './engine.ts';
import { lintNetpol } from './lint.ts';
import type { NetPolicyObject } from './model.ts';
import { mapConnection } from './verdict.ts';

/** A tenant's NetworkPolicy that lowers to many entries: n ipBlocks x 3 ports. */
function flood(n: number): NetPolicyObject {
  return {
    kind: 'NetworkPolicy',
    namespace: 'tenant',
    name: 'flood',
    spec: {
      podSelector: { matchLabels: { app: 'web' } },
      ingress: [
        {
          from: Array.from({ length: n }, (_, i) => ({
            ipBlock: { cidr: `172.${16 + (i >> 8)}.${i & 255}.0/24` },
          })),
          ports: [{ port: 80 }, { port: 443 }, { port: 8080 }],
        },
      ],
    },
  };
}

function cluster(): NetpolEngine {
  return NetpolEngine.fromCluster({
    namespaces: [
      { name: 'tenant', labels: {} },
      { name: 'other', labels: {} },
    ],
    nodes: [{ name: 'n1', labels: {}, ips: ['192.168.0.1'] }],
    pods: [
      { namespace: 'tenant', name: 'web', labels: { app: 'web' }, ips: ['10.0.0.1'], ports: [], node: 'n1' },
      {
        namespace: 'tenant',
        name: 'client',
        labels: { app: 'client' },
        ips: ['10.0.0.2'],
        ports: [],
        node: 'n1',
      },
      { namespace: 'other', name: 'db', labels: { app: 'db' }, ips: ['10.0.0.3'], ports: [], node: 'n1' },
    ],
    policies: [
      flood(300),
      {
        kind: 'NetworkPolicy',
        namespace: 'tenant',
        name: 'web-from-client',
        spec: {
          podSelector: { matchLabels: { app: 'web' } },
          ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }], ports: [{ port: 80 }] }],
        },
      },
      {
        kind: 'NetworkPolicy',
        namespace: 'other',
        name: 'db-from-tenant',
        spec: {
          podSelector: {},
          ingress: [{ from: [{ namespaceSelector: {} }], ports: [{ port: 5432 }] }],
        },
      },
    ],
  });
}

describe('per-namespace policy map budget', () => {
  it("counts each NetworkPolicy's entries in the rule sets of a node", () => {
    const costs = networkPolicyCosts(cluster(), 'n1');
    const flooded = costs.find((c) => c.policy === 'NetworkPolicy/tenant/flood')!;
    expect(flooded.entries).toBeGreaterThanOrEqual(900);
    expect(costs.find((c) => c.policy === 'NetworkPolicy/tenant/web-from-client')!.entries).toBeLessThan(10);
    expect(budgetOverruns(costs, 100_000)).toEqual([]);
    const over = budgetOverruns(costs, 500);
    expect(over.map((o) => [o.namespace, o.refuse.policy])).toEqual([
      ['tenant', 'NetworkPolicy/tenant/flood'],
    ]);
  });

  it('refuses the largest NetworkPolicy alone: its pods stay isolated, other policies and namespaces are untouched', () => {
    const e = cluster();
    expect(mapConnection(e, '172.16.1.9', '10.0.0.1', 6, 443).verdict).toBe('allow');
    expect(mapConnection(e, '10.0.0.2', '10.0.0.1', 6, 80).verdict).toBe('allow');
    const refused = enforceNamespaceBudget(e, 500, 'n1');
    expect(refused.map((r) => r.policy)).toEqual(['NetworkPolicy/tenant/flood']);
    expect(refused[0]!.reason).toMatch(
      /namespace tenant needs \d+ policy map entries on node n1 for peers it controls \(its own pods, addresses, nodes\), over its budget of 500/,
    );
    // fail closed: what only the refused policy allowed is denied; web is still isolated
    expect(mapConnection(e, '172.16.1.9', '10.0.0.1', 6, 443).verdict).toBe('deny');
    expect(mapConnection(e, '10.0.0.3', '10.0.0.1', 6, 443).verdict).toBe('deny');
    // the tenant's other policy and the other namespace's keep working
    expect(mapConnection(e, '10.0.0.2', '10.0.0.1', 6, 80).verdict).toBe('allow');
    expect(mapConnection(e, '10.0.0.2', '10.0.0.3', 6, 5432).verdict).toBe('allow');
    expect(budgetOverruns(networkPolicyCosts(e, 'n1'), 500)).toEqual([]);
  });

  it('lint predicts the refusal offline', () => {
    const findings = lintNetpol(cluster(), 500);
    expect(findings).toContainEqual(
      expect.objectContaining({
        policy: 'NetworkPolicy/tenant/flood',
        message: expect.stringMatching(/the agent refuses NetworkPolicy\/tenant\/flood/),
      }),
    );
    expect(lintNetpol(cluster()).some((f) => /budget/.test(f.message))).toBe(false);
  });
});
