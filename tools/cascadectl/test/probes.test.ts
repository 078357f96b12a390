// netpol simulate --probes reads one-item-per-line lists without the YAML library when the values
// are plain: the result must be exactly what the YAML library reads, and a bad item is reported
// before anything is written.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { readProbes } from '../src/commands/netpol.ts';
import { run } from './run.ts';

const NP = resolve(import.meta.dirname, '../../../examples/netpol');
const tmp = mkdtempSync(join(tmpdir(), 'cascadectl-probes-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const LINES = [
  '- {from: shop/web, to: payments/ledger, protocol: TCP, port: 7443}',
  '- {from: shop/web, to: payments/ledger, port: grpc}',
  '- {from: shop/web, to: 10.96.0.50, protocol: UDP, port: 53}',
  '- {from: shop/web, to: "payments/ledger", protocol: TCP, port: "7443"}',
  "- {from: 'shop/web', to: payments/ledger, port: 0x50}",
  '- {from: shop/web, to: payments/ledger, protocol: tcp, port: 1e3}',
  '- {from: shop/web, to: fd00::10, port: 80}',
  '- {from: shop/web, to: svc:shop/web, port: http}',
  '- {from: shop/web, to: payments/ledger, port: 080}',
  '  # a comment',
  '',
  '- { from: shop/web , to: payments/ledger , port: 9090 }',
];

describe('probes files', () => {
  it('the fast path reads each line exactly as the YAML library does', () => {
    const f = join(tmp, 'mixed.yaml');
    writeFileSync(f, `${LINES.join('\n')}\n`);
    const yaml = (parse(LINES.join('\n')) as Record<string, unknown>[]).map((o) => ({
      from: o.from,
      to: o.to,
      port: o.port,
    }));
    const got = readProbes(f).map((p) => ({ from: p.from, to: p.to, port: p.port }));
    // readProbes turns "7443" into 7443 and keeps names: compare on what YAML gives, normalised so
    expect(got).toEqual(
      yaml.map((o) => ({
        ...o,
        port: typeof o.port === 'string' && /^\d+$/.test(o.port) ? Number(o.port) : o.port,
      })),
    );
  });

  it('a bad item is reported, naming it, before any result is written', async () => {
    const f = join(tmp, 'bad.yaml');
    writeFileSync(f, `${LINES[0]}\n${LINES[0]}\n- {from: shop/web, port: 80}\n`);
    const r = await run('netpol', 'simulate', NP, '--probes', f, '-o', 'json');
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/--probes item 3: from and to are required/);
    const y = join(tmp, 'broken.yaml');
    writeFileSync(y, `${LINES[0]}\n- {from: [shop/web, to: x}\n`);
    const b = await run('netpol', 'simulate', NP, '--probes', y, '-o', 'json');
    expect(b.code).toBe(2);
    expect(b.stdout).toBe('');
    expect(b.stderr).toMatch(/--probes .*broken\.yaml: /);
  });
});
