// cascadectl netpol simulate | explain | maps: network policy from YAML, through the same engine the
// node agent uses; a probe's verdict and deciding rules come from the direct evaluation, checked
// against the lowered maps as the datapath reaches them (every judgement of a short run, a sample of
// a long one: simulateProbe).
import {
  mapConnection,
  type NetpolEngine,
  oracleConnection,
  PROTO,
  PROTO_NAMES,
  type ServiceCatalog,
  type StagedPolicy,
} from '@cascade/netpolicy';
import { type Command, err, oneOf, out, table, UsageError } from '../cli.ts';
import { hasInput, type LoadResult, loadManifests } from '../load.ts';
import { buildNetpolWorld, type ReportedAddresses } from '../netpol-world.ts';
import { labelTest, namespaceOf, namespaceOptions, selectorOption } from '../selector.ts';
import { masqueradedSource, serviceDestination } from './netpol-services.ts';
import { simulateStaged } from './netpol-simulate-staged.ts';
import { ProbeJson } from './probe-json.ts';
import { describeDecision, ProbeMemo, type ProbeResult, type Remembered } from './probe-memo.ts';
import { forEachProbe, readProbeColumns } from './probes-file.ts';

export { describeDecision, ProbeMemo, type ProbeResult } from './probe-memo.ts';

export { forEachProbe, type Probe, protoNumber, readProbes } from './probes-file.ts';

/** Like loadGatewayWorld: `preloaded` manifests' read and parse problems are the caller's to report. */
export function loadNetpol(
  files: string[],
  preloaded?: LoadResult,
): {
  engine: NetpolEngine;
  services: ServiceCatalog;
  problems: number;
  reported: ReportedAddresses;
  /** The staged objects read (never applied here), each with where it was read. */
  staged: { policy: StagedPolicy; at: string }[];
} {
  if (!hasInput(files))
    throw new UsageError('at least one file or folder (or --kubeconfig/--context) is required');
  const loaded = preloaded ?? loadManifests(files);
  const world = buildNetpolWorld(loaded.manifests);
  const problems = [...(preloaded ? [] : loaded.problems), ...world.problems];
  for (const p of problems)
    err(p.includes('warning:') ? `warning: ${p.replace('warning: ', '')}` : `error: ${p}`);
  return {
    engine: world.engine,
    services: world.services,
    reported: world.reported,
    staged: world.staged,
    problems: loaded.problems.length + world.problems.filter((p) => !p.includes('warning:')).length,
  };
}

export function resolveAddr(engine: NetpolEngine, x: string): string {
  // a pod's key has a slash, an address none: the common case first
  const pod = engine.pods.get(x);
  if (pod) return pod.ips[0]!;
  if (/^[0-9.:a-fA-F]+$/.test(x) && (x.includes('.') || x.includes(':'))) return x;
  throw new UsageError(`"${x}" is neither an address nor a known pod (namespace/name)`);
}

export const nameOf = (engine: NetpolEngine, ip: string) => {
  const p = engine.podAt(ip);
  return p ? `${p.namespace}/${p.name}` : ip;
};

/** Judgements of one run that are all checked against the lowered maps; then one in EVERY. */
export const LOWERING_CHECK_ALL = 1024;
export const LOWERING_CHECK_EVERY = 32;

export function simulateProbe(
  engine: NetpolEngine,
  from: string,
  to: string,
  proto: number,
  port: number,
  memo?: ProbeMemo,
): ProbeResult {
  const src = resolveAddr(engine, from);
  const dst = resolveAddr(engine, to);
  const key = memo?.keyOf(engine, src, dst, proto, port);
  if (key !== undefined) {
    const known = memo!.get(key) ?? judgeKeyed(engine, memo!, key, src, dst, proto, port, from, to);
    const result = { from, to, ...known.decided };
    memo!.last = { result, tail: known.tail };
    return result;
  }
  const direct = oracleConnection(engine, src, dst, proto, port);
  const egress = describeDecision(direct.egress);
  const ingress = describeDecision(direct.ingress);
  const verdict = egress?.verdict === 'deny' || ingress?.verdict === 'deny' ? 'deny' : 'allow';
  checkLowering(engine, memo, src, dst, proto, port, verdict, from, to);
  const r: ProbeResult = { from, to, protocol: PROTO_NAMES[proto] ?? String(proto), port, verdict };
  if (egress) r.egress = egress;
  if (ingress) r.ingress = ingress;
  return r;
}

/**
 * The pair memo.keyOf (or keyOfAddrs) just gave `key` for, judged now: each direction from the memo's
 * own when another pair met it, else by the direct evaluation; checked against the lowered maps;
 * remembered. `from` and `to` name the pair in an error.
 */
export function judgeKeyed(
  engine: NetpolEngine,
  memo: ProbeMemo,
  key: number,
  src: string,
  dst: string,
  proto: number,
  port: number,
  from: string,
  to: string,
): Remembered {
  const judged = memo.judgePair(engine, src, dst, proto, port);
  const egress = judged.egress.described;
  const ingress = judged.ingress.described;
  const verdict = egress.verdict === 'deny' || ingress.verdict === 'deny' ? 'deny' : 'allow';
  checkLowering(engine, memo, src, dst, proto, port, verdict, from, to);
  const protocol = PROTO_NAMES[proto] ?? String(proto);
  return memo.remember(key, { protocol, port, verdict, egress, ingress }, judged);
}

