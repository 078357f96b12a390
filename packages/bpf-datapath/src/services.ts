// Services in the datapath: the frontends (ClusterIP, NodePort) and their backend lists as the program
// reads them (cascade_services, cascade_backends), and how the loader brings them to a desired state
// without a packet ever seeing a half-written list:
//   1. a new or changed frontend's backends are written under a new list id (slots 0..n-1);
//   2. the frontend switches to that id and size with one map update;
//   3. frontends no longer wanted are deleted, then the lists nobody names any more;
//   4. translated flows whose backend left its frontend are forgotten (cascade_nat / cascade_revnat
//      entries deleted): their next packet picks a live backend and is judged afresh, as kube-proxy
//      flushes UDP conntrack entries of removed endpoints. A TCP connection to a removed backend is
//      answered with a reset by the new backend, the behaviour of Cilium's socket-less load balancer.
import {
  addr16,
  decodeBackendKey,
  decodeCtKey,
  decodeNatValue,
  decodeSvcKey,
  decodeSvcValue,
  encodeBackendKey,
  encodeNatValue,
  encodeSvcKey,
  encodeSvcValue,
  type NatValue,
  type SvcKey,
} from './codecs.ts';

export interface DesiredService extends SvcKey {
  /** Where a new flow may be sent (ready endpoints, or serving-and-terminating ones when none is). */
  backends: NatValue[];
  /** For people: the Service and port (`ns/name:port`), not written to the kernel. */
  name?: string;
}

/** The zero address a NodePort frontend has in cascade_services, per family of the node address
 * (IPv4 0.0.0.0 is ::ffff:0.0.0.0 in the map). */
export const NODEPORT_ADDR = { 4: '0.0.0.0', 6: '::' } as const;
/** Backends per frontend the loader writes (a longer list is cut and reported). */
export const MAX_BACKENDS = 4096;
/**
 * Frontends and backend slots the loader writes in all: half of cascade_services (65,536) and of
 * cascade_backends (262,144), so that a changed list always fits beside the old one (make before
 * break). Services are written by tenants: past these, frontends are left out (reported in `cut`,
 * untranslated: kube-proxy answers) instead of a sync that fails for everyone.
 */
export const MAX_FRONTENDS = 32_768;
export const MAX_BACKEND_SLOTS = 131_072;

export interface ServiceSyncReport {
  frontendsWritten: number;
  frontendsDeleted: number;
  backendsWritten: number;
  natForgotten: number;
  /** Frontends whose backend list was cut to MAX_BACKENDS. */
  cut: string[];
}

interface Frontend {
  id: number;
  list: string;
  backends: NatValue[];
  /** slots the list has in the kernel (more than `backends` when one was missing on read-back) */
  slots: number;
}

const hex = (b: Buffer) => b.toString('hex');
const isV4 = (a: string) => /^\d+\.\d+\.\d+\.\d+$/.test(a) || a.startsWith('::ffff:');
const backendKey = (b: NatValue) => `${hex(addr16(b.addr))}/${b.port}`;

/** The backends a frontend may use: its own family only, sorted and deduplicated (a stable list id). */
export function frontendBackends(s: DesiredService): NatValue[] {
  const v4 = isV4(s.addr);
  const seen = new Map<string, NatValue>();
  for (const b of s.backends) {
    if (isV4(b.addr) !== v4 || !(b.port > 0 && b.port < 65536)) continue;
    // SCTP's CRC32c covers the ports and cannot be patched: only backends on the frontend's port
    if (s.proto === 132 && b.port !== s.port) continue;
    seen.set(backendKey(b), b);
  }
  return [...seen.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, b]) => b);
}

