// cascadectl doctor: the verdicts from plain snapshots (every missing piece named, with what to do),
// then the command against a real kube-apiserver, where nothing of Cascade runs yet.
import { authPolicyKind } from '@cascade/authpolicy';
import { effectivePolicyCrd, policyCrd } from '@cascade/core';
import { apiServerTestsEnabled, Envtest } from '@cascade/envtest';
import { netpolNodeReportCrd, podAddressSliceCrd } from '@cascade/netpolicy';
import { rateLimitPolicyKind } from '@cascade/ratelimitpolicy';
import { tokenRateLimitPolicyKind } from '@cascade/tokenratelimitpolicy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatDoctor } from '../src/commands/doctor.ts';
import { diagnose, type HealthSnapshot } from '../src/health.ts';
import { run } from './run.ts';

const crd = (name: string, versions = ['v1']) => ({
  metadata: { name },
  spec: { versions: versions.map((v, i) => ({ name: v, served: true, storage: i === 0 })) },
});
const ALL_CRDS = [
  'effectivepolicies.cascade.dev',
  'authpolicies.cascade.dev',
  'ratelimitpolicies.cascade.dev',
  'tokenratelimitpolicies.cascade.dev',
  'podaddressslices.cascade.dev',
  'netpolnodereports.cascade.dev',
  'gatewayclasses.gateway.networking.k8s.io',
  'gateways.gateway.networking.k8s.io',
  'httproutes.gateway.networking.k8s.io',
  'grpcroutes.gateway.networking.k8s.io',
  'referencegrants.gateway.networking.k8s.io',
  'adminnetworkpolicies.policy.networking.k8s.io',
  'baselineadminnetworkpolicies.policy.networking.k8s.io',
  'clusternetworkpolicies.policy.networking.k8s.io',
  'authconfigs.authorino.kuadrant.io',
  'wasmplugins.extensions.istio.io',
  'envoyfilters.networking.istio.io',
].map((n) => crd(n));
const deploy = (name: string, ready: number, wiringArgs: string[] = []) => ({
  metadata: { name, namespace: 'cascade-system' },
  spec: { replicas: 2, template: { spec: { containers: [{ args: wiringArgs }] } } },
  status: { readyReplicas: ready },
});
const slice = (ready: boolean) => ({
  metadata: { name: 's' },
  endpoints: [{ addresses: ['10.0.0.1'], conditions: { ready } }],
});
const healthy = (): HealthSnapshot => ({
  serverVersion: 'v1.34.0',
  releaseNamespace: 'cascade-system',
  crds: ALL_CRDS,
  deployments: [
    'authpolicy-controller',
    'ratelimitpolicy-controller',
    'tokenratelimitpolicy-controller',
    'wiring-controller',
    'netpolicy-controller',
  ].map((n) => deploy(n, 2)),
  daemonSets: [
    { metadata: { name: 'netpolicy-agent' }, status: { desiredNumberScheduled: 2, numberReady: 2 } },
  ],
  pods: [],
  endpointSlices: {
    'kuadrant-system/authorino-authorino-authorization': [slice(true) as never],
    'kuadrant-system/limitador-limitador': [slice(true) as never],
  },
  gatewayClasses: [
    {
      metadata: { name: 'istio' },
      spec: { controllerName: 'istio.io/gateway-controller' },
      status: { conditions: [{ type: 'Accepted', status: 'True' }] },
    },
  ],
  nodes: [{ metadata: { name: 'n1' } }, { metadata: { name: 'n2' } }],
  nodeReports: ['n1', 'n2'].map((n) => ({
    metadata: { name: n },
    spec: { findings: [], agent: { version: '0.1.0', program: 'abcdef012345', cniChain: 'chained' } },
  })),
});
const bad = (s: HealthSnapshot) => diagnose(s).filter((c) => c.status !== 'ok');

