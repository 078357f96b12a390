// Kernel tests of the flow cache (bpf/flowcache.h): the per-CPU slots that answer an established
// flow's later packets before anything is parsed. Each test proves an answer came from the cache by
// removing the flow's conntrack entry first (as `netpol trace` does): a packet that still passes was
// answered by its slot; one that is judged again was not.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACTS } from './artifacts.ts';
import { COUNTERS, EP_FLAGS, encodeCtKey, ID, TEST_RUN_IFINDEX } from './codecs.ts';
import { possibleCpus } from './flowcache.ts';
import { Datapath } from './loader.ts';
import { buildPacket, type PacketSpec, TCP_FLAGS } from './packet.ts';
import type { DesiredState } from './state.ts';
import { entry as e, freshDatapath, kernelTestsEnabled, kernelVerdict, TABLES_OF } from './testing.ts';

const A = '10.0.0.1';
const B = '10.0.0.2';
const A6 = 'fd00::a';
const B6 = 'fd00::b';
const VIP = '10.96.0.10';
const both = EP_FLAGS.ENFORCE_INGRESS | EP_FLAGS.ENFORCE_EGRESS;

// A's ingress is isolated (nothing from B is allowed in); its egress allows everything.
function state(denyEgress = false): DesiredState {
  return {
    ipcache: [
      { prefix: A, identity: 300 },
      { prefix: B, identity: 301 },
      { prefix: A6, identity: 300 },
      { prefix: B6, identity: 301 },
      { prefix: '0.0.0.0/0', identity: ID.WORLD },
    ],
    endpoints: [A, A6].map((ip) => ({
      ip,
      identity: 300,
      flags: both,
      tables: TABLES_OF,
      ifindex: TEST_RUN_IFINDEX,
    })),
    tables: new Map([
      ['in-admin', []],
      ['in-lower', [e(ID.WILDCARD, 0, 0, 0, 0x8001, 'deny', 1)]],
      ['out-admin', denyEgress ? [e(301, 0, 0, 0, 0x7fff0001, 'deny', 2)] : []],
      ['out-lower', []],
    ]),
    services: [{ addr: VIP, port: 80, proto: 6, backends: [{ addr: B, port: 8080 }] }],
  };
}

const reply = (p: PacketSpec): PacketSpec => ({
  ...p,
  src: p.dst,
  dst: p.src,
  sport: p.dport,
  dport: p.sport,
});

