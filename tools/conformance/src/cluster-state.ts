// What a suite's run changes or waits for on the cluster around it: a previous run's namespaces gone,
// and other network-policy-api bundles' annotations hidden from v0.3's suite.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../../..');
export const KUBECONFIG = '/var/lib/cascade-cluster/admin.kubeconfig';
const sh = (cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv } = {}) =>
  execFileSync(cmd, args, {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    env: opts.env ?? process.env,
    timeout: 120_000,
    maxBuffer: 256 << 20,
  });

const clusterKubectl = () =>
  join(
    (JSON.parse(readFileSync(join(ROOT, 'tools/cluster/.local/paths.json'), 'utf8')) as { bin: string }).bin,
    'kubectl',
  );
const BUNDLE = 'policy.networking.k8s.io/bundle-version';
const CHANNEL = 'policy.networking.k8s.io/channel';

/**
 * v0.3's suite reads every installed CRD's bundle-version and channel annotations and refuses to run
 * when two bundles are installed. v0.3.0 ships ClusterNetworkPolicy alone; the chart installs
 * v0.1.7's AdminNetworkPolicy and BaselineAdminNetworkPolicy beside it (Cascade enforces them).
 * Their two annotations are taken off for the run and put back after (an adaptation the results
 * record); nothing else of them changes.
 */
export function hideOtherBundles(version: string): { name: string; bundle: string; channel?: string }[] {
  const env = { ...process.env, KUBECONFIG };
  const crds = JSON.parse(sh(clusterKubectl(), ['get', 'crd', '-o', 'json'], { env })) as {
    items: { metadata: { name: string; annotations?: Record<string, string> } }[];
  };
  const others = crds.items
    .filter((c) => c.metadata.annotations?.[BUNDLE] && c.metadata.annotations[BUNDLE] !== version)
    .map((c) => ({
      name: c.metadata.name,
      bundle: c.metadata.annotations![BUNDLE]!,
      ...(c.metadata.annotations![CHANNEL] ? { channel: c.metadata.annotations![CHANNEL] } : {}),
    }));
  for (const o of others)
    sh(clusterKubectl(), ['annotate', 'crd', o.name, `${BUNDLE}-`, `${CHANNEL}-`], { env });
  return others;
}

export function restoreBundles(hidden: { name: string; bundle: string; channel?: string }[]): void {
  const env = { ...process.env, KUBECONFIG };
  for (const o of hidden)
    sh(
      clusterKubectl(),
      [
        'annotate',
        'crd',
        o.name,
        '--overwrite',
        `${BUNDLE}=${o.bundle}`,
        ...(o.channel ? [`${CHANNEL}=${o.channel}`] : []),
      ],
      { env },
    );
}

/** Waits until no namespace with this prefix exists (a previous run's are being deleted). */
export async function namespacesGone(prefix: string, seconds: number): Promise<void> {
  // the cluster's binaries, as scripts/setup.d/40-cluster.sh recorded them
  const kubectl = clusterKubectl();
  for (let i = 0; i < seconds; i += 2) {
    const names = sh(kubectl, ['get', 'namespaces', '-o', 'name'], { env: { ...process.env, KUBECONFIG } });
    if (!names.split('\n').some((n) => n.startsWith(`namespace/${prefix}`))) return;
    await new Promise((r) => setTimeout(r, 2000));
  }
  throw new Error(`namespaces ${prefix}* still there after ${seconds} s`);
}
