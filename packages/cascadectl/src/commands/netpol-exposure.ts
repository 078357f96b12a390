// cascadectl netpol exposure: per workload, who can reach it and what it can reach, across every tier
// (engine/exposure.ts computes the edges exactly), grouped the way a reviewer reads them: any
// namespace, a namespace's every pod, single workloads, nodes, and address ranges outside the cluster.
// `--diff BASE` compares with other files: "this change exposes shop/cart to any namespace on TCP 8080".
import {
  type ExposureEdge,
  type ExposurePeer,
  exposure,
  type NetpolEngine,
  type PortSpan,
  PROTO_NAMES,
  rangeToPrefixes,
  type Workload,
} from '@cascade/netpolicy';
import { type Command, oneOf, out, table } from '../cli.ts';
import { namespaceOf, namespaceOptions } from '../selector.ts';
import { loadNetpol } from './netpol.ts';

/** One line of the report: a workload, a direction, a group of peers and the ports they share. */
export interface ExposureLine {
  workload: string;
  direction: 'ingress' | 'egress';
  /**
   * any-namespace | new-namespace | namespace | workload | own-node | every-node (every node but its
   * own) | node | outside | anywhere-outside
   */
  scope: string;
  peer: string;
  ports: string;
  spans: { protocol: string; from: number; to: number }[];
}

const FORMATS = ['table', 'json', 'md', 'csv'] as const;

export const exposureCommand: Command = {
  name: 'netpol exposure',
  summary:
    'per workload: who can reach it and what it can reach, across every tier (--diff BASE: what a change adds)',
  usage:
    'cascadectl netpol exposure FILES... [-n NS] [-o table|json|md|csv] [--diff BASE...]\n  (a workload is the pods of one identity; "any namespace" includes namespaces created later;\n   --diff BASE: the lines that differ from BASE\'s files, exit 1 when the change exposes more)',
  options: {
    output: { type: 'string', short: 'o' },
    diff: { type: 'string', multiple: true },
    ...namespaceOptions,
  },
  run(values, files) {
    const format = oneOf('output', values.output, FORMATS, 'table') as (typeof FORMATS)[number];
    const ns = namespaceOf(values);
    const { engine, problems } = loadNetpol(files);
    const mine = (l: { workload: string }) => ns === undefined || l.workload.startsWith(`${ns}/`);
    const bases = values.diff as string[] | undefined;
    if (!bases) {
      out(render(exposureLines(engine).filter(mine), format));
      return problems > 0 ? 2 : 0;
    }
    const base = loadNetpol(bases);
    const changes = diffExposure(exposureOf(base.engine), exposureOf(engine)).filter(mine);
    out(renderDiff(changes, format));
    if (problems > 0 || base.problems > 0) return 2;
    return changes.some((c) => c.change === '+') ? 1 : 0;
  },
};

const protoName = (p: number) => PROTO_NAMES[p] ?? String(p);

export function portsText(spans: PortSpan[]): string {
  if (spans.length === 3 && spans.every((s) => s.from === 1 && s.to === 65535)) return 'any port';
  const text = (s: PortSpan) =>
    s.from === 1 && s.to === 65535 ? 'any' : s.from === s.to ? `${s.from}` : `${s.from}-${s.to}`;
  return [...Map.groupBy(spans, (s) => s.proto)]
    .map(([p, ss]) => `${protoName(p)} ${ss.map(text).join(',')}`)
    .join('; ');
}

/** What exposure() found, with the node names the lines group. */
export interface Exposure {
  workloads: Workload[];
  nodes: string[];
  edges: ExposureEdge[];
}

export function exposureOf(engine: NetpolEngine): Exposure {
  const nodes = [...engine.nodes.values()]
    .filter((n) => n.ips.length)
    .map((n) => n.name)
    .sort();
  return { ...exposure(engine), nodes };
}

/** The report's lines: each workload's edges grouped as a reviewer reads them. */
export function exposureLines(engine: NetpolEngine): ExposureLine[] {
  return groupLines(exposureOf(engine));
}

export function groupLines({ workloads, nodes, edges }: Exposure): ExposureLine[] {
  const lines: ExposureLine[] = [];
  const grouped = Map.groupBy(edges, (e) => `${e.workload}|${e.direction}`);
  for (const w of workloads)
    for (const d of ['ingress', 'egress'] as const) {
      const mine = grouped.get(`${w.key}|${d}`) ?? [];
      const line = (scope: string, peer: string, spans: PortSpan[]) =>
        lines.push({
          workload: w.key,
          direction: d,
          scope,
          peer,
          ports: portsText(spans),
          spans: spans.map((s) => ({ protocol: protoName(s.proto), from: s.from, to: s.to })),
        });
      podLines(w, workloads, mine, line);
      nodeLines(nodes, mine, line);
      outsideLines(mine, line);
    }
  return lines;
}

type Emit = (scope: string, peer: string, spans: PortSpan[]) => void;
const same = (a: PortSpan[] | undefined, b: PortSpan[] | undefined) =>
  JSON.stringify(a ?? []) === JSON.stringify(b ?? []);

