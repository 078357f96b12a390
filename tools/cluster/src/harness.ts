// Helpers of the end-to-end suite: the cluster's binaries and kubeconfig, commands with bounded time,
// polling with a deadline. With CI=true a missing part (root, the built binaries) fails the suite.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '../../..');
export const CLUSTER_SH = join(ROOT, 'tools/cluster/cluster.sh');
export const KUBECONFIG = '/var/lib/cascade-cluster/admin.kubeconfig';

export function clusterBin(): string | undefined {
  const f = join(ROOT, 'tools/cluster/.local/paths.json');
  if (!existsSync(f)) return undefined;
  const bin = (JSON.parse(readFileSync(f, 'utf8')) as { bin: string }).bin;
  return existsSync(join(bin, 'kubelet')) && existsSync(join(bin, 'helm')) ? bin : undefined;
}

/** true: run the end-to-end suite; false: skip (only outside CI). Throws in CI when it cannot run. */
export function clusterTestsEnabled(): boolean {
  const why =
    process.getuid?.() !== 0
      ? 'the e2e cluster needs root (kubelet, containerd, routes, bpffs)'
      : !clusterBin()
        ? 'the e2e cluster binaries are missing: run scripts/setup.sh'
        : undefined;
  if (!why) return true;
  if (process.env.CI === 'true') throw new Error(`${why} (CI=true: the end-to-end suite must run)`);
  return false;
}

/** The pid of a node's "machine" process (its namespaces), or undefined (one node: the host itself). */
export function machinePid(node: string): string | undefined {
  const f = `/run/cascade-cluster/nodes/${node}/machine.pid`;
  return existsSync(f) ? readFileSync(f, 'utf8').trim() : undefined;
}

/**
 * `cmd args` as run on a node: inside its network namespace (and its mount namespace, where its bpffs
 * and /run are, with `mount`) through nsenter; as is on a one-node cluster, whose node is the host.
 */
export function onNode(
  node: string,
  cmd: string,
  args: string[],
  opts: { mount?: boolean } = {},
): [string, string[]] {
  const pid = machinePid(node);
  return pid
    ? ['nsenter', ['-t', pid, '-n', ...(opts.mount ? ['-m'] : []), '--', cmd, ...args]]
    : [cmd, args];
}

export function env(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    KUBECONFIG,
    PATH: [clusterBin(), join(ROOT, 'node_modules/.bin'), process.env.PATH].filter(Boolean).join(':'),
  };
}

/** Runs a command, its output as text; throws with its stderr on failure. Bounded by `timeoutMs`. */
export function sh(cmd: string, args: string[], opts: { input?: string; timeoutMs?: number } = {}): string {
  try {
    return execFileSync(cmd, args, {
      env: env(),
      input: opts.input,
      timeout: opts.timeoutMs ?? 60_000,
      maxBuffer: 256 << 20,
      stdio: ['pipe', 'pipe', 'pipe'],
    }).toString();
  } catch (e) {
    const err = e as { stderr?: Buffer; stdout?: Buffer; message: string };
    // the head (which command) and the tail (why it failed: a failed install ends with the logs of
    // its unready pods) of a long message
    const msg = `${cmd} ${args.join(' ')}: ${err.stderr?.toString() || err.message}`;
    throw new Error(msg.length > 6000 ? `${msg.slice(0, 1000)}\n[...]\n${msg.slice(-5000)}` : msg);
  }
}

/** The same, without blocking the event loop (for work that runs while something else is measured). */
export function shAsync(cmd: string, args: string[], timeoutMs = 60_000): Promise<string> {
  return new Promise((res, rej) =>
    execFile(cmd, args, { env: env(), timeout: timeoutMs, maxBuffer: 64 << 20 }, (err, out, stderr) =>
      err
        ? // the command's output stays on the error: a probe that says DENY exits 1
          rej(
            Object.assign(new Error(`${cmd} ${args.join(' ')}: ${stderr || err.message}`.slice(0, 4000)), {
              stdout: out,
            }),
          )
        : res(out),
    ),
  );
}

export const kubectl = (...args: string[]) => sh('kubectl', args);
export const kubectlJson = <T = { items: Record<string, unknown>[] }>(...args: string[]): T =>
  JSON.parse(sh('kubectl', [...args, '-o', 'json'])) as T;
/** The project's Node 24 and cascadectl's entry point: `[NODE, [CASCADECTL, ...args]]` runs it. */
export const NODE = join(ROOT, 'node_modules/.bin/node');
export const CASCADECTL = join(ROOT, 'packages/cascadectl/bin/cascadectl.js');
export const cascadectl = (...args: string[]) => sh(NODE, [CASCADECTL, ...args]);

/** Polls `check` until it returns a value (not undefined) or the deadline passes; the last error is thrown. */
export async function until<T>(
  what: string,
  seconds: number,
  check: () => T | undefined | Promise<T | undefined>,
): Promise<T> {
  const deadline = Date.now() + seconds * 1000;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline)
      throw new Error(`${what}: not within ${seconds} s${last ? ` (${String(last)})` : ''}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** JSON with sorted keys: equal values print equally. */
export const canon = (v: unknown): string =>
  Array.isArray(v)
    ? `[${v.map(canon).join(',')}]`
    : v && typeof v === 'object'
      ? `{${Object.keys(v)
          .sort()
          .map((k) => `${JSON.stringify(k)}:${canon((v as Record<string, unknown>)[k])}`)
          .join(',')}}`
      : JSON.stringify(v);
