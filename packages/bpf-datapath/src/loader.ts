// The loader: loads (or adopts) the pinned programs and maps, and brings the kernel maps to a desired
// state in an order that never shows a packet a verdict that neither the old nor the new policy gives:
//   1. new rule sets are written beside the old ones under new table ids (and new identities' entries
//      are added in place: no packet carries an identity before the ipcache maps an address to it);
//   2. ipcache additions and changes;
//   3. endpoints switch to their new tables with one map update each (revision bumped, so conntrack
//      entries of the old policy are re-judged);
//   4. ipcache removals; 5. old tables and vanished identities' entries are deleted.
// The kernel caches verdicts by (table ids, identity, protocol, port): table ids name immutable
// content, and every in-place patch (step 1 additions, step 5 deletions) is followed by an epoch bump
// that invalidates the whole cache, as is adopting pinned maps (table ids may be reused after a restart).
// Conntrack entries are trusted without looking at their endpoint while the config generation has not
// moved; step 3 bumps it when an endpoint changed, so each flow checks its endpoint's revision once.
// Revisions come from one counter for all endpoints: a reused address never matches old entries.
// A rule set that does not fit is refused whole: the endpoint keeps its last good tables, or fails
// closed if it never had any, and the report says how many entries did not fit.
import { Bpfctl } from './bpfctl.ts';
import {
  addr16,
  COUNTERS,
  decodeConfig,
  decodeEndpointValue,
  decodeFlowEvent,
  decodeIpcacheValue,
  decodePolicyKey,
  decodePolicyValue,
  type EndpointValue,
  EP_FLAGS,
  encodeConfig,
  encodeEndpointValue,
  encodeIpcacheKey,
  encodeIpcacheValue,
  encodePolicyKey,
  encodePolicyValue,
  type FlowEvent,
  SIZES,
  VERDICT,
  type VerdictName,
} from './codecs.ts';

export interface TableEntry {
  identity: number;
  proto: number;
  port: number;
  plen: number;
  precedence: number;
  verdict: VerdictName;
  rule: number;
}

export interface DesiredEndpoint {
  ip: string;
  identity: number;
  flags: number;
  tables: Record<'ingress' | 'egress', { admin: string; lower: string }>;
}

export interface DesiredState {
  /** CIDR or plain address (a host prefix) -> identity. */
  ipcache: { prefix: string; identity: number }[];
  endpoints: DesiredEndpoint[];
  tables: Map<string, TableEntry[]>;
}

export interface SyncReport {
  entriesWritten: number;
  entriesDeleted: number;
  tablesCreated: number;
  tablesFreed: number;
  tablesPatchedInPlace: number;
  endpointsSwitched: number;
  ipcacheWritten: number;
  refused: { table: string; entries: number; error: string }[];
  failClosed: string[];
}

const hex = (b: Buffer) => b.toString('hex');

/** The ipcache key of a CIDR or plain address (IPv4 as IPv4-mapped IPv6: prefixlen + 96). */
export function ipcacheKeyOf(prefix: string): Buffer {
  const [ip, len] = prefix.split('/') as [string, string | undefined];
  const v4 = /^\d+\.\d+\.\d+\.\d+$/.test(ip);
  const l = len === undefined ? (v4 ? 32 : 128) : Number(len);
  return encodeIpcacheKey({ prefixlen: v4 ? l + 96 : l, addr: addr16(ip) });
}

/** Host prefixes (/32, /128) live in the exact-match cascade_hosts map, the rest in the LPM trie. */
const HOST_PREFIXLEN_HEX = '80000000'; // prefixlen 128, little endian
const isHostKey = (lpmKeyHex: string) => lpmKeyHex.startsWith(HOST_PREFIXLEN_HEX);

/** One rule-set entry as the policy map holds it in table `table`. */
export function encodeTableEntry(table: number, e: TableEntry): [Buffer, Buffer] {
  return [
    encodePolicyKey({ table, identity: e.identity, proto: e.proto, port: e.port, plen: e.plen }),
    encodePolicyValue({ precedence: e.precedence, verdict: e.verdict, matchLen: matchLen(e), rule: e.rule }),
  ];
}

