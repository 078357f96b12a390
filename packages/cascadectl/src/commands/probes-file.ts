// The probes file of `netpol simulate --probes` (and `diff --probes`): every form is read item by
// item, once, into compact columns (ProbeColumns), so that memory is the file's text while it is read
// and 16 bytes a probe after, never a list of parsed objects:
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
  if (p === 'TCP') return PROTO.TCP;
  if (p === 'UDP') return PROTO.UDP;
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

/** What plainValue answers for a value YAML must read. */
const NOT_PLAIN = Symbol('not plain');
/** Values already checked: probes files repeat the same pod names, protocols and ports. */
const plainValues = new Map<string, string | number | typeof NOT_PLAIN>();

/**
 * A value read as YAML would read it when it is a plain name or number (what generators write):
 * numbers become numbers; NOT_PLAIN for anything YAML must read (quotes, scalars YAML reads as
 * booleans or floats, a colon at the end: `a:b` is a scalar, `a: b` a pair).
 */
function plainValue(v: string): string | number | typeof NOT_PLAIN {
  let r = plainValues.get(v);
  if (r === undefined) {
    r =
      !PLAIN.test(v) || YAML_SPECIAL.test(v) || v.endsWith(':')
        ? NOT_PLAIN
        : /^\d+$/.test(v) && v.length < 16
          ? Number(v)
          : v;
    if (plainValues.size >= 100_000) plainValues.clear();
    plainValues.set(v, r);
  }
  return r;
}

/**
 * One `{from: a, to: b, protocol: TCP, port: 80}` line read without the YAML library when every
 * value is a plain name or number; undefined for anything else (quotes, nesting, other keys), which
 * the YAML library reads.
 */
function fastProbe(flow: string): Record<string, unknown> | undefined {
  // what generators write, keys in this order: one match (then the values are checked as below)
  const m = CANONICAL.exec(flow);
  if (m && !m[2]!.endsWith(':')) {
    const [from, to, protocol, port] = [
      plainValue(m[1]!),
      plainValue(m[2]!),
      plainValue(m[3]!),
      plainValue(m[4]!),
    ];
    if (from !== NOT_PLAIN && to !== NOT_PLAIN && protocol !== NOT_PLAIN && port !== NOT_PLAIN)
      return { from, to, protocol, port };
  }
  return plainPairs(flow.slice(1, -1).split(','));
}
const CANONICAL = /^\{ ?from: ([^\s,:{}]+), to: ([^\s,{}]+), protocol: ([^\s,:{}]+), port: ([^\s,:{}]+) ?\}$/;

/** `key: value` parts whose values are all plain (see plainValue), as an object; else undefined. */
function plainPairs(parts: string[]): Record<string, unknown> | undefined {
  const o: Record<string, unknown> = {};
  for (const part of parts) if (!plainPair(o, part)) return undefined;
  return o;
}

/** Adds one plain `key: value` to `o`; false when it is not one (YAML must read the item). */
function plainPair(o: Record<string, unknown>, part: string): boolean {
  const i = part.indexOf(':');
  if (i < 0) return false;
  const k = part.slice(0, i).trim();
  if (!PROBE_KEYS.has(k) || k in o) return false;
  const v = plainValue(part.slice(i + 1).trim());
  if (v === NOT_PLAIN) return false;
  o[k] = v;
  return true;
}

/** Where the line starting at `at` ends (its line break, or the text's end). */
const lineEnd = (text: string, at: number) => {
  const end = text.indexOf('\n', at);
  return end < 0 ? text.length : end;
};

const space = (c: string | undefined) => c === ' ' || c === '\t' || c === '\r';

/** The first position in text[at, end) that is not a space, tab or carriage return (end: none). */
function skipSpace(text: string, at: number, end: number): number {
  while (at < end && space(text[at])) at++;
  return at;
}

/** Whether text[at, end) is blank or a comment, without cutting it out. */
function blankAt(text: string, at: number, end: number): boolean {
  const a = skipSpace(text, at, end);
  return a === end || text[a] === '#';
}

