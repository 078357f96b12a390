// Services and DNS under an egress policy, with real connections through the cluster's Services.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import { cascadectl, KUBECONFIG, kubectl, kubectlJson, sh, shAsync, until } from '../harness.ts';
import { measured } from './probes.ts';
import { NODE_PORT, net, probePod, work } from './shared.ts';

/** Services and DNS under an egress policy: a pod reaches exactly the Services (ClusterIP, NodePort) and DNS its policy allows */
export async function servicesAndDns(): Promise<void> {
  const NS_SVC = 'svc-e2e';
  const pod = (name: string, app: string) => probePod(NS_SVC, name, { app });
  const service = (name: string, type = 'ClusterIP') => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: NS_SVC },
    spec: { type, selector: { app: name }, ports: [{ name: 'http', port: 80, targetPort: 'http' }] },
  });
  const objects = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS_SVC } },
    pod('client', 'client'),
    pod('web-1', 'web'),
    pod('web-2', 'web'),
    pod('other-1', 'other'),
    service('web', 'NodePort'),
    service('other', 'NodePort'),
    {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'client-egress', namespace: NS_SVC },
      spec: {
        podSelector: { matchLabels: { app: 'client' } },
        policyTypes: ['Egress'],
        egress: [
          { to: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 'http' }] },
          {
            to: [
              {
                namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
                podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
              },
            ],
            ports: [
              { protocol: 'UDP', port: 53 },
              { protocol: 'TCP', port: 53 },
            ],
          },
        ],
      },
    },
  ];
  sh('kubectl', ['apply', '-f', '-'], { input: objects.map((o) => stringify(o)).join('---\n') });
  sh('kubectl', ['wait', '-n', NS_SVC, '--for=condition=Ready', 'pod', '--all', '--timeout=120s'], {
    timeoutMs: 130_000,
  });
  const svc = (name: string) =>
    kubectlJson<{ spec: { clusterIP: string; ports: { nodePort: number }[] } }>(
      'get',
      'service',
      '-n',
      NS_SVC,
      name,
    ).spec;
  const web = svc('web');
  const other = svc('other');
  const exec = (...args: string[]) =>
    shAsync(
      'kubectl',
      ['exec', '-n', NS_SVC, 'client', '--', '/usr/local/bin/cascade-probe', ...args],
      60_000,
    ).then(
      (o) => o.trim(),
      (e: unknown) => String((e as { stdout?: string }).stdout ?? e).trim(),
    );
  const verdict = async (proto: string, ip: string, port: number) =>
    (await exec('probe', proto, ip, String(port), '800')).split(' ')[0];
  // what the client must see: the policy judged against each Service's backends
  const checks: [string, () => Promise<string | undefined>, string][] = [
    ['web ClusterIP', () => verdict('tcp', web.clusterIP, 80), 'ALLOW'],
    ['other ClusterIP', () => verdict('tcp', other.clusterIP, 80), 'DENY'],
    ['web NodePort on the node', () => verdict('tcp', net.nodeIp, web.ports[0]!.nodePort), 'ALLOW'],
    ['other NodePort on the node', () => verdict('tcp', net.nodeIp, other.ports[0]!.nodePort), 'DENY'],
    [
      'DNS over UDP',
      async () => (await exec('dns', 'udp', '10.96.0.10', `web.${NS_SVC}.svc.cluster.local`)).split(' ')[0],
      'ALLOW',
    ],
    [
      'DNS over TCP',
      async () => (await exec('dns', 'tcp', '10.96.0.10', `web.${NS_SVC}.svc.cluster.local`)).split(' ')[0],
      'ALLOW',
    ],
    ['the node itself (not a NodePort)', () => verdict('tcp', net.nodeIp, NODE_PORT), 'ALLOW'],
  ];
  let wrong: string[] = [];
  await until('Service verdicts as the policy says', 60, async () => {
    wrong = [];
    for (const [what, run, want] of checks) {
      const have = await run();
      if (have !== want) wrong.push(`${what}: want ${want}, have ${have}`);
    }
    return wrong.length ? undefined : true;
  }).catch(() => undefined);
  expect(wrong).toEqual([]);
  // both backends serve the ClusterIP (a new flow picks one at random): the replies carry the
  // ClusterIP back (the client's socket matched them), from either pod
  const served = new Set<string>();
  for (let i = 0; i < 24 && served.size < 2; i++)
    served.add((await exec('probe', 'tcp', web.clusterIP, '80', '800')).split(' ')[1] ?? '');
  expect([...served].sort()).toEqual(['web-1', 'web-2']);
  // cascadectl answers the same per backend, from the objects read back from the cluster
  const file = join(work, 'svc-probes.yaml');
  writeFileSync(
    file,
    [
      `- {from: ${NS_SVC}/client, to: svc:${NS_SVC}/web, port: 80}`,
      `- {from: ${NS_SVC}/client, to: ${other.clusterIP}, port: 80}`,
    ].join('\n'),
  );
  const sim = JSON.parse(
    cascadectl('netpol', 'simulate', '--kubeconfig', KUBECONFIG, '--probes', file, '-o', 'json'),
  ) as {
    to: string;
    verdict: string;
  }[];
  expect(sim.map((r) => `${r.to} ${r.verdict}`).sort()).toEqual([
    `${NS_SVC}/other-1 deny`,
    `${NS_SVC}/web-1 allow`,
    `${NS_SVC}/web-2 allow`,
  ]);
  // a backend goes: the Service keeps answering from the other one, never from a denied pod
  kubectl('delete', 'pod', '-n', NS_SVC, 'web-2', '--wait=true');
  await until('web-2 left the Service', 30, async () =>
    (await exec('probe', 'tcp', web.clusterIP, '80', '800')).includes('web-1') ? true : undefined,
  );
  for (let i = 0; i < 8; i++)
    expect((await exec('probe', 'tcp', web.clusterIP, '80', '800')).split(' ')[1]).toBe('web-1');
  kubectl('delete', 'namespace', NS_SVC, '--wait=false');
}

