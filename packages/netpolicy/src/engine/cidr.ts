// IPv4/IPv6 addresses and prefixes as bigints, for ipBlock, networks and the ipcache.

export interface Prefix {
  family: 4 | 6;
  /** Network address (host bits zero). */
  bits: bigint;
  len: number;
}

const WIDTH = { 4: 32, 6: 128 } as const;

export function parseIp(ip: string): { family: 4 | 6; bits: bigint } | undefined {
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(ip)) {
    const parts = ip.split('.').map(Number);
    if (parts.some((p) => p > 255)) return undefined;
    return { family: 4, bits: parts.reduce((a, p) => (a << 8n) | BigInt(p), 0n) };
  }
  if (!ip.includes(':')) return undefined;
  let s = ip;
  // IPv4-mapped tail (::ffff:1.2.3.4)
  const v4 = /(\d{1,3}(\.\d{1,3}){3})$/.exec(s);
  if (v4) {
    const p = parseIp(v4[1]!);
    if (!p) return undefined;
    s = `${s.slice(0, -v4[1]!.length)}${(p.bits >> 16n).toString(16)}:${(p.bits & 0xffffn).toString(16)}`;
  }
  const halves = s.split('::');
  if (halves.length > 2) return undefined;
  const head = halves[0] ? halves[0].split(':') : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  const missing = 8 - head.length - tail.length;
  if ((halves.length === 1 && missing !== 0) || missing < 0) return undefined;
  const groups = [...head, ...Array(halves.length === 2 ? missing : 0).fill('0'), ...tail];
  if (groups.length !== 8 || groups.some((g) => !/^[0-9a-fA-F]{1,4}$/.test(g))) return undefined;
  return { family: 6, bits: groups.reduce((a, g) => (a << 16n) | BigInt(Number.parseInt(g, 16)), 0n) };
}

export function parseCidr(cidr: string): Prefix | undefined {
  const [ip, lenText, extra] = cidr.split('/');
  if (extra !== undefined || ip === undefined || lenText === undefined || !/^\d{1,3}$/.test(lenText))
    return undefined;
  const a = parseIp(ip);
  if (!a) return undefined;
  const len = Number(lenText);
  if (len > WIDTH[a.family]) return undefined;
  return { family: a.family, bits: a.bits & mask(a.family, len), len };
}

const MASKS: Record<4 | 6, bigint[]> = { 4: [], 6: [] };
for (const family of [4, 6] as const) {
  const w = BigInt(WIDTH[family]);
  for (let len = 0; len <= WIDTH[family]; len++)
    MASKS[family].push(len === 0 ? 0n : ((1n << BigInt(len)) - 1n) << (w - BigInt(len)));
}

export function mask(family: 4 | 6, len: number): bigint {
  return MASKS[family][len]!;
}

/** The host prefix of an address (shared, frozen objects: the ipcache is rebuilt from them often). */
export function hostPrefix(ip: string): Prefix | undefined {
  let h = hostPrefixes.get(ip);
  if (h === undefined && !hostPrefixes.has(ip)) {
    const a = parseIp(ip);
    h = a ? Object.freeze({ family: a.family, bits: a.bits, len: WIDTH[a.family] }) : undefined;
    if (hostPrefixes.size > 1_000_000) hostPrefixes.clear();
    hostPrefixes.set(ip, h);
  }
  return h;
}
const hostPrefixes = new Map<string, Prefix | undefined>();

/** Whether `outer` contains `inner` (equal counts). */
export function contains(outer: Prefix, inner: Prefix): boolean {
  return (
    outer.family === inner.family &&
    outer.len <= inner.len &&
    (inner.bits & mask(outer.family, outer.len)) === outer.bits
  );
}

export function prefixKey(p: Prefix): string {
  return `${p.family}:${p.bits.toString(16)}/${p.len}`;
}

export function formatPrefix(p: Prefix): string {
  if (p.family === 4) {
    const b = p.bits;
    return `${[24n, 16n, 8n, 0n].map((s) => Number((b >> s) & 255n)).join('.')}/${p.len}`;
  }
  const groups: string[] = [];
  for (let i = 7; i >= 0; i--) groups.push(((p.bits >> BigInt(i * 16)) & 0xffffn).toString(16));
  return `${groups.join(':').replace(/(^|:)0(:0)+(:|$)/, '::')}/${p.len}`;
}

/** The whole address space of a family: where `world` lives. */
export const WORLD4: Prefix = { family: 4, bits: 0n, len: 0 };
export const WORLD6: Prefix = { family: 6, bits: 0n, len: 0 };