/** JSON lines: every line that is not blank is one object. */
function jsonLines(text: string): Iterable<unknown> | undefined {
  let any = false;
  for (let at = 0; at < text.length; ) {
    const end = lineEnd(text, at);
    const a = skipSpace(text, at, end);
    if (a < end) {
      if (text[a] !== '{') return undefined;
      any = true;
    }
    at = end + 1;
  }
  if (!any) return undefined;
  return {
    *[Symbol.iterator]() {
      for (let at = 0; at < text.length; ) {
        const end = lineEnd(text, at);
        const l = text.slice(at, end);
        if (l.trim() !== '') yield JSON.parse(l);
        at = end + 1;
      }
    },
  };
}

const isJsonSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** How many elements of a JSON array are parsed in one JSON.parse. */
const JSON_BATCH = 512;

/**
 * A JSON array, element by element: each is cut out at its top-level comma (strings and nesting
 * followed as JSON does), and a batch of them is parsed in one call, as `[` + their text + `]`; a
 * batch that does not parse is parsed element by element, so an error is the bad element's own.
 */
function jsonArray(text: string): Iterable<unknown> | undefined {
  const n = text.length;
  let open = 0;
  while (open < n && isJsonSpace(text.charCodeAt(open))) open++;
  if (open >= n || text.charCodeAt(open) !== 0x5b) return undefined;
  const checkEnd = (from: number) => {
    if (text.slice(from).trim() !== '') throw new Error('text after the JSON array');
  };
  function* parsed(bounds: number[]): Generator<unknown> {
    let all: unknown[] | undefined;
    try {
      all = JSON.parse(`[${text.slice(bounds[0], bounds[bounds.length - 1])}]`) as unknown[];
    } catch {
      all = undefined;
    }
    if (all?.length === bounds.length / 2) yield* all;
    else for (let k = 0; k < bounds.length; k += 2) yield JSON.parse(text.slice(bounds[k], bounds[k + 1]));
  }
  return {
    *[Symbol.iterator]() {
      let at = open + 1;
      while (at < n && isJsonSpace(text.charCodeAt(at))) at++;
      if (text.charCodeAt(at) === 0x5d) return checkEnd(at + 1);
      const bounds: number[] = [];
      for (;;) {
        const start = at;
        let depth = 0;
        for (; at < n; at++) {
          const c = text.charCodeAt(at);
          if (c === 0x22) {
            for (at++; at < n; at++) {
              const d = text.charCodeAt(at);
              if (d === 0x22) break;
              if (d === 0x5c) at++;
            }
          } else if (c === 0x7b || c === 0x5b) depth++;
          else if (c === 0x7d || c === 0x5d) {
            if (depth === 0) break;
            depth--;
          } else if (c === 0x2c && depth === 0) break;
        }
        if (at >= n) {
          if (bounds.length) yield* parsed(bounds);
          throw new Error('the JSON array is not closed');
        }
        bounds.push(start, at);
        const closing = text.charCodeAt(at) === 0x5d;
        if (closing || bounds.length >= 2 * JSON_BATCH) {
          yield* parsed(bounds);
          bounds.length = 0;
        }
        if (closing) return checkEnd(at + 1);
        at++;
        while (at < n && isJsonSpace(text.charCodeAt(at))) at++;
      }
    },
  };
}

/** An item line: `- ` at column 0, or a lone `-`. */
const itemAt = (text: string, at: number, end: number) =>
  text[at] === '-' && (at + 1 === end || text[at + 1] === ' ' || (text[at + 1] === '\r' && at + 2 === end));

/** A YAML list in block style: an item is its `- ` line at column 0 and the indented lines after it. */
function blockItems(text: string): Iterable<unknown> | undefined {
  let items = 0;
  for (let at = 0; at < text.length; ) {
    const end = lineEnd(text, at);
    if (!blankAt(text, at, end)) {
      if (itemAt(text, at, end)) items++;
      else if (!(text[at] === ' ' && items > 0)) return undefined;
    }
    at = end + 1;
  }
  if (items === 0) return undefined;
  /** The item text[start, stop): plain pairs read here, anything else by the YAML library. */
  const parse = (start: number, stop: number) => {
    const o: Record<string, unknown> = {};
    let plain = true;
    for (let at = start, first = true; plain && at < stop; first = false) {
      const end = Math.min(lineEnd(text, at), stop);
      if (first) plain = blankAt(text, at + 1, end) || plainPair(o, text.slice(at + 2, end));
      // the keys of the item's mapping: indented by exactly two spaces, no nested list
      else if (!blankAt(text, at, end))
        plain =
          text[at] === ' ' &&
          text[at + 1] === ' ' &&
          text[at + 2] !== ' ' &&
          text[at + 2] !== '-' &&
          plainPair(o, text.slice(at, end));
      at = end + 1;
    }
    return plain ? o : (parseYaml(text.slice(start, stop)) as unknown[])[0];
  };
  return {
    *[Symbol.iterator]() {
      let start = -1;
      for (let at = 0; at < text.length; ) {
        const end = lineEnd(text, at);
        if (itemAt(text, at, end)) {
          if (start >= 0) yield parse(start, at);
          start = at;
        }
        at = end + 1;
      }
      if (start >= 0) yield parse(start, text.length);
    },
  };
}

