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

/**
 * How output looks, decided once per run (main.ts): on a terminal, tables fit its width and verdicts
 * and severities are coloured (unless NO_COLOR is set or --no-color given); piped or redirected,
 * output is plain ASCII (`...` for an ellipsis, no colour) and nothing is cut.
 */
export const terminal: { tty: boolean; color: boolean; width?: number } = { tty: false, color: false };

export function setTerminal(opts: { tty: boolean; noColor?: boolean; width?: number }): void {
  terminal.tty = opts.tty;
  terminal.color = opts.tty && !opts.noColor;
  if (opts.tty && opts.width && opts.width >= 40) terminal.width = opts.width;
  else delete terminal.width;
}

const PAINT: [RegExp, string][] = [
  [/\b(DENY|deny \()/g, '31'],
  [/\b(ALLOW|allow \()/g, '32'],
  [/^(error:)/gm, '31'],
  [/^(warning:)/gm, '33'],
];

function finish(s: string): string {
  if (!terminal.tty) return s.replace(/…/g, '...');
  if (!terminal.color) return s;
  let t = s;
  for (const [re, code] of PAINT) t = t.replace(re, `\u001b[${code}m$1\u001b[0m`);
  return t;
}

export const out = (s: string): void => {
  const t = finish(s);
  process.stdout.write(t.endsWith('\n') ? t : `${t}\n`);
};
export const err = (s: string): void => {
  process.stderr.write(s.endsWith('\n') ? s : `${s}\n`);
};

/**
 * Left-aligned columns. On a terminal (terminal.width) the widest columns are narrowed, their cells
 * cut with `…`, until a row fits (`-o wide` and piped output show everything: pass wide = true).
 */
export function table(rows: string[][], indent = '', wide = false): string {
  const widths: number[] = [];
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  const max = wide ? undefined : terminal.width;
  if (max) {
    const total = () => indent.length + widths.reduce((a, w) => a + w, 0) + 2 * (widths.length - 1);
    while (total() > max) {
      const widest = widths.indexOf(Math.max(...widths));
      if (widths[widest]! <= 8) break;
      widths[widest]!--;
    }
  }
  const cell = (c: string, w: number) => (c.length > w ? `${c.slice(0, Math.max(1, w - 1))}…` : c);
  return rows
    .map(
      (r) =>
        indent +
        r
          .map((c, i) => (i === r.length - 1 ? cell(c, widths[i]!) : cell(c, widths[i]!).padEnd(widths[i]!)))
          .join('  '),
    )
    .join('\n');
}

export function compact(v: unknown, max = 70): string {
  const s = JSON.stringify(v) ?? 'undefined';
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}