/**
 * The verdict and the rules that decide it come from the direct evaluation; the same judgement
 * through the lowered maps (as the datapath reaches it) is compared as a self-check on a single
 * probe, on a run's first LOWERING_CHECK_ALL judgements, then on one in LOWERING_CHECK_EVERY (the
 * engine's differential tests compare the two legs on every input they generate).
 */
function checkLowering(
  engine: NetpolEngine,
  memo: ProbeMemo | undefined,
  src: string,
  dst: string,
  proto: number,
  port: number,
  verdict: 'allow' | 'deny',
  from: string,
  to: string,
): void {
  const n = memo ? memo.judged++ : 0;
  if (n < LOWERING_CHECK_ALL || n % LOWERING_CHECK_EVERY === 0) {
    const viaMaps = mapConnection(engine, src, dst, proto, port);
    if (viaMaps.verdict !== verdict)
      throw new Error(
        `lowering disagrees with the policy for ${from} -> ${to} ${proto}/${port}: please report`,
      );
  }
}

/**
 * One probe's results: one, or for a Service destination one per backend the flow may go to (none
 * when it has no backend to judge: then one result saying why, judged as the address dialled).
 */
export function simulateProbes(
  engine: NetpolEngine,
  services: ServiceCatalog,
  from: string,
  to: string,
  proto: number,
  port: number | string,
  memo?: ProbeMemo,
  reported?: ReportedAddresses,
): ProbeResult[] {
  const src = resolveAddr(engine, from);
  const hop = serviceDestination(engine, services, src, to, proto, String(port));
  if (!hop) {
    const n = typeof port === 'number' ? port : portOf(engine, port, resolveAddr(engine, to), proto);
    return [simulateProbe(engine, from, to, proto, n, memo)];
  }
  if (!hop.backends.length) {
    const [addr, p] = [
      hop.frontend.slice(0, hop.frontend.lastIndexOf(':')),
      Number(hop.frontend.split(':').pop()),
    ];
    const r = simulateProbe(engine, from, addr, proto, p, memo);
    const self = hop.note?.startsWith('the source');
    return [
      {
        ...r,
        to,
        ...(self ? { verdict: 'allow' as const, egress: undefined, ingress: undefined } : {}),
        service: { name: hop.service, frontend: hop.frontend, note: hop.note! },
      },
    ];
  }
  if (hop.forwardedBy) {
    // two judgements: the source's egress to the node it dials, then the backend's ingress from the
    // address kube-proxy's masquerade gives the flow; allowed when both allow
    const out = simulateProbe(engine, from, hop.forwardedBy.addr, proto, hop.forwardedBy.port, memo);
    return hop.backends.map((b) => {
      const source = masqueradedSource(hop, b.node, reported);
      const inb = simulateProbe(engine, source, b.addr, proto, b.port, memo);
      return {
        ...out,
        to: b.name,
        port: b.port,
        verdict: out.verdict === 'allow' && inb.verdict === 'allow' ? 'allow' : 'deny',
        ingress: inb.ingress,
        service: { name: hop.service, frontend: hop.frontend, backend: `${b.addr}:${b.port}`, source },
      } satisfies ProbeResult;
    });
  }
  return hop.backends.map((b) => ({
    ...simulateProbe(engine, from, b.addr, proto, b.port, memo),
    to: b.name,
    service: { name: hop.service, frontend: hop.frontend, backend: `${b.addr}:${b.port}` },
  }));
}

/**
 * `--port`: a number 0..65535, or a name resolved against the destination pod's named container
 * ports (as a NetworkPolicy's named port is); anything else is a usage error naming what exists.
 */
export function portOf(engine: NetpolEngine, text: string, dstIp: string, proto: number): number {
  if (/^\d+$/.test(text)) {
    const n = Number(text);
    if (n > 65535) throw new UsageError(`--port ${text}: out of range (0..65535)`);
    return n;
  }
  const dst = engine.podAt(dstIp);
  const protoName = PROTO_NAMES[proto] ?? String(proto);
  const named = dst?.ports.filter((p) => p.name === text && p.protocol === protoName) ?? [];
  if (named.length === 1) return named[0]!.port;
  const names = [
    ...new Set(dst?.ports.filter((p) => p.name).map((p) => `${p.name}=${p.port}/${p.protocol}`) ?? []),
  ];
  throw new UsageError(
    `--port ${text}: not a number, and ${dst ? `${dst.namespace}/${dst.name} has no ${protoName} port of that name${names.length ? ` (it has ${names.join(', ')})` : ''}` : "the destination is not a pod (named ports are a pod's)"}`,
  );
}

