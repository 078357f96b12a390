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
  decodeEndpointValue,
  decodeIpcacheValue,
  decodePolicyKey,
  decodePolicyValue,
  type EndpointValue,
  EP_FLAGS,
  encodeEndpointValue,
  encodeIpcacheValue,
  POD_FIRST,
} from './codecs.ts';
import { flowCacheBytes, possibleCpus } from './flowcache.ts';
import { KernelMaps, monotonicSeconds } from './kernel.ts';
import { ServiceState } from './services.ts';
import { StagedState } from './staged-maps.ts';
import {
  type DesiredState,
  entryKey,
  HOST_PREFIXLEN_HEX,
  ipcacheKeyOf,
  isHostKey,
  policyRecords,
  type SyncReport,
  sameValue,
  TABLE_ID_MASK,
  type TableEntry,
  tableFingerprint,
  tableIdOf,
} from './state.ts';

const hex = (b: Buffer) => b.toString('hex');

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
  a.ifindex === b.ifindex &&
  a.identity === b.identity &&
  a.revision === b.revision &&
  a.tables[0][0] === b.tables[0][0] &&
  a.tables[0][1] === b.tables[0][1] &&
  a.tables[1][0] === b.tables[1][0] &&
  a.tables[1][1] === b.tables[1][1];

/** A rule set as it is in the kernel under one table id. */
class KernelTable {
  /** Of the admin tier (may use the reserve); tables read back after a restart count as not. */
  admin = false;
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

export class Datapath extends KernelMaps {
  /** table id -> content as in the kernel */
  private kernelTables = new Map<number, KernelTable>();
  /** desired table key -> kernel table id */
  private assigned = new Map<string, number>();
  private endpoints = new Map<string, EndpointValue>();
  /** ipcache by LPM key hex (host entries too, though the kernel keeps them in cascade_hosts) */
  private ipcache = new Map<string, number>();
  private nextTable = 1;
  private services = new ServiceState();
  private staged = new StagedState();
  /** Last endpoint revision handed out (revisions are unique across endpoints). */
  private revision = 0;
  /** Pinned maps replaced on open because an upgrade changed their layout (their content is lost). */
  replacedMaps: string[] = [];
  /**
   * Flows copied on open from the conntrack of an older Cascade (an LRU hash, before the
   * set-associative table): undefined when there was none. What its programs add until the new ones
   * are attached is copied by `finishMigration()` (or the next collection).
   */
  migratedFlows?: number;
  /** Policy map capacity, and the part of it only admin-tier tables may use. */
  capacity = 0;
  /** The flow cache's slots per CPU, as loaded, and its memory on this node (every possible CPU). */
  flowSlots = 0;
  flowCacheBytes = 0;
  adminReserve = 0;

  private constructor(ctl: Bpfctl) {
    super(ctl);
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
    /** Policy map entries only admin-tier tables may use (default: 1/8 of the capacity). */
    adminReserve?: number;
    /** The flow cache's slots per CPU (flowCacheSlots(); default: the object's 16,384). */
    flowSlots?: number;
  }): Promise<Datapath> {
    const dp = new Datapath(new Bpfctl(opts.bpfctl));
    let answer: string | undefined;
    try {
      [answer] = await dp.ctl.send(
        `load ${opts.object} ${opts.pinDir} ${opts.policyMaxEntries ?? 0} ${opts.flowSlots ?? 0}`,
      );
    } catch (e) {
      // nothing was loaded: the helper process goes with the error
      await dp.ctl.close().catch(() => {});
      throw e;
    }
    // "ok [replaced MAP...] [migrated cascade_ct N]"
    const words = (answer ?? '').split(' ');
    const at = words.indexOf('migrated');
    dp.replacedMaps = words[1] === 'replaced' ? words.slice(2, at < 0 ? undefined : at) : [];
    dp.migratedFlows = at < 0 ? undefined : Number(words[at + 2]);
    const [cap] = await dp.ctl.send('maxentries cascade_policy');
    dp.capacity = Number(cap!.split(' ')[1]);
    const [slots] = await dp.ctl.send('maxentries cascade_flows');
    dp.flowSlots = Number(slots!.split(' ')[1]);
    dp.flowCacheBytes = flowCacheBytes(dp.flowSlots, possibleCpus());
    dp.adminReserve = Math.min(dp.capacity, opts.adminReserve ?? Math.floor(dp.capacity / 8));
    await dp.readBack();
    // Adopted maps may hold cached verdicts of table ids this process will reuse; the clock starts now.
    dp.config.clock = monotonicSeconds();
    await dp.invalidateVerdicts();
    return dp;
  }

