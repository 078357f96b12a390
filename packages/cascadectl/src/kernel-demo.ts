// The demo's kernel leg: each node's state loaded into the real BPF program; the example probes run
// through it (BPF_PROG_TEST_RUN), shown beside the model's verdicts.
import { buildPacket, freshDatapath, kernelUnavailable } from '@cascade/bpf-datapath';
import { datapathState, type NetpolEngine, PROTO_NAMES, remoteOf } from '@cascade/netpolicy';
import { table } from './cli.ts';
import type { ProbeResult } from './commands/netpol.ts';

export async function kernelProbes(
  engine: NetpolEngine,
  probes: ProbeResult[],
  addr: (x: string) => string,
): Promise<string> {
  const why = kernelUnavailable();
  if (why) return `kernel datapath not run here: ${why}`;
  const nodes = [...new Set([...engine.pods.values()].map((p) => p.node ?? ''))];
  const dps = new Map<string, Awaited<ReturnType<typeof freshDatapath>>>();
  try {
    let entries = 0;
    for (const n of nodes) {
      const dp = await freshDatapath();
      dps.set(n, dp);
      const r = await dp.dp.sync(datapathState(engine, n || undefined));
      entries += r.entriesWritten;
    }
    const rows = [['FROM', 'TO', 'PROTO/PORT', 'MODEL', 'KERNEL']];
    let agree = 0;
    for (const [i, p] of probes.entries()) {
      const src = addr(p.from);
      const dst = addr(p.to);
      const proto = Number(Object.entries(PROTO_NAMES).find(([, n]) => n === p.protocol)?.[0] ?? 6);
      const pkt = buildPacket({ src, dst, proto, sport: 40000 + i, dport: p.port });
      let kernel: 'allow' | 'deny' = 'allow';
      const from = remoteOf(engine, src);
      const to = remoteOf(engine, dst);
      if (
        from.kind === 'pod' &&
        (await dps.get(from.pod.node ?? '')!.dp.run('from_endpoint', pkt)).retval === 2
      )
        kernel = 'deny';
      if (to.kind === 'pod' && (await dps.get(to.pod.node ?? '')!.dp.run('to_endpoint', pkt)).retval === 2)
        kernel = 'deny';
      if (kernel === p.verdict) agree++;
      rows.push([p.from, p.to, `${p.protocol}/${p.port}`, p.verdict.toUpperCase(), kernel.toUpperCase()]);
    }
    return `${table(rows)}\n${agree}/${probes.length} probes agree (${nodes.length} node datapaths, ${entries} policy entries loaded)`;
  } finally {
    for (const d of dps.values()) await d.cleanup();
  }
}
