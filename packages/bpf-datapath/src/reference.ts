// The userspace reference datapath: the kernel program's lookup, in TypeScript, over the same encoded
// map contents. It explains a verdict (which entry, which rule) and is the kernel's oracle in tests.
import {
  addr16,
  DIR,
  decodeEndpointValue,
  decodeIpcacheKey,
  decodeIpcacheValue,
  decodePolicyKey,
  decodePolicyValue,
  decodeStagedValue,
  type EndpointValue,
  EP_FLAGS,
  ID,
  isNetworkPolicyPrecedence,
  type NatValue,
  POD_FIRST,
  type PolicyKey,
  type PolicyValue,
} from './codecs.ts';
import { decodeServiceMaps, NODEPORT_ADDR } from './services.ts';

/** Where a pod's new flow to an address goes, as the program decides it (see `serviceTarget`). */
export type ServiceTarget =
  /** not a Service frontend (or one without backends): the flow goes to the address itself */
  | { kind: 'none' }
  /** the pod is its Service's only backend: untranslated, allowed as a pod reaching itself */
  | { kind: 'self' }
  /** one of these backends, picked at random per flow */
  | { kind: 'backends'; backends: NatValue[] };

export interface RefDecision {
  verdict: 'allow' | 'deny';
  reason:
    | 'not-endpoint'
    | 'not-enforced'
    | 'self'
    | 'host'
    | 'untranslated'
    | 'fail-closed'
    | 'admin'
    | 'lower'
    | 'miss';
  remoteIdentity?: number;
  entry?: PolicyKey & PolicyValue;
  passedBy?: PolicyKey & PolicyValue;
}

const POD_LAST = 0x00ffffff;

const frontKey = (addr: string, port: number, proto: number) =>
  `${addr16(addr).toString('hex')}/${port}/${proto}`;

function prefixMatch(a: Buffer, b: Buffer, bits: number): boolean {
  const full = bits >> 3;
  if (a.subarray(0, full).compare(b.subarray(0, full)) !== 0) return false;
  const rest = bits & 7;
  if (rest === 0) return true;
  const m = (0xff << (8 - rest)) & 0xff;
  return (a[full]! & m) === (b[full]! & m);
}

export class ReferenceDatapath {
  private readonly ipcache: { prefixlen: number; addr: Buffer; identity: number }[] = [];
  private readonly hosts = new Map<string, number>();
  private readonly endpoints = new Map<string, EndpointValue>();
  /** endpoint key hex -> its staged tables (cascade_staged), read only with EP_STAGED as the program does */
  private readonly staged = new Map<string, [[number, number], [number, number]]>();
  /** table -> identity -> entries */
  private readonly policy = new Map<number, Map<number, (PolicyKey & PolicyValue)[]>>();
  /** frontend `addr16hex/port/proto` -> its backends */
  private readonly frontends = new Map<string, NatValue[]>();
  private readonly hostIdentity: number;

  /** From the maps' encoded [key, value] pairs, as the loader wrote them (or as dumped). */
  constructor(maps: {
    ipcache: [Buffer, Buffer][];
    hosts: [Buffer, Buffer][];
    endpoints: [Buffer, Buffer][];
    policy: [Buffer, Buffer][];
    services?: [Buffer, Buffer][];
    backends?: [Buffer, Buffer][];
    /** cascade_staged */
    staged?: [Buffer, Buffer][];
    /** cascade_config[0]'s host identity: what HOST is judged as (0 or absent: always allowed) */
    hostIdentity?: number;
  }) {
    this.hostIdentity = maps.hostIdentity ?? 0;
    for (const f of decodeServiceMaps(maps.services ?? [], maps.backends ?? []).values())
      this.frontends.set(
        frontKey(f.key.addr, f.key.port, f.key.proto),
        f.backends.filter((b): b is NatValue => Boolean(b)),
      );
    for (const [k, v] of maps.ipcache)
      this.ipcache.push({ ...decodeIpcacheKey(k), identity: decodeIpcacheValue(v) });
    this.ipcache.sort((a, b) => b.prefixlen - a.prefixlen);
    for (const [k, v] of maps.hosts) this.hosts.set(k.toString('hex'), decodeIpcacheValue(v));
    for (const [k, v] of maps.endpoints) this.endpoints.set(k.toString('hex'), decodeEndpointValue(v));
    for (const [k, v] of maps.staged ?? []) this.staged.set(k.toString('hex'), decodeStagedValue(v));
    for (const [k, v] of maps.policy) {
      const key = decodePolicyKey(k);
      let t = this.policy.get(key.table);
      if (!t) this.policy.set(key.table, (t = new Map()));
      let l = t.get(key.identity);
      if (!l) t.set(key.identity, (l = []));
      l.push({ ...key, ...decodePolicyValue(v) });
    }
  }

  /** As the kernel: the exact host map first, then the longest ipcache prefix, else world. */
  identityOf(ip: string): number {
    const a = addr16(ip);
    const host = this.hosts.get(a.toString('hex'));
    if (host !== undefined) return host;
    return this.ipcache.find((e) => prefixMatch(e.addr, a, e.prefixlen))?.identity ?? ID.WORLD;
  }

