// The flow records `netpol recommend` learns from: NDJSON as `cascadectl flows -o json` prints them
// and the agents log them (one object a line; lines that are not flow records, such as other log
// lines, are passed over). A flow file is untrusted input: its size, its line length and its record
// count are bounded, and every field of a flow record is checked; a bad record is an error naming
// the file, the line and the field.

import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { StringDecoder } from 'node:string_decoder';
import type { RecommendProtocol } from '@cascade/netpolicy';

export interface ObservedFlow {
  /** ms since the epoch; undefined when the record has no time */
  at?: number;
  direction: 'ingress' | 'egress';
  verdict: 'allow' | 'deny';
  /** `ns/name` of a pod, or an address */
  from: string;
  to: string;
  protocol: RecommendProtocol;
  port: number;
  /** records this one stands for (1 + its repeats) */
  count: number;
}

export const FLOW_LIMITS = {
  /** bytes of one flow file */
  bytes: 512 * 1024 * 1024,
  /** characters of one line */
  line: 16 * 1024,
  /** flow records in all */
  records: 2_000_000,
};

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** A flow end: `ns/name` (a namespace and a pod name as the API server allows them) or an address. */
function end(v: unknown): string | undefined {
  if (typeof v !== 'string' || v.length > 320) return undefined;
  const slash = v.indexOf('/');
  if (slash < 0) return isIP(v) ? v : undefined;
  const [ns, name] = [v.slice(0, slash), v.slice(slash + 1)];
  return DNS_LABEL.test(ns) && DNS_SUBDOMAIN.test(name) ? v : undefined;
}

const PROTOCOLS: readonly string[] = ['TCP', 'UDP', 'SCTP'];

/**
 * One record checked: a flow, `undefined` for an object that is no flow record (no from, to and
 * verdict: another log line), `{skip}` for a flow NetworkPolicy cannot name (ICMP), or the error.
 */
export function checkFlow(o: unknown): ObservedFlow | undefined | { skip: string } | { error: string } {
  if (!o || typeof o !== 'object' || Array.isArray(o)) return undefined;
  const r = o as Record<string, unknown>;
  if (!('from' in r && 'to' in r && 'verdict' in r)) return undefined;
  const from = end(r.from);
  if (!from) return { error: 'from: not a pod (namespace/name) or an address' };
  const to = end(r.to);
  if (!to) return { error: 'to: not a pod (namespace/name) or an address' };
  const verdict = typeof r.verdict === 'string' ? r.verdict.toLowerCase() : '';
  if (verdict !== 'allow' && verdict !== 'deny') return { error: 'verdict: not allow or deny' };
  if (r.direction !== 'ingress' && r.direction !== 'egress')
    return { error: 'direction: not ingress or egress' };
  const protocol = typeof r.protocol === 'string' ? r.protocol.toUpperCase() : '';
  if (!/^[A-Z0-9-]{1,16}$/.test(protocol)) return { error: 'protocol: not a protocol name' };
  if (!PROTOCOLS.includes(protocol)) return { skip: protocol };
  if (!Number.isInteger(r.port) || (r.port as number) < 1 || (r.port as number) > 65535)
    return { error: 'port: not a port number (1-65535)' };
  let at: number | undefined;
  if (r.time !== undefined) {
    at = typeof r.time === 'string' && r.time.length <= 40 ? Date.parse(r.time) : Number.NaN;
    if (Number.isNaN(at)) return { error: 'time: not an RFC 3339 time' };
  }
  let repeats = 0;
  if (r.repeats !== undefined) {
    if (!Number.isInteger(r.repeats) || (r.repeats as number) < 0 || (r.repeats as number) > 1e9)
      return { error: 'repeats: not a count' };
    repeats = r.repeats as number;
  }
  return {
    ...(at !== undefined ? { at } : {}),
    direction: r.direction,
    verdict,
    from,
    to,
    protocol: protocol as RecommendProtocol,
    port: r.port as number,
    count: 1 + repeats,
  };
}

