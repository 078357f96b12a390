// cascadectl diff: expectations from the example story and the change made, not from output.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { run } from './run.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../../examples');
const GW = join(EXAMPLES, 'gateway');
const NP = join(EXAMPLES, 'netpol');
const PROBES = join(EXAMPLES, 'probes/netpol.yaml');
const tmp = mkdtempSync(join(tmpdir(), 'cascadectl-diff-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A copy of the examples with one text edit in one file. */
function edited(
  name: string,
  file: string,
  from: string | RegExp | ((text: string) => string),
  to = '',
): { gw: string; np: string } {
  const dir = join(tmp, name);
  cpSync(GW, join(dir, 'gateway'), { recursive: true });
  cpSync(NP, join(dir, 'netpol'), { recursive: true });
  const f = join(dir, file);
  const text = readFileSync(f, 'utf8');
  const next = typeof from === 'function' ? from(text) : text.replace(from, to);
  if (next === text) throw new Error(`edit of ${file} did not apply`);
  writeFileSync(f, next);
  return { gw: join(dir, 'gateway'), np: join(dir, 'netpol') };
}

describe('cascadectl diff', () => {
  it('exits 0 with nothing to report when both sides are the same', async () => {
    const r = await run('diff', GW, NP, '--after', GW, NP, '--probes', PROBES, '-o', 'json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ paths: [], probes: [] });
  });

  it('a lower per-user limit on orders changes exactly that rule on the checkout path', async () => {
    const after = edited('limit', 'gateway/30-team-policies.yaml', 'limit: 5000', 'limit: 500');
    const r = await run('diff', GW, NP, '--after', after.gw, after.np, '-o', 'json');
    expect(r.code).toBe(1);
    const d = JSON.parse(r.stdout);
    expect(d.probes).toEqual([]);
    expect(d.paths).toHaveLength(1);
    expect(d.paths[0]).toMatchObject({
      policyKind: 'RateLimitPolicy',
      path: { gateway: 'infra/main', route: 'team-b/orders', rule: 'checkout' },
      change: 'changed',
    });
    // Before: team-b's 5000/min was clipped to 1000/min by the platform's constraint (its 50000/h,
    // 833/min, kept). After: 500/min is under the cap: team-b's own rule stands as the intent.
    expect(d.paths[0].rules).toHaveLength(1);
    const [c] = d.paths[0].rules;
    expect(c.key).toBe('limits.per-user');
    expect(c.change).toBe('changed');
    expect(c.before.value.rates).toEqual([
      { limit: 50000, window: '1h' },
      { limit: 1000, window: '1m' },
    ]);
    expect(c.after.value.rates).toEqual([
      { limit: 500, window: '1m' },
      { limit: 50000, window: '1h' },
    ]);
    expect(c.after.source).toEqual({ kind: 'RateLimitPolicy', namespace: 'team-b', name: 'orders-per-user' });
    expect(c.after.as).toBe('intent');
  });

  it('deleting a route removes its paths for every kind', async () => {
    const after = edited('route', 'gateway/20-team-routes.yaml', (t) =>
      t
        .split('\n---\n')
        .filter((doc) => !doc.includes('name: status'))
        .join('\n---\n'),
    );
    const r = await run('diff', GW, '--after', after.gw, '-o', 'json');
    expect(r.code).toBe(1);
    const d = JSON.parse(r.stdout);
    const removed = d.paths.filter((p: { change: string }) => p.change === 'removed');
    expect(removed.length).toBeGreaterThan(0);
    expect(removed.length).toBe(d.paths.length);
    expect(new Set(removed.map((p: { path: { route: string } }) => p.path.route))).toEqual(
      new Set(['team-c/status']),
    );
    expect(new Set(removed.map((p: { policyKind: string }) => p.policyKind))).toEqual(
      new Set(['AuthPolicy', 'RateLimitPolicy']),
    );
  });

  it('moving the metrics port flips exactly the probes on the old and new port', async () => {
    const after = edited('port', 'netpol/20-namespaces.yaml', 'port: 9090 }', 'port: 9091 }');
    const probes = join(tmp, 'probes.yaml');
    writeFileSync(
      probes,
      [
        '- { from: monitoring/prometheus, to: payments/ledger, protocol: TCP, port: 9090 }',
        '- { from: monitoring/prometheus, to: payments/ledger, protocol: TCP, port: 9091 }',
        '- { from: monitoring/prometheus, to: payments/ledger, protocol: TCP, port: 7443 }',
        '- { from: shop/web, to: shop/cart, protocol: TCP, port: 9000 }',
      ].join('\n'),
    );
    const r = await run('diff', NP, '--after', after.np, '--probes', probes, '-o', 'json');
    expect(r.code).toBe(1);
    const d = JSON.parse(r.stdout);
    expect(d.paths).toEqual([]);
    expect(
      d.probes.map((p: { port: number; before: { verdict: string }; after: { verdict: string } }) => [
        p.port,
        p.before.verdict,
        p.after.verdict,
      ]),
    ).toEqual([
      [9090, 'allow', 'deny'],
      [9091, 'deny', 'allow'],
    ]);
    // The denial is the payments namespace's NetworkPolicy isolation (the ANP passed sre traffic down).
    expect(d.probes[0].after.ingress.decidedBy.tier).toBe('networkpolicy');
    expect(d.probes[0].after.ingress.decidedBy.passedBy).toEqual([
      'AdminNetworkPolicy/protect-sensitive#ingress[0]',
    ]);
  });

  it('prints a readable table and counts the probes it checked', async () => {
    const after = edited('table', 'netpol/20-namespaces.yaml', 'port: 9090 }', 'port: 9091 }');
    const r = await run('diff', NP, '--after', after.np);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('Effective policies: 0 path(s) changed, 0 added, 0 removed');
    expect(r.stdout).toMatch(
      /Network policy: 2 of \d+ probe\(s\) change verdict \(every pod pair on every port in use\)/,
    );
    expect(r.stdout).toMatch(/monitoring\/prometheus +payments\/ledger +TCP\/9090 +ALLOW/);
  });

  it('a pod that exists only after is reported as n/a before', async () => {
    const after = edited(
      'pod',
      'netpol/00-cluster.yaml',
      /$/,
      '\n---\napiVersion: v1\nkind: Pod\nmetadata: { name: newbie, namespace: sandbox, labels: { app: newbie } }\nstatus: { podIP: 10.0.9.9 }\n',
    );
    const r = await run('diff', NP, '--after', after.np, '-o', 'json');
    expect(r.code).toBe(1);
    const d = JSON.parse(r.stdout);
    expect(d.probes.length).toBeGreaterThan(0);
    for (const p of d.probes) {
      expect([p.from, p.to]).toContain('sandbox/newbie');
      expect(p.before).toBeUndefined();
      expect(p.after.verdict).toMatch(/allow|deny/);
    }
  });

  it('rejects a missing --after and unknown flags with exit 2', async () => {
    expect((await run('diff', GW)).code).toBe(2);
    expect((await run('diff', GW, '--after')).code).toBe(2);
    const r = await run('diff', GW, '--after', GW, '--bogus');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('bogus');
  });
});
