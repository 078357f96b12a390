// Scenario suite in the style of the Kubernetes NetworkPolicy truth tables and the network-policy-api
// conformance tests: namespaces x, y, z with pods a, b, c laid out once; each case applies policies
// and checks a probe matrix. Expectations are written from the API semantics; every probe is checked
// against both the direct evaluation and the lowered MapState.
import { describe, expect, it } from 'vitest';
import { NetpolEngine } from './engine.ts';
import type { Cluster, NetPolicyObject, Pod } from './model.ts';
import { mapConnection, oracleConnection } from './verdict.ts';

const NS = ['x', 'y', 'z'];
const PODS = ['a', 'b', 'c'];
const ip = (ns: string, pod: string) => `10.${NS.indexOf(ns) + 1}.0.${PODS.indexOf(pod) + 1}`;
const pods: Pod[] = NS.flatMap((ns) =>
  PODS.map((p) => ({
    namespace: ns,
    name: p,
    labels: { pod: p },
    ips: [ip(ns, p)],
    node: ns === 'x' ? 'n1' : 'n2',
    ports: [
      { name: 'serve-80-tcp', port: 80, protocol: 'TCP' as const },
      { name: 'serve-81-tcp', port: 81, protocol: 'TCP' as const },
      { name: 'serve-53-udp', port: 53, protocol: 'UDP' as const },
      { name: 'serve-9000-sctp', port: 9000, protocol: 'SCTP' as const },
    ],
  })),
);
const NODE1 = '192.168.1.1';
const NODE2 = '192.168.1.2';
const base: Omit<Cluster, 'policies'> = {
  namespaces: NS.map((n) => ({ name: n, labels: { ns: n, 'kubernetes.io/metadata.name': n } })),
  nodes: [
    { name: 'n1', labels: { role: 'x-host' }, ips: [NODE1] },
    { name: 'n2', labels: { role: 'yz-host' }, ips: [NODE2] },
  ],
  pods,
};
const TCP = 6;
const UDP = 17;
const SCTP = 132;
const ALL = NS.flatMap((n) => PODS.map((p) => `${n}/${p}`));
const addr = (x: string) => (x.includes('/') ? ip(...(x.split('/') as [string, string])) : x);

/** Verdicts for from->to pairs; expected: the list of denied pairs (everything else allowed). */
function check(
  policies: NetPolicyObject[],
  proto: number,
  port: number,
  denied: string[],
  from = ALL,
  to = ALL,
): void {
  const e = NetpolEngine.fromCluster({ ...base, policies });
  for (const p of e.policies.values()) expect(p.built.errors, p.built.key).toEqual([]);
  const want = new Set(denied);
  const got: string[] = [];
  for (const f of from) {
    for (const t of to) {
      const o = oracleConnection(e, addr(f), addr(t), proto, port);
      const m = mapConnection(e, addr(f), addr(t), proto, port);
      expect(m.verdict, `${f}->${t} ${proto}/${port}: map vs oracle`).toBe(o.verdict);
      if (o.verdict === 'deny') got.push(`${f}->${t}`);
    }
  }
  expect(got.sort()).toEqual([...want].sort());
}

const pairs = (from: string[], to: string[]) =>
  from.flatMap((f) => to.filter((t) => t !== f).map((t) => `${f}->${t}`));
const inNs = (ns: string) => PODS.map((p) => `${ns}/${p}`);
const np = (ns: string, name: string, spec: unknown): NetPolicyObject => ({
  kind: 'NetworkPolicy',
  namespace: ns,
  name,
  spec,
});
const anp = (name: string, spec: unknown): NetPolicyObject => ({ kind: 'AdminNetworkPolicy', name, spec });
const banp = (spec: unknown): NetPolicyObject => ({
  kind: 'BaselineAdminNetworkPolicy',
  name: 'default',
  spec,
});
const cnp = (name: string, spec: unknown): NetPolicyObject => ({ kind: 'ClusterNetworkPolicy', name, spec });
const nsSel = (n: string) => ({ matchLabels: { ns: n } });