function podLines(w: Workload, workloads: Workload[], mine: ExposureEdge[], line: Emit): void {
  const ports = new Map<string, PortSpan[]>();
  let fresh: PortSpan[] | undefined;
  for (const e of mine)
    if (e.peer.kind === 'workload') ports.set(e.peer.workload, e.ports);
    else if (e.peer.kind === 'new-namespace') fresh = e.ports;
  // a workload of one pod and itself: always allowed, not an exposure
  const others = workloads.filter((o) => o !== w || w.pods.length > 1);
  if (fresh?.length && others.every((o) => same(ports.get(o.key), fresh))) {
    line('any-namespace', 'any namespace (new ones too)', fresh);
    return;
  }
  if (fresh?.length) line('new-namespace', 'a new namespace (no labels)', fresh);
  for (const [n, of] of Map.groupBy(others, (o) => o.namespace)) {
    const first = ports.get(of[0]!.key);
    if (of.length > 1 && first?.length && of.every((o) => same(ports.get(o.key), first))) {
      line('namespace', `namespace ${n} (every pod)`, first);
      continue;
    }
    for (const o of of) {
      const p = ports.get(o.key);
      if (p?.length) line('workload', o.key, p);
    }
  }
}

function nodeLines(nodes: string[], mine: ExposureEdge[], line: Emit): void {
  const ports = new Map<string, PortSpan[]>();
  for (const e of mine)
    if (e.peer.kind === 'node') ports.set(e.peer.node, e.ports);
    else if (e.peer.kind === 'own-node')
      line('own-node', e.peer.node ? `its own node, its pods on ${e.peer.node}` : 'its own node', e.ports);
  const first = ports.get(nodes[0] ?? '');
  if (nodes.length > 1 && first?.length && nodes.every((n) => same(ports.get(n), first))) {
    line('every-node', 'every other node', first);
    return;
  }
  for (const n of nodes) {
    const p = ports.get(n);
    if (p?.length) line('node', `node ${n}`, p);
  }
}

function outsideLines(mine: ExposureEdge[], line: Emit): void {
  const regions = mine.filter(
    (e): e is ExposureEdge & { peer: Extract<ExposurePeer, { kind: 'outside' }> } =>
      e.peer.kind === 'outside',
  );
  if (!regions.length) return;
  // every region allowed alike (regions cover both families whole): anywhere outside the cluster
  const groups = Map.groupBy(regions, (r) => JSON.stringify(r.ports));
  const covered = regions.reduce((n, r) => n + (r.peer.to - r.peer.from + 1n), 0n);
  if (groups.size === 1 && covered === (1n << 32n) + (1n << 128n)) {
    line('anywhere-outside', 'anywhere outside the cluster', regions[0]!.ports);
    return;
  }
  for (const rs of groups.values()) {
    const prefixes: string[] = [];
    // adjacent regions of one family merge before they are written as prefixes
    let run: { family: 4 | 6; from: bigint; to: bigint } | undefined;
    for (const r of rs) {
      if (run && run.family === r.peer.family && run.to + 1n === r.peer.from) run.to = r.peer.to;
      else {
        if (run) prefixes.push(...rangeToPrefixes(run.family, run.from, run.to));
        run = { family: r.peer.family, from: r.peer.from, to: r.peer.to };
      }
    }
    if (run) prefixes.push(...rangeToPrefixes(run.family, run.from, run.to));
    line('outside', `outside: ${prefixes.join(' ')}`, rs[0]!.ports);
  }
}

