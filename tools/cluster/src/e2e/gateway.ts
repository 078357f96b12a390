// The gateway story: the examples applied with kubectl, EffectivePolicies and status equal to what
// cascadectl computes offline; leader failover publishes a change made meanwhile exactly once.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { authConfigCrd } from '@cascade/authpolicy';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import { canon, cascadectl, env, kubectl, kubectlJson, ROOT, sh, until } from '../harness.ts';
import { docs, figures, NS, probePod } from './shared.ts';
import { installProviderCrds, mainWasmPlugin } from './wiring.ts';

/** One rule of an EffectivePolicy path or of `cascadectl effective`: compared without metadata. */
type RuleEntry = { value: unknown; source: unknown; as?: string };

const publishedPaths = () => {
  const out = new Map<string, string>();
  for (const e of kubectlJson<{
    items: {
      spec: { policyKind: string; paths: { paths: object[]; rules: Record<string, RuleEntry> }[] };
    }[];
  }>('get', 'effectivepolicies', '-A').items)
    for (const g of e.spec.paths)
      for (const p of g.paths) out.set(`${e.spec.policyKind} ${canon(p)}`, canon(strip(g.rules)));
  return out;
};
const strip = (rules: Record<string, RuleEntry>) =>
  Object.fromEntries(
    Object.entries(rules).map(([k, v]) => [k, { value: v.value, source: v.source, as: v.as }]),
  );
const offlinePaths = (dir: string) => {
  const out = new Map<string, string>();
  for (const e of JSON.parse(cascadectl('effective', '-f', dir, '-o', 'json')) as {
    policyKind: string;
    path: object;
    rules: Record<string, RuleEntry>;
  }[])
    out.set(`${e.policyKind} ${canon(e.path)}`, canon(strip(e.rules)));
  return out;
};

/** examples/gateway applied with kubectl: the EffectivePolicies equal what cascadectl computes offline */
export async function gatewayExamplePublished(): Promise<void> {
  const objects = [
    '00-infra.yaml',
    '10-platform-policies.yaml',
    '20-team-routes.yaml',
    '30-team-policies.yaml',
  ].flatMap((f) => docs(`examples/gateway/${f}`));
  // the data-plane providers' CRDs, after Cascade (the usual order): Enforced needs the wiring
  installProviderCrds();
  const wired = Date.now();
  for (const ns of new Set(objects.map((o) => o.metadata.namespace).filter(Boolean)))
    sh('kubectl', ['apply', '-f', '-'], {
      input: stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }),
    });
  kubectl('apply', '--server-side', '-f', join(ROOT, 'examples/gateway'));
  const want = offlinePaths(join(ROOT, 'examples/gateway'));
  expect(want.size).toBeGreaterThan(5);
  const t0 = Date.now();
  await until('published EffectivePolicies equal to the offline result', 60, () => {
    const have = publishedPaths();
    // the published set has one more object per gateway and kind: what applies to routes to come ("/*")
    for (const k of have.keys()) if (k.includes('"route":"/*"')) have.delete(k);
    return canon([...have].sort()) === canon([...want].sort()) ? true : undefined;
  });
  figures.gatewayStoryPublishedSeconds = (Date.now() - t0) / 1000;
  // the gateway wired by the wiring-controller (its Istio class): then the policies may be Enforced
  await mainWasmPlugin();
  figures.wiringAfterCrdsSeconds = (Date.now() - wired) / 1000;
  const predicted = (
    JSON.parse(cascadectl('status', '-f', join(ROOT, 'examples/gateway'), '-o', 'json')) as {
      policies: {
        kind: string;
        namespace: string;
        name: string;
        conditions: { type: string; status: string; reason: string }[];
      }[];
    }
  ).policies;
  expect(predicted.length).toBeGreaterThan(3);
  await dataPlaneReady(predicted);
  // statuses as the CLI predicts (the controllers write them after the EffectivePolicies, and Enforced
  // once the gateway is wired)
  const mismatches = () =>
    predicted.flatMap((p) => {
      const live = kubectlJson<{
        status?: { conditions?: { type: string; status: string; reason: string }[] };
      }>('get', p.kind.toLowerCase(), '-n', p.namespace, p.name);
      return p.conditions
        .filter((c) => {
          const l = live.status?.conditions?.find((x) => x.type === c.type);
          return l?.status !== c.status || l?.reason !== c.reason;
        })
        .map((c) => `${p.kind} ${p.namespace}/${p.name} ${c.type}: want ${c.status}/${c.reason}`);
    });
  await until('statuses as cascadectl status predicts', 60, () =>
    mismatches().length === 0 ? true : undefined,
  ).catch(() => expect(mismatches()).toEqual([]));
}

