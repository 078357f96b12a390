// Byte-exact codecs for every map key and value of bpf/cascade.h, shared by the loader and the
// userspace reference datapath. Host order is little endian (x86-64, arm64); addresses and the policy
// key's port are network order.

export const SIZES = {
  ipcacheKey: 20,
  ipcacheValue: 4,
  endpointKey: 16,
  endpointValue: 48,
  policyKey: 15,
  policyValue: 12,
  hostKey: 16,
  ctKey: 40,
  ctValue: 32,
  verdictKey: 16,
  verdictValue: 16,
  config: 16,
  fragKey: 40,
  fragValue: 8,
  flowEvent: 60,
  stagedValue: 16,
  svcKey: 20,
  svcValue: 8,
  backendKey: 8,
  natValue: 20,
} as const;

/** Reserved identities (cascade.h CASCADE_ID_*). UNTRANSLATED: a ClusterIP left out of the Service maps. */
export const ID = { WILDCARD: 0, HOST: 1, WORLD: 2, ALL_PODS: 3, UNTRANSLATED: 5 } as const;
/** The first identity that is not reserved (pods and CIDRs); below it every identity is reserved. */
export const POD_FIRST = 256;
export const VERDICT = { allow: 0, deny: 1, pass: 2 } as const;
/**
 * The lower band of a precedence (bits 15..1) from which an entry is a NetworkPolicy's (its allows and
 * its isolation; below: the baseline's). A pod's own node (HOST) is never blocked by those entries.
 */
export const L_NP_ISOLATION = 16384;
export const isNetworkPolicyPrecedence = (precedence: number) =>
  ((precedence >>> 1) & 0x7fff) >= L_NP_ISOLATION;
export type VerdictName = keyof typeof VERDICT;
export const EP_FLAGS = {
  ENFORCE_INGRESS: 1,
  ENFORCE_EGRESS: 2,
  FAIL_CLOSED: 4,
  AUDIT_ALLOW: 8,
  /** its new flows are judged by its staged tables too (cascade_staged), never enforced */
  STAGED: 16,
} as const;
export const COUNTERS = {
  allow: 0,
  deny: 1,
  ctHit: 2,
  ctRejudged: 3,
  malformed: 4,
  notEndpoint: 5,
  verdictCached: 6,
  spoofed: 7,
  badL2: 8,
  fragUntracked: 9,
  fragBad: 10,
  extHeaders: 11,
  icmpRelated: 12,
  ndp: 13,
  svcNew: 14,
  svcNat: 15,
  ndpRefused: 16,
  eventsSuppressed: 17,
  flowBudget: 18,
  icmpTrimmed: 19,
  unboundSource: 20,
  flowCacheFill: 21,
  ctQuota: 22,
  stagedDiffer: 23,
  ctEvicted: 24,
  ctBusy: 25,
} as const;
/** The interface BPF_PROG_TEST_RUN runs packets on (loopback): offline states bind endpoints to it. */
export const TEST_RUN_IFINDEX = 1;
/** log2 of the conntrack table's sets of four (ct_table.h CT_SET_BITS). */
export const CT_SET_BITS = 17;
/** Conntrack entries one endpoint address may hold (cascade.h CT_ENDPOINT_QUOTA). */
export const CT_ENDPOINT_QUOTA = 32768;
export const DIR = { ingress: 0, egress: 1 } as const;

/** An address as 16 bytes: IPv6 as is, IPv4 mapped (::ffff:a.b.c.d). */
export function addr16(ip: string): Buffer {
  const b = Buffer.alloc(16);
  if (/^\d+\.\d+\.\d+\.\d+$/.test(ip)) {
    b[10] = 0xff;
    b[11] = 0xff;
    ip.split('.').forEach((p, i) => {
      b[12 + i] = Number(p);
    });
    return b;
  }
  const halves = ip.split('::');
  const head = halves[0] ? halves[0].split(':') : [];
  const tail = halves.length > 1 && halves[1] ? halves[1].split(':') : [];
  const groups = [...head, ...Array(8 - head.length - tail.length).fill('0'), ...tail];
  groups.forEach((g, i) => b.writeUInt16BE(Number.parseInt(g, 16), i * 2));
  return b;
}

