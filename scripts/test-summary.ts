// Sums the vitest JSON results of every project into the closing line CI reads.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

function hasTests(dir: string): boolean {
  const walk = (d: string): boolean =>
    readdirSync(d, { withFileTypes: true }).some((e) =>
      e.isDirectory() ? e.name !== 'node_modules' && walk(join(d, e.name)) : e.name.endsWith('.test.ts'),
    );
  return walk(dir);
}

let passed = 0;
let failed = 0;
let skipped = 0;
const missing: string[] = [];
// Named again at the end: CI shows the tail of a long log, where a failure further up may be cut off.
const notPassed: string[] = [];
type Assertion = {
  status: string;
  fullName: string;
  title: string;
  duration?: number;
  failureMessages?: string[];
};
type FileResult = { name: string; startTime: number; endTime: number; assertionResults: Assertion[] };
/** Where the time went, by phase: test files by their kind (name), each e2e step on its own. */
const KINDS = [
  ['e2e', /\.cluster\.test\.ts$/],
  ['kernel', /\.kernel\.test\.ts$/],
  ['integration', /\.integration\.test\.ts$/],
  ['unit', /\.test\.ts$/],
] as const;
const phase = new Map<string, { files: number; seconds: number; from: number; to: number }>();
/** when scripts/test.sh started the tests (epoch seconds; 0 when run on its own) */
const testStart = Number(process.env.CASCADE_TEST_T0) || 0;
const e2ePhases: { start: number; lines: string[] }[] = [];
for (const group of ['packages', 'tools']) {
  for (const name of readdirSync(group)) {
    const dir = join(group, name);
    if (!existsSync(join(dir, 'package.json'))) continue;
    // .vitest-results.json, and any .vitest-results.NAME.json beside it (scripts/test.sh runs
    // tools/cluster's end-to-end files and its others in two processes)
    const files = readdirSync(dir).filter((f) => /^\.vitest-results(\.[a-z-]+)?\.json$/.test(f));
    if (!files.length) {
      if (hasTests(dir)) missing.push(dir);
      continue;
    }
    for (const file of files) summarise(JSON.parse(readFileSync(join(dir, file), 'utf8')));
  }
}
function summarise(r: {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests?: number;
  testResults: FileResult[];
}): void {
  passed += r.numPassedTests;
  failed += r.numFailedTests;
  skipped += r.numPendingTests + (r.numTodoTests ?? 0);
  for (const f of r.testResults) {
    const kind = KINDS.find(([, re]) => re.test(f.name))?.[0] ?? 'unit';
    const p = phase.get(kind) ?? { files: 0, seconds: 0, from: Infinity, to: 0 };
    p.files++;
    p.seconds += (f.endTime - f.startTime) / 1000;
    p.from = Math.min(p.from, f.startTime);
    p.to = Math.max(p.to, f.endTime);
    phase.set(kind, p);
    if (kind === 'e2e') {
      // each e2e file is a phase (one cluster); a file's times cover its steps only, so its
      // set-up (beforeAll: the cluster's up) shows as the wait since the file before it in the
      // same process ended (that file's afterAll included), or since the tests started
      const before = r.testResults
        .filter((o) => o.endTime <= f.startTime)
        .reduce((n, o) => Math.max(n, o.endTime), testStart * 1000 || f.startTime);
      e2ePhases.push({
        start: f.startTime,
        lines: [
          `  e2e phase ${relative(process.cwd(), f.name)}: ${Math.round((f.endTime - before) / 1000)} s (set-up before its first step ${Math.round((f.startTime - before) / 1000)} s, steps ${Math.round((f.endTime - f.startTime) / 1000)} s)`,
          ...f.assertionResults.map(
            (t) => `    e2e ${Math.round((t.duration ?? 0) / 1000)} s: ${t.title.slice(0, 90)}`,
          ),
        ],
      });
    }
  }
  for (const f of r.testResults)
    for (const t of f.assertionResults)
      if (t.status === 'failed' || (process.env.CI === 'true' && t.status !== 'passed')) {
        const why = (t.failureMessages?.[0] ?? t.status).split('\n')[0].slice(0, 300);
        notPassed.push(`${t.status}: ${relative(process.cwd(), f.name)} > ${t.fullName}: ${why}`);
      }
}
// the phases (a fresh machine's npm test, phase by phase): the set-up steps, then the tests by kind
const setupLines = existsSync('node_modules/.cascade-setup-times')
  ? readFileSync('node_modules/.cascade-setup-times', 'utf8').trim().split('\n')
  : [];
// each step's seconds, then the set-up's wall time (scripts/setup.sh: less than their sum, as the
// Kubernetes build set runs beside the steps before it)
const setupTimes = setupLines.filter((l) => !l.startsWith('wall '));
const setupWall = Number(setupLines.find((l) => l.startsWith('wall '))?.split(' ')[1]);
console.log(
  `phases: set-up ${setupTimes.map((l) => `${l} s`).join(', ') || 'not run'}${Number.isFinite(setupWall) ? `; set-up wall ${setupWall} s` : ''}`,
);
// the test phase's own steps (scripts/test.sh: the workspace's type check) and its wall time
const testTimes = existsSync('node_modules/.cascade-test-times')
  ? readFileSync('node_modules/.cascade-test-times', 'utf8').trim().split('\n').filter(Boolean)
  : [];
const setupSeconds = Number.isFinite(setupWall)
  ? setupWall
  : setupTimes.reduce((n, l) => n + (Number(l.split(' ')[1]) || 0), 0);
if (testStart > 0) {
  const testSeconds = Math.round(Date.now() / 1000 - testStart);
  console.log(
    `  tests ${testSeconds} s${testTimes.length ? ` (${testTimes.map((l) => `${l} s`).join(', ')})` : ''}; set-up and tests ${((setupSeconds + testSeconds) / 60).toFixed(1)} min`,
  );
}
// when each kind started and ended, in seconds from the first test file's start (they overlap: the
// e2e runs beside the rest)
const t0 = Math.min(...[...phase.values()].map((p) => p.from));
for (const [kind] of KINDS) {
  const p = phase.get(kind);
  if (p)
    console.log(
      `  ${kind}: ${p.files} files, ${Math.round(p.seconds)} s of file time, from +${Math.round((p.from - t0) / 1000)} s to +${Math.round((p.to - t0) / 1000)} s`,
    );
}
for (const p of e2ePhases.sort((a, b) => a.start - b.start)) for (const line of p.lines) console.log(line);
for (const line of notPassed) console.log(line);
if (missing.length) console.log(`no test results from: ${missing.join(', ')}`);
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
// In CI a skipped test is a failure: the real parts (API server, kernel) must have run.
const skipFails = process.env.CI === 'true' && skipped > 0;
if (skipFails) console.log('CI=true: skipped tests count as failures');
process.exit(failed > 0 || missing.length > 0 || skipFails ? 1 : 0);
