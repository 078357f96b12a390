// Kernel tests against the real BPF program (BPF_PROG_TEST_RUN), with hand-written rule sets.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COUNTERS, EP_FLAGS, ID, TEST_RUN_IFINDEX } from './codecs.ts';
import type { Datapath } from './loader.ts';
import { buildArp, buildPacket, TCP_FLAGS } from './packet.ts';
import { type DesiredState, encodeState, type TableEntry } from './state.ts';
import {
  entry,
  freshDatapath,
  kernelTestsEnabled,
  kernelVerdict,
  referenceOf,
  TABLES_OF,
  TC_ACT_OK,
  TC_ACT_SHOT,
} from './testing.ts';

const A = '10.0.0.1';
const B = '10.0.0.2';
const C = '10.0.0.3';
const V6 = 'fd00::1';
const EXT = '8.8.8.8';
const ID_A = 300;
const ID_B = 301;
const ID_C = 302;
const ID_CIDR = 0x02000000;
const ID_EXCEPT = 0x02000001;
const both = EP_FLAGS.ENFORCE_INGRESS | EP_FLAGS.ENFORCE_EGRESS;

const e = entry;

function state(overrides: Partial<Record<string, TableEntry[]>> = {}): DesiredState {
  const tables = new Map<string, TableEntry[]>(
    Object.entries({
      // ingress admin: deny B on tcp/80 (rank 0), pass C (rank 1)
      'in-admin': [e(ID_B, 6, 80, 16, 0x7fff0001, 'deny', 10), e(ID_C, 0, 0, 0, 0x7ffe0000, 'pass', 11)],
      // ingress lower: NP allow all pods tcp 1024-2047, and tcp 80 from B; isolation deny
      'in-lower': [
        e(ID.ALL_PODS, 6, 1024, 6, 0xfffe, 'allow', 20),
        e(ID_B, 6, 80, 16, 0xfffe, 'allow', 21),
        e(ID.WILDCARD, 0, 0, 0, 0x8001, 'deny', 22),
      ],
      // egress admin: nothing; egress lower: baseline deny world CIDR except the except-prefix; sctp to B
      'out-admin': [],
      'out-lower': [
        e(ID_CIDR, 0, 0, 0, 0x7ffe, 'deny', 30),
        e(ID.WILDCARD, 132, 9000, 16, 0x7ffc, 'deny', 31),
        e(ID_B, 132, 9000, 16, 0x7ffd, 'allow', 32),
      ],
      ...overrides,
    }) as [string, TableEntry[]][],
  );
  const tablesOf = TABLES_OF;
  return {
    ipcache: [
      { prefix: A, identity: ID_A },
      { prefix: B, identity: ID_B },
      { prefix: C, identity: ID_C },
      { prefix: V6, identity: ID_B },
      { prefix: '0.0.0.0/0', identity: ID.WORLD },
      { prefix: '::/0', identity: 4 },
      { prefix: '8.0.0.0/8', identity: ID_CIDR },
      { prefix: '8.8.0.0/16', identity: ID_EXCEPT },
    ],
    endpoints: [
      { ip: A, identity: ID_A, flags: both, tables: tablesOf, ifindex: TEST_RUN_IFINDEX },
      { ip: 'fd00::a', identity: ID_A, flags: both, tables: tablesOf, ifindex: TEST_RUN_IFINDEX },
    ],
    tables,
  };
}

