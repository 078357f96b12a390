// The README's comparison table, from the last `npm run bench -- peers`: one row per figure, one
// column per enforcer, each cell the value and unit of that run (node tools/bench/src/peers/table.ts).
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Figure } from '../report.ts';

const COLUMNS = ['cascade', 'kube-network-policies v0.8.0', 'no enforcement'];
/** Each enforcer's per-node programs are its agents: one row for both (Cascade's controller has its own). */
const row = (name: string) => name.replace(/^(cascade agent|kube-network-policies): /, 'agents: ');

export function peersTable(figures: (Figure & { date?: string })[]): string {
  const rows = new Map<string, Map<string, string>>();
  for (const f of figures) {
    const m = /^(.*) \[([^\]]+)\]$/.exec(f.name);
    if (f.suite !== 'peers' || !m || !COLUMNS.includes(m[2]!)) continue;
    const v = Number.isInteger(f.value) ? String(f.value) : f.value.toFixed(f.value < 10 ? 2 : 0);
    const cells = rows.get(row(m[1]!)) ?? new Map<string, string>();
    cells.set(m[2]!, `${v} ${f.unit}`);
    rows.set(row(m[1]!), cells);
  }
  const date = figures.find((f) => f.suite === 'peers')?.date ?? '';
  const lines = [
    `| ${date.slice(0, 16)} | ${COLUMNS.join(' | ')} |`,
    `|---|${COLUMNS.map(() => '---').join('|')}|`,
    ...[...rows].map(
      ([name, cells]) => `| ${name} | ${COLUMNS.map((c) => cells.get(c) ?? '-').join(' | ')} |`,
    ),
  ];
  return `${lines.join('\n')}\n`;
}

if (process.argv[1] === import.meta.filename) {
  const file = join(resolve(import.meta.dirname, '../../../..'), 'bench/results/latest.json');
  process.stdout.write(peersTable((JSON.parse(readFileSync(file, 'utf8')) as { figures: Figure[] }).figures));
}
