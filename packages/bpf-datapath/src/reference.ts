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
  type EndpointValue,
  EP_FLAGS,
  ID,
  type PolicyKey,
  type PolicyValue,
} from './codecs.ts';

export interface RefDecision {
  verdict: 'allow' | 'deny';
  reason: 'not-endpoint' | 'not-enforced' | 'self' | 'host' | 'fail-closed' | 'admin' | 'lower' | 'miss';
  remoteIdentity?: number;
  entry?: PolicyKey & PolicyValue;
  passedBy?: PolicyKey & PolicyValue;
}

const POD_FIRST = 256;
const POD_LAST = 0x00ffffff;

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
  /** table -> identity -> entries */
  private readonly policy = new Map<number, Map<number, (PolicyKey & PolicyValue)[]>>();

  /** From the maps' encoded [key, value] pairs, as the loader wrote them (or as dumped). */
  constructor(maps: {
    ipcache: [Buffer, Buffer][];
    hosts: [Buffer, Buffer][];
    endpoints: [Buffer, Buffer][];
    policy: [Buffer, Buffer][];
  }) {
    for (const [k, v] of maps.ipcache)
      this.ipcache.push({ ...decodeIpcacheKey(k), identity: decodeIpcacheValue(v) });
    this.ipcache.sort((a, b) => b.prefixlen - a.prefixlen);
    for (const [k, v] of maps.hosts) this.hosts.set(k.toString('hex'), decodeIpcacheValue(v));
    for (const [k, v] of maps.endpoints) this.endpoints.set(k.toString('hex'), decodeEndpointValue(v));
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

  /** The verdict for a new flow in one direction at the endpoint owning `local`. */
  judge(
    direction: 'ingress' | 'egress',
    local: string,
    remote: string,
    proto: number,
    port: number,
  ): RefDecision {
    const ep = this.endpoints.get(addr16(local).toString('hex'));
    if (!ep) return { verdict: 'allow', reason: 'not-endpoint' };
    if (!(ep.flags & (direction === 'egress' ? EP_FLAGS.ENFORCE_EGRESS : EP_FLAGS.ENFORCE_INGRESS)))
      return { verdict: 'allow', reason: 'not-enforced' };
    if (local === remote) return { verdict: 'allow', reason: 'self' };
    if (ep.flags & EP_FLAGS.FAIL_CLOSED) return { verdict: 'deny', reason: 'fail-closed' };
    const identity = this.identityOf(remote);
    if (identity === ID.HOST) return { verdict: 'allow', reason: 'host', remoteIdentity: identity };
    const [admin, lower] = ep.tables[DIR[direction]];
    const a = this.layer(admin, identity, proto, port);
    if (a && a.verdict !== 'pass')
      return {
        verdict: a.verdict === 'deny' ? 'deny' : 'allow',
        reason: 'admin',
        remoteIdentity: identity,
        entry: a,
      };
    const l = this.layer(lower, identity, proto, port);
    const passed = a ? { passedBy: a } : {};
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
