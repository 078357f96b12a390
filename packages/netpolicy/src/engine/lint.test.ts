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
    expect(lintNetpol(e).filter((f) => /same priority/.test(f.message))).toEqual([]);
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

describe('NetworkPolicy rules made dead by admin rules', () => {
  const cluster = {
    namespaces: [
      { name: 'db', labels: { team: 'db' } },
      { name: 'web', labels: { team: 'web' } },
    ],
    nodes: [{ name: 'n1', labels: {}, ips: ['192.168.0.1'] }],
    pods: [
      {
        namespace: 'db',
        name: 'pg',
        labels: { app: 'pg' },
        ips: ['10.0.0.1'],
        node: 'n1',
        ports: [{ name: 'sql', port: 5432, protocol: 'TCP' as const }],
      },
      { namespace: 'web', name: 'front', labels: { app: 'front' }, ips: ['10.0.1.1'], node: 'n1', ports: [] },
    ],
  };
  const np = (ingress: unknown[]) => ({
    kind: 'NetworkPolicy' as const,
    namespace: 'db',
    name: 'pg-in',
    spec: { podSelector: { matchLabels: { app: 'pg' } }, ingress },
  });
  const npEgress = (egress: unknown[]) => ({
    kind: 'NetworkPolicy' as const,
    namespace: 'db',
    name: 'pg-out',
    spec: { podSelector: {}, policyTypes: ['Egress'], egress },
  });
  const anp = (name: string, priority: number, ingress: unknown[], egress: unknown[] = []) => ({
    kind: 'AdminNetworkPolicy' as const,
    name,
    spec: { priority, subject: { namespaces: { matchLabels: { team: 'db' } } }, ingress, egress },
  });
  const dead = (policies: unknown[]) =>
    lintNetpol(NetpolEngine.fromCluster({ ...cluster, policies } as never))
      .map((f) => f.message)
      .filter((m) => m.includes('is dead'));
  const fromWeb = { namespaceSelector: { matchLabels: { team: 'web' } } };

  it('reports a rule whose every connection an ANP denies or allows, naming the deciders', () => {
    const m = dead([
      np([{ from: [fromWeb] }]),
      anp('sql-from-web', 1, [
        {
          name: 'sql',
          action: 'Allow',
          from: [{ namespaces: { matchLabels: { team: 'web' } } }],
          ports: [{ namedPort: 'sql' }],
        },
      ]),
      anp('nothing-else', 2, [{ name: 'rest', action: 'Deny', from: [{ namespaces: {} }] }]),
    ]);
    expect(m).toHaveLength(1);
    expect(m[0]).toMatch(
      /^NetworkPolicy\/db\/pg-in#ingress\[0\] is dead: all \d+ connections it would allow/,
    );
    expect(m[0]).toContain('AdminNetworkPolicy/sql-from-web#sql (allow, 1)');
    expect(m[0]).toContain('AdminNetworkPolicy/nothing-else#rest (deny,');
  });

  it('keeps a rule live when some port, protocol or peer reaches NetworkPolicy', () => {
    // The ANP only denies TCP 1-1024: UDP and high ports still reach the NetworkPolicy.
    expect(
      dead([
        np([{ from: [fromWeb] }]),
        anp('low-ports', 1, [
          {
            action: 'Deny',
            from: [{ namespaces: {} }],
            ports: [{ portRange: { protocol: 'TCP', start: 1, end: 1024 } }],
          },
        ]),
      ]),
    ).toEqual([]);
    // With a port list inside the denied range, the rule is dead.
    expect(
      dead([
        np([{ from: [fromWeb], ports: [{ port: 80 }, { port: 443 }] }]),
        anp('low-ports', 1, [
          {
            action: 'Deny',
            from: [{ namespaces: {} }],
            ports: [{ portRange: { protocol: 'TCP', start: 1, end: 1024 } }],
          },
        ]),
      ]),
    ).toHaveLength(1);
    // Port 0 (the range's edge) is outside 1-1024: a rule on ports 0-80 stays live.
    expect(
      dead([
        np([{ from: [fromWeb], ports: [{ port: 0, endPort: 80 }] }]),
        anp('low-ports', 1, [
          {
            action: 'Deny',
            from: [{ namespaces: {} }],
            ports: [{ portRange: { protocol: 'TCP', start: 1, end: 1024 } }],
          },
        ]),
      ]),
    ).toEqual([]);
  });

  it('treats Pass as handing the traffic to NetworkPolicy', () => {
    expect(
      dead([
        np([{ from: [fromWeb] }]),
        anp('pass', 1, [{ action: 'Pass', from: [{ namespaces: {} }] }]),
        anp('deny', 2, [{ action: 'Deny', from: [{ namespaces: {} }] }]),
      ]),
    ).toEqual([]);
  });

  it('cuts the address space at every CIDR edge for ipBlock rules', () => {
    const rule = [{ to: [{ ipBlock: { cidr: '203.0.113.0/24' } }] }];
    expect(
      dead([
        npEgress(rule),
        anp('no-net', 1, [], [{ action: 'Deny', to: [{ networks: ['203.0.113.0/24'] }] }]),
      ]),
    ).toHaveLength(1);
    // Half the block is still judged by the NetworkPolicy.
    expect(
      dead([
        npEgress(rule),
        anp('half', 1, [], [{ action: 'Deny', to: [{ networks: ['203.0.113.0/25'] }] }]),
      ]),
    ).toEqual([]);
    // ... unless that half is the NetworkPolicy's own except.
    expect(
      dead([
        npEgress([{ to: [{ ipBlock: { cidr: '203.0.113.0/24', except: ['203.0.113.128/25'] } }] }]),
        anp('half', 1, [], [{ action: 'Deny', to: [{ networks: ['203.0.113.0/25'] }] }]),
      ]),
    ).toHaveLength(1);
  });

  it('says nothing for a rule that matches no connection at all', () => {
    expect(
      dead([
        np([{ from: [{ namespaceSelector: { matchLabels: { team: 'nobody' } } }] }]),
        anp('deny', 1, [{ action: 'Deny', from: [{ namespaces: {} }] }]),
      ]),
    ).toEqual([]);
  });
});
