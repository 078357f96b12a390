// Port ranges and their decomposition into the fewest port prefixes (value/length, 16-bit).

export const PROTO = { TCP: 6, UDP: 17, SCTP: 132 } as const;
export type ProtoName = keyof typeof PROTO;
export const PROTO_NAMES: Record<number, string> = { 0: 'any', 6: 'TCP', 17: 'UDP', 132: 'SCTP' };

export interface PortRange {
  start: number;
  end: number;
}

export interface PortPrefix {
  port: number;
  /** 0..16: how many high bits of the port are fixed. 16 = one port, 0 = all ports. */
  len: number;
}

/** Sorts and merges overlapping or adjacent ranges. */
export function mergeRanges(ranges: readonly PortRange[]): PortRange[] {
  const sorted = [...ranges].sort((a, b) => a.start - b.start);
  const out: PortRange[] = [];
  for (const r of sorted) {
    const last = out[out.length - 1];
    if (last && r.start <= last.end + 1) last.end = Math.max(last.end, r.end);
    else out.push({ ...r });
  }
  return out;
}

/** The minimal set of aligned prefixes covering [start, end] exactly. */
export function rangeToPrefixes(r: PortRange): PortPrefix[] {
  const out: PortPrefix[] = [];
  let start = r.start;
  while (start <= r.end) {
    // largest block aligned at `start` that fits
    let size = start === 0 ? 65536 : start & -start;
    while (start + size - 1 > r.end) size >>= 1;
    out.push({ port: start, len: 16 - Math.log2(size) });
    start += size;
  }
  return out;
}

export function prefixRange(p: PortPrefix): PortRange {
  const size = 2 ** (16 - p.len);
  return { start: p.port, end: p.port + size - 1 };
}

export function prefixContains(outer: PortPrefix, inner: PortPrefix): boolean {
  if (outer.len > inner.len) return false;
  return outer.len === 0 || inner.port >>> (16 - outer.len) === outer.port >>> (16 - outer.len);
}

export function portInPrefix(port: number, p: PortPrefix): boolean {
  return p.len === 0 || port >>> (16 - p.len) === p.port >>> (16 - p.len);
}

export function formatPortPrefix(p: PortPrefix): string {
  if (p.len === 0) return '*';
  if (p.len === 16) return String(p.port);
  const r = prefixRange(p);
  return `${r.start}-${r.end}`;
}