describe.skipIf(!kernelTestsEnabled())('BPF datapath in the kernel', () => {
  let dp: Datapath;
  let pinDir: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ dp, pinDir, cleanup } = await freshDatapath());
    await dp.sync(state());
  });
  afterAll(async () => cleanup?.());

  const probes: [string, 'ingress' | 'egress', Parameters<typeof kernelVerdict>[2], 'allow' | 'deny'][] = [
    [
      'admin deny beats the NP allow',
      'ingress',
      { src: B, dst: A, proto: 6, sport: 5555, dport: 80 },
      'deny',
    ],
    [
      'NP allow for all pods on a port range (low end)',
      'ingress',
      { src: C, dst: A, proto: 6, sport: 5556, dport: 1024 },
      'allow',
    ],
    [
      'NP allow for all pods on a port range (high end)',
      'ingress',
      { src: B, dst: A, proto: 6, sport: 5557, dport: 2047 },
      'allow',
    ],
    [
      'just outside the range: isolation',
      'ingress',
      { src: B, dst: A, proto: 6, sport: 5558, dport: 2048 },
      'deny',
    ],
    [
      'Pass hands C to the lower layer: isolation',
      'ingress',
      { src: C, dst: A, proto: 17, sport: 5559, dport: 53 },
      'deny',
    ],
    ['port 0 is judged (isolation)', 'ingress', { src: B, dst: A, proto: 17, sport: 1, dport: 0 }, 'deny'],
    [
      'port 65535 is judged (isolation)',
      'ingress',
      { src: B, dst: A, proto: 17, sport: 2, dport: 65535 },
      'deny',
    ],
    [
      'external to the except prefix: not the CIDR identity, allowed',
      'egress',
      { src: A, dst: EXT, proto: 6, sport: 40000, dport: 443 },
      'allow',
    ],
    [
      'external in the CIDR: denied',
      'egress',
      { src: A, dst: '8.1.2.3', proto: 6, sport: 40001, dport: 443 },
      'deny',
    ],
    [
      'SCTP to B on 9000 allowed',
      'egress',
      { src: A, dst: B, proto: 132, sport: 40002, dport: 9000 },
      'allow',
    ],
    ['SCTP to C on 9000 denied', 'egress', { src: A, dst: C, proto: 132, sport: 40003, dport: 9000 }, 'deny'],
    [
      'IPv6 endpoint: B (by its v6 address) on tcp/80 denied by admin',
      'ingress',
      { src: V6, dst: 'fd00::a', proto: 6, sport: 40004, dport: 80 },
      'deny',
    ],
    ['a pod reaching itself', 'ingress', { src: A, dst: A, proto: 6, sport: 1, dport: 80 }, 'allow'],
  ];

  it.each(probes)('%s', async (_n, dir, p, want) => {
    const ref = await referenceOf(dp);
    const local = dir === 'egress' ? p.src : p.dst;
    const remote = dir === 'egress' ? p.dst : p.src;
    expect(
      ref.judge(dir, local, remote, p.proto, dir === 'egress' || !p.dport ? (p.dport ?? 0) : p.dport).verdict,
    ).toBe(want);
    expect(await kernelVerdict(dp, dir, p)).toBe(want);
  });

  it('drops a frame too short for its headers (counted as malformed), passes ARP', async () => {
    // (BPF_PROG_TEST_RUN itself refuses frames shorter than an IP header; on a wire the program sees them.)
    const before = await dp.counter(COUNTERS.malformed);
    const badIhl = buildPacket({ src: B, dst: A, proto: 6, dport: 80 });
    badIhl[14] = 0x43;
    expect((await dp.run('to_endpoint', badIhl)).retval).toBe(TC_ACT_SHOT);
    const truncated = buildPacket({ src: B, dst: A, proto: 6, dport: 80 }).subarray(0, 14 + 20 + 2);
    expect((await dp.run('to_endpoint', truncated)).retval).toBe(TC_ACT_SHOT);
    expect(await dp.counter(COUNTERS.malformed)).toBe(before + 2);
    expect((await dp.run('to_endpoint', buildArp(B, A))).retval).toBe(TC_ACT_OK);
  });

  it('reports denied flows with the deciding rule to the ring buffer', async () => {
    await dp.events();
    await kernelVerdict(dp, 'ingress', { src: B, dst: A, proto: 6, sport: 6000, dport: 80 });
    const events = await dp.events();
    expect(events).toContainEqual(
      expect.objectContaining({
        src: B,
        dst: A,
        dport: 80,
        verdict: 'deny',
        rule: 10,
        remoteIdentity: ID_B,
        direction: 'ingress',
      }),
    );
  });

  it('conntrack: replies of an allowed connection pass a denying direction; a policy change stops the flow', async () => {
    await dp.clearConntrack();
    // A -> B tcp/1500 allowed at A's egress (nothing denies it); the reply B -> A comes in on A's ingress.
    const out = { src: A, dst: B, proto: 6, sport: 41000, dport: 7000 };
    const reply = { src: B, dst: A, proto: 6, sport: 7000, dport: 41000 };
    expect(await kernelVerdict(dp, 'ingress', reply)).toBe('deny'); // no connection yet: isolation
    expect(await kernelVerdict(dp, 'egress', out)).toBe('allow');
    expect(await kernelVerdict(dp, 'ingress', reply)).toBe('allow'); // reply of the allowed connection
    const hits = await dp.counter(COUNTERS.ctHit);
    expect(await kernelVerdict(dp, 'egress', out)).toBe('allow');
    expect(await dp.counter(COUNTERS.ctHit)).toBe(hits + 1);
    // The egress policy now denies B on tcp/7000: the established flow is re-judged and stopped.
    await dp.sync(state({ 'out-admin': [e(ID_B, 6, 7000, 16, 0x7fff0001, 'deny', 40)] }));
    expect(await kernelVerdict(dp, 'egress', out)).toBe('deny');
    expect(await kernelVerdict(dp, 'ingress', reply)).toBe('deny');
    await dp.sync(state());
  });

  it('conntrack: a denied new flow leaves no state (the verdict cache answers its next packets); the other direction may still open the same 5-tuple', async () => {
    await dp.clearConntrack();
    await dp.events();
    const probe = { src: B, dst: A, proto: 6, sport: 6100, dport: 80 };
    const hits = await dp.counter(COUNTERS.ctHit);
    const cached = await dp.counter(COUNTERS.verdictCached);
    expect(await kernelVerdict(dp, 'ingress', probe)).toBe('deny');
    expect(await kernelVerdict(dp, 'ingress', probe)).toBe('deny');
    expect(await kernelVerdict(dp, 'ingress', probe)).toBe('deny');
    // no conntrack entry was made: nothing to collect, no hit; the verdict cache answered
    expect(await dp.counter(COUNTERS.ctHit)).toBe(hits);
    expect(await dp.counter(COUNTERS.verdictCached)).toBeGreaterThanOrEqual(cached + 2);
    expect((await dp.collectConntrack()).scanned).toBe(0);
    // each denied packet is reported (within its endpoint's event budget; the agent folds repeats)
    expect((await dp.events()).filter((ev) => ev.sport === 6100)).toHaveLength(3);
    // A opens A:80 -> B:6100 itself (nothing denies its egress): judged as its own flow, allowed, and
    // B's packets of it are then replies.
    expect(await kernelVerdict(dp, 'egress', { src: A, dst: B, proto: 6, sport: 80, dport: 6100 })).toBe(
      'allow',
    );
    expect(await kernelVerdict(dp, 'ingress', probe)).toBe('allow');
  });

  it('conntrack: a direction that is not enforced is still tracked, so its replies pass an enforced one', async () => {
    const only = state();
    only.endpoints = only.endpoints.map((ep) => ({ ...ep, flags: EP_FLAGS.ENFORCE_INGRESS }));
    // egress would deny everything if it were enforced
    only.tables.set('out-lower', [e(ID.WILDCARD, 0, 0, 0, 0x7ffe, 'deny', 70)]);
    await dp.sync(only);
    await dp.clearConntrack();
    const out = { src: A, dst: B, proto: 6, sport: 42000, dport: 7001 };
    const reply = { src: B, dst: A, proto: 6, sport: 7001, dport: 42000 };
    expect(await kernelVerdict(dp, 'egress', out)).toBe('allow');
    expect(await kernelVerdict(dp, 'ingress', reply)).toBe('allow');
    // a new flow from B on that port is judged by A's ingress: isolation
    expect(await kernelVerdict(dp, 'ingress', { ...reply, sport: 7002 })).toBe('deny');
    await dp.sync(state());
  });

  it('conntrack collector: idle flows go after their limit (UDP 60 s, TCP 6 h), a packet keeps a flow alive', async () => {
    await dp.clearConntrack();
    const t = 1_000_000;
    await dp.tick(t);
    const udpOut = { src: A, dst: B, proto: 17, sport: 43000, dport: 7003 };
    const udpReply = { src: B, dst: A, proto: 17, sport: 7003, dport: 43000 };
    const tcpOut = { src: A, dst: B, proto: 6, sport: 43001, dport: 7004, tcpFlags: TCP_FLAGS.SYN };
    const tcpReply = { src: B, dst: A, proto: 6, sport: 7004, dport: 43001, tcpFlags: TCP_FLAGS.ACK };
    expect(await kernelVerdict(dp, 'egress', udpOut)).toBe('allow');
    expect(await kernelVerdict(dp, 'egress', tcpOut)).toBe('allow');
    // 50 s later the UDP flow sends again: its idle time starts over
    await dp.tick(t + 50);
    expect(await kernelVerdict(dp, 'ingress', udpReply)).toBe('allow');
    expect(await dp.collectConntrack({ now: t + 100 })).toMatchObject({ deleted: 0 });
    // 61 s after its last packet the UDP flow is gone: its reply is a new flow, which isolation denies
    expect(await dp.collectConntrack({ now: t + 111 })).toMatchObject({ deleted: 1 });
    expect(await kernelVerdict(dp, 'ingress', udpReply)).toBe('deny');
    expect(await kernelVerdict(dp, 'ingress', tcpReply)).toBe('allow');
    // (the collector ticked the clock to t + 111: the TCP reply above stamped its flow with it)
    // (the denied UDP reply above made no entry: nothing else to collect)
    expect(await dp.collectConntrack({ now: t + 111 + 21_600 })).toMatchObject({ deleted: 0 });
    // exactly 6 h idle is kept, a second more is not (the reply just now stamped the flow)
    expect(await kernelVerdict(dp, 'ingress', tcpReply)).toBe('allow');
    expect(await dp.collectConntrack({ now: t + 111 + 2 * 21_600 })).toMatchObject({ deleted: 0 });
    expect(await dp.collectConntrack({ now: t + 111 + 2 * 21_600 + 1 })).toMatchObject({ deleted: 1 });
    expect(await kernelVerdict(dp, 'ingress', tcpReply)).toBe('deny');
  });

  it('conntrack collector: a FIN or RST closes a TCP flow after 10 s; a SYN on a closing flow opens a new one', async () => {
    await dp.clearConntrack();
    const t = 2_000_000;
    await dp.tick(t);
    const open = { src: A, dst: B, proto: 6, sport: 44000, dport: 7005, tcpFlags: TCP_FLAGS.SYN };
    const reply = { src: B, dst: A, proto: 6, sport: 7005, dport: 44000, tcpFlags: TCP_FLAGS.ACK };
    expect(await kernelVerdict(dp, 'egress', open)).toBe('allow');
    expect(await kernelVerdict(dp, 'ingress', { ...reply, tcpFlags: TCP_FLAGS.FIN | TCP_FLAGS.ACK })).toBe(
      'allow',
    );
    // the last ACKs of the close still pass; 11 s later the entry is collected
    expect(await kernelVerdict(dp, 'ingress', reply)).toBe('allow');
    expect(await dp.collectConntrack({ now: t + 5 })).toMatchObject({ deleted: 0 });
    expect(await dp.collectConntrack({ now: t + 11 })).toMatchObject({ deleted: 1 });
    expect(await kernelVerdict(dp, 'ingress', reply)).toBe('deny');
    // RST marks it closing too; then B's SYN to A's port is a new flow, judged by A's ingress: denied
    await dp.clearConntrack();
    await dp.tick(t + 20);
    expect(await kernelVerdict(dp, 'egress', open)).toBe('allow');
    expect(await kernelVerdict(dp, 'egress', { ...open, tcpFlags: TCP_FLAGS.RST })).toBe('allow');
    expect(await kernelVerdict(dp, 'ingress', { ...reply, tcpFlags: TCP_FLAGS.SYN })).toBe('deny');
  });

  it('verdict cache: used for new flows of a known identity and port, and never outlives an in-place patch', async () => {
    const X = '10.0.0.9';
    const ID_X = 900;
    const withX = (verdict: 'allow' | 'deny') => {
      const s = state({
        'in-lower': [...state().tables.get('in-lower')!, e(ID_X, 6, 8080, 16, 0xfffe, verdict, 80)],
      });
      s.ipcache.push({ prefix: X, identity: ID_X });
      return s;
    };
    const flow = (sport: number) => ({ src: X, dst: A, proto: 6, sport, dport: 8080 });
    await dp.sync(withX('allow'));
    expect(await kernelVerdict(dp, 'ingress', flow(1))).toBe('allow');
    const cached = await dp.counter(COUNTERS.verdictCached);
    expect(await kernelVerdict(dp, 'ingress', flow(2))).toBe('allow');
    expect(await dp.counter(COUNTERS.verdictCached)).toBe(cached + 1);
    // X goes away (its entry deleted in place), then comes back denied (added in place): the table
    // ids stay the same, so only the epoch keeps the cached allow from answering.
    const gone = await dp.sync(state());
    expect(gone.tablesCreated).toBe(0);
    const back = await dp.sync(withX('deny'));
    expect(back.tablesCreated).toBe(0);
    expect(back.tablesPatchedInPlace).toBe(1);
    expect(await kernelVerdict(dp, 'ingress', flow(3))).toBe('deny');
    await dp.sync(state());
  });

  it('update safety: between every group of map writes each probe has its old or its new verdict', async () => {
    const probeSet = probes.map(([, dir, p]) => ({ dir, p }));
    const verdicts = async () =>
      Promise.all(
        probeSet.map(({ dir, p }) => kernelVerdict(dp, dir, { ...p, sport: (p.sport ?? 1) + 20000 })),
      );
    await dp.clearConntrack();
    const oldV = await verdicts();
    // The new policy flips several verdicts at once: admin allow for B everywhere, lower denies all pods.
    const next = state({
      'in-admin': [e(ID_B, 0, 0, 0, 0x7fff0000, 'allow', 50)],
      'in-lower': [e(ID.ALL_PODS, 0, 0, 0, 0xfffe, 'deny', 51)],
      'out-lower': [e(ID.WILDCARD, 0, 0, 0, 0x7ffe, 'deny', 52)],
    });
    await dp.sync(next);
    await dp.clearConntrack();
    const newV = await verdicts();
    await dp.sync(state());
    await dp.clearConntrack();
    expect(await verdicts()).toEqual(oldV);
    const seen: string[][] = [];
    const steps: string[] = [];
    await dp.sync(next, async (step) => {
      steps.push(step);
      await dp.clearConntrack();
      seen.push(await verdicts());
    });
    for (const now of seen) now.forEach((v, i) => expect([oldV[i], newV[i]]).toContain(v));
    expect(steps).toEqual([
      'tables written',
      'ipcache written',
      'endpoints switched',
      'ipcache pruned',
      'old tables freed',
    ]);
    expect(newV).not.toEqual(oldV);
    await dp.sync(state());
  });

  it('encodeState (offline) is exactly what a first sync writes into the maps', async () => {
    const { dp: fresh, cleanup: done } = await freshDatapath();
    try {
      await fresh.sync(state());
      const dump = async (m: string) => (await fresh.ctl.send(`dump ${m}`, [], 'count')).slice(1).sort();
      const want = encodeState(state());
      const lines = (pairs: [Buffer, Buffer][]) =>
        pairs.map(([k, v]) => `${k.toString('hex')} ${v.toString('hex')}`).sort();
      expect(await dump('cascade_policy')).toEqual(lines(want.policy));
      expect(await dump('cascade_endpoints')).toEqual(lines(want.endpoints));
      expect(await dump('cascade_ipcache')).toEqual(lines(want.ipcache));
      expect(await dump('cascade_hosts')).toEqual(lines(want.hosts));
    } finally {
      await done();
    }
  });

  it('adopts pinned maps on restart and reconciles with zero writes', async () => {
    const { Datapath } = await import('./loader.ts');
    const { ARTIFACTS } = await import('./artifacts.ts');
    const again = await Datapath.open({ bpfctl: ARTIFACTS.bpfctl, object: ARTIFACTS.object, pinDir });
    try {
      const r = await again.sync(state());
      expect(r.entriesWritten).toBe(0);
      expect(r.endpointsSwitched).toBe(0);
      expect(r.ipcacheWritten).toBe(0);
      expect(
        await kernelVerdict(again, 'ingress', { src: B, dst: A, proto: 6, sport: 7777, dport: 80 }),
      ).toBe('deny');
    } finally {
      await again.close();
    }
  });
});

