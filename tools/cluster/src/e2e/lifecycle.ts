// The release's life: install to Ready, an agent restart and a helm upgrade without a wrong
// verdict, the agent's capabilities, the upstream suites' subsets, uninstall and `cluster down`.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { prepare, runSubsets, SUBSET_SUITES, writeResults } from '@cascade/conformance';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import {
  CLUSTER_SH,
  canon,
  cascadectl,
  KUBECONFIG,
  kubectl,
  kubectlJson,
  ROOT,
  sh,
  shAsync,
  until,
} from '../harness.ts';
import { REBUILT_TAG, rebuiltImages } from './prebuilt.ts';
import { expectNoWrongVerdict, predicted, probeLoop, probesFor } from './probes.ts';
import { attachedPrograms, figures, helm, install, NS, net, probePod } from './shared.ts';

/** helm install under a CPU hog (one busy process per core): every Cascade pod becomes Ready, none restarts */
export function installUntilReady(): void {
  // what a loaded node does to a start (issue 41: liveness probes killed controllers 4-8 times each)
  const hogs = Array.from({ length: cpus().length }, () =>
    spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }),
  );
  const t0 = Date.now();
  try {
    install('0.1.0');
  } finally {
    for (const h of hogs) h.kill('SIGKILL');
  }
  figures.installToReadySecondsUnderCpuHog = (Date.now() - t0) / 1000;
  const pods = kubectlJson<{
    items: {
      metadata: { name: string; labels: Record<string, string> };
      status: {
        conditions?: { type: string; status: string }[];
        containerStatuses?: { name: string; restartCount: number }[];
      };
    }[];
  }>('get', 'pods', '-n', NS).items;
  const ready = pods.filter((p) =>
    p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
  );
  expect(pods.map((p) => p.metadata.labels['app.kubernetes.io/name']).sort()).toEqual([
    'authpolicy-controller',
    'authpolicy-controller',
    'netpolicy-agent',
    'netpolicy-controller',
    'netpolicy-controller',
    'ratelimitpolicy-controller',
    'ratelimitpolicy-controller',
    'tokenratelimitpolicy-controller',
    'tokenratelimitpolicy-controller',
    'wiring-controller',
    'wiring-controller',
  ]);
  expect(ready.length).toBe(pods.length);
  const restarts = pods.flatMap((p) =>
    (p.status.containerStatuses ?? [])
      .filter((c) => c.restartCount > 0)
      .map((c) => `${p.metadata.name}/${c.name}: ${c.restartCount}`),
  );
  figures.restartsDuringInstall = restarts.length;
  expect(restarts).toEqual([]);
  // network-policy-api's CRDs came with the chart (networkPolicyAPI.install, the default): v0.3.0's
  // ClusterNetworkPolicy, kept on uninstall
  const cnpCrd = kubectlJson<{
    metadata: { annotations: Record<string, string>; labels: Record<string, string> };
  }>('get', 'crd', 'clusternetworkpolicies.policy.networking.k8s.io').metadata;
  expect(cnpCrd.annotations).toMatchObject({
    'policy.networking.k8s.io/bundle-version': 'v0.3.0',
    'helm.sh/resource-policy': 'keep',
    'meta.helm.sh/release-name': 'cascade',
  });
  // CoreDNS could start only once the agent pinned its programs (cascade-cni fails closed)
  kubectl('-n', 'kube-system', 'rollout', 'status', 'deploy/coredns', '--timeout=120s');
}

/**
 * cascadectl doctor on the running install: nothing failed; every component ready; Authorino's and
 * Limitador's Services answer (the gateway step's pod); the node's agent reports its program and
 * cascade-cni in the chain. Its exit code is what CI would gate on.
 */
