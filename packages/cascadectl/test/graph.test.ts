// cascadectl graph: the SVG is rendered by a real browser (headless chromium) and its pixels are
// checked where the layout says each policy badge and matrix cell is. Expectations come from the
// example story and the policy semantics (the oracle), not from the picture.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { oracleConnection, PROTO } from '@cascade/netpolicy';
import { afterAll, describe, expect, it } from 'vitest';
import { pictureOf } from '../src/commands/graph.ts';
import { loadNetpol, portsInUse } from '../src/commands/netpol.ts';
import {
  CELL_COLORS,
  type CellState,
  CHAR,
  EFFECTIVE_BADGE,
  OVERRIDDEN,
  PILL_COLORS,
  type Picture,
  REFUSED_BADGE,
  wrapText,
} from '../src/graph/svg.ts';
import { browserTestsEnabled, hex, type Image, near, pixel, screenshot } from './browser.ts';
import { run } from './run.ts';
import { scaleManifests } from './scale-manifests.ts';

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
    const want = hex(pill.state === 'overridden' ? OVERRIDDEN.badge : PILL_COLORS[pill.style].badge);
    const y = pill.badge.y + pill.badge.h / 2;
    for (const x of [pill.badge.x + 2, pill.badge.x + pill.badge.w - 2]) {
      const got = pixel(img, x, y);
      if (!near(got, want))
        bad.push(`${pill.style} badge of ${pill.policy} at ${x},${y}: ${got} not ${want}`);
    }
  }
  for (const m of p.marks) {
    const want = hex(m.kind === 'refused' ? REFUSED_BADGE : EFFECTIVE_BADGE);
    const got = pixel(img, m.x + 3, m.y + m.h / 2);
    if (!near(got, want)) bad.push(`${m.kind} mark at ${m.target} (${m.text}): ${got} not ${want}`);
  }
  for (const c of p.cells) {
    // the corner: the glyph is in the middle
    const want = hex(CELL_COLORS[c.state]);
    const got = pixel(img, c.x + 4, c.y + 4);
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
    // team-b's per-user limit loses to the platform cap's constraint on every path: drawn overridden
    expect(p.pills.filter((x) => x.state === 'overridden').map((x) => `${x.policy} ${x.style}`)).toEqual([
      'RateLimitPolicy team-b/orders-per-user intent',
    ]);
    // the effective result at each rule, and team-d's refused unset of the platform override
    const marks = p.marks.filter((m) => m.target === 'HTTPRoute:team-d/admin#rule-1');
    expect(marks.filter((m) => m.kind === 'refused').map((m) => m.text)).toEqual([
      'AP unset of authorization.deny-anonymous by team-d/admin-open refused: an override of infra/platform-auth',
    ]);
    expect(marks.filter((m) => m.kind === 'effective').map((m) => m.text.split(' = ')[0])).toEqual([
      'AP authentication.anonymous',
      'AP authentication.primary',
      'AP authorization.deny-anonymous',
      'RLP limits.global',
    ]);
    expect(p.marks.find((m) => m.text.startsWith('RLP limits.per-user'))?.text).toMatch(
      /from infra\/platform-cap \(override\)$/,
    );
    const img = render('gateway', p.svg, p);
    expect(checkPicture(img, p)).toEqual([]);
  });

  it('colors each grid cell as the policy oracle judges the pair over the ports the destination serves', () => {
    // the story, with the ledger also serving metrics to prometheus: some pairs are allowed on some ports
    const dir = join(tmp, 'served');
    cpSync(NP, dir, { recursive: true });
    const cluster = join(dir, '00-cluster.yaml');
    writeFileSync(
      cluster,
      readFileSync(cluster, 'utf8').replace(
        'ports: [{ name: grpc, containerPort: 7443 }]',
        'ports: [{ name: grpc, containerPort: 7443 }, { name: metrics, containerPort: 9090 }]',
      ),
    );
    const { picture } = pictureOf([dir], 'all');
    const p = picture!;
    const { engine } = loadNetpol([dir]);
    const inUse = portsInUse(engine);
    const ipOf = (name: string) => engine.pods.get(name)!.ips[0]!;
    const served = (name: string) => {
      const pod = engine.pods.get(name)!;
      return pod.ports.length
        ? pod.ports.map((cp) => [PROTO[cp.protocol], cp.port] as [number, number])
        : inUse;
    };
    expect(p.cells).toHaveLength(engine.pods.size ** 2);
    const states = new Set<CellState>();
    for (const c of p.cells) {
      let want: CellState = 'self';
      if (c.from !== c.to) {
        const ports = served(c.to);
        const allowed = ports.filter(
          ([proto, port]) =>
            oracleConnection(engine, ipOf(c.from), ipOf(c.to), proto, port).verdict === 'allow',
        ).length;
        want = allowed === ports.length ? 'allow' : allowed === 0 ? 'deny' : 'mixed';
      }
      expect(c.state, `${c.from} -> ${c.to}`).toBe(want);
      states.add(want);
    }
    // The story has all four kinds of cells; each mixed cell's ports are written under the grid.
    expect([...states].sort()).toEqual(['allow', 'deny', 'mixed', 'self']);
    for (const c of p.cells.filter((x) => x.state === 'mixed'))
      expect(p.svg).toMatch(
        new RegExp(`${c.note}\\. ${c.from} -&gt; ${c.to}: allowed TCP/\\d+; denied TCP/\\d+`),
      );
    expect(p.svg).toContain('monitoring/prometheus -&gt; payments/ledger: allowed TCP/9090; denied TCP/7443');
    const img = render('netpol', p.svg, p);
    expect(checkPicture(img, p)).toEqual([]);
  });

  it('both pictures stacked in one SVG, written by the command', async () => {
    const out = join(tmp, 'all.svg');
    const r = await run('graph', GW, NP, '-o', out);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(
      /wrote .*all\.svg \(\d+x\d+: 9 policy attachments, \d+ effective rules and refused unsets, 25 grid cells\)/,
    );
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

describe.runIf(enabled)('cascadectl graph at scale (1,000 routes)', () => {
  const file = join(tmp, 'scale.yaml');
  writeFileSync(file, scaleManifests(1000));
  it('identical routes are drawn once, none is lost, and the filters give a small readable page', () => {
    const all = pictureOf([file], 'gateway', {}).picture!;
    const full = pictureOf([file], 'gateway', { collapse: false }).picture!;
    // 900 routes without their own policy, on two listeners: two dashed boxes
    expect(all.collapsed.map((c) => c.routes.length).sort((a, b) => a - b)).toEqual([200, 700]);
    const drawn = new Set(all.svg.match(/HTTPRoute team-\d+\/route-\d+/g));
    const members = all.collapsed.flatMap((c) => c.routes);
    const covered = new Set([...[...drawn].map((d) => d.slice('HTTPRoute '.length)), ...members]);
    expect(covered.size).toBe(1000);
    expect(all.height).toBeLessThan(full.height / 10);
    const one = pictureOf([file], 'gateway', { namespace: 'team-7' }).picture!;
    expect(one.collapsed).toEqual([{ route: 'HTTPRoute:team-7/route-7', routes: expect.any(Array) }]);
    expect(one.collapsed[0]!.routes).toHaveLength(20);
    expect(one.height).toBeLessThan(400);
    expect(checkPicture(render('team-7', one.svg, one), one)).toEqual([]);
    const gold = pictureOf([file], 'gateway', { selector: 'tier=gold', route: 'team-0/route-0' }).picture!;
    expect(gold.pills.map((x) => x.policy)).toContain('RateLimitPolicy team-0/route-0-limits');
    expect(gold.svg).not.toMatch(/route-3\b/);
  });
});

describe('wrapText', () => {
  it('breaks text into lines that fit, at spaces and then inside long names, cutting nothing', () => {
    const texts = [
      'AP infra/platform-auth: authorization.deny-anonymous',
      'RLP a-very-long-namespace-name-for-a-team/a-policy-with-an-even-longer-name: limits.per-route, limits.global',
      'x'.repeat(200),
      '',
    ];
    for (const text of texts)
      for (const px of [60, 150, 300]) {
        const lines = wrapText(text, px);
        const max = Math.max(4, Math.floor(px / CHAR));
        for (const l of lines) expect(l.length, `${text} @${px}: "${l}"`).toBeLessThanOrEqual(max);
        expect(lines.join('').replace(/\s/g, '')).toBe(text.replace(/\s/g, ''));
      }
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

  it('-o creates the folder; a path that cannot be written is one clear line and exit 2', async () => {
    const deep = join(tmp, 'new', 'folder', 'g.svg');
    expect((await run('graph', GW, '-o', deep)).code).toBe(0);
    expect(readFileSync(deep, 'utf8')).toMatch(/^<svg /);
    writeFileSync(join(tmp, 'afile'), '');
    const r = await run('graph', GW, '-o', join(tmp, 'afile', 'g.svg'));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/cascadectl graph: cannot write .*afile\/g\.svg: /);
    expect(r.stderr).not.toMatch(/internal error/);
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
