// The datapath under attack: packets a pod owner can send from their pod, through the real program
// (BPF_PROG_TEST_RUN). Each case was a bypass before this suite: IPv6 extension headers and fragments
// hid ports, VLAN tags hid IP, any source address was accepted, and an address that is no endpoint
// passed unjudged. ICMP errors and neighbour discovery: icmp-ndp.kernel.test.ts.
import { describe, expect, it } from 'vitest';
import { A, A6, B, B6, D, hostileDatapath } from './adversarial-fixture.ts';
import { COUNTERS } from './codecs.ts';
import { monotonicSeconds } from './kernel.ts';
import { buildArp, buildNdp, buildPacket, TCP_FLAGS } from './packet.ts';
import { kernelTestsEnabled } from './testing.ts';

describe.skipIf(!kernelTestsEnabled())('the datapath against hostile packets', () => {
  const h = hostileDatapath('cascade-tadv0');
  const { verdict, ingress, egress, counted } = h;

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
      expect(await egress({ src: D, dst: B, proto: 17, sport: 1, dport: 7000 }, h.dummy)).toBe('allow');
    });
    it("a conntrack entry answers only on its endpoint's interface: another pod cannot ride a flow", async () => {
      const flow = { src: D, dst: B, proto: 6, sport: 43000, dport: 443, tcpFlags: TCP_FLAGS.SYN };
      expect(await egress(flow, h.dummy)).toBe('allow');
      expect(await egress({ ...flow, tcpFlags: TCP_FLAGS.ACK })).toBe('deny');
      expect(await egress({ ...flow, tcpFlags: TCP_FLAGS.ACK }, h.dummy)).toBe('allow');
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
      await h.dp.events(); // start from an empty ring
      const before = await h.dp.counter(COUNTERS.eventsSuppressed);
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
      expect(await verdict('to_endpoint', toD, h.dummy)).toBe('deny');
      const events = await h.dp.events();
      const ofA = events.filter((ev) => ev.dst === A).length;
      // A's budget: a burst of 640 events, refilled at 64 a second of the agent's clock (which did not
      // move during the flood)
      expect(ofA).toBeLessThanOrEqual(640);
      expect(ofA).toBeGreaterThan(0);
      expect(events.filter((ev) => ev.dst === D)).toHaveLength(1);
      expect((await h.dp.counter(COUNTERS.eventsSuppressed)) - before).toBe(2000 - ofA);
    });
  });

  describe('a pod flooding new flows', () => {
    it('is held to its budget of new tracked flows and its conntrack quota; another pod keeps its live connection (rounds two and three)', async () => {
      await h.dp.clearConntrack();
      const t0 = monotonicSeconds();
      await h.dp.tick(t0);
      // D (another pod, its own interface) has a live connection to B
      const live = { src: D, dst: B, proto: 6, sport: 45000, dport: 443 };
      expect(await egress({ ...live, tcpFlags: TCP_FLAGS.SYN }, h.dummy)).toBe('allow');
      // A opens 45,000 allowed flows as fast as it can: its budget (bursts of 40,960, 4,096 a second of
      // the agent's clock, which does not move here) and its quota of conntrack entries (32,768, an
      // sixteenth of the table's slots) track the first ones and drop the rest
      const budget = await h.dp.counter(COUNTERS.flowBudget);
      const quota = await h.dp.counter(COUNTERS.ctQuota);
      const evictedBefore = await h.dp.counter(COUNTERS.ctEvicted);
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
      const byQuota = (await h.dp.counter(COUNTERS.ctQuota)) - quota;
      expect((await h.dp.counter(COUNTERS.flowBudget)) - budget + byQuota).toBe(dropped);
      expect(byQuota).toBe(45000 - 32768 - ((await h.dp.counter(COUNTERS.flowBudget)) - budget));
      // A's flows fill some of the table's sets of four: there, A evicts its own stalest flow, never
      // D's (ct_victim), and each is counted
      const evicted = (await h.dp.counter(COUNTERS.ctEvicted)) - evictedBefore;
      const tracked = (await h.dp.collectConntrack()).scanned - 1; // D's flow is the other one
      expect(tracked + evicted).toBe(32768);
      expect(evicted).toBeLessThan(20); // under 1 expected: 131,072 sets of four holding 32,769 flows
      // D's connection is still there: its next packet is a conntrack hit
      const hits = await h.dp.counter(COUNTERS.ctHit);
      expect(await egress({ ...live, tcpFlags: TCP_FLAGS.ACK }, h.dummy)).toBe('allow');
      expect(await h.dp.counter(COUNTERS.ctHit)).toBe(hits + 1);
      // round three: allowed flows at the budget rate churned the shared LRU table and evicted D's
      // idle connection within 63 s of agent clock. A holds at most its quota whatever the time:
      // a minute on (UDP idle 60 s), the collector takes its expired entries and its count, and A
      // may open flows again, still at most 32,768; D's idle TCP entry (6 h) stays.
      expect(await h.dp.collectConntrack({ now: t0 + 61 })).toMatchObject({ deleted: 0 }); // TCP: 6 h
      await h.dp.tick(t0 + 7 * 3600);
      const gc = await h.dp.collectConntrack({ now: t0 + 7 * 3600 });
      expect(gc.deleted).toBe(tracked + 1); // A's SYNs and D's connection, idle for 7 hours
      expect(await h.dp.conntrackCounts()).toEqual(new Map());
      expect(await egress({ ...live, tcpFlags: TCP_FLAGS.SYN }, h.dummy)).toBe('allow');
      await h.dp.tick(t0 + 7 * 3600 + 20); // a refilled budget
      expect(await open(100000, 1000, 17)).toBe(0);
      expect(await h.dp.conntrackCounts()).toEqual(
        new Map([
          [A, 1000],
          [D, 1],
        ]),
      ); // counted by the program
      await h.dp.clearConntrack();
    });
  });
});
