// The cluster's add-ons (Gateway API's CRDs, CoreDNS, an older network-policy-api bundle when asked)
// and Cascade's Helm release: installed or upgraded as the README says, waited for, and explained
// when a pod does not become ready.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chartPaths, DNS_IP, KUBECONFIG } from './layout.ts';
import { attempt, ClusterError, fail, log, run } from './proc.ts';
import { env, kubectl, kubectlApply, ROOT, recorded, recordedFile, TAG } from './state.ts';

/**
 * Gateway API's CRDs, CoreDNS, kuadrant-system. network-policy-api's CRDs come with the chart
 * (networkPolicyAPI.install), except with `npapi` (`--npapi-crds v0.2.0`): a cluster that manages its
 * own, an older bundle applied here (v0.1.7's ANP/BANP, v0.2.0's ClusterNetworkPolicy v1alpha2 only),
 * which an e2e step upgrades; and without the chart (`withNpapi`: a peer enforces), the bundle the
 * chart would install, applied here.
 */
export function addons(npapi?: string, withNpapi = false): void {
  log(`applying Gateway API CRDs${npapi ? `, network-policy-api ${npapi}'s,` : ''} and CoreDNS`);
  let paths: { crds?: string; olderCrds?: string } = {};
  try {
    paths = JSON.parse(readFileSync(join(ROOT, 'tools/envtest/.local/paths.json'), 'utf8'));
  } catch {
    /* the cache's default */
  }
  const cache = join(
    process.env.CASCADE_CACHE ?? join(process.env.HOME ?? '/root', '.cache/cascade'),
    'envtest',
  );
  const crds = paths.crds && existsSync(paths.crds) ? paths.crds : join(cache, 'crds');
  const older = paths.olderCrds && existsSync(paths.olderCrds) ? paths.olderCrds : join(cache, 'crds-older');
  const files = readdirSync(crds)
    .filter((f) => f.startsWith('gateway.networking.k8s.io_') && f.endsWith('.yaml'))
    .map((f) => join(crds, f));
  if (npapi) {
    if (!existsSync(join(older, npapi))) fail(`--npapi-crds ${npapi}: no such bundle in ${older}`);
    files.push(
      ...['adminnetworkpolicies', 'baselineadminnetworkpolicies'].map((p) =>
        join(crds, `policy.networking.k8s.io_${p}.yaml`),
      ),
      ...readdirSync(join(older, npapi)).map((f) => join(older, npapi, f)),
    );
  }
  if (withNpapi && !npapi)
    files.push(
      ...readdirSync(crds)
        .filter((f) => f.startsWith('policy.networking.k8s.io_') && f.endsWith('.yaml'))
        .map((f) => join(crds, f)),
    );
  kubectl('apply', '--server-side', ...files.flatMap((f) => ['-f', f]));
  const dns = readFileSync(join(ROOT, 'tools/cluster/manifests/coredns.yaml'), 'utf8').replaceAll(
    '@DNS_IP@',
    DNS_IP,
  );
  kubectlApply(dns, true);
  const ns = run('kubectl', ['create', 'namespace', 'kuadrant-system', '--dry-run=client', '-o', 'yaml'], {
    env: env(),
  });
  kubectlApply(ns);
}

/** The namespace whose allowed flows the agents report (the e2e's recommend step; nothing else uses it). */
export const AUDITED_NAMESPACE = 'recommend';

// 5 minutes: one CI run of three nodes saw an install take over 3 (every other run: 38-48 s); the
// unready pod's log is printed when it times out
export function install(tag = TAG, timeout = '5m'): void {
  const l = recorded() ?? fail('no cluster runs: npm run cluster -- up');
  const paths = chartPaths(l);
  log(`helm install or upgrade cascade (images ${tag})`);
  const t0 = Date.now();
  try {
    // the CRDs first, as the README's upgrade says: Helm installs crds/ once and never upgrades them
    run('kubectl', ['apply', '--server-side', '--force-conflicts', '-f', join(ROOT, 'charts/cascade/crds')], {
      env: env(),
      timeoutMs: 120_000,
    });
    // a release already there is upgraded as the README says: the chart's new defaults, then the
    // values it was installed with (--reset-then-reuse-values), then the new tag; a first install
    // gives this cluster's paths
    let upgrade = false;
    try {
      upgrade = run('helm', ['status', 'cascade', '-n', 'cascade-system'], { env: env() }) !== '';
    } catch {} // no release: helm status exits 1
    run(
      'helm',
      [
        ...(upgrade
          ? [
              'upgrade',
              'cascade',
              join(ROOT, 'charts/cascade'),
              '-n',
              'cascade-system',
              '--reset-then-reuse-values',
            ]
          : [
              'install',
              'cascade',
              join(ROOT, 'charts/cascade'),
              '-n',
              'cascade-system',
              '--create-namespace',
              '--set',
              'image.pullPolicy=Never',
              '--set',
              `agent.pinDir=${paths.pinDir}`,
              '--set',
              `agent.cni.binDir=${paths.cniBinDir}`,
              '--set',
              `agent.cni.confDir=${paths.cniConfDir}`,
              // the e2e's `netpol recommend` step learns from this namespace's allowed flows
              '--set',
              `agent.auditNamespaces={${AUDITED_NAMESPACE}}`,
              // a cluster whose network-policy-api CRDs the harness applied (an older bundle)
              ...(recordedFile()?.npapiCrds ? ['--set', 'networkPolicyAPI.install=false'] : []),
            ]),
        '--set',
        `image.tag=${tag}`,
        '--wait',
        '--timeout',
        timeout,
      ],
      { env: env(), timeoutMs: 900_000 },
    );
    // helm's --wait counts a DaemonSet ready with maxUnavailable (1) of its pods not yet Ready: on one
    // node, the agent was not waited for at all (a CI run saw the install return before it was Ready)
    for (const ds of run('kubectl', ['-n', 'cascade-system', 'get', 'daemonsets', '-o', 'name'], {
      env: env(),
    })
      .split('\n')
      .filter(Boolean))
      run('kubectl', ['-n', 'cascade-system', 'rollout', 'status', ds, `--timeout=${timeout}`], {
        env: env(),
        timeoutMs: 900_000,
      });
  } catch (e) {
    // the log of every Cascade pod that is not Ready or restarted: why (issue 30 saw one replica stay
    // unready for 4 minutes with nothing to read; issue 41 saw restarts whose log was gone), with the
    // previous container's log when one was restarted
    const pods = attempt('kubectl', [
      '--kubeconfig',
      KUBECONFIG,
      '-n',
      'cascade-system',
      'get',
      'pods',
      '-o',
      'jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} {range .status.containerStatuses[*]}{.restartCount}+{end}{"\\n"}{end}',
    ]);
    for (const line of pods.split('\n').filter(Boolean)) {
      const [name, ready, restartList] = line.split(' ') as [string, string, string | undefined];
      const restarts = (restartList ?? '').split('+').reduce((n, x) => n + (Number(x) || 0), 0);
      if (ready === 'True' && restarts === 0) continue;
      const logs = (...extra: string[]) =>
        attempt('kubectl', [
          '--kubeconfig',
          KUBECONFIG,
          '-n',
          'cascade-system',
          'logs',
          name,
          '--all-containers',
          '--tail=40',
          ...extra,
        ]);
      process.stderr.write(
        `--- ${name} (Ready=${ready || 'none'}, ${restarts} restart(s)): its last log lines\n`,
      );
      process.stderr.write(logs());
      if (restarts > 0) {
        process.stderr.write(`--- ${name}: the previous container's last log lines\n`);
        process.stderr.write(logs('--previous'));
        process.stderr.write(
          attempt('kubectl', [
            '--kubeconfig',
            KUBECONFIG,
            '-n',
            'cascade-system',
            'describe',
            'pod',
            name,
          ]).slice(-3000),
        );
      }
    }
    // last, so that a caller keeping only the tail of a long message still has it (the e2e's does)
    process.stderr.write(attempt('kubectl', ['--kubeconfig', KUBECONFIG, 'get', 'pods', '-A', '-o', 'wide']));
    throw new ClusterError(`cascade did not become ready: ${(e as Error).message}`);
  }
  log(`cascade ready in ${Math.round((Date.now() - t0) / 1000)} s`);
}