export async function doctorOnTheCluster(): Promise<void> {
  const out = cascadectl('doctor', '--kubeconfig', KUBECONFIG, '--release-namespace', NS, '-o', 'json');
  const checks = (
    JSON.parse(out) as { checks: { area: string; name: string; status: string; detail: string }[] }
  ).checks;
  expect(checks.filter((c) => c.status === 'fail')).toEqual([]);
  expect(checks.filter((c) => c.area === 'component' && c.status !== 'ok')).toEqual([]);
  for (const d of ['Authorino', 'Limitador'])
    expect(checks.find((c) => c.name === d)).toMatchObject({ status: 'ok' });
  await until("the node's agent reports its program and the CNI chain", 60, () => {
    const again = JSON.parse(
      cascadectl('doctor', '--kubeconfig', KUBECONFIG, '--release-namespace', NS, '-o', 'json'),
    ) as { checks: { area: string; status: string; detail: string }[] };
    const node = again.checks.find((c) => c.area === 'node');
    return node?.status === 'ok' && /program [0-9a-f]{12}, CNI chain chained/.test(node.detail)
      ? true
      : undefined;
  });
  figures.doctorChecks = checks.length;
}

/** agent restart and helm upgrade to a rebuilt image: no wrong verdict throughout, no EffectivePolicy rewritten */
export async function restartAndUpgrade(): Promise<void> {
  // a small table, so a round takes a few seconds and many rounds cover the restart and the upgrade
  const sources = net.pods.slice(0, 3);
  const probes = probesFor(sources, false).filter((p) => p.port === net.ports[1] || p.port === net.ports[2]);
  const want = predicted(probes);
  // Gateway EffectivePolicies, and the Network ones of the example namespaces (their pods stay).
  // Cascade's own pods are replaced by the upgrade (a new pod-template-hash: a new label set), and
  // the Services test's namespace may still be going away: their Network objects change, rightly.
  const versions = () =>
    canon(
      kubectlJson<{
        items: {
          metadata: { namespace: string; name: string; resourceVersion: string };
          spec: { policyKind: string };
        }[];
      }>('get', 'effectivepolicies', '-A')
        .items.filter(
          (e) => e.spec.policyKind !== 'Network' || net.exampleNamespaces.includes(e.metadata.namespace),
        )
        .map((e) => [e.metadata.namespace, e.metadata.name, e.metadata.resourceVersion]),
    );
  const rvBefore = versions();
  const since = Date.now();
  const loop = probeLoop(probes, want);
  try {
    const agent = kubectl(
      'get',
      'pods',
      '-n',
      NS,
      '-l',
      'app.kubernetes.io/name=netpolicy-agent',
      '-o',
      'name',
    ).trim();
    kubectl('delete', '-n', NS, agent, '--wait=true');
    kubectl('rollout', 'status', '-n', NS, 'ds/netpolicy-agent', '--timeout=120s');
    // a rebuilt image: the same inputs built again under a new tag (reproducible, so the same
    // digest), built and imported in the background since the install step (prebuilt.ts)
    const waitedFrom = Date.now();
    figures.rebuiltImagesSeconds = await rebuiltImages();
    figures.rebuiltImagesWaitSeconds = (Date.now() - waitedFrom) / 1000;
    const t0 = Date.now();
    install(REBUILT_TAG);
    figures.upgradeSeconds = (Date.now() - t0) / 1000;
    await new Promise((r) => setTimeout(r, 10_000)); // the new leaders settle and resync
  } finally {
    await loop.stop();
  }
  const r = loop.progress();
  figures.probeRoundsDuringRestartAndUpgrade = r.rounds;
  figures.probesUnmeasuredDuringRestartAndUpgrade = r.unmeasured;
  figures.probesLateDuringRestartAndUpgrade = r.late.length;
  expect(r.rounds).toBeGreaterThanOrEqual(3);
  expect(r.whole).toBeGreaterThanOrEqual(2);
  // the agent's restart empties its ring of flows: refusals before it are not seen (its log has them)
  await expectNoWrongVerdict(r, since);
  expect(versions()).toBe(rvBefore);
}

