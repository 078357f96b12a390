// Random clusters, policies and probes (fast-check arbitraries) for the property and differential
// tests of the lowering and of the kernel datapath.
import fc from 'fast-check';
import { NetpolEngine } from './engine.ts';
import type { Cluster, NetPolicyObject, Node, Pod } from './model.ts';
import { policyKey } from './rules.ts';
import { STAGED_KINDS, type StagedKindName, type StagedPolicy } from './staged.ts';

export interface Probe {
  from: string;
  to: string;
  proto: number;
  port: number;
}

const NAMESPACES = [
  { name: 'alpha', labels: { team: 'a', env: 'prod', 'kubernetes.io/metadata.name': 'alpha' } },
  { name: 'beta', labels: { team: 'b', env: 'prod', 'kubernetes.io/metadata.name': 'beta' } },
  { name: 'gamma', labels: { team: 'a', env: 'dev', 'kubernetes.io/metadata.name': 'gamma' } },
];
export const TEST_NODES: Node[] = [
  { name: 'n1', labels: { role: 'worker', zone: 'z1' }, ips: ['192.168.0.1'] },
  { name: 'n2', labels: { role: 'infra', zone: 'z2' }, ips: ['192.168.0.2'] },
];
export const EXTERNAL_IPS = ['8.8.8.8', '10.200.0.7', '172.16.5.5', '203.0.113.9'];
export const PORTS = [53, 80, 443, 5432, 8080, 8443, 65535, 1];
export const PROTOS = [6, 17, 132, 1];

const labelSel = fc.oneof(
  fc.constant({}),
  fc.record({ matchLabels: fc.record({ app: fc.constantFrom('web', 'db', 'api') }) }),
  fc.record({ matchLabels: fc.record({ tier: fc.constantFrom('front', 'back') }) }),
  fc.record({ matchExpressions: fc.constant([{ key: 'app', operator: 'In', values: ['web', 'api'] }]) }),
  fc.record({ matchExpressions: fc.constant([{ key: 'tier', operator: 'DoesNotExist' }]) }),
);
const nsSel = fc.oneof(
  fc.constant({}),
  fc.record({ matchLabels: fc.record({ team: fc.constantFrom('a', 'b') }) }),
  fc.record({ matchLabels: fc.record({ env: fc.constantFrom('prod', 'dev') }) }),
  fc.record({
    matchLabels: fc.record({ 'kubernetes.io/metadata.name': fc.constantFrom('alpha', 'beta', 'gamma') }),
  }),
);
const cidr = fc.constantFrom(
  '10.0.0.0/8',
  '10.0.0.0/24',
  '10.0.0.0/30',
  '10.200.0.0/16',
  '0.0.0.0/0',
  '8.8.8.8/32',
  '172.16.0.0/12',
  '192.168.0.0/24',
  // exactly one pod's and one node's address: the ipcache must still say that pod and that node
  '10.0.0.1/32',
  '192.168.0.2/32',
);

const npPort = fc.oneof(
  fc.record({ protocol: fc.constantFrom('TCP', 'UDP', 'SCTP'), port: fc.constantFrom(53, 80, 443, 8080) }),
  fc.record({
    protocol: fc.constantFrom('TCP', 'UDP'),
    port: fc.constantFrom(1, 8000),
    endPort: fc.constantFrom(8080, 65535),
  }),
  fc.record({ port: fc.constantFrom('http', 'dns', 'metrics') }),
  fc.record({ protocol: fc.constantFrom('UDP', 'TCP') }),
);
const npPeer = fc.oneof(
  fc.record({ podSelector: labelSel }),
  fc.record({ namespaceSelector: nsSel }),
  fc.record({ podSelector: labelSel, namespaceSelector: nsSel }),
  fc.record({
    ipBlock: fc.oneof(
      fc.record({ cidr }),
      fc.constant({ cidr: '10.0.0.0/8', except: ['10.0.0.0/24'] }),
      fc.constant({ cidr: '0.0.0.0/0', except: ['10.200.0.0/16', '8.8.8.8/32'] }),
    ),
  }),
);
const npRule = (field: 'from' | 'to') =>
  fc.record(
    {
      [field]: fc.option(fc.array(npPeer, { maxLength: 2 }), { nil: undefined }),
      ports: fc.option(fc.array(npPort, { maxLength: 2 }), { nil: undefined }),
    },
    { requiredKeys: [] },
  );

const networkPolicy = fc.record({
  ns: fc.constantFrom('alpha', 'beta', 'gamma'),
  podSelector: labelSel,
  policyTypes: fc.option(fc.subarray(['Ingress', 'Egress'] as const, { minLength: 1 }), { nil: undefined }),
  ingress: fc.option(fc.array(npRule('from'), { maxLength: 2 }), { nil: undefined }),
  egress: fc.option(fc.array(npRule('to'), { maxLength: 2 }), { nil: undefined }),
});

