// Kernel tests of the conntrack table (bpf/ct_table.h): where a flow lands, what a full set evicts,
// and the upgrade from the LRU hash of earlier Cascade versions, which keeps every connection.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACTS } from './artifacts.ts';
import { COUNTERS, CT_SET_BITS, EP_FLAGS, encodeCtKey, ID, TEST_RUN_IFINDEX } from './codecs.ts';
import { Datapath } from './loader.ts';
import { TCP_FLAGS } from './packet.ts';
import type { DesiredState } from './state.ts';
import { entry as e, kernelTestsEnabled, kernelVerdict, TABLES_OF } from './testing.ts';

const A = '10.0.0.1';
const B = '10.0.0.2';
const C = '10.0.0.3';
const D = '10.0.0.4';
const both = EP_FLAGS.ENFORCE_INGRESS | EP_FLAGS.ENFORCE_EGRESS;

/** A, C and D (local) take TCP/80 from B (and 10.1.0.0/16) and may send nothing new: replies pass
 * only as tracked. */
function state(): DesiredState {
  return {
    ipcache: [
      { prefix: A, identity: 300 },
      { prefix: B, identity: 301 },
      { prefix: '10.1.0.0/16', identity: 301 },
      { prefix: C, identity: 302 },
      { prefix: D, identity: 304 },
      { prefix: '0.0.0.0/0', identity: ID.WORLD },
    ],
    endpoints: [A, C, D].map((ip, i) => ({
      ip,
      identity: 300 + 2 * i,
      flags: both,
      tables: TABLES_OF,
      ifindex: TEST_RUN_IFINDEX,
    })),
    tables: new Map([
      ['in-admin', []],
      ['in-lower', [e(301, 6, 80, 16, 0xfffe, 'allow', 21), e(ID.WILDCARD, 0, 0, 0, 0x8001, 'deny', 22)]],
      ['out-admin', []],
      ['out-lower', [e(ID.WILDCARD, 0, 0, 0, 0x8001, 'deny', 30)]],
    ]),
  };
}

/** ct_set_of (bpf/ct_table.h) in TypeScript: the set a flow's key lands in under `seed`. */
function setOf(key: Buffer, seed: bigint): number {
  const M = (1n << 64n) - 1n;
  let h = seed ^ 0x243f6a8885a308d3n;
  for (let i = 0; i < 5; i++) {
    h ^= key.readBigUInt64LE(8 * i);
    h = (h * 0x9e3779b97f4a7c15n) & M;
    h ^= h >> 31n;
  }
  h = (h * 0xbf58476d1ce4e5b9n) & M;
  return Number(h >> BigInt(64 - CT_SET_BITS));
}

const open = (pinDir: string) =>
  Datapath.open({ bpfctl: ARTIFACTS.bpfctl, object: ARTIFACTS.object, pinDir });
/** B, or the n-th address of 10.1.0.0/16 (n > 0): sources that may open TCP/80 */
const peer = (n = 0) => (n ? `10.1.${n >> 8}.${n & 255}` : B);
const keyOf = (local: string, sport: number, from = 0) =>
  encodeCtKey({ local, remote: peer(from), lport: 80, rport: sport, proto: 6 });
const syn = (dst: string, sport: number, from = 0) => ({
  src: peer(from),
  dst,
  proto: 6,
  sport,
  dport: 80,
  tcpFlags: TCP_FLAGS.SYN,
});
const reply = (src: string, dport: number, to = 0) => ({
  src,
  dst: peer(to),
  proto: 6,
  sport: 80,
  dport,
  tcpFlags: TCP_FLAGS.ACK,
});