describe('cascadectl doctor: the checks', () => {
  it('a healthy install: every check ok, nothing to do', () => {
    expect(bad(healthy())).toEqual([]);
    const text = formatDoctor(diagnose(healthy()));
    expect(text).toMatch(/0 warning\(s\), 0 failed$/);
    expect(text).not.toContain('To do:');
  });

  it('names each missing piece with what to do, and how bad it is', () => {
    const s = healthy();
    s.crds = ALL_CRDS.filter(
      (c) =>
        !['ratelimitpolicies.cascade.dev', 'authconfigs.authorino.kuadrant.io'].includes(c.metadata.name),
    );
    s.deployments = [deploy('authpolicy-controller', 0), deploy('ratelimitpolicy-controller', 1)];
    s.daemonSets = [
      { metadata: { name: 'netpolicy-agent' }, status: { desiredNumberScheduled: 2, numberReady: 1 } },
    ];
    s.endpointSlices['kuadrant-system/limitador-limitador'] = [slice(false) as never];
    s.nodeReports![1]!.spec!.agent = { version: '0.1.1', program: '999999999999', cniChain: 'absent' };
    const got = Object.fromEntries(bad(s).map((c) => [c.name, [c.status, c.detail, c.fix]]));
    expect(got['ratelimitpolicies.cascade.dev']?.[0]).toBe('fail');
    expect(got['ratelimitpolicies.cascade.dev']?.[2]).toContain(
      'kubectl apply --server-side -f charts/cascade/crds/',
    );
    expect(got['authconfigs.authorino.kuadrant.io']?.[0]).toBe('warn');
    expect(got['authconfigs.authorino.kuadrant.io']?.[2]).toMatch(/install authorino .*MissingDependency/);
    expect(got['authpolicy-controller']).toEqual([
      'fail',
      '0/2 ready',
      expect.stringContaining('describe deploy/authpolicy-controller'),
    ]);
    expect(got['ratelimitpolicy-controller']?.[0]).toBe('warn');
    expect(got['wiring-controller']?.[1]).toBe('no Deployment cascade-system/wiring-controller');
    expect(got['netpolicy-agent']?.[0]).toBe('fail');
    expect(got.Limitador?.[1]).toBe(
      'Service kuadrant-system/limitador-limitador has no ready endpoint: its policies say MissingDependency',
    );
    expect(got.n2?.[1]).toMatch(
      /CNI chain absent; cascade-cni is not in the CNI chain.*agents run different programs/,
    );
    expect(got.n1?.[1]).toMatch(/agents run different programs/);
    expect(formatDoctor(diagnose(s))).toMatch(
      /To do:\n {2}FAIL ratelimitpolicies.cascade.dev: kubectl apply/,
    );
  });

  it("reads the decision points' addresses from the wiring-controller's flags; one outside the cluster is not checked", () => {
    const s = healthy();
    s.deployments = s.deployments.map((d) =>
      d.metadata.name === 'wiring-controller'
        ? deploy('wiring-controller', 2, [
            '--authorino-address=auth.example.com:50051',
            '--limitador-address=lim.other:8081',
          ])
        : d,
    );
    const got = Object.fromEntries(diagnose(s).map((c) => [c.name, c]));
    expect(got.Authorino).toMatchObject({
      status: 'ok',
      detail: 'auth.example.com:50051: outside the cluster (not checked)',
    });
    expect(got.Limitador).toMatchObject({
      status: 'warn',
      detail: expect.stringContaining('Service other/lim has no endpoints'),
    });
  });

  it('one provider installed is enough; none is a warning; CRDs it may not list are not claimed missing', () => {
    const s = healthy();
    s.crds = ALL_CRDS.filter((c) => !/istio/.test(c.metadata.name));
    expect(
      bad(s)
        .map((c) => c.name)
        .sort(),
    ).toEqual(
      [
        'envoyextensionpolicies.gateway.envoyproxy.io',
        'envoypatchpolicies.gateway.envoyproxy.io',
        'envoyfilters.networking.istio.io',
        'wasmplugins.extensions.istio.io',
      ].sort(),
    );
    delete s.crds;
    expect(bad(s).map((c) => [c.name, c.status])).toEqual([['CustomResourceDefinitions', 'warn']]);
  });
});

describe.skipIf(!apiServerTestsEnabled())('cascadectl doctor on a real API server', () => {
  let env: Envtest;
  beforeAll(async () => {
    env = await Envtest.start({
      crdObjects: [
        effectivePolicyCrd,
        policyCrd(authPolicyKind),
        policyCrd(rateLimitPolicyKind),
        policyCrd(tokenRateLimitPolicyKind),
        podAddressSliceCrd,
        netpolNodeReportCrd,
      ],
    });
  }, 120_000);
  afterAll(async () => env?.stop());

  it('nothing of Cascade runs: warnings naming each component, exit 0; a controller with no ready replica: exit 1', async () => {
    const r = await run('doctor', '--kubeconfig', env.kubeconfig, '-o', 'json');
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const checks = (
      JSON.parse(r.stdout) as { checks: { area: string; name: string; status: string; detail: string }[] }
    ).checks;
    expect(checks.find((c) => c.area === 'api')?.detail).toMatch(/^reachable, v1\./);
    expect(checks.find((c) => c.name === 'effectivepolicies.cascade.dev')).toMatchObject({ status: 'ok' });
    expect(checks.find((c) => c.name === 'gateways.gateway.networking.k8s.io')?.detail).toMatch(/served v1/);
    expect(checks.filter((c) => c.area === 'component').map((c) => c.status)).toEqual([
      'warn',
      'warn',
      'warn',
      'warn',
      'warn',
      'warn',
    ]);
    expect(checks.find((c) => c.name === 'Limitador')?.detail).toContain(
      'kuadrant-system/limitador-limitador has no endpoints',
    );
    const strict = await run('doctor', '--kubeconfig', env.kubeconfig, '--strict');
    expect(strict.code).toBe(1);
    expect(strict.stdout).toMatch(/To do:/);
    await env.call('POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'cascade-system' },
    });
    const created = await env.call('POST', '/apis/apps/v1/namespaces/cascade-system/deployments', {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'authpolicy-controller' },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: 'a' } },
        template: { metadata: { labels: { app: 'a' } }, spec: { containers: [{ name: 'c', image: 'x' }] } },
      },
    });
    expect(created.status).toBe(201);
    const failing = await run('doctor', '--kubeconfig', env.kubeconfig);
    expect(failing.code).toBe(1);
    expect(failing.stdout).toMatch(/component +authpolicy-controller +FAIL +0\/2 ready/);
  });
});
