// The Helm chart: its generated parts match the code, `helm lint` passes, every component can be
// switched off, deploy/cascade.yaml is the chart's rendering, and the rendered manifests pass a
// server-side dry run against the real API server (envtest). helm is built from its Go module by
// the set-up; with CI=true a missing helm fails these tests.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { controllerWatchBindings } from '@cascade/core';
import { Metrics, WorkQueue } from '@cascade/core/kube';
import {
  CHART,
  DASHBOARD,
  DEPLOY,
  dashboardFamilies,
  dashboardJson,
  renderDeploy,
  staleChartFiles,
} from '@cascade/distribution/release';
import { apiServerTestsEnabled, Envtest } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { clusterBin } from './harness.ts';

const bin = clusterBin();
if (!bin && process.env.CI === 'true')
  throw new Error('helm and kubectl are missing: run scripts/setup.sh (CI=true)');
const helm = (...args: string[]) =>
  execFileSync(join(bin!, 'helm'), args, { maxBuffer: 64 << 20 }).toString();
// biome-ignore lint/suspicious/noExplicitAny: rendered manifests
type Doc = Record<string, any>;
const render = (...set: string[]): Doc[] =>
  parseAllDocuments(
    helm('template', 'cascade', CHART, '-n', 'cascade-system', ...set.flatMap((s) => ['--set', s])),
  )
    .map((d) => d.toJS() as Doc)
    .filter(Boolean);
const names = (docs: Doc[]) => docs.map((d) => `${d.kind}/${d.metadata.name}`);