  private async readBack(): Promise<void> {
    const read = new Map<number, TableEntry[]>();
    for (const [k, v] of await this.dump('cascade_policy')) {
      const { table, identity, proto, port, plen } = decodePolicyKey(k);
      const { precedence, verdict, rule } = decodePolicyValue(v);
      let t = read.get(table);
      if (!t) read.set(table, (t = []));
      t.push({ identity, proto, port, plen, precedence, verdict, rule });
      this.nextTable = Math.max(this.nextTable, (table & TABLE_ID_MASK) + 1);
    }
    for (const [id, entries] of read) this.kernelTables.set(id, new KernelTable(id, entries));
    for (const [k, v] of await this.dump('cascade_endpoints')) {
      const ep = decodeEndpointValue(v);
      this.endpoints.set(hex(k), ep);
      this.revision = Math.max(this.revision, ep.revision);
      // Tables without entries exist only as references from endpoints.
      for (const id of ep.tables.flat()) {
        if (id !== 0 && !this.kernelTables.has(id)) this.kernelTables.set(id, new KernelTable(id, []));
        this.nextTable = Math.max(this.nextTable, (id & TABLE_ID_MASK) + 1);
      }
    }
    for (const [k, v] of await this.dump('cascade_ipcache')) this.ipcache.set(hex(k), decodeIpcacheValue(v));
    for (const [k, v] of await this.dump('cascade_hosts'))
      this.ipcache.set(HOST_PREFIXLEN_HEX + hex(k), decodeIpcacheValue(v));
    this.services.readBack(await this.dump('cascade_services'), await this.dump('cascade_backends'));
    await this.staged.readBack(this.mapOps);
    this.config = (await this.readConfig()) ?? this.config;
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

  /** Entries held by tables outside the admin tier. */
  private lowerEntries(): number {
    let n = 0;
    for (const t of this.kernelTables.values()) if (!t.admin) n += t.entries.length + t.pendingDeletes.length;
    return n;
  }

  /** Throws when `adding` entries of a non-admin table would eat into the admin tier's reserve. */
  private checkReserve(admin: boolean, adding: number): void {
    if (admin || adding === 0) return;
    const used = this.lowerEntries();
    const limit = this.capacity - this.adminReserve;
    if (used + adding > limit)
      throw new Error(
        `namespaced and baseline rule sets would use ${used + adding} of the ${limit} policy map entries they may use (${this.adminReserve} of ${this.capacity} are reserved for admin tiers)`,
      );
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
      stagedWritten: 0,
      stagedRefused: [],
    };
    const wantIpcache = new Map(desired.ipcache.map((e) => [ipcacheKeyHex(e.prefix), e.identity]));
    const liveIdentities = new Set(this.ipcache.values());
    const nextIdentities = new Set(wantIpcache.values());
    // Identities that no packet can carry during this sync: new ones (not mapped yet) and vanishing ones.
    // Never a reserved identity: every packet meets the wildcard and all-pods classes, and world and
    // host are what addresses without an entry carry (found in review: a wildcard entry was patched in
    // place, so established flows were not judged again under it).
    const transient = (id: number) => id >= POD_FIRST && (!liveIdentities.has(id) || !nextIdentities.has(id));

    // 1. Tables: reuse by content, patch in place where only transient identities differ, else new id.
    const byContent = new Map<string, number>();
    for (const t of this.kernelTables.values()) byContent.set(t.fingerprint, t.id);
    const nextAssigned = new Map<string, number>();
    const claimed = new Set<number>();
    for (const [key, entries] of desired.tables) {
      const admin = desired.adminTables?.has(key) ?? false;
      const same = byContent.get(tableFingerprint(entries));
      if (same !== undefined && !claimed.has(same)) {
        nextAssigned.set(key, same);
        claimed.add(same);
        this.kernelTables.get(same)!.admin = admin;
        continue;
      }
      const prevId = this.assigned.get(key);
      const prev = prevId === undefined ? undefined : this.kernelTables.get(prevId);
      // in place only while the table's class flags (in its id) stay true
      if (prev && !claimed.has(prev.id) && prev.id === tableIdOf(prev.id & TABLE_ID_MASK, entries)) {
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
            this.checkReserve(admin, adds.filter((a) => !have.has(entryKey(a))).length);
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
      const id = tableIdOf(this.nextTable++, entries);
      try {
        this.checkReserve(admin, entries.length);
        await this.policy('writeb', id, entries);
      } catch (e) {
        // Refused whole: remove what was written of it; endpoints keep their last good table.
        await this.policy('eraseb', id, entries).catch(() => {});
        report.refused.push({ table: key, entries: entries.length, error: (e as Error).message });
        continue;
      }
      const kt = new KernelTable(id, entries);
      kt.admin = admin;
      this.kernelTables.set(id, kt);
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
    // 3. Endpoints: one update each; their staged tables first (staged-maps.ts).
    const wantEndpoints = new Map<string, EndpointValue>();
    const wantStaged = new Map<string, [[number, number], [number, number]]>();
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
      // staged tables, all four written (a refused one: this endpoint is not judged by the staged set)
      const s = ep.staged;
      const sids = s && [
        nextAssigned.get(s.ingress.admin),
        nextAssigned.get(s.ingress.lower),
        nextAssigned.get(s.egress.admin),
        nextAssigned.get(s.egress.lower),
      ];
      if (sids?.every((id) => id !== undefined) && !(flags & EP_FLAGS.FAIL_CLOSED)) {
        wantStaged.set(k, [
          [sids[0]!, sids[1]!],
          [sids[2]!, sids[3]!],
        ]);
        flags |= EP_FLAGS.STAGED;
      } else flags &= ~EP_FLAGS.STAGED;
      if (s && !wantStaged.has(k)) report.stagedRefused.push(ep.ip);
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
        ifindex: ep.ifindex,
        revision: changedTables ? (this.revision = (this.revision + 1) >>> 0) : prev.revision,
      };
      wantEndpoints.set(k, v);
    }
    report.stagedWritten = await this.staged.write(this.mapOps, wantStaged);
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
    await this.staged.prune(this.mapOps, wantStaged);
    if (epWrites.length || epDeletes.length) await this.recheckConntrack();
    // The node's own identity, once the tables that hold its entries are in place (a change drops
    // the cached verdicts; flows conntrack already holds keep theirs, as for any identity change).
    if (desired.hostIdentity !== undefined) await this.setHostIdentity(desired.hostIdentity);

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
    for (const id of this.staged.inUse()) inUse.add(id);
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
    // 6. Services, last: their backends' identities are in the ipcache by now.
    if (desired.services) report.services = await this.services.sync(desired.services, this.mapOps);
    return report;
  }

  /** The map operations the Service and staged states write through. */
  private readonly mapOps = {
    updates: (m: string, p: [string, string][]) => this.updates(m, p),
    deletes: (m: string, k: string[]) => this.deletes(m, k),
    dump: (m: string) => this.dump(m),
  };

  tableId(key: string): number | undefined {
    return this.assigned.get(key);
  }
}