/** the agent needs each of CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON: without any one its program load is refused */
export async function agentCapabilities(): Promise<void> {
  const caps = ['BPF', 'NET_ADMIN', 'PERFMON'];
  const setCaps = (add: string[]) =>
    kubectl(
      'patch',
      'ds',
      '-n',
      NS,
      'netpolicy-agent',
      '--type=json',
      '-p',
      JSON.stringify([
        {
          op: 'replace',
          path: '/spec/template/spec/containers/0/securityContext/capabilities/add',
          value: add,
        },
      ]),
    );
  const agentPod = () =>
    kubectlJson<{
      items: { metadata: { name: string; creationTimestamp: string; deletionTimestamp?: string } }[];
    }>('get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/name=netpolicy-agent').items.find(
      (p) => !p.metadata.deletionTimestamp,
    )?.metadata.name;
  try {
    for (const without of caps) {
      const before = agentPod();
      setCaps(caps.filter((c) => c !== without));
      const refused = await until(`the agent without CAP_${without} refused`, 90, () => {
        const pod = agentPod();
        if (!pod || pod === before) return undefined;
        let log = '';
        try {
          log = kubectl('logs', '-n', NS, pod, '-c', 'agent', '--tail=20');
        } catch {}
        return /bpfctl load .*(Operation not permitted|Permission denied)/.exec(log)?.[0];
      });
      expect(refused).toMatch(/load/);
    }
  } finally {
    setCaps(caps);
    kubectl('rollout', 'status', '-n', NS, 'ds/netpolicy-agent', '--timeout=120s');
  }
}

/** the upstream suites, a representative subset of each (npm run conformance runs them in full): every test passes */
export async function upstreamSubsets(): Promise<void> {
  // the example's cluster-scoped policies would change the suites' expectations (the suites own the
  // singleton BaselineAdminNetworkPolicy "default"): taken out first, with the example's namespaces
  kubectl(
    'delete',
    'adminnetworkpolicies,baselineadminnetworkpolicies,clusternetworkpolicies',
    '--all',
    '--wait=true',
  );
  // another program on the node makes a network namespace while pods run (the kernel tests beside
  // this e2e do): the pods made before it must still be torn down (cluster/node.ts
  // hostNetnsMountPoint; on a fresh machine this deletion once hung for want of it)
  sh('bash', ['-c', 'ip netns add cascade-e2e-other && ip netns del cascade-e2e-other']);
  const tDelete = Date.now();
  sh('kubectl', ['delete', 'namespace', ...net.exampleNamespaces, '--wait=true', '--ignore-not-found'], {
    timeoutMs: 180_000,
  });
  figures["conformance subsets: the examples' namespaces deleted first (s)"] = Math.round(
    (Date.now() - tDelete) / 1000,
  );
  const bin = prepare(undefined, 1, 'cascade', SUBSET_SUITES);
  const failed: string[] = [];
  const t0 = Date.now();
  // side by side: the NetworkPolicy tests in two processes beside the network-policy-api suites
  for (const r of await runSubsets(bin)) {
    const suite = r.suite;
    writeResults(r, join(ROOT, 'tools/conformance/.local'));
    figures[`conformance ${suite} (subset)`] = `${r.passed} passed, ${r.failed} failed in ${r.seconds} s`;
    expect(r.passed, `${suite}: no test ran`).toBeGreaterThan(0);
    for (const t of r.tests)
      if (t.result === 'failed' && !t.environment) failed.push(`${suite} ${t.name}: ${t.reason ?? ''}`);
  }
  figures['conformance subsets, side by side (s)'] = Math.round((Date.now() - t0) / 1000);
  expect(failed).toEqual([]);
  // the suites (and the Services test) delete their namespaces without waiting: gone first
  const tGone = Date.now();
  await until("the suites' namespaces gone", 240, () =>
    /namespace\/(network-policy-conformance-|svc-e2e|netpol-)/.test(
      kubectl('get', 'namespaces', '-o', 'name'),
    )
      ? undefined
      : true,
  );
  figures["conformance subsets: the suites' namespaces gone after (s)"] = Math.round(
    (Date.now() - tGone) / 1000,
  );
}