describe.skipIf(!kernelTestsEnabled())('the conntrack table', () => {
  let pinDir: string;
  let dp: Datapath;
  let seed: bigint;
  const tracked = async (local: string, sport: number, from = 0) =>
    (await dp.ctl.send(`lookup cascade_ct ${keyOf(local, sport, from).toString('hex')}`))[0] !== 'ok none';
  /** `n` flows to `local` (source port, source in 10.1.0.0/16) that share the set of (A, from B port
   * 1024), other than those in `not` */
  const sameSet = (local: string, n: number, not: [number, number][] = []) => {
    const want = setOf(keyOf(A, 1024), seed);
    const found: [number, number][] = [];
    for (let i = 1; found.length < n && i < 65536; i++)
      for (let sport = 5000; found.length < n && sport < 5064; sport++)
        if (setOf(keyOf(local, sport, i), seed) === want && !not.some(([p, f]) => p === sport && f === i))
          found.push([sport, i]);
    return found;
  };
  beforeAll(async () => {
    pinDir = mkdtempSync('/sys/fs/bpf/cascade-ct-test-');
    dp = await open(pinDir);
    await dp.sync(state());
    const [line] = await dp.ctl.send('lookup cascade_ct_seed 00000000');
    seed = Buffer.from(line!.split(' ')[1]!, 'hex').readBigUInt64LE(0);
  });
  afterAll(async () => {
    await dp?.close();
    rmSync(pinDir, { recursive: true, force: true });
  });

  it('keeps a non-zero seed across restarts, and finds flows where the TypeScript mirror of its hash says', async () => {
    expect(seed).not.toBe(0n);
    await dp.clearConntrack();
    await dp.tick(1000);
    expect(await kernelVerdict(dp, 'ingress', syn(A, 40000))).toBe('allow');
    // the program put it in the set the mirror computes: the helper reads it there
    expect(await tracked(A, 40000)).toBe(true);
    // its reply passes only as a tracked flow (A sends nothing new)
    expect(await kernelVerdict(dp, 'egress', reply(A, 40000))).toBe('allow');
    expect(await kernelVerdict(dp, 'egress', reply(A, 40001))).toBe('deny');
    await dp.close();
    dp = await open(pinDir);
    const [line] = await dp.ctl.send('lookup cascade_ct_seed 00000000');
    expect(Buffer.from(line!.split(' ')[1]!, 'hex').readBigUInt64LE(0)).toBe(seed);
    expect(await tracked(A, 40000)).toBe(true);
    expect(await kernelVerdict(dp, 'egress', reply(A, 40000))).toBe('allow');
  });

  it("a full set: a new flow evicts its own endpoint's stalest flow, never another pod's, and counts it", async () => {
    await dp.clearConntrack();
    const mine = sameSet(A, 3);
    const [other] = sameSet(C, 1);
    // C's flow first (the stalest of the set), then A's three (B's and two others), a tick apart
    await dp.tick(2000);
    expect(await kernelVerdict(dp, 'ingress', syn(C, ...other!))).toBe('allow');
    await dp.tick(2001);
    expect(await kernelVerdict(dp, 'ingress', syn(A, 1024))).toBe('allow');
    let t = 2002;
    for (const f of mine.slice(0, 2)) {
      await dp.tick(t++);
      expect(await kernelVerdict(dp, 'ingress', syn(A, ...f))).toBe('allow');
    }
    const evicted = await dp.counter(COUNTERS.ctEvicted);
    await dp.tick(t++);
    expect(await kernelVerdict(dp, 'ingress', syn(A, ...mine[2]!))).toBe('allow');
    expect(await dp.counter(COUNTERS.ctEvicted)).toBe(evicted + 1);
    // A's stalest went; C's flow, staler still, stayed
    expect(await tracked(A, 1024)).toBe(false);
    expect(await tracked(C, ...other!)).toBe(true);
    for (const f of mine) expect(await tracked(A, ...f)).toBe(true);
    // a new flow of an endpoint with none in the set: the set's stalest goes (C's, seen at 2000)
    const [fromD] = sameSet(D, 1);
    await dp.tick(t++);
    expect(await kernelVerdict(dp, 'ingress', syn(D, ...fromD!))).toBe('allow');
    expect(await dp.counter(COUNTERS.ctEvicted)).toBe(evicted + 2);
    expect(await tracked(D, ...fromD!)).toBe(true);
    expect(await tracked(C, ...other!)).toBe(false);
    for (const f of mine) expect(await tracked(A, ...f)).toBe(true);
    // what an eviction costs the evicted flow: its reply is judged as a new flow (denied here)
    expect(await kernelVerdict(dp, 'egress', reply(C, ...other!))).toBe('deny');
    expect(await kernelVerdict(dp, 'egress', reply(A, ...mine[0]!))).toBe('allow');
  });

  it('the collector empties idle slots and counts what each endpoint keeps', async () => {
    await dp.clearConntrack();
    await dp.tick(3000);
    for (let p = 30000; p < 30100; p++) await kernelVerdict(dp, 'ingress', syn(A, p));
    await dp.tick(3000 + 7 * 3600);
    await kernelVerdict(dp, 'ingress', syn(C, 30000));
    const gc = await dp.collectConntrack({ now: 3000 + 7 * 3600 });
    expect(gc).toEqual({ scanned: 101, deleted: 100 });
    expect(await dp.conntrackCounts()).toEqual(new Map([[C, 1]]));
    expect(await tracked(C, 30000)).toBe(true);
  });
});