describe('charts/cascade', () => {
  it('its generated CRDs and RBAC are current (regenerate: node packages/distribution/src/chart-files.ts HELM)', () => {
    expect(staleChartFiles()).toEqual([]);
  });

  it('the Grafana dashboard is current and queries only families the binaries export', async () => {
    expect(readFileSync(DASHBOARD, 'utf8')).toBe(dashboardJson());
    // the library's families: what a registry with the process metrics and a named queue exports
    const m = new Metrics();
    m.processMetrics();
    new WorkQueue(async () => {}, 1, { registry: m, name: 'q' });
    m.family('leader_election_master_status', 'as the controller registers it', ['name'], () => []);
    const library = new Set([...(await m.render()).matchAll(/^# TYPE (\S+) /gm)].map((x) => x[1]!));
    const sources = execFileSync('grep', ['-rhoE', 'cascade_[a-z0-9_]+', join(CHART, '../../packages')], {
      maxBuffer: 64 << 20,
    }).toString();
    const exported = new Set(sources.split('\n'));
    // the per-counter families are built from the kernel's counter names (agent.ts)
    const missing = dashboardFamilies().filter(
      (f) =>
        !exported.has(f) &&
        !library.has(f) &&
        !(f.startsWith('cascade_datapath_packets_') && f.endsWith('_total')),
    );
    expect(missing).toEqual([]);
    expect(dashboardFamilies().filter((f) => library.has(f)).length).toBeGreaterThan(5);
  });

  describe.runIf(bin)('with helm', () => {
    it('helm lint passes', () => {
      expect(helm('lint', CHART)).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
    });

    it('deploy/cascade.yaml is the chart rendered with its defaults', () => {
      expect(readFileSync(DEPLOY, 'utf8')).toBe(renderDeploy(join(bin!, 'helm')));
    });

    it('renders the controllers (2 replicas, probes, PDB, non-root, read-only root) and the agent DaemonSet', () => {
      const docs = render();
      const deploy = docs.find(
        (d) => d.kind === 'Deployment' && d.metadata.name === 'authpolicy-controller',
      )!;
      expect(deploy.spec.replicas).toBe(2);
      const c = deploy.spec.template.spec.containers[0];
      expect(c.image).toBe('cascade.local/authpolicy-controller:0.1.0');
      expect(c.livenessProbe.httpGet.path).toBe('/healthz');
      expect(c.readinessProbe.httpGet.path).toBe('/readyz');
      expect(c.securityContext).toMatchObject({
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
      });
      expect(deploy.spec.template.spec.securityContext).toMatchObject({ runAsNonRoot: true });
      expect(c.args).toContain('--leader-election-namespace=cascade-system');
      expect(names(docs)).toContain('PodDisruptionBudget/authpolicy-controller');
      const ds = docs.find((d) => d.kind === 'DaemonSet')!;
      const spec = ds.spec.template.spec;
      expect(spec).toMatchObject({ hostNetwork: true, priorityClassName: 'system-node-critical' });
      expect(spec.tolerations).toEqual([{ operator: 'Exists' }]);
      expect(spec.containers[0].securityContext.capabilities).toEqual({
        drop: ['ALL'],
        add: ['BPF', 'NET_ADMIN', 'PERFMON'],
      });
      expect(spec.volumes.map((v: Doc) => v.hostPath?.path)).toContain('/sys/fs/bpf');
      // metrics on the node's addresses for Prometheus (the agent serves /flows to loopback only)
      const envOf = (d: Doc) =>
        Object.fromEntries(d.spec.template.spec.containers[0].env.map((e: Doc) => [e.name, e.value]));
      // on the node's loopback by default (round three): a pod reaches the node's addresses
      expect(envOf(ds).CASCADE_METRICS_BIND_ADDRESS).toBe('127.0.0.1:9090');
      expect(
        envOf(render('agent.metricsHost=').find((d) => d.kind === 'DaemonSet')!).CASCADE_METRICS_BIND_ADDRESS,
      ).toBe(':9090');
      // cascade-cni copied onto the node by an init container, which holds no capability
      expect(spec.initContainers[0].command).toContain('/app/packages/bpf-datapath/src/install-cni.ts');
      expect(spec.initContainers[0].securityContext.capabilities).toEqual({ drop: ['ALL'] });
      expect(spec.volumes.map((v: Doc) => v.hostPath?.path)).toContain('/opt/cni/bin');
      // the Limitador ConfigMaps role lives in Limitador's namespace only, with the Limitador CR (read
      // and patch: the controller owns spec.limits, never creates or deletes it)
      const limitadorRole = docs.find((d) => d.kind === 'Role' && d.metadata.namespace === 'kuadrant-system');
      expect(
        limitadorRole?.rules.map((r: { resources: string[]; verbs: string[] }) => [r.resources, r.verbs]),
      ).toEqual([
        [['limitadors'], ['get', 'list', 'watch', 'patch']],
        [['configmaps'], ['get', 'list', 'watch', 'create', 'patch', 'update', 'delete']],
      ]);
    });

    it('every component can be switched off, and the namespaces follow the values', () => {
      const none = render(
        'networkPolicyAPI.install=false',
        'authpolicy.enabled=false',
        'ratelimitpolicy.enabled=false',
        'tokenratelimitpolicy.enabled=false',
        'netpolicy.enabled=false',
        'wiring.enabled=false',
        'agent.enabled=false',
      );
      expect(names(none).filter((n) => !n.startsWith('ClusterRole/cascade-'))).toEqual([]);
      const noController = render('netpolicy.enabled=false');
      expect(names(noController).some((n) => n.includes('netpolicy-controller'))).toBe(false);
      expect(names(noController)).toContain('DaemonSet/netpolicy-agent');
      // the wiring-controller: its flags from the values, its grant on the providers' objects only
      const wiring = render('wiring.authFailureMode=allow', 'wiring.limitadorAddress=lim.x.svc:9000');
      const wargs = wiring.find((d) => d.kind === 'Deployment' && d.metadata.name === 'wiring-controller')
        ?.spec.template.spec.containers[0].args as string[];
      expect(wargs).toEqual(
        expect.arrayContaining([
          '--auth-failure-mode=allow',
          '--limitador-address=lim.x.svc:9000',
          '--istio-controllers=istio.io/gateway-controller,openshift.io/gateway-controller/v1',
        ]),
      );
      const wrole = wiring.find((d) => d.kind === 'ClusterRole' && d.metadata.name === 'wiring-controller');
      const writable = wrole?.rules.filter((r: { verbs: string[] }) => r.verbs.includes('create'));
      expect(writable.flatMap((r: { resources: string[] }) => r.resources).sort()).toEqual([
        'envoyextensionpolicies',
        'envoyfilters',
        'envoypatchpolicies',
        'events',
        'wasmplugins',
      ]);
      const noAgent = render('agent.enabled=false');
      expect(names(noAgent).some((n) => n.includes('netpolicy-agent'))).toBe(false);
      const moved = render('ratelimitpolicy.limitadorNamespace=limitador');
      expect(moved.some((d) => d.kind === 'Role' && d.metadata.namespace === 'limitador')).toBe(true);
      expect(JSON.stringify(moved)).not.toContain('__');
      const dash = render('dashboards.enabled=true').find(
        (d) => d.kind === 'ConfigMap' && d.metadata.name === 'cascade-dashboards',
      );
      expect(JSON.parse(dash?.data['cascade.json']).title).toBe('Cascade');
    });

    it("network-policy-api's CRDs: v0.3.0's ClusterNetworkPolicy (v1beta1 stored, v1alpha2 served) and v0.1.7's ANP/BANP, in the channel chosen, kept on uninstall; a clear error without them", () => {
      const crds = (docs: Doc[]) => docs.filter((d) => d.kind === 'CustomResourceDefinition');
      const experimental = crds(render());
      expect(experimental.map((d) => d.metadata.name).sort()).toEqual([
        'adminnetworkpolicies.policy.networking.k8s.io',
        'baselineadminnetworkpolicies.policy.networking.k8s.io',
        'clusternetworkpolicies.policy.networking.k8s.io',
      ]);
      const cnp = experimental.find((d) => d.spec.names.kind === 'ClusterNetworkPolicy')!;
      expect(cnp.metadata.annotations).toMatchObject({
        'helm.sh/resource-policy': 'keep',
        'policy.networking.k8s.io/bundle-version': 'v0.3.0',
        'policy.networking.k8s.io/channel': 'experimental',
      });
      expect(cnp.spec.versions.map((v: Doc) => [v.name, v.served, v.storage])).toEqual([
        ['v1alpha2', true, false],
        ['v1beta1', true, true],
      ]);
      for (const d of experimental) expect(d.metadata.annotations['helm.sh/resource-policy']).toBe('keep');
      const standard = crds(render('networkPolicyAPI.channel=standard'));
      const std = standard.find((d) => d.spec.names.kind === 'ClusterNetworkPolicy')!;
      expect(std.metadata.annotations['policy.networking.k8s.io/channel']).toBe('standard');
      // namedPort is experimental since v0.2.1: the standard CRD has none (and would prune it)
      expect(JSON.stringify(std)).not.toContain('destinationNamedPort');
      expect(JSON.stringify(cnp)).toContain('destinationNamedPort');
      expect(crds(render('networkPolicyAPI.install=false'))).toEqual([]);
      expect(() => render('networkPolicyAPI.channel=beta')).toThrow(
        /networkPolicyAPI.channel: "beta" is neither/,
      );
    });

    it('controllers.watchNamespaces: the policy controllers watch and are granted those namespaces only', () => {
      const cluster = render();
      const watched = render('controllers.watchNamespaces={team-a,infra}');
      const args = (docs: Doc[], name: string) =>
        docs.find((d) => d.kind === 'Deployment' && d.metadata.name === name)?.spec.template.spec
          .containers[0].args as string[];
      for (const name of [
        'authpolicy-controller',
        'ratelimitpolicy-controller',
        'tokenratelimitpolicy-controller',
        'wiring-controller',
      ]) {
        expect(args(watched, name)).toContain('--watch-namespace=team-a,infra');
        expect(args(cluster, name).some((a) => a.startsWith('--watch-namespace'))).toBe(false);
        // cluster-wide: the ClusterRole bound cluster-wide; watched: RoleBindings to it in each namespace
        // (exactly what core's controllerWatchBindings makes) and the cluster-scoped reads
        expect(names(cluster)).toContain(`ClusterRoleBinding/${name}`);
        expect(names(cluster)).not.toContain(`ClusterRoleBinding/${name}-cluster-reads`);
        expect(names(watched)).not.toContain(`ClusterRoleBinding/${name}`);
        expect(names(watched)).toContain(`ClusterRole/${name}`);
        expect(
          watched.filter((d) => d.kind === 'RoleBinding' && d.metadata.name === `${name}-watch`),
        ).toEqual(controllerWatchBindings(name, 'cascade-system', ['team-a', 'infra']));
        const reads = watched.find(
          (d) => d.kind === 'ClusterRole' && d.metadata.name === `${name}-cluster-reads`,
        );
        expect(reads?.rules.flatMap((r: { resources: string[] }) => r.resources)).toEqual([
          'gatewayclasses',
          'namespaces',
        ]);
      }
      // the netpolicy-controller's rules and peers span namespaces: always every namespace
      expect(args(watched, 'netpolicy-controller').some((a) => a.startsWith('--watch-namespace'))).toBe(
        false,
      );
      expect(names(watched)).toContain('ClusterRoleBinding/netpolicy-controller');
    });
  });

  describe.runIf(bin && apiServerTestsEnabled())('against the API server', () => {
    let env: Envtest;
    beforeAll(async () => {
      env = await Envtest.start();
    }, 120_000);
    afterAll(async () => env?.stop());

    it('deploy/cascade.yaml passes a server-side dry run', () => {
      const kubectl = (...args: string[]) =>
        execFileSync(join(bin!, 'kubectl'), ['--kubeconfig', env.kubeconfig, ...args], {
          maxBuffer: 64 << 20,
        }).toString();
      kubectl('create', 'namespace', 'kuadrant-system');
      kubectl('create', 'namespace', 'cascade-system');
      const out = kubectl('apply', '--server-side', '--dry-run=server', '-f', DEPLOY);
      expect(out).toMatch(/daemonset.apps\/netpolicy-agent serverside-applied \(server dry run\)/);
      expect(out).toMatch(/deployment.apps\/authpolicy-controller serverside-applied \(server dry run\)/);
      // the network-policy-api CRDs as the chart renders them (read and written back by its template)
      const crds = helm(
        'template',
        'cascade',
        CHART,
        '-n',
        'cascade-system',
        '--show-only',
        'templates/network-policy-api.yaml',
      );
      const applied = execFileSync(
        join(bin!, 'kubectl'),
        [
          '--kubeconfig',
          env.kubeconfig,
          'apply',
          '--server-side',
          '--force-conflicts',
          '--dry-run=server',
          '-f',
          '-',
        ],
        { input: crds, maxBuffer: 64 << 20 },
      ).toString();
      expect(applied).toMatch(
        /customresourcedefinition.apiextensions.k8s.io\/clusternetworkpolicies.policy.networking.k8s.io serverside-applied \(server dry run\)/,
      );
    }, 120_000);
  });
});
