// `cascadectl netpol recommend --kubeconfig` on real pods: an audited namespace (the cluster is
// installed with agent.auditNamespaces={recommend}) where a client talks to an api and looks up a
// name; the agents' allowed flows become staged policies, proved; the controller accepts them; they
// change nothing while staged (the datapath marks the flow they would deny); promoted, the client
// still reaches the api and DNS, and a pod never seen talking is denied.
import { expect } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { AUDITED_NAMESPACE } from '../cluster/release.ts';
import { CASCADECTL, KUBECONFIG, kubectl, kubectlJson, NODE, sh, shAsync, until } from '../harness.ts';
import { figures, probePod } from './shared.ts';

const NSR = AUDITED_NAMESPACE;

export async function recommendFromAuditedFlows(): Promise<void> {
  const objects = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NSR } },
    probePod(NSR, 'api', { 'app.kubernetes.io/name': 'api', 'pod-template-hash': '5f6c7d' }),
    probePod(NSR, 'client', { app: 'client' }),
    probePod(NSR, 'intruder', { app: 'intruder' }),
  ];
  sh('kubectl', ['apply', '-f', '-'], { input: objects.map((o) => stringify(o)).join('---\n') });
  sh('kubectl', ['wait', '-n', NSR, '--for=condition=Ready', 'pod', '--all', '--timeout=120s'], {
    timeoutMs: 130_000,
  });
  const api = kubectlJson<{ status: { podIP: string } }>('get', 'pod', '-n', NSR, 'api').status.podIP;
  const probe = (from: string, ...args: string[]) =>
    shAsync('kubectl', ['exec', '-n', NSR, from, '--', '/usr/local/bin/cascade-probe', ...args], 60_000).then(
      (o) => o.trim().split(' ')[0],
      (e: unknown) =>
        String((e as { stdout?: string }).stdout ?? e)
          .trim()
          .split(' ')[0],
    );
  // what is seen: the client reaches the api and resolves a name (nothing isolates the namespace)
  expect(await probe('client', 'probe', 'tcp', api, '8080', '800')).toBe('ALLOW');
  expect(await probe('client', 'dns', 'udp', '10.96.0.10', 'kubernetes.default.svc.cluster.local')).toBe(
    'ALLOW',
  );
  const node = kubectl('get', 'nodes', '-o', 'jsonpath={.items[0].metadata.name}').trim();
  await until('client -> api among the audited allowed flows', 30, () => {
    const out = sh(NODE, [
      CASCADECTL,
      'flows',
      '--node',
      node,
      '--kubeconfig',
      KUBECONFIG,
      '--verdict',
      'allow',
      '-n',
      NSR,
      '-o',
      'json',
    ]);
    return out.includes(`"from":"${NSR}/client","to":"${NSR}/api"`) ? true : undefined;
  });

  // recommend, proved
  const t0 = performance.now();
  const json = JSON.parse(
    sh(NODE, [CASCADECTL, 'netpol', 'recommend', '-n', NSR, '--kubeconfig', KUBECONFIG, '-o', 'json'], {
      timeoutMs: 120_000,
    }),
  ) as {
    policies: { metadata: { name: string }; spec: Record<string, unknown> }[];
    proof: { connections: number; allowed: number };
    notes: string[];
  };
  figures['netpol recommend --kubeconfig, 1 node (ms)'] = Math.round(performance.now() - t0);
  expect(json.proof.connections).toBeGreaterThanOrEqual(2); // client -> api, client -> DNS
  expect(json.proof.allowed).toBe(json.proof.connections);
  expect(json.policies.map((p) => p.metadata.name).sort()).toEqual(['recommended-api', 'recommended-client']);
  const apiPolicy = json.policies.find((p) => p.metadata.name === 'recommended-api')!;
  expect(apiPolicy.spec.podSelector).toEqual({ matchLabels: { 'app.kubernetes.io/name': 'api' } });
  expect(apiPolicy.spec.ingress).toEqual([
    {
      from: [{ podSelector: { matchLabels: { app: 'client' } } }],
      ports: [{ protocol: 'TCP', port: 'http' }],
    },
  ]);
  expect(json.notes.join('\n')).toMatch(
    /recommend\/intruder \(1 pod\(s\)\): no connection observed: no policy written/,
  );

  // staged: written as printed, accepted by the controller, nothing enforced yet
  const yaml = sh(NODE, [CASCADECTL, 'netpol', 'recommend', '-n', NSR, '--kubeconfig', KUBECONFIG], {
    timeoutMs: 120_000,
  });
  expect(parseAllDocuments(yaml).map((d) => (d.toJS() as { kind: string }).kind)).toEqual([
    'StagedNetworkPolicy',
    'StagedNetworkPolicy',
  ]);
  sh('kubectl', ['apply', '-f', '-'], { input: yaml });
  await until('the staged policies Accepted', 60, () => {
    const items = kubectlJson<{
      items: { status?: { conditions?: { type: string; status: string }[] } }[];
    }>('get', 'stagednetworkpolicies', '-n', NSR).items;
    return items.length === 2 &&
      items.every((i) => i.status?.conditions?.some((c) => c.type === 'Accepted' && c.status === 'True'))
      ? true
      : undefined;
  });
  // flows --staged: the intruder's flow is marked "would deny" by the staged api policy, judged by the
  // node's datapath itself (its staged tables: a new flow of the intruder, still allowed, reported
  // because the staged set would deny it); the client's is not
  type Marked = {
    from: string;
    to: string;
    staged?: { verdict?: string; changed?: boolean; decidedBy?: string };
  };
  const marked = await until('the intruder flow marked would deny by the datapath', 60, async () => {
    expect(await probe('intruder', 'probe', 'tcp', api, '8080', '800')).toBe('ALLOW');
    const lines = sh(NODE, [
      CASCADECTL,
      'flows',
      '--staged',
      '--kubeconfig',
      KUBECONFIG,
      '-n',
      NSR,
      '-o',
      'json',
    ])
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Marked);
    const intruder = lines.find(
      (f) =>
        f.from === `${NSR}/intruder` && f.to === `${NSR}/api` && f.staged?.decidedBy?.endsWith('; datapath'),
    );
    return intruder ? lines : undefined;
  });
  expect(
    marked.find(
      (f) =>
        f.from === `${NSR}/intruder` && f.to === `${NSR}/api` && f.staged?.decidedBy?.endsWith('; datapath'),
    )?.staged,
  ).toEqual({
    verdict: 'deny',
    changed: true,
    decidedBy: `ingress: StagedNetworkPolicy/${NSR}/recommended-api isolation (no rule of it allows the flow); datapath`,
  });
  expect(marked.find((f) => f.from === `${NSR}/client` && f.to === `${NSR}/api`)?.staged).toMatchObject({
    verdict: 'allow',
    changed: false,
  });

  // promoted: what was seen still passes, what was not is denied
  for (const name of ['recommended-api', 'recommended-client'])
    sh(NODE, [CASCADECTL, 'netpol', 'promote', `snetpol/${name}`, '-n', NSR, '--kubeconfig', KUBECONFIG]);
  let last = '';
  await until('the promoted policies enforced', 60, async () => {
    const seen = [
      await probe('intruder', 'probe', 'tcp', api, '8080', '800'),
      await probe('client', 'probe', 'tcp', api, '8080', '800'),
      await probe('client', 'dns', 'udp', '10.96.0.10', 'kubernetes.default.svc.cluster.local'),
    ];
    last = seen.join(' ');
    return last === 'DENY ALLOW ALLOW' ? true : undefined;
  }).catch((e: unknown) => {
    throw new Error(`intruder, client, DNS: want DENY ALLOW ALLOW, have ${last} (${String(e)})`);
  });
  kubectl('delete', 'namespace', NSR, '--wait=false');
}
