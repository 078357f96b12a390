// Ethernet frames for BPF_PROG_TEST_RUN: IPv4/IPv6 with TCP, UDP, SCTP or any other protocol, and the
// shapes an attacker sends: IPv4 options, IPv6 extension-header chains, fragments, ICMP errors with an
// embedded packet, neighbour discovery, ARP, VLAN and QinQ tags.
import { addr16 } from './codecs.ts';

export interface PacketSpec {
  src: string;
  dst: string;
  proto: number;
  sport?: number;
  dport?: number;
  /** TCP flags byte (default ACK-less 0: a plain segment). */
  tcpFlags?: number;
  /** IPv4: option words (4 bytes of NOPs each) after the 20-byte header. */
  ipOptionWords?: number;
  /** IPv6: extension headers before the upper layer, in order (0 hop-by-hop, 43, 44, 51, 60). */
  extHeaders?: number[];
  /**
   * A fragment: IPv4 flags/offset, or an IPv6 fragment header (last in the chain). offset in bytes
   * (a multiple of 8); a later fragment (offset > 0) carries `payload` instead of an L4 header.
   */
  fragment?: { id: number; offset: number; more: boolean };
  /** Bytes of the L4 header actually sent (a tiny first fragment); default: all of it. */
  l4Length?: number;
  /** Raw bytes after the IP header(s) instead of an L4 header (later fragments). */
  payload?: Buffer;
  /** ICMP / ICMPv6 (proto 1 / 58): type, code, and the packet an error reports on (its IP header + 8 bytes). */
  icmp?: { type: number; code?: number; embedded?: PacketSpec; body?: Buffer };
  /** IPv4 TTL / IPv6 hop limit (default 64). */
  hopLimit?: number;
  /** 802.1Q / 802.1ad tags, outermost first: [tpid, vid] pairs. */
  vlan?: [number, number][];
}

export const TCP_FLAGS = { FIN: 0x01, SYN: 0x02, RST: 0x04, ACK: 0x10 } as const;

const isV4 = (ip: string) => /^\d+\.\d+\.\d+\.\d+$/.test(ip);

function l4Of(p: PacketSpec): Buffer {
  if (p.payload) return p.payload;
  if (p.icmp) {
    const head = Buffer.alloc(8);
    head[0] = p.icmp.type;
    head[1] = p.icmp.code ?? 0;
    const inner = p.icmp.embedded ? ipPacket(p.icmp.embedded) : Buffer.alloc(0);
    const innerHead = p.icmp.embedded ? inner.subarray(0, ipHeaderLength(p.icmp.embedded) + 8) : inner;
    return Buffer.concat([head, innerHead, p.icmp.body ?? Buffer.alloc(0)]);
  }
  const l4 = Buffer.alloc(p.proto === 6 ? 20 : p.proto === 17 || p.proto === 132 ? 12 : 8);
  if (p.proto === 6 || p.proto === 17 || p.proto === 132) {
    l4.writeUInt16BE(p.sport ?? 40000, 0);
    l4.writeUInt16BE(p.dport ?? 0, 2);
  }
  if (p.proto === 6) {
    l4[12] = 0x50;
    l4[13] = p.tcpFlags ?? 0;
  }
  return p.l4Length === undefined ? l4 : l4.subarray(0, p.l4Length);
}

function ipHeaderLength(p: PacketSpec): number {
  if (isV4(p.src) && isV4(p.dst)) return 20 + 4 * (p.ipOptionWords ?? 0);
  return 40 + 8 * (p.extHeaders?.length ?? 0) + (p.fragment ? 8 : 0);
}