const anpPort = fc.oneof(
  fc.record({
    portNumber: fc.record({
      protocol: fc.constantFrom('TCP', 'UDP', 'SCTP'),
      port: fc.constantFrom(53, 80, 443),
    }),
  }),
  fc
    .record({
      portRange: fc.record({
        protocol: fc.constantFrom('TCP', 'UDP'),
        start: fc.constantFrom(1, 80, 8000),
        end: fc.constantFrom(443, 8080, 65535),
      }),
    })
    .filter((p) => p.portRange.start <= p.portRange.end),
  fc.record({ namedPort: fc.constantFrom('http', 'dns') }),
);
const anpPeer = (egress: boolean) =>
  fc.oneof(
    fc.record({ namespaces: nsSel }),
    fc.record({ pods: fc.record({ namespaceSelector: nsSel, podSelector: labelSel }) }),
    ...(egress
      ? [
          fc.record({ networks: fc.array(cidr, { minLength: 1, maxLength: 2 }) }),
          fc.record({ nodes: fc.constantFrom({}, { matchLabels: { role: 'worker' } }) }),
        ]
      : []),
    fc.constant({ bogusPeer: {} }),
  );
const adminRule = (egress: boolean, actions: string[]) =>
  fc.record({
    action: fc.constantFrom(...actions),
    [egress ? 'to' : 'from']: fc.array(anpPeer(egress), { minLength: 1, maxLength: 2 }),
    ports: fc.option(fc.array(anpPort, { minLength: 1, maxLength: 2 }), { nil: undefined }),
  });
const subject = fc.oneof(
  fc.constant({ namespaces: {} }),
  fc.record({ namespaces: nsSel }),
  fc.record({ pods: fc.record({ namespaceSelector: nsSel, podSelector: labelSel }) }),
);
const anp = fc.record({
  priority: fc.integer({ min: 0, max: 3 }),
  subject,
  ingress: fc.option(fc.array(adminRule(false, ['Allow', 'Deny', 'Pass']), { maxLength: 3 }), {
    nil: undefined,
  }),
  egress: fc.option(fc.array(adminRule(true, ['Allow', 'Deny', 'Pass']), { maxLength: 3 }), {
    nil: undefined,
  }),
});
const banp = fc.record({
  subject,
  ingress: fc.option(fc.array(adminRule(false, ['Allow', 'Deny']), { maxLength: 3 }), { nil: undefined }),
  egress: fc.option(fc.array(adminRule(true, ['Allow', 'Deny']), { maxLength: 3 }), { nil: undefined }),
});
const cnpProto = fc.oneof(
  fc.record({
    tcp: fc.record({
      destinationPort: fc.oneof(
        fc.record({ number: fc.constantFrom(80, 443) }),
        fc.record({ range: fc.constant({ start: 1, end: 1024 }) }),
      ),
    }),
  }),
  fc.record({ udp: fc.record({ destinationPort: fc.record({ number: fc.constant(53) }) }) }),
  fc.record({ destinationNamedPort: fc.constantFrom('http', 'dns') }),
);
const cnpRule = (egress: boolean) =>
  fc.record({
    action: fc.constantFrom('Accept', 'Deny', 'Pass'),
    [egress ? 'to' : 'from']: fc.array(
      anpPeer(egress).filter((p) => !('bogusPeer' in p)),
      { minLength: 1, maxLength: 2 },
    ),
    protocols: fc.option(fc.array(cnpProto, { minLength: 1, maxLength: 2 }), { nil: undefined }),
  });
const cnp = fc.record({
  tier: fc.constantFrom('Admin', 'Baseline'),
  priority: fc.integer({ min: 0, max: 3 }),
  subject,
  ingress: fc.option(fc.array(cnpRule(false), { maxLength: 2 }), { nil: undefined }),
  egress: fc.option(fc.array(cnpRule(true), { maxLength: 2 }), { nil: undefined }),
});

/**
 * One admin-tier policy (ANP, BANP or CNP) named from a small set, so that a sequence of them edits
 * the same objects: their subjects, rules and priorities change, and some are removed.
 */