const HEAD = ['WORKLOAD', 'DIRECTION', 'PEER', 'PORTS'];
const cells = (l: ExposureLine) => [l.workload, l.direction === 'ingress' ? 'from' : 'to', l.peer, l.ports];
const mdCell = (s: string) => s.replace(/\|/g, '\\|');
const csvCell = (s: string) => (/[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);

function render(lines: ExposureLine[], format: (typeof FORMATS)[number]): string {
  if (format === 'json') return JSON.stringify(lines, null, 2);
  const rows = lines.map(cells);
  if (format === 'md')
    return [
      `| ${HEAD.join(' | ')} |`,
      `|${HEAD.map(() => '---').join('|')}|`,
      ...rows.map((r) => `| ${r.map(mdCell).join(' | ')} |`),
    ].join('\n');
  if (format === 'csv') return [HEAD, ...rows].map((r) => r.map(csvCell).join(',')).join('\n');
  return lines.length ? table([HEAD, ...rows]) : 'no exposure: every workload is isolated both ways';
}

export interface ExposureChange extends ExposureLine {
  /** + the change opens these ports to the peers, - it closes them */
  change: '+' | '-';
}

/** Ports of `a` that `b` does not hold, per protocol. */
export function spansMinus(a: PortSpan[], b: PortSpan[]): PortSpan[] {
  const out: PortSpan[] = [];
  for (const x of a) {
    let pieces = [{ from: x.from, to: x.to }];
    for (const y of b) {
      if (y.proto !== x.proto) continue;
      pieces = pieces.flatMap((p) =>
        y.to < p.from || y.from > p.to
          ? [p]
          : [
              ...(p.from < y.from ? [{ from: p.from, to: y.from - 1 }] : []),
              ...(p.to > y.to ? [{ from: y.to + 1, to: p.to }] : []),
            ],
      );
    }
    out.push(...pieces.map((p) => ({ proto: x.proto, ...p })));
  }
  return out;
}

const atomKey = (p: ExposurePeer): string =>
  p.kind === 'workload' ? `w:${p.workload}` : p.kind === 'node' ? `n:${p.node}` : p.kind;

type Outside = Extract<ExposurePeer, { kind: 'outside' }> & { ports: PortSpan[] };
const byBig = (x: bigint, y: bigint) => (x < y ? -1 : x > y ? 1 : 0);

/**
 * What changes from `before` to `after`, compared peer by peer (each workload, node, and address
 * range cut where either side cuts it), then grouped as the report groups its lines.
 */
export function diffExposure(before: Exposure, after: Exposure): ExposureChange[] {
  const workloads = [
    ...after.workloads,
    ...before.workloads.filter((w) => !after.workloads.some((x) => x.key === w.key)),
  ];
  const nodes = [...new Set([...after.nodes, ...before.nodes])].sort();
  const opened: ExposureEdge[] = [];
  const closed: ExposureEdge[] = [];
  const delta = (
    w: string,
    d: ExposureEdge['direction'],
    peer: ExposurePeer,
    b: PortSpan[],
    a: PortSpan[],
  ) => {
    const plus = spansMinus(a, b);
    const minus = spansMinus(b, a);
    if (plus.length) opened.push({ workload: w, direction: d, peer, ports: plus });
    if (minus.length) closed.push({ workload: w, direction: d, peer, ports: minus });
  };
  const index = (x: Exposure) => Map.groupBy(x.edges, (e) => `${e.workload}|${e.direction}`);
  const [bi, ai] = [index(before), index(after)];
  for (const w of workloads)
    for (const d of ['ingress', 'egress'] as const) {
      const [b, a] = [bi.get(`${w.key}|${d}`) ?? [], ai.get(`${w.key}|${d}`) ?? []];
      const atoms = new Map<string, { peer: ExposurePeer; b: PortSpan[]; a: PortSpan[] }>();
      for (const [side, es] of [
        ['b', b],
        ['a', a],
      ] as const)
        for (const e of es) {
          if (e.peer.kind === 'outside') continue;
          const k = atomKey(e.peer);
          const at = atoms.get(k) ?? { peer: e.peer, b: [], a: [] };
          at[side] = e.ports;
          atoms.set(k, at);
        }
      for (const x of atoms.values()) delta(w.key, d, x.peer, x.b, x.a);
      // outside: both sides' ranges, cut at each other's ends
      for (const family of [4, 6] as const) {
        const ranges = (es: ExposureEdge[]): Outside[] =>
          es.flatMap((e) =>
            e.peer.kind === 'outside' && e.peer.family === family ? [{ ...e.peer, ports: e.ports }] : [],
          );
        const [rb, ra] = [ranges(b), ranges(a)];
        const cuts = [...new Set([...rb, ...ra].flatMap((r) => [r.from, r.to + 1n]))].sort(byBig);
        const portsAt = (rs: Outside[], at: bigint) =>
          rs.find((r) => r.from <= at && at <= r.to)?.ports ?? [];
        for (let i = 0; i + 1 < cuts.length; i++) {
          const [from, next] = [cuts[i]!, cuts[i + 1]!];
          const peer: ExposurePeer = { kind: 'outside', family, from, to: next - 1n };
          delta(w.key, d, peer, portsAt(rb, from), portsAt(ra, from));
        }
      }
    }
  const group = (edges: ExposureEdge[], change: '+' | '-') =>
    groupLines({ workloads, nodes, edges }).map((l) => ({ change, ...l }));
  return [...group(opened, '+'), ...group(closed, '-')];
}

function sentence(c: ExposureChange): string {
  const opens = c.change === '+';
  const what =
    c.direction === 'ingress'
      ? `${opens ? 'exposes' : 'closes'} ${c.workload} to ${c.peer}`
      : `${opens ? 'lets' : 'stops'} ${c.workload} ${opens ? 'reach' : 'reaching'} ${c.peer}`;
  return `this change ${what} on ${c.ports}`;
}

function renderDiff(changes: ExposureChange[], format: (typeof FORMATS)[number]): string {
  if (format === 'json') return JSON.stringify(changes, null, 2);
  const head = ['CHANGE', ...HEAD];
  const rows = changes.map((c) => [c.change, ...cells(c)]);
  if (format === 'csv') return [head, ...rows].map((r) => r.map(csvCell).join(',')).join('\n');
  if (format === 'md')
    return [
      ...changes.map((c) => `- ${sentence(c)}`),
      '',
      `| ${head.join(' | ')} |`,
      `|${head.map(() => '---').join('|')}|`,
      ...rows.map((r) => `| ${r.map(mdCell).join(' | ')} |`),
    ].join('\n');
  if (!changes.length) return 'no change in exposure';
  return [...changes.map(sentence), '', table([head, ...rows])].join('\n');
}
