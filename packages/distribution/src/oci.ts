// Offline OCI image archives, without a container daemon: deterministic tar layers (sorted paths,
// mtime 0, uid/gid 0, normalised modes), gzip with a zero mtime, an image config, a manifest and an
// OCI image layout (oci-layout, index.json, blobs/sha256/*) written as one tar that
// `ctr images import` and `skopeo` read. Same inputs give the same bytes, so the same digest.
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';

export type Entry =
  | { path: string; type: 'dir'; mode?: number }
  | { path: string; type: 'file'; data: Buffer; mode?: number }
  | { path: string; type: 'symlink'; target: string };

const BLOCK = 512;

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

function header(name: string, size: number, type: string, mode: number, linkname = ''): Buffer {
  const b = Buffer.alloc(BLOCK);
  b.write(name, 0, 100, 'utf8');
  b.write(octal(mode, 8), 100, 8, 'ascii');
  b.write(octal(0, 8), 108, 8, 'ascii');
  b.write(octal(0, 8), 116, 8, 'ascii');
  b.write(octal(size, 12), 124, 12, 'ascii');
  b.write(octal(0, 12), 136, 12, 'ascii');
  b.write('        ', 148, 8, 'ascii');
  b.write(type, 156, 1, 'ascii');
  b.write(linkname, 157, 100, 'utf8');
  b.write('ustar\0', 257, 6, 'ascii');
  b.write('00', 263, 2, 'ascii');
  b.write('root', 265, 32, 'ascii');
  b.write('root', 297, 32, 'ascii');
  let sum = 0;
  for (const byte of b) sum += byte;
  b.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'ascii');
  return b;
}

function pad(data: Buffer): Buffer[] {
  const rest = data.length % BLOCK;
  return rest ? [data, Buffer.alloc(BLOCK - rest)] : [data];
}

/** A PAX record `LEN key=value\n`, where LEN counts the whole record including itself. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(body) + 1;
  while (String(len).length + Buffer.byteLength(body) !== len)
    len = String(len).length + Buffer.byteLength(body);
  return `${len}${body}`;
}

/** A tar stream of the entries, sorted by path; names or link targets past 100 bytes get PAX records. */
export function tar(entries: Entry[]): Buffer {
  const parts: Buffer[] = [];
  const sorted = [...entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const seen = new Set<string>();
  for (const e of sorted) {
    const path = e.path.replace(/^\/+/, '') + (e.type === 'dir' ? '/' : '');
    if (!path || path === '/') continue;
    if (seen.has(path)) throw new Error(`tar: duplicate path ${path}`);
    seen.add(path);
    const link = e.type === 'symlink' ? e.target : '';
    if (Buffer.byteLength(path) > 100 || Buffer.byteLength(link) > 100) {
      const pax = Buffer.from(
        (Buffer.byteLength(path) > 100 ? paxRecord('path', path) : '') +
          (Buffer.byteLength(link) > 100 ? paxRecord('linkpath', link) : ''),
      );
      parts.push(header('PaxHeader', pax.length, 'x', 0o644), ...pad(pax));
    }
    const name = path.slice(0, 100);
    if (e.type === 'dir') parts.push(header(name, 0, '5', e.mode ?? 0o755));
    else if (e.type === 'symlink') parts.push(header(name, 0, '2', 0o777, link.slice(0, 100)));
    else parts.push(header(name, e.data.length, '0', e.mode ?? 0o644), ...pad(e.data));
  }
  parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}

/** Every parent directory of the entries' paths, as dir entries (tar readers want them first). */
export function withParents(entries: Entry[]): Entry[] {
  const have = new Set(entries.map((e) => e.path.replace(/^\/+|\/+$/g, '')));
  const extra: Entry[] = [];
  for (const e of entries) {
    const parts = e.path.replace(/^\/+|\/+$/g, '').split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      if (!have.has(dir)) {
        have.add(dir);
        extra.push({ path: dir, type: 'dir' });
      }
    }
  }
  return [...extra, ...entries];
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

export interface Blob {
  digest: string;
  size: number;
  data: Buffer;
}
const blob = (data: Buffer): Blob => ({ digest: `sha256:${sha256(data)}`, size: data.length, data });

export interface ImageSpec {
  /** Full reference, e.g. cascade.local/authpolicy-controller:0.1.0 */
  ref: string;
  layers: Entry[][];
  entrypoint: string[];
  /** default arguments (a container without args of its own gets these) */
  cmd?: string[];
  env?: string[];
  user?: string;
  workingDir?: string;
  labels?: Record<string, string>;
}

export interface BuiltImage {
  ref: string;
  /** The manifest digest: what `crictl images --digests` and a pod's imageID show. */
  digest: string;
  archive: Buffer;
  /** Compressed bytes of all layers (what a registry would ship). */
  compressedSize: number;
  /** Uncompressed bytes of all layers (what the image takes on disk, unpacked). */
  unpackedSize: number;
}

function json(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value));
}

