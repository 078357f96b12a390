// Kinds by any name people type (authpol, ap, rlp, netpol, np, anp, banp, cnp; plural; any case) and kubectl's
// -l/--selector on the commands that list objects.
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { matchesSelector } from '@cascade/core';
import { afterAll, describe, expect, it } from 'vitest';
import { kindByName } from '../src/kinds.ts';
import { parseSelector } from '../src/selector.ts';
import { run } from './run.ts';

const EX = resolve(import.meta.dirname, '../../../examples');
const tmp = mkdtempSync(join(tmpdir(), 'cascadectl-kinds-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('kind names', () => {
  it('short, plural and any case name the same kind', () => {
    const cases: [string, string][] = [
      ['ap', 'AuthPolicy'],
      ['authpol', 'AuthPolicy'],
      ['AUTHPOLS', 'AuthPolicy'],
      ['rlps', 'RateLimitPolicy'],
      ['AuthPolicies', 'AuthPolicy'],
      ['RLP', 'RateLimitPolicy'],
      ['ratelimitpolicies', 'RateLimitPolicy'],
      ['np', 'NetworkPolicy'],
      ['netpol', 'NetworkPolicy'],
      ['NetworkPolicies', 'NetworkPolicy'],
      ['ANP', 'AdminNetworkPolicy'],
      ['adminnetworkpolicies', 'AdminNetworkPolicy'],
      ['banp', 'BaselineAdminNetworkPolicy'],
      ['cnp', 'ClusterNetworkPolicy'],
      ['clusternetworkpolicy', 'ClusterNetworkPolicy'],
    ];
    for (const [name, kind] of cases) expect(kindByName(name), name).toBe(kind);
    expect(kindByName('pod')).toBeUndefined();
  });

  it('get takes the EffectivePolicy by its kubectl names (effpol, effectivepolicies)', async () => {
    for (const name of ['effective', 'effpol', 'EffectivePolicies']) {
      const r = await run('get', name);
      expect(r.code, name).toBe(2);
      expect(r.stderr, name).toMatch(/reads a live cluster/);
    }
    expect((await run('get', 'pods')).stderr).toMatch(/unknown command/);
  });

  it('lint --kind filters findings by kind; a kind a command does not cover is a usage error saying where it is', async () => {
    const all = JSON.parse((await run('lint', EX, '-o', 'json')).stdout) as { kind: string }[];
    expect(new Set(all.map((f) => f.kind)).size).toBeGreaterThan(1);
    for (const k of ['np', 'NetworkPolicy', 'networkpolicies']) {
      const only = JSON.parse((await run('lint', EX, '--kind', k, '-o', 'json')).stdout) as {
        kind: string;
      }[];
      expect(only.length).toBeGreaterThan(0);
      expect(only.every((f) => f.kind === 'NetworkPolicy')).toBe(true);
    }
    const ap = JSON.parse((await run('lint', EX, '--kind', 'AP', '-o', 'json')).stdout) as { kind: string }[];
    expect(ap.every((f) => f.kind === 'AuthPolicy')).toBe(true);
    const r = await run('effective', join(EX, 'gateway'), '--kind', 'anp');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/AdminNetworkPolicy is not covered here.*netpol/);
    const bad = await run('status', join(EX, 'gateway'), '--kind', 'pods');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(
      /"pods" is not a policy kind.*authpol \(AuthPolicy\), rlp \(RateLimitPolicy\)/,
    );
    expect((await run('effective', join(EX, 'gateway'), '--kind', 'Rlp', '-o', 'name')).stdout).toMatch(
      /^RateLimitPolicy\//,
    );
  });
});

