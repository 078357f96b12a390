// Where each nanosecond of a packet goes: builds of the same program with one stage removed
// (compiled here with the CASCADE_BENCH_* switches of bpf/), timed in the same rounds as the full
// program and the trivial baseline. A stage's cost is the full program's time minus the time without
// it. BPF_PROG_TEST_RUN reports whole nanoseconds per packet: a stage under 1 ns reads as 0 or 1.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ARTIFACTS, buildPacket, COUNTERS, type DesiredState } from '@cascade/bpf-datapath';
import { freshDatapath } from '@cascade/bpf-datapath/testing';

type Fig = (name: string, value: number, unit: string, input: string, target?: string) => void;

/** The program's source compiled to `obj` with the CASCADE_BENCH_* switches `defs`; returns `obj`. */
export function compileBenchBuild(obj: string, defs: string[]): string {
  const inc = `/usr/include/${execFileSync('gcc', ['-dumpmachine'], { encoding: 'utf8' }).trim()}`;
  execFileSync(
    'clang',
    [
      '-O2',
      '-g',
      '-target',
      'bpf',
      `-I${inc}`,
      ...defs.map((d) => `-D${d}`),
      '-c',
      ARTIFACTS.source,
      '-o',
      obj,
    ],
    { stdio: 'pipe' },
  );
  return obj;
}

/** [figure name, -D switches, program, which packet] */
const BUILDS: [
  string,
  string[],
  'from_endpoint' | 'to_endpoint' | 'bench_baseline',
  'est' | 'est6' | 'first',
][] = [
  ['trivial program', [], 'bench_baseline', 'est'],
  ['established: full program', [], 'from_endpoint', 'est'],
  ['established IPv6: full program', [], 'from_endpoint', 'est6'],
  ['established: fast path parse only', ['CASCADE_BENCH_FAST_PARSE_ONLY'], 'from_endpoint', 'est'],
  ['established: without the counter', ['CASCADE_BENCH_FAST_NO_COUNT'], 'from_endpoint', 'est'],
  [
    'established: without the generation/clock check',
    ['CASCADE_BENCH_FAST_NO_CONFIG'],
    'from_endpoint',
    'est',
  ],
  [
    'established: without the flow cache (conntrack answers)',
    ['CASCADE_BENCH_NO_FLOW_CACHE'],
    'from_endpoint',
    'est',
  ],
  ['first packet (verdict cached): full program', ['CASCADE_BENCH_NEW_FLOWS'], 'to_endpoint', 'first'],
  [
    'first packet: without the conntrack insert',
    ['CASCADE_BENCH_NEW_FLOWS', 'CASCADE_BENCH_NO_TRACK'],
    'to_endpoint',
    'first',
  ],
  [
    'first packet: without the conntrack quota',
    ['CASCADE_BENCH_NEW_FLOWS', 'CASCADE_BENCH_NO_CT_QUOTA'],
    'to_endpoint',
    'first',
  ],
  [
    'first packet: without the conntrack lookup and insert',
    ['CASCADE_BENCH_NEW_FLOWS', 'CASCADE_BENCH_NO_TRACK', 'CASCADE_BENCH_NO_CT_LOOKUP'],
    'to_endpoint',
    'first',
  ],
  [
    'first packet: without the flow cache probe',
    ['CASCADE_BENCH_NEW_FLOWS', 'CASCADE_BENCH_NO_FLOW_CACHE'],
    'to_endpoint',
    'first',
  ],
  [
    'first packet of distinct flows (conntrack inserts, 100,000 per run into an emptied table)',
    ['CASCADE_BENCH_NEW_FLOWS', 'CASCADE_BENCH_UNIQUE'],
    'to_endpoint',
    'first',
  ],
  [
    'first packet of distinct flows into a full table (2,000,000 flows in first: each insert evicts)',
    ['CASCADE_BENCH_NEW_FLOWS', 'CASCADE_BENCH_UNIQUE'],
    'to_endpoint',
    'first',
  ],
  [
    'first packet, cold verdict (rule-set lookup): full program',
    ['CASCADE_BENCH_NEW_FLOWS', 'CASCADE_BENCH_COLD'],
    'to_endpoint',
    'first',
  ],
];

