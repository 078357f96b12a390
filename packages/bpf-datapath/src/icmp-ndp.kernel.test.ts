// ICMP errors and neighbour discovery against the real program (BPF_PROG_TEST_RUN): an error of an
// allowed flow passes only as errors travel, cut to what a stack reads; NDP and MLD pass unjudged only
// in their RFC forms (rounds two and three). The fixture: adversarial-fixture.ts.
import { describe, expect, it } from 'vitest';
import { A, A6, B, B6, hostileDatapath, onesSum, ROUTER, state } from './adversarial-fixture.ts';
import { ID } from './codecs.ts';
import { buildMldReport, buildNdp, buildPacket, TCP_FLAGS } from './packet.ts';
import { entry as e, kernelTestsEnabled, TC_ACT_SHOT } from './testing.ts';

describe.skipIf(!kernelTestsEnabled())('the datapath against hostile packets', () => {
  const h = hostileDatapath('cascade-ticmp0');
  const { verdict, ingress, egress, counted } = h;

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
      await h.dp.clearConntrack();
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
      const st = state(h.dummy);
      st.tables.set('out-admin', [
        ...st.tables.get('out-admin')!,
        e(ID.WORLD, 0, 0, 0, 0x7fff0001, 'deny', 80),
      ]);
      await h.dp.sync(st);
      expect(await ingress(flow)).toBe('allow'); // (the flow again, in the new generation)
      const none = await counted('icmpRelated', async () => {
        expect(await verdict('from_endpoint', unreachable('203.0.113.5'))).toBe('deny');
        // a body past what a stack sends (576 bytes in all for ICMPv4) rides on no flow either
        expect(await verdict('from_endpoint', unreachable(B, 1200))).toBe('allow'); // judged: B allowed
      });
      expect(none).toBe(0);
      await h.dp.sync(state(h.dummy));
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
      await h.dp.clearConntrack();
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
        const r = await h.dp.run('from_endpoint', long);
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
      expect((await h.dp.run('from_endpoint', short)).out).toEqual(short);
      // v6: a packet too big towards A about A's flow, with 600 bytes of body: cut, pseudo-header checksum
      const out6 = { src: A6, dst: B6, proto: 17, sport: 44010, dport: 7000 };
      expect(await egress(out6)).toBe('allow');
      const ptb = buildPacket({
        src: 'fd00::1:1',
        dst: A6,
        proto: 58,
        icmp: { type: 2, embedded: out6, body: Buffer.alloc(600, 0x43) },
      });
      const r6 = await h.dp.run('to_endpoint', ptb);
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
