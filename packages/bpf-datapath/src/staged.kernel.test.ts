// Kernel tests of staged tables (cascade_staged, EP_STAGED): a new flow of a flagged endpoint is
// judged by its staged tables too and never by them alone: a staged deny drops nothing, a staged
// allow admits nothing, and where the two differ the flow's event names the staged verdict and rule;
// established packets and unflagged endpoints never meet the staged tables.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COUNTERS, EP_FLAGS, ID, TEST_RUN_IFINDEX } from './codecs.ts';
import type { Datapath } from './loader.ts';
import { TCP_FLAGS } from './packet.ts';
import type { DesiredState, TableEntry } from './state.ts';
import {
  entry as e,
  freshDatapath,
  kernelTestsEnabled,
  kernelVerdict,
  referenceOf,
  TABLES_OF,
} from './testing.ts';

const A = '10.0.0.1';
const B = '10.0.0.2';
const C = '10.0.0.3';
const both = EP_FLAGS.ENFORCE_INGRESS | EP_FLAGS.ENFORCE_EGRESS;
const STAGED_OF = {
  ingress: { admin: 'in-admin', lower: 'staged-in-lower' },
  egress: { admin: 'out-admin', lower: 'out-lower' },
};

/** A: enforced ingress allows 80 and denies 443 (rule 10, 11); staged: denies 80, allows 443 (20, 21). */
function state(staged: boolean): DesiredState {
  const tables: Record<string, TableEntry[]> = {
    'in-admin': [],
    'in-lower': [e(ID.WILDCARD, 6, 80, 16, 10, 'allow', 10), e(ID.WILDCARD, 6, 443, 16, 10, 'deny', 11)],
    'out-admin': [],
    'out-lower': [],
    'staged-in-lower': [
      e(ID.WILDCARD, 6, 80, 16, 10, 'deny', 20),
      e(ID.WILDCARD, 6, 443, 16, 10, 'allow', 21),
    ],
  };
  return {
    ipcache: [
      { prefix: A, identity: 300 },
      { prefix: B, identity: 301 },
      { prefix: C, identity: 302 },
    ],
    endpoints: [
      {
        ip: A,
        identity: 300,
        flags: both,
        tables: TABLES_OF,
        ...(staged ? { staged: STAGED_OF } : {}),
        ifindex: TEST_RUN_IFINDEX,
      },
      // C holds A's enforced tables and no staged ones
      { ip: C, identity: 302, flags: both, tables: TABLES_OF, ifindex: TEST_RUN_IFINDEX },
    ],
    tables: new Map(Object.entries(tables)),
  };
}

describe.skipIf(!kernelTestsEnabled())('staged tables in the kernel', () => {
  let dp: Datapath;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ dp, cleanup } = await freshDatapath());
  });
  afterAll(async () => cleanup?.());

  it('a staged deny drops nothing, a staged allow admits nothing; the events say what staging would do', async () => {
    const r = await dp.sync(state(true));
    expect(r.stagedWritten).toBe(1);
    expect(r.stagedRefused).toEqual([]);
    await dp.events();
    const differ = await dp.counter(COUNTERS.stagedDiffer);
    const syn = (sport: number, dport: number) => ({
      src: B,
      dst: A,
      proto: 6,
      sport,
      dport,
      tcpFlags: TCP_FLAGS.SYN,
    });
    // enforced allow, staged deny: passes, and is reported (not an audited endpoint) with the staged deny
    expect(await kernelVerdict(dp, 'ingress', syn(5000, 80))).toBe('allow');
    // enforced deny, staged allow: dropped
    expect(await kernelVerdict(dp, 'ingress', syn(5001, 443))).toBe('deny');
    const events = await dp.events();
    expect(events.find((x) => x.sport === 5000)).toMatchObject({
      verdict: 'allow',
      rule: 10,
      staged: { verdict: 'deny', rule: 20 },
    });
    expect(events.find((x) => x.sport === 5001)).toMatchObject({
      verdict: 'deny',
      rule: 11,
      staged: { verdict: 'allow', rule: 21 },
    });
    expect(await dp.counter(COUNTERS.stagedDiffer)).toBe(differ + 2);
    // the reference datapath reads the same maps the same way
    const ref = await referenceOf(dp);
    expect(ref.judge('ingress', A, B, 6, 80).verdict).toBe('allow');
    expect(ref.judge('ingress', A, B, 6, 80, 'staged').verdict).toBe('deny');
    expect(ref.judge('ingress', A, B, 6, 443, 'staged').verdict).toBe('allow');
    expect(ref.judge('ingress', C, B, 6, 80, 'staged').verdict).toBe('allow');
  });

  it('established packets and endpoints without staged tables never meet them', async () => {
    await dp.sync(state(true));
    const flow = { src: B, dst: A, proto: 6, sport: 5100, dport: 80 };
    expect(await kernelVerdict(dp, 'ingress', { ...flow, tcpFlags: TCP_FLAGS.SYN })).toBe('allow');
    await dp.events();
    const differ = await dp.counter(COUNTERS.stagedDiffer);
    for (let i = 0; i < 3; i++)
      expect(await kernelVerdict(dp, 'ingress', { ...flow, tcpFlags: TCP_FLAGS.ACK })).toBe('allow');
    // C: the same enforced tables, no staged ones: no staged judgement, no event for an allowed flow
    expect(
      await kernelVerdict(dp, 'ingress', {
        src: B,
        dst: C,
        proto: 6,
        sport: 5101,
        dport: 80,
        tcpFlags: TCP_FLAGS.SYN,
      }),
    ).toBe('allow');
    expect(await dp.counter(COUNTERS.stagedDiffer)).toBe(differ);
    expect(await dp.events()).toEqual([]);
  });

  it('unstaged: the entry and the flag go, the staged table is freed, new flows are judged as before', async () => {
    await dp.sync(state(true));
    const r = await dp.sync(state(false));
    // its two entries leave the policy map (empty tables may be renumbered beside it)
    expect(r.tablesFreed).toBeGreaterThanOrEqual(1);
    expect(r.entriesDeleted).toBe(2);
    const ref = await referenceOf(dp);
    expect(ref.judge('ingress', A, B, 6, 80, 'staged').verdict).toBe('allow');
    await dp.events();
    expect(
      await kernelVerdict(dp, 'ingress', {
        src: B,
        dst: A,
        proto: 6,
        sport: 5200,
        dport: 80,
        tcpFlags: TCP_FLAGS.SYN,
      }),
    ).toBe('allow');
    expect(await dp.events()).toEqual([]);
  });
});