type Cond = { type: string; status: string; reason: string; message?: string };
const enforcedOf = (kind: string, ns: string, name: string) =>
  kubectlJson<{ status?: { conditions?: Cond[] } }>(
    'get',
    kind.toLowerCase(),
    '-n',
    ns,
    name,
  ).status?.conditions?.find((c) => c.type === 'Enforced');

/**
 * Enforced means enforced: wired, the policies are still held back, because nothing on this machine
 * runs the gateway (no Istio: the Gateway is not Programmed) or Authorino (its CRD is not even
 * served). Each reason is checked, then the e2e plays both parts: it installs the AuthConfig CRD (as
 * Authorino's install does), marks the Gateway Accepted and Programmed (as its controller would) and
 * every AuthConfig ready (as Authorino would), and the policies become Enforced.
 */
async function dataPlaneReady(
  predicted: {
    kind: string;
    namespace: string;
    name: string;
    conditions: { type: string; status: string }[];
  }[],
): Promise<void> {
  const enforcedWanted = predicted.filter((p) =>
    p.conditions.some((c) => c.type === 'Enforced' && c.status === 'True'),
  );
  // a timeout names each policy not held back as wanted, with the Enforced condition it has
  const heldBack = (kind: string, reason: string, text: RegExp) =>
    until(`${kind}s held back: ${reason}`, 60, () => {
      const off = enforcedWanted
        .filter((p) => p.kind === kind)
        .flatMap((p) => {
          const e = enforcedOf(p.kind, p.namespace, p.name);
          return e?.status === 'False' && e.reason === reason && text.test(e.message ?? '')
            ? []
            : [`${p.namespace}/${p.name}: ${e ? `${e.status}/${e.reason}: ${e.message}` : 'no Enforced'}`];
        });
      if (off.length) throw new Error(off.join('; '));
      return true;
    });
  await heldBack(
    'AuthPolicy',
    'MissingDependency',
    /authconfigs \(authorino\.kuadrant\.io\/v1beta3\) is not served/,
  );
  // no Limitador in the cluster: wired, but nothing answers the gateway's rate-limit calls
  await heldBack(
    'RateLimitPolicy',
    'MissingDependency',
    /Limitador is not answering: its Service kuadrant-system\/limitador-limitador has no endpoints.*failure mode allow/,
  );
  // the decision points' part: Services at the addresses the chart gives, backed by a running pod, so
  // kube-controller-manager's EndpointSlice controller reports a ready endpoint for each
  decisionPointsUp();
  await heldBack(
    'RateLimitPolicy',
    'TargetNotProgrammed',
    /gateway infra\/main has not been programmed by any controller \(Programmed=Unknown/,
  );
  const events = kubectlJson<{ items: { reason: string; involvedObject: { kind: string } }[] }>(
    'get',
    'events',
    '-A',
    '--field-selector',
    'reason=TargetNotProgrammed',
  ).items;
  expect(events.some((e) => e.involvedObject.kind === 'RateLimitPolicy')).toBe(true);
  const t0 = Date.now();
  // Authorino's part, 1: its CRD. The AuthConfigs are written; Authorino has said nothing of them.
  sh('kubectl', ['apply', '-f', '-'], { input: JSON.stringify(authConfigCrd) });
  await heldBack('AuthPolicy', 'Pending', /its consumer has reported nothing on it yet/);
  // the gateway controller's part: Accepted and Programmed, beside the conditions Cascade wrote
  await until('Gateway infra/main Accepted and Programmed', 30, () => {
    const gw = kubectlJson<{ metadata: { generation: number }; status: { conditions: Cond[] } }>(
      'get',
      'gateway',
      '-n',
      'infra',
      'main',
    );
    const ops = ['Accepted', 'Programmed'].flatMap((type) => {
      const i = gw.status.conditions.findIndex((c) => c.type === type);
      const value = {
        type,
        status: 'True',
        reason: type,
        message: 'set by the e2e in the part of the gateway controller',
        observedGeneration: gw.metadata.generation,
        lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      };
      return i < 0
        ? [{ op: 'add', path: '/status/conditions/-', value }]
        : [
            { op: 'test', path: `/status/conditions/${i}/type`, value: type },
            { op: 'replace', path: `/status/conditions/${i}`, value },
          ];
    });
    try {
      kubectl(
        'patch',
        'gateway',
        '-n',
        'infra',
        'main',
        '--subresource=status',
        '--type=json',
        '-p',
        JSON.stringify(ops),
      );
      return true;
    } catch {
      return undefined; // the list moved meanwhile (Cascade's Affected conditions): again
    }
  });
  // Authorino's part, 2: every AuthConfig reported ready; until then the AuthPolicies are Pending
  await until('every AuthConfig ready, no AuthPolicy held back', 60, () => {
    const acs = kubectlJson<{
      items: { metadata: { namespace: string; name: string }; status?: { summary?: { ready?: boolean } } }[];
    }>('get', 'authconfigs', '-A').items;
    for (const ac of acs.filter((a) => a.status?.summary?.ready !== true))
      kubectl(
        'patch',
        'authconfig',
        '-n',
        ac.metadata.namespace,
        ac.metadata.name,
        '--subresource=status',
        '--type=merge',
        '-p',
        JSON.stringify({ status: { summary: { ready: true, hostsReady: [] } } }),
      );
    return acs.length > 0 &&
      enforcedWanted.every((p) => enforcedOf(p.kind, p.namespace, p.name)?.status === 'True')
      ? true
      : undefined;
  });
  figures.dataPlaneReadyToEnforcedSeconds = (Date.now() - t0) / 1000;
}

/**
 * Authorino's and Limitador's Services (the chart's default addresses) in kuadrant-system, selecting
 * one probe-image pod: this machine has neither image, so the pod plays the part the status ladder
 * reads (a ready endpoint behind each Service); the requests themselves are not sent here.
 */
function decisionPointsUp(): void {
  const service = (name: string, port: number) => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: 'kuadrant-system' },
    spec: { selector: { app: 'decision-points' }, ports: [{ name: 'grpc', port, targetPort: 8080 }] },
  });
  sh('kubectl', ['apply', '-f', '-'], {
    input: [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kuadrant-system' } },
      probePod('kuadrant-system', 'decision-points', { app: 'decision-points' }),
      service('authorino-authorino-authorization', 50051),
      service('limitador-limitador', 8081),
    ]
      .map((o) => stringify(o))
      .join('---\n'),
  });
  kubectl('wait', '-n', 'kuadrant-system', '--for=condition=Ready', 'pod/decision-points', '--timeout=120s');
}

