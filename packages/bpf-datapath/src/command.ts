// The one way the node-side code runs a tool of the node's (iproute2's `ip` and `bridge`): an argument
// vector, never a shell, bounded in time (10 s) and output (64 MiB), a failure naming the command and
// what it wrote to stderr.
import { execFile } from 'node:child_process';

export type Run = (cmd: string, args: string[]) => Promise<string>;

export interface RunOptions {
  /** written to the command's stdin (`ip -batch -`) */
  input?: string;
  /**
   * A command that failed but wrote output resolves with that output: `ip -force -batch` goes on past
   * a line that fails and exits non-zero, and the lines that worked are still wanted.
   */
  keepPartialOutput?: boolean;
}

export function runCommand(cmd: string, args: string[], opts: RunOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = execFile(cmd, args, { timeout: 10_000, maxBuffer: 64 << 20 }, (err, out, errOut) => {
      if (!err || (opts.keepPartialOutput && out)) resolve(out);
      else reject(new Error(`${cmd} ${args.join(' ')}: ${String(errOut || err.message).trim()}`));
    });
    if (opts.input !== undefined) p.stdin?.end(opts.input);
  });
}
