// `npm run bench`: runs every suite in its own process, prints each figure with unit and input size,
// and writes bench/results/latest.json (plus a dated copy) so runs can be compared over time.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Figure } from './report.ts';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../../..');
const only = process.argv.slice(2);
const suites = readdirSync(join(here, 'suites'))
  .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
  .map((f) => f.replace(/\.ts$/, ''))
  // the cluster suites restart the machine's e2e cluster: only when asked for by name
  .filter((s) => (only.length === 0 ? s !== 'cluster' && s !== 'peers' : only.includes(s)));

const all: Figure[] = [];
const failures: string[] = [];
for (const suite of suites) {
  process.stderr.write(`[bench] ${suite} ...\n`);
  try {
    const out = execFileSync(
      process.execPath,
      ['--max-old-space-size=8192', '--expose-gc', join(here, 'run-suite.ts'), suite],
      {
        cwd: root,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
        maxBuffer: 64 * 1024 * 1024,
      },
    );
    const lines = out.trim().split('\n');
    // Every figure carries the suite that produced it, so that a later run of that suite replaces it.
    const figures = (JSON.parse(lines[lines.length - 1]!) as Figure[]).map((f) => ({ ...f, suite }));
    all.push(...figures);
    for (const f of figures) {
      const v = Number.isInteger(f.value) ? String(f.value) : f.value.toFixed(f.value < 10 ? 3 : 1);
      console.log(
        `${f.suite.padEnd(10)} ${f.name.padEnd(58)} ${`${v} ${f.unit}`.padStart(16)}${f.target ? `  (target ${f.target})` : ''}  [${f.input}]`,
      );
    }
  } catch (e) {
    failures.push(suite);
    process.stderr.write(`[bench] suite ${suite} failed: ${e instanceof Error ? e.message : String(e)}\n`);
  }
}
// A run of some suites replaces only their figures: latest.json keeps the others (with their date).
const file = join(root, 'bench/results/latest.json');
let kept: (Figure & { date?: string })[] = [];
try {
  const prev = JSON.parse(readFileSync(file, 'utf8')) as {
    date: string;
    figures: (Figure & { date?: string })[];
  };
  kept = prev.figures
    // a suite that failed keeps its previous figures (with their date): a crash loses no history
    .filter((f) => !suites.includes(f.suite) || failures.includes(f.suite))
    .map((f) => ({ ...f, date: f.date ?? prev.date }));
} catch {}
const now = new Date().toISOString();
const result = {
  date: now,
  machine: { cpus: cpus().length, cpu: cpus()[0]?.model, node: process.version },
  figures: [...kept, ...all.map((f) => ({ ...f, date: now }))],
  failedSuites: failures,
};
mkdirSync(join(root, 'bench/results'), { recursive: true });
writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
console.log(
  `\nwrote bench/results/latest.json (${all.length} figures${failures.length ? `; failed: ${failures.join(', ')}` : ''})`,
);
process.exit(failures.length ? 1 : 0);
