// Tenants against the policy-map budget, round three: one owner's many namespaces, a victim charged for
// identities others make, and a refusal that told a tenant about pods it may not read.
import { describe, expect, it } from 'vitest';
import {
  budgetOverruns,
  DEFAULT_NAMESPACE_ENTRY_BUDGET,
  enforceNamespaceBudget,
  networkPolicyCosts,
} from './budget.ts';
import { NetpolEngine } from './engine.ts';
import { DEFAULT_FOREIGN_IDENTITY_CAP } from './identity-cap.ts';
import type { Cluster, NetPolicyObject, Pod } from './model.ts';
import { DEFAULT_TENANT_LABEL, tenantOf, validTenantLabel } from './tenants.ts';
import { floodVictimPolicy, ruleEntries } from './testing.ts';
import { mapConnection } from './verdict.ts';

const ts = (i: number) => new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();
const ip = (ns: number, i: number) => `10.${100 + ns}.${i >> 8}.${i & 255}`;

/** `namespaces` attacker namespaces, each at the cap: 512 label sets app=web + a distinct label. */
function sevenAtTheCap(namespaces: number, tenantLabel?: string): Cluster {
  const pods: Pod[] = [
    { namespace: 'victim', name: 'api', labels: { app: 'api' }, ips: ['10.0.0.1'], node: 'n1', ports: [] },
  ];
  for (let n = 0; n < namespaces; n++)
    for (let i = 0; i < DEFAULT_FOREIGN_IDENTITY_CAP; i++)
      pods.push({
        namespace: `att${n}`,
        name: `a${i}`,
        labels: { app: 'web', x: String(i) },
        ips: [ip(n, i)],
        node: 'n2',
        ports: [],
        created: ts(1000 + n * 1000 + i),
      });
  return {
    namespaces: [
      { name: 'victim', labels: {} },
      ...Array.from({ length: namespaces }, (_, n) => ({
        name: `att${n}`,
        labels: tenantLabel ? { [tenantLabel]: 'mallory' } : {},
      })),
    ],
    nodes: [
      { name: 'n1', labels: {}, ips: ['192.168.0.1'] },
      { name: 'n2', labels: {}, ips: ['192.168.0.2'] },
    ],
    pods,
    policies: [floodVictimPolicy],
  };
}

const victimMapEntries = (e: NetpolEngine) => ruleEntries(e, 'victim/api', 'NetworkPolicy/victim/');