/** The namespace whose pods outlive the uninstall: a server isolated by a NetworkPolicy, a client. */
const AFTER = 'after-uninstall';
const probeFrom = async (pod: string, ...args: string[]) =>
  (
    await shAsync(
      'kubectl',
      ['exec', '-n', AFTER, pod, '--', '/usr/local/bin/cascade-probe', ...args],
      60_000,
    ).catch((e: unknown) => String((e as { stdout?: string }).stdout ?? e))
  )
    .trim()
    .split(' ')[0];

/**
 * helm uninstall removes its objects, and each agent takes Cascade off its node (the CNI chain, the
 * programs, the pins): old pods lose the deny of a policy nothing enforces any more, new pods get
 * plain networking and DNS; `cascadectl cleanup` removes what the controllers wrote.
 */
export async function uninstall(): Promise<void> {
  sh('kubectl', ['apply', '-f', '-'], {
    input: [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: AFTER } },
      probePod(AFTER, 'server', { app: 'server' }),
      probePod(AFTER, 'client', { app: 'client' }),
      {
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { name: 'deny-server', namespace: AFTER },
        spec: { podSelector: { matchLabels: { app: 'server' } }, policyTypes: ['Ingress'] },
      },
    ]
      .map((o) => stringify(o))
      .join('---\n'),
  });
  kubectl('wait', '-n', AFTER, '--for=condition=Ready', 'pod/server', 'pod/client', '--timeout=120s');
  const server = kubectlJson<{ status: { podIP: string } }>('get', 'pod', '-n', AFTER, 'server').status.podIP;
  await until('the server isolated while Cascade runs', 60, async () =>
    (await probeFrom('client', 'probe', 'tcp', server, '8080', '800')) === 'DENY' ? true : undefined,
  );

  const t0 = Date.now();
  helm('uninstall', 'cascade', '-n', NS, '--wait');
  await until('every Cascade pod gone', 90, () =>
    kubectl('get', 'all', '-n', NS, '-o', 'name').trim() === '' ? true : undefined,
  );
  figures.uninstallSeconds = (Date.now() - t0) / 1000;
  expect(kubectl('get', 'clusterroles', '-o', 'name')).not.toMatch(/authpolicy-controller|netpolicy-agent/);
  // network-policy-api's CRDs stay (helm.sh/resource-policy: keep): deleting one deletes every policy of its kind
  expect(kubectl('get', 'crd', '-o', 'name')).toMatch(/clusternetworkpolicies.policy.networking.k8s.io/);
  // the agent left its node: no program on any veth, no pins, cascade-cni out of the CNI chain
  expect(attachedPrograms()).toBe(0);
  expect(existsSync('/sys/fs/bpf/cascade')).toBe(false);
  const conf = readFileSync('/var/lib/cascade-cluster/cni/net.d/10-cascade.conflist', 'utf8');
  expect(JSON.parse(conf).plugins.map((p: { type: string }) => p.type)).toEqual(['bridge']);
  figures.programsLeftAfterUninstall = attachedPrograms();
  // an old pod: the stale deny is gone; a new pod: networking and DNS as without Cascade
  expect(await probeFrom('client', 'probe', 'tcp', server, '8080', '800')).toBe('ALLOW');
  sh('kubectl', ['apply', '-f', '-'], { input: stringify(probePod(AFTER, 'newcomer', { app: 'newcomer' })) });
  kubectl('wait', '-n', AFTER, '--for=condition=Ready', 'pod/newcomer', '--timeout=120s');
  expect(await probeFrom('newcomer', 'probe', 'tcp', server, '8080', '800')).toBe('ALLOW');
  expect(
    await probeFrom('newcomer', 'dns', 'udp', '10.96.0.10', 'kubernetes.default.svc.cluster.local'),
  ).toBe('ALLOW');

  // what the controllers wrote outlives them until `cascadectl cleanup`; then nothing of it is left
  const written = () => {
    const names = (...args: string[]) =>
      kubectlJson<{ items: { metadata: { name: string } }[] }>('get', ...args, '-o', 'json').items.length;
    const affected = [
      ...kubectlJson<{ items: { status?: { conditions?: { type: string }[] } }[] }>(
        'get',
        'gateways',
        '-A',
      ).items.flatMap((g) => (g.status?.conditions ?? []).filter((c) => /PolicyAffected$/.test(c.type))),
      ...kubectlJson<{ items: { status?: { parents?: { controllerName: string }[] } }[] }>(
        'get',
        'httproutes',
        '-A',
      ).items.flatMap((r) =>
        (r.status?.parents ?? []).filter((p) => p.controllerName === 'cascade.dev/policy-controller'),
      ),
    ];
    return {
      effectivepolicies: names('effectivepolicies', '-A'),
      authconfigs: names('authconfigs', '-A'),
      configmaps: names('configmaps', '-A', '-l', 'cascade.dev/managed-by'),
      podaddressslices: names('podaddressslices'),
      leases: kubectl('get', 'leases', '-n', NS, '-o', 'name')
        .split('\n')
        .filter((l) => /-leader$/.test(l)).length,
      affected: affected.length,
    };
  };
  const before = written();
  expect(before.effectivepolicies + before.podaddressslices).toBeGreaterThan(0);
  const r = JSON.parse(
    cascadectl('cleanup', '--kubeconfig', KUBECONFIG, '--release-namespace', NS, '-o', 'json'),
  ) as {
    removed: string[];
    failed: string[];
  };
  expect(r.failed).toEqual([]);
  figures.cleanupRemovedObjects = r.removed.length;
  await until('nothing Cascade wrote is left', 60, () =>
    Object.values(written()).every((n) => n === 0) ? true : undefined,
  ).catch(() => expect(written()).toEqual({}));
  // gone before `down`: a pod torn down while the cluster stops can leave its veth behind
  sh('kubectl', ['delete', 'namespace', AFTER, '--wait=true', '--timeout=120s'], { timeoutMs: 150_000 });
  net.nodeServer?.kill();
}