/** The flow-style items of a one-item-per-line probes list, lazily; undefined when it is other YAML. */
function flowItems(text: string): Iterable<unknown> | undefined {
  // check the form first (no allocation per line): then items are parsed as they are consumed
  for (let at = 0; at < text.length; ) {
    const end = lineEnd(text, at);
    const a = skipSpace(text, at, end);
    let b = end;
    while (b > a && space(text[b - 1])) b--;
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
 * Probes read once and kept compact: names interned, four 32-bit columns (16 bytes a probe, about a
 * quarter of the text they came from), so that every item is checked before anything is written
 * without reading the file twice.
 */
export class ProbeColumns {
  /** the names met (pods, addresses, port names), by id */
  readonly names: string[] = [];
  private readonly ids = new Map<string, number>();
  private cols = [new Int32Array(1024), new Int32Array(1024), new Int32Array(1024), new Int32Array(1024)];
  length = 0;

  private id(name: string): number {
    let i = this.ids.get(name);
    if (i === undefined) {
      i = this.names.length;
      this.names.push(name);
      this.ids.set(name, i);
    }
    return i;
  }

  push(p: Probe): void {
    if (this.length === this.cols[0]!.length)
      this.cols = this.cols.map((c) => {
        const bigger = new Int32Array(c.length * 2);
        bigger.set(c);
        return bigger;
      });
    const [from, to, proto, port] = this.cols as [Int32Array, Int32Array, Int32Array, Int32Array];
    from[this.length] = this.id(p.from);
    to[this.length] = this.id(p.to);
    proto[this.length] = p.proto;
    // a port name is kept as its name's index, negative
    port[this.length] = typeof p.port === 'number' ? p.port : -1 - this.id(p.port);
    this.length++;
  }

  /** Probe i's source and destination as name ids, its protocol, and its port (-1 - a name id: a name). */
  fromId(i: number): number {
    return this.cols[0]![i]!;
  }
  toId(i: number): number {
    return this.cols[1]![i]!;
  }
  protoAt(i: number): number {
    return this.cols[2]![i]!;
  }
  portCode(i: number): number {
    return this.cols[3]![i]!;
  }

  at(i: number): Probe {
    const [from, to, proto, port] = this.cols as [Int32Array, Int32Array, Int32Array, Int32Array];
    const n = port[i]!;
    return {
      from: this.names[from[i]!]!,
      to: this.names[to[i]!]!,
      proto: proto[i]!,
      port: n >= 0 ? n : this.names[-1 - n]!,
    };
  }
}

/**
 * Calls `f` for each probe: every item is read and checked first (so nothing is written before a bad
 * item is reported), then simulated from the compact columns. Memory is the file's text while it is
 * read, then 16 bytes a probe; plain items of every streamed form skip the YAML library.
 */
export function forEachProbe(path: string, f: (p: Probe) => void): void {
  const probes = readProbeColumns(path);
  for (let j = 0; j < probes.length; j++) f(probes.at(j));
}

/** Every item of a probes file read and checked, into compact columns. */
export function readProbeColumns(path: string): ProbeColumns {
  const probes = new ProbeColumns();
  let i = 0;
  for (const p of probeItems(path)) probes.push(toProbe(p, i++));
  return probes;
}

export function readProbes(path: string): Probe[] {
  const out: Probe[] = [];
  forEachProbe(path, (p) => out.push(p));
  return out;
}
