// cascadectl graph: the SVG is rendered by a real browser (headless chromium) and its pixels are
// checked where the layout says each policy badge and matrix cell is. Expectations come from the
// example story and the policy semantics (the oracle), not from the picture.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { oracleConnection } from '@cascade/netpolicy';
import { afterAll, describe, expect, it } from 'vitest';
import { pictureOf } from '../src/commands/graph.ts';
import { loadNetpol, portsInUse } from '../src/commands/netpol.ts';
import { CELL_COLORS, type CellState, PILL_COLORS, type Picture } from '../src/graph/svg.ts';
import { browserTestsEnabled, hex, type Image, near, pixel, screenshot } from './browser.ts';
import { run } from './run.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../../examples');
const GW = join(EXAMPLES, 'gateway');
const NP = join(EXAMPLES, 'netpol');
const tmp = mkdtempSync(join(tmpdir(), 'cascadectl-graph-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const enabled = browserTestsEnabled();

/** Mismatches between the rendered image and what the layout promises. */
function checkPicture(img: Image, p: Picture): string[] {
  const bad: string[] = [];
  if (img.width !== p.width || img.height !== p.height)
    bad.push(`image is ${img.width}x${img.height}, picture ${p.width}x${p.height}`);
  for (const pill of p.pills) {
    const want = hex(PILL_COLORS[pill.style].badge);
    const y = pill.badge.y + pill.badge.h / 2;
    for (const x of [pill.badge.x + 2, pill.badge.x + pill.badge.w - 2]) {
      const got = pixel(img, x, y);
      if (!near(got, want))
        bad.push(`${pill.style} badge of ${pill.policy} at ${x},${y}: ${got} not ${want}`);
    }
  }
  for (const c of p.cells) {
    const want = hex(CELL_COLORS[c.state]);
    const got = pixel(img, c.x + c.w / 2, c.y + c.h / 2);
    if (!near(got, want)) bad.push(`cell ${c.from} -> ${c.to} (${c.state}): ${got} not ${want}`);
  }
  return bad;
}

function render(name: string, svg: string, p: Picture): Image {
  const f = join(tmp, `${name}.svg`);
  writeFileSync(f, svg);
  return screenshot(f, p.width, p.height);
}

describe.runIf(enabled)('cascadectl graph, looked at in headless chromium', () => {
  it('draws every policy where it attaches, each block in its own style', () => {
    const { picture } = pictureOf([GW], 'all');
    const p = picture!;
    const attachments = p.pills.map((x) => `${x.target} ${x.policy} ${x.style}`).sort();
    expect(attachments).toEqual(
      [
        'Gateway:infra/main AuthPolicy infra/platform-auth default',
        'Gateway:infra/main AuthPolicy infra/platform-auth override',
        'Gateway:infra/main RateLimitPolicy infra/platform-limits default',
        'Gateway:infra/main RateLimitPolicy infra/platform-cap constraint',
        'HTTPRoute:team-a/catalog AuthPolicy team-a/catalog-jwt intent',
        'HTTPRoute:team-b/orders RateLimitPolicy team-b/orders-per-user intent',
        'HTTPRoute:team-c/status RateLimitPolicy team-c/status-unlimited unset',
        'HTTPRoute:team-d/admin AuthPolicy team-d/admin-open intent',
        'HTTPRoute:team-d/admin AuthPolicy team-d/admin-open unset',
      ].sort(),
    );
    expect(p.unattached).toEqual([]);
    const img = render('gateway', p.svg, p);
    expect(checkPicture(img, p)).toEqual([]);
  });

  it('colors each matrix cell as the policy oracle judges the pair over the ports in use', () => {
    const { picture } = pictureOf([NP], 'all');
    const p = picture!;
    const { engine } = loadNetpol([NP]);
    const ports = portsInUse(engine);
    const ipOf = (name: string) => engine.pods.get(name)!.ips[0]!;
    expect(p.cells).toHaveLength(engine.pods.size ** 2);
    const states = new Set<CellState>();
    for (const c of p.cells) {
      let want: CellState = 'self';
      if (c.from !== c.to) {
        const allowed = ports.filter(
          ([proto, port]) =>
            oracleConnection(engine, ipOf(c.from), ipOf(c.to), proto, port).verdict === 'allow',
        ).length;
        want = allowed === ports.length ? 'allow' : allowed === 0 ? 'deny' : 'mixed';
      }
      expect(c.state, `${c.from} -> ${c.to}`).toBe(want);
      states.add(want);
    }
    // The story has all four kinds of cells.
    expect([...states].sort()).toEqual(['allow', 'deny', 'mixed', 'self']);
    const img = render('netpol', p.svg, p);
    expect(checkPicture(img, p)).toEqual([]);
  });

  it('both pictures stacked in one SVG, written by the command', async () => {
    const out = join(tmp, 'all.svg');
    const r = await run('graph', GW, NP, '-o', out);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/wrote .*all\.svg \(\d+x\d+: 9 policy attachments, 25 matrix cells\)/);
    const { picture } = pictureOf([GW, NP], 'all');
    expect(readFileSync(out, 'utf8')).toBe(picture!.svg);
    const img = screenshot(out, picture!.width, picture!.height);
    expect(checkPicture(img, picture!)).toEqual([]);
  });

  it('a broken picture fails the check (so the check can fail)', () => {
    const { picture } = pictureOf([GW, NP], 'all');
    const p = picture!;
    // Malformed XML: the browser shows a parse error instead of the picture.
    expect(checkPicture(render('broken', p.svg.replace('</svg>', ''), p), p).length).toBeGreaterThan(10);
    // Colors swapped: every allowed cell is now red.
    const swapped = p.svg.replaceAll(`fill="${CELL_COLORS.allow}"`, `fill="${CELL_COLORS.deny}"`);
    const bad = checkPicture(render('swapped', swapped, p), p);
    expect(bad.length).toBeGreaterThan(0);
    expect(bad.every((b) => b.includes('(allow)'))).toBe(true);
  });
});

describe('cascadectl graph usage', () => {
  it('lists a policy whose target does not exist under "Not attached"', async () => {
    const f = join(tmp, 'orphan.yaml');
    writeFileSync(
      f,
      `${readFileSync(join(GW, '00-infra.yaml'), 'utf8')}\n---\n${readFileSync(join(GW, '20-team-routes.yaml'), 'utf8')}\n---\n` +
        [
          'apiVersion: cascade.dev/v1alpha1',
          'kind: RateLimitPolicy',
          'metadata: { name: lost, namespace: team-a }',
          'spec:',
          '  targetRef: { group: gateway.networking.k8s.io, kind: HTTPRoute, name: nowhere }',
          '  limits: { x: { rates: [{ limit: 1, window: 1s }] } }',
        ].join('\n'),
    );
    const { picture } = pictureOf([f], 'gateway');
    expect(picture!.unattached).toEqual([
      {
        policy: 'RateLimitPolicy team-a/lost',
        why: 'target HTTPRoute:team-a/nowhere is not found or has no attached route',
      },
    ]);
    expect(picture!.svg).toContain('Not attached');
  });

  it('escapes names in the SVG and rejects bad flags with exit 2', async () => {
    expect((await run('graph')).code).toBe(2);
    expect((await run('graph', GW, '-o', join(tmp, 'x.png'))).code).toBe(2);
    expect((await run('graph', GW, '--view', 'nope')).code).toBe(2);
    const r = await run('graph', GW, '--view', 'gateway');
    expect(r.code).toBe(0);
    expect(r.stdout.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(r.stdout).not.toMatch(/&(?!amp;|lt;|gt;|quot;)/);
  });
});