/**
 * The map contents a fresh datapath holds for `desired` (tables numbered 1.. in order): what the
 * loader writes on a first sync (endpoint revisions 1.. in order), computed offline (for `cascadectl netpol maps` and the reference
 * datapath without a kernel).
 */
export function encodeState(desired: DesiredState): {
  /** cascade_ipcache (LPM): CIDRs shorter than a host prefix */
  ipcache: [Buffer, Buffer][];
  /** cascade_hosts (hash): host addresses */
  hosts: [Buffer, Buffer][];
  endpoints: [Buffer, Buffer][];
  policy: [Buffer, Buffer][];
  tableNumbers: Map<string, number>;
} {
  const tableNumbers = new Map<string, number>();
  const policy: [Buffer, Buffer][] = [];
  for (const [key, entries] of desired.tables) {
    const n = tableNumbers.size + 1;
    tableNumbers.set(key, n);
    for (const e of entries) policy.push(encodeTableEntry(n, e));
  }
  const endpoints = desired.endpoints.map((ep, i): [Buffer, Buffer] => {
    const t = (d: 'ingress' | 'egress', l: 'admin' | 'lower') => tableNumbers.get(ep.tables[d][l]) ?? 0;
    const tables: EndpointValue['tables'] = [
      [t('ingress', 'admin'), t('ingress', 'lower')],
      [t('egress', 'admin'), t('egress', 'lower')],
    ];
    const flags = tables.flat().includes(0) ? ep.flags | EP_FLAGS.FAIL_CLOSED : ep.flags;
    return [addr16(ep.ip), encodeEndpointValue({ flags, tables, identity: ep.identity, revision: i + 1 })];
  });
  const ipcache: [Buffer, Buffer][] = [];
  const hosts: [Buffer, Buffer][] = [];
  for (const e of desired.ipcache) {
    const k = ipcacheKeyOf(e.prefix);
    if (isHostKey(k.toString('hex'))) hosts.push([k.subarray(4), encodeIpcacheValue(e.identity)]);
    else ipcache.push([k, encodeIpcacheValue(e.identity)]);
  }
  return { ipcache, hosts, endpoints, policy, tableNumbers };
}

/** Entry content without the table id and value: its place in a table. */
const entryKey = (e: TableEntry) =>
  `${e.identity}/${e.proto}/${e.proto === 0 ? 0 : e.port}/${e.proto === 0 ? 0 : e.plen}`;
const matchLen = (e: TableEntry) => (e.proto === 0 ? 0 : 8 + e.plen);
const sameValue = (a: TableEntry, b: TableEntry) =>
  a.precedence >>> 0 === b.precedence >>> 0 &&
  a.verdict === b.verdict &&
  a.rule >>> 0 === b.rule >>> 0 &&
  matchLen(a) === matchLen(b);

/** Policy map records (key, or key + value) of `entries` in table `table`, back to back: the binary
 * payload of bpfctl's writeb/eraseb, encoded without a Buffer per entry (same bytes as the codecs). */
export function policyRecords(table: number, entries: readonly TableEntry[], values: boolean): Buffer {
  const size = SIZES.policyKey + (values ? SIZES.policyValue : 0);
  const b = Buffer.alloc(size * entries.length);
  let o = 0;
  for (const e of entries) {
    const any = e.proto === 0;
    b.writeUInt32LE(any ? 64 : 72 + e.plen, o);
    b.writeUInt32LE(table >>> 0, o + 4);
    b.writeUInt32LE(e.identity >>> 0, o + 8);
    b.writeUInt8(e.proto, o + 12);
    b.writeUInt16BE(any ? 0 : e.port, o + 13);
    if (values) {
      b.writeUInt32LE(e.precedence >>> 0, o + 15);
      b.writeUInt8(VERDICT[e.verdict], o + 19);
      b.writeUInt8(matchLen(e), o + 20);
      b.writeUInt32LE(e.rule >>> 0, o + 23);
    }
    o += size;
  }
  return b;
}

/** 32-bit finaliser (murmur3 fmix32). */
function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * A table's content as an order-independent 64-bit multiset hash (the sum of two independent 32-bit
 * hashes of every encoded entry) plus its size: computed without allocating, so a sync compares
 * thousands of tables by content cheaply. Equal content gives an equal fingerprint; two different
 * contents share one with probability about 2^-64 per pair of tables.
 */