/** What reading flows found besides the flows. */
export interface FlowReading {
  flows: ObservedFlow[];
  /** `FILE:LINE: field: why`, the first 20 */
  errors: string[];
  errorCount: number;
  /** protocol -> records passed over (NetworkPolicy names TCP, UDP and SCTP only) */
  skipped: Map<string, number>;
}

export const newReading = (): FlowReading => ({ flows: [], errors: [], errorCount: 0, skipped: new Map() });

/** Adds the flow records of `lines` (from `source`, numbered from `first`) to `into`. */
export function addFlowLines(into: FlowReading, source: string, lines: readonly string[], first = 1): void {
  lines.forEach((line, i) => {
    const fail = (why: string) => {
      if (into.errors.length < 20) into.errors.push(`${source}:${first + i}: ${why}`);
      into.errorCount++;
    };
    const text = line.trim();
    if (!text) return;
    if (text.length > FLOW_LIMITS.line) return fail(`longer than ${FLOW_LIMITS.line} characters`);
    if (text[0] !== '{') return; // not JSON: a log line of another format
    let o: unknown;
    try {
      o = JSON.parse(text);
    } catch {
      return fail('not a JSON object');
    }
    const f = checkFlow(o);
    if (f === undefined) return;
    if ('error' in f) return fail(f.error);
    if ('skip' in f) {
      into.skipped.set(f.skip, (into.skipped.get(f.skip) ?? 0) + 1);
      return;
    }
    if (into.flows.length >= FLOW_LIMITS.records)
      return fail(`more than ${FLOW_LIMITS.records.toLocaleString('en')} flow records: the rest is left out`);
    into.flows.push(f);
  });
}

/** Reads a flow file (`-`: standard input) in chunks, never more than FLOW_LIMITS.bytes. */
export function readFlowFile(into: FlowReading, path: string): void {
  let fd: number;
  try {
    if (path !== '-' && statSync(path).size > FLOW_LIMITS.bytes) {
      into.errors.push(`${path}: larger than ${FLOW_LIMITS.bytes / 1024 / 1024} MiB: not read`);
      into.errorCount++;
      return;
    }
    fd = path === '-' ? 0 : openSync(path, 'r');
  } catch (e) {
    into.errors.push(`${path}: cannot read: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
    into.errorCount++;
    return;
  }
  try {
    const buf = Buffer.alloc(1 << 20);
    const utf8 = new StringDecoder('utf8');
    let rest = '';
    let line = 1;
    let total = 0;
    for (;;) {
      let n: number;
      try {
        n = readSync(fd, buf, 0, buf.length, null);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EAGAIN') continue;
        throw e;
      }
      if (n === 0) break;
      total += n;
      if (total > FLOW_LIMITS.bytes) {
        into.errors.push(`${path}: larger than ${FLOW_LIMITS.bytes / 1024 / 1024} MiB: the rest is left out`);
        into.errorCount++;
        break;
      }
      const lines = (rest + utf8.write(buf.subarray(0, n))).split('\n');
      rest = lines.pop() ?? '';
      if (rest.length > FLOW_LIMITS.line) rest = rest.slice(0, FLOW_LIMITS.line + 1);
      addFlowLines(into, path, lines, line);
      line += lines.length;
    }
    addFlowLines(into, path, [rest + utf8.end()], line);
  } finally {
    if (fd !== 0) closeSync(fd);
  }
}

/** `--since 1h`: 30s, 15m, 1h, 2d (Go's and kubectl's units for whole numbers). */
export function sinceMs(text: string): number | undefined {
  const m = /^(\d{1,6})(s|m|h|d)$/.exec(text);
  if (!m) return undefined;
  return Number(m[1]) * { s: 1e3, m: 60e3, h: 3600e3, d: 86400e3 }[m[2] as 's' | 'm' | 'h' | 'd'];
}
