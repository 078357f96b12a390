// What the cluster's commands share: where the checkout is, the binaries (built once), the
// environment kubectl and helm run in, and the layout `up` recorded.
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Bins } from './control-plane.ts';
import type { Cni } from './flannel.ts';
import { KUBECONFIG, type Layout, layout, STATE } from './layout.ts';
import type { Netpol } from './peer.ts';
import { attempt, fail, run } from './proc.ts';

export const ROOT = resolve(import.meta.dirname, '../../../..');
export const TAG = process.env.CASCADE_IMAGE_TAG ?? '0.1.0';
export const LAYOUT_FILE = join(STATE, 'layout.json');
if (existsSync('/usr/local/go/bin/go')) process.env.PATH = `${process.env.PATH}:/usr/local/go/bin`;

/** Runs one of the build scripts (each builds once, then finds its cache) and returns the directory it prints last. */
export const buildDir = (script: string): string =>
  run('bash', [join(ROOT, script)], { timeoutMs: 3_600_000 })
    .trim()
    .split('\n')
    .pop()!;

export let binsMemo: Bins | undefined;
export function bins(): Bins {
  binsMemo ??= {
    envtest: buildDir('tools/envtest/build/build.sh'),
    cluster: buildDir('tools/cluster/build/build.sh'),
  };
  return binsMemo;
}
export const env = (): NodeJS.ProcessEnv => ({
  ...process.env,
  KUBECONFIG,
  PATH: `${bins().cluster}:${process.env.PATH}`,
});
export const kubectl = (...args: string[]) => run('kubectl', args, { env: env(), timeoutMs: 180_000 });
/** `kubectl apply` of YAML text (client-side, or server-side with `serverSide`). */
export const kubectlApply = (yaml: string, serverSide = false): string =>
  run('kubectl', ['apply', ...(serverSide ? ['--server-side'] : []), '-f', '-'], { env: env(), input: yaml });

export function hostIp(): string {
  const dev =
    /\bdev (\S+)/.exec(attempt('ip', ['-4', 'route', 'show', 'default']))?.[1] ??
    /^\d+: (\S+)\s+inet /m.exec(attempt('ip', ['-4', '-o', 'addr', 'show', 'scope', 'global']))?.[1];
  if (!dev) fail('no IPv4 interface with a global address: the API server needs one the nodes can reach');
  const ip = /inet (\d+\.\d+\.\d+\.\d+)/.exec(
    attempt('ip', ['-4', '-o', 'addr', 'show', 'dev', dev!, 'scope', 'global']),
  )?.[1];
  return ip ?? fail(`no IPv4 address on ${dev}`);
}

/** The layout of the cluster that runs (recorded by `up`), or undefined. */
export interface Recorded {
  count: number;
  hostIp: string;
  /** The network-policy-api CRDs the harness applied itself (an older bundle): the chart installs none. */
  npapiCrds?: string;
  /** How pods are wired across nodes (absent: host-gw, the harness's own routes). */
  cni?: Cni;
  /** What enforces network policy (absent: Cascade). */
  netpol?: Netpol;
}

export function recordedFile(): Recorded | undefined {
  if (!existsSync(LAYOUT_FILE)) return undefined;
  return JSON.parse(readFileSync(LAYOUT_FILE, 'utf8')) as Recorded;
}

/** flanneld and the flannel CNI plugin, built once (tools/cluster/build/flannel.sh). */
let flannelMemo: string | undefined;
export const flannelBins = (): string => (flannelMemo ??= buildDir('tools/cluster/build/flannel.sh'));

export function recorded(): Layout | undefined {
  const r = recordedFile();
  return r && layout(r.count, r.hostIp);
}
