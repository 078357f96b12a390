// What staged tables cost a first packet (issue 46): the same endpoint and rule sets with no staged
// tables, with one staged policy's and with a hundred's, against a build of the same program without
// the staged step; timed in the same rounds (the VM's speed changes in phases of seconds), every
// figure also as the median of per-round ratios to the program without the step. Established packets
// never reach the step (flow cache and conntrack answer them): not timed here.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ARTIFACTS, buildPacket, type DesiredState, type TableEntry } from '@cascade/bpf-datapath';
import { freshDatapath } from '@cascade/bpf-datapath/testing';
import { compileBenchBuild } from './datapath-stages.ts';

type Fig = (name: string, value: number, unit: string, input: string, target?: string) => void;

/**
 * `base` with its ingress lower table staged as `policies` staged NetworkPolicies would make it: the
 * enforced entries plus one allow per policy for other remotes (agreeing with the enforced verdict
 * for the probe), or, with `differ`, the probe's port denied by the staged set.
 */
function withStaged(base: DesiredState, policies: number, differ = false): DesiredState {
  if (policies === 0) return base;
  const ep = base.endpoints[0]!;
  const lower = base.tables.get(ep.tables.ingress.lower)!;
  const staged: TableEntry[] = [...lower];
  for (let i = 0; i < policies; i++)
    staged.push({
      identity: 5000 + i,
      proto: 6,
      port: 8080,
      plen: 16,
      precedence: 0x9000 + 2 * i,
      verdict: 'allow',
      rule: 2_000_000 + i,
    });
  const admin = ep.tables.ingress.admin;
  const tables = new Map(base.tables);
  tables.set('staged-lower', staged);
  // differing: the staged admin layer denies the probe (its port 81 is allowed by the enforced one)
  if (differ)
    tables.set('staged-admin', [
      ...base.tables.get(admin)!.filter((e) => !(e.identity === 300 && e.port === 81)),
      {
        identity: 300,
        proto: 6,
        port: 81,
        plen: 16,
        precedence: 0x7fff0000,
        verdict: 'deny',
        rule: 3_000_000,
      },
    ]);
  const stagedRefs = { admin: differ ? 'staged-admin' : admin, lower: 'staged-lower' };
  return {
    ...base,
    tables,
    endpoints: base.endpoints.map((e) => ({
      ...e,
      staged: { ingress: stagedRefs, egress: e.tables.egress },
    })),
  };
}

export async function stagedFigures(fig: Fig, base: DesiredState, src: string, dst: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'cascade-bench-staged-'));
  const loaded: Awaited<ReturnType<typeof freshDatapath>>[] = [];
  try {
    const without = compileBenchBuild(join(dir, 'no-staged.bpf.o'), [
      'CASCADE_BENCH_NEW_FLOWS',
      'CASCADE_BENCH_NO_STAGED',
    ]);
    // allowed by the enforced set (tcp/81 from the probe's remote), a new flow at every repeat
    const packet = buildPacket({ src, dst, proto: 6, sport: 5557, dport: 81 });
    const variants: [string, string, DesiredState][] = [
      ['program without the staged step (bench build), no staged tables', without, base],
      ['no staged policy on the endpoint', ARTIFACTS.benchNewFlows, base],
      ['1 staged policy on the endpoint, same verdict', ARTIFACTS.benchNewFlows, withStaged(base, 1)],
      ['100 staged policies on the endpoint, same verdict', ARTIFACTS.benchNewFlows, withStaged(base, 100)],
      [
        '1 staged policy, verdicts differ (event within the budget)',
        ARTIFACTS.benchNewFlows,
        withStaged(base, 1, true),
      ],
    ];
    const dps: (typeof loaded)[number]['dp'][] = [];
    for (const [, object, state] of variants) {
      const d = await freshDatapath(undefined, object);
      loaded.push(d);
      await d.dp.sync(state);
      await d.dp.run('to_endpoint', packet);
      dps.push(d.dp);
    }
    const ROUNDS = 20;
    const runs: number[][] = variants.map(() => []);
    /** ratios[i]: variant i over the program without the step, timed back to back (pairs, in either order) */
    const ratios: number[][] = variants.map(() => []);
    const time = async (i: number) => (await dps[i]!.run('to_endpoint', packet, 300_000)).ns;
    // The VM's speed changes in phases of seconds: each variant is timed right beside the program
    // without the step (a pair, first one then the other, alternating), and only the pair's ratio
    // is taken; the pauses between pairs let the phases move.
    for (let round = 0; round < ROUNDS; round++)
      for (let i = 1; i < variants.length; i++) {
        await new Promise((r) => setTimeout(r, 50));
        let mine: number;
        let without: number;
        if (round % 2) {
          mine = await time(i);
          without = await time(0);
        } else {
          without = await time(0);
          mine = await time(i);
        }
        runs[i]!.push(mine);
        runs[0]!.push(without);
        ratios[i]!.push(mine / Math.max(1, without));
      }
    const input = `${base.tables.get(base.endpoints[0]!.tables.ingress.admin)!.length.toLocaleString('en')} policy entries, allowed new flow (verdict cached, conntrack entry written; bench build), fastest of ${ROUNDS} runs x 300,000 repeats`;
    variants.forEach(([name], i) => {
      const sorted = [...runs[i]!].sort((x, y) => x - y);
      fig(`staged: first packet, ${name}`, sorted[0]!, 'ns/packet', input);
      if (i === 0) return;
      const r = [...ratios[i]!].sort((x, y) => x - y);
      fig(
        `staged: first packet, ${name} (x the program without the step, median of back-to-back pairs)`,
        r[ROUNDS >> 1]!,
        'x',
        `${ROUNDS} pairs, each timed beside the program without the staged step`,
        i === 1 ? '<= 1.05x' : undefined,
      );
    });
  } finally {
    for (const d of loaded) await d.cleanup();
    rmSync(dir, { recursive: true, force: true });
  }
}
