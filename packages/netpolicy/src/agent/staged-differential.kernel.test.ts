// Staged verdicts in the kernel equal the verdicts of the same policies enforced: for random clusters
// with random staged Sets and Deletes, each node's datapath (as its agent programs it, staged tables
// included) is probed with new flows; the packet's fate is the enforced set's verdict (the direct
// evaluation of the enforced policies), and the staged verdict the kernel reports (its event's staged
// part, else the enforced verdict) is the direct evaluation of an engine enforcing the staged set.
import { buildPacket } from '@cascade/bpf-datapath';
import { freshDatapath, kernelTestsEnabled } from '@cascade/bpf-datapath/testing';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NetpolEngine } from '../engine/engine.ts';
import { policyKey } from '../engine/rules.ts';
import { applyStaged } from '../engine/staged.ts';
import { stagedClusterArb } from '../engine/testing.ts';
import { oracleConnection, remoteOf } from '../engine/verdict.ts';
import { datapathState } from './datapath.ts';

describe.skipIf(!kernelTestsEnabled())('staged verdicts: kernel == the staged set enforced', () => {
  const nodes = ['n1', 'n2'] as const;
  const dps: Awaited<ReturnType<typeof freshDatapath>>[] = [];
  beforeAll(async () => {
    for (const _ of nodes) dps.push(await freshDatapath());
  });
  afterAll(async () => {
    for (const d of dps) await d.cleanup();
  });

  it('never enforces a staged verdict, and reports exactly where the staged set decides otherwise', async () => {
    let probesRun = 0;
    let differing = 0;
    await fc.assert(
      fc.asyncProperty(stagedClusterArb, async ([cluster, staged, probes]) => {
        const engine = NetpolEngine.fromCluster(cluster);
        for (const s of staged) engine.upsertStaged(s);
        engine.flush();
        const reference = NetpolEngine.fromCluster({
          ...cluster,
          policies: [
            ...applyStaged(new Map(cluster.policies.map((p) => [policyKey(p), p])), staged).policies.values(),
          ],
        });
        for (const [i, node] of nodes.entries()) {
          await dps[i]!.dp.sync(datapathState(engine, node));
          await dps[i]!.dp.clearConntrack();
          await dps[i]!.dp.events();
        }
        for (const p of probes) {
          if (p.from === p.to) continue;
          const enforced = oracleConnection(engine, p.from, p.to, p.proto, p.port).verdict;
          const want = oracleConnection(reference, p.from, p.to, p.proto, p.port).verdict;
          const sport = 30000 + (probesRun % 20000);
          const pkt = buildPacket({ src: p.from, dst: p.to, proto: p.proto, sport, dport: p.port });
          if (![6, 17, 132].includes(p.proto)) for (const d of dps) await d.dp.clearConntrack();
          let kernel: 'allow' | 'deny' = 'allow';
          let kernelStaged: 'allow' | 'deny' = 'allow';
          for (const [dir, end] of [
            ['egress', remoteOf(engine, p.from)],
            ['ingress', remoteOf(engine, p.to)],
          ] as const) {
            if (end.kind !== 'pod' || !end.pod.node) continue;
            const dp = dps[nodes.indexOf(end.pod.node as (typeof nodes)[number])]!.dp;
            const denied =
              (await dp.run(dir === 'egress' ? 'from_endpoint' : 'to_endpoint', pkt)).retval === 2;
            // drained after every packet: the events now are this packet's
            const ev = (await dp.events()).find((e) => e.direction === dir);
            const verdict = denied ? 'deny' : 'allow';
            if (denied) kernel = 'deny';
            if ((ev?.staged?.verdict ?? verdict) === 'deny') kernelStaged = 'deny';
            if (ev?.staged) differing++;
          }
          probesRun++;
          const label = `${JSON.stringify(p)} staged=${JSON.stringify(staged.map((s) => [s.action, policyKey(s.policy)]))} enforced=${enforced} kernel=${kernel} staged-set=${want} kernel-staged=${kernelStaged}`;
          expect(kernel, label).toBe(enforced);
          expect(kernelStaged, label).toBe(want);
        }
      }),
      { numRuns: 300 },
    );
    expect(probesRun).toBeGreaterThan(1000);
    // the staged set decided otherwise somewhere: the test saw both kinds of answer
    expect(differing).toBeGreaterThan(20);
  }, 300_000);
});
