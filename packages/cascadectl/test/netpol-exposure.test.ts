// netpol exposure: per workload, who reaches it and what it reaches, in four formats, and --diff.
// The edges' exactness is the engine's property test (netpolicy engine/exposure.property.test.ts);
// here: the grouping a reviewer reads, the formats, the diff's exit code and bad input.
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { spansMinus } from '../src/commands/netpol-exposure.ts';
import { run } from './run.ts';

const NP = resolve(import.meta.dirname, '../../../examples/netpol');
const tmp = mkdtempSync(join(tmpdir(), 'cascadectl-exposure-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
// the examples with one more NetworkPolicy: cart admits any namespace on 8080
const changed = join(tmp, 'changed');
cpSync(NP, changed, { recursive: true });
writeFileSync(
  join(changed, '30-cart-metrics.yaml'),
  `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: { name: cart-metrics, namespace: shop }
spec:
  podSelector: { matchLabels: { app: cart } }
  policyTypes: [Ingress]
  ingress:
    - from: [{ namespaceSelector: {} }]
      ports: [{ port: 8080 }]
`,
);

type Line = { workload: string; direction: string; scope: string; peer: string; ports: string };

describe('netpol exposure', () => {
  it('groups who reaches each workload: namespaces, workloads, nodes, outside', async () => {
    const r = await run('netpol', 'exposure', NP, '-o', 'json');
    expect(r.code).toBe(0);
    const lines = JSON.parse(r.stdout) as Line[];
    const find = (w: string, d: string, peer: string) =>
      lines.find((l) => l.workload === w && l.direction === d && l.peer === peer)?.ports;
    // cart: only web, on its port; its own node always (a NetworkPolicy cannot block it)
    expect(
      lines.filter((l) => l.workload === 'shop/cart' && l.direction === 'ingress').map((l) => l.peer),
    ).toEqual(['shop/web', 'its own node']);
    expect(find('shop/cart', 'ingress', 'shop/web')).toBe('TCP 9000');
    expect(find('shop/cart', 'ingress', 'its own node')).toBe('any port');
    // web: 8080 from anywhere outside and from other nodes, a new namespace too
    expect(find('shop/web', 'ingress', 'anywhere outside the cluster')).toBe('TCP 8080');
    expect(find('shop/web', 'ingress', 'every other node')).toBe('TCP 8080');
    expect(find('shop/web', 'ingress', 'a new namespace (no labels)')).toBe('TCP 8080');
    // cart's egress outside: the one range the admin policy leaves it
    expect(find('shop/cart', 'egress', 'outside: 203.0.113.0/25')).toBe('TCP 443');
    // -n: that namespace's workloads only
    const shop = JSON.parse(
      (await run('netpol', 'exposure', NP, '-n', 'shop', '-o', 'json')).stdout,
    ) as Line[];
    expect(new Set(shop.map((l) => l.workload))).toEqual(new Set(['shop/cart', 'shop/web']));
  });

  it('writes a table, Markdown and CSV', async () => {
    const t = await run('netpol', 'exposure', NP, '-n', 'shop');
    expect(t.stdout.split('\n')[0]).toMatch(/^WORKLOAD\s+DIRECTION\s+PEER\s+PORTS$/);
    expect(t.stdout).toMatch(/shop\/cart\s+from\s+shop\/web\s+TCP 9000/);
    const md = await run('netpol', 'exposure', NP, '-n', 'shop', '-o', 'md');
    expect(md.stdout.split('\n').slice(0, 2)).toEqual([
      '| WORKLOAD | DIRECTION | PEER | PORTS |',
      '|---|---|---|---|',
    ]);
    const csv = await run('netpol', 'exposure', NP, '-n', 'shop', '-o', 'csv');
    expect(csv.stdout.split('\n')[0]).toBe('WORKLOAD,DIRECTION,PEER,PORTS');
    expect(csv.stdout).toContain('shop/cart,from,shop/web,TCP 9000');
  });

  it('--diff names what a change opens, exits 1 on any, 0 when it only closes', async () => {
    const open = await run('netpol', 'exposure', changed, '--diff', NP);
    expect(open.code).toBe(1);
    expect(open.stdout).toContain('this change exposes shop/cart to a new namespace (no labels) on TCP 8080');
    expect(open.stdout).toContain('this change lets shop/web reach shop/cart on TCP 8080');
    // nothing else moved: web's lines are the same in both
    expect(open.stdout).not.toMatch(/reaching|closes/);
    const close = await run('netpol', 'exposure', NP, '--diff', changed, '-o', 'json');
    expect(close.code).toBe(0);
    const changes = JSON.parse(close.stdout) as (Line & { change: string })[];
    expect(changes.length).toBeGreaterThan(0);
    expect(changes.every((c) => c.change === '-')).toBe(true);
    const same = await run('netpol', 'exposure', NP, '--diff', NP);
    expect([same.code, same.stdout.trim()]).toEqual([0, 'no change in exposure']);
  });

  it('refuses a bad format and a missing base, naming them', async () => {
    const bad = await run('netpol', 'exposure', NP, '-o', 'yaml');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--output must be one of table, json, md, csv/);
    const missing = await run('netpol', 'exposure', NP, '--diff', join(tmp, 'nowhere'));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('nowhere');
  });

  it('subtracts port spans per protocol', () => {
    expect(
      spansMinus(
        [
          { proto: 6, from: 1, to: 65535 },
          { proto: 17, from: 53, to: 53 },
        ],
        [{ proto: 6, from: 80, to: 90 }],
      ),
    ).toEqual([
      { proto: 6, from: 1, to: 79 },
      { proto: 6, from: 91, to: 65535 },
      { proto: 17, from: 53, to: 53 },
    ]);
  });
});
