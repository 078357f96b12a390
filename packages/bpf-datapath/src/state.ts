// The desired datapath state and its encoding: rule-set entries, endpoints bound to their interfaces,
// the ipcache; the map contents a fresh datapath holds (offline, for the CLI and the reference), the
// binary records bpfctl writes, and the order-independent table fingerprints the loader compares by.
import {
  addr16,
  type EndpointValue,
  EP_FLAGS,
  encodeEndpointValue,
  encodeIpcacheKey,
  encodeIpcacheValue,
  encodePolicyKey,
  encodePolicyValue,
  ID,
  SIZES,
  VERDICT,
  type VerdictName,
} from './codecs.ts';
import { type DesiredService, encodeServices, type ServiceSyncReport } from './services.ts';

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
  /**
   * The tables the staged set would judge its new flows by, where they differ from `tables` (never
   * enforced: cascade_staged, flag EP_STAGED). Their entries are in DesiredState.tables too.
   */
  staged?: Record<'ingress' | 'egress', { admin: string; lower: string }>;
  /**
   * The endpoint's host-side interface, found from the kernel (never from pod metadata). The program
   * drops the endpoint's packets on any other interface. Offline and in BPF_PROG_TEST_RUN: the
   * loopback (TEST_RUN_IFINDEX).
   */
  ifindex: number;
}

export interface DesiredState {
  /** CIDR or plain address (a host prefix) -> identity. */
  ipcache: { prefix: string; identity: number }[];
  endpoints: DesiredEndpoint[];
  tables: Map<string, TableEntry[]>;
  /**
   * Tables of the admin tier: they may use the policy map's capacity reserved for admins; every other
   * table (namespaced NetworkPolicies, baseline) is refused before it eats into that reserve.
   */
  adminTables?: ReadonlySet<string>;
  /** Service frontends and their backends (absent: the Service maps are left as they are). */
  services?: DesiredService[];
  /**
   * The identity this node's own addresses (ipcache identity HOST) are judged as: looked up in the
   * admin layer and the lower layer like any remote, except that the lower layer's NetworkPolicy
   * entries (precedence band at or above L_NP_ISOLATION) never block it. 0: HOST is always allowed.
   * Absent: left as it is.
   */
  hostIdentity?: number;
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
  /** cascade_staged entries written; endpoints whose staged tables were refused (not judged by them). */
  stagedWritten: number;
  stagedRefused: string[];
  services?: ServiceSyncReport;
}

/** The ipcache key of a CIDR or plain address (IPv4 as IPv4-mapped IPv6: prefixlen + 96). */
export function ipcacheKeyOf(prefix: string): Buffer {
  const [ip, len] = prefix.split('/') as [string, string | undefined];
  const v4 = /^\d+\.\d+\.\d+\.\d+$/.test(ip);
  const l = len === undefined ? (v4 ? 32 : 128) : Number(len);
  return encodeIpcacheKey({ prefixlen: v4 ? l + 96 : l, addr: addr16(ip) });
}

/** Host prefixes (/32, /128) live in the exact-match cascade_hosts map, the rest in the LPM trie. */
export const HOST_PREFIXLEN_HEX = '80000000'; // prefixlen 128, little endian
export const isHostKey = (lpmKeyHex: string) => lpmKeyHex.startsWith(HOST_PREFIXLEN_HEX);

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
  /** cascade_services and cascade_backends (list ids 1.. in order) */
  services: [Buffer, Buffer][];
  backends: [Buffer, Buffer][];
  tableNumbers: Map<string, number>;
} {
  const tableNumbers = new Map<string, number>();
  const policy: [Buffer, Buffer][] = [];
  for (const [key, entries] of desired.tables) {
    const n = tableIdOf(tableNumbers.size + 1, entries);
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
    return [
      addr16(ep.ip),
      encodeEndpointValue({ flags, tables, identity: ep.identity, revision: i + 1, ifindex: ep.ifindex }),
    ];
  });
  const ipcache: [Buffer, Buffer][] = [];
  const hosts: [Buffer, Buffer][] = [];
  for (const e of desired.ipcache) {
    const k = ipcacheKeyOf(e.prefix);
    if (isHostKey(k.toString('hex'))) hosts.push([k.subarray(4), encodeIpcacheValue(e.identity)]);
    else ipcache.push([k, encodeIpcacheValue(e.identity)]);
  }
  return { ipcache, hosts, endpoints, policy, ...encodeServices(desired.services ?? []), tableNumbers };
}

/**
 * Bits of a table id that tell the program which of a layer's three lookups it may skip, because the
 * table holds no entry of that class: none of a specific peer identity, none for all pods, no
 * wildcard. A table's content is immutable under its id for these classes (the loader never patches a
 * table in place when its flags would change), so the bits never lie. They say "absent": an id without
 * them (written by an older agent) is looked up in full, so an upgrade never skips a lookup it needs.
 */
export const TABLE_FLAGS = { NO_PEERS: 2 ** 29, NO_WILDCARD: 2 ** 30, NO_ALL_PODS: 2 ** 31 } as const;
/** The counter part of a table id (below the flag bits). */
export const TABLE_ID_MASK = 2 ** 29 - 1;

export function tableFlags(entries: readonly TableEntry[]): number {
  let peers = false;
  let wildcard = false;
  let allPods = false;
  for (const e of entries) {
    if (e.identity === ID.WILDCARD) wildcard = true;
    else if (e.identity === ID.ALL_PODS) allPods = true;
    else peers = true;
  }
  return (
    (peers ? 0 : TABLE_FLAGS.NO_PEERS) +
    (wildcard ? 0 : TABLE_FLAGS.NO_WILDCARD) +
    (allPods ? 0 : TABLE_FLAGS.NO_ALL_PODS)
  );
}

/** The id of table number `n` (1..TABLE_ID_MASK) holding `entries`: its number and its flag bits. */
export const tableIdOf = (n: number, entries: readonly TableEntry[]) => n + tableFlags(entries);

/** Entry content without the table id and value: its place in a table. */
export const entryKey = (e: TableEntry) =>
  `${e.identity}/${e.proto}/${e.proto === 0 ? 0 : e.port}/${e.proto === 0 ? 0 : e.plen}`;
export const matchLen = (e: TableEntry) => (e.proto === 0 ? 0 : 8 + e.plen);
export const sameValue = (a: TableEntry, b: TableEntry) =>
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
