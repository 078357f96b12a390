import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { buildImage, LayerCache, tar, withParents } from './oci.ts';

const spec = () => ({
  ref: 'cascade.local/test:1',
  layers: [
    [
      { path: 'etc/passwd', type: 'file' as const, data: Buffer.from('root:x:0:0::/:/bin/false\n') },
      { path: `deep/${'x'.repeat(120)}/file.txt`, type: 'file' as const, data: Buffer.from('long name') },
      { path: 'usr/bin/tool', type: 'file' as const, data: Buffer.from('#!/bin/true\n'), mode: 0o755 },
      { path: 'bin', type: 'symlink' as const, target: 'usr/bin' },
    ],
  ],
  entrypoint: ['/usr/bin/tool'],
});

describe('OCI image archives', () => {
  it('are reproducible: the same inputs give the same bytes and digest', () => {
    const a = buildImage(spec());
    const b = buildImage(spec());
    expect(a.digest).toBe(b.digest);
    expect(a.archive.equals(b.archive)).toBe(true);
  });

  it('a layer cache on disk gives the same image as none, and a damaged cached layer is replaced, never used', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cascade-layers-'));
    try {
      const plain = buildImage(spec());
      expect(buildImage(spec(), new LayerCache(dir)).digest).toBe(plain.digest);
      const [cached] = readdirSync(dir);
      expect(cached).toMatch(/^[0-9a-f]{64}-zlib.*\.gz$/);
      // a second process reads it back: same bytes
      expect(buildImage(spec(), new LayerCache(dir)).archive.equals(plain.archive)).toBe(true);
      writeFileSync(join(dir, cached!), Buffer.from('not gzip'));
      expect(buildImage(spec(), new LayerCache(dir)).archive.equals(plain.archive)).toBe(true);
      expect(gunzipSync(readFileSync(join(dir, cached!))).length).toBeGreaterThan(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('GNU tar reads the layers: long names, symlinks, modes, parents', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cascade-oci-'));
    try {
      writeFileSync(join(dir, 'layer.tar'), tar(withParents(spec().layers[0]!)));
      const listing = execFileSync('tar', ['-tvf', join(dir, 'layer.tar')]).toString();
      expect(listing).toMatch(/-rwxr-xr-x root\/root\s+12 1970-01-01 00:00 usr\/bin\/tool/);
      expect(listing).toContain(`deep/${'x'.repeat(120)}/file.txt`);
      expect(listing).toMatch(/bin -> usr\/bin/);
      execFileSync('tar', ['-xf', join(dir, 'layer.tar'), '-C', dir]);
      expect(readFileSync(join(dir, 'deep', 'x'.repeat(120), 'file.txt'), 'utf8')).toBe('long name');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is an OCI layout whose manifest, config and layer digests check out', () => {
    const img = buildImage(spec());
    const dir = mkdtempSync(join(tmpdir(), 'cascade-oci-'));
    try {
      writeFileSync(join(dir, 'img.tar'), img.archive);
      execFileSync('tar', ['-xf', join(dir, 'img.tar'), '-C', dir]);
      const blob = (d: string) => readFileSync(join(dir, 'blobs/sha256', d.slice(7)));
      const index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8'));
      expect(index.manifests[0].annotations['io.containerd.image.name']).toBe('cascade.local/test:1');
      const manifest = JSON.parse(blob(index.manifests[0].digest).toString());
      const config = JSON.parse(blob(manifest.config.digest).toString());
      expect(config.config).toMatchObject({ User: '65532:65532', Entrypoint: ['/usr/bin/tool'] });
      const layer = blob(manifest.layers[0].digest);
      expect(`sha256:${createHash('sha256').update(gunzipSync(layer)).digest('hex')}`).toBe(
        config.rootfs.diff_ids[0],
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
