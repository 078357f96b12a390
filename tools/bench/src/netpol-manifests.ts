// A generated network-policy cluster written as the YAML manifests cascadectl reads (Namespaces,
// Nodes, Pods with their named ports and addresses, the policies), and probes over its pods in every
// form a probes file may take.
import type { Cluster } from '@cascade/netpolicy';
import { stringify } from 'yaml';
import { rng } from './gateway-topology.ts';
import { generateNetpolCluster } from './netpol-cluster.ts';

/** The probes input of issue 30: 500 pods, 100 NetworkPolicies, 20 ANPs, 1 BANP, 3 named ports per pod. */
export const PROBES_SCALE = {
  namespaces: 25,
  pods: 500,
  labelSets: 100,
  anps: 20,
  rulesPerAnp: 10,
  networkPolicies: 100,
  ipBlockPolicies: 10,
  nodes: 10,
  grpcPort: true,
};

const API: Record<string, string> = {
  NetworkPolicy: 'networking.k8s.io/v1',
  AdminNetworkPolicy: 'policy.networking.k8s.io/v1alpha1',
  BaselineAdminNetworkPolicy: 'policy.networking.k8s.io/v1alpha1',
};

export function clusterManifests(c: Cluster): string {
  const docs: unknown[] = [
    ...c.namespaces.map((n) => ({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: n.name, labels: n.labels },
    })),
    ...c.nodes.map((n) => ({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: n.name, labels: n.labels },
      status: { addresses: n.ips.map((address) => ({ type: 'InternalIP', address })) },
    })),
    ...c.pods.map((p) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { namespace: p.namespace, name: p.name, labels: p.labels },
      spec: {
        nodeName: p.node,
        containers: [
          {
            name: 'app',
            image: 'app',
            ports: p.ports.map((q) => ({ name: q.name, containerPort: q.port, protocol: q.protocol })),
          },
        ],
      },
      status: { phase: 'Running', podIP: p.ips[0], podIPs: p.ips.map((ip) => ({ ip })) },
    })),
    ...c.policies.map((p) => ({
      apiVersion: API[p.kind],
      kind: p.kind,
      metadata: { name: p.name, ...(p.namespace ? { namespace: p.namespace } : {}) },
      spec: p.spec,
    })),
  ];
  return docs.map((d) => stringify(d)).join('---\n');
}

export const probesCluster = () => generateNetpolCluster(PROBES_SCALE);

export type ProbeForm = 'yaml-lines' | 'yaml-block' | 'json-array' | 'json-lines';

/** n probes between the cluster's pods (ports by number and by name), written in `form`. */
export function probesFile(c: Cluster, n: number, form: ProbeForm, seed = 11): string {
  const r = rng(seed);
  const pods = c.pods.map((p) => `${p.namespace}/${p.name}`);
  const ports: (number | string)[] = [8080, 9090, 50051, 8443, 8000, 53, 'http', 'metrics', 'grpc'];
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const from = pods[Math.floor(r() * pods.length)]!;
    const to = pods[Math.floor(r() * pods.length)]!;
    const port = ports[i % ports.length]!;
    const protocol = port === 53 ? 'UDP' : 'TCP';
    if (form === 'yaml-lines') out.push(`- {from: ${from}, to: ${to}, protocol: ${protocol}, port: ${port}}`);
    else if (form === 'yaml-block')
      out.push(`- from: ${from}\n  to: ${to}\n  protocol: ${protocol}\n  port: ${port}`);
    else out.push(JSON.stringify({ from, to, protocol, port }));
  }
  if (form === 'json-array') return `[\n${out.join(',\n')}\n]\n`;
  return `${out.join('\n')}\n`;
}
