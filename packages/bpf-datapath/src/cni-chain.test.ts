// cascade-cni chained into and out of a node's CNI configuration, on real files.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { chainCni, chained, unchainCni } from './cni-chain.ts';

const bridge = { type: 'bridge', bridge: 'cni0', ipam: { type: 'host-local' } };
const conflist = (...plugins: unknown[]) =>
  `${JSON.stringify({ cniVersion: '1.0.0', name: 'k8s', plugins }, null, 2)}\n`;
const entry = {
  pinDir: '/sys/fs/bpf/cascade',
  recordDir: '/run/cascade/cni',
  exemptNamespace: 'cascade-system',
};
const dir = () => mkdtempSync(join(tmpdir(), 'cni-chain-'));

describe('cascade-cni in the CNI chain', () => {
  it('chains after the main plugin of the first .conflist, once, keeping every other field', () => {
    const d = dir();
    writeFileSync(join(d, '10-main.conflist'), conflist(bridge, { type: 'portmap' }));
    writeFileSync(join(d, '20-other.conflist'), conflist(bridge));
    expect(chainCni(d, entry)).toBe(join(d, '10-main.conflist'));
    chainCni(d, { ...entry, exemptNamespace: 'other' });
    const c = JSON.parse(readFileSync(join(d, '10-main.conflist'), 'utf8'));
    expect(c).toMatchObject({ cniVersion: '1.0.0', name: 'k8s' });
    expect(c.plugins).toEqual([
      bridge,
      { type: 'portmap' },
      { type: 'cascade-cni', ...entry, exemptNamespace: 'other' },
    ]);
    expect(readFileSync(join(d, '20-other.conflist'), 'utf8')).toBe(conflist(bridge));
  });

  it('takes it out of every .conflist, and leaves files without it untouched', () => {
    const d = dir();
    writeFileSync(join(d, '10-main.conflist'), conflist(bridge, { type: 'cascade-cni', ...entry }));
    writeFileSync(join(d, '20-b.conflist'), conflist(bridge, { type: 'cascade-cni' }, { type: 'portmap' }));
    writeFileSync(join(d, '30-c.conflist'), conflist(bridge));
    const r = unchainCni(d);
    expect(r).toEqual({ changed: [join(d, '10-main.conflist'), join(d, '20-b.conflist')], failed: [] });
    expect(JSON.parse(readFileSync(join(d, '10-main.conflist'), 'utf8')).plugins).toEqual([bridge]);
    expect(JSON.parse(readFileSync(join(d, '20-b.conflist'), 'utf8')).plugins).toEqual([
      bridge,
      { type: 'portmap' },
    ]);
    expect(unchainCni(d).changed).toEqual([]);
  });

  it('refuses what it cannot chain into, naming the file', () => {
    const d = dir();
    expect(() => chainCni(d, entry)).toThrow(/no CNI configuration/);
    writeFileSync(join(d, '05-single.conf'), JSON.stringify(bridge));
    writeFileSync(join(d, '10-main.conflist'), conflist(bridge));
    expect(() => chainCni(d, entry)).toThrow(
      /05-single.conf: the runtime uses this single-plugin configuration/,
    );
    expect(() => chained('x.conflist', '{"plugins": [{"type": "cascade-cni"}]}', entry)).toThrow(
      /x.conflist: no main plugin/,
    );
    expect(() => chained('y.conflist', 'not json', entry)).toThrow(/y.conflist: not JSON/);
  });

  it('a broken file is named and skipped at uninstall; the others are still cleaned', () => {
    const d = dir();
    writeFileSync(join(d, '10-bad.conflist'), '{');
    writeFileSync(join(d, '20-ok.conflist'), conflist(bridge, { type: 'cascade-cni' }));
    const r = unchainCni(d);
    expect(r.changed).toEqual([join(d, '20-ok.conflist')]);
    expect(r.failed[0]).toMatch(/10-bad.conflist: not JSON/);
    expect(unchainCni(join(d, 'missing')).failed[0]).toMatch(/missing/);
    mkdirSync(join(d, 'sub.conflist'));
    expect(unchainCni(d).failed.some((f) => f.includes('sub.conflist'))).toBe(true);
  });
});
