// `netpol recommend` on 10,000 flow records of one namespace of the 500-pod input: its pods talk
// with a few peer workloads each (pods of other namespaces, its own, addresses outside), on the
// named ports the answering pods expose, with DNS; each record is judged by the engine first, so the
// allowed ones are reported allowed and the others denied, as the agents report them. Time and peak
// RSS of the bin (spawned, output captured), policies written, connections and the share of
// observed connections the proof allows (must be 100%).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Cluster, NetpolEngine, oracleConnection, type Pod } from '@cascade/netpolicy';
import { timed } from './cli-bin.ts';
import { rng } from './gateway-topology.ts';
import { clusterManifests } from './netpol-manifests.ts';
import type { Figure } from './report.ts';

type End = { pod?: Pod; address?: string };
type Candidate = { src: End; dst: End; port: number; outbound: boolean };

export const RECOMMEND_FLOWS = 10_000;

/** The flow file: NDJSON records, in the namespace with the most pods. */
export function recommendFlows(
  c: Cluster,
  n = RECOMMEND_FLOWS,
  seed = 46,
): { namespace: string; text: string } {
  const engine = NetpolEngine.fromCluster(c);
  const namespace = c.pods[0]!.namespace;
  const mine = c.pods.filter((p) => p.namespace === namespace);
  const others = c.pods.filter((p) => p.namespace !== namespace);
  const r = rng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
  // each pod of the namespace: 4 peer pods elsewhere, 2 of its own namespace, 1 outside address
  const peers = new Map<Pod, End[]>(
    mine.map((p) => [
      p,
      [
        ...Array.from({ length: 4 }, () => ({ pod: pick(others) })),
        ...Array.from({ length: 2 }, () => ({ pod: pick(mine) })),
        { address: `203.0.113.${1 + Math.floor(r() * 50)}` },
      ],
    ]),
  );
  const name = (e: End) => (e.pod ? `${e.pod.namespace}/${e.pod.name}` : e.address!);
  const ip = (e: End) => (e.pod ? e.pod.ips[0]! : e.address!);
  // every candidate connection judged once: the records are drawn from the allowed ones (one in ten
  // from the denied ones, reported denied), as an audited namespace's agents report them
  const allowed: Candidate[] = [];
  const denied: Candidate[] = [];
  for (const me of mine)
    for (const peer of peers.get(me)!)
      for (const outbound of peer.address !== undefined ? [true] : [true, false]) {
        const [src, dst] = outbound ? [{ pod: me }, peer] : [peer, { pod: me }];
        for (const port of dst.pod?.ports.length ? dst.pod.ports.map((x) => x.port) : [443]) {
          const k: Candidate = { src, dst, port, outbound };
          (oracleConnection(engine, ip(src), ip(dst), 6, port).verdict === 'allow' ? allowed : denied).push(
            k,
          );
        }
      }
  const lines: string[] = [];
  const t0 = Date.parse('2026-11-29T06:00:00Z');
  for (let i = 0; i < n; i++) {
    const deny = i % 10 === 9 && denied.length > 0;
    const k = pick(deny ? denied : allowed);
    lines.push(
      JSON.stringify({
        time: new Date(t0 + i * 100).toISOString(),
        direction: k.outbound ? 'egress' : 'ingress',
        verdict: deny ? 'deny' : 'allow',
        from: name(k.src),
        to: name(k.dst),
        protocol: 'TCP',
        port: k.port,
      }),
    );
  }
  return { namespace, text: `${lines.join('\n')}\n` };
}

export function recommendFigures(
  c500: Cluster,
  dir: string,
  env: NodeJS.ProcessEnv,
  input: string,
): Figure[] {
  // the namespace before its first policy: its own NetworkPolicies and the admin tiers left out (the
  // 500-pod input's admin policies deny nearly every connection: nothing to learn from)
  const first = c500.pods[0]!.namespace;
  const c: Cluster = {
    ...c500,
    policies: c500.policies.filter((p) => p.kind === 'NetworkPolicy' && p.namespace !== first),
  };
  const cluster = join(dir, 'p500-recommend');
  mkdirSync(cluster, { recursive: true });
  writeFileSync(join(cluster, 'cluster.yaml'), clusterManifests(c));
  const { namespace, text } = recommendFlows(c);
  const flows = join(dir, 'flows.ndjson');
  writeFileSync(flows, text);
  const args = ['netpol', 'recommend', '-n', namespace, cluster, '--flows', flows, '-o', 'json'];
  const best = [0, 1, 2].map(() => timed(args, env, true)).sort((a, b) => a.ms - b.ms)[0]!;
  const j = JSON.parse(best.stdout) as {
    policies: unknown[];
    records: number;
    proof: { connections: number; allowed: number; beyondCount: number };
  };
  const what = `${RECOMMEND_FLOWS.toLocaleString('en')} flow records of namespace ${namespace} (${c.pods.filter((p) => p.namespace === namespace).length} pods; ${j.proof.connections} allowed connections, a tenth of the records denied ones), ${input}, without the admin policies and ${namespace}'s own NetworkPolicies (${c.policies.length} left)`;
  const fig = (name: string, value: number, unit: string, target?: string): Figure => ({
    suite: 'cli',
    name: `netpol recommend: ${name}`,
    value,
    unit,
    input: what,
    ...(target ? { target } : {}),
  });
  return [
    fig('time', best.ms, 'ms'),
    fig('peak RSS', best.rss, 'MiB'),
    fig('policies written', j.policies.length, 'policies'),
    fig(
      'observed connections allowed by the proof',
      (100 * j.proof.allowed) / j.proof.connections,
      '%',
      '= 100 %',
    ),
    fig('pod pairs and ports admitted beyond those observed', j.proof.beyondCount, 'pairs'),
  ];
}