/** The map contents a fresh datapath holds for `services` (list ids 1.. in order): offline. */
export function encodeServices(services: readonly DesiredService[]): {
  services: [Buffer, Buffer][];
  backends: [Buffer, Buffer][];
} {
  const out = { services: [] as [Buffer, Buffer][], backends: [] as [Buffer, Buffer][] };
  let id = 0;
  for (const s of services) {
    const list = frontendBackends(s).slice(0, MAX_BACKENDS);
    id++;
    list.forEach((b, slot) => out.backends.push([encodeBackendKey(id, slot), encodeNatValue(b)]));
    out.services.push([encodeSvcKey(s), encodeSvcValue({ id, count: list.length })]);
  }
  return out;
}

/**
 * cascade_services and cascade_backends as read back (or encoded): frontend key hex -> its list id and
 * its slots 0..count-1 (undefined where a slot is missing), for the loader and the reference datapath.
 */
export function decodeServiceMaps(
  services: [Buffer, Buffer][],
  backends: [Buffer, Buffer][],
): Map<string, { key: SvcKey; id: number; backends: (NatValue | undefined)[] }> {
  const lists = new Map<number, Map<number, NatValue>>();
  for (const [k, v] of backends) {
    const { id, slot } = decodeBackendKey(k);
    let l = lists.get(id);
    if (!l) lists.set(id, (l = new Map()));
    l.set(slot, decodeNatValue(v));
  }
  const out = new Map<string, { key: SvcKey; id: number; backends: (NatValue | undefined)[] }>();
  for (const [k, v] of services) {
    const { id, count } = decodeSvcValue(v);
    const l = lists.get(id);
    out.set(hex(k), {
      key: decodeSvcKey(k),
      id,
      backends: Array.from({ length: count }, (_, i) => l?.get(i)),
    });
  }
  return out;
}

export interface MapOps {
  updates(map: string, pairs: [string, string][]): Promise<void>;
  deletes(map: string, keys: string[]): Promise<void>;
  dump(map: string): Promise<[Buffer, Buffer][]>;
}

/** The loader's view of the kernel's Service maps. */
export class ServiceState {
  private frontends = new Map<string, Frontend>();
  private nextId = 1;
  /** the desired list of the last sync: the same array again (nothing changed) costs nothing */
  private last?: readonly DesiredService[];

  readBack(services: [Buffer, Buffer][], backends: [Buffer, Buffer][]): void {
    for (const [k, f] of decodeServiceMaps(services, backends)) {
      // a list with a hole (a crash between writes) is rewritten at the next sync
      const whole = f.backends.every(Boolean);
      this.frontends.set(k, {
        id: f.id,
        backends: f.backends.filter((b): b is NatValue => Boolean(b)),
        slots: f.backends.length,
        list: whole ? (f.backends as NatValue[]).map(backendKey).join(',') : '?',
      });
      this.nextId = Math.max(this.nextId, f.id + 1);
    }
    for (const [k] of backends) this.nextId = Math.max(this.nextId, decodeBackendKey(k).id + 1);
  }

