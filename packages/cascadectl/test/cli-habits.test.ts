// Exit codes that gate CI and the small kubectl habits: --version, a command group alone, a route
// that does not exist, status --strict, lint on invalid objects, a misspelt NetworkPolicy field, a
// closed pipe.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { run } from './run.ts';

const EX = resolve(import.meta.dirname, '../../../examples');
const BIN = resolve(import.meta.dirname, '../bin/cascadectl.js');
const tmp = mkdtempSync(join(tmpdir(), 'cascadectl-habits-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('cascadectl habits and exit codes', () => {
  it('--version, and `cascadectl netpol` alone lists its subcommands', async () => {
    expect((await run('--version')).stdout).toMatch(/^cascadectl \d+\.\d+\.\d+/);
    const g = await run('netpol');
    expect(g.code).toBe(2);
    expect(g.stdout).toMatch(/netpol simulate[\s\S]*netpol explain[\s\S]*netpol maps/);
    expect((await run('netpol', '-h')).code).toBe(0);
  });

  it('explain of a route that does not exist exits 1, saying so on stderr', async () => {
    const r = await run('explain', join(EX, 'gateway'), '--route', 'nope/nope');
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/no path of route nope\/nope/);
  });

  it('status --strict fails unless every policy is Accepted and Enforced', async () => {
    // the example story has a refused unset (PartiallyEnforced) and other partial policies
    expect((await run('status', join(EX, 'gateway'))).code).toBe(0);
    expect((await run('status', join(EX, 'gateway'), '--strict')).code).toBe(1);
  });

  it('lint exits non-zero on an invalid object; a misspelt NetworkPolicy field is an error, not a silent deny-all', async () => {
    const dir = join(tmp, 'typo');
    cpSync(join(EX, 'netpol'), dir, { recursive: true });
    writeFileSync(
      join(dir, '99-typo.yaml'),
      'apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: typo, namespace: shop}\nspec:\n  podSelector: {matchLabels: {app: web}}\n  ingres:\n    - from: [{podSelector: {}}]\n',
    );
    const r = await run('lint', dir);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/typo.*spec: Unrecognized key: "ingres" \(its rules ignored\)/);
    // meanwhile its pods stay isolated (fail closed), and it says so
    expect(r.stderr).toMatch(/warning: .*typo.*fail closed: the pods it selects stay isolated \(ingress\)/);
    expect((await run('lint', join(EX, 'netpol'))).code).toBe(0);
    expect((await run('lint', join(EX, 'netpol'), '--strict')).code).toBe(1); // it has warnings
  });

  it('on a terminal tables fit its width and verdicts are coloured; NO_COLOR and --no-color turn colour off; piped output is plain ASCII', () => {
    // a real pseudo-terminal (util-linux script), 80 columns
    const inPty = (cmd: string, env: Record<string, string> = {}) =>
      spawnSync('script', ['-q', '-c', `stty cols 80; ${cmd}`, '/dev/null'], {
        encoding: 'utf8',
        env: { ...process.env, ...env, NO_COLOR: env.NO_COLOR ?? '' },
      }).stdout;
    const sim = `node ${BIN} netpol simulate ${join(EX, 'netpol')} --probes ${join(EX, 'probes/netpol.yaml')}`;
    const ESC = String.fromCharCode(27);
    const ansi = new RegExp(`${ESC}\\[[0-9;]*m`, 'g');
    const coloured = inPty(sim);
    expect(coloured).toContain(`${ESC}[31mDENY${ESC}[0m`);
    const lines = coloured.replace(ansi, '').split(/\r?\n/).filter(Boolean);
    expect(lines.length).toBeGreaterThan(5);
    for (const l of lines) expect(l.length, l).toBeLessThanOrEqual(80);
    expect(inPty(sim, { NO_COLOR: '1' })).not.toMatch(ansi);
    expect(inPty(`${sim} --no-color`)).not.toMatch(ansi);
    // -o wide on a terminal: values uncut
    const wide = inPty(`node ${BIN} effective ${join(EX, 'gateway')} --kind ap -o wide`).replace(ansi, '');
    expect(wide).toMatch(
      /"predicate":"!has\(auth\.identity\.anonymous\) \|\| auth\.identity\.anonymous != true"/,
    );
    // piped: ASCII only, nothing cut to a width
    const piped = spawnSync('node', [BIN, 'effective', join(EX, 'gateway')], { encoding: 'utf8' }).stdout;
    expect(piped).toMatch(/\.\.\./); // compact values end in ... not …
    expect([...piped].every((c) => c.charCodeAt(0) < 128)).toBe(true);
    expect(piped).not.toMatch(ansi);
  });

  it('a closed pipe ends quietly (no EPIPE trace)', () => {
    const r = spawnSync(
      'bash',
      ['-c', `node ${BIN} effective ${join(EX, 'gateway')} | head -c 10 > /dev/null`],
      {
        encoding: 'utf8',
      },
    );
    expect(r.stderr).not.toMatch(/EPIPE|Error/);
    expect(execFileSync('node', [BIN, '--version'], { encoding: 'utf8' })).toMatch(/^cascadectl /);
  });

  it("netpol explain --port takes the destination pod's named port, and refuses out-of-range numbers", async () => {
    const explain = (port: string) =>
      run(
        'netpol',
        'explain',
        join(EX, 'netpol'),
        '--from',
        'shop/cart',
        '--to',
        'payments/ledger',
        '--port',
        port,
      );
    const named = await explain('grpc');
    expect(named.code).toBe(0);
    expect(named.stdout).toMatch(/TCP\/7443/);
    const bad = await explain('nope');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/no TCP port of that name \(it has grpc=7443\/TCP\)/);
    const big = await explain('70000');
    expect(big.code).toBe(2);
    expect(big.stderr).toMatch(/out of range/);
  });

  it('-f FILE|DIR|- (repeatable, -R accepted) like kubectl; - reads the documents on standard input', async () => {
    const gw = join(EX, 'gateway');
    const viaF = await run('effective', '-f', gw, '-R', '--kind', 'RateLimitPolicy');
    const viaPos = await run('effective', gw, '--kind', 'RateLimitPolicy');
    expect(viaF.code).toBe(0);
    expect(viaF.stdout).toBe(viaPos.stdout);
    const docs = execFileSync('bash', ['-c', `for f in ${gw}/*.yaml; do cat "$f"; echo ---; done`], {
      encoding: 'utf8',
    });
    const stdin = spawnSync('node', [BIN, 'effective', '-f', '-', '--kind', 'RateLimitPolicy'], {
      input: docs,
      encoding: 'utf8',
    });
    expect(stdin.status).toBe(0);
    expect(stdin.stdout).toBe(viaPos.stdout);
  });

  it('kinds by any name (ap, rlp, any case); effective filters -n, --route, --gateway; -o name and -o wide', async () => {
    const gw = join(EX, 'gateway');
    const full = await run('effective', gw, '--kind', 'RateLimitPolicy');
    for (const k of ['rlp', 'RLP', 'ratelimitpolicies'])
      expect((await run('effective', gw, '--kind', k)).stdout).toBe(full.stdout);
    const names = (await run('effective', gw, '--kind', 'rlp', '-n', 'team-b', '-o', 'name')).stdout
      .trim()
      .split('\n');
    expect(names).toEqual(['RateLimitPolicy/infra/main#https/team-b/orders/checkout']);
    const route = await run(
      'effective',
      gw,
      '--kind',
      'ap',
      '--route',
      'team-a/catalog',
      '--gateway',
      'infra/main',
    );
    expect(route.stdout).toContain('HTTPRoute team-a/catalog');
    expect(route.stdout).not.toContain('team-b');
    const wide = await run('effective', gw, '--kind', 'ap', '--route', 'team-a/catalog', '-o', 'wide');
    expect(wide.stdout).toContain('auth.identity.anonymous != true"}]}}'); // uncut
    expect((await run('effective', gw, '--kind', 'nope')).code).toBe(2);
  });

  it('a probes list one item per line is read line by line, with the same answers as any YAML', async () => {
    const np = join(EX, 'netpol');
    const flow = join(tmp, 'flow.yaml');
    const block = join(tmp, 'block.yaml');
    writeFileSync(
      flow,
      '# probes\n- {from: shop/web, to: shop/cart, protocol: TCP, port: 9000}\n- {from: sandbox/toy, to: shop/cart, port: 9000}\n',
    );
    writeFileSync(
      block,
      '- from: shop/web\n  to: shop/cart\n  protocol: TCP\n  port: 9000\n- from: sandbox/toy\n  to: shop/cart\n  port: 9000\n',
    );
    const a = await run('netpol', 'simulate', np, '--probes', flow, '-o', 'json');
    const b = await run('netpol', 'simulate', np, '--probes', block, '-o', 'json');
    expect(a.code).toBe(0);
    expect(JSON.parse(a.stdout)).toEqual(JSON.parse(b.stdout));
    expect((JSON.parse(a.stdout) as { verdict: string }[]).map((r) => r.verdict)).toEqual(['allow', 'deny']);
  });
});