export function tableFingerprint(entries: readonly TableEntry[]): string {
  const known = fingerprints.get(entries);
  if (known !== undefined) return known;
  let a = 0;
  let b = 0;
  for (const e of entries) {
    const any = e.proto === 0;
    const where = ((e.proto & 255) << 24) | ((any ? 0 : e.port & 0xffff) << 8) | (any ? 0 : e.plen);
    const what = (VERDICT[e.verdict] << 8) | matchLen(e);
    let h = fmix(e.identity ^ 0x9e3779b9);
    h = fmix(h ^ where);
    h = fmix(h ^ e.precedence);
    h = fmix(h ^ e.rule);
    h = fmix(h ^ what);
    a = (a + h) >>> 0;
    b = (b + fmix(h ^ 0x5bd1e995)) >>> 0;
  }
  const f = `${entries.length}:${a.toString(36)}:${b.toString(36)}`;
  // The fingerprint is remembered for this array: it and its entries are frozen, so that changing
  // them in place later throws instead of going unseen.
  for (const e of entries) Object.freeze(e);
  fingerprints.set(Object.freeze(entries), f);
  return f;
}
/**
 * Fingerprints by array: a caller that hands the same (unchanged) array to every sync, as netpolicy's
 * datapathState does for tables that did not change, pays for each table once.
 */
const fingerprints = new WeakMap<readonly TableEntry[], string>();

const monotonicSeconds = () => Number(process.hrtime.bigint() / 1_000_000_000n);

/** Map keys in hex by their text (an agent syncs the same addresses over and over). */
function keyHexCache(encode: (text: string) => Buffer): (text: string) => string {
  const cache = new Map<string, string>();
  return (text) => {
    let k = cache.get(text);
    if (k === undefined) {
      if (cache.size > 1_000_000) cache.clear();
      cache.set(text, (k = encode(text).toString('hex')));
    }
    return k;
  };
}
const ipcacheKeyHex = keyHexCache(ipcacheKeyOf);
const endpointKeyHex = keyHexCache(addr16);

const sameEndpoint = (a: EndpointValue, b: EndpointValue) =>
  a.flags === b.flags &&
  a.identity === b.identity &&
  a.revision === b.revision &&
  a.tables[0][0] === b.tables[0][0] &&
  a.tables[0][1] === b.tables[0][1] &&
  a.tables[1][0] === b.tables[1][0] &&
  a.tables[1][1] === b.tables[1][1];

/** A rule set as it is in the kernel under one table id. */
class KernelTable {
  entries: TableEntry[];
  fingerprint: string;
  /** Entries patched out in place, deleted once no packet can carry their identities (step 5). */
  pendingDeletes: TableEntry[] = [];
  private index?: Map<string, TableEntry>;

  readonly id: number;

  constructor(id: number, entries: TableEntry[]) {
    this.id = id;
    this.entries = entries;
    this.fingerprint = tableFingerprint(entries);
  }

  byKey(): Map<string, TableEntry> {
    this.index ??= new Map(this.entries.map((e) => [entryKey(e), e]));
    return this.index;
  }

  /** After an in-place patch: the content is what the index holds. */
  patched(): void {
    this.entries = [...this.byKey().values()];
    this.fingerprint = tableFingerprint(this.entries);
  }
}

export class Datapath {
  readonly ctl: Bpfctl;
  /** table id -> content as in the kernel */
  private kernelTables = new Map<number, KernelTable>();
  /** desired table key -> kernel table id */
  private assigned = new Map<string, number>();
  private endpoints = new Map<string, EndpointValue>();
  /** ipcache by LPM key hex (host entries too, though the kernel keeps them in cascade_hosts) */
  private ipcache = new Map<string, number>();
  private nextTable = 1;
  private config = { epoch: 0, generation: 0, clock: 0 };
  /** Last endpoint revision handed out (revisions are unique across endpoints). */
  private revision = 0;
  /** Pinned maps replaced on open because an upgrade changed their layout (their content is lost). */
  replacedMaps: string[] = [];

  private constructor(ctl: Bpfctl) {
    this.ctl = ctl;
  }