describe('NetworkPolicy v1', () => {
  it('no policy: everything is allowed', () => check([], TCP, 80, []));

  it('deny-all ingress in x isolates x pods for ingress only; self is still allowed', () => {
    check([np('x', 'deny', { podSelector: {} })], TCP, 80, pairs(ALL, inNs('x')));
  });

  it('allow from the same namespace: podSelector {} in from', () => {
    check(
      [np('x', 'same-ns', { podSelector: {}, ingress: [{ from: [{ podSelector: {} }] }] })],
      TCP,
      80,
      pairs([...inNs('y'), ...inNs('z')], inNs('x')),
    );
  });

  it('namespaceSelector AND podSelector in one peer vs two peers (OR)', () => {
    const and = np('x', 'and', {
      podSelector: { matchLabels: { pod: 'a' } },
      ingress: [{ from: [{ namespaceSelector: nsSel('y'), podSelector: { matchLabels: { pod: 'b' } } }] }],
    });
    check(
      [and],
      TCP,
      80,
      pairs(
        ALL.filter((f) => f !== 'y/b'),
        ['x/a'],
      ),
    );
    const or = np('x', 'or', {
      podSelector: { matchLabels: { pod: 'a' } },
      ingress: [
        { from: [{ namespaceSelector: nsSel('y') }, { podSelector: { matchLabels: { pod: 'b' } } }] },
      ],
    });
    check([or], TCP, 80, pairs(['x/c', ...inNs('z')], ['x/a']));
  });

  it('ports: a number, a named port, and an endPort range; other protocols are not opened', () => {
    const pol = (ports: unknown) => np('x', 'ports', { podSelector: {}, ingress: [{ ports }] });
    check([pol([{ protocol: 'TCP', port: 80 }])], TCP, 80, []);
    check([pol([{ protocol: 'TCP', port: 80 }])], TCP, 81, pairs(ALL, inNs('x')));
    check([pol([{ protocol: 'TCP', port: 80 }])], UDP, 80, pairs(ALL, inNs('x')));
    check([pol([{ port: 'serve-81-tcp' }])], TCP, 81, []);
    check([pol([{ port: 'serve-81-tcp' }])], TCP, 80, pairs(ALL, inNs('x')));
    check([pol([{ protocol: 'TCP', port: 80, endPort: 81 }])], TCP, 81, []);
    check([pol([{ protocol: 'TCP', port: 80, endPort: 81 }])], TCP, 82, pairs(ALL, inNs('x')));
    check([pol([{ protocol: 'SCTP', port: 9000 }])], SCTP, 9000, []);
    check([pol([{ protocol: 'UDP' }])], UDP, 53, []);
  });

  it('policyTypes defaults: egress rules alone make the policy Ingress+Egress', () => {
    const p = np('x', 'egress-only', {
      podSelector: { matchLabels: { pod: 'a' } },
      egress: [{ to: [{ namespaceSelector: nsSel('y') }] }],
    });
    check([p], TCP, 80, [...pairs(['x/a'], ['x/b', 'x/c', ...inNs('z')]), ...pairs([...ALL], ['x/a'])]);
  });

  it('empty ingress list with policyTypes [Egress] does not isolate ingress', () => {
    check([np('x', 'e', { podSelector: {}, policyTypes: ['Egress'] })], TCP, 80, pairs(inNs('x'), ALL));
  });

  it('ipBlock with except, egress to external addresses', () => {
    const p = np('x', 'cidr', {
      podSelector: {},
      policyTypes: ['Egress'],
      egress: [{ to: [{ ipBlock: { cidr: '8.0.0.0/8', except: ['8.8.0.0/16'] } }] }],
    });
    check(
      [p],
      TCP,
      443,
      ['x/a->8.8.8.8', 'x/a->203.0.113.1'],
      ['x/a'],
      ['8.1.2.3', '8.8.8.8', '203.0.113.1'],
    );
  });

  // Upstream semantics (the Kubernetes e2e tests, Calico, Antrea, kube-network-policies): ipBlock
  // matches pod addresses too, and `except` takes pods out.
  it('ipBlock selects pod addresses; except takes them out again', () => {
    const p = np('x', 'cidr', {
      podSelector: {},
      ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/8' } }] }],
    });
    check([p], TCP, 80, []);
    const narrow = np('x', 'cidr', {
      podSelector: {},
      ingress: [{ from: [{ ipBlock: { cidr: '10.2.0.0/16', except: [`${ip('y', 'b')}/32`] } }] }],
    });
    // from y (10.2.0.0/16) but y/b, and nothing from x or z
    check(
      [narrow],
      TCP,
      80,
      pairs(ALL, inNs('x')).filter((pr) => !pr.startsWith('y/') || pr.startsWith('y/b->')),
    );
  });
});

