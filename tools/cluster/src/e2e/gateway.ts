// The gateway story: the examples applied with kubectl, EffectivePolicies and status equal to what
// cascadectl computes offline; leader failover publishes a change made meanwhile exactly once.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import { canon, cascadectl, env, kubectl, kubectlJson, ROOT, sh, until } from '../harness.ts';
import { docs, figures, NS } from './shared.ts';
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
