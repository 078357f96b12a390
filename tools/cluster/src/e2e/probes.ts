// Probes between the example's pods: what cascadectl predicts from the objects read back from the
// cluster, and what real TCP and UDP connections get.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cascadectl, KUBECONFIG, shAsync } from '../harness.ts';
import { NODE_PORT, net, type Obj, work } from './shared.ts';

/** TCP probes from each source to every other example pod on every port (UDP on the first), and to the nodes. */
export const probesFor = (sources: Obj[], udp = true, nodes = [net.nodeIp]) => {
  const list: { from: string; to: string; protocol: 'TCP' | 'UDP'; port: number }[] = [];
  for (const s of sources) {
    const from = `${s.metadata.namespace}/${s.metadata.name}`;
    for (const d of net.pods)
      if (d !== s)
        for (const port of net.ports) {
          list.push({ from, to: `${d.metadata.namespace}/${d.metadata.name}`, protocol: 'TCP', port });
          if (udp && port === net.ports[0])
            list.push({ from, to: `${d.metadata.namespace}/${d.metadata.name}`, protocol: 'UDP', port });
        }
    for (const node of nodes) {
      list.push({ from, to: node, protocol: 'TCP', port: NODE_PORT });
      if (udp) list.push({ from, to: node, protocol: 'UDP', port: NODE_PORT });
    }
  }
  return list;
};
/** What `cascadectl netpol simulate` says of the probes, reading the objects from the cluster. */
export const predicted = (probes: ReturnType<typeof probesFor>) => {
  const file = join(work, 'probes.yaml');
  writeFileSync(file, probes.map((p) => `- ${JSON.stringify(p)}`).join('\n'));
  const out = JSON.parse(
    cascadectl('netpol', 'simulate', '--kubeconfig', KUBECONFIG, '--probes', file, '-o', 'json'),
  ) as {
    verdict: string;
  }[];
  return out.map((r) => r.verdict.toUpperCase());
};
/** What real connections from the pods get (cascade-probe in each source pod). */
export const measured = async (probes: ReturnType<typeof probesFor>, timeoutMs = 600) => {
  const bySource = new Map<string, number[]>();
  probes.forEach((p, i) => bySource.set(p.from, [...(bySource.get(p.from) ?? []), i]));
  const verdicts: string[] = new Array(probes.length).fill('?');
  await Promise.all(
    [...bySource].map(async ([from, idx]) => {
      const [ns, name] = from.split('/') as [string, string];
      const targets = idx.map((i) => {
        const p = probes[i]!;
        const ip = p.to.includes('/') ? net.podIp.get(p.to) : p.to;
        return `${p.protocol.toLowerCase()}/${ip}/${p.port}`;
      });
      const out = await shAsync(
        'kubectl',
        [
          'exec',
          '-n',
          ns,
          name,
          '--',
          '/usr/local/bin/cascade-probe',
          'probe-all',
          String(timeoutMs),
          ...targets,
        ],
        120_000,
      );
      const lines = out.trim().split('\n');
      idx.forEach((i, k) => {
        verdicts[i] = lines[k]?.split(' ')[1] ?? '?';
      });
    }),
  );
  return verdicts;
};
/** Where simulate and the kernel disagree, one line each. */
export const mismatches = (probes: ReturnType<typeof probesFor>, want: string[], have: string[]) =>
  probes
    .map((p, i) => ({ ...p, want: want[i], have: have[i] }))
    .filter((r) => r.want !== r.have)
    .map((r) => `${r.protocol}/${r.port} ${r.from} -> ${r.to}: simulate ${r.want}, kernel ${r.have}`);

/** What a probe loop saw: rounds run, rounds measured whole, probes left unmeasured, wrong verdicts. */
export interface LoopResult {
  rounds: number;
  whole: number;
  unmeasured: number;
  wrong: string[];
}

/**
 * Probes round after round until stopped, each real verdict compared with `want`. A probe whose exec
 * returned no line ('?': kubectl exec cut short on a loaded machine) is not a verdict: it is counted,
 * and callers require enough rounds measured whole. `progress()` is what it saw so far.
 */
export function probeLoop(
  probes: ReturnType<typeof probesFor>,
  want: string[],
): { stop: () => Promise<LoopResult>; progress: () => LoopResult } {
  let stopped = false;
  const r: LoopResult = { rounds: 0, whole: 0, unmeasured: 0, wrong: [] };
  const loop = (async () => {
    while (!stopped) {
      const have = await measured(probes, 400);
      const missing = have.filter((v) => v === '?').length;
      r.unmeasured += missing;
      if (missing === 0) r.whole++;
      const known = (xs: string[]) => xs.filter((_, i) => have[i] !== '?');
      r.wrong.push(
        ...mismatches(
          probes.filter((_, i) => have[i] !== '?'),
          known(want),
          known(have),
        ).map((w) => `round ${r.rounds}: ${w}`),
      );
      r.rounds++;
    }
  })();
  return {
    progress: () => r,
    stop: async () => {
      stopped = true;
      await loop;
      return r;
    },
  };
}