describe('AdminNetworkPolicy, BaselineAdminNetworkPolicy and ClusterNetworkPolicy', () => {
  const denyFromY = anp('deny-y', {
    priority: 10,
    subject: { namespaces: nsSel('x') },
    ingress: [{ action: 'Deny', from: [{ namespaces: nsSel('y') }] }],
  });
  const allowAllX = np('x', 'allow-all', { podSelector: {}, ingress: [{}] });

  it('an ANP Deny beats a NetworkPolicy allow', () =>
    check([denyFromY, allowAllX], TCP, 80, pairs(inNs('y'), inNs('x'))));

  it('lower priority number first; rule order inside one ANP', () => {
    const allowY = anp('allow-y', {
      priority: 5,
      subject: { namespaces: nsSel('x') },
      ingress: [{ action: 'Allow', from: [{ namespaces: nsSel('y') }] }],
    });
    check([denyFromY, allowY], TCP, 80, []);
    const ordered = anp('ordered', {
      priority: 1,
      subject: { namespaces: nsSel('x') },
      ingress: [
        {
          action: 'Allow',
          from: [{ pods: { namespaceSelector: nsSel('y'), podSelector: { matchLabels: { pod: 'a' } } } }],
        },
        { action: 'Deny', from: [{ namespaces: {} }] },
      ],
    });
    check(
      [ordered],
      TCP,
      80,
      pairs(
        ALL.filter((f) => f !== 'y/a'),
        inNs('x'),
      ),
    );
  });

  it('same priority: the alphabetically first name decides (documented tie-break)', () => {
    const b = anp('b-allow', {
      priority: 7,
      subject: { namespaces: nsSel('x') },
      ingress: [{ action: 'Allow', from: [{ namespaces: nsSel('y') }] }],
    });
    const a = anp('a-deny', {
      priority: 7,
      subject: { namespaces: nsSel('x') },
      ingress: [{ action: 'Deny', from: [{ namespaces: nsSel('y') }] }],
    });
    check([b, a], TCP, 80, pairs(inNs('y'), inNs('x')));
  });

  it('Pass hands traffic to NetworkPolicy; with no NetworkPolicy, to the BANP', () => {
    const pass = anp('pass', {
      priority: 1,
      subject: { namespaces: {} },
      ingress: [
        { action: 'Pass', from: [{ namespaces: nsSel('y') }] },
        { action: 'Deny', from: [{ namespaces: {} }] },
      ],
    });
    const npDenyAll = np('x', 'deny', { podSelector: {} });
    const banpDenyY = banp({
      subject: { namespaces: {} },
      ingress: [{ action: 'Deny', from: [{ namespaces: nsSel('y') }] }],
    });
    // y -> x: passed, x has a deny-all NP: denied. y -> z: passed, no NP in z, BANP denies y.
    // Everything else hits the Deny below the Pass.
    const all = pairs(ALL, ALL).filter((p) => {
      const [f, t] = p.split('->') as [string, string];
      return !(f.startsWith('y/') && t.startsWith('y/'));
    });
    check([pass, npDenyAll, banpDenyY], TCP, 80, [...all, ...pairs(inNs('y'), inNs('y'))]);
  });

  it('BANP applies only where no NetworkPolicy selects the pod in that direction', () => {
    const b = banp({
      subject: { namespaces: {} },
      ingress: [{ action: 'Deny', from: [{ namespaces: nsSel('z') }] }],
    });
    const allowX = np('x', 'allow-z', {
      podSelector: {},
      ingress: [{ from: [{ namespaceSelector: nsSel('z') }] }],
    });
    // x is governed by its NP (z allowed, others denied by isolation); y and z by the BANP (z denied).
    check([b, allowX], TCP, 80, [
      ...pairs([...inNs('x'), ...inNs('y')], inNs('x')),
      ...pairs(inNs('z'), [...inNs('y'), ...inNs('z')]),
    ]);
  });

  it('ClusterNetworkPolicy v1alpha2: Admin Accept/Deny with protocols, Baseline Deny and Baseline Pass', () => {
    const admin = cnp('admin', {
      tier: 'Admin',
      priority: 1,
      subject: { namespaces: nsSel('x') },
      ingress: [
        {
          action: 'Accept',
          from: [{ namespaces: {} }],
          protocols: [{ tcp: { destinationPort: { number: 80 } } }],
        },
        { action: 'Deny', from: [{ namespaces: nsSel('z') }] },
      ],
    });
    check([admin], TCP, 80, []);
    check([admin], TCP, 81, pairs(inNs('z'), inNs('x')));
    const baseline = cnp('baseline', {
      tier: 'Baseline',
      priority: 1,
      subject: { namespaces: {} },
      ingress: [
        { action: 'Pass', from: [{ namespaces: nsSel('y') }] },
        { action: 'Deny', from: [{ namespaces: {} }] },
      ],
    });
    check(
      [baseline],
      UDP,
      53,
      pairs(ALL, ALL).filter((p) => !p.startsWith('y/')),
    );
  });

  it('ClusterNetworkPolicy pods without namespaceSelector select pods of every namespace (subject and peers); an AdminNetworkPolicy must name them', () => {
    // network-policy-api v0.2.0 on (v0.3.0's CNPAdminTierPodSelector): only podSelector is required
    const byLabel = cnp('by-label', {
      tier: 'Admin',
      priority: 1,
      subject: { pods: { podSelector: { matchLabels: { pod: 'a' } } } },
      egress: [{ action: 'Deny', to: [{ pods: { podSelector: { matchLabels: { pod: 'b' } } } }] }],
      ingress: [{ action: 'Deny', from: [{ pods: { podSelector: { matchLabels: { pod: 'c' } } } }] }],
    });
    const as = ALL.filter((x) => x.endsWith('/a'));
    const bs = ALL.filter((x) => x.endsWith('/b'));
    const cs = ALL.filter((x) => x.endsWith('/c'));
    check([byLabel], TCP, 80, [...pairs(as, bs), ...pairs(cs, as)]);
    const e = NetpolEngine.fromCluster({
      ...base,
      policies: [
        anp('no-ns', {
          priority: 1,
          subject: { pods: { podSelector: { matchLabels: { pod: 'a' } } } },
          egress: [{ action: 'Deny', to: [{ namespaces: {} }] }],
        }),
      ],
    });
    expect([...e.policies.values()][0]!.built.errors.join()).toMatch(
      /spec\.subject\.pods\.namespaceSelector/,
    );
  });

  it('named ports and port ranges in admin rules', () => {
    const p = anp('ports', {
      priority: 1,
      subject: { namespaces: nsSel('x') },
      ingress: [
        {
          action: 'Allow',
          from: [{ namespaces: {} }],
          ports: [{ namedPort: 'serve-53-udp' }, { portRange: { start: 80, end: 81 } }],
        },
        { action: 'Deny', from: [{ namespaces: {} }] },
      ],
    });
    check([p], UDP, 53, []);
    check([p], TCP, 81, []);
    check([p], TCP, 82, pairs(ALL, inNs('x')));
    check([p], TCP, 53, pairs(ALL, inNs('x')));
  });

  it('egress to nodes and to networks (which also match pod addresses, never node addresses)', () => {
    const p = anp('egress', {
      priority: 1,
      subject: { namespaces: nsSel('x') },
      egress: [
        { action: 'Allow', to: [{ nodes: { matchLabels: { role: 'yz-host' } } }] },
        { action: 'Allow', to: [{ networks: ['10.2.0.0/16'] }] },
        { action: 'Deny', to: [{ networks: ['0.0.0.0/0'] }] },
      ],
    });
    // Deny 0.0.0.0/0 matches pods too (networks select pod IPs): x -> x (but self) and x -> z denied.
    const to = [...ALL, NODE1, NODE2, '1.1.1.1'];
    check(
      [p],
      TCP,
      80,
      [...pairs(inNs('x'), [...inNs('x'), ...inNs('z')]), 'x/a->1.1.1.1', 'x/b->1.1.1.1', 'x/c->1.1.1.1'],
      inNs('x'),
      to,
    );
  });

  it("a pod's own node is a node like any other in the admin tier and the baseline; only a NetworkPolicy cannot block it", () => {
    // (network-policy-api's CNPAdminTierEgressNodePeers and CNPBaselineTierEgressNodePeers, with the
    // client on the node it dials.) x runs on n1, y and z on n2.
    const to = [NODE1, NODE2];
    const admin = anp('nodes', {
      priority: 1,
      subject: { namespaces: nsSel('x') },
      egress: [
        { action: 'Deny', to: [{ nodes: {} }], ports: [{ portNumber: { protocol: 'TCP', port: 80 } }] },
        { action: 'Pass', to: [{ nodes: {} }], ports: [{ portNumber: { protocol: 'TCP', port: 81 } }] },
      ],
    });
    const isolateX = np('x', 'isolate-egress', { podSelector: {}, policyTypes: ['Egress'] });
    // admin Deny: the own node too
    check([admin, isolateX], TCP, 80, pairs(inNs('x'), to), inNs('x'), to);
    // admin Pass, then the NetworkPolicy's isolation: it blocks the other node, not the own one
    check([admin, isolateX], TCP, 81, pairs(inNs('x'), [NODE2]), inNs('x'), to);
    // no admin rule, isolation: the same
    check([isolateX], TCP, 82, pairs(inNs('x'), [NODE2]), inNs('x'), to);
    // the baseline denies nodes: the own node too, where no NetworkPolicy governs the pod
    const base = banp({
      subject: { namespaces: nsSel('y') },
      egress: [{ action: 'Deny', to: [{ nodes: { matchLabels: { role: 'yz-host' } } }] }],
    });
    check([base], UDP, 53, pairs(inNs('y'), [NODE2]), inNs('y'), to);
    // ingress from the own node (kubelet probes) under isolation: allowed; from the other: isolated
    const isolateIn = np('x', 'isolate-ingress', { podSelector: {} });
    check([isolateIn], TCP, 8080, pairs([NODE2], inNs('x')), to, inNs('x'));
  });

  it('fails closed: an unknown peer matches everything in Deny and nothing in Allow', () => {
    const deny = anp('unknown-deny', {
      priority: 1,
      subject: { namespaces: nsSel('x') },
      ingress: [{ action: 'Deny', from: [{ futurePeer: {} }] }],
    });
    check([deny], TCP, 80, pairs(ALL, inNs('x')));
    const allow = anp('unknown-allow', {
      priority: 1,
      subject: { namespaces: nsSel('x') },
      ingress: [{ action: 'Allow', from: [{ futurePeer: {} }] }],
    });
    check([allow, np('x', 'deny', { podSelector: {} })], TCP, 80, pairs(ALL, inNs('x')));
  });

  it('a connection needs egress at the source and ingress at the destination', () => {
    const egressDeny = anp('e', {
      priority: 1,
      subject: { namespaces: nsSel('y') },
      egress: [{ action: 'Deny', to: [{ namespaces: nsSel('x') }] }],
    });
    const ingressAllow = anp('i', {
      priority: 0,
      subject: { namespaces: nsSel('x') },
      ingress: [{ action: 'Allow', from: [{ namespaces: {} }] }],
    });
    check([egressDeny, ingressAllow], TCP, 80, pairs(inNs('y'), inNs('x')));
  });
});