describe.skipIf(!kernelTestsEnabled())('flow cache (per-CPU slots in front of conntrack)', () => {
  let dp: Datapath;
  let cleanup: () => Promise<void>;
  const forget = async (p: PacketSpec) => {
    const key = { local: p.src, remote: p.dst, lport: p.sport ?? 0, rport: p.dport ?? 0, proto: p.proto };
    await dp.ctl.send(`delete cascade_ct ${encodeCtKey(key).toString('hex')}`);
  };
  const fills = () => dp.counter(COUNTERS.flowCacheFill);
  /** A flow A -> B opened by A and answered by conntrack once more (which fills A's slot). */
  const established = async (p: PacketSpec) => {
    expect(await kernelVerdict(dp, 'egress', p)).toBe('allow');
    const before = await fills();
    expect(await kernelVerdict(dp, 'egress', p)).toBe('allow');
    expect(await fills()).toBe(before + 1);
  };
  const OTHER = 'cascfc0';
  let other = 0;
  beforeAll(async () => {
    try {
      execFileSync('ip', ['link', 'del', OTHER], { stdio: 'ignore' });
    } catch {}
    execFileSync('ip', ['link', 'add', OTHER, 'type', 'veth', 'peer', 'name', `${OTHER}p`]);
    other = Number(readFileSync(`/sys/class/net/${OTHER}/ifindex`, 'utf8'));
    ({ dp, cleanup } = await freshDatapath());
    // the slots are per CPU: every packet of these tests runs on CPU 0
    execFileSync('taskset', ['-p', '-c', '0', String(dp.ctl.pid)], { stdio: 'ignore' });
    await dp.sync(state());
    await dp.tick(5_000_000);
  });
  afterAll(async () => {
    await cleanup?.();
    execFileSync('ip', ['link', 'del', OTHER], { stdio: 'ignore' });
  });

  it('answers an established flow in both directions until the clock ticks, then conntrack does again', async () => {
    const out = { src: A, dst: B, proto: 6, sport: 50000, dport: 443, tcpFlags: TCP_FLAGS.ACK };
    await established(out);
    const hits = await dp.counter(COUNTERS.ctHit);
    await forget(out);
    // conntrack no longer knows the flow, the slot does: both directions pass, counted as hits
    expect(await kernelVerdict(dp, 'egress', out)).toBe('allow');
    expect(await kernelVerdict(dp, 'ingress', reply(out))).toBe('allow');
    expect(await dp.counter(COUNTERS.ctHit)).toBe(hits + 2);
    // the next tick ends the slot's answers: the reply is a new flow, which A's isolation denies
    await dp.tick(5_000_010);
    expect(await kernelVerdict(dp, 'ingress', reply(out))).toBe('deny');
  });

  it('IPv6 and UDP flows are answered the same way', async () => {
    for (const out of [
      { src: A6, dst: B6, proto: 6, sport: 50001, dport: 443, tcpFlags: TCP_FLAGS.ACK },
      { src: A, dst: B, proto: 17, sport: 50002, dport: 53 },
    ]) {
      await established(out);
      await forget(out);
      expect(await kernelVerdict(dp, 'ingress', reply(out))).toBe('allow');
    }
  });

  it('a policy change (generation bump) ends every answer: the flow is judged again at once', async () => {
    const out = { src: A, dst: B, proto: 6, sport: 50003, dport: 443, tcpFlags: TCP_FLAGS.ACK };
    await established(out);
    await dp.sync(state(true));
    expect(await kernelVerdict(dp, 'egress', out)).toBe('deny');
    expect(await kernelVerdict(dp, 'ingress', reply(out))).toBe('deny');
    await dp.sync(state());
  });

  it('answers only on the interface the flow was judged on (the source binding holds)', async () => {
    const out = { src: A, dst: B, proto: 6, sport: 50004, dport: 443, tcpFlags: TCP_FLAGS.ACK };
    await established(out);
    const unbound = await dp.counter(COUNTERS.unboundSource);
    const spoofed = await dp.counter(COUNTERS.spoofed);
    const { retval } = await dp.run('from_endpoint', buildPacket(out), 1, other);
    expect(retval).toBe(2);
    expect((await dp.counter(COUNTERS.spoofed)) + (await dp.counter(COUNTERS.unboundSource))).toBe(
      spoofed + unbound + 1,
    );
  });

  it('never answers SYN, FIN or RST: a FIN marks the flow closing, and a SYN on it is judged as a new flow', async () => {
    const out = { src: A, dst: B, proto: 6, sport: 50005, dport: 443, tcpFlags: TCP_FLAGS.ACK };
    await established(out);
    const fin = { ...out, tcpFlags: TCP_FLAGS.FIN | TCP_FLAGS.ACK };
    expect(await kernelVerdict(dp, 'egress', fin)).toBe('allow');
    // closing now, in conntrack: B's SYN on the same ports is a new flow into A's isolation
    expect(await kernelVerdict(dp, 'ingress', { ...reply(out), tcpFlags: TCP_FLAGS.SYN })).toBe('deny');
    // the slot filled before the FIN answers (as its closing entry would) until the tick; after it, a
    // closing flow fills no slot: with its entry gone, its reply is judged again
    await dp.tick(5_000_020);
    const before = await fills();
    expect(await kernelVerdict(dp, 'egress', out)).toBe('allow');
    expect(await fills()).toBe(before);
    await forget(out);
    expect(await kernelVerdict(dp, 'ingress', reply(out))).toBe('deny');
  });

  it("a flow's first packet fills nothing: a synthetic packet whose entry is removed leaves no way in", async () => {
    const out = { src: A, dst: B, proto: 6, sport: 50006, dport: 443, tcpFlags: TCP_FLAGS.ACK };
    const before = await fills();
    expect(await kernelVerdict(dp, 'egress', out)).toBe('allow');
    await forget(out);
    expect(await kernelVerdict(dp, 'ingress', reply(out))).toBe('deny');
    expect(await fills()).toBe(before);
  });

  it('fragments, IPv4 options, IPv6 extension headers, ICMP and translated (Service) flows are never cached', async () => {
    const before = await fills();
    const frag = {
      src: A,
      dst: B,
      proto: 17,
      sport: 50007,
      dport: 53,
      fragment: { id: 9, offset: 0, more: true },
    };
    const opts = {
      src: A,
      dst: B,
      proto: 6,
      sport: 50008,
      dport: 443,
      tcpFlags: TCP_FLAGS.ACK,
      ipOptionWords: 1,
    };
    const svc = { src: A, dst: VIP, proto: 6, sport: 50009, dport: 80, tcpFlags: TCP_FLAGS.ACK };
    const ext6 = {
      src: A6,
      dst: B6,
      proto: 6,
      sport: 50010,
      dport: 443,
      tcpFlags: TCP_FLAGS.ACK,
      extHeaders: [60],
    };
    const ping = { src: A, dst: B, proto: 1, icmp: { type: 8 } };
    for (const p of [frag, opts, svc, ext6, ping] as PacketSpec[])
      for (let i = 0; i < 3; i++) expect(await kernelVerdict(dp, 'egress', p)).toBe('allow');
    expect(await fills()).toBe(before);
  });
});