describe('-l / --selector', () => {
  const labels = { app: 'web', tier: 'front' };
  it.each([
    ['app=web', true],
    ['app==web', true],
    ['app=db', false],
    ['app!=db', true],
    ['app!=web', false],
    ['missing!=x', true], // NotIn selects objects without the key, as in Kubernetes
    ['app in (db, web)', true],
    ['app notin (db,web)', false],
    ['tier', true],
    ['!tier', false],
    ['!gone', true],
    ['app=web,tier in (front),!gone', true],
    ['app=web,app=db', false],
  ])('%s', (text, want) => {
    expect(matchesSelector(parseSelector(text), labels)).toBe(want);
  });

  it.each([
    ['a b', /is not a requirement/],
    ['app=web,', /is empty/],
    ['app=we b', /is not a requirement/],
    ['-bad=1', /invalid label key "-bad"/],
    ['app in (ok,no way)', /invalid label value "no way"/],
  ])('refuses %s naming the requirement', (text, msg) => {
    expect(() => parseSelector(text)).toThrow(msg);
  });

  it('netpol simulate: the truth table has only the selected pods', async () => {
    const r = await run('netpol', 'simulate', join(EX, 'netpol'), '-l', 'app in (web,ledger)', '-o', 'json');
    expect(r.code).toBe(0);
    const tables = JSON.parse(r.stdout) as { rows: string[][] }[];
    for (const t of tables) expect(t.rows[0]).toEqual(['from \\ to', 'payments/ledger', 'shop/web']);
    const probes = await run('netpol', 'simulate', join(EX, 'netpol'), '-l', 'app=web', '--probes', 'x');
    expect(probes.code).toBe(2);
  });

  it('netpol maps: endpoints by label', async () => {
    const r = await run('netpol', 'maps', join(EX, 'netpol'), '-l', 'app=ledger', '-o', 'json');
    const maps = JSON.parse(r.stdout) as { endpoints: { endpoint: string }[] };
    expect(maps.endpoints.map((e) => e.endpoint)).toEqual(['payments/ledger']);
  });

  it('-n on netpol simulate, netpol maps and lint: that namespace only; -A every namespace', async () => {
    const sim = JSON.parse(
      (await run('netpol', 'simulate', join(EX, 'netpol'), '-n', 'shop', '-o', 'json')).stdout,
    ) as { rows: string[][] }[];
    for (const t of sim) expect(t.rows[0]).toEqual(['from \\ to', 'shop/cart', 'shop/web']);
    const maps = JSON.parse(
      (await run('netpol', 'maps', join(EX, 'netpol'), '-n', 'payments', '-o', 'json')).stdout,
    ) as { endpoints: { endpoint: string }[] };
    expect(maps.endpoints.map((e) => e.endpoint)).toEqual(['payments/ledger']);
    const lint = (...more: string[]) =>
      run('lint', join(EX, 'gateway'), join(EX, 'netpol'), '-o', 'json', ...more).then(
        (r) => JSON.parse(r.stdout) as { object: string; namespace?: string }[],
      );
    const all = await lint();
    expect(all.map((f) => f.namespace).sort()).toEqual(['payments', 'team-d']);
    expect((await lint('-n', 'payments')).map((f) => f.object)).toEqual([
      'NetworkPolicy/payments/ledger-from-shop',
    ]);
    expect(await lint('-n', 'nowhere')).toEqual([]);
    expect(await lint('-n', 'payments', '-A')).toEqual(all);
  });

  it('effective and status: routes and policies by label', async () => {
    const dir = join(tmp, 'labelled');
    cpSync(join(EX, 'gateway'), dir, { recursive: true });
    writeFileSync(
      join(dir, '99-labelled.yaml'),
      [
        'apiVersion: gateway.networking.k8s.io/v1',
        'kind: HTTPRoute',
        'metadata: {name: labelled, namespace: team-b, labels: {tier: gold}}',
        'spec:',
        '  parentRefs: [{name: main, namespace: infra}]',
        '  rules: [{name: all}]',
        '',
      ].join('\n'),
    );
    const r = await run('effective', dir, '-l', 'tier=gold', '-o', 'name');
    expect(r.stdout.trim().split('\n').length).toBeGreaterThan(0);
    expect(r.stdout).toMatch(/team-b\/labelled/);
    expect(r.stdout).not.toMatch(/team-b\/orders/);
    const s = JSON.parse((await run('status', dir, '-l', 'tier=gold', '-o', 'json')).stdout) as {
      policies: unknown[];
      targets: { name: string }[];
    };
    expect(s.policies).toEqual([]);
    expect(s.targets.map((t) => t.name)).toEqual(['labelled']);
    const n = JSON.parse((await run('status', dir, '-n', 'infra', '-o', 'json')).stdout) as {
      policies: { namespace: string }[];
    };
    expect(n.policies.length).toBeGreaterThan(0);
    expect(n.policies.every((p) => p.namespace === 'infra')).toBe(true);
  });
});
