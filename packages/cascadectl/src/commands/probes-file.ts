// The probes file of `netpol simulate --probes` (and `diff --probes`): every form is read as a
// stream, item by item, so that memory is the file's text and not a list of parsed probes:
//   - a YAML list, one flow-style item per line: `- {from: a, to: b, protocol: TCP, port: 80}`
//   - a YAML list in block style: `- from: a` and its keys on the indented lines that follow
//   - a JSON array of objects: `[{"from": "a", ...}, ...]` (any layout)
//   - JSON lines: one object per line
// Items whose values are plain names and numbers skip the YAML library. Any other YAML is read whole
// when the file is small (under 1 MiB), and refused with a message naming the forms above otherwise.
import { readFileSync } from 'node:fs';
import { PROTO } from '@cascade/netpolicy';
import { parse as parseYaml } from 'yaml';
import { UsageError } from '../cli.ts';

export interface Probe {
  from: string;
  to: string;
  proto: number;
  port: number | string;
}

/** Files other than the streamed forms are read whole only below this size (characters). */
export const WHOLE_MAX = 1 << 20;

export const PROBES_FORMS =
  'a YAML list one item per line (- {from: a, to: b, protocol: TCP, port: 80}) or in block style, a JSON array of objects, or JSON lines';

export function protoNumber(p: unknown): number {
  const s = String(p ?? 'TCP').toUpperCase();
  if (s in PROTO) return PROTO[s as keyof typeof PROTO];
  if (/^\d+$/.test(s)) return Number(s);
  if (s === 'ICMP') return 1;
  throw new UsageError(`unknown protocol "${String(p)}" (TCP, UDP, SCTP, ICMP or a number)`);
}

/** A plain scalar the fast path reads as YAML would: a name, an address, a port number. */
const PLAIN = /^[A-Za-z0-9][A-Za-z0-9_./:-]*$/;
const YAML_SPECIAL =
  /^(?:true|false|yes|no|on|off|null|~|\.inf|\.nan|0x.*|0o.*|[-+]?\d*\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+)$/i;
const PROBE_KEYS = new Set(['from', 'to', 'protocol', 'port']);

/**
 * One `{from: a, to: b, protocol: TCP, port: 80}` line read without the YAML library when every
 * value is a plain name or number (what generators write); undefined for anything else (quotes,
 * nesting, other keys, scalars YAML would read as booleans or floats), which the YAML library reads.
 */
function fastProbe(flow: string): Record<string, unknown> | undefined {
  // what generators write, keys in this order: one match (then the values are checked as below)
  const m = CANONICAL.exec(flow);
  if (m) {
    const [, from, to, protocol, port] = m as unknown as [string, string, string, string, string];
    if (!to.endsWith(':') && [from, to, protocol, port].every((v) => PLAIN.test(v) && !YAML_SPECIAL.test(v)))
      return { from, to, protocol, port: /^\d+$/.test(port) && port.length < 16 ? Number(port) : port };
  }
  return plainPairs(flow.slice(1, -1).split(','));
}
const CANONICAL = /^\{ ?from: ([^\s,:{}]+), to: ([^\s,{}]+), protocol: ([^\s,:{}]+), port: ([^\s,:{}]+) ?\}$/;

/** `key: value` parts whose values are all plain (see fastProbe), as an object; else undefined. */
function plainPairs(parts: string[]): Record<string, unknown> | undefined {
  const o: Record<string, unknown> = {};
  for (const part of parts) {
    const i = part.indexOf(':');
    if (i < 0) return undefined;
    const k = part.slice(0, i).trim();
    const v = part.slice(i + 1).trim();
    if (!PROBE_KEYS.has(k) || k in o || !PLAIN.test(v) || YAML_SPECIAL.test(v)) return undefined;
    // a colon inside a value is YAML's business (`a:b` is a scalar, `a: b` a pair)
    if (v.includes(': ') || v.endsWith(':')) return undefined;
    o[k] = /^\d+$/.test(v) && v.length < 16 ? Number(v) : v;
  }
  return o;
}

/** The lines of `text`, each without its line break (lazily, no array of lines). */
function* lines(text: string): Generator<string> {
  for (let at = 0; at < text.length; ) {
    let end = text.indexOf('\n', at);
    if (end < 0) end = text.length;
    yield text.slice(at, end);
    at = end + 1;
  }
}

const blank = (l: string) => {
  const t = l.trim();
  return t === '' || t.startsWith('#');
};

/** JSON lines: every line that is not blank is one object. */
function jsonLines(text: string): Iterable<unknown> | undefined {
  for (const l of lines(text)) if (l.trim() !== '' && !l.trimStart().startsWith('{')) return undefined;
  if (text.trim() === '') return undefined;
  return {
    *[Symbol.iterator]() {
      for (const l of lines(text)) if (l.trim() !== '') yield JSON.parse(l);
    },
  };
}

/** A JSON array, element by element: each is cut out at its top-level comma and parsed on its own. */
function jsonArray(text: string): Iterable<unknown> | undefined {
  const open = text.search(/\S/);
  if (open < 0 || text[open] !== '[') return undefined;
  return {
    *[Symbol.iterator]() {
      let at = open + 1;
      const ws = () => {
        while (at < text.length && /\s/.test(text[at]!)) at++;
      };
      ws();
      if (text[at] === ']') return checkEnd(at + 1);
      for (;;) {
        const start = at;
        let depth = 0;
        for (; at < text.length; at++) {
          const c = text[at]!;
          if (c === '"') {
            for (at++; at < text.length && text[at] !== '"'; at++) if (text[at] === '\\') at++;
          } else if (c === '{' || c === '[') depth++;
          else if (c === '}' || c === ']') {
            if (depth === 0) break;
            depth--;
          } else if (c === ',' && depth === 0) break;
        }
        if (at >= text.length) throw new Error('the JSON array is not closed');
        yield JSON.parse(text.slice(start, at));
        if (text[at] === ']') return checkEnd(at + 1);
        at++;
        ws();
      }
    },
  };
  function checkEnd(from: number) {
    if (text.slice(from).trim() !== '') throw new Error('text after the JSON array');
  }
}

