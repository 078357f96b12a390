// cascadectl at scale: `netpol simulate --probes` with many explicit probes (time and peak memory of
// a separate cascadectl process, output to /dev/null), on the example cluster and on issue 30's
// 500-pod input (cli-probes.ts: start-up, every probes-file form, the truth table); `graph` and `report`
// on 1,000 routes (time, picture height with and without collapsing, page size).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { probeFigures } from '../cli-probes.ts';
import type { Figure } from '../report.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
const PODS = ['shop/web', 'shop/cart', 'payments/ledger', 'monitoring/prometheus', 'sandbox/toy'];
const PORTS = [80, 443, 7443, 8080, 9000, 9090, 53];

export async function run(): Promise<Figure[]> {
  const figures: Figure[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'bench-cli-'));
  try {
    for (const n of [10_000, 50_000, 750_000]) {
      const lines: string[] = [];
      for (let i = 0; i < n; i++) {
        const from = PODS[i % PODS.length]!;
        const to = PODS[Math.floor(i / PODS.length) % PODS.length]!;
        lines.push(
          `- {from: ${from}, to: ${to}, protocol: ${i % 7 === 6 ? 'UDP' : 'TCP'}, port: ${PORTS[i % PORTS.length]}}`,
        );
      }
      const file = join(dir, `probes-${n}.yaml`);
      writeFileSync(file, `${lines.join('\n')}\n`);
      for (const format of n > 50_000 ? ['json'] : ['table', 'json']) {
        // a child that runs the command with stdout discarded and reports its own time and peak RSS
        const script = `
          const { main } = await import(${JSON.stringify(join(root, 'packages/cascadectl/src/main.ts'))});
          process.stdout.write = () => true;
          const t0 = performance.now();
          const code = await main(['netpol', 'simulate', ${JSON.stringify(join(root, 'examples/netpol'))}, '--probes', ${JSON.stringify(file)}, '-o', '${format}']);
          process.stderr.write(JSON.stringify({ ms: performance.now() - t0, rss: process.resourceUsage().maxRSS / 1024, code }));`;
        const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
          encoding: 'utf8',
          maxBuffer: 1 << 26,
        });
        const m = JSON.parse(r.stderr.trim().split('\n').pop() ?? '{}') as { ms: number; rss: number };
        const input = `${n.toLocaleString('en')} explicit probes, examples/netpol (5 pods), -o ${format}, output discarded`;
        figures.push(
          {
            suite: 'cli',
            name: `netpol simulate --probes: time (${n.toLocaleString('en')}, ${format})`,
            value: m.ms,
            unit: 'ms',
            input,
          },
          {
            suite: 'cli',
            name: `netpol simulate --probes: peak RSS (${n.toLocaleString('en')}, ${format})`,
            value: m.rss,
            unit: 'MiB',
            input,
          },
        );
      }
    }
    figures.push(...probeFigures(dir));
    figures.push(...(await pictures(dir)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return figures;
}

/** graph and report on 1,000 routes (scaleManifests: 900 of them without their own policy). */
async function pictures(dir: string): Promise<Figure[]> {
  const { scaleManifests } = await import('../../../../packages/cascadectl/test/scale-manifests.ts');
  const { pictureOf } = await import('../../../../packages/cascadectl/src/commands/graph.ts');
  const { buildReport } = await import('../../../../packages/cascadectl/src/commands/report.ts');
  const file = join(dir, 'routes-1000.yaml');
  writeFileSync(file, scaleManifests(1000));
  const input = '1,000 routes x 2 rules in 50 namespaces on one Gateway (2 listeners), 102 policies';
  const figures: Figure[] = [];
  const timed = <T>(f: () => T): [T, number] => {
    const t0 = performance.now();
    const r = f();
    return [r, performance.now() - t0];
  };
  const [collapsed, ms] = timed(() => pictureOf([file], 'gateway').picture!);
  const full = pictureOf([file], 'gateway', { collapse: false }).picture!;
  const one = pictureOf([file], 'gateway', { namespace: 'team-7' }).picture!;
  const [report, reportMs] = timed(() => buildReport([file]));
  figures.push(
    { suite: 'cli', name: 'graph: time (1,000 routes)', value: ms, unit: 'ms', input },
    {
      suite: 'cli',
      name: 'graph: picture height, identical routes collapsed',
      value: collapsed.height,
      unit: 'px',
      input,
    },
    { suite: 'cli', name: 'graph: picture height, --no-collapse', value: full.height, unit: 'px', input },
    {
      suite: 'cli',
      name: 'graph: picture height, -n team-7 (20 routes)',
      value: one.height,
      unit: 'px',
      input,
    },
    { suite: 'cli', name: 'report: time (1,000 routes)', value: reportMs, unit: 'ms', input },
    {
      suite: 'cli',
      name: 'report: page size (1,000 routes)',
      value: Buffer.byteLength(report.html) / 1024,
      unit: 'KiB',
      input,
    },
  );
  return figures;
}