describe.skipIf(!kernelTestsEnabled())('an upgrade from the LRU-hash conntrack', () => {
  it('copies every flow into the table (at load, then what the older programs added), and every connection keeps passing', async () => {
    const pinDir = mkdtempSync('/sys/fs/bpf/cascade-ct-upgrade-');
    const work = mkdtempSync(join(tmpdir(), 'cascade-ct-upgrade-'));
    try {
      // flows opened under this program, read back as key/value records (the LRU hash had the same
      // key and value layout), then written into a map of the older shape pinned in its place
      let dp = await open(pinDir);
      await dp.sync(state());
      await dp.tick(5000);
      const N = 3000;
      for (let i = 0; i < N; i++)
        expect(await kernelVerdict(dp, 'ingress', syn(i % 2 ? A : C, 20000 + i))).toBe('allow');
      const records = (await dp.ctl.send('dump cascade_ct', [], 'count')).slice(1);
      expect(records).toHaveLength(N);
      await dp.close();
      rmSync(`${pinDir}/maps/cascade_ct`);
      const legacy = `${pinDir}/maps/cascade_ct`;
      execFileSync('bpftool', [
        ...['map', 'create', legacy, 'type', 'lru_hash', 'key', '40', 'value', '32'],
        ...['entries', '262144', 'name', 'cascade_ct'],
      ]);
      const bytes = (h: string) => h.match(/../g)!.join(' ');
      const batch = (rows: string[], map = legacy) => {
        const file = join(work, 'batch');
        writeFileSync(
          file,
          rows
            .map((r) => {
              const [k, v] = r.split(' ');
              return `map update pinned ${map} key hex ${bytes(k!)} value hex ${bytes(v!)}\n`;
            })
            .join(''),
        );
        execFileSync('bpftool', ['batch', 'file', file]);
      };
      batch(records.slice(0, N - 500));

      dp = await open(pinDir);
      expect(dp.replacedMaps).toEqual([]);
      expect(dp.migratedFlows).toBe(N - 500);
      // the older programs, still attached until the agent attaches these, add flows meanwhile (to
      // the older table, pinned aside until then)
      batch(records.slice(N - 500), `${pinDir}/maps/cascade_ct_legacy`);
      expect(await dp.finishMigration()).toBe(500);
      expect(await dp.finishMigration()).toBe(0); // the older table is let go
      expect(execFileSync('ls', [`${pinDir}/maps`], { encoding: 'utf8' })).not.toContain('legacy');
      // every connection's reply passes (A and C may open nothing: only conntrack lets them through)
      const hits = await dp.counter(COUNTERS.ctHit);
      for (let i = 0; i < N; i++)
        expect(await kernelVerdict(dp, 'egress', reply(i % 2 ? A : C, 20000 + i))).toBe('allow');
      expect((await dp.counter(COUNTERS.ctHit)) - hits).toBe(N);
      expect(await kernelVerdict(dp, 'egress', reply(A, 20000 + N + 1))).toBe('deny');
      await dp.close();
    } finally {
      rmSync(pinDir, { recursive: true, force: true });
      rmSync(work, { recursive: true, force: true });
    }
  });
});