  async sync(desired: readonly DesiredService[], ops: MapOps): Promise<ServiceSyncReport> {
    const report: ServiceSyncReport = {
      frontendsWritten: 0,
      frontendsDeleted: 0,
      backendsWritten: 0,
      natForgotten: 0,
      cut: [],
    };
    if (desired === this.last) return report;
    const want = new Map<string, { s: DesiredService; backends: NatValue[] }>();
    let slots = 0;
    for (const s of desired) {
      const name = s.name ?? `${s.addr}:${s.port}/${s.proto}`;
      let backends = frontendBackends(s);
      if (backends.length > MAX_BACKENDS) {
        report.cut.push(name);
        backends = backends.slice(0, MAX_BACKENDS);
      }
      if (want.size >= MAX_FRONTENDS || slots + backends.length > MAX_BACKEND_SLOTS) {
        report.cut.push(`${name} (left out: the Service maps are full)`);
        continue;
      }
      slots += backends.length;
      want.set(hex(encodeSvcKey(s)), { s, backends });
    }
    const next = new Map<string, Frontend>();
    const backendWrites: [string, string][] = [];
    const frontWrites: [string, string][] = [];
    /** list ids no frontend names after this sync -> their length */
    const staleLists = new Map<number, number>();
    /** frontend key hex -> backends it no longer has */
    const gone = new Map<string, Set<string>>();
    for (const [k, { backends }] of want) {
      const list = backends.map(backendKey).join(',');
      const prev = this.frontends.get(k);
      if (prev && prev.list === list) {
        next.set(k, prev);
        continue;
      }
      const id = this.nextId;
      this.nextId = (this.nextId + 1) >>> 0 || 1;
      backends.forEach((b, slot) =>
        backendWrites.push([hex(encodeBackendKey(id, slot)), hex(encodeNatValue(b))]),
      );
      frontWrites.push([k, hex(encodeSvcValue({ id, count: backends.length }))]);
      next.set(k, { id, list, backends, slots: backends.length });
      if (prev) {
        staleLists.set(prev.id, prev.slots);
        const keep = new Set(backends.map(backendKey));
        const left = new Set(prev.backends.filter((b) => !keep.has(backendKey(b))).map(backendKey));
        if (left.size) gone.set(k, left);
      }
    }
    const frontDeletes: string[] = [];
    for (const [k, prev] of this.frontends) {
      if (want.has(k)) continue;
      frontDeletes.push(k);
      staleLists.set(prev.id, prev.slots);
      gone.set(k, new Set(prev.backends.map(backendKey)));
    }
    await ops.updates('cascade_backends', backendWrites);
    await ops.updates('cascade_services', frontWrites);
    await ops.deletes('cascade_services', frontDeletes);
    const listDeletes: string[] = [];
    for (const [id, length] of staleLists)
      for (let slot = 0; slot < length; slot++) listDeletes.push(hex(encodeBackendKey(id, slot)));
    await ops.deletes('cascade_backends', listDeletes);
    this.frontends = next;
    report.frontendsWritten = frontWrites.length;
    report.frontendsDeleted = frontDeletes.length;
    report.backendsWritten = backendWrites.length;
    if (gone.size) report.natForgotten = await forgetFlows(gone, ops);
    this.last = desired;
    return report;
  }
}

/** Deletes the translation state of flows whose backend left their frontend. */
async function forgetFlows(gone: Map<string, Set<string>>, ops: MapOps): Promise<number> {
  const byFront = new Map<string, Set<string>>();
  for (const [k, left] of gone) {
    const f = decodeSvcKey(Buffer.from(k, 'hex'));
    byFront.set(`${hex(addr16(f.addr))}/${f.port}/${f.proto}`, left);
  }
  const nodePort = (port: number, proto: number, v4: boolean) =>
    byFront.get(`${hex(addr16(NODEPORT_ADDR[v4 ? 4 : 6]))}/${port}/${proto}`);
  const natDeletes: string[] = [];
  const revKeys = new Set<string>();
  for (const [k, v] of await ops.dump('cascade_nat')) {
    const key = decodeCtKey(k);
    const left =
      byFront.get(`${hex(addr16(key.remote))}/${key.rport}/${key.proto}`) ??
      nodePort(key.rport, key.proto, isV4(key.remote));
    const b = decodeNatValue(v);
    if (!left?.has(backendKey(b))) continue;
    natDeletes.push(hex(k));
    // the reply entry: (local, backend, local port, backend port, protocol)
    const r = Buffer.from(k);
    addr16(b.addr).copy(r, 16);
    r.writeUInt16LE(b.port, 34);
    revKeys.add(hex(r));
  }
  await ops.deletes('cascade_nat', natDeletes);
  const have = new Set((await ops.dump('cascade_revnat')).map(([k]) => hex(k)));
  await ops.deletes(
    'cascade_revnat',
    [...revKeys].filter((k) => have.has(k)),
  );
  return natDeletes.length;
}