export const adminPolicyArb: fc.Arbitrary<NetPolicyObject> = fc.oneof(
  fc.record({ name: fc.constantFrom('a0', 'a1'), spec: anp }).map((x) => ({
    kind: 'AdminNetworkPolicy' as const,
    name: x.name,
    spec: strip(x.spec),
  })),
  fc.record({ spec: banp }).map((x) => ({
    kind: 'BaselineAdminNetworkPolicy' as const,
    name: 'default',
    spec: strip(x.spec),
  })),
  fc.record({ name: fc.constantFrom('c0', 'c1'), spec: cnp }).map((x) => ({
    kind: 'ClusterNetworkPolicy' as const,
    name: x.name,
    spec: strip(x.spec),
  })),
);

const pod = fc.record({
  ns: fc.constantFrom('alpha', 'beta', 'gamma'),
  app: fc.constantFrom('web', 'db', 'api'),
  tier: fc.option(fc.constantFrom('front', 'back'), { nil: undefined }),
  node: fc.constantFrom('n1', 'n2'),
  http: fc.option(fc.constantFrom(80, 8080), { nil: undefined }),
  dns: fc.boolean(),
});

function strip<T extends Record<string, unknown>>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

export const clusterArb: fc.Arbitrary<Cluster> = fc
  .record({
    pods: fc.array(pod, { minLength: 1, maxLength: 6 }),
    nps: fc.array(networkPolicy, { maxLength: 3 }),
    anps: fc.array(anp, { maxLength: 4 }),
    banp: fc.option(banp, { nil: undefined }),
    cnps: fc.array(cnp, { maxLength: 2 }),
  })
  .map(({ pods, nps, anps, banp, cnps }) => {
    const ps: Pod[] = pods.map((p, i) => ({
      namespace: p.ns,
      name: `p${i}`,
      labels: strip({ app: p.app, tier: p.tier }) as Record<string, string>,
      ips: [`10.0.0.${i + 1}`],
      node: p.node,
      // Ages out of name order: the identity cap ranks label sets by their oldest pod.
      created: `2026-01-01T00:00:0${(i * 7) % 6}Z`,
      ports: [
        ...(p.http ? [{ name: 'http', port: p.http, protocol: 'TCP' as const }] : []),
        ...(p.dns ? [{ name: 'dns', port: 53, protocol: 'UDP' as const }] : []),
      ],
    }));
    const policies: NetPolicyObject[] = [
      ...nps.map((n, i) => ({
        kind: 'NetworkPolicy' as const,
        namespace: n.ns,
        name: `np${i}`,
        spec: strip({
          podSelector: n.podSelector,
          policyTypes: n.policyTypes,
          ingress: n.ingress,
          egress: n.egress,
        }),
      })),
      ...anps.map((a, i) => ({ kind: 'AdminNetworkPolicy' as const, name: `anp${i}`, spec: strip(a) })),
      ...(banp ? [{ kind: 'BaselineAdminNetworkPolicy' as const, name: 'default', spec: strip(banp) }] : []),
      ...cnps.map((c, i) => ({ kind: 'ClusterNetworkPolicy' as const, name: `cnp${i}`, spec: strip(c) })),
    ];
    return { namespaces: NAMESPACES, nodes: TEST_NODES, pods: ps, policies };
  });

export function probesFor(c: Cluster): fc.Arbitrary<Probe[]> {
  const ips = [...c.pods.flatMap((p) => p.ips), ...TEST_NODES.flatMap((n) => n.ips), ...EXTERNAL_IPS];
  const podIps = c.pods.flatMap((p) => p.ips);
  return fc.array(
    fc.record({
      from: fc.constantFrom(...ips),
      to: fc.constantFrom(...podIps, ...ips),
      proto: fc.constantFrom(...PROTOS),
      port: fc.constantFrom(...PORTS),
    }),
    { minLength: 1, maxLength: 30 },
  );
}

/**
 * A random cluster, probes over it, and an identity cap of 1 or 2 label sets per namespace or none
 * (a cap of 1 or 2 leaves capped label sets in every random cluster: identity-cap.ts).
 */
export const probedClusterArb: fc.Arbitrary<{ cluster: Cluster; probes: Probe[]; cap?: number }> = fc
  .tuple(
    clusterArb.chain((c) => fc.tuple(fc.constant(c), probesFor(c))),
    fc.constantFrom(1, 2, undefined),
  )
  .map(([[cluster, probes], cap]) => ({ cluster, probes, ...(cap ? { cap } : {}) }));

/** The engine of a probedClusterArb value. */
export const engineFor = (x: { cluster: Cluster; cap?: number }): NetpolEngine =>
  NetpolEngine.fromCluster(x.cluster, x.cap ? { foreignIdentityCap: x.cap } : {});

/** A running pod with one address and a named port `http` (80/TCP), on node n1. */
export const shopPod = (
  namespace: string,
  name: string,
  labels: Record<string, string>,
  ip: string,
): Pod => ({
  namespace,
  name,
  labels,
  ips: [ip],
  node: 'n1',
  ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
});