/** npm run cluster -- down leaves nothing behind: processes, mounts, interfaces, routes, chains, pins, state */
export function clusterDownLeavesNothing(): void {
  const t0 = Date.now();
  sh('bash', [CLUSTER_SH, 'down'], { timeoutMs: 300_000 });
  figures.downSeconds = (Date.now() - t0) / 1000;
  const left: string[] = [];
  let procs = '';
  try {
    procs = sh('pgrep', ['-af', 'cascade-cluster|containerd-shim']).trim();
  } catch {} // pgrep exits 1 when nothing matches
  if (procs) left.push(`processes: ${procs}`);
  const mounts = sh('bash', [
    '-c',
    'findmnt -rn -o TARGET | grep -E "cascade-cluster|/run/netns/cni-" || true',
  ]).trim();
  if (mounts) left.push(`mounts: ${mounts}`);
  if (sh('ip', ['-o', 'link', 'show']).match(/cascade0|cascade-link|veth|\bcl-\d/))
    left.push('interfaces: cascade0, cascade-link or veths');
  if (sh('ip', ['route', 'show']).match(/10\.244\.|10\.96\.|10\.250\./))
    left.push('routes to the pod, Service or node-link range');
  const netns = sh('ip', ['netns', 'list']).match(/cascade-node-\d+|cni-\S+/g);
  if (netns) left.push(`network namespaces: ${netns.join(' ')}`);
  const cgroups = sh('bash', ['-c', 'ls -d /sys/fs/cgroup/*/cascade-node-* 2>/dev/null || true']).trim();
  if (cgroups) left.push(`cgroups: ${cgroups}`);
  if (sh('iptables-save', []).includes('KUBE-')) left.push('iptables KUBE-* chains');
  for (const path of [
    '/sys/fs/bpf/cascade',
    '/var/lib/cascade-cluster',
    '/run/cascade-cluster',
    '/run/cascade/cni',
  ])
    if (existsSync(path)) left.push(path);
  expect(left).toEqual([]);
}