/** Ports named in policies or exposed by pods, by protocol. */
export function portsInUse(engine: NetpolEngine): [number, number][] {
  const set = new Set<string>();
  for (const p of engine.pods.values()) for (const cp of p.ports) set.add(`${PROTO[cp.protocol]}/${cp.port}`);
  for (const r of [...engine.rules.admin, ...engine.rules.np, ...engine.rules.baseline]) {
    for (const m of r.ports ?? []) if (m.kind === 'range') set.add(`${m.proto}/${m.range.start}`);
  }
  if (set.size === 0) set.add('6/80');
  return [...set]
    .map((s) => s.split('/').map(Number) as [number, number])
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
}

export function truthTable(
  engine: NetpolEngine,
  shown: (pod: { namespace: string; labels: Readonly<Record<string, string>> }) => boolean = () => true,
): { port: string; rows: string[][] }[] {
  const pods = [...engine.pods.values()]
    .filter((p) => shown(p))
    .sort((a, b) => (`${a.namespace}/${a.name}` < `${b.namespace}/${b.name}` ? -1 : 1));
  const names = pods.map((p) => `${p.namespace}/${p.name}`);
  return portsInUse(engine).map(([proto, port]) => ({
    port: `${PROTO_NAMES[proto] ?? proto}/${port}`,
    rows: [
      ['from \\ to', ...names],
      ...pods.map((f, i) => [
        names[i]!,
        ...pods.map((t) =>
          mapConnection(engine, f.ips[0]!, t.ips[0]!, proto, port).verdict === 'allow' ? '.' : 'X',
        ),
      ]),
    ],
  }));
}

export const simulateCommand: Command = {
  name: 'netpol simulate',
  summary: 'verdict per probe, or the truth table of every pod pair on every port in use',
  usage:
    "cascadectl netpol simulate FILES... [--probes PROBES] [-n NS] [-l SELECTOR] [--staged] [-o table|json]\n  (--staged: the staged set (every Staged* policy's action applied) beside the enforced one:\n   the truth table marks + would allow, - would deny, and lists each change with its deciding rule)\n  (a probe's `to` may be a Service: svc:NS/NAME or its ClusterIP, answered per backend;\n   -n, -l: the truth table's rows and columns are the pods of that namespace, with matching labels)\n  PROBES is read as a stream, item by item, when it is a YAML list one item per line\n  (- {from: a, to: b, protocol: TCP, port: 80}) or in block style, a JSON array of objects, or JSON\n  lines; any other YAML is read whole, and refused over 1 MiB",
  options: {
    probes: { type: 'string' },
    output: { type: 'string', short: 'o' },
    staged: { type: 'boolean' },
    ...namespaceOptions,
    ...selectorOption,
  },
  run(values, files) {
    const format = oneOf('output', values.output, ['table', 'json'], 'table');
    if (values.probes !== undefined && (values.selector !== undefined || values.namespace !== undefined))
      throw new UsageError(
        "-l and -n select the truth table's pods; with --probes, list the probes you want",
      );
    if (values.staged) return simulateStaged(values, files, format as 'table' | 'json');
    const { engine, services, problems, reported } = loadNetpol(files);
    if (values.probes !== undefined) {
      // Each probe's result is turned into its output at once and dropped: memory per probe is its
      // output line (JSON items are written one by one), not its full decision.
      const memo = new ProbeMemo();
      if (format === 'json') {
        // every item is read and checked before '[' goes out (readProbeColumns)
        const probes = readProbeColumns(String(values.probes));
        const json = new ProbeJson(engine, services, reported, memo, probes, (b) => process.stdout.write(b));
        for (let i = 0; i < probes.length; i++) json.write(i);
        json.end();
      } else {
        const by = (d: ProbeResult['egress']) =>
          d
            ? `${d.verdict.toUpperCase()} (${d.decidedBy.tier}${d.decidedBy.policy ? ` ${d.decidedBy.policy}` : ''}${d.decidedBy.rule ? ` ${d.decidedBy.rule}` : ''})`
            : '-';
        const rows: string[][] = [];
        forEachProbe(String(values.probes), (p) => {
          for (const r of simulateProbes(engine, services, p.from, p.to, p.proto, p.port, memo, reported))
            rows.push([
              r.from,
              r.service ? `${r.to} (svc ${r.service.name} ${r.service.frontend})` : r.to,
              `${r.protocol}/${r.port}`,
              r.verdict.toUpperCase(),
              r.service?.note ?? by(r.egress),
              r.service?.note ? '-' : by(r.ingress),
            ]);
        });
        out(table([['FROM', 'TO', 'PROTO/PORT', 'VERDICT', 'EGRESS', 'INGRESS'], ...rows]));
      }
      return problems > 0 ? 2 : 0;
    }
    const labelled = labelTest(values.selector);
    const ns = namespaceOf(values);
    const tables = truthTable(engine, (p) => (ns === undefined || p.namespace === ns) && labelled(p.labels));
    if (format === 'json') out(JSON.stringify(tables, null, 2));
    else
      out(
        tables
          .map((t) => `${t.port}   (. allow, X deny; rows: from, columns: to)\n${table(t.rows, '  ')}`)
          .join('\n\n'),
      );
    return problems > 0 ? 2 : 0;
  },
};