/**
 * Kubelet probes reach a pod whose ingress a NetworkPolicy isolates completely: the node's own
 * traffic to its pods leaves with the node's address (the agent gave the route to the pod bridge that
 * preferred source), and a NetworkPolicy never blocks a pod's own node. Before, the probe left with
 * the bridge's address, was judged as the world, and the pod never became Ready.
 */
export async function kubeletProbesUnderIsolation(): Promise<void> {
  const NS = 'probe-e2e';
  const pod = probePod(NS, 'probed', { app: 'probed' });
  const container = {
    ...pod.spec.containers[0]!,
    readinessProbe: { tcpSocket: { port: 'http' }, periodSeconds: 2, failureThreshold: 1 },
  };
  const objects = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } },
    {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'deny-all-ingress', namespace: NS },
      spec: { podSelector: {}, policyTypes: ['Ingress'] },
    },
    { ...pod, spec: { ...pod.spec, containers: [container] } },
  ];
  sh('kubectl', ['apply', '-f', '-'], { input: objects.map((o) => stringify(o)).join('---\n') });
  try {
    sh('kubectl', ['wait', '-n', NS, '--for=condition=Ready', 'pod/probed', '--timeout=90s'], {
      timeoutMs: 100_000,
    });
    // and the isolation holds for everyone else: another pod is refused
    const other = net.pods[0]!;
    const ip = kubectlJson<{ status: { podIP: string } }>('get', 'pod', '-n', NS, 'probed').status.podIP;
    const from = `${other.metadata.namespace}/${other.metadata.name}`;
    expect(await measured([{ from, to: ip, protocol: 'TCP', port: 8080 }])).toEqual(['DENY']);
  } finally {
    kubectl('delete', 'namespace', NS, '--wait=false');
  }
}
