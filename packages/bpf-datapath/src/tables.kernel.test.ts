// Kernel tests of rule-set tables: the class flags in a table id (which of a layer's lookups the
// program skips) against the reference datapath, which never skips one; and which changes the
// loader may patch in place.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EP_FLAGS, ID, TEST_RUN_IFINDEX } from './codecs.ts';
import type { Datapath } from './loader.ts';
import { TCP_FLAGS } from './packet.ts';
import { type DesiredState, TABLE_FLAGS, type TableEntry, tableFlags } from './state.ts';
import {
  entry as e,
  freshDatapath,
  kernelTestsEnabled,
  kernelVerdict,
  referenceOf,
  TABLES_OF,
} from './testing.ts';

const A = '10.0.0.1';
const PEERS = ['10.0.0.2', '10.0.0.3', '10.0.0.4'];
const ID_A = 300;
const both = EP_FLAGS.ENFORCE_INGRESS | EP_FLAGS.ENFORCE_EGRESS;

function state(tables: Record<string, TableEntry[]>): DesiredState {
  return {
    ipcache: [
      { prefix: A, identity: ID_A },
      ...PEERS.map((prefix, i) => ({ prefix, identity: 301 + i })),
      { prefix: '0.0.0.0/0', identity: ID.WORLD },
    ],
    endpoints: [{ ip: A, identity: ID_A, flags: both, tables: TABLES_OF, ifindex: TEST_RUN_IFINDEX }],
    tables: new Map(
      Object.entries({ 'in-admin': [], 'in-lower': [], 'out-admin': [], 'out-lower': [], ...tables }),
    ),
  };
}

/** A small deterministic generator (the test prints its seed when it fails). */
function rng(seed: number) {
  let x = seed >>> 0 || 1;
  return (n: number) => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x % n;
  };
}

describe.skipIf(!kernelTestsEnabled())('rule-set tables in the kernel', () => {
  let dp: Datapath;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ dp, cleanup } = await freshDatapath());
  });
  afterAll(async () => cleanup?.());

  it('table ids carry the classes a table lacks', () => {
    expect(tableFlags([])).toBe(TABLE_FLAGS.NO_PEERS + TABLE_FLAGS.NO_WILDCARD + TABLE_FLAGS.NO_ALL_PODS);
    expect(tableFlags([e(ID.WILDCARD, 0, 0, 0, 1, 'deny')])).toBe(
      TABLE_FLAGS.NO_PEERS + TABLE_FLAGS.NO_ALL_PODS,
    );
    expect(tableFlags([e(301, 6, 80, 16, 1, 'allow'), e(ID.ALL_PODS, 0, 0, 0, 1, 'deny')])).toBe(
      TABLE_FLAGS.NO_WILDCARD,
    );
  });

  it('skipping the lookups a table id rules out never changes a verdict (kernel = reference, 40 random rule sets)', async () => {
    const classes = [ID.WILDCARD, ID.ALL_PODS, 301, 302, 303];
    const verdicts = ['allow', 'deny', 'pass'] as const;
    for (let seed = 1; seed <= 40; seed++) {
      const r = rng(seed * 7919);
      const table = (admin: boolean) => {
        const out = new Map<string, TableEntry>();
        // some tables are empty, some hold one class only, some mix them
        const n = r(4) === 0 ? 0 : 1 + r(5);
        for (let i = 0; i < n; i++) {
          const identity = classes[r(classes.length)]!;
          const any = r(3) === 0;
          const t = e(
            identity,
            any ? 0 : 6,
            any ? 0 : 80 + r(3),
            any ? 0 : 16,
            (admin ? 0x7fff0000 : 0x8000) + r(4),
            verdicts[admin ? r(3) : r(2)]!,
            i,
          );
          out.set(`${t.identity}/${t.proto}/${t.port}`, t);
        }
        return [...out.values()];
      };
      await dp.sync(state({ 'in-admin': table(true), 'in-lower': table(false) }));
      await dp.clearConntrack();
      const ref = await referenceOf(dp);
      for (const [i, peer] of PEERS.entries())
        for (const port of [80, 81, 82, 9999]) {
          const want = ref.judge('ingress', A, peer, 6, port).verdict;
          const got = await kernelVerdict(dp, 'ingress', {
            src: peer,
            dst: A,
            proto: 6,
            sport: 20000 + seed * 16 + i * 4 + (port % 4),
            dport: port,
            tcpFlags: TCP_FLAGS.SYN,
          });
          expect(got, `seed ${seed}, peer ${peer}, port ${port}`).toBe(want);
        }
    }
  });

  it('a changed wildcard or all-pods entry makes a new table: established flows are judged again under it', async () => {
    for (const cls of [ID.WILDCARD, ID.ALL_PODS]) {
      // the class entry changes, its class stays: only the loader's rule keeps this from being patched
      // in place (a reserved identity is never transient)
      const lower = (v: 'allow' | 'deny') => [
        e(301, 6, 443, 16, 0x8002, 'allow', 1),
        e(cls, 0, 0, 0, v === 'deny' ? 0x8003 : 0x8001, v, 2),
      ];
      await dp.sync(state({ 'in-lower': lower('allow') }));
      await dp.clearConntrack();
      const open = {
        src: PEERS[0]!,
        dst: A,
        proto: 6,
        sport: 30000 + cls,
        dport: 443,
        tcpFlags: TCP_FLAGS.SYN,
      };
      expect(await kernelVerdict(dp, 'ingress', open)).toBe('allow');
      const rep = await dp.sync(state({ 'in-lower': lower('deny') }));
      expect(rep.tablesPatchedInPlace).toBe(0);
      expect(await kernelVerdict(dp, 'ingress', { ...open, tcpFlags: TCP_FLAGS.ACK })).toBe('deny');
    }
  });
});
