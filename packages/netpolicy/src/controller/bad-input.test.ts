// Bad input: clear reasons naming the field, no crash, other policies unaffected.
import { describe, expect, it } from 'vitest';
import { NetpolEngine } from '../engine/engine.ts';
import { lintNetpol } from '../engine/lint.ts';
import type { NetPolicyObject } from '../engine/model.ts';
import { mapConnection } from '../engine/verdict.ts';
import { networkEffectives } from './published.ts';
import { networkPolicyConditions } from './published-conditions.ts';

const cluster = {
  namespaces: [{ name: 'x', labels: { ns: 'x' } }],
  nodes: [],
  pods: [
    {
      namespace: 'x',
      name: 'a',
      labels: { app: 'a' },
      ips: ['10.0.0.1'],
      ports: [{ name: 'http', port: 80, protocol: 'TCP' as const }],
    },
    { namespace: 'x', name: 'b', labels: { app: 'b' }, ips: ['10.0.0.2'], ports: [] },
  ],
};
const good: NetPolicyObject = {
  kind: 'NetworkPolicy',
  namespace: 'x',
  name: 'good',
  spec: { podSelector: { matchLabels: { app: 'a' } } },
};

function run(bad: NetPolicyObject) {
  const e = NetpolEngine.fromCluster({ ...cluster, policies: [bad, good] });
  const p = e.problems().find((x) => x.policy.includes(bad.name));
  // The valid deny-all on pod a still holds.
  expect(mapConnection(e, '10.0.0.2', '10.0.0.1', 6, 80).verdict).toBe('deny');
  return p;
}

