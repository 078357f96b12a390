// Probes between the example's pods: what cascadectl predicts from the objects read back from the
// cluster, and what real TCP and UDP connections get.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { CASCADECTL, cascadectl, KUBECONFIG, kubectlJson, NODE, shAsync } from '../harness.ts';
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

type Probe = ReturnType<typeof probesFor>[number];

/** A probe the kernel first left unanswered where simulate allows it, answered on a second try. */
export interface LateAnswer {
  at: number;
  probe: Probe;
}

/** What a probe loop saw: rounds run, rounds measured whole, probes left unmeasured, wrong verdicts. */
export interface LoopResult {
  rounds: number;
  whole: number;
  /** verdicts measured (probes that returned one) */
  measured: number;
  unmeasured: number;
  wrong: string[];
  late: LateAnswer[];
}

/** How long a second try waits: past TCP's first SYN retransmission (1 s). */
const SECOND_TRY_MS = 2500;

/**
 * Probes round after round until stopped, each real verdict compared with `want`. A probe whose exec
 * returned no line ('?': kubectl exec cut short on a loaded machine) is not a verdict: it is counted,
 * and callers require enough rounds measured whole. A probe simulate allows that got no answer within
 * the round's timeout is tried again at once with a longer one: denied again, it is a wrong verdict;
 * answered, it is a late answer (a SYN lost or slow on a loaded machine), which `wrongVerdicts` still
 * counts as wrong if a kernel reported refusing that flow meanwhile. `progress()` is what it saw so far.
 */
export function probeLoop(
  probes: Probe[],
  want: string[],
  timeoutMs = 400,
): { stop: () => Promise<LoopResult>; progress: () => LoopResult } {
  let stopped = false;
  const r: LoopResult = { rounds: 0, whole: 0, measured: 0, unmeasured: 0, wrong: [], late: [] };
  const loop = (async () => {
    while (!stopped) {
      const at = Date.now();
      const have = await measured(probes, timeoutMs);
      const unanswered = probes.flatMap((_, i) => (want[i] === 'ALLOW' && have[i] === 'DENY' ? [i] : []));
      const again = unanswered.length
        ? await measured(
            unanswered.map((i) => probes[i]!),
            SECOND_TRY_MS,
          )
        : [];
      unanswered.forEach((i, k) => {
        if (again[k] === 'ALLOW') r.late.push({ at, probe: probes[i]! });
        have[i] =
          again[k] === 'ALLOW' || again[k] === '?'
            ? again[k]!
            : `DENY (${again[k]} again after ${SECOND_TRY_MS} ms)`;
      });
      const missing = have.filter((v) => v === '?').length;
      r.unmeasured += missing;
      r.measured += have.length - missing;
      if (missing === 0) r.whole++;
      const known = (xs: string[]) => xs.filter((_, i) => have[i] !== '?');
      r.wrong.push(
        ...mismatches(
          probes.filter((_, i) => have[i] !== '?'),
          known(want),
          known(have),
        ).map((w) => `round ${r.rounds} (${new Date(at).toISOString()}): ${w}`),
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

/** A refusal an agent reported (`cascadectl flows -o json`, every node's agent). */
interface Refusal {
  time: string;
  node: string;
  direction: string;
  from: string;
  to: string;
  protocol: string;
  port: number;
  rule?: string;
  reason: string;
}

/** The refusals every node's agent reported since `since` (its ring of recent flows). */
export async function kernelRefusals(since: number): Promise<Refusal[]> {
  const nodes = kubectlJson<{ items: { metadata: { name: string } }[] }>('get', 'nodes').items;
  const out: Refusal[] = [];
  for (const n of nodes) {
    const text = await shAsync(
      NODE,
      [
        CASCADECTL,
        'flows',
        '--node',
        n.metadata.name,
        '--kubeconfig',
        KUBECONFIG,
        '--verdict',
        'deny',
        '-o',
        'json',
      ],
      60_000,
    );
    for (const line of text.split('\n'))
      if (line.trim()) {
        const f = JSON.parse(line) as Refusal;
        if (Date.parse(f.time) >= since - 1000) out.push(f);
      }
  }
  return out;
}

/**
 * The loop's wrong verdicts, and its late answers that some kernel reported refusing (any refusal of
 * that flow since `since`: simulate allows it throughout the loop, so no refusal of it is right).
 */
async function wrongVerdicts(r: LoopResult, since: number): Promise<string[]> {
  if (!r.late.length) return r.wrong;
  const refused = await kernelRefusals(since);
  const late = r.late.flatMap(({ at, probe: p }) =>
    refused
      .filter((f) => f.from === p.from && f.to === p.to && f.port === p.port && f.protocol === p.protocol)
      .slice(0, 1)
      .map(
        (f) =>
          `${new Date(at).toISOString()}: ${p.protocol}/${p.port} ${p.from} -> ${p.to}: simulate ALLOW, answered late, ` +
          `and ${f.node} refused it at ${f.time} (${f.direction}, ${f.rule ?? f.reason})`,
      ),
  );
  return [...r.wrong, ...late];
}

/** Late answers are losses, not verdicts, but must stay rare: at most 1 in 100 verdicts (at least 2). */
const lateAnswersAllowed = (r: LoopResult) => Math.max(2, Math.floor(r.measured / 100));

/**
 * No wrong verdict in the loop since `since` (wrongVerdicts: its late answers a kernel refused
 * included), and its late answers rare; `count` is told how many verdicts were wrong first.
 */
export async function expectNoWrongVerdict(
  r: LoopResult,
  since: number,
  count?: (wrong: number) => void,
): Promise<void> {
  const wrong = await wrongVerdicts(r, since);
  count?.(wrong.length);
  expect(wrong.slice(0, 20)).toEqual([]);
  expect(r.late.length, JSON.stringify(r.late.slice(0, 10))).toBeLessThanOrEqual(lateAnswersAllowed(r));
}