describe.skipIf(!kernelTestsEnabled())('the flow cache sized at load time', () => {
  it('256 slots per CPU: every flow lands in the smaller table; another size replaces the cache only', async () => {
    const pinDir = mkdtempSync('/sys/fs/bpf/cascade-test-');
    const open = (flowSlots: number) =>
      Datapath.open({ bpfctl: ARTIFACTS.bpfctl, object: ARTIFACTS.object, pinDir, flowSlots });
    let dp = await open(256);
    try {
      expect(dp.flowSlots).toBe(256);
      expect(dp.flowCacheBytes).toBe(256 * 56 * possibleCpus());
      execFileSync('taskset', ['-p', '-c', '0', String(dp.ctl.pid)], { stdio: 'ignore' });
      await dp.sync(state());
      await dp.tick(5_000_000);
      // each flow is answered from its slot after conntrack forgot it: the slot index stayed within
      // the 256 slots (with the default shift, 255 of 256 flows would index past the table)
      for (let i = 0; i < 6; i++) {
        const out = {
          src: A,
          dst: B,
          proto: 6,
          sport: 20000 + i * 7919,
          dport: 443,
          tcpFlags: TCP_FLAGS.ACK,
        };
        expect(await kernelVerdict(dp, 'egress', out)).toBe('allow');
        expect(await kernelVerdict(dp, 'egress', out)).toBe('allow');
        const key = { local: out.src, remote: out.dst, lport: out.sport, rport: out.dport, proto: 6 };
        await dp.ctl.send(`delete cascade_ct ${encodeCtKey(key).toString('hex')}`);
        expect(await kernelVerdict(dp, 'ingress', reply(out)), `flow ${i}`).toBe('allow');
      }
      await dp.close();
      // the same pins with another size: only the cache is replaced, policy and conntrack are adopted
      dp = await open(1024);
      expect(dp.replacedMaps).toEqual(['cascade_flows']);
      expect(dp.flowSlots).toBe(1024);
      await dp.close();
      await expect(open(300)).rejects.toThrow(/a power of two from 256 to 65536/);
      dp = await open(0);
      expect(dp.flowSlots).toBe(16_384);
    } finally {
      await dp.close().catch(() => {});
      rmSync(pinDir, { recursive: true, force: true });
    }
  });
});
