// cascadectl report: one self-contained HTML page with the findings, status, effective policies and
// both pictures, and a search that filters every table. Opened in headless chromium: the search (from
// the URL) hides exactly the rows without every word, and the inline pictures are laid out at their
// size. Hostile values stay text.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildReport } from '../src/commands/report.ts';
import { browserTestsEnabled, dumpDom } from './browser.ts';
import { run } from './run.ts';
import { scaleManifests } from './scale-manifests.ts';

const EX = resolve(import.meta.dirname, '../../../examples');
const tmp = mkdtempSync(join(tmpdir(), 'cascadectl-report-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const enabled = browserTestsEnabled();

/** Body rows of the page's tables: their text and whether they are hidden. */
function rows(html: string): { text: string; hidden: boolean }[] {
  return [...html.matchAll(/<tbody>([\s\S]*?)<\/tbody>/g)].flatMap((t) =>
    [...t[1]!.matchAll(/<tr([^>]*)>([\s\S]*?)<\/tr>/g)].map((r) => ({
      hidden: /\bhidden\b/.test(r[1]!),
      text: r[2]!
        .replace(/<[^>]+>/g, '')
        .replace(/&lt;/g, '<')
        .replace(/&gt;/g, '>')
        .replace(/&quot;/g, '"')
        .replace(/&amp;/g, '&')
        .toLowerCase(),
    })),
  );
}

describe('cascadectl report', () => {
  it('writes the page and both pictures; the page has every section', async () => {
    const dir = join(tmp, 'story');
    const r = await run('report', join(EX, 'gateway'), join(EX, 'netpol'), '-o', dir);
    expect(r.code).toBe(0);
    const html = readFileSync(join(dir, 'index.html'), 'utf8');
    for (const id of ['findings', 'status', 'effective', 'hierarchy', 'grid'])
      expect(html).toContain(`<section id="${id}">`);
    expect(readFileSync(join(dir, 'hierarchy.svg'), 'utf8')).toMatch(/^<svg /);
    expect(readFileSync(join(dir, 'grid.svg'), 'utf8')).toMatch(/^<svg /);
    const all = rows(html);
    // the lint findings and effective rules of the story are rows of the page
    expect(all.some((x) => x.text.includes('ledger-from-shop') && x.text.includes('is dead'))).toBe(true);
    expect(
      all.some((x) => x.text.includes('team-b/orders > checkout') && x.text.includes('limits.per-user')),
    ).toBe(true);
    expect((await run('report', join(EX, 'gateway'))).code).toBe(2); // -o is required
  });

  it('hostile values stay text in the page', () => {
    const f = join(tmp, 'hostile.yaml');
    writeFileSync(
      f,
      `${readFileSync(join(EX, 'gateway/00-infra.yaml'), 'utf8')}\n---\n${readFileSync(join(EX, 'gateway/20-team-routes.yaml'), 'utf8')}\n---\n` +
        [
          'apiVersion: cascade.dev/v1alpha1',
          'kind: RateLimitPolicy',
          'metadata: { name: evil, namespace: team-a }',
          'spec:',
          '  targetRef: { group: gateway.networking.k8s.io, kind: HTTPRoute, name: catalog }',
          "  limits: { x: { rates: [{ limit: 1, window: 1s }], when: [{ predicate: \"'</script><img src=x onerror=alert(1)>' == ''\" }] } }",
        ].join('\n'),
    );
    const { html } = buildReport([f]);
    expect(html).not.toMatch(/<img/);
    expect(html.match(/<script>/g)).toHaveLength(1);
    expect(html).toContain('&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;');
  });
});

describe.runIf(enabled)('cascadectl report in headless chromium', () => {
  it('the search from the URL hides exactly the rows without every word; pictures are laid out', async () => {
    const dir = join(tmp, 'browser');
    await run('report', join(EX, 'gateway'), join(EX, 'netpol'), '-o', dir);
    const url = `file://${join(dir, 'index.html')}`;
    const plain = dumpDom(url);
    expect(rows(plain).every((r) => !r.hidden)).toBe(true);
    const [, shownAll] = /data-shown="(\d+)\/(\d+)"/.exec(plain)!.slice(1);
    expect(Number(shownAll)).toBe(rows(plain).length);
    const dom = dumpDom(`${url}#q=${encodeURIComponent('team-b LIMITS')}`);
    const after = rows(dom);
    expect(after.length).toBeGreaterThan(10);
    for (const r of after)
      expect(r.hidden, r.text).toBe(!(r.text.includes('team-b') && r.text.includes('limits')));
    const visible = after.filter((r) => !r.hidden).length;
    expect(visible).toBeGreaterThan(0);
    expect(dom).toContain(`data-shown="${visible}/${after.length}"`);
    // both inline SVGs have their own size in the page (rendered, not broken)
    const sizes = /data-pictures="([^"]*)"/.exec(dom)![1]!.split(',');
    const svgSizes = [
      ...readFileSync(join(dir, 'index.html'), 'utf8').matchAll(/<svg [^>]*width="(\d+)" height="(\d+)"/g),
    ].map((m) => `${m[1]}x${m[2]}`);
    expect(sizes).toEqual(svgSizes);
  });

  it('at 1,000 routes the page opens and searches', () => {
    const f = join(tmp, 'scale.yaml');
    writeFileSync(f, scaleManifests(1000));
    const { html, svgs } = buildReport([f]);
    writeFileSync(join(tmp, 'scale.html'), html);
    expect(Object.keys(svgs)).toEqual(['hierarchy.svg']);
    const dom = dumpDom(`file://${join(tmp, 'scale.html')}#q=route-70%20per-route`);
    const after = rows(dom);
    expect(after.length).toBeGreaterThan(4000);
    const visible = after.filter((r) => !r.hidden);
    expect(visible.length).toBeGreaterThan(0);
    expect(visible.every((r) => r.text.includes('route-70') && r.text.includes('per-route'))).toBe(true);
  });
});