  /**
   * Loads the object (or adopts the maps already pinned under pinDir, keeping their content) and reads
   * the kernel state back, so a restarted agent reconciles instead of starting from nothing.
   */
  static async open(opts: {
    bpfctl: string;
    object: string;
    pinDir: string;
    policyMaxEntries?: number;
  }): Promise<Datapath> {
    const dp = new Datapath(new Bpfctl(opts.bpfctl));
    const [answer] = await dp.ctl.send(
      `load ${opts.object} ${opts.pinDir}${opts.policyMaxEntries ? ` ${opts.policyMaxEntries}` : ''}`,
    );
    dp.replacedMaps = answer?.startsWith('ok replaced ') ? answer.slice(12).trim().split(' ') : [];
    await dp.readBack();
    // Adopted maps may hold cached verdicts of table ids this process will reuse; the clock starts now.
    dp.config.clock = monotonicSeconds();
    await dp.invalidateVerdicts();
    return dp;
  }

  private async dump(map: string): Promise<[Buffer, Buffer][]> {
    const lines = await this.ctl.send(`dump ${map}`, [], 'count');
    return lines.slice(1).map((l) => {
      const [k, v] = l.split(' ') as [string, string];
      return [Buffer.from(k, 'hex'), Buffer.from(v, 'hex')];
    });
  }

  private async readBack(): Promise<void> {
    const read = new Map<number, TableEntry[]>();
    for (const [k, v] of await this.dump('cascade_policy')) {
      const { table, identity, proto, port, plen } = decodePolicyKey(k);
      const { precedence, verdict, rule } = decodePolicyValue(v);
      let t = read.get(table);
      if (!t) read.set(table, (t = []));
      t.push({ identity, proto, port, plen, precedence, verdict, rule });
      this.nextTable = Math.max(this.nextTable, table + 1);
    }
    for (const [id, entries] of read) this.kernelTables.set(id, new KernelTable(id, entries));
    for (const [k, v] of await this.dump('cascade_endpoints')) {
      const ep = decodeEndpointValue(v);
      this.endpoints.set(hex(k), ep);
      this.revision = Math.max(this.revision, ep.revision);
      // Tables without entries exist only as references from endpoints.
      for (const id of ep.tables.flat()) {
        if (id !== 0 && !this.kernelTables.has(id)) this.kernelTables.set(id, new KernelTable(id, []));
        this.nextTable = Math.max(this.nextTable, id + 1);
      }
    }
    for (const [k, v] of await this.dump('cascade_ipcache')) this.ipcache.set(hex(k), decodeIpcacheValue(v));
    for (const [k, v] of await this.dump('cascade_hosts'))
      this.ipcache.set(HOST_PREFIXLEN_HEX + hex(k), decodeIpcacheValue(v));
    const [cfg] = await this.ctl.send(`lookup cascade_config 00000000`);
    const v = cfg?.split(' ')[1];
    if (v && v !== 'none') this.config = decodeConfig(Buffer.from(v, 'hex'));
  }

  private async writeConfig(): Promise<void> {
    await this.ctl.send(`update cascade_config 00000000 ${hex(encodeConfig(this.config))}`);
  }

  /** Invalidates every verdict the kernel has cached (bumps the config epoch): one map write. */
  async invalidateVerdicts(): Promise<void> {
    this.config.epoch = (this.config.epoch + 1) >>> 0;
    await this.writeConfig();
  }

  /**
   * Advances conntrack's clock (seconds of CLOCK_MONOTONIC, the kernel's own monotonic clock, so it
   * keeps counting across agent restarts): packets stamp their flow with it, the collector compares.
   */
  async tick(now = monotonicSeconds()): Promise<void> {
    if (now === this.config.clock) return;
    this.config.clock = now >>> 0;
    await this.writeConfig();
  }

  /**
   * Deletes conntrack entries idle longer than their limit (TCP 6 h, closing TCP 10 s, others 60 s by
   * default; seconds of the clock). Ticks the clock to `now` first.
   */
  async collectConntrack(
    opts: { now?: number; tcp?: number; other?: number; closing?: number } = {},
  ): Promise<{ scanned: number; deleted: number }> {
    const now = opts.now ?? monotonicSeconds();
    await this.tick(now);
    const limits = [opts.tcp ?? 21600, opts.other ?? 60, opts.closing ?? 10];
    const [line] = await this.ctl.send(`ctgc ${now >>> 0} ${limits.join(' ')}`);
    const [, scanned, deleted] = line!.split(' ');
    return { scanned: Number(scanned), deleted: Number(deleted) };
  }

