// cascadectl run as a user runs it, for the cli figures: the bin in a separate process, wall time
// from spawn to exit, and the process's own peak RSS.
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';

const BIN = resolve(import.meta.dirname, '../../../packages/cascadectl/bin/cascadectl.js');

/**
 * Runs the bin with `args`; wall ms (spawn to exit), its peak RSS (MiB) and, with `keepOutput`, its
 * standard output (else discarded). A failed run throws with its standard error.
 */
export function timed(
  args: string[],
  env: NodeJS.ProcessEnv,
  keepOutput = false,
): { ms: number; rss: number; code: number | null; stdout: string } {
  const wrapper = `process.on('exit', () => process.stderr.write('\\n@@' + process.resourceUsage().maxRSS));
process.argv = [process.argv[0], ${JSON.stringify(BIN)}, ...${JSON.stringify(args)}];
await import(${JSON.stringify(BIN)});`;
  const t0 = performance.now();
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', wrapper], {
    encoding: 'utf8',
    env,
    stdio: ['ignore', keepOutput ? 'pipe' : 'ignore', 'pipe'],
    maxBuffer: 1 << 28,
  });
  const ms = performance.now() - t0;
  const rss = Number(/@@(\d+)/.exec(r.stderr)?.[1] ?? Number.NaN) / 1024;
  if (r.status !== 0)
    throw new Error(`cascadectl ${args.join(' ')}: exit ${r.status}: ${r.stderr.slice(0, 400)}`);
  return { ms, rss, code: r.status, stdout: r.stdout ?? '' };
}
