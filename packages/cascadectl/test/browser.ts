// A real browser for the picture tests: Debian's chromium, headless, one screenshot per SVG, and a
// small PNG reader (8-bit RGB/RGBA, non-interlaced: what chromium writes) to look at pixels.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inflateSync } from 'node:zlib';

export function findChromium(): string | undefined {
  for (const c of ['chromium', 'chromium-browser', 'google-chrome']) {
    const r = spawnSync('sh', ['-c', `command -v ${c}`], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim()) return r.stdout.trim();
  }
  return undefined;
}

/** With CI=true a missing browser is a failure (the picture must really be looked at). */
export function browserTestsEnabled(): boolean {
  const found = findChromium() !== undefined;
  if (!found && process.env.CI === 'true')
    throw new Error(
      'chromium is not installed: scripts/setup.d/12-chromium.sh installs it (CI=true: not skipping)',
    );
  return found;
}

export interface Image {
  width: number;
  height: number;
  /** RGBA, 4 bytes per pixel. */
  data: Uint8Array;
}

export function screenshot(svgPath: string, width: number, height: number): Image {
  const dir = mkdtempSync(join(tmpdir(), 'cascade-shot-'));
  try {
    const png = join(dir, 'shot.png');
    const r = spawnSync(
      findChromium()!,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--hide-scrollbars',
        '--force-device-scale-factor=1',
        `--user-data-dir=${join(dir, 'profile')}`,
        `--window-size=${width},${height}`,
        `--screenshot=${png}`,
        `file://${svgPath}`,
      ],
      { encoding: 'utf8', timeout: 90_000 },
    );
    if (r.status !== 0) throw new Error(`chromium exited ${r.status}: ${r.stderr.slice(-500)}`);
    return decodePng(readFileSync(png));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The DOM of a page after its scripts ran (chromium --dump-dom). */
export function dumpDom(url: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'cascade-dom-'));
  try {
    const r = spawnSync(
      findChromium()!,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        `--user-data-dir=${join(dir, 'profile')}`,
        '--dump-dom',
        url,
      ],
      { encoding: 'utf8', timeout: 90_000, maxBuffer: 1 << 28 },
    );
    if (r.status !== 0) throw new Error(`chromium exited ${r.status}: ${r.stderr.slice(-500)}`);
    return r.stdout;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function decodePng(buf: Buffer): Image {
  if (buf.readUInt32BE(0) !== 0x89504e47) throw new Error('not a PNG');
  let off = 8;
  let width = 0;
  let height = 0;
  let colorType = 0;
  const idat: Buffer[] = [];
  while (off < buf.length) {
    const len = buf.readUInt32BE(off);
    const type = buf.toString('latin1', off + 4, off + 8);
    const body = buf.subarray(off + 8, off + 8 + len);
    if (type === 'IHDR') {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      const depth = body[8];
      colorType = body[9]!;
      if (depth !== 8 || (colorType !== 2 && colorType !== 6) || body[12] !== 0)
        throw new Error(`unsupported PNG: depth ${depth}, color type ${colorType}, interlace ${body[12]}`);
    } else if (type === 'IDAT') idat.push(body);
    else if (type === 'IEND') break;
    off += 12 + len;
  }
  const bpp = colorType === 6 ? 4 : 3;
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * bpp;
  const px = new Uint8Array(width * height * bpp);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const cur = px.subarray(y * stride, (y + 1) * stride);
    const prev = y > 0 ? px.subarray((y - 1) * stride, y * stride) : new Uint8Array(stride);
    for (let i = 0; i < stride; i++) {
      const a = i >= bpp ? cur[i - bpp]! : 0;
      const b = prev[i]!;
      const c = i >= bpp ? prev[i - bpp]! : 0;
      let v = line[i]!;
      if (filter === 1) v += a;
      else if (filter === 2) v += b;
      else if (filter === 3) v += (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      } else if (filter !== 0) throw new Error(`bad PNG filter ${filter}`);
      cur[i] = v & 255;
    }
  }
  if (bpp === 4) return { width, height, data: px };
  const data = new Uint8Array(width * height * 4);
  for (let i = 0, j = 0; i < px.length; i += 3, j += 4) {
    data[j] = px[i]!;
    data[j + 1] = px[i + 1]!;
    data[j + 2] = px[i + 2]!;
    data[j + 3] = 255;
  }
  return { width, height, data };
}

export function pixel(img: Image, x: number, y: number): [number, number, number] {
  const i = (Math.round(y) * img.width + Math.round(x)) * 4;
  return [img.data[i]!, img.data[i + 1]!, img.data[i + 2]!];
}

export function hex(c: string): [number, number, number] {
  const n = Number.parseInt(c.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}

export const near = (a: readonly number[], b: readonly number[], tol = 24) =>
  a.every((v, i) => Math.abs(v - b[i]!) <= tol);