/** The IP packet (no Ethernet header). */
export function ipPacket(p: PacketSpec): Buffer {
  const l4 = l4Of(p);
  if (isV4(p.src) && isV4(p.dst)) {
    const hl = 20 + 4 * (p.ipOptionWords ?? 0);
    const ip = Buffer.alloc(hl, 1); // option bytes: NOP
    ip[0] = 0x40 | (hl / 4);
    ip[1] = 0;
    ip.writeUInt16BE(hl + l4.length, 2);
    ip.writeUInt16BE(p.fragment?.id ?? 0, 4);
    const fo = p.fragment ? (p.fragment.more ? 0x2000 : 0) | (p.fragment.offset >> 3) : 0;
    ip.writeUInt16BE(fo, 6);
    ip[8] = p.hopLimit ?? 64;
    ip[9] = p.proto;
    ip.writeUInt16BE(0, 10);
    addr16(p.src).copy(ip, 12, 12, 16);
    addr16(p.dst).copy(ip, 16, 12, 16);
    return Buffer.concat([ip, l4]);
  }
  // IPv6: the chain is extHeaders..., then the fragment header, then the upper layer
  const chain = [...(p.extHeaders ?? []), ...(p.fragment ? [44] : [])];
  const ext: Buffer[] = chain.map((type, i) => {
    const h = Buffer.alloc(8);
    h[0] = i + 1 < chain.length ? chain[i + 1]! : p.proto;
    if (type === 44 && p.fragment) {
      h.writeUInt16BE((p.fragment.offset & 0xfff8) | (p.fragment.more ? 1 : 0), 2);
      h.writeUInt32BE(p.fragment.id >>> 0, 4);
    } else if (type === 51)
      h[1] = 0; // AH: (0 + 2) * 4 = 8 bytes
    else h[1] = 0; // (0 + 1) * 8 = 8 bytes
    return h;
  });
  const ip6 = Buffer.alloc(40);
  ip6[0] = 0x60;
  const rest = Buffer.concat([...ext, l4]);
  ip6.writeUInt16BE(rest.length, 4);
  ip6[6] = chain.length ? chain[0]! : p.proto;
  ip6[7] = p.hopLimit ?? 64;
  addr16(p.src).copy(ip6, 8);
  addr16(p.dst).copy(ip6, 24);
  return Buffer.concat([ip6, rest]);
}

function ethernet(ethertype: number, vlan: [number, number][] = []): Buffer {
  const eth = Buffer.alloc(12 + 4 * vlan.length + 2);
  eth.fill(0xaa, 0, 6);
  eth.fill(0xbb, 6, 12);
  vlan.forEach(([tpid, vid], i) => {
    eth.writeUInt16BE(tpid, 12 + 4 * i);
    eth.writeUInt16BE(vid & 0xfff, 14 + 4 * i);
  });
  eth.writeUInt16BE(ethertype, 12 + 4 * vlan.length);
  return eth;
}

export function buildPacket(p: PacketSpec): Buffer {
  const v4 = isV4(p.src) && isV4(p.dst);
  return Buffer.concat([ethernet(v4 ? 0x0800 : 0x86dd, p.vlan), ipPacket(p)]);
}

/** An Ethernet/IPv4 ARP request or reply: who-has `targetIp` tell `senderIp`. */
export function buildArp(senderIp: string, targetIp: string, op: 1 | 2 = 1): Buffer {
  const arp = Buffer.alloc(28);
  arp.writeUInt16BE(1, 0); // Ethernet
  arp.writeUInt16BE(0x0800, 2);
  arp[4] = 6;
  arp[5] = 4;
  arp.writeUInt16BE(op, 6);
  arp.fill(0xbb, 8, 14);
  addr16(senderIp).copy(arp, 14, 12, 16);
  addr16(targetIp).copy(arp, 24, 12, 16);
  return Buffer.concat([ethernet(0x0806), arp]);
}

/**
 * IPv6 neighbour discovery (NS 135, NA 136) about `target`, hop limit 255, with NDP options
 * (`[type, bytes]`: each padded to 8 bytes, e.g. `[1, mac]` a source link-layer address, `[14,
 * nonce]`); RS 133 carries no target.
 */