/** A YAML list in block style: an item is its `- ` line at column 0 and the indented lines after it. */
function blockItems(text: string): Iterable<unknown> | undefined {
  let items = 0;
  for (const l of lines(text)) {
    if (blank(l)) continue;
    if (l.startsWith('- ') || l === '-') items++;
    else if (!(l.startsWith(' ') && items > 0)) return undefined;
  }
  if (items === 0) return undefined;
  const parse = (chunk: string[]) => {
    const pairs = [chunk[0]!.slice(2), ...chunk.slice(1)].filter((l) => !blank(l));
    const indent = chunk.length > 1 ? chunk.slice(1).every((l) => blank(l) || /^ {2}[^ ]/.test(l)) : true;
    return (
      (indent && pairs.every((p) => !p.trim().startsWith('- ')) ? plainPairs(pairs) : undefined) ??
      (parseYaml(chunk.join('\n')) as unknown[])[0]
    );
  };
  return {
    *[Symbol.iterator]() {
      let chunk: string[] = [];
      for (const l of lines(text)) {
        if (l.startsWith('- ') || l === '-') {
          if (chunk.length) yield parse(chunk);
          chunk = [l];
        } else if (chunk.length) chunk.push(l);
      }
      if (chunk.length) yield parse(chunk);
    },
  };
}

/** The flow-style items of a one-item-per-line probes list, lazily; undefined when it is other YAML. */
function flowItems(text: string): Iterable<unknown> | undefined {
  // check the form first (no allocation per line): then items are parsed as they are consumed
  for (let at = 0; at < text.length; ) {
    let end = text.indexOf('\n', at);
    if (end < 0) end = text.length;
    let a = at;
    let b = end;
    while (a < b && (text[a] === ' ' || text[a] === '\t' || text[a] === '\r')) a++;
    while (b > a && (text[b - 1] === ' ' || text[b - 1] === '\t' || text[b - 1] === '\r')) b--;
    if (a < b && text[a] !== '#' && !(text.startsWith('- {', a) && text[b - 1] === '}')) return undefined;
    at = end + 1;
  }
  return {
    *[Symbol.iterator]() {
      for (let at = 0; at < text.length; ) {
        let end = text.indexOf('\n', at);
        if (end < 0) end = text.length;
        const l = text.slice(at, end).trim();
        at = end + 1;
        if (l === '' || l.startsWith('#')) continue;
        const flow = l.slice(2);
        yield fastProbe(flow) ?? parseYaml(flow);
      }
    },
  };
}

function toProbe(p: unknown, i: number): Probe {
  const o = p as Record<string, unknown>;
  if (typeof o?.from !== 'string' || typeof o.to !== 'string')
    throw new UsageError(`--probes item ${i + 1}: from and to are required`);
  if (typeof o.port === 'string' && !/^\d+$/.test(o.port))
    return { from: o.from, to: o.to, proto: protoNumber(o.protocol), port: o.port };
  const port = Number(o.port ?? 0);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new UsageError(`--probes item ${i + 1}: port must be 0..65535 or a port name`);
  return { from: o.from, to: o.to, proto: protoNumber(o.protocol), port };
}

/** The items of a probes file: streamed in every form the header names, else (small) parsed whole. */
function probeItems(path: string): Iterable<unknown> {
  let text: string;
  let items: Iterable<unknown> | undefined;
  try {
    text = readFileSync(path, 'utf8');
    items = flowItems(text) ?? jsonLines(text) ?? jsonArray(text) ?? blockItems(text);
    if (!items) {
      if (text.length > WHOLE_MAX)
        throw new UsageError(
          `--probes ${path}: ${Math.round(text.length / 1024)} KiB in a form that is read whole; write it as ${PROBES_FORMS} (each is read as a stream)`,
        );
      const list = parseYaml(text) as unknown;
      if (!Array.isArray(list))
        throw new UsageError(
          `--probes ${path}: must be a list of {from, to, protocol, port}: ${PROBES_FORMS}`,
        );
      items = list;
    }
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(`--probes ${path}: ${(e as Error).message.split('\n')[0]}`);
  }
  return {
    *[Symbol.iterator]() {
      try {
        yield* items;
      } catch (e) {
        if (e instanceof UsageError) throw e;
        throw new UsageError(`--probes ${path}: ${(e as Error).message.split('\n')[0]}`);
      }
    },
  };
}

/**
 * Calls `f` for each probe, streamed: every item is checked first (so nothing is written before a
 * bad item is reported), then read again as it is simulated. Memory is the file's text, not a list
 * of probes; plain `- {from: a, to: b, protocol: TCP, port: 80}` lines skip the YAML library.
 */
export function forEachProbe(path: string, f: (p: Probe) => void): void {
  const items = probeItems(path);
  let i = 0;
  for (const p of items) toProbe(p, i++);
  i = 0;
  for (const p of items) f(toProbe(p, i++));
}

export function readProbes(path: string): Probe[] {
  const out: Probe[] = [];
  forEachProbe(path, (p) => out.push(p));
  return out;
}