describe('network policy bad input', () => {
  it.each([
    [
      'a malformed selector operator',
      {
        kind: 'NetworkPolicy',
        namespace: 'x',
        name: 'sel',
        spec: { podSelector: { matchExpressions: [{ key: 'app', operator: 'Like', values: ['a'] }] } },
      },
      'spec.podSelector.matchExpressions[0].operator: unknown operator "Like"',
    ],
    [
      'In without values',
      {
        kind: 'NetworkPolicy',
        namespace: 'x',
        name: 'sel2',
        spec: { podSelector: { matchExpressions: [{ key: 'app', operator: 'In' }] } },
      },
      'spec.podSelector.matchExpressions[0].values: operator In needs at least one value',
    ],
    [
      'a priority out of range',
      { kind: 'AdminNetworkPolicy', name: 'prio', spec: { priority: 1001, subject: { namespaces: {} } } },
      'spec.priority: Too big',
    ],
    [
      'an except outside its CIDR',
      {
        kind: 'NetworkPolicy',
        namespace: 'x',
        name: 'except',
        spec: {
          podSelector: {},
          ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/24', except: ['10.1.0.0/24'] } }] }],
        },
      },
      'spec.ingress[0].from[0].ipBlock.except[0]: 10.1.0.0/24 is not strictly inside 10.0.0.0/24',
    ],
    [
      'an invalid CIDR',
      {
        kind: 'AdminNetworkPolicy',
        name: 'cidr',
        spec: {
          priority: 1,
          subject: { namespaces: {} },
          egress: [{ action: 'Deny', to: [{ networks: ['10.0.0.300/8'] }] }],
        },
      },
      'spec.egress[0].to[0].networks[0]: "10.0.0.300/8" is not a valid CIDR',
    ],
    [
      'endPort below port',
      {
        kind: 'NetworkPolicy',
        namespace: 'x',
        name: 'range',
        spec: { podSelector: {}, ingress: [{ ports: [{ port: 90, endPort: 80 }] }] },
      },
      'spec.ingress[0].ports[0].endPort: 80 is below port 90',
    ],
    [
      'a BANP not named default',
      { kind: 'BaselineAdminNetworkPolicy', name: 'other', spec: { subject: { namespaces: {} } } },
      'metadata.name: a BaselineAdminNetworkPolicy must be named "default"',
    ],
    [
      'a wrong action',
      {
        kind: 'AdminNetworkPolicy',
        name: 'act',
        spec: {
          priority: 1,
          subject: { namespaces: {} },
          ingress: [{ action: 'Drop', from: [{ namespaces: {} }] }],
        },
      },
      'spec.ingress.0.action',
    ],
    [
      'a spec that is not an object',
      { kind: 'NetworkPolicy', namespace: 'x', name: 'str', spec: 'nope' },
      'spec: ',
    ],
  ])('%s: rejected with a reason, others unaffected', (_n, bad, message) => {
    const p = run(bad as NetPolicyObject);
    expect(p?.errors.join('\n')).toContain(message);
  });

  it('an unknown peer type fails closed and is reported as a warning', () => {
    const p = run({
      kind: 'AdminNetworkPolicy',
      name: 'unknown',
      spec: {
        priority: 1,
        subject: { namespaces: {} },
        ingress: [{ action: 'Allow', from: [{ serviceAccounts: {} }] }],
      },
    });
    expect(p?.errors).toEqual([]);
    expect(p?.warnings).toEqual([
      'spec.ingress[0].from[0]: no known peer field (namespaces, pods, nodes, networks): fails closed',
    ]);
  });

  it('nodes is not an ingress peer field: the peer fails closed, reported', () => {
    const p = run({
      kind: 'AdminNetworkPolicy',
      name: 'nodes',
      spec: {
        priority: 1,
        subject: { namespaces: {} },
        ingress: [{ action: 'Deny', from: [{ nodes: {} }] }],
      },
    });
    expect(p?.warnings).toEqual([
      'spec.ingress[0].from[0]: no known peer field (namespaces, pods, nodes, networks): fails closed',
    ]);
  });

  it('a named port that matches nothing is reported: a NetworkPolicy against its own pods only', () => {
    const named: NetPolicyObject = {
      kind: 'NetworkPolicy',
      namespace: 'x',
      name: 'named',
      spec: { podSelector: {}, ingress: [{ ports: [{ port: 'grpc' }, { port: 'http' }] }] },
    };
    const e = NetpolEngine.fromCluster({ ...cluster, policies: [named] });
    expect(e.problems().find((x) => x.policy === 'NetworkPolicy/x/named')).toBeUndefined();
    expect(lintNetpol(e)).toEqual([
      expect.objectContaining({
        policy: 'NetworkPolicy/x/named',
        code: 'UnknownNamedPort',
        message:
          'ingress[0]: named port "grpc" matches no container port of the pods it selects: that port allows nothing',
      }),
    ]);
    const cond = networkPolicyConditions(e).get('NetworkPolicy/x/named')!;
    expect(cond.find((c) => c.type === 'RulesEffective')).toMatchObject({
      status: 'False',
      reason: 'UnknownNamedPort',
    });
    // an admin policy's named ports are still checked against every pod (its author sees them all)
    const p = run({
      kind: 'AdminNetworkPolicy',
      name: 'admin-named',
      spec: {
        priority: 2,
        subject: { namespaces: {} },
        ingress: [{ action: 'Allow', from: [{ namespaces: {} }], ports: [{ namedPort: 'grpc' }] }],
      },
    });
    expect(p?.warnings).toEqual(['ingress[0]: named port "grpc" matches no container port']);
  });

  it('a NetworkPolicy that selects no pod, or whose egress named port its own pods lack, is reported; peers elsewhere are not looked at', () => {
    const policies: NetPolicyObject[] = [
      {
        kind: 'NetworkPolicy',
        namespace: 'x',
        name: 'typo',
        spec: { podSelector: { matchLabels: { app: 'wbe' } } },
      },
      {
        kind: 'NetworkPolicy',
        namespace: 'x',
        name: 'egress',
        spec: {
          podSelector: {},
          policyTypes: ['Egress'],
          egress: [
            { to: [{ podSelector: { matchLabels: { app: 'b' } } }], ports: [{ port: 'htpp' }] },
            // a peer in other namespaces: whether their pods have the port is not this author's to learn
            { to: [{ namespaceSelector: {} }], ports: [{ port: 'htpp' }] },
          ],
        },
      },
    ];
    const e = NetpolEngine.fromCluster({ ...cluster, policies });
    const found = lintNetpol(e).map((f) => [f.policy, f.code, f.message]);
    expect(found).toEqual([
      [
        'NetworkPolicy/x/typo',
        'NoPods',
        'selects no pod: podSelector {app=wbe} matches none of the pods in namespace x; the policy has no effect now',
      ],
      [
        'NetworkPolicy/x/egress',
        'UnknownNamedPort',
        'egress[0]: named port "htpp" matches no container port of the pods it reaches: that port allows nothing',
      ],
    ]);
    const typo = networkPolicyConditions(e).get('NetworkPolicy/x/typo')!;
    expect(typo.find((c) => c.type === 'Selecting')).toMatchObject({ status: 'False', reason: 'NoPods' });
    expect(typo.find((c) => c.type === 'RulesEffective')).toMatchObject({ status: 'True' });
  });
});