/** leader failover: the new leader takes over within one lease duration; a change made meanwhile is published exactly once */
export async function leaderFailover(): Promise<void> {
  const lease = () =>
    kubectlJson<{ spec: { holderIdentity: string; leaseDurationSeconds: number } }>(
      'get',
      'lease',
      '-n',
      NS,
      'authpolicy-controller-leader',
    ).spec;
  const before = lease();
  const leaderPod = before.holderIdentity.replace(/-\d+$/, '');
  const watcher: ChildProcess = spawn(
    'kubectl',
    [
      'get',
      'effectivepolicy',
      '-n',
      'team-a',
      'authpolicy-httproute-catalog',
      '--watch',
      '--output-watch-events',
      '-o',
      'json',
    ],
    { env: env() },
  );
  let events = '';
  watcher.stdout?.on('data', (d) => {
    events += d.toString();
  });
  try {
    await new Promise((r) => setTimeout(r, 1500)); // the watch's initial ADDED
    const t0 = Date.now();
    kubectl('delete', 'pod', '-n', NS, leaderPod, '--wait=false');
    const issuer = `https://sso.example.com/realms/failover-${Date.now()}`;
    kubectl(
      'patch',
      'authpolicy',
      '-n',
      'team-a',
      'catalog-jwt',
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { rules: { authentication: { primary: { jwt: { issuerUrl: issuer } } } } } }),
    );
    const next = await until('a new leader', before.leaseDurationSeconds * 2 + 10, () => {
      const l = lease();
      return l.holderIdentity && !l.holderIdentity.startsWith(leaderPod) ? l : undefined;
    });
    figures.failoverSeconds = (Date.now() - t0) / 1000;
    expect(figures.failoverSeconds).toBeLessThanOrEqual(before.leaseDurationSeconds + 5);
    expect(next.holderIdentity).not.toContain(leaderPod);
    await until('the change published', 60, () =>
      kubectl(
        'get',
        'effectivepolicy',
        '-n',
        'team-a',
        'authpolicy-httproute-catalog',
        '-o',
        'json',
      ).includes(issuer)
        ? true
        : undefined,
    );
    await new Promise((r) => setTimeout(r, 5000)); // anything published twice would show by now
    const modified = events.split(/\n(?=\{)/).filter((e) => /"type":\s*"MODIFIED"/.test(e));
    expect(modified.filter((e) => e.includes(issuer)).length).toBe(1);
  } finally {
    watcher.kill();
  }
}