describe('the policy-map budget across namespaces (round three)', () => {
  it('seven namespaces at the cap do not get a victim refused: it is charged only for peers it controls', () => {
    const e = NetpolEngine.fromCluster(sevenAtTheCap(7));
    // the map holds an entry per selected identity and port: 7 x 512 x 32 (the old charge: 114,688)
    expect(victimMapEntries(e)).toBe(7 * 512 * 32);
    expect(networkPolicyCosts(e, 'n1').find((c) => c.namespace === 'victim')?.entries ?? 0).toBe(0);
    expect(budgetOverruns(networkPolicyCosts(e, 'n1'), DEFAULT_NAMESPACE_ENTRY_BUDGET)).toEqual([]);
    expect(enforceNamespaceBudget(e, DEFAULT_NAMESPACE_ENTRY_BUDGET, 'n1')).toEqual([]);
    // not isolated: its rule still admits the web pods
    expect(mapConnection(e, ip(6, 511), '10.0.0.1', 6, 8000).verdict).toBe('allow');
  });

  it('one owner labelled as one tenant shares one identity cap across its namespaces', () => {
    const e = NetpolEngine.fromCluster(sevenAtTheCap(7, DEFAULT_TENANT_LABEL));
    // the oldest 512 label sets of the tenant, whichever namespace holds them: att0's
    expect(victimMapEntries(e)).toBe(512 * 32);
    expect(mapConnection(e, ip(0, 511), '10.0.0.1', 6, 8000).verdict).toBe('allow');
    expect(mapConnection(e, ip(1, 0), '10.0.0.1', 6, 8000).verdict).toBe('deny'); // capped: its owner's loss
    // each namespace's report names its own label sets only
    const tenant = 'cascade.dev/tenant=mallory';
    expect(e.cappedNamespaces().slice(0, 2)).toEqual([
      { namespace: 'att1', labelSets: 512, capped: 512, tenant },
      { namespace: 'att2', labelSets: 512, capped: 512, tenant },
    ]);
    // the label comes off: each namespace is its own tenant again, under its own cap
    for (let n = 0; n < 7; n++) e.upsertNamespace({ name: `att${n}`, labels: {} });
    e.flush();
    expect(victimMapEntries(e)).toBe(7 * 512 * 32);
    expect(e.cappedNamespaces()).toEqual([]);
  });

  it('a refusal says nothing about pods elsewhere: the same with and without a guessed label there', () => {
    // a tenant's policy names its own pods plus a guess, with 600 ports: over a 1,000-entry budget
    // only if the guess were charged (the old oracle)
    const guess = (label: string): NetPolicyObject => ({
      kind: 'NetworkPolicy',
      namespace: 'snoop',
      name: 'probe',
      spec: {
        podSelector: { matchLabels: { app: 'snoop' } },
        ingress: [
          {
            from: [
              { podSelector: { matchLabels: { app: 'snoop' } } },
              { namespaceSelector: {}, podSelector: { matchLabels: { secret: label } } },
            ],
            ports: Array.from({ length: 600 }, (_, i) => ({ port: 1000 + 2 * i })),
          },
        ],
      },
    });
    const world = (label: string): NetpolEngine =>
      NetpolEngine.fromCluster({
        namespaces: [
          { name: 'snoop', labels: {} },
          { name: 'bank', labels: {} },
        ],
        nodes: [{ name: 'n1', labels: {}, ips: ['192.168.0.1'] }],
        pods: [
          {
            namespace: 'snoop',
            name: 's',
            labels: { app: 'snoop' },
            ips: ['10.0.0.1'],
            node: 'n1',
            ports: [],
          },
          {
            namespace: 'bank',
            name: 'v',
            labels: { secret: 'vault' },
            ips: ['10.0.0.2'],
            node: 'n1',
            ports: [],
          },
        ],
        policies: [guess(label)],
      });
    const hit = world('vault');
    const miss = world('nothing');
    // the guess that selects the bank's pod is in the map (the rule is enforced as written)...
    expect(mapConnection(hit, '10.0.0.2', '10.0.0.1', 6, 1000).verdict).toBe('allow');
    // ...but the charge, the refusal and its message are the same either way
    const cost = (e: NetpolEngine) => networkPolicyCosts(e, 'n1').map((c) => [c.policy, c.entries]);
    expect(cost(hit)).toEqual(cost(miss));
    expect(enforceNamespaceBudget(hit, 1_000, 'n1')).toEqual([]);
    const reasons = (e: NetpolEngine) => enforceNamespaceBudget(e, 500, 'n1').map((r) => r.reason);
    const [a, b] = [reasons(world('vault')), reasons(world('nothing'))];
    expect(a).toHaveLength(1);
    expect(a).toEqual(b);
    expect(a[0]).toMatch(/^namespace snoop needs 600 policy map entries on node n1 for peers it controls/);
  });

  it('a tenant over budget loses its newest NetworkPolicy first: what was admitted before stays', () => {
    const policy = (name: string, created: string, ports: number): NetPolicyObject => ({
      kind: 'NetworkPolicy',
      namespace: 't',
      name,
      creationTimestamp: created,
      spec: {
        podSelector: {},
        ingress: [
          {
            from: [{ podSelector: {} }],
            ports: Array.from({ length: ports }, (_, i) => ({
              port: 2000 + 2 * i + (name === 'new' ? 1 : 0),
            })),
          },
        ],
      },
    });
    const e = NetpolEngine.fromCluster({
      namespaces: [{ name: 't', labels: {} }],
      nodes: [{ name: 'n1', labels: {}, ips: ['192.168.0.1'] }],
      pods: [{ namespace: 't', name: 'p', labels: { app: 'p' }, ips: ['10.0.0.1'], node: 'n1', ports: [] }],
      // the older one is the larger: before round three, it was the one refused
      policies: [policy('old', ts(1), 400), policy('new', ts(2), 200)],
    });
    const refused = enforceNamespaceBudget(e, 500, 'n1');
    expect(refused.map((r) => r.policy)).toEqual(['NetworkPolicy/t/new']);
    expect(refused[0]!.reason).toMatch(/\(200 entries, its newest\) is refused/);
    expect(mapConnection(e, '10.0.0.1', '10.0.0.1', 6, 2000).verdict).toBe('allow');
  });
});

describe('tenants (tenants.ts)', () => {
  it('a namespace is its own tenant unless the admin label names one; the label key is checked', () => {
    expect(tenantOf('shop', {})).toBe('shop');
    expect(tenantOf('shop', { [DEFAULT_TENANT_LABEL]: 'acme' })).toBe('cascade.dev/tenant=acme');
    expect(tenantOf('shop', { 'capsule.clastix.io/tenant': 'acme' }, 'capsule.clastix.io/tenant')).toBe(
      'capsule.clastix.io/tenant=acme',
    );
    // no label configured: every namespace its own, whatever it carries
    expect(tenantOf('shop', { [DEFAULT_TENANT_LABEL]: 'acme' }, '')).toBe('shop');
    for (const ok of ['', 'team', 'capsule.clastix.io/tenant', 'field.cattle.io/projectId'])
      expect(validTenantLabel(ok), ok).toBe(true);
    for (const bad of ['team name', '/x', 'example.com/', 'a/b/c', 'Example.com/x', `${'a'.repeat(64)}`])
      expect(validTenantLabel(bad), bad).toBe(false);
  });
});
