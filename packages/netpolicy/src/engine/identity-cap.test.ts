// Issue 29 item 4: another namespace's pods must not push a namespace over its policy-map budget.
import { describe, expect, it } from 'vitest';
import { budgetOverruns, DEFAULT_NAMESPACE_ENTRY_BUDGET, networkPolicyCosts } from './budget.ts';
import { NetpolEngine } from './engine.ts';
import { DEFAULT_FOREIGN_IDENTITY_CAP } from './identity-cap.ts';
import type { NetPolicyObject } from './model.ts';
import { identityFloodCluster as cluster, floodIp as ip, ruleEntries } from './testing.ts';
import { mapConnection, oracleConnection } from './verdict.ts';

const ts = (i: number) => new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();

/** The victim policy's entries in the victim's rule sets on n1: what the map holds. */
const victimEntries = (e: NetpolEngine) => ruleEntries(e, 'victim/api', 'NetworkPolicy/victim/');
/** What the victim's tenant is charged for them. */
const victimCharged = (e: NetpolEngine) =>
  networkPolicyCosts(e, 'n1')
    .filter((c) => c.namespace === 'victim')
    .reduce((s, c) => s + c.entries, 0);

describe('per-tenant identity cap', () => {
  it('the issue attack (3,200 label sets) fills the victim rule set without the cap, but is not charged to it', () => {
    const e = NetpolEngine.fromCluster(cluster(3_200), { foreignIdentityCap: 1_000_000 });
    expect(victimEntries(e)).toBe(3_201 * 32);
    // round three: the victim is charged for the peers it controls only (none here)
    expect(victimCharged(e)).toBe(0);
    expect(budgetOverruns(networkPolicyCosts(e, 'n1'), DEFAULT_NAMESPACE_ENTRY_BUDGET)).toEqual([]);
  });

  it('fails with ten times the pods: the victim rule set holds the oldest 512 label sets at most', () => {
    const e = NetpolEngine.fromCluster(cluster(32_000));
    // frontend's one label set plus the attacker's oldest 512: well inside the budget.
    expect(victimEntries(e)).toBe((1 + DEFAULT_FOREIGN_IDENTITY_CAP) * 32);
    expect(budgetOverruns(networkPolicyCosts(e, 'n1'), DEFAULT_NAMESPACE_ENTRY_BUDGET)).toEqual([]);
    expect(e.cappedNamespaces()).toEqual([
      { namespace: 'attacker', labelSets: 32_000, capped: 32_000 - DEFAULT_FOREIGN_IDENTITY_CAP },
    ]);
    const verdict = (from: string) => mapConnection(e, from, '10.0.0.1', 6, 8000).verdict;
    expect(verdict('10.0.0.2')).toBe('allow'); // another tenant's web pod: untouched
    expect(verdict(ip(0))).toBe('allow'); // the attacker's oldest label sets still get in
    expect(verdict(ip(DEFAULT_FOREIGN_IDENTITY_CAP - 1))).toBe('allow');
    expect(verdict(ip(DEFAULT_FOREIGN_IDENTITY_CAP))).toBe('deny'); // capped: fails closed for its own namespace
    expect(oracleConnection(e, ip(DEFAULT_FOREIGN_IDENTITY_CAP), '10.0.0.1', 6, 8000).verdict).toBe('deny');
  });

  it('admin rules and the own namespace still see capped pods; wildcard peers still admit them', () => {
    const denyAdmin: NetPolicyObject = {
      kind: 'AdminNetworkPolicy',
      name: 'no-attacker-to-frontend',
      spec: {
        priority: 5,
        subject: { namespaces: { matchLabels: { 'kubernetes.io/metadata.name': 'frontend' } } },
        ingress: [
          {
            action: 'Deny',
            from: [
              {
                pods: {
                  namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'attacker' } },
                  podSelector: { matchLabels: { x: '7' } },
                },
              },
            ],
          },
        ],
      },
    };
    const own: NetPolicyObject = {
      kind: 'NetworkPolicy',
      namespace: 'attacker',
      name: 'own',
      spec: {
        podSelector: { matchLabels: { x: '0' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { x: '7' } } }] }],
      },
    };
    const anyPod: NetPolicyObject = {
      kind: 'NetworkPolicy',
      namespace: 'frontend',
      name: 'from-any-pod',
      spec: { podSelector: {}, ingress: [{ from: [{ namespaceSelector: {} }] }] },
    };
    const e = NetpolEngine.fromCluster(cluster(8, [denyAdmin, own, anyPod]), { foreignIdentityCap: 2 });
    expect(e.identities.get(e.podIdentity.get('attacker/a7')!)?.capped).toBe(true);
    for (const [from, to, want] of [
      [ip(7), '10.0.0.2', 'deny'], // admin Deny: capped or not
      [ip(6), '10.0.0.2', 'allow'], // `namespaceSelector: {}` is one wildcard entry: admits capped pods
      [ip(7), ip(0), 'allow'], // its own namespace's policy selects it
      [ip(7), '10.0.0.1', 'deny'], // the victim's label-selecting peer leaves it out
    ] as const) {
      expect(mapConnection(e, from, to, 6, 8000).verdict, `${from} -> ${to}`).toBe(want);
      expect(oracleConnection(e, from, to, 6, 8000).verdict, `${from} -> ${to}`).toBe(want);
    }
  });

  it('ranks by age: a newer label set never pushes an older one out; a freed place goes to the next oldest', () => {
    const c = cluster(4);
    const e = NetpolEngine.fromCluster(c, { foreignIdentityCap: 2 });
    const capped = () =>
      [...e.podIdentity].filter(([, id]) => e.identities.get(id)?.capped).map(([k]) => k.split('/')[1]);
    expect(capped()).toEqual(['a2', 'a3']);
    // A new pod whose labels sort first but was created last: capped, nobody else moves.
    e.upsertPod({
      ...cluster(1).pods.at(-1)!,
      name: 'late',
      labels: { app: 'web', x: '!' },
      ips: [ip(9)],
      created: ts(9_999),
    });
    e.flush();
    expect(capped().sort()).toEqual(['a2', 'a3', 'late']);
    // The oldest label set goes: a2 takes its place (its pods get a new identity), the rest stay.
    e.removePod('attacker', 'a0');
    e.flush();
    expect(capped().sort()).toEqual(['a3', 'late']);
    expect(mapConnection(e, ip(2), '10.0.0.1', 6, 8000).verdict).toBe('allow');
    expect(mapConnection(e, ip(3), '10.0.0.1', 6, 8000).verdict).toBe('deny');
  });
});