/** Namespaces `shop` {team: shop} and `dev` {env: dev}, node n1, and `pods`. */
export const shopCluster = (policies: NetPolicyObject[], pods: Pod[]): Cluster => ({
  namespaces: [
    { name: 'shop', labels: { team: 'shop' } },
    { name: 'dev', labels: { env: 'dev' } },
  ],
  nodes: [{ name: 'n1', labels: {}, ips: ['192.0.2.1'] }],
  pods,
  policies,
});

// Issue 29 item 4's attack (identity-cap.ts): a victim admitting `namespaceSelector: {}` + `app=web`
// on 32 ports, one `frontend` web pod, and `n` attacker pods in their own namespace on another node,
// each labelled app=web with one distinct extra label, created one second apart.
const FLOOD_PORTS = Array.from({ length: 32 }, (_, i) => ({ port: 8000 + 2 * i }));

/** The victim admits `app=web` from every namespace on 32 ports: 32 entries per selected identity. */
export const floodVictimPolicy: NetPolicyObject = {
  kind: 'NetworkPolicy',
  namespace: 'victim',
  name: 'web-from-anywhere',
  spec: {
    podSelector: { matchLabels: { app: 'api' } },
    ingress: [
      { from: [{ namespaceSelector: {}, podSelector: { matchLabels: { app: 'web' } } }], ports: FLOOD_PORTS },
    ],
  },
};

/** The entries rules of `prefix` (e.g. `NetworkPolicy/victim/`) hold in a pod's rule sets. */
export function ruleEntries(e: NetpolEngine, pod: string, prefix: string): number {
  const refs = e.endpointTables.get(e.podIdentity.get(pod)!)!;
  let n = 0;
  for (const d of ['ingress', 'egress'] as const)
    for (const x of e.tables.get(refs[d].lower)!.state.entries())
      if (x.rule.startsWith(prefix) && x.rule.includes('#')) n++;
  return n;
}

export const floodIp = (i: number) => `10.${100 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
const ts = (i: number) => new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString();

/** `n` attacker pods labelled app=web, each with one distinct extra label, on another node. */
function attackers(n: number): Pod[] {
  return Array.from({ length: n }, (_, i) => ({
    namespace: 'attacker',
    name: `a${i}`,
    labels: { app: 'web', x: String(i) },
    ips: [floodIp(i)],
    node: 'n2',
    ports: [],
    created: ts(1000 + i),
  }));
}

export function identityFloodCluster(n: number, extra: NetPolicyObject[] = []): Cluster {
  return {
    namespaces: ['victim', 'attacker', 'frontend'].map((name) => ({
      name,
      labels: { 'kubernetes.io/metadata.name': name },
    })),
    nodes: [
      { name: 'n1', labels: {}, ips: ['192.168.0.1'] },
      { name: 'n2', labels: {}, ips: ['192.168.0.2'] },
    ],
    pods: [
      { namespace: 'victim', name: 'api', labels: { app: 'api' }, ips: ['10.0.0.1'], node: 'n1', ports: [] },
      {
        namespace: 'frontend',
        name: 'web',
        labels: { app: 'web' },
        ips: ['10.0.0.2'],
        node: 'n1',
        ports: [],
        created: ts(0),
      },
      ...attackers(n),
    ],
    policies: [floodVictimPolicy, ...extra],
  };
}

const stagedKindOf = (kind: string): StagedKindName =>
  (Object.keys(STAGED_KINDS) as StagedKindName[]).find((k) => STAGED_KINDS[k].stages === kind)!;

/**
 * An enforced cluster, staged objects (Sets from a second cluster's policies, some replacing policies
 * of the same name, Deletes of its own), and probes over it.
 */
export const stagedClusterArb: fc.Arbitrary<[Cluster, StagedPolicy[], Probe[]]> = fc
  .tuple(clusterArb, clusterArb, fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }))
  .chain(([enforced, other, picks]) => {
    const staged: StagedPolicy[] = [];
    const seen = new Set<string>();
    other.policies.forEach((p, i) => {
      if (!picks[i] || seen.has(policyKey(p))) return;
      seen.add(policyKey(p));
      staged.push({ kind: stagedKindOf(p.kind), action: 'Set', policy: p });
    });
    enforced.policies.forEach((p, i) => {
      if (!picks[(i + 6) % 12] || seen.has(policyKey(p))) return;
      seen.add(policyKey(p));
      staged.push({ kind: stagedKindOf(p.kind), action: 'Delete', policy: { ...p, spec: {} } });
    });
    return fc.tuple(fc.constant(enforced), fc.constant(staged), probesFor(enforced));
  });
