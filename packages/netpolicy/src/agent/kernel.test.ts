// Differential test against the kernel: for random clusters, policies and probes, the verdict of the
// real BPF program (BPF_PROG_TEST_RUN) equals the reference datapath's over the same maps and the
// direct evaluation of the ordered policy. One datapath per node, as each node's agent programs it.
import { buildPacket } from '@cascade/bpf-datapath';
import { freshDatapath, kernelTestsEnabled, referenceOf } from '@cascade/bpf-datapath/testing';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NetpolEngine } from '../engine/engine.ts';
import { clusterArb, probesFor } from '../engine/testing.ts';
import { oracleConnection, remoteOf } from '../engine/verdict.ts';
import { datapathState } from './datapath.ts';

describe.skipIf(!kernelTestsEnabled())('kernel == reference == direct evaluation', () => {
  const nodes = ['n1', 'n2'] as const;
  const dps: Awaited<ReturnType<typeof freshDatapath>>[] = [];
  beforeAll(async () => {
    for (const _ of nodes) dps.push(await freshDatapath());
  });
  afterAll(async () => {
    for (const d of dps) await d.cleanup();
  });

  it('agrees on thousands of probes over random clusters', async () => {
    let probesRun = 0;
    await fc.assert(
      fc.asyncProperty(
        clusterArb.chain((c) => fc.tuple(fc.constant(c), probesFor(c))),
        async ([cluster, probes]) => {
          const engine = NetpolEngine.fromCluster(cluster);
          const refs = [];
          for (const [i, node] of nodes.entries()) {
            const dp = dps[i]!.dp;
            await dp.sync(datapathState(engine, node));
            await dp.clearConntrack();
            refs.push(await referenceOf(dp));
          }
          for (const p of probes) {
            const want = oracleConnection(engine, p.from, p.to, p.proto, p.port);
            const from = remoteOf(engine, p.from);
            const to = remoteOf(engine, p.to);
            const sport = 30000 + (probesRun % 20000);
            let kernel: 'allow' | 'deny' = 'allow';
            let reference: 'allow' | 'deny' = 'allow';
            const pkt = buildPacket({ src: p.from, dst: p.to, proto: p.proto, sport, dport: p.port });
            // Portless protocols share one conntrack tuple per address pair: an earlier probe's flow
            // would make this one a "reply". Probes are new flows, so start from an empty table.
            if (![6, 17, 132].includes(p.proto)) for (const d of dps) await d.dp.clearConntrack();
            if (from.kind === 'pod' && from.pod.node) {
              const i = nodes.indexOf(from.pod.node as (typeof nodes)[number]);
              if ((await dps[i]!.dp.run('from_endpoint', pkt)).retval === 2) kernel = 'deny';
              if (refs[i]!.judge('egress', p.from, p.to, p.proto, p.port).verdict === 'deny')
                reference = 'deny';
            }
            if (to.kind === 'pod' && to.pod.node && p.from !== p.to) {
              const i = nodes.indexOf(to.pod.node as (typeof nodes)[number]);
              if ((await dps[i]!.dp.run('to_endpoint', pkt)).retval === 2) kernel = 'deny';
              if (refs[i]!.judge('ingress', p.to, p.from, p.proto, p.port).verdict === 'deny')
                reference = 'deny';
            }
            probesRun++;
            const label = `${JSON.stringify(p)} oracle=${want.verdict} reference=${reference} kernel=${kernel}`;
            expect(reference, label).toBe(want.verdict);
            expect(kernel, label).toBe(want.verdict);
          }
        },
      ),
      { numRuns: 400 },
    );
    expect(probesRun).toBeGreaterThan(1000);
  }, 300_000);
});
