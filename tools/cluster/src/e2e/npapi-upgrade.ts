// An install whose network-policy-api CRDs a user applied (v0.1.7's ANP/BANP, v0.2.0's
// ClusterNetworkPolicy, v1alpha2 only: `cluster up --npapi-crds v0.2.0`) moves them to the chart's
// v0.3.0 bundle (ClusterNetworkPolicy v1beta1 stored, v1alpha2 still served) the way the chart's
// README says: the CRDs adopted by the release, `helm upgrade --set networkPolicyAPI.install=true`,
// then the agents and the controller restarted (they read v1beta1 from their next list). Real
// connections across nodes are probed before, during and after: none gets another verdict than
// `netpol simulate --kubeconfig` gives, and the ClusterNetworkPolicy deciding some of them (a network
// written with host bits set, which v1beta1 would refuse) keeps its meaning and is named in an Event.
import { join } from 'node:path';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import { KUBECONFIG, kubectlJson, ROOT, sh, until } from '../harness.ts';
import { agreesWithSimulate } from './netpol.ts';
import { expectNoWrongVerdict, predicted, probeLoop, probesFor } from './probes.ts';
import { figures, NS, net } from './shared.ts';

const CRDS = ['clusternetworkpolicies', 'adminnetworkpolicies', 'baselineadminnetworkpolicies'].map(
  (p) => `${p}.policy.networking.k8s.io`,
);
type Crd = {
  metadata: { annotations?: Record<string, string>; labels?: Record<string, string> };
  spec: { versions: { name: string; served: boolean; storage: boolean }[] };
};
const kubectl = (...args: string[]) =>
  sh('kubectl', ['--kubeconfig', KUBECONFIG, ...args], { timeoutMs: 300_000 });

export async function clusterNetworkPolicyUpgrade(): Promise<void> {
  const cnpCrd = () => kubectlJson<Crd>('get', 'crd', CRDS[0]!);
  expect(cnpCrd().metadata.annotations?.['policy.networking.k8s.io/bundle-version']).toBe('v0.2.0');
  expect(cnpCrd().spec.versions.map((v) => v.name)).toEqual(['v1alpha2']);
  // TCP on one port from every example pod to every other, and to the nodes: a round takes seconds
  const probes = probesFor(net.pods, false, []).filter((p) => p.port === net.ports[1]);
  // what simulate says before the policy (the kernel agreed with it in the step before this one)
  const before = predicted(probes);
  // one node's pod range, written with a pod's address (host bits set): denied egress on that port
  const target = net.pods.find((p) => p.metadata.namespace === 'shop') ?? net.pods[0]!;
  const targetIp = net.podIp.get(`${target.metadata.namespace}/${target.metadata.name}`)!;
  const cnp = {
    apiVersion: 'policy.networking.k8s.io/v1alpha2',
    kind: 'ClusterNetworkPolicy',
    metadata: { name: 'e2e-upgrade-range' },
    spec: {
      tier: 'Admin',
      priority: 2,
      subject: { namespaces: {} },
      egress: [
        {
          name: 'not-that-node',
          action: 'Deny',
          to: [{ networks: [`${targetIp}/24`] }],
          protocols: [{ tcp: { destinationPort: { number: net.ports[1]! } } }],
        },
      ],
    },
  };
  sh('kubectl', ['apply', '-f', '-'], { input: stringify(cnp) });
  try {
    const want = await agreesWithSimulate(probes);
    expect(want.filter((v, i) => v !== before[i]).length).toBeGreaterThan(0); // it decides some
    const event = await until('an Event naming the network with host bits', 60, () =>
      kubectlJson<{ items: { reason: string; message: string }[] }>(
        'get',
        'events',
        '-n',
        'default',
        '--field-selector',
        `involvedObject.name=${cnp.metadata.name}`,
      ).items.find((e) => e.reason === 'AcceptedWithWarnings'),
    );
    expect(event.message).toContain('has host bits set, which ClusterNetworkPolicy v1beta1 refuses');

    const loop = probeLoop(probes, want);
    const t0 = Date.now();
    try {
      // the chart takes the CRDs over (README, "network-policy-api's CRDs"), then installs v0.3.0's
      for (const crd of CRDS) {
        kubectl(
          'annotate',
          'crd',
          crd,
          `meta.helm.sh/release-name=cascade`,
          `meta.helm.sh/release-namespace=${NS}`,
          '--overwrite',
        );
        kubectl('label', 'crd', crd, 'app.kubernetes.io/managed-by=Helm', '--overwrite');
      }
      sh(
        'helm',
        [
          'upgrade',
          'cascade',
          join(ROOT, 'charts/cascade'),
          '-n',
          NS,
          // as the README's upgrade: the new chart's defaults, then the values it was installed with
          '--reset-then-reuse-values',
          '--set',
          'networkPolicyAPI.install=true',
          '--wait',
          '--timeout',
          '5m',
        ],
        { timeoutMs: 400_000 },
      );
      await until('v1beta1 served', 60, () =>
        kubectlJson<{ items: unknown[] }>('get', 'clusternetworkpolicies.v1beta1.policy.networking.k8s.io')
          .items.length > 0
          ? true
          : undefined,
      );
      kubectl('rollout', 'restart', '-n', NS, 'ds/netpolicy-agent', 'deploy/netpolicy-controller');
      kubectl('rollout', 'status', '-n', NS, 'ds/netpolicy-agent', '--timeout=300s');
      kubectl('rollout', 'status', '-n', NS, 'deploy/netpolicy-controller', '--timeout=300s');
      const wholeBefore = loop.progress().whole;
      await until('three whole rounds after the restart', 120, () =>
        loop.progress().whole >= wholeBefore + 3 ? true : undefined,
      );
    } finally {
      await loop.stop();
    }
    const r = loop.progress();
    const { rounds, whole, unmeasured } = r;
    figures.npapiUpgradeSeconds = (Date.now() - t0) / 1000;
    figures.npapiUpgradeRounds = rounds;
    figures.npapiUpgradeProbes = rounds * probes.length - unmeasured;
    figures.npapiUpgradeUnmeasured = unmeasured;
    figures.npapiUpgradeLateAnswers = r.late.length;
    await expectNoWrongVerdict(r, t0);
    expect(whole).toBeGreaterThanOrEqual(3);
    // the chart's bundle now, kept on uninstall; every agent reads v1beta1
    const after = cnpCrd();
    expect(after.metadata.annotations).toMatchObject({
      'policy.networking.k8s.io/bundle-version': 'v0.3.0',
      'helm.sh/resource-policy': 'keep',
    });
    expect(after.spec.versions.map((v) => [v.name, v.storage])).toEqual([
      ['v1alpha2', false],
      ['v1beta1', true],
    ]);
    const agents = kubectl(
      'get',
      'pods',
      '-n',
      NS,
      '-l',
      'app.kubernetes.io/name=netpolicy-agent',
      '-o',
      'name',
    )
      .trim()
      .split('\n');
    for (const a of agents)
      expect(kubectl('logs', '-n', NS, a), a).toMatch(
        /"path":"\/apis\/policy\.networking\.k8s\.io\/v1beta1\/clusternetworkpolicies"/,
      );
    // the same verdicts, now from objects read as v1beta1 (simulate --kubeconfig reads v1beta1 too)
    expect(await agreesWithSimulate(probes)).toEqual(want);
  } finally {
    sh('kubectl', ['delete', 'clusternetworkpolicy', cnp.metadata.name, '--ignore-not-found']);
  }
}
