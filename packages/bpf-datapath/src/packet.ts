// Ethernet frames for BPF_PROG_TEST_RUN: IPv4/IPv6 with TCP, UDP, SCTP or any other protocol.
import { addr16 } from './codecs.ts';

export interface PacketSpec {
  src: string;
  dst: string;
  proto: number;
  sport?: number;
  dport?: number;
  /** TCP flags byte (default ACK-less 0: a plain segment). */
  tcpFlags?: number;
}

export const TCP_FLAGS = { FIN: 0x01, SYN: 0x02, RST: 0x04, ACK: 0x10 } as const;

const isV4 = (ip: string) => /^\d+\.\d+\.\d+\.\d+$/.test(ip);

export function buildPacket(p: PacketSpec): Buffer {
  const l4 = Buffer.alloc(p.proto === 6 ? 20 : p.proto === 17 || p.proto === 132 ? 12 : 8);
  if (p.proto === 6 || p.proto === 17 || p.proto === 132) {
    l4.writeUInt16BE(p.sport ?? 40000, 0);
    l4.writeUInt16BE(p.dport ?? 0, 2);
  }
  if (p.proto === 6) {
    l4[12] = 0x50;
    l4[13] = p.tcpFlags ?? 0;
  }
  const eth = Buffer.alloc(14);
  eth.fill(0xaa, 0, 6);
  eth.fill(0xbb, 6, 12);
  if (isV4(p.src) && isV4(p.dst)) {
    eth.writeUInt16BE(0x0800, 12);
    const ip = Buffer.alloc(20);
    ip[0] = 0x45;
    ip.writeUInt16BE(20 + l4.length, 2);
    ip[8] = 64;
    ip[9] = p.proto;
    addr16(p.src).copy(ip, 12, 12, 16);
    addr16(p.dst).copy(ip, 16, 12, 16);
    return Buffer.concat([eth, ip, l4]);
  }
  eth.writeUInt16BE(0x86dd, 12);
  const ip6 = Buffer.alloc(40);
  ip6[0] = 0x60;
  ip6.writeUInt16BE(l4.length, 4);
  ip6[6] = p.proto;
  ip6[7] = 64;
  addr16(p.src).copy(ip6, 8);
  addr16(p.dst).copy(ip6, 24);
  return Buffer.concat([eth, ip6, l4]);
}