export async function stageFigures(
  fig: Fig,
  state: DesiredState,
  A: string,
  B: string,
  A6: string,
  B6: string,
) {
  const dir = mkdtempSync(join(tmpdir(), 'cascade-stages-'));
  const packets = {
    est: buildPacket({ src: A, dst: B, proto: 6, sport: 5556, dport: 443, tcpFlags: 0x10 }),
    est6: buildPacket({ src: A6, dst: B6, proto: 6, sport: 5556, dport: 443, tcpFlags: 0x10 }),
    first: buildPacket({ src: B, dst: A, proto: 6, sport: 5557, dport: 81 }),
  };
  const loaded: Awaited<ReturnType<typeof freshDatapath>>[] = [];
  try {
    const runs = new Map<string, number[]>();
    const evictions = new Map<string, number[]>();
    const dps = [];
    for (const [i, [name, defs, prog, p]] of BUILDS.entries()) {
      const d = await freshDatapath(undefined, compileBenchBuild(join(dir, `${i}.o`), defs));
      loaded.push(d);
      await d.dp.sync(state);
      // the flow's first packet, then a conntrack hit (which fills this CPU's flow cache slot)
      for (let k = 0; k < 3; k++) await d.dp.run(prog, packets[p], 1000);
      const unique = defs.includes('CASCADE_BENCH_UNIQUE');
      const full = name.includes('into a full table');
      dps.push({
        name,
        run: async () => {
          if (!unique) return d.dp.run(prog, packets[p], 300_000);
          await d.dp.clearConntrack();
          // a full table: every set of four holds flows (each of 131,072 sets gets about 15)
          if (full) await d.dp.run(prog, packets[p], 2_000_000);
          const evicted = await d.dp.counter(COUNTERS.ctEvicted);
          const r = await d.dp.run(prog, packets[p], 100_000);
          evictions.set(name, [
            ...(evictions.get(name) ?? []),
            (await d.dp.counter(COUNTERS.ctEvicted)) - evicted,
          ]);
          return r;
        },
      });
    }
    const ROUNDS = 15;
    for (let r = 0; r < ROUNDS; r++)
      for (const b of dps) {
        await new Promise((res) => setTimeout(res, 50));
        runs.set(b.name, [...(runs.get(b.name) ?? []), (await b.run()).ns]);
      }
    const best = (n: string) => Math.min(...runs.get(n)!);
    const input = `10 policy entries, fastest of ${ROUNDS} runs x 300,000 repeats; builds of the same source with one stage removed`;
    for (const [name] of BUILDS) fig(`stages: ${name}`, best(name), 'ns/packet', input);
    const cost = (label: string, full: string, without: string) =>
      fig(
        `stage cost: ${label}`,
        best(full) - best(without),
        'ns/packet',
        `${input}: (${full}) - (${without})`,
      );
    const est = 'established: full program';
    cost('flow cache slot lookup, compare, check and count', est, 'established: fast path parse only');
    cost('fast path parse over the trivial program', 'established: fast path parse only', 'trivial program');
    cost('CT_HIT counter', est, 'established: without the counter');
    cost('generation/clock check (config lookup)', est, 'established: without the generation/clock check');
    const first = 'first packet (verdict cached): full program';
    cost('conntrack insert of a new flow', first, 'first packet: without the conntrack insert');
    cost(
      'conntrack quota of a new flow (one hash lookup)',
      first,
      'first packet: without the conntrack quota',
    );
    cost(
      'conntrack lookup (miss)',
      'first packet: without the conntrack insert',
      'first packet: without the conntrack lookup and insert',
    );
    cost('flow cache probe on a first packet (miss)', first, 'first packet: without the flow cache probe');
    // Conntrack inserts of distinct flows (issue 47 item 1): into an emptied table and into a full one
    // (each insert evicts), each round over the trivial program of the same round, and full / empty
    const empty = 'first packet of distinct flows (conntrack inserts, 100,000 per run into an emptied table)';
    const fullName = [...runs.keys()].find((k) => k.includes('into a full table'))!;
    const medianRatio = (a: string, b: string) => {
      const x = runs.get(a)!;
      const y = runs.get(b)!;
      const r = x.map((v, i) => v / Math.max(1, y[i]!)).sort((p, q) => p - q);
      return r[r.length >> 1]!;
    };
    const rounds = `${ROUNDS} rounds, each over the same round's figure`;
    fig(
      'first packet of 100,000 distinct flows, emptied table (x trivial program, median of per-round ratios)',
      medianRatio(empty, 'trivial program'),
      'x',
      `${rounds}; verdict cached, conntrack insert of a new flow each`,
    );
    fig(
      'first packet of 100,000 distinct flows, full table (x trivial program, median of per-round ratios)',
      medianRatio(fullName, 'trivial program'),
      'x',
      `${rounds}; every insert evicts (a set of four full)`,
    );
    fig(
      'conntrack insert into a full table with eviction / into an emptied one (first packets of distinct flows)',
      medianRatio(fullName, empty),
      'x',
      `${rounds}; 100,000 distinct flows per run`,
      '<= 2x',
    );
    const ev = [...(evictions.get(fullName) ?? [])].sort((p, q) => p - q);
    fig(
      'conntrack evictions per 100,000 inserts into a full table (median run)',
      ev[ev.length >> 1] ?? Number.NaN,
      'evictions',
      `${ROUNDS} runs; the rest found a set with a slot of their own endpoint or an empty one`,
    );
    cost(
      'rule-set walk (verdict cache miss)',
      'first packet, cold verdict (rule-set lookup): full program',
      first,
    );
  } finally {
    for (const d of loaded) await d.cleanup();
    rmSync(dir, { recursive: true, force: true });
  }
}
