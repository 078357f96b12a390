// The datapath under attack: packets a pod owner can send from their pod, through the real program
// (BPF_PROG_TEST_RUN). Each case was a bypass before this suite: IPv6 extension headers and fragments
// hid ports, VLAN tags hid IP, any source address was accepted, an ICMP error of an allowed flow was
// judged as new traffic, and an address that is no endpoint passed unjudged.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COUNTERS, EP_FLAGS, ID, TEST_RUN_IFINDEX } from './codecs.ts';
import { monotonicSeconds } from './kernel.ts';
import type { Datapath } from './loader.ts';
import { buildArp, buildMldReport, buildNdp, buildPacket, type PacketSpec, TCP_FLAGS } from './packet.ts';
import type { DesiredState } from './state.ts';
import { entry, freshDatapath, kernelTestsEnabled, TABLES_OF, TC_ACT_SHOT } from './testing.ts';

const A = '10.0.0.1';
const A6 = 'fd00::a';
const B = '10.0.0.2';
const B6 = 'fd00::b';
const D = '10.0.0.4'; // another pod, on another interface (one end of a veth pair)
const ROUTER = '192.0.2.1';
const ID_A = 300;
const ID_B = 301;
const ID_D = 302;
const DUMMY = 'cascade-tadv0'; // (this kernel has veth built in, not dummy)
const both = EP_FLAGS.ENFORCE_INGRESS | EP_FLAGS.ENFORCE_EGRESS;

const e = entry;

/** The ones' complement sum of a buffer (0xffff: its checksum field is right). */
function onesSum(b: Buffer): number {
  let sum = 0;
  for (let i = 0; i + 1 < b.length; i += 2) sum += b.readUInt16BE(i);
  if (b.length % 2) sum += b[b.length - 1]! << 8;
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return sum;
}

/**
 * A's ingress: an admin rule denies B on tcp/22 and udp/5353; the lower layer allows B on anything
 * (so a packet judged as "protocol 0, port 0" would be allowed: the bypass), isolates the rest.
 * A's egress: admin denies B on udp/9999; everything else allowed.
 */
function state(dummyIfindex: number): DesiredState {
  const tablesOf = TABLES_OF;
  return {
    ipcache: [
      { prefix: A, identity: ID_A },
      { prefix: A6, identity: ID_A },
      { prefix: B, identity: ID_B },
      { prefix: B6, identity: ID_B },
      { prefix: D, identity: ID_D },
      { prefix: '0.0.0.0/0', identity: ID.WORLD },
      { prefix: '::/0', identity: ID.WORLD },
    ],
    endpoints: [
      { ip: A, identity: ID_A, flags: both, tables: tablesOf, ifindex: TEST_RUN_IFINDEX },
      { ip: A6, identity: ID_A, flags: both, tables: tablesOf, ifindex: TEST_RUN_IFINDEX },
      { ip: D, identity: ID_D, flags: both, tables: tablesOf, ifindex: dummyIfindex },
    ],
    tables: new Map([
      ['in-admin', [e(ID_B, 6, 22, 16, 0x7fff0001, 'deny', 1), e(ID_B, 17, 5353, 16, 0x7fff0001, 'deny', 2)]],
      ['in-lower', [e(ID_B, 0, 0, 0, 0xfffe, 'allow', 3), e(ID.WILDCARD, 0, 0, 0, 0x8001, 'deny', 4)]],
      ['out-admin', [e(ID_B, 17, 9999, 16, 0x7fff0001, 'deny', 5)]],
      ['out-lower', []],
    ]),
  };
}