describe('a NetworkPolicy Cascade cannot read fails closed', () => {
  const engine = (...policies: NetPolicyObject[]) => NetpolEngine.fromCluster({ ...cluster, policies });
  const verdict = (e: NetpolEngine, from: string, to: string) => mapConnection(e, from, to, 6, 80).verdict;
  const A = '10.0.0.1';
  const B = '10.0.0.2';

  it('the pods it selects stay isolated, nothing it allows is allowed, other pods and policies unaffected', () => {
    const typo: NetPolicyObject = {
      kind: 'NetworkPolicy',
      namespace: 'x',
      name: 'typo',
      spec: { podSelector: { matchLabels: { app: 'a' } }, ingres: [{ from: [{ podSelector: {} }] }] },
    };
    const e = engine(typo);
    expect(verdict(e, B, A)).toBe('deny'); // a is isolated for ingress, the misspelt rule allows nothing
    expect(verdict(e, A, B)).toBe('allow'); // b is not selected; egress is not isolated
    const p = e.problems().find((x) => x.policy === 'NetworkPolicy/x/typo')!;
    expect(p.errors.join()).toMatch(/ingres/);
    expect(p.warnings).toEqual([
      'fail closed: the pods it selects stay isolated (ingress) and none of its rules allows anything until it is fixed',
    ]);
    const cond = networkPolicyConditions(e).get('NetworkPolicy/x/typo')![0]!;
    expect(cond).toMatchObject({ type: 'Accepted', status: 'False', reason: 'Invalid' });
    expect(cond.message).toMatch(/ingres.*; fail closed: the pods it selects stay isolated \(ingress\)/);
    // a valid policy still allows what it allows (allows add up)
    const allow: NetPolicyObject = {
      kind: 'NetworkPolicy',
      namespace: 'x',
      name: 'allow-b',
      spec: {
        podSelector: { matchLabels: { app: 'a' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'b' } } }] }],
      },
    };
    expect(verdict(engine(typo, allow), B, A)).toBe('allow');
    // the EffectivePolicy says why: the invalid policy's isolation is listed
    const ep = networkEffectives(e).find((x) => x.labels.app === 'a')!;
    expect(ep.ingress.map((r) => `${r.policy} ${r.rule} ${r.action}`)).toEqual([
      'NetworkPolicy/x/typo ingress isolation Deny',
    ]);
  });

  it('reads what it can: an unreadable podSelector isolates the namespace, policyTypes decide the directions', () => {
    const e = engine({
      kind: 'NetworkPolicy',
      namespace: 'x',
      name: 'sel',
      spec: { podSelector: 'everything', policyTypes: ['Egress'] },
    } as unknown as NetPolicyObject);
    expect(verdict(e, A, B)).toBe('deny'); // egress of every pod in x
    expect(verdict(e, B, A)).toBe('deny');
    expect(e.problems()[0]!.warnings[0]).toMatch(/isolated \(egress\)/);
    const both = engine({
      kind: 'NetworkPolicy',
      namespace: 'x',
      name: 'types',
      spec: { podSelector: { matchLabels: { app: 'b' } }, policyTypes: ['Sideways'] },
    } as unknown as NetPolicyObject);
    expect(both.problems()[0]!.warnings[0]).toMatch(/isolated \(ingress, egress\)/);
    expect(verdict(both, A, B)).toBe('deny'); // b's ingress
    expect(verdict(both, B, A)).toBe('deny'); // b's egress
  });

  it('an invalid admin policy is not enforced: the cluster admin is trusted and sees Accepted=False', () => {
    const e = engine({
      kind: 'AdminNetworkPolicy',
      name: 'prio',
      spec: { priority: 1001, subject: { namespaces: {} } },
    });
    expect(verdict(e, A, B)).toBe('allow');
    expect(e.problems()[0]!.warnings).toEqual([]);
  });
});
