// Runs a binary's TypeScript entry point (its main.ts) in a Node process of its own, as a user would
// start it: its exit code, stdout and stderr. The bound is per process and generous: each process
// loads the binary's whole import graph, a few seconds when CI runs these beside the cluster e2e.
import { execFile } from 'node:child_process';

export interface ScriptResult {
  /** the exit code; 1 when the process was killed (by the time bound or a signal) */
  code: number;
  stdout: string;
  stderr: string;
}

export function runScript(
  script: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<ScriptResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [script, ...args],
      { env: opts.env ?? process.env, timeout: opts.timeoutMs ?? 50_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}
