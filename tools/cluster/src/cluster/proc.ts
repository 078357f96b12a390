// The processes of the cluster: started detached with a pid file and a log, optionally inside a
// node's namespaces (nsenter into the node's "machine" process), stopped with TERM then KILL.
import { execFileSync, spawn } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname } from 'node:path';

export const log = (msg: string) => process.stderr.write(`[cluster] ${msg}\n`);

export class ClusterError extends Error {}
export const fail = (msg: string): never => {
  throw new ClusterError(msg);
};

/** Runs a command to completion; its stdout. Throws with its stderr. */
export function run(
  cmd: string,
  args: string[],
  opts: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; quiet?: boolean } = {},
): string {
  try {
    return execFileSync(cmd, args, {
      input: opts.input,
      env: opts.env ?? process.env,
      timeout: opts.timeoutMs ?? 120_000,
      maxBuffer: 64 << 20,
      stdio: ['pipe', 'pipe', 'pipe'],
    }).toString();
  } catch (e) {
    const err = e as { stderr?: Buffer; message: string };
    throw new ClusterError(
      `${cmd} ${args.join(' ')}: ${(err.stderr?.toString() || err.message).trim()}`.slice(0, 3000),
    );
  }
}

/** The same, ignoring failure (teardown of what may not exist). */
export function attempt(cmd: string, args: string[], timeoutMs = 60_000): string {
  try {
    return run(cmd, args, { timeoutMs });
  } catch {
    return '';
  }
}

const cmdline = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
};

/** The pid a pid file records, when that process lives and its command line holds `match`. */
export function livePid(pidFile: string, match: string): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(pidFile, 'utf8').trim());
  } catch {
    return undefined;
  }
  return pid > 0 && cmdline(pid).includes(match) ? pid : undefined;
}

export interface Start {
  pidFile: string;
  logFile: string;
  cmd: string;
  args: string[];
  /** the pid of a process whose network and mount namespaces the command runs in */
  enter?: number;
  env?: NodeJS.ProcessEnv;
}

/** Starts a detached process (own session) unless the one its pid file names lives; its pid. */
export function start(s: Start): number {
  const match = basename(s.cmd);
  const live = livePid(s.pidFile, match);
  if (live) return live;
  log(`starting ${basename(s.pidFile, '.pid')}${s.enter ? ` (in the namespaces of ${s.enter})` : ''}`);
  mkdirSync(dirname(s.logFile), { recursive: true });
  mkdirSync(dirname(s.pidFile), { recursive: true });
  const fd = openSync(s.logFile, 'a');
  // nsenter execs the command in place (no pid namespace, so no fork): the pid is the command's
  const [cmd, args] = s.enter
    ? ['nsenter', ['-t', String(s.enter), '-n', '-m', '--', s.cmd, ...s.args]]
    : [s.cmd, s.args];
  const child = spawn(cmd, args, { detached: true, stdio: ['ignore', fd, fd], env: s.env ?? process.env });
  closeSync(fd);
  child.unref();
  if (!child.pid) fail(`could not start ${s.cmd}`);
  writeFileSync(s.pidFile, `${child.pid}\n`);
  return child.pid!;
}

const sleepMs = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** TERM, then KILL after `graceMs`; removes the pid file. */
export function stop(pidFile: string, match: string, graceMs = 10_000): void {
  stopAll([{ pidFile, match, graceMs }]);
}

/** A process `stopAll` stops: its pid file, the name its command line must hold, its grace. */
export interface Stoppable {
  pidFile: string;
  match: string;
  graceMs?: number;
}

/**
 * Stops several processes at once: TERM to all, then KILL to each still there after its own grace
 * (default 10 s), waiting at most 5 s more for each; removes the pid files. One after another, a
 * three-node `down` spent 12 s in graces (kubelets that outlive a 1 s grace).
 */
export function stopAll(items: readonly Stoppable[]): void {
  const t0 = Date.now();
  const live = items.flatMap((i) => {
    const pid = livePid(i.pidFile, i.match);
    return pid ? [{ pid, graceMs: i.graceMs ?? 10_000, killedAt: 0 }] : [];
  });
  for (const p of live) kill(p.pid, 'SIGTERM');
  for (;;) {
    const now = Date.now();
    let waiting = false;
    for (const p of live) {
      if (!existsSync(`/proc/${p.pid}`)) continue;
      if (!p.killedAt && now - t0 >= p.graceMs) {
        kill(p.pid, 'SIGKILL');
        p.killedAt = now;
      }
      if (!p.killedAt || now - p.killedAt < 5_000) waiting = true;
    }
    if (!waiting) break;
    sleepMs(100);
  }
  for (const i of items) rmSync(i.pidFile, { force: true });
}

export function kill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    /* gone already */
  }
}

/** Retries `check` every second until it returns without throwing (and not false), at most `seconds`. */
export function waitFor(seconds: number, what: string, check: () => unknown, logs?: string): void {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    try {
      if (check() !== false) return;
    } catch {
      /* not yet */
    }
    if (Date.now() > deadline) fail(`${what} not ready after ${seconds} s${logs ? ` (logs: ${logs})` : ''}`);
    sleepMs(1000);
  }
}

export { sleepMs };

/** Every pid of the processes whose command line holds `needle`. */
export function pidsMatching(needle: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc'))
    if (/^\d+$/.test(d) && Number(d) !== process.pid && cmdline(Number(d)).includes(needle))
      out.push(Number(d));
  return out;
}