export function buildNdp(
  src: string,
  dst: string,
  type: number,
  target = '::',
  options: [number, Buffer][] = [],
): Buffer {
  const head = Buffer.alloc(type === 133 ? 0 : 16);
  if (type !== 133) addr16(target).copy(head);
  const opts = options.map(([t, data]) => {
    const o = Buffer.alloc(Math.ceil((data.length + 2) / 8) * 8);
    o[0] = t;
    o[1] = o.length / 8;
    data.copy(o, 2);
    return o;
  });
  return buildPacket({
    src,
    dst,
    proto: 58,
    hopLimit: 255,
    icmp: { type, body: Buffer.concat([head, ...opts]) },
  });
}

/**
 * An MLDv2 report (143) to ff02::16, hop limit 1: one record per group (`recordType` 4, change to
 * exclude: a join), with `sources` source addresses each.
 */
export function buildMldReport(
  src: string,
  groups: string[],
  recordType = 4,
  sources: string[] = [],
): Buffer {
  const records = groups.map((g) => {
    const r = Buffer.alloc(20 + 16 * sources.length);
    r[0] = recordType;
    r.writeUInt16BE(sources.length, 2);
    addr16(g).copy(r, 4);
    sources.forEach((s, i) => addr16(s).copy(r, 20 + 16 * i));
    return r;
  });
  // the 4 bytes after the checksum: reserved (2) and the number of records (2)
  const body = Buffer.concat(records);
  const frame = buildPacket({ src, dst: 'ff02::16', proto: 58, hopLimit: 1, icmp: { type: 143, body } });
  frame.writeUInt16BE(groups.length, 14 + 40 + 6);
  return frame;
}

function onesSum(b: Buffer, sum = 0): number {
  for (let i = 0; i + 1 < b.length; i += 2) sum += b.readUInt16BE(i);
  if (b.length & 1) sum += b[b.length - 1]! << 8;
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return sum;
}

/** Where a frame's L3 and L4 headers are, for an Ethernet frame of IPv4 (any IHL) or IPv6 without
 * extension headers carrying TCP or UDP; undefined otherwise. */
function l4Layout(f: Buffer): { v4: boolean; l4: number; csum: number; pseudo: Buffer } | undefined {
  const v4 = f.readUInt16BE(12) === 0x0800;
  const l3 = 14;
  const proto = v4 ? f[l3 + 9]! : f[l3 + 6]!;
  if (proto !== 6 && proto !== 17) return undefined;
  const l4 = v4 ? l3 + (f[l3]! & 15) * 4 : l3 + 40;
  const len = f.length - l4;
  const pseudo = v4
    ? Buffer.concat([f.subarray(l3 + 12, l3 + 20), Buffer.from([0, proto, len >> 8, len & 255])])
    : Buffer.concat([f.subarray(l3 + 8, l3 + 40), Buffer.from([0, 0, len >> 8, len & 255, 0, 0, 0, proto])]);
  return { v4, l4, csum: l4 + (proto === 6 ? 16 : 6), pseudo };
}

/** The frame with its IPv4 header checksum and TCP/UDP checksum filled in (tests of translation). */
export function withChecksums(frame: Buffer): Buffer {
  const f = Buffer.from(frame);
  const lay = l4Layout(f);
  if (lay?.v4) {
    const ihl = (f[14]! & 15) * 4;
    f.writeUInt16BE(0, 24);
    f.writeUInt16BE(~onesSum(f.subarray(14, 14 + ihl)) & 0xffff, 24);
  }
  if (lay) {
    f.writeUInt16BE(0, lay.csum);
    const c = ~onesSum(f.subarray(lay.l4), onesSum(lay.pseudo)) & 0xffff;
    f.writeUInt16BE(c === 0 ? 0xffff : c, lay.csum);
  }
  return f;
}

/** Whether the frame's IPv4 header checksum and TCP/UDP checksum are right. */
export function checksumsValid(frame: Buffer): boolean {
  const lay = l4Layout(frame);
  if (!lay) return false;
  if (lay.v4 && onesSum(frame.subarray(14, 14 + (frame[14]! & 15) * 4)) !== 0xffff) return false;
  return onesSum(frame.subarray(lay.l4), onesSum(lay.pseudo)) === 0xffff;
}