describe.skipIf(!kernelTestsEnabled())('an upgrade that changed a map layout', () => {
  it('replaces the incompatible pinned map, says which, and keeps the compatible ones', async () => {
    const { mkdtempSync, mkdirSync, rmSync } = await import('node:fs');
    const { execFileSync } = await import('node:child_process');
    const { Datapath } = await import('./loader.ts');
    const { ARTIFACTS } = await import('./artifacts.ts');
    const pin = mkdtempSync('/sys/fs/bpf/cascade-test-');
    try {
      const first = await Datapath.open({ bpfctl: ARTIFACTS.bpfctl, object: ARTIFACTS.object, pinDir: pin });
      await first.sync(state());
      await first.close();
      // an older layout of the conntrack map left pinned by a previous version
      rmSync(`${pin}/maps/cascade_ct`);
      mkdirSync(`${pin}/maps`, { recursive: true });
      execFileSync('bpftool', [
        ...['map', 'create', `${pin}/maps/cascade_ct`, 'type', 'lru_hash'],
        ...['key', '44', 'value', '16', 'entries', '1024', 'name', 'cascade_ct'],
      ]);
      const again = await Datapath.open({ bpfctl: ARTIFACTS.bpfctl, object: ARTIFACTS.object, pinDir: pin });
      try {
        expect(again.replacedMaps).toEqual(['cascade_ct']);
        // the policy maps were adopted: nothing to write
        expect((await again.sync(state())).entriesWritten).toBe(0);
        expect(
          await kernelVerdict(again, 'egress', { src: A, dst: B, proto: 6, sport: 1, dport: 7000 }),
        ).toBe('allow');
      } finally {
        await again.close();
      }
    } finally {
      rmSync(pin, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!kernelTestsEnabled())('a full policy map', () => {
  it('refuses the update whole, keeps the last good rule set, fails closed for a new endpoint, and says so', async () => {
    const { dp, cleanup } = await freshDatapath(8, undefined, 0);
    try {
      const small = state({ 'out-lower': [e(ID.WILDCARD, 0, 0, 0, 0x7ffe, 'deny', 60)] });
      small.tables.set('in-lower', [e(ID_B, 6, 80, 16, 0xfffe, 'allow', 61)]);
      const r1 = await dp.sync(small);
      expect(r1.refused).toEqual([]);
      const big = state();
      big.tables.set(
        'in-lower',
        Array.from({ length: 20 }, (_, i) => e(1000 + i, 6, 80, 16, 0xfffe, 'allow', 62)),
      );
      big.endpoints.push({
        ip: C,
        identity: ID_C,
        flags: both,
        ifindex: TEST_RUN_IFINDEX,
        tables: {
          ingress: { admin: 'in-admin', lower: 'in-lower' },
          egress: { admin: 'out-admin', lower: 'out-lower' },
        },
      });
      const r2 = await dp.sync(big);
      expect(r2.refused.map((x) => x.table)).toContain('in-lower');
      expect(r2.refused.find((x) => x.table === 'in-lower')?.entries).toBe(20);
      expect(r2.failClosed).toEqual([C]);
      // A keeps its last good ingress rule set: B on tcp/80 allowed by it.
      expect(await kernelVerdict(dp, 'ingress', { src: B, dst: A, proto: 6, sport: 1234, dport: 80 })).toBe(
        'deny',
      );
      // the new endpoint C fails closed
      expect(await kernelVerdict(dp, 'ingress', { src: B, dst: C, proto: 6, sport: 1234, dport: 443 })).toBe(
        'deny',
      );
      expect(await kernelVerdict(dp, 'egress', { src: C, dst: B, proto: 6, sport: 1234, dport: 443 })).toBe(
        'deny',
      );
    } finally {
      await cleanup();
    }
  });
});

describe.skipIf(!kernelTestsEnabled())('capacity reserved for the admin tier', () => {
  it('namespaced rule sets cannot take the reserve; admin rule sets can, and still land when the rest is full', async () => {
    const { dp, cleanup } = await freshDatapath(64, undefined, 32);
    try {
      const s = state();
      s.adminTables = new Set(['in-admin', 'out-admin']);
      expect((await dp.sync(s)).refused).toEqual([]);
      // a tenant's rule set of 40 entries: more than the 32 non-reserved entries
      const flood = state();
      flood.adminTables = s.adminTables;
      flood.tables.set(
        'in-lower',
        Array.from({ length: 40 }, (_, i) => e(2000 + i, 6, 80, 16, 0xfffe, 'allow', 80)),
      );
      const r = await dp.sync(flood);
      expect(r.refused.map((x) => x.table)).toEqual(['in-lower']);
      expect(r.refused[0]!.error).toMatch(/reserved for admin tiers/);
      // A keeps its last good ingress rule set: isolation still denies C
      expect(await kernelVerdict(dp, 'ingress', { src: C, dst: A, proto: 17, sport: 1, dport: 53 })).toBe(
        'deny',
      );
      // an admin Deny of 30 entries lands in the reserve
      const admin = state();
      admin.adminTables = s.adminTables;
      admin.tables.set('in-admin', [
        ...Array.from({ length: 29 }, (_, i) => e(3000 + i, 6, 22, 16, 0x7fff0001, 'deny', 81)),
        e(ID_C, 6, 443, 16, 0x7fff0001, 'deny', 82),
      ]);
      expect((await dp.sync(admin)).refused).toEqual([]);
      expect(await kernelVerdict(dp, 'ingress', { src: C, dst: A, proto: 6, sport: 2, dport: 443 })).toBe(
        'deny',
      );
    } finally {
      await cleanup();
    }
  });
});
