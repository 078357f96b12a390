// The CLI under hostile and unlucky input: the engine is shared with the controllers, so a file a
// tenant hands over must never hang it, crash it or lose the other files' objects.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadManifests } from '../src/load.ts';
import { run } from './run.ts';

const GW = resolve(import.meta.dirname, '../../../examples/gateway');
const tmp = mkdtempSync(join(tmpdir(), 'cascadectl-hostile-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const ok = `apiVersion: v1
kind: Namespace
metadata:
  name: fine
`;
// a billion laughs: 9 levels of 9 aliases
const bomb = `a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
kind: Namespace
metadata: {name: boom}
`;

describe('loading files', () => {
  it('an alias bomb is refused with a clear problem; the other files are loaded', () => {
    const dir = join(tmp, 'bomb');
    mkdirSync(dir);
    writeFileSync(join(dir, 'a-bomb.yaml'), bomb);
    writeFileSync(join(dir, 'b-ok.yaml'), ok);
    const t0 = Date.now();
    const r = loadManifests([dir]);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(r.manifests.map((m) => m.metadata.name)).toEqual(['fine']);
    expect(r.problems).toEqual([expect.stringMatching(/a-bomb\.yaml: document 1: YAML: .*alias.*skipped/i)]);
  });

  it('a FIFO is never opened, a symlink loop and a link back to a folder neither hang nor lose the folder', () => {
    const dir = join(tmp, 'links');
    mkdirSync(join(dir, 'sub'), { recursive: true });
    writeFileSync(join(dir, 'ok.yaml'), ok);
    writeFileSync(join(dir, 'sub', 'more.yaml'), ok.replace('fine', 'also-fine'));
    execFileSync('mkfifo', [join(dir, 'pipe.yaml')]);
    symlinkSync('loop.yaml', join(dir, 'loop.yaml'));
    symlinkSync('..', join(dir, 'sub', 'up'));
    const r = loadManifests([dir]);
    expect(r.manifests.map((m) => m.metadata.name).sort()).toEqual(['also-fine', 'fine']);
    expect(r.problems.some((p) => /pipe\.yaml: not a regular file/.test(p))).toBe(true);
    expect(r.problems.some((p) => /loop\.yaml: cannot read: ELOOP/.test(p))).toBe(true);
    expect(r.problems.some((p) => /up: a link back to a folder already read/.test(p))).toBe(true);
  });

  it('an object defined twice is reported, not silently replaced', () => {
    const dir = join(tmp, 'dup');
    mkdirSync(dir);
    writeFileSync(join(dir, 'a.yaml'), ok);
    writeFileSync(join(dir, 'b.yaml'), ok);
    const r = loadManifests([dir]);
    expect(r.manifests).toHaveLength(1);
    expect(r.problems).toEqual([
      expect.stringMatching(
        /b\.yaml: document 1 \(Namespace fine\): defined again \(first at .*a\.yaml: document 1\)/,
      ),
    ]);
  });
});

describe('cascadectl on hostile input', () => {
  it('a tenant condition with exponential cost is refused at once, not evaluated for minutes', async () => {
    const dir = join(tmp, 'cel');
    cpSync(GW, dir, { recursive: true });
    let body = 'true';
    for (let i = 9; i >= 0; i--) body = `[0,1,2,3,4,5,6,7,8,9].all(x${i}, ${body})`;
    writeFileSync(
      join(dir, '99-costly.yaml'),
      `apiVersion: cascade.dev/v1alpha1
kind: RateLimitPolicy
metadata: {name: costly, namespace: team-b, creationTimestamp: "2026-03-01T00:00:00Z"}
spec:
  targetRef: {group: gateway.networking.k8s.io, kind: HTTPRoute, name: orders}
  defaults:
    condition: "${body}"
    limits: {x: {rates: [{limit: 1, window: 1m}]}}
`,
    );
    const t0 = Date.now();
    const r = await run('status', dir, '-o', 'json');
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(r.stdout + r.stderr).toMatch(/estimated cost .* exceeds the limit/);
  });

  it('diff exits 2 on an error and prints no partial result; 1 only for differences', async () => {
    const dir = join(tmp, 'diff-bad');
    cpSync(GW, dir, { recursive: true });
    writeFileSync(join(dir, 'zz-broken.yaml'), 'kind: [unclosed\n');
    const r = await run('diff', GW, '--after', dir);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/zz-broken\.yaml/);
    const same = await run('diff', GW, '--after', GW);
    expect(same.code).toBe(0);
  });
});
