// cascadectl at scale: `netpol simulate --probes` with many explicit probes (time and peak memory of
// a separate cascadectl process, output to /dev/null), on the example cluster.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Figure } from '../report.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
const PODS = ['shop/web', 'shop/cart', 'payments/ledger', 'monitoring/prometheus', 'sandbox/toy'];
const PORTS = [80, 443, 7443, 8080, 9000, 9090, 53];

export async function run(): Promise<Figure[]> {
  const figures: Figure[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'bench-cli-'));
  try {
    for (const n of [10_000, 50_000]) {
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
      for (const format of ['table', 'json']) {
        // a child that runs the command with stdout discarded and reports its own time and peak RSS
        const script = `
          const { main } = await import(${JSON.stringify(join(root, 'tools/cascadectl/src/main.ts'))});
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
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return figures;
}