  /** Makes every conntrack entry check its endpoint's revision again (bumps the generation). */
  private async recheckConntrack(): Promise<void> {
    this.config.generation = (this.config.generation + 1) >>> 0;
    await this.writeConfig();
  }

  /** ipcache writes and deletes go to cascade_hosts for host keys, to the LPM trie for the rest. */
  private async ipcacheUpdates(pairs: [string, string][]): Promise<void> {
    await this.updates(
      'cascade_hosts',
      pairs.filter(([k]) => isHostKey(k)).map(([k, v]) => [k.slice(8), v]),
    );
    await this.updates(
      'cascade_ipcache',
      pairs.filter(([k]) => !isHostKey(k)),
    );
  }

  private async ipcacheDeletes(keys: string[]): Promise<void> {
    await this.deletes(
      'cascade_hosts',
      keys.filter(isHostKey).map((k) => k.slice(8)),
    );
    await this.deletes(
      'cascade_ipcache',
      keys.filter((k) => !isHostKey(k)),
    );
  }

  /** Writes (or deletes) rule-set entries of one table: binary records, batch ops in the kernel. */
  private async policy(
    op: 'writeb' | 'eraseb',
    table: number,
    entries: readonly TableEntry[],
  ): Promise<void> {
    for (let i = 0; i < entries.length; i += 50_000) {
      const chunk = entries.slice(i, i + 50_000);
      await this.ctl.send(
        `${op} cascade_policy ${chunk.length}`,
        policyRecords(table, chunk, op === 'writeb'),
      );
    }
  }

  private async updates(map: string, pairs: [string, string][]): Promise<void> {
    for (let i = 0; i < pairs.length; i += 50_000) {
      const chunk = pairs.slice(i, i + 50_000);
      await this.ctl.send(
        `updates ${map} ${chunk.length}`,
        chunk.map(([k, v]) => `${k} ${v}`),
      );
    }
  }

