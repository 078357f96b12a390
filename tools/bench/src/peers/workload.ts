// The workload of `npm run bench -- peers`, the same for every enforcer: in namespace `peers` one
// server and one client pod per node (servers isolated by a default deny, admitted from the clients
// by `allow-clients`, the policy the change measurement creates and deletes), and ten background
// namespaces of two pods each, whose NetworkPolicies (0, 100 or 1,000) are the policy load. Plain
// objects, deterministic; the suite writes them through the API server.

export const NS = 'peers';
export const BG_NAMESPACES = 10;
const IMAGE = 'cascade.local/cascade-probe:cluster';
/** The servers' ports: 8080 answers `ok HOST`; 5001 is a sink for the established transfer. */
export const HTTP = 8080;
export const SINK = 5001;

type Obj = Record<string, unknown>;

function pod(namespace: string, name: string, node: string, labels: Record<string, string>, args: string[]) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels },
    spec: {
      nodeName: node,
      terminationGracePeriodSeconds: 1,
      restartPolicy: args[0] === 'serve' ? 'Always' : 'Never',
      securityContext: { runAsNonRoot: true, runAsUser: 65532 },
      containers: [{ name: 'probe', image: IMAGE, imagePullPolicy: 'Never', args }],
    },
  };
}

export const serverName = (i: number) => `srv-${i}`;
export const clientName = (i: number) => `cli-${i}`;

/** Namespaces and long-running pods: a server and a client on each node, two pods per background namespace. */
export function workload(nodes: string[]): Obj[] {
  const out: Obj[] = [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } }];
  nodes.forEach((node, i) => {
    out.push(pod(NS, serverName(i), node, { app: 'server' }, ['serve', String(HTTP), `sink:${SINK}`]));
    out.push(pod(NS, clientName(i), node, { app: 'client' }, ['serve', '8081']));
  });
  for (let n = 0; n < BG_NAMESPACES; n++) {
    const ns = `bg-${n}`;
    out.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, labels: { team: `t${n % 3}` } } });
    for (const [k, app] of ['a', 'b'].entries())
      out.push(pod(ns, `${app}-0`, nodes[(n + k) % nodes.length]!, { app }, ['serve', String(HTTP), '9090']));
  }
  return out;
}

/** The servers' default deny: without `allow-clients` nothing reaches them. */
export const defaultDeny = (): Obj => ({
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  metadata: { name: 'servers-default-deny', namespace: NS },
  spec: { podSelector: { matchLabels: { app: 'server' } }, policyTypes: ['Ingress'] },
});

/** The policy the change measurement creates (clients admitted) and deletes (denied again). */
export const allowClients = (): Obj => ({
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  metadata: { name: 'allow-clients', namespace: NS },
  spec: {
    podSelector: { matchLabels: { app: 'server' } },
    ingress: [
      {
        from: [{ podSelector: { matchLabels: { app: 'client' } } }],
        ports: [
          { protocol: 'TCP', port: HTTP },
          { protocol: 'TCP', port: SINK },
        ],
      },
    ],
  },
});

/** A new pod's egress: to the servers' HTTP port only, so its first packets to the sink port must be denied. */
export const newPodEgress = (): Obj => ({
  apiVersion: 'networking.k8s.io/v1',
  kind: 'NetworkPolicy',
  metadata: { name: 'new-pods-egress', namespace: NS },
  spec: {
    podSelector: { matchLabels: { role: 'new' } },
    policyTypes: ['Egress'],
    egress: [
      { to: [{ podSelector: { matchLabels: { app: 'server' } } }], ports: [{ protocol: 'TCP', port: HTTP }] },
    ],
  },
});

/** A pod that probes from its first moment: `watch` to the two targets for `ms`, then exits. */
export function newPod(name: string, node: string, targets: string[], ms: number): Obj {
  return pod(NS, name, node, { app: 'client', role: 'new' }, ['watch', '100', '10', String(ms), ...targets]);
}

/**
 * Background policy i (of the 0 / 100 / 1,000): shapes users write, spread over the background
 * namespaces: pod-selected ingress on a port, namespace-selected ingress on a port range, egress to a
 * CIDR with an exception plus DNS, and matchExpressions; each selects one of the namespace's two pods.
 */
export function backgroundPolicy(i: number): Obj {
  const ns = `bg-${i % BG_NAMESPACES}`;
  const app = i % 2 === 0 ? 'a' : 'b';
  const peer = app === 'a' ? 'b' : 'a';
  const shape = Math.floor(i / BG_NAMESPACES) % 4;
  const port = 8000 + (i % 500);
  const spec =
    shape === 0
      ? {
          podSelector: { matchLabels: { app } },
          ingress: [
            { from: [{ podSelector: { matchLabels: { app: peer } } }], ports: [{ protocol: 'TCP', port }] },
          ],
        }
      : shape === 1
        ? {
            podSelector: { matchLabels: { app } },
            ingress: [
              {
                from: [{ namespaceSelector: { matchLabels: { team: `t${i % 3}` } } }],
                ports: [{ protocol: 'TCP', port: 9000, endPort: 9000 + (i % 100) }],
              },
            ],
          }
        : shape === 2
          ? {
              podSelector: { matchLabels: { app } },
              policyTypes: ['Egress'],
              egress: [
                {
                  to: [
                    {
                      ipBlock: {
                        cidr: `172.${16 + (i % 16)}.0.0/16`,
                        except: [`172.${16 + (i % 16)}.${i % 256}.0/24`],
                      },
                    },
                  ],
                  ports: [{ protocol: 'TCP', port: 443 }],
                },
                {
                  ports: [
                    { protocol: 'UDP', port: 53 },
                    { protocol: 'TCP', port: 53 },
                  ],
                },
              ],
            }
          : {
              podSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: [app, 'other'] }] },
              ingress: [
                {
                  from: [
                    {
                      namespaceSelector: {
                        matchExpressions: [{ key: 'team', operator: 'NotIn', values: [`t${i % 3}`] }],
                      },
                      podSelector: { matchLabels: { app: peer } },
                    },
                  ],
                  ports: [{ protocol: 'TCP', port: HTTP }],
                },
              ],
            };
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: `bg-${i}`, namespace: ns },
    spec,
  };
}