describe.skipIf(!kernelTestsEnabled())('the datapath against hostile packets', () => {
  let dp: Datapath;
  let cleanup: () => Promise<void>;
  let dummy = 0;
  const verdict = async (prog: 'from_endpoint' | 'to_endpoint', pkt: Buffer, ifindex = TEST_RUN_IFINDEX) =>
    (await dp.run(prog, pkt, 1, ifindex)).retval === TC_ACT_SHOT ? 'deny' : 'allow';
  const ingress = (p: PacketSpec) => verdict('to_endpoint', buildPacket(p));
  const egress = (p: PacketSpec, ifindex?: number) => verdict('from_endpoint', buildPacket(p), ifindex);
  const counted = async (name: keyof typeof COUNTERS, f: () => Promise<unknown>) => {
    const before = await dp.counter(COUNTERS[name]);
    await f();
    return (await dp.counter(COUNTERS[name])) - before;
  };

  beforeAll(async () => {
    try {
      execFileSync('ip', ['link', 'del', DUMMY], { stdio: 'ignore' });
    } catch {}
    execFileSync('ip', ['link', 'add', DUMMY, 'type', 'veth', 'peer', 'name', `${DUMMY}p`]);
    dummy = Number(readFileSync(`/sys/class/net/${DUMMY}/ifindex`, 'utf8'));
    ({ dp, cleanup } = await freshDatapath());
    await dp.sync(state(dummy));
  });
  afterAll(async () => {
    await cleanup?.();
    execFileSync('ip', ['link', 'del', DUMMY], { stdio: 'ignore' });
  });

  describe('IPv6 extension headers: the policy judges the real upper layer', () => {
    const syn22 = { src: B6, dst: A6, proto: 6, sport: 40000, dport: 22, tcpFlags: TCP_FLAGS.SYN };
    it.each([
      ['hop-by-hop', [0]],
      ['destination options', [60]],
      ['routing', [43]],
      ['authentication header', [51]],
      ['hop-by-hop, routing, destination options', [0, 43, 60]],
    ])('a TCP/22 SYN behind %s is denied like a bare one', async (_n, extHeaders) => {
      expect(await ingress(syn22)).toBe('deny');
      expect(await ingress({ ...syn22, sport: 40100 + extHeaders.length, extHeaders })).toBe('deny');
      // and the walk finds the port the policy allows
      expect(await ingress({ ...syn22, sport: 40200 + extHeaders.length, dport: 80, extHeaders })).toBe(
        'allow',
      );
    });
    it('an atomic fragment header (offset 0, no more fragments) hides nothing', async () => {
      const p = { ...syn22, sport: 40300, fragment: { id: 7, offset: 0, more: false } };
      expect(await ingress(p)).toBe('deny');
    });
    it('8 extension headers are walked; 9 are dropped and counted', async () => {
      const eight = Array(8).fill(60);
      expect(await ingress({ ...syn22, sport: 40400, dport: 80, extHeaders: eight })).toBe('allow');
      expect(await ingress({ ...syn22, sport: 40401, extHeaders: eight })).toBe('deny');
      const n = await counted('extHeaders', async () => {
        expect(await ingress({ ...syn22, sport: 40402, dport: 80, extHeaders: Array(9).fill(60) })).toBe(
          'deny',
        );
      });
      expect(n).toBe(1);
    });
  });

  describe('fragments take the verdict of their first fragment', () => {
    for (const [family, src, dst] of [
      ['IPv4', B, A],
      ['IPv6', B6, A6],
    ] as const) {
      it(`${family}: later fragments of a denied UDP datagram are denied, of an allowed one allowed`, async () => {
        const denied = { src, dst, proto: 17, sport: 41000, dport: 5353 };
        expect(await ingress({ ...denied, fragment: { id: 100, offset: 0, more: true } })).toBe('deny');
        const later = {
          ...denied,
          payload: Buffer.alloc(64),
          fragment: { id: 100, offset: 1480, more: false },
        };
        expect(await ingress(later)).toBe('deny');
        const allowed = { src, dst, proto: 17, sport: 41001, dport: 8000 };
        expect(await ingress({ ...allowed, fragment: { id: 101, offset: 0, more: true } })).toBe('allow');
        expect(
          await ingress({
            ...allowed,
            payload: Buffer.alloc(64),
            fragment: { id: 101, offset: 1480, more: true },
          }),
        ).toBe('allow');
        expect(
          await ingress({
            ...allowed,
            payload: Buffer.alloc(64),
            fragment: { id: 101, offset: 2960, more: false },
          }),
        ).toBe('allow');
      });
      it(`${family}: a later fragment whose first fragment was not seen is dropped`, async () => {
        const n = await counted('fragUntracked', async () => {
          const orphan = {
            src,
            dst,
            proto: 17,
            payload: Buffer.alloc(64),
            fragment: { id: 999, offset: 8, more: false },
          };
          expect(await ingress(orphan)).toBe('deny');
        });
        expect(n).toBe(1);
      });
      it(`${family}: a tiny first fragment without the whole TCP header, and an overlapping one, are dropped`, async () => {
        const tcp = { src, dst, proto: 6, sport: 41002, dport: 80, tcpFlags: TCP_FLAGS.SYN };
        const n = await counted('fragBad', async () => {
          expect(await ingress({ ...tcp, l4Length: 8, fragment: { id: 200, offset: 0, more: true } })).toBe(
            'deny',
          );
          // a whole first fragment passes; a later one at offset 8 would rewrite the TCP flags
          expect(await ingress({ ...tcp, fragment: { id: 201, offset: 0, more: true } })).toBe('allow');
          const overlap = {
            ...tcp,
            payload: Buffer.alloc(16),
            fragment: { id: 201, offset: 8, more: false },
          };
          expect(await ingress(overlap)).toBe('deny');
        });
        expect(n).toBe(2);
      });
    }
    it('IPv4 options before the ports do not hide them', async () => {
      expect(await ingress({ src: B, dst: A, proto: 6, sport: 41003, dport: 22, ipOptionWords: 10 })).toBe(
        'deny',
      );
      expect(await ingress({ src: B, dst: A, proto: 6, sport: 41004, dport: 80, ipOptionWords: 10 })).toBe(
        'allow',
      );
    });
  });

  describe('layer 2 from a pod: only IPv4, IPv6 and ARP', () => {
    const udp = { src: A, dst: B, proto: 17, sport: 42000, dport: 9999 };
    it('802.1Q (VLAN 0) and QinQ frames wrapping IP are dropped and counted, both ways', async () => {
      const n = await counted('badL2', async () => {
        expect(await egress({ ...udp, dport: 7000, vlan: [[0x8100, 0]] })).toBe('deny');
        expect(
          await egress({
            ...udp,
            dport: 7000,
            vlan: [
              [0x88a8, 5],
              [0x8100, 0],
            ],
          }),
        ).toBe('deny');
        expect(await ingress({ src: B, dst: A, proto: 6, sport: 1, dport: 80, vlan: [[0x8100, 0]] })).toBe(
          'deny',
        );
      });
      expect(n).toBe(3);
      expect(await egress({ ...udp, dport: 7000 })).toBe('allow');
    });
    it('other ethertypes are dropped; ARP passes', async () => {
      const lldp = buildPacket(udp);
      lldp.writeUInt16BE(0x88cc, 12);
      expect(await verdict('from_endpoint', lldp)).toBe('deny');
      expect(await verdict('from_endpoint', buildArp(A, B))).toBe('allow');
      expect(await verdict('to_endpoint', buildArp(B, A, 2))).toBe('allow');
    });
  });

  describe('spoofed sources: a pod sends only from its own addresses, on its own interface', () => {
    it("another pod's address and source = destination are dropped as spoofed; an address nobody holds is dropped apart", async () => {
      let unbound = 0;
      const n = await counted('spoofed', async () => {
        unbound = await counted('unboundSource', async () => {
          // nobody's addresses: what a new (restarted) pod sends before the agent binds it
          expect(await egress({ src: '10.0.0.99', dst: B, proto: 17, sport: 1, dport: 7000 })).toBe('deny');
          expect(await egress({ src: 'fd00::99', dst: B6, proto: 17, sport: 1, dport: 7000 })).toBe('deny');
          expect(await egress({ src: 'fe80::1', dst: B6, proto: 6, sport: 1, dport: 80 })).toBe('deny');
          expect(await verdict('from_endpoint', buildArp('10.0.0.99', B, 2))).toBe('deny');
          expect(await verdict('from_endpoint', buildNdp('fe80::a', 'ff02::1', 136, 'fd00::99'))).toBe(
            'deny',
          );
        });
        // D's address, sent from A's interface
        expect(await egress({ src: D, dst: B, proto: 17, sport: 1, dport: 7000 })).toBe('deny');
        expect(await egress({ src: D, dst: D, proto: 6, sport: 1, dport: 80 })).toBe('deny');
        // B's, another pod's, claimed in ARP and NDP
        expect(await verdict('from_endpoint', buildArp(B, A, 2))).toBe('deny');
        expect(await verdict('from_endpoint', buildNdp('fe80::a', 'ff02::1', 136, B6))).toBe('deny');
      });
      expect(n).toBe(4);
      expect(unbound).toBe(5);
      // from its own interface, D's packets are its own
      expect(await egress({ src: D, dst: B, proto: 17, sport: 1, dport: 7000 }, dummy)).toBe('allow');
    });
    it("a conntrack entry answers only on its endpoint's interface: another pod cannot ride a flow", async () => {
      const flow = { src: D, dst: B, proto: 6, sport: 43000, dport: 443, tcpFlags: TCP_FLAGS.SYN };
      expect(await egress(flow, dummy)).toBe('allow');
      expect(await egress({ ...flow, tcpFlags: TCP_FLAGS.ACK })).toBe('deny');
      expect(await egress({ ...flow, tcpFlags: TCP_FLAGS.ACK }, dummy)).toBe('allow');
    });
    it('towards a pod: a destination that is not that pod is dropped (default deny for unknown endpoints)', async () => {
      const n = await counted('notEndpoint', async () => {
        expect(await ingress({ src: B, dst: '10.0.0.77', proto: 6, sport: 1, dport: 80 })).toBe('deny');
        expect(await ingress({ src: B, dst: D, proto: 6, sport: 1, dport: 80 })).toBe('deny');
      });
      expect(n).toBe(2);
    });
    it('ARP: a pod announces only its own IPv4 address (or probes with 0.0.0.0)', async () => {
      expect(await verdict('from_endpoint', buildArp(B, A, 2))).toBe('deny');
      expect(await verdict('from_endpoint', buildArp(D, B, 2))).toBe('deny');
      expect(await verdict('from_endpoint', buildArp(A, B, 2))).toBe('allow');
      expect(await verdict('from_endpoint', buildArp('0.0.0.0', A))).toBe('allow');
    });
    it('NDP: a pod advertises only its own or link-local addresses, and is never a router', async () => {
      expect(await verdict('from_endpoint', buildNdp('fe80::a', 'ff02::1', 136, B6))).toBe('deny');
      expect(await verdict('from_endpoint', buildNdp(A6, 'ff02::1', 136, A6))).toBe('allow');
      expect(await verdict('from_endpoint', buildNdp('fe80::a', 'ff02::1', 134))).toBe('deny');
      expect(await verdict('from_endpoint', buildNdp('fd00::99', 'ff02::1:ff00:b', 135, B6))).toBe('deny');
    });
  });

  describe('shared state', () => {
    it('one pod flooding denied flows cannot push denials of another pod out of the event ring', async () => {
      await dp.events(); // start from an empty ring
      const before = await dp.counter(COUNTERS.eventsSuppressed);
      // 2,000 denied flows towards A on fresh ports, from the world (A is isolated): each one a new
      // flow and, before, one event each: 2,000 of the ring's ~16,000
      for (let i = 0; i < 2000; i++)
        await ingress({
          src: '198.51.100.7',
          dst: A,
          proto: 6,
          sport: 20000 + i,
          dport: 8000,
          tcpFlags: TCP_FLAGS.SYN,
        });
      // then one denial at D (another pod, its own interface)
      const toD = buildPacket({
        src: '198.51.100.8',
        dst: D,
        proto: 6,
        sport: 1234,
        dport: 22,
        tcpFlags: TCP_FLAGS.SYN,
      });
      expect(await verdict('to_endpoint', toD, dummy)).toBe('deny');
      const events = await dp.events();
      const ofA = events.filter((ev) => ev.dst === A).length;
      // A's budget: a burst of 640 events, refilled at 64 a second of the agent's clock (which did not
      // move during the flood)
      expect(ofA).toBeLessThanOrEqual(640);
      expect(ofA).toBeGreaterThan(0);
      expect(events.filter((ev) => ev.dst === D)).toHaveLength(1);
      expect((await dp.counter(COUNTERS.eventsSuppressed)) - before).toBe(2000 - ofA);
    });
  });

  describe('a pod flooding new flows', () => {
    it('is held to its budget of new tracked flows and its conntrack quota; another pod keeps its live connection (rounds two and three)', async () => {
      await dp.clearConntrack();
      const t0 = monotonicSeconds();
      await dp.tick(t0);
      // D (another pod, its own interface) has a live connection to B
      const live = { src: D, dst: B, proto: 6, sport: 45000, dport: 443 };
      expect(await egress({ ...live, tcpFlags: TCP_FLAGS.SYN }, dummy)).toBe('allow');
      // A opens 45,000 allowed flows as fast as it can: its budget (bursts of 40,960, 4,096 a second of
      // the agent's clock, which does not move here) and its quota of conntrack entries (32,768, an
      // eighth of the table) track the first ones and drop the rest
      const budget = await dp.counter(COUNTERS.flowBudget);
      const quota = await dp.counter(COUNTERS.ctQuota);
      const open = async (from: number, n: number, proto = 6) => {
        let dropped = 0;
        for (let i = from; i < from + n; i++)
          if (
            (await egress({
              src: A,
              dst: B,
              proto,
              sport: 10000 + (i % 50000),
              dport: 8443 + Math.floor(i / 50000),
              ...(proto === 6 ? { tcpFlags: TCP_FLAGS.SYN } : {}),
            })) === 'deny'
          )
            dropped++;
        return dropped;
      };
      const dropped = await open(0, 45000);
      const byQuota = (await dp.counter(COUNTERS.ctQuota)) - quota;
      expect((await dp.counter(COUNTERS.flowBudget)) - budget + byQuota).toBe(dropped);
      expect(byQuota).toBe(45000 - 32768 - ((await dp.counter(COUNTERS.flowBudget)) - budget));
      const tracked = (await dp.collectConntrack()).scanned - 1; // D's flow is the other one
      expect(tracked).toBe(32768);
      // D's connection is still there: its next packet is a conntrack hit
      const hits = await dp.counter(COUNTERS.ctHit);
      expect(await egress({ ...live, tcpFlags: TCP_FLAGS.ACK }, dummy)).toBe('allow');
      expect(await dp.counter(COUNTERS.ctHit)).toBe(hits + 1);
      // round three: allowed flows at the budget rate churned the shared LRU table and evicted D's
      // idle connection within 63 s of agent clock. A holds at most its quota whatever the time:
      // a minute on (UDP idle 60 s), the collector takes its expired entries and its count, and A
      // may open flows again, still at most 32,768; D's idle TCP entry (6 h) stays.
      expect(await dp.collectConntrack({ now: t0 + 61 })).toMatchObject({ deleted: 0 }); // TCP: 6 h
      await dp.tick(t0 + 7 * 3600);
      const gc = await dp.collectConntrack({ now: t0 + 7 * 3600 });
      expect(gc.deleted).toBe(32768 + 1); // A's SYNs and D's connection, idle for 7 hours
      expect(await dp.conntrackCounts()).toEqual(new Map());
      expect(await egress({ ...live, tcpFlags: TCP_FLAGS.SYN }, dummy)).toBe('allow');
      await dp.tick(t0 + 7 * 3600 + 20); // a refilled budget
      expect(await open(100000, 1000, 17)).toBe(0);
      expect(await dp.conntrackCounts()).toEqual(
        new Map([
          [A, 1000],
          [D, 1],
        ]),
      ); // counted by the program
      await dp.clearConntrack();
    });
  });

  describe('ICMP errors and neighbour discovery', () => {
    it('an error about an allowed flow passes an isolated pod (path MTU discovery); about no flow it is judged', async () => {
      const out = { src: A, dst: B, proto: 6, sport: 44000, dport: 443, tcpFlags: TCP_FLAGS.SYN };
      expect(await egress(out)).toBe('allow');
      const fragNeeded = { src: ROUTER, dst: A, proto: 1, icmp: { type: 3, code: 4, embedded: out } };
      const n = await counted('icmpRelated', async () => {
        expect(await ingress(fragNeeded)).toBe('allow');
      });
      expect(n).toBe(1);
      // the same error about a flow A never opened: ICMP from the world, isolation denies it
      const unrelated = { ...fragNeeded, icmp: { type: 3, code: 4, embedded: { ...out, sport: 44001 } } };
      expect(await ingress(unrelated)).toBe('deny');
    });
    it('an ICMP error is no free channel (round two): it travels only as errors do, bounded', async () => {
      await dp.clearConntrack();
      // B opens B:5000 -> A:80 (A's ingress allows B): A's port-unreachable about it goes back to B
      const flow = { src: B, dst: A, proto: 17, sport: 5000, dport: 80 };
      expect(await ingress(flow)).toBe('allow');
      const unreachable = (dst: string, bytes = 0) =>
        buildPacket({
          src: A,
          dst,
          proto: 1,
          icmp: { type: 3, code: 3, embedded: flow, body: Buffer.alloc(bytes, 0x42) },
        });
      const related = await counted('icmpRelated', async () => {
        expect(await verdict('from_endpoint', unreachable(B))).toBe('allow');
      });
      expect(related).toBe(1);
      // the same error to anyone else is judged by policy as any ICMP: A's egress to the world denied
      const st = state(dummy);
      st.tables.set('out-admin', [
        ...st.tables.get('out-admin')!,
        e(ID.WORLD, 0, 0, 0, 0x7fff0001, 'deny', 80),
      ]);
      await dp.sync(st);
      expect(await ingress(flow)).toBe('allow'); // (the flow again, in the new generation)
      const none = await counted('icmpRelated', async () => {
        expect(await verdict('from_endpoint', unreachable('203.0.113.5'))).toBe('deny');
        // a body past what a stack sends (576 bytes in all for ICMPv4) rides on no flow either
        expect(await verdict('from_endpoint', unreachable(B, 1200))).toBe('allow'); // judged: B allowed
      });
      expect(none).toBe(0);
      await dp.sync(state(dummy));
      // towards A: an error about a packet A received (not one it sent) is judged: isolation
      const aboutReceived = { src: ROUTER, dst: A, proto: 1, icmp: { type: 3, code: 4, embedded: flow } };
      expect(await ingress(aboutReceived)).toBe('deny');
      // about a packet A sent, but with a body larger than any stack sends: judged, isolation
      const out = { src: A, dst: B, proto: 6, sport: 44100, dport: 443, tcpFlags: TCP_FLAGS.SYN };
      expect(await egress(out)).toBe('allow');
      const big = {
        src: ROUTER,
        dst: A,
        proto: 1,
        icmp: { type: 3, code: 4, embedded: out, body: Buffer.alloc(1000) },
      };
      expect(await ingress(big)).toBe('deny');
      expect(await ingress({ ...big, icmp: { ...big.icmp, body: Buffer.alloc(100) } })).toBe('allow');
    });

    it('a related error is cut to the headers a stack reads, lengths and checksums made right (round two)', async () => {
      await dp.clearConntrack();
      // v4: A's port unreachable back to B about B's datagram, with 400 bytes of body
      const flow = { src: B, dst: A, proto: 17, sport: 5001, dport: 80 };
      expect(await ingress(flow)).toBe('allow');
      const long = buildPacket({
        src: A,
        dst: B,
        proto: 1,
        icmp: { type: 3, code: 3, embedded: flow, body: Buffer.alloc(400, 0x42) },
      });
      long.writeUInt16BE(0, 24); // a sender's IPv4 header checksum (the program adjusts it)
      long.writeUInt16BE(~onesSum(long.subarray(14, 34)) & 0xffff, 24);
      let out: Buffer = Buffer.alloc(0);
      const trimmed = await counted('icmpTrimmed', async () => {
        const r = await dp.run('from_endpoint', long);
        expect(r.retval).not.toBe(TC_ACT_SHOT);
        out = r.out;
      });
      expect(trimmed).toBe(1);
      // Ethernet 14 + IPv4 20 + ICMP 8 + the embedded IPv4 header 20 + 8 + the 32-byte margin
      expect(out.length).toBe(14 + 20 + 8 + 20 + 8 + 32);
      expect(out.readUInt16BE(14 + 2)).toBe(out.length - 14); // total length
      expect(onesSum(out.subarray(14, 34))).toBe(0xffff); // IPv4 header checksum
      expect(onesSum(out.subarray(34))).toBe(0xffff); // ICMP checksum over what is left
      expect(out.subarray(34 + 8, 34 + 8 + 28)).toEqual(long.subarray(34 + 8, 34 + 8 + 28)); // the embedded headers
      // short enough already: passes untouched
      const short = buildPacket({
        src: A,
        dst: B,
        proto: 1,
        icmp: { type: 3, code: 3, embedded: flow, body: Buffer.alloc(8) },
      });
      expect((await dp.run('from_endpoint', short)).out).toEqual(short);
      // v6: a packet too big towards A about A's flow, with 600 bytes of body: cut, pseudo-header checksum
      const out6 = { src: A6, dst: B6, proto: 17, sport: 44010, dport: 7000 };
      expect(await egress(out6)).toBe('allow');
      const ptb = buildPacket({
        src: 'fd00::1:1',
        dst: A6,
        proto: 58,
        icmp: { type: 2, embedded: out6, body: Buffer.alloc(600, 0x43) },
      });
      const r6 = await dp.run('to_endpoint', ptb);
      expect(r6.retval).not.toBe(TC_ACT_SHOT);
      const o6 = r6.out;
      expect(o6.length).toBe(14 + 40 + 8 + 40 + 8 + 32);
      expect(o6.readUInt16BE(14 + 4)).toBe(o6.length - 54); // payload length
      const pseudo = Buffer.alloc(40);
      o6.copy(pseudo, 0, 14 + 8, 14 + 40);
      pseudo.writeUInt32BE(o6.length - 54, 32);
      pseudo.writeUInt32BE(58, 36);
      expect(onesSum(Buffer.concat([pseudo, o6.subarray(54)]))).toBe(0xffff);
      expect(o6.readUInt32BE(54 + 4)).toBe(ptb.readUInt32BE(54 + 4)); // the MTU a stack reads
    });

    it('ICMPv6 packet too big about an allowed flow passes; about a denied one it does not', async () => {
      const out = { src: A6, dst: B6, proto: 17, sport: 44002, dport: 7000 };
      expect(await egress(out)).toBe('allow');
      const ptb = { src: 'fd00::1:1', dst: A6, proto: 58, icmp: { type: 2, embedded: out } };
      expect(await ingress(ptb)).toBe('allow');
      const denied = { src: A6, dst: B6, proto: 17, sport: 44003, dport: 9999 };
      expect(await egress(denied)).toBe('deny');
      expect(await ingress({ ...ptb, icmp: { type: 2, embedded: denied } })).toBe('deny');
    });
    it('NDP and MLD are no free channel (round two): off their form they are judged by policy', async () => {
      const icmp6 = (src: string, dst: string, type: number, hopLimit: number, bytes: number) =>
        buildPacket({ src, dst, proto: 58, hopLimit, icmp: { type, body: Buffer.alloc(bytes, 0x41) } });
      // towards A (isolated but for B): MLD of any hop limit and NDP of hop limit 64 with a payload
      // passed before; now judged, and isolation drops them
      const judged = await counted('ndp', async () => {
        expect(await verdict('to_endpoint', icmp6('fe80::1', A6, 143, 64, 100))).toBe('deny');
        expect(await verdict('to_endpoint', icmp6('fe80::1', A6, 131, 1, 100))).toBe('deny'); // unicast
        expect(await verdict('to_endpoint', icmp6('fd00::1:1', A6, 136, 64, 16))).toBe('deny');
        // hop limit 255 but far larger than a solicitation
        expect(await verdict('to_endpoint', icmp6('fe80::1', A6, 135, 255, 1000))).toBe('deny');
        // MLD larger than any report a pod sends
        expect(await verdict('to_endpoint', icmp6('fe80::1', 'ff02::16', 143, 1, 1100))).toBe('deny');
      });
      expect(judged).toBe(0);
      // the protocols as they are sent still pass: MLD from link-local, hop limit 1, to multicast
      const passed = await counted('ndp', async () => {
        const query = buildPacket({
          src: 'fe80::1',
          dst: 'ff02::1',
          proto: 58,
          hopLimit: 1,
          icmp: { type: 130, body: Buffer.alloc(20) },
        });
        expect(await verdict('to_endpoint', query)).toBe('allow'); // MLDv2, no sources
        const joins = ['ff02::1:ff00:a', 'ff02::1:ff00:b'];
        expect(await verdict('from_endpoint', buildMldReport('fe80::a', joins))).toBe('allow');
        expect(await verdict('from_endpoint', buildMldReport('::', joins))).toBe('allow');
      });
      expect(passed).toBe(3);
      // from A: unicast NS/NA to an address off the link (the world, a pod of another node) is dropped
      const refused = await counted('ndpRefused', async () => {
        expect(await verdict('from_endpoint', buildNdp(A6, '2001:db8::1', 135, '2001:db8::1'))).toBe('deny');
        expect(await verdict('from_endpoint', buildNdp(A6, B6, 136, A6))).toBe('deny');
      });
      expect(refused).toBe(2);
      // MLD from a global source is no MLD: judged (A's egress allows it), not counted as NDP
      expect(await counted('ndp', () => verdict('from_endpoint', icmp6(A6, 'ff02::16', 143, 1, 40)))).toBe(0);
    });

    it('NDP and MLD carry no data past policy (round three): only their RFC forms pass unjudged', async () => {
      const icmp6 = (src: string, dst: string, type: number, hopLimit: number, bytes: number) =>
        buildPacket({ src, dst, proto: 58, hopLimit, icmp: { type, body: Buffer.alloc(bytes) } });
      const mac = Buffer.from('020000000a0a', 'hex');
      const nonce = Buffer.from('0102030405a6', 'hex');
      const data = (n: number) => Buffer.alloc(n, 0x44);
      // as Linux sends them, both ways: NS with a source link-layer address, DAD with a nonce, NA with
      // a target link-layer address, RS, MLDv1 and MLDv2 reports of joins without sources
      const forms = await counted('ndp', async () => {
        expect(await verdict('from_endpoint', buildNdp(A6, 'ff02::1:ff00:b', 135, B6, [[1, mac]]))).toBe(
          'allow',
        );
        expect(await verdict('from_endpoint', buildNdp('::', 'ff02::1:ff00:a', 135, A6, [[14, nonce]]))).toBe(
          'allow',
        );
        expect(
          await verdict(
            'from_endpoint',
            buildNdp(A6, 'ff02::1:ff00:b', 135, B6, [
              [1, mac],
              [14, nonce],
            ]),
          ),
        ).toBe('allow');
        expect(await verdict('from_endpoint', buildNdp(A6, 'fe80::1', 136, A6, [[2, mac]]))).toBe('allow');
        expect(await verdict('from_endpoint', buildNdp(A6, 'ff02::1', 136, A6, [[2, mac]]))).toBe('allow');
        expect(await verdict('from_endpoint', buildNdp('fe80::a', 'ff02::2', 133, '::', [[1, mac]]))).toBe(
          'allow',
        );
        expect(await verdict('to_endpoint', buildNdp('fe80::1', A6, 136, 'fe80::1', [[2, mac]]))).toBe(
          'allow',
        );
        expect(await verdict('from_endpoint', icmp6('fe80::a', 'ff02::2', 131, 1, 16))).toBe('allow'); // MLDv1
        expect(await verdict('to_endpoint', buildMldReport('fe80::1', ['ff02::1:ff00:1', 'ff02::fb']))).toBe(
          'allow',
        );
      });
      expect(forms).toBe(9);
      // what a tenant used as a channel to a deny-all pod on the same bridge: a neighbour
      // advertisement to ff02::1 from its own address with data in its options (192 bytes), and an
      // MLD report from its link-local address (924 bytes). Now judged by policy: A's isolation drops
      // them towards A
      const W6 = 'fd00::1:1'; // a sender A's policy does not admit
      const na = (opts: [number, Buffer][]) => buildNdp(W6, 'ff02::1', 136, W6, opts);
      const mld = (src: string, groups: string[], type?: number, sources?: string[]) =>
        buildMldReport(src, groups, type, sources);
      const channels = await counted('ndp', async () => {
        expect(
          await verdict(
            'to_endpoint',
            na([
              [2, mac],
              [25, data(174)],
            ]),
          ),
        ).toBe('deny'); // 192 bytes
        expect(
          await verdict(
            'to_endpoint',
            na([
              [2, mac],
              [2, mac],
            ]),
          ),
        ).toBe('deny'); // twice
        expect(await verdict('to_endpoint', na([[1, mac]]))).toBe('deny'); // not an NA's option
        expect(await verdict('to_endpoint', na([[2, data(14)]]))).toBe('deny'); // two units
        expect(
          await verdict(
            'to_endpoint',
            buildNdp(W6, 'ff02::1:ff00:a', 135, A6, [
              [14, nonce],
              [14, nonce],
            ]),
          ),
        ).toBe('deny');
        expect(await verdict('to_endpoint', buildNdp('fe80::b', 'ff02::2', 133, '::', [[1, data(14)]]))).toBe(
          'deny',
        );
        // MLD: 924 bytes of records with sources (data in the source addresses), too many records,
        // a record with auxiliary data, a group that is not multicast, a count that lies
        const hosts = Array.from({ length: 56 }, (_, i) => `2001:db8::${i + 1}`);
        expect(await verdict('to_endpoint', mld('fe80::b', ['ff02::1:ff00:a'], 1, hosts))).toBe('deny');
        const many = Array.from({ length: 9 }, (_, i) => `ff02::1:ff00:${i + 1}`);
        expect(await verdict('to_endpoint', mld('fe80::b', many))).toBe('deny');
        const aux = mld('fe80::b', ['ff02::1:ff00:a']);
        aux[14 + 40 + 8 + 1] = 1;
        expect(await verdict('to_endpoint', aux)).toBe('deny');
        expect(await verdict('to_endpoint', mld('fe80::b', ['2001:db8::7']))).toBe('deny');
        const lies = mld('fe80::b', ['ff02::1:ff00:a', 'ff02::1:ff00:b']);
        lies.writeUInt16BE(1, 14 + 40 + 6);
        expect(await verdict('to_endpoint', lies)).toBe('deny');
        expect(await verdict('to_endpoint', icmp6('fe80::b', 'ff02::1', 130, 1, 36))).toBe('deny'); // sources
      });
      expect(channels).toBe(0);
      // from a pod, an advertisement for another pod's link-local address is not its own claim
      const spoof = await counted('unboundSource', () =>
        verdict('from_endpoint', buildNdp('fe80::a', 'ff02::1', 136, 'fe80::b', [[2, mac]])),
      );
      expect(spoof).toBe(1);
    });

    it('neighbour solicitations and advertisements reach an isolated pod; its own pass out', async () => {
      const n = await counted('ndp', async () => {
        expect(await verdict('to_endpoint', buildNdp('fe80::1', A6, 135, A6))).toBe('allow');
        expect(await verdict('to_endpoint', buildNdp('fe80::1', 'ff02::1:ff00:a', 135, A6))).toBe('allow');
        expect(await verdict('from_endpoint', buildNdp('fe80::a', 'fe80::1', 136, 'fe80::a'))).toBe('allow');
        expect(await verdict('from_endpoint', buildNdp('::', 'ff02::1:ff00:a', 135, A6))).toBe('allow');
      });
      expect(n).toBe(4);
      // an echo request from the world is still judged: isolation
      expect(await ingress({ src: 'fd00::1:1', dst: A6, proto: 58, icmp: { type: 128 } })).toBe('deny');
    });
  });
});