/**
 * Compressed layers by their uncompressed digest (diff id), zlib's version and level: gzip is most of
 * an image's build time, and every Node image shares its base layer. In memory for one process, and
 * on disk when `dir` is given (a second build of unchanged inputs compresses nothing). The bytes are
 * those gzipSync gives for that input, so digests stay what a build without the cache gives.
 */
export class LayerCache {
  private readonly mem = new Map<string, Blob>();
  private readonly dir: string | undefined;
  constructor(dir?: string) {
    this.dir = dir;
  }

  compressed(raw: Buffer, diffId: string): Blob {
    const key = `${diffId.slice(7)}-zlib${process.versions.zlib}-6`;
    const hit = this.mem.get(key);
    if (hit) return hit;
    const path = this.dir && join(this.dir, `${key}.gz`);
    let b: Blob | undefined;
    if (path && existsSync(path)) {
      // a file that does not unpack to this layer (damaged, cut short) is replaced, never used
      const data = readFileSync(path);
      try {
        if (sha256(gunzipSync(data)) === diffId.slice(7)) b = blob(data);
      } catch {}
      if (b) utimesSync(path, new Date(), new Date()); // in use: kept by prune
    }
    if (!b) {
      b = blob(gzipSync(raw, { level: 6 }));
      if (path && this.dir) {
        mkdirSync(this.dir, { recursive: true });
        writeFileSync(`${path}.tmp`, b.data);
        renameSync(`${path}.tmp`, path);
      }
    }
    this.mem.set(key, b);
    return b;
  }

  /** Removes the layers no build used for `days` days: the directory holds what builds still need. */
  prune(days = 3): void {
    if (!this.dir || !existsSync(this.dir)) return;
    const before = Date.now() - days * 86_400_000;
    for (const f of readdirSync(this.dir)) {
      const p = join(this.dir, f);
      if (statSync(p).mtimeMs < before) rmSync(p, { force: true });
    }
  }
}

/** A layer's tar and digest by its entries array: images sharing a base layer's array pack it once. */
const packed = new WeakMap<Entry[], { raw: Buffer; diffId: string }>();
function pack(entries: Entry[]): { raw: Buffer; diffId: string } {
  let p = packed.get(entries);
  if (!p) {
    const raw = tar(withParents(entries));
    p = { raw, diffId: `sha256:${sha256(raw)}` };
    packed.set(entries, p);
  }
  return p;
}

export function buildImage(spec: ImageSpec, layers = new LayerCache()): BuiltImage {
  const layerBlobs: Blob[] = [];
  const diffIds: string[] = [];
  let unpackedSize = 0;
  for (const entries of spec.layers) {
    const { raw, diffId } = pack(entries);
    unpackedSize += raw.length;
    diffIds.push(diffId);
    layerBlobs.push(layers.compressed(raw, diffId));
  }
  const config = blob(
    json({
      architecture: 'amd64',
      os: 'linux',
      created: '1970-01-01T00:00:00Z',
      config: {
        User: spec.user ?? '65532:65532',
        Entrypoint: spec.entrypoint,
        ...(spec.cmd ? { Cmd: spec.cmd } : {}),
        Env: spec.env ?? ['PATH=/usr/local/bin:/usr/bin:/bin'],
        WorkingDir: spec.workingDir ?? '/',
        Labels: spec.labels ?? {},
      },
      rootfs: { type: 'layers', diff_ids: diffIds },
    }),
  );
  const manifest = blob(
    json({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: {
        mediaType: 'application/vnd.oci.image.config.v1+json',
        digest: config.digest,
        size: config.size,
      },
      layers: layerBlobs.map((l) => ({
        mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
        digest: l.digest,
        size: l.size,
      })),
    }),
  );
  const tag = spec.ref.slice(spec.ref.lastIndexOf(':') + 1);
  const index = json({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.index.v1+json',
    manifests: [
      {
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        digest: manifest.digest,
        size: manifest.size,
        platform: { architecture: 'amd64', os: 'linux' },
        annotations: { 'io.containerd.image.name': spec.ref, 'org.opencontainers.image.ref.name': tag },
      },
    ],
  });
  const blobs = [config, manifest, ...layerBlobs];
  const archive = tar([
    { path: 'oci-layout', type: 'file', data: json({ imageLayoutVersion: '1.0.0' }) },
    { path: 'index.json', type: 'file', data: index },
    { path: 'blobs', type: 'dir' },
    { path: 'blobs/sha256', type: 'dir' },
    ...blobs
      .filter((b, i) => blobs.findIndex((o) => o.digest === b.digest) === i)
      .map((b): Entry => ({ path: `blobs/sha256/${b.digest.slice(7)}`, type: 'file', data: b.data })),
  ]);
  return {
    ref: spec.ref,
    digest: manifest.digest,
    archive,
    compressedSize: layerBlobs.reduce((n, l) => n + l.size, 0),
    unpackedSize,
  };
}
