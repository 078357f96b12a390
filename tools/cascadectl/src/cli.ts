// The small command framework: each command declares its options and usage; unknown flags and
// missing arguments exit 2 with a message naming the problem.
import { type ParseArgsConfig, parseArgs } from 'node:util';

export class UsageError extends Error {}

export interface Command {
  name: string;
  summary: string;
  usage: string;
  options: NonNullable<ParseArgsConfig['options']>;
  /** Rewrites the arguments before parsing (for options that take several values). */
  rewrite?(argv: string[]): string[];
  run(
    values: Record<string, string | boolean | string[] | undefined>,
    positionals: string[],
  ): Promise<number> | number;
}

export function parse(cmd: Command, argv: string[]) {
  try {
    return parseArgs({
      args: cmd.rewrite ? cmd.rewrite(argv) : argv,
      options: { ...cmd.options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    });
  } catch (e) {
    throw new UsageError(`${cmd.name}: ${(e as Error).message}`);
  }
}

export function oneOf(name: string, value: unknown, allowed: readonly string[], fallback: string): string {
  const v = value === undefined ? fallback : String(value);
  if (!allowed.includes(v))
    throw new UsageError(`--${name} must be one of ${allowed.join(', ')} (got "${v}")`);
  return v;
}

export const out = (s: string): void => {
  process.stdout.write(s.endsWith('\n') ? s : `${s}\n`);
};
export const err = (s: string): void => {
  process.stderr.write(s.endsWith('\n') ? s : `${s}\n`);
};

/** Left-aligned columns. */
export function table(rows: string[][], indent = ''): string {
  const widths: number[] = [];
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  return rows
    .map((r) => indent + r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  '))
    .join('\n');
}

export function compact(v: unknown, max = 70): string {
  const s = JSON.stringify(v) ?? 'undefined';
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}