  /**
   * Where a new flow from pod `src` to `dst`:`port` goes, as the program's service() decides: the
   * exact frontend, else a NodePort when `dst` is one of the node's own addresses; without backends
   * it is not translated; the pod itself is skipped when the Service has another backend.
   */
  serviceTarget(src: string, dst: string, proto: number, port: number): ServiceTarget {
    if (proto !== 6 && proto !== 17 && proto !== 132) return { kind: 'none' };
    let list = this.frontends.get(frontKey(dst, port, proto));
    if (!list && this.hosts.get(addr16(dst).toString('hex')) === ID.HOST)
      list = this.frontends.get(frontKey(NODEPORT_ADDR[/:/.test(dst) ? 6 : 4], port, proto));
    if (!list?.length) return { kind: 'none' };
    const self = addr16(src).toString('hex');
    const others = list.filter((b) => addr16(b.addr).toString('hex') !== self);
    if (!others.length) return { kind: 'self' };
    // SCTP's checksum covers the ports: only backends on the frontend's port are translated to
    const usable = proto === 132 ? others.filter((b) => b.port === port) : others;
    return usable.length ? { kind: 'backends', backends: usable } : { kind: 'none' };
  }

  private lpm(table: number, identity: number, proto: number, port: number) {
    let best: (PolicyKey & PolicyValue) | undefined;
    for (const e of this.policy.get(table)?.get(identity) ?? []) {
      if (e.proto !== 0) {
        if (e.proto !== proto) continue;
        const shift = 16 - e.plen;
        if (e.plen > 0 && port >>> shift !== e.port >>> shift) continue;
      }
      if (!best || e.matchLen > best.matchLen) best = e;
    }
    return best;
  }

  private layer(table: number, identity: number, proto: number, port: number) {
    const better = (a?: PolicyKey & PolicyValue, b?: PolicyKey & PolicyValue) => {
      if (!a) return b;
      if (!b) return a;
      if (a.precedence !== b.precedence) return a.precedence > b.precedence ? a : b;
      return a.matchLen >= b.matchLen ? a : b;
    };
    let best = this.lpm(table, identity, proto, port);
    if (identity >= POD_FIRST && identity <= POD_LAST)
      best = better(best, this.lpm(table, ID.ALL_PODS, proto, port));
    return better(best, this.lpm(table, ID.WILDCARD, proto, port));
  }

  /**
   * The verdict for a new flow in one direction at the endpoint owning `local`; `staged`: what its
   * staged tables would decide (its enforced ones where it has none), never what is enforced.
   */
  judge(
    direction: 'ingress' | 'egress',
    local: string,
    remote: string,
    proto: number,
    port: number,
    view: 'enforced' | 'staged' = 'enforced',
  ): RefDecision {
    const key = addr16(local).toString('hex');
    const ep = this.endpoints.get(key);
    if (!ep) return { verdict: 'allow', reason: 'not-endpoint' };
    if (!(ep.flags & (direction === 'egress' ? EP_FLAGS.ENFORCE_EGRESS : EP_FLAGS.ENFORCE_INGRESS)))
      return { verdict: 'allow', reason: 'not-enforced' };
    if (local === remote) return { verdict: 'allow', reason: 'self' };
    if (ep.flags & EP_FLAGS.FAIL_CLOSED) return { verdict: 'deny', reason: 'fail-closed' };
    const identity = this.identityOf(remote);
    if (identity === ID.UNTRANSLATED)
      return { verdict: 'deny', reason: 'untranslated', remoteIdentity: identity };
    // the pod's own node: judged as its node identity in the admin tier and the baseline; a
    // NetworkPolicy never blocks it; unknown identity: allowed
    const host = identity === ID.HOST;
    const lookup = host ? this.hostIdentity : identity;
    if (host && !lookup) return { verdict: 'allow', reason: 'host', remoteIdentity: identity };
    const staged = view === 'staged' && ep.flags & EP_FLAGS.STAGED ? this.staged.get(key) : undefined;
    const [admin, lower] = (staged ?? ep.tables)[DIR[direction]]!;
    const a = this.layer(admin, lookup, proto, port);
    if (a && a.verdict !== 'pass')
      return {
        verdict: a.verdict === 'deny' ? 'deny' : 'allow',
        reason: 'admin',
        remoteIdentity: identity,
        entry: a,
      };
    const l = this.layer(lower, lookup, proto, port);
    const passed = a ? { passedBy: a } : {};
    if (host && (!l || isNetworkPolicyPrecedence(l.precedence)))
      return { verdict: 'allow', reason: 'host', remoteIdentity: identity, ...passed };
    if (!l) return { verdict: 'allow', reason: 'miss', remoteIdentity: identity, ...passed };
    return {
      verdict: l.verdict === 'deny' ? 'deny' : 'allow',
      reason: 'lower',
      remoteIdentity: identity,
      entry: l,
      ...passed,
    };
  }
}