  private async deletes(map: string, keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 50_000) {
      const chunk = keys.slice(i, i + 50_000);
      await this.ctl.send(`deletes ${map} ${chunk.length}`, chunk);
    }
  }

  /** `onStep` runs after each group of kernel writes (tests probe there: update safety). */
  async sync(desired: DesiredState, onStep?: (step: string) => Promise<void>): Promise<SyncReport> {
    const step = async (s: string) => {
      if (onStep) await onStep(s);
    };
    const report: SyncReport = {
      entriesWritten: 0,
      entriesDeleted: 0,
      tablesCreated: 0,
      tablesFreed: 0,
      tablesPatchedInPlace: 0,
      endpointsSwitched: 0,
      ipcacheWritten: 0,
      refused: [],
      failClosed: [],
    };
    const wantIpcache = new Map(desired.ipcache.map((e) => [ipcacheKeyHex(e.prefix), e.identity]));
    const liveIdentities = new Set(this.ipcache.values());
    const nextIdentities = new Set(wantIpcache.values());
    // Identities that no packet can carry during this sync: new ones (not mapped yet) and vanishing ones.
    const transient = (id: number) => !liveIdentities.has(id) || !nextIdentities.has(id);

    // 1. Tables: reuse by content, patch in place where only transient identities differ, else new id.
    const byContent = new Map<string, number>();
    for (const t of this.kernelTables.values()) byContent.set(t.fingerprint, t.id);
    const nextAssigned = new Map<string, number>();
    const claimed = new Set<number>();
    for (const [key, entries] of desired.tables) {
      const same = byContent.get(tableFingerprint(entries));
      if (same !== undefined && !claimed.has(same)) {
        nextAssigned.set(key, same);
        claimed.add(same);
        continue;
      }
      const prevId = this.assigned.get(key);
      const prev = prevId === undefined ? undefined : this.kernelTables.get(prevId);
      if (prev && !claimed.has(prev.id)) {
        // In place only if every changed entry is of a transient identity (stop at the first other).
        const have = prev.byKey();
        const adds: TableEntry[] = [];
        const dels: TableEntry[] = [];
        let inPlace = true;
        let kept = 0;
        for (const e of entries) {
          const h = have.get(entryKey(e));
          if (h) kept++;
          if (h && sameValue(h, e)) continue;
          if (!transient(e.identity)) {
            inPlace = false;
            break;
          }
          adds.push(e);
        }
        if (inPlace && kept < have.size) {
          const want = new Set(entries.map(entryKey));
          for (const [k, h] of have) {
            if (want.has(k)) continue;
            if (!transient(h.identity)) {
              inPlace = false;
              break;
            }
            dels.push(h);
          }
        }
        if (inPlace) {
          try {
            await this.policy('writeb', prev.id, adds);
          } catch (e) {
            // Put the table back as it was (bookkeeping must match the kernel).
            const back = adds.map((a) => have.get(entryKey(a))).filter((h) => h !== undefined);
            const fresh = adds.filter((a) => !have.has(entryKey(a)));
            await this.policy('writeb', prev.id, back).catch(() => {});
            await this.policy('eraseb', prev.id, fresh).catch(() => {});
            report.refused.push({ table: key, entries: adds.length, error: (e as Error).message });
            nextAssigned.set(key, prev.id);
            claimed.add(prev.id);
            continue;
          }
          for (const e of adds) have.set(entryKey(e), e);
          prev.patched();
          prev.pendingDeletes = dels;
          report.entriesWritten += adds.length;
          if (adds.length || dels.length) report.tablesPatchedInPlace++;
          nextAssigned.set(key, prev.id);
          claimed.add(prev.id);
          continue;
        }
      }
      const id = this.nextTable++;
      try {
        await this.policy('writeb', id, entries);
      } catch (e) {
        // Refused whole: remove what was written of it; endpoints keep their last good table.
        await this.policy('eraseb', id, entries).catch(() => {});
        report.refused.push({ table: key, entries: entries.length, error: (e as Error).message });
        continue;
      }
      this.kernelTables.set(id, new KernelTable(id, entries));
      report.entriesWritten += entries.length;
      report.tablesCreated++;
      nextAssigned.set(key, id);
      claimed.add(id);
    }

    if (report.tablesPatchedInPlace) await this.invalidateVerdicts();
    await step('tables written');
    // 2. ipcache additions and changes.
    const ipAdds: [string, string][] = [];
    for (const [k, id] of wantIpcache)
      if (this.ipcache.get(k) !== id) ipAdds.push([k, hex(encodeIpcacheValue(id))]);
    await this.ipcacheUpdates(ipAdds);
    for (const [k, v] of ipAdds) this.ipcache.set(k, Buffer.from(v, 'hex').readUInt32LE(0));
    report.ipcacheWritten = ipAdds.length;

    await step('ipcache written');
    // 3. Endpoints: one update each.
    const wantEndpoints = new Map<string, EndpointValue>();
    for (const ep of desired.endpoints) {
      const k = endpointKeyHex(ep.ip);
      const prev = this.endpoints.get(k);
      const ia = nextAssigned.get(ep.tables.ingress.admin);
      const il = nextAssigned.get(ep.tables.ingress.lower);
      const ea = nextAssigned.get(ep.tables.egress.admin);
      const el = nextAssigned.get(ep.tables.egress.lower);
      // A table that was refused keeps the endpoint's last good one (none: fail closed).
      const tables: EndpointValue['tables'] = [
        [ia ?? prev?.tables[0][0] ?? 0, il ?? prev?.tables[0][1] ?? 0],
        [ea ?? prev?.tables[1][0] ?? 0, el ?? prev?.tables[1][1] ?? 0],
      ];
      const missing = ia === undefined || il === undefined || ea === undefined || el === undefined;
      let flags = ep.flags;
      if (missing && !prev) {
        flags |= EP_FLAGS.FAIL_CLOSED;
        report.failClosed.push(ep.ip);
      } else if (missing && prev) flags = prev.flags;
      const changedTables =
        !prev ||
        tables[0][0] !== prev.tables[0][0] ||
        tables[0][1] !== prev.tables[0][1] ||
        tables[1][0] !== prev.tables[1][0] ||
        tables[1][1] !== prev.tables[1][1];
      const v: EndpointValue = {
        flags,
        tables,
        identity: ep.identity,
        revision: changedTables ? (this.revision = (this.revision + 1) >>> 0) : prev.revision,
      };
      wantEndpoints.set(k, v);
    }
    const epWrites: [string, string][] = [];
    for (const [k, v] of wantEndpoints) {
      const prev = this.endpoints.get(k);
      if (!prev || !sameEndpoint(prev, v)) epWrites.push([k, hex(encodeEndpointValue(v))]);
    }
    await this.updates('cascade_endpoints', epWrites);
    report.endpointsSwitched = epWrites.length;
    const epDeletes = [...this.endpoints.keys()].filter((k) => !wantEndpoints.has(k));
    await this.deletes('cascade_endpoints', epDeletes);
    this.endpoints = wantEndpoints;
    if (epWrites.length || epDeletes.length) await this.recheckConntrack();

    await step('endpoints switched');
    // 4. ipcache removals.
    const ipDeletes = [...this.ipcache.keys()].filter((k) => !wantIpcache.has(k));
    await this.ipcacheDeletes(ipDeletes);
    for (const k of ipDeletes) this.ipcache.delete(k);

    await step('ipcache pruned');
    // 5. Old tables and vanished identities' entries.
    const inUse = new Set<number>();
    let patchedDeletes = false;
    for (const { tables: t } of this.endpoints.values())
      inUse.add(t[0][0]).add(t[0][1]).add(t[1][0]).add(t[1][1]);
    for (const t of [...this.kernelTables.values()]) {
      if (t.pendingDeletes.length) {
        patchedDeletes = true;
        await this.policy('eraseb', t.id, t.pendingDeletes);
        const have = t.byKey();
        for (const e of t.pendingDeletes) have.delete(entryKey(e));
        t.patched();
        report.entriesDeleted += t.pendingDeletes.length;
        t.pendingDeletes = [];
      }
      if (inUse.has(t.id)) continue;
      await this.policy('eraseb', t.id, t.entries);
      report.entriesDeleted += t.entries.length;
      report.tablesFreed++;
      this.kernelTables.delete(t.id);
    }
    this.assigned = nextAssigned;
    if (patchedDeletes) await this.invalidateVerdicts();
    await step('old tables freed');
    return report;
  }

  async run(
    prog: 'from_endpoint' | 'to_endpoint',
    packet: Buffer,
    repeat = 1,
  ): Promise<{ retval: number; ns: number }> {
    const [line] = await this.ctl.send(`run ${prog} ${hex(packet)}${repeat > 1 ? ` ${repeat}` : ''}`);
    const [, r, d] = line!.split(' ');
    return { retval: Number(r), ns: Number(d) };
  }

  async counter(index: number): Promise<number> {
    const k = Buffer.alloc(4);
    k.writeUInt32LE(index, 0);
    const [line] = await this.ctl.send(`sum cascade_counters ${hex(k)}`);
    return Number(line!.split(' ')[1]);
  }

  /** Every verdict counter, summed over the CPUs. */
  async counters(): Promise<Record<keyof typeof COUNTERS, number>> {
    const out = {} as Record<keyof typeof COUNTERS, number>;
    for (const [name, index] of Object.entries(COUNTERS) as [keyof typeof COUNTERS, number][])
      out[name] = await this.counter(index);
    return out;
  }

  async events(): Promise<FlowEvent[]> {
    const lines = await this.ctl.send('events', [], 'until-ok');
    return lines.slice(0, -1).map((l) => decodeFlowEvent(Buffer.from(l, 'hex')));
  }

  async clearConntrack(): Promise<void> {
    const keys = (await this.dump('cascade_ct')).map(([k]) => hex(k));
    await this.deletes('cascade_ct', keys);
  }

  async attach(ifname: string): Promise<void> {
    // tc ingress of the host-side interface sees what the pod sends: the pod's egress.
    await this.ctl.send(`attach ${ifname} ingress from_endpoint`);
    await this.ctl.send(`attach ${ifname} egress to_endpoint`);
  }

  async detach(ifname: string): Promise<void> {
    await this.ctl.send(`detach ${ifname} ingress`);
    await this.ctl.send(`detach ${ifname} egress`);
  }

  tableId(key: string): number | undefined {
    return this.assigned.get(key);
  }

  async close(): Promise<void> {
    await this.ctl.close();
  }
}
