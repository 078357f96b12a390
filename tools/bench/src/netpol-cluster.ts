// Scale generator for network policy: namespaces, pods with label sets and named ports, nodes,
// NetworkPolicies (some with ipBlocks), ANPs with many rules, one BANP.
import type { Cluster, NetPolicyObject, Pod } from '@cascade/netpolicy';
import { rng } from './gateway-topology.ts';

/** The network-policy issue's scenario: 10,000 pods, 500 namespaces, 2,000 label sets, 100 ANPs x 20 rules, 3,000 NPs. */
export const ISSUE_SCALE: NetpolScale = {
  namespaces: 500,
  pods: 10_000,
  labelSets: 2000,
  anps: 100,
  rulesPerAnp: 20,
  networkPolicies: 3000,
  ipBlockPolicies: 500,
};

export interface NetpolScale {
  namespaces: number;
  pods: number;
  labelSets: number;
  anps: number;
  rulesPerAnp: number;
  networkPolicies: number;
  ipBlockPolicies: number;
  /** Nodes the pods are spread over (default 50). */
  nodes?: number;
  /** A third named port on every pod (grpc, 50051). */
  grpcPort?: boolean;
}

const ip = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;

export function generateNetpolCluster(s: NetpolScale, seed = 7): Cluster {
  const rand = rng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
  const teams = 25;
  const namespaces = Array.from({ length: s.namespaces }, (_, i) => ({
    name: `ns-${i}`,
    labels: {
      'kubernetes.io/metadata.name': `ns-${i}`,
      team: `t${i % teams}`,
      env: ['prod', 'dev', 'staging'][i % 3]!,
    },
  }));
  const appsPerNs = Math.max(1, Math.round(s.labelSets / s.namespaces));
  const nodes = Array.from({ length: s.nodes ?? 50 }, (_, i) => ({
    name: `node-${i}`,
    labels: { zone: `z${i % 3}`, role: i < 5 ? 'infra' : 'worker' },
    ips: [`192.168.${i >> 8}.${i & 255}`],
  }));
  const pods: Pod[] = [];
  for (let i = 0; i < s.pods; i++) {
    const ns = i % s.namespaces;
    const app = Math.floor(i / s.namespaces) % appsPerNs;
    pods.push({
      namespace: `ns-${ns}`,
      name: `pod-${i}`,
      labels: { app: `app-${app}`, tier: app === 0 ? 'front' : 'back' },
      ips: [ip(i + 1)],
      node: `node-${i % nodes.length}`,
      ports: [
        { name: 'http', port: 8080, protocol: 'TCP' },
        { name: 'metrics', port: 9090, protocol: 'TCP' },
        ...(s.grpcPort ? [{ name: 'grpc', port: 50051, protocol: 'TCP' as const }] : []),
      ],
    });
  }
  const policies: NetPolicyObject[] = [];
  const nsName = (i: number) => `ns-${((i % s.namespaces) + s.namespaces) % s.namespaces}`;
  // NetworkPolicies: per namespace a default deny, then allows; a share with ipBlocks.
  for (let i = 0; i < s.networkPolicies; i++) {
    const ns = nsName(i);
    const kind = i < s.namespaces ? 'deny' : i < s.namespaces + s.ipBlockPolicies ? 'ipblock' : 'allow';
    let spec: unknown;
    if (kind === 'deny') spec = { podSelector: {}, policyTypes: ['Ingress'] };
    else if (kind === 'ipblock') {
      const o = i % 200;
      spec = {
        podSelector: { matchLabels: { tier: 'front' } },
        policyTypes: ['Ingress', 'Egress'],
        ingress: [
          {
            from: [
              {
                ipBlock: { cidr: `172.${16 + (o % 16)}.0.0/16`, except: [`172.${16 + (o % 16)}.${o}.0/24`] },
              },
            ],
            ports: [{ port: 'http' }],
          },
        ],
        egress: [
          {
            to: [
              { ipBlock: { cidr: `100.${o % 64}.0.0/16` } },
              { namespaceSelector: { matchLabels: { team: `t${o % teams}` } } },
            ],
          },
        ],
      };
    } else {
      const app = i % appsPerNs;
      spec = {
        podSelector: { matchLabels: { app: `app-${app}` } },
        ingress: [
          {
            from: [{ podSelector: { matchLabels: { app: `app-${(app + 1) % appsPerNs}` } } }],
            ports: [{ port: 'http' }, { protocol: 'TCP', port: 8443 }],
          },
          {
            from: [
              { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': nsName(i * 7 + 3) } } },
            ],
            ports: [{ protocol: 'TCP', port: 8000, endPort: 8099 }],
          },
        ],
      };
    }
    policies.push({ kind: 'NetworkPolicy', namespace: ns, name: `np-${i}`, spec });
  }
  // ANPs: each selects one team's namespaces; rules name specific namespaces, pods of a team, the
  // monitoring namespaces (Pass), external networks, and a final broad rule.
  for (let a = 0; a < s.anps; a++) {
    const team = a % teams;
    const ingress: unknown[] = [];
    const egress: unknown[] = [];
    for (let r = 0; r < s.rulesPerAnp; r++) {
      const kind = r % 10;
      const ports =
        kind % 2 === 0
          ? [{ portNumber: { protocol: 'TCP', port: 8080 + (r % 5) } }]
          : [
              { portRange: { protocol: 'TCP', start: 9000, end: 9000 + 16 * (1 + (r % 4)) } },
              { namedPort: 'metrics' },
            ];
      if (r === s.rulesPerAnp - 1)
        ingress.push({
          name: 'deny-dev',
          action: 'Deny',
          from: [{ namespaces: { matchLabels: { env: 'dev' } } }],
        });
      else if (kind < 5)
        ingress.push({
          name: `from-ns-${r}`,
          action: pick(['Allow', 'Deny'] as const),
          from: [{ namespaces: { matchLabels: { 'kubernetes.io/metadata.name': nsName(a * 31 + r * 7) } } }],
          ports,
        });
      else if (kind < 7)
        ingress.push({
          name: `from-team-${r}`,
          action: 'Allow',
          from: [
            {
              pods: {
                namespaceSelector: { matchLabels: { team: `t${(team + r) % teams}` } },
                podSelector: { matchLabels: { app: `app-${r % appsPerNs}` } },
              },
            },
          ],
          ports,
        });
      else if (kind === 7)
        ingress.push({
          name: `pass-${r}`,
          action: 'Pass',
          from: [{ namespaces: { matchLabels: { 'kubernetes.io/metadata.name': nsName(r) } } }],
        });
      else
        egress.push({
          name: `egress-${r}`,
          action: pick(['Allow', 'Deny'] as const),
          to: [{ networks: [`${20 + (a % 200)}.${r}.0.0/16`] }],
          ports,
        });
    }
    policies.push({
      kind: 'AdminNetworkPolicy',
      name: `anp-${a}`,
      spec: {
        priority: a % 1000,
        subject: { namespaces: { matchLabels: { team: `t${team}` } } },
        ingress,
        egress,
      },
    });
  }
  policies.push({
    kind: 'BaselineAdminNetworkPolicy',
    name: 'default',
    spec: {
      subject: { namespaces: {} },
      ingress: [{ action: 'Deny', from: [{ namespaces: { matchLabels: { env: 'staging' } } }] }],
      egress: [{ action: 'Deny', to: [{ networks: ['0.0.0.0/0'] }] }],
    },
  });
  return { namespaces, nodes, pods, policies };
}
