// The hostile-packet suites' fixture (adversarial.kernel.test.ts, icmp-ndp.kernel.test.ts): pods A
// (IPv4 and IPv6, on the BPF_PROG_TEST_RUN interface) and D (on a veth of its own), B a peer, and
// the rule sets below; one datapath per suite, with the helpers that judge a packet.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll } from 'vitest';
import { COUNTERS, EP_FLAGS, ID, TEST_RUN_IFINDEX } from './codecs.ts';
import type { Datapath } from './loader.ts';
import { buildPacket, type PacketSpec } from './packet.ts';
import type { DesiredState } from './state.ts';
import { entry as e, freshDatapath, TABLES_OF, TC_ACT_SHOT } from './testing.ts';

export const A = '10.0.0.1';
export const A6 = 'fd00::a';
export const B = '10.0.0.2';
export const B6 = 'fd00::b';
export const D = '10.0.0.4'; // another pod, on another interface (one end of a veth pair)
export const ROUTER = '192.0.2.1';
const ID_A = 300;
const ID_B = 301;
const ID_D = 302;
const both = EP_FLAGS.ENFORCE_INGRESS | EP_FLAGS.ENFORCE_EGRESS;

/** The ones' complement sum of a buffer (0xffff: its checksum field is right). */
export function onesSum(b: Buffer): number {
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
export function state(dummyIfindex: number): DesiredState {
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

/**
 * A datapath loaded with `state` for the suite that calls it (in a describe: its beforeAll and
 * afterAll are the suite's), D bound to a veth named `veth` (unique per suite file: they run at
 * once). Read `dp` and `dummy` inside tests.
 */
export function hostileDatapath(veth: string) {
  const h = {
    dp: undefined as unknown as Datapath,
    dummy: 0,
    verdict: async (prog: 'from_endpoint' | 'to_endpoint', pkt: Buffer, ifindex = TEST_RUN_IFINDEX) =>
      (await h.dp.run(prog, pkt, 1, ifindex)).retval === TC_ACT_SHOT ? 'deny' : 'allow',
    ingress: (p: PacketSpec) => h.verdict('to_endpoint', buildPacket(p)),
    egress: (p: PacketSpec, ifindex?: number) => h.verdict('from_endpoint', buildPacket(p), ifindex),
    counted: async (name: keyof typeof COUNTERS, f: () => Promise<unknown>) => {
      const before = await h.dp.counter(COUNTERS[name]);
      await f();
      return (await h.dp.counter(COUNTERS[name])) - before;
    },
  };
  let cleanup: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    try {
      execFileSync('ip', ['link', 'del', veth], { stdio: 'ignore' });
    } catch {}
    execFileSync('ip', ['link', 'add', veth, 'type', 'veth', 'peer', 'name', `${veth}p`]);
    h.dummy = Number(readFileSync(`/sys/class/net/${veth}/ifindex`, 'utf8'));
    let dp: Datapath;
    ({ dp, cleanup } = await freshDatapath());
    h.dp = dp;
    await dp.sync(state(h.dummy));
  });
  afterAll(async () => {
    await cleanup?.();
    execFileSync('ip', ['link', 'del', veth], { stdio: 'ignore' });
  });
  return h;
}