export function formatAddr16(b: Buffer): string {
  if (b.subarray(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff)
    return `${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
  const groups: string[] = [];
  for (let i = 0; i < 8; i++) groups.push(b.readUInt16BE(i * 2).toString(16));
  return groups.join(':').replace(/(^|:)0(:0)+(:|$)/, '::');
}

export interface IpcacheKey {
  /** Prefix length over the 128-bit (v4-mapped) address. */
  prefixlen: number;
  addr: Buffer;
}

export function encodeIpcacheKey(k: IpcacheKey): Buffer {
  const b = Buffer.alloc(SIZES.ipcacheKey);
  b.writeUInt32LE(k.prefixlen, 0);
  k.addr.copy(b, 4);
  return b;
}
export function decodeIpcacheKey(b: Buffer): IpcacheKey {
  return { prefixlen: b.readUInt32LE(0), addr: Buffer.from(b.subarray(4, 20)) };
}
export const encodeIpcacheValue = (identity: number): Buffer => u32(identity);
export const decodeIpcacheValue = (b: Buffer): number => b.readUInt32LE(0);

export interface EndpointValue {
  flags: number;
  /** [direction][layer] table ids: direction 0 ingress, 1 egress; layer 0 admin, 1 lower. */
  tables: [[number, number], [number, number]];
  revision: number;
  identity: number;
  /** Host-side interface of the endpoint: its packets on any other interface are dropped. */
  ifindex: number;
}

export function encodeEndpointValue(v: EndpointValue): Buffer {
  const b = Buffer.alloc(SIZES.endpointValue);
  b.writeUInt32LE(v.flags, 0);
  b.writeUInt32LE(v.tables[0][0], 4);
  b.writeUInt32LE(v.tables[0][1], 8);
  b.writeUInt32LE(v.tables[1][0], 12);
  b.writeUInt32LE(v.tables[1][1], 16);
  b.writeUInt32LE(v.revision >>> 0, 20);
  b.writeUInt32LE(v.identity, 24);
  b.writeUInt32LE(v.ifindex >>> 0, 28);
  return b;
}
export function decodeEndpointValue(b: Buffer): EndpointValue {
  return {
    flags: b.readUInt32LE(0),
    tables: [
      [b.readUInt32LE(4), b.readUInt32LE(8)],
      [b.readUInt32LE(12), b.readUInt32LE(16)],
    ],
    revision: b.readUInt32LE(20),
    identity: b.readUInt32LE(24),
    ifindex: b.readUInt32LE(28),
  };
}

export interface PolicyKey {
  table: number;
  identity: number;
  /** 0 = any protocol (then prefixlen 64). */
  proto: number;
  port: number;
  /** Port prefix bits 0..16 (ignored for any protocol). */
  plen: number;
}

export const policyPrefixlen = (k: Pick<PolicyKey, 'proto' | 'plen'>): number =>
  k.proto === 0 ? 64 : 72 + k.plen;

export function encodePolicyKey(k: PolicyKey): Buffer {
  const b = Buffer.alloc(SIZES.policyKey);
  b.writeUInt32LE(policyPrefixlen(k), 0);
  b.writeUInt32LE(k.table, 4);
  b.writeUInt32LE(k.identity, 8);
  b.writeUInt8(k.proto, 12);
  b.writeUInt16BE(k.proto === 0 ? 0 : k.port, 13);
  return b;
}
export function decodePolicyKey(b: Buffer): PolicyKey {
  const prefixlen = b.readUInt32LE(0);
  return {
    table: b.readUInt32LE(4),
    identity: b.readUInt32LE(8),
    proto: b.readUInt8(12),
    port: b.readUInt16BE(13),
    plen: prefixlen <= 64 ? 0 : prefixlen - 72,
  };
}

export interface PolicyValue {
  precedence: number;
  verdict: VerdictName;
  /** 0 any protocol, 8 + port prefix length. */
  matchLen: number;
  rule: number;
}

export function encodePolicyValue(v: PolicyValue): Buffer {
  const b = Buffer.alloc(SIZES.policyValue);
  b.writeUInt32LE(v.precedence >>> 0, 0);
  b.writeUInt8(VERDICT[v.verdict], 4);
  b.writeUInt8(v.matchLen, 5);
  b.writeUInt32LE(v.rule, 8);
  return b;
}
export function decodePolicyValue(b: Buffer): PolicyValue {
  const names = ['allow', 'deny', 'pass'] as const;
  return {
    precedence: b.readUInt32LE(0),
    verdict: names[b.readUInt8(4)] ?? 'deny',
    matchLen: b.readUInt8(5),
    rule: b.readUInt32LE(8),
  };
}

export interface FlowEvent {
  src: string;
  dst: string;
  sport: number;
  dport: number;
  proto: number;
  direction: 'ingress' | 'egress';
  verdict: VerdictName;
  reason: 'policy' | 'fail-closed' | 'rejudged';
  remoteIdentity: number;
  rule: number;
  precedence: number;
  /** What the endpoint's staged tables would decide instead (only where it differs; never enforced). */
  staged?: { verdict: 'allow' | 'deny'; rule: number };
}

/** Decodes a flow event (a 52-byte record of a program older than the staged fields: no staged part). */
export function decodeFlowEvent(b: Buffer): FlowEvent {
  const staged =
    b.length >= SIZES.flowEvent && b.readUInt8(52) === 1
      ? { verdict: b.readUInt8(53) === 1 ? ('deny' as const) : ('allow' as const), rule: b.readUInt32LE(56) }
      : undefined;
  return {
    src: formatAddr16(b.subarray(0, 16)),
    dst: formatAddr16(b.subarray(16, 32)),
    sport: b.readUInt16LE(32),
    dport: b.readUInt16LE(34),
    proto: b.readUInt8(36),
    direction: b.readUInt8(37) === 0 ? 'ingress' : 'egress',
    verdict: (['allow', 'deny', 'pass'] as const)[b.readUInt8(38)] ?? 'deny',
    reason: (['policy', 'fail-closed', 'rejudged'] as const)[b.readUInt8(39)] ?? 'policy',
    remoteIdentity: b.readUInt32LE(40),
    rule: b.readUInt32LE(44),
    precedence: b.readUInt32LE(48),
    ...(staged ? { staged } : {}),
  };
}

/** An endpoint's staged tables (struct staged_value): [direction][layer] as EndpointValue.tables. */
export function encodeStagedValue(tables: readonly (readonly [number, number])[]): Buffer {
  const b = Buffer.alloc(SIZES.stagedValue);
  b.writeUInt32LE(tables[0]![0] >>> 0, 0);
  b.writeUInt32LE(tables[0]![1] >>> 0, 4);
  b.writeUInt32LE(tables[1]![0] >>> 0, 8);
  b.writeUInt32LE(tables[1]![1] >>> 0, 12);
  return b;
}

export function decodeStagedValue(b: Buffer): [[number, number], [number, number]] {
  return [
    [b.readUInt32LE(0), b.readUInt32LE(4)],
    [b.readUInt32LE(8), b.readUInt32LE(12)],
  ];
}

/** One flow at one endpoint (found by the packets of both directions). Ports in host order. */
export interface CtKey {
  local: string;
  remote: string;
  lport: number;
  rport: number;
  proto: number;
}
export function encodeCtKey(k: CtKey): Buffer {
  const b = Buffer.alloc(SIZES.ctKey);
  addr16(k.local).copy(b, 0);
  addr16(k.remote).copy(b, 16);
  b.writeUInt16LE(k.lport, 32);
  b.writeUInt16LE(k.rport, 34);
  b.writeUInt8(k.proto, 36);
  return b;
}
export function decodeCtKey(b: Buffer): CtKey {
  return {
    local: formatAddr16(b.subarray(0, 16)),
    remote: formatAddr16(b.subarray(16, 32)),
    lport: b.readUInt16LE(32),
    rport: b.readUInt16LE(34),
    proto: b.readUInt8(36),
  };
}
export interface CtValue {
  /** The endpoint's policy revision the flow was last judged under. */
  revision: number;
  /** The config generation at which that revision was last checked. */
  generation: number;
  /** Direction of the packet that opened the flow. */
  direction: 'ingress' | 'egress';
  verdict: 'allow' | 'deny';
  /** A TCP FIN or RST was seen. */
  closing: boolean;
  /** Opened towards a Service and translated to a backend (replies get the frontend back). */
  nat?: boolean;
  /** Config clock (seconds) of the flow's last packet. */
  seen: number;
  /** Interface of the endpoint when the flow was judged: the entry answers only there. */
  ifindex: number;
  /** The config clock (seconds) when the flow was opened. */
  created: number;
}
export function encodeCtValue(v: CtValue): Buffer {
  const b = Buffer.alloc(SIZES.ctValue);
  b.writeUInt32LE(v.revision >>> 0, 0);
  b.writeUInt32LE(v.generation >>> 0, 4);
  b.writeUInt8(DIR[v.direction], 8);
  b.writeUInt8(VERDICT[v.verdict], 9);
  b.writeUInt8(v.closing ? 1 : 0, 10);
  b.writeUInt8(v.nat ? 1 : 0, 11);
  b.writeUInt32LE(v.seen >>> 0, 12);
  b.writeUInt32LE(v.ifindex >>> 0, 16);
  b.writeBigUInt64LE(BigInt(v.created), 24);
  return b;
}
export function decodeCtValue(b: Buffer): CtValue {
  return {
    revision: b.readUInt32LE(0),
    generation: b.readUInt32LE(4),
    direction: b.readUInt8(8) === DIR.egress ? 'egress' : 'ingress',
    verdict: b.readUInt8(9) === VERDICT.deny ? 'deny' : 'allow',
    closing: b.readUInt8(10) !== 0,
    nat: b.readUInt8(11) !== 0,
    seen: b.readUInt32LE(12),
    ifindex: b.readUInt32LE(16),
    created: Number(b.readBigUInt64LE(24)),
  };
}

/** Verdict cache key: an endpoint direction's two table ids, the remote identity, protocol, port. */
export interface VerdictKey {
  admin: number;
  lower: number;
  identity: number;
  proto: number;
  port: number;
}
export function encodeVerdictKey(k: VerdictKey): Buffer {
  const b = Buffer.alloc(SIZES.verdictKey);
  b.writeUInt32LE(k.admin, 0);
  b.writeUInt32LE(k.lower, 4);
  b.writeUInt32LE(k.identity, 8);
  b.writeUInt8(k.proto, 12);
  b.writeUInt16LE(k.port, 14);
  return b;
}
export function decodeVerdictKey(b: Buffer): VerdictKey {
  return {
    admin: b.readUInt32LE(0),
    lower: b.readUInt32LE(4),
    identity: b.readUInt32LE(8),
    proto: b.readUInt8(12),
    port: b.readUInt16LE(14),
  };
}
export interface VerdictValue {
  /** Valid only while equal to the config epoch. */
  epoch: number;
  precedence: number;
  rule: number;
  verdict: 'allow' | 'deny';
}
export function encodeVerdictValue(v: VerdictValue): Buffer {
  const b = Buffer.alloc(SIZES.verdictValue);
  b.writeUInt32LE(v.epoch >>> 0, 0);
  b.writeUInt32LE(v.precedence >>> 0, 4);
  b.writeUInt32LE(v.rule >>> 0, 8);
  b.writeUInt8(VERDICT[v.verdict], 12);
  return b;
}
export function decodeVerdictValue(b: Buffer): VerdictValue {
  return {
    epoch: b.readUInt32LE(0),
    precedence: b.readUInt32LE(4),
    rule: b.readUInt32LE(8),
    verdict: b.readUInt8(12) === VERDICT.deny ? 'deny' : 'allow',
  };
}

/**
 * cascade_config[0]: the verdict cache epoch, the conntrack generation and clock (seconds), and the
 * identity this node's own addresses (HOST) are judged as in the admin tier and the baseline (0: HOST
 * is always allowed).
 */
export interface Config {
  epoch: number;
  generation: number;
  clock: number;
  hostIdentity: number;
}
export const encodeConfig = (c: Config): Buffer =>
  Buffer.concat([u32(c.epoch), u32(c.generation), u32(c.clock), u32(c.hostIdentity)]);
export const decodeConfig = (b: Buffer): Config => ({
  epoch: b.readUInt32LE(0),
  generation: b.readUInt32LE(4),
  clock: b.length >= 12 ? b.readUInt32LE(8) : 0,
  hostIdentity: b.length >= 16 ? b.readUInt32LE(12) : 0,
});

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0, 0);
  return b;
}

/** A Service frontend: its address (the zero address: a NodePort on the node's own addresses), port
 * and protocol. Ports in host order. */
export interface SvcKey {
  addr: string;
  port: number;
  proto: number;
}
export function encodeSvcKey(k: SvcKey): Buffer {
  const b = Buffer.alloc(SIZES.svcKey);
  addr16(k.addr).copy(b, 0);
  b.writeUInt16LE(k.port, 16);
  b.writeUInt8(k.proto, 18);
  return b;
}
export function decodeSvcKey(b: Buffer): SvcKey {
  return { addr: formatAddr16(b.subarray(0, 16)), port: b.readUInt16LE(16), proto: b.readUInt8(18) };
}
/** The frontend's backend list (id) and its size. */
export interface SvcValue {
  id: number;
  count: number;
}
export const encodeSvcValue = (v: SvcValue): Buffer => {
  const b = Buffer.alloc(SIZES.svcValue);
  b.writeUInt32LE(v.id >>> 0, 0);
  b.writeUInt32LE(v.count >>> 0, 4);
  return b;
};
export const decodeSvcValue = (b: Buffer): SvcValue => ({ id: b.readUInt32LE(0), count: b.readUInt32LE(4) });
export const encodeBackendKey = (id: number, slot: number): Buffer => {
  const b = Buffer.alloc(SIZES.backendKey);
  b.writeUInt32LE(id >>> 0, 0);
  b.writeUInt32LE(slot >>> 0, 4);
  return b;
};
export const decodeBackendKey = (b: Buffer) => ({ id: b.readUInt32LE(0), slot: b.readUInt32LE(4) });
/** A backend (address, port), a translated flow's backend or its frontend. */
export interface NatValue {
  addr: string;
  port: number;
}
export function encodeNatValue(v: NatValue): Buffer {
  const b = Buffer.alloc(SIZES.natValue);
  addr16(v.addr).copy(b, 0);
  b.writeUInt16LE(v.port, 16);
  return b;
}
export const decodeNatValue = (b: Buffer): NatValue => ({
  addr: formatAddr16(b.subarray(0, 16)),
  port: b.readUInt16LE(16),
});
