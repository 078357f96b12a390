// A flood of new flows beside another pod's established connection (issue 47 item 2): one pod opens
// new allowed flows as fast as BPF_PROG_TEST_RUN can send them (a bench build whose every repeat is a
// flow of its own, through the real flow budget and conntrack quota), on the same maps as the real
// program, which meanwhile times another pod's established packets on the other CPU. Figures: the
// victim's per-packet cost quiet, during and after the flood (rounds interleaved with the flood's
// run, ratios to the quiet rounds), the flood's own per-packet cost, and what the flood got (flows
// tracked, flows refused by budget and quota) against what the victim kept (its entry, its verdict).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ARTIFACTS,
  buildPacket,
  Datapath,
  type DesiredState,
  EP_FLAGS,
  TEST_RUN_IFINDEX,
} from '@cascade/bpf-datapath';
import { freshDatapath } from '@cascade/bpf-datapath/testing';
import { compileBenchBuild } from './datapath-stages.ts';

type Fig = (name: string, value: number, unit: string, input: string) => void;

const VICTIM = '10.0.0.1';
const FLOODER = '10.0.0.9';
const PEER = '10.0.0.2';
const FLOOD = 1_000_000;

/** Two pods of their own identities, both with open egress, and the peer they reach. */
function floodState(): DesiredState {
  const tables = new Map([['open', []]]);
  const open = { admin: 'open', lower: 'open' };
  return {
    ipcache: [
      { prefix: VICTIM, identity: 301 },
      { prefix: FLOODER, identity: 302 },
      { prefix: PEER, identity: 300 },
      { prefix: '0.0.0.0/0', identity: 2 },
    ],
    endpoints: [
      [VICTIM, 301],
      [FLOODER, 302],
    ].map(([ip, identity]) => ({
      ip: ip as string,
      identity: identity as number,
      flags: EP_FLAGS.ENFORCE_INGRESS | EP_FLAGS.ENFORCE_EGRESS,
      tables: { ingress: open, egress: open },
      ifindex: TEST_RUN_IFINDEX,
    })),
    tables,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

export async function floodFigures(fig: Fig): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'cascade-flood-'));
  const object = compileBenchBuild(join(dir, 'flood.o'), ['CASCADE_BENCH_FLOOD']);
  const { dp, pinDir, cleanup } = await freshDatapath();
  let flood: Datapath | undefined;
  try {
    await dp.sync(floodState());
    const victim = buildPacket({
      src: VICTIM,
      dst: PEER,
      proto: 6,
      sport: 40000,
      dport: 443,
      tcpFlags: 0x10,
    });
    const flooding = buildPacket({ src: FLOODER, dst: PEER, proto: 17, sport: 50000, dport: 53 });
    // the flood's program shares every map of the pinned datapath (adopted); the real program stays
    // loaded in its own helper process, so both run at once
    flood = await Datapath.open({ bpfctl: ARTIFACTS.bpfctl, object, pinDir });
    // each round times the victim's packet and the trivial program back to back: this VM's speed
    // changes in phases of seconds, so a round's ratio cancels it where raw times would not
    const round = async () => {
      const v = (await dp.run('from_endpoint', victim, 100_000)).ns;
      const b = (await dp.run('bench_baseline', victim, 100_000)).ns;
      return { v, ratio: v / Math.max(1, b) };
    };
    type Round = Awaited<ReturnType<typeof round>>;
    // the victim's connection: first packet, then conntrack hits that fill the flow cache
    for (let k = 0; k < 3; k++) await dp.run('from_endpoint', victim, 1000);
    const quiet: Round[] = [];
    for (let r = 0; r < 30; r++) quiet.push(await round());
    let done = false;
    const t0 = performance.now();
    const floodRun = flood.run('from_endpoint', flooding, FLOOD).then((r) => {
      done = true;
      return r;
    });
    const during: Round[] = [];
    while (!done || during.length === 0) during.push(await round());
    const flooded = await floodRun;
    const floodMs = performance.now() - t0;
    const after: Round[] = [];
    for (let r = 0; r < 30; r++) after.push(await round());
    const kept = await dp.run('from_endpoint', victim, 1);
    const counters = await dp.counters();
    const tracked = (await dp.conntrackCounts()).get(FLOODER) ?? 0;
    const input = `${FLOOD.toLocaleString('en')} new UDP flows from one pod (bench build: each repeat a flow of its own, real flow budget and conntrack quota) beside another pod's established TCP flow (real program, same maps, 100,000 repeats a round)`;
    const ns = (rs: Round[]) => median(rs.map((r) => r.v));
    const ratio = (rs: Round[]) => median(rs.map((r) => r.ratio));
    fig('flood: victim established packet, quiet (median round)', ns(quiet), 'ns/packet', input);
    fig(
      'flood: victim established packet, during the flood (median round)',
      ns(during),
      'ns/packet',
      `${input}; ${during.length} rounds while the flood ran (${Math.round(floodMs)} ms)`,
    );
    fig('flood: victim established packet, after the flood (median round)', ns(after), 'ns/packet', input);
    const per = `${input}; median of each round's victim time over the trivial program's in the same round`;
    fig('flood: victim x trivial program, quiet', ratio(quiet), 'x', per);
    fig('flood: victim x trivial program, during the flood', ratio(during), 'x', per);
    fig('flood: victim x trivial program, after the flood', ratio(after), 'x', per);
    fig(
      'flood: victim during / quiet (ratios over the trivial program)',
      ratio(during) / ratio(quiet),
      'x',
      `${per}; the other CPU runs the flood: shared caches and memory bandwidth count here`,
    );
    fig("flood: the flood's own cost", flooded.ns, 'ns/packet', input);
    fig('flood: flows the flooder got tracked', tracked, 'entries', `${input}; its quota is 32,768`);
    fig('flood: flows refused by the flow budget', counters.flowBudget, 'packets', input);
    fig('flood: flows refused by the conntrack quota', counters.ctQuota, 'packets', input);
    fig(
      "flood: the victim's connection kept (its next packet passed)",
      kept.retval === 0 ? 1 : 0,
      'bool',
      input,
    );
  } finally {
    await flood?.close();
    await cleanup();
    rmSync(dir, { recursive: true, force: true });
  }
}
