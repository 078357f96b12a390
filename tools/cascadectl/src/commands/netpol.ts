// cascadectl netpol simulate | explain | maps: network policy from YAML, through the same engine,
// lowering and datapath lookup that the node agent uses.
import { readFileSync } from 'node:fs';
import {
  type Decision,
  mapConnection,
  type NetpolEngine,
  oracleConnection,
  PROTO,
  PROTO_NAMES,
  type ServiceCatalog,
} from '@cascade/netpolicy';
import { parse as parseYaml } from 'yaml';
import { type Command, err, oneOf, out, table, UsageError } from '../cli.ts';
import { hasInput, type LoadResult, loadManifests } from '../load.ts';
import { buildNetpolWorld } from '../netpol-world.ts';
import { labelTest, namespaceOf, namespaceOptions, selectorOption } from '../selector.ts';
import { serviceDestination } from './netpol-services.ts';

/** Like loadGatewayWorld: `preloaded` manifests' read and parse problems are the caller's to report. */
export function loadNetpol(
  files: string[],
  preloaded?: LoadResult,
): { engine: NetpolEngine; services: ServiceCatalog; problems: number } {
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
    problems: loaded.problems.length + world.problems.filter((p) => !p.includes('warning:')).length,
  };
}

export function protoNumber(p: unknown): number {
  const s = String(p ?? 'TCP').toUpperCase();
  if (s in PROTO) return PROTO[s as keyof typeof PROTO];
  if (/^\d+$/.test(s)) return Number(s);
  if (s === 'ICMP') return 1;
  throw new UsageError(`unknown protocol "${String(p)}" (TCP, UDP, SCTP, ICMP or a number)`);
}

export function resolveAddr(engine: NetpolEngine, x: string): string {
  if (/^[0-9.:a-fA-F]+$/.test(x) && (x.includes('.') || x.includes(':'))) return x;
  const pod = engine.pods.get(x);
  if (!pod) throw new UsageError(`"${x}" is neither an address nor a known pod (namespace/name)`);
  return pod.ips[0]!;
}

export const nameOf = (engine: NetpolEngine, ip: string) => {
  for (const p of engine.pods.values()) if (p.ips.includes(ip)) return `${p.namespace}/${p.name}`;
  return ip;
};

export function describeDecision(d: Decision | undefined) {
  if (!d) return undefined;
  return {
    verdict: d.verdict,
    decidedBy: {
      tier: d.tier,
      ...(d.policy ? { policy: d.policy } : {}),
      ...(d.rule ? { rule: d.rule } : {}),
      ...(d.priority !== undefined ? { priority: d.priority } : {}),
      ...(d.passedBy ? { passedBy: d.passedBy } : {}),
    },
  };
}

export interface ProbeResult {
  from: string;
  to: string;
  protocol: string;
  port: number;
  verdict: 'allow' | 'deny';
  /** A Service destination: this result is for one of its backends (`to`, on its own `port`). */
  service?: { name: string; frontend: string; backend?: string; note?: string };
  egress?: ReturnType<typeof describeDecision>;
  ingress?: ReturnType<typeof describeDecision>;
}

export function simulateProbe(
  engine: NetpolEngine,
  from: string,
  to: string,
  proto: number,
  port: number,
): ProbeResult {
  const src = resolveAddr(engine, from);
  const dst = resolveAddr(engine, to);
  const viaMaps = mapConnection(engine, src, dst, proto, port);
  const direct = oracleConnection(engine, src, dst, proto, port);
  if (viaMaps.verdict !== direct.verdict)
    throw new Error(
      `lowering disagrees with the policy for ${from} -> ${to} ${proto}/${port}: please report`,
    );
  const r: ProbeResult = {
    from,
    to,
    protocol: PROTO_NAMES[proto] ?? String(proto),
    port,
    verdict: viaMaps.verdict,
  };
  if (direct.egress) r.egress = describeDecision(direct.egress);
  if (direct.ingress) r.ingress = describeDecision(direct.ingress);
  return r;
}

export interface Probe {
  from: string;
  to: string;
  proto: number;
  port: number | string;
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
): ProbeResult[] {
  const src = resolveAddr(engine, from);
  const hop = serviceDestination(engine, services, src, to, proto, String(port));
  if (!hop) {
    const n = typeof port === 'number' ? port : portOf(engine, port, resolveAddr(engine, to), proto);
    return [simulateProbe(engine, from, to, proto, n)];
  }
  if (!hop.backends.length) {
    const [addr, p] = [
      hop.frontend.slice(0, hop.frontend.lastIndexOf(':')),
      Number(hop.frontend.split(':').pop()),
    ];
    const r = simulateProbe(engine, from, addr, proto, p);
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
  return hop.backends.map((b) => ({
    ...simulateProbe(engine, from, b.addr, proto, b.port),
    to: b.name,
    service: { name: hop.service, frontend: hop.frontend, backend: `${b.addr}:${b.port}` },
  }));
}

/** A plain scalar the fast path reads as YAML would: a name, an address, a port number. */
const PLAIN = /^[A-Za-z0-9][A-Za-z0-9_./:-]*$/;
const YAML_SPECIAL =
  /^(?:true|false|yes|no|on|off|null|~|\.inf|\.nan|0x.*|0o.*|[-+]?\d*\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+)$/i;
const PROBE_KEYS = new Set(['from', 'to', 'protocol', 'port']);

/**
 * One `{from: a, to: b, protocol: TCP, port: 80}` line read without the YAML library when every
 * value is a plain name or number (what generators write); undefined for anything else (quotes,
 * nesting, other keys, scalars YAML would read as booleans or floats), which the YAML library reads.
 */
function fastProbe(flow: string): Record<string, unknown> | undefined {
  const o: Record<string, unknown> = {};
  for (const part of flow.slice(1, -1).split(',')) {
    const i = part.indexOf(':');
    if (i < 0) return undefined;
    const k = part.slice(0, i).trim();
    const v = part.slice(i + 1).trim();
    if (!PROBE_KEYS.has(k) || k in o || !PLAIN.test(v) || YAML_SPECIAL.test(v)) return undefined;
    // a colon inside a value is YAML's business (`a:b` is a scalar, `a: b` a pair)
    if (v.includes(': ') || v.endsWith(':')) return undefined;
    o[k] = /^\d+$/.test(v) && v.length < 16 ? Number(v) : v;
  }
  return o;
}

/** The flow-style items of a one-item-per-line probes list, lazily; undefined when it is other YAML. */
function flowItems(text: string): Iterable<unknown> | undefined {
  // check the form first (no allocation per line): then items are parsed as they are consumed
  for (let at = 0; at < text.length; ) {
    let end = text.indexOf('\n', at);
    if (end < 0) end = text.length;
    let a = at;
    let b = end;
    while (a < b && (text[a] === ' ' || text[a] === '\t' || text[a] === '\r')) a++;
    while (b > a && (text[b - 1] === ' ' || text[b - 1] === '\t' || text[b - 1] === '\r')) b--;
    if (a < b && text[a] !== '#' && !(text.startsWith('- {', a) && text[b - 1] === '}')) return undefined;
    at = end + 1;
  }
  return {
    *[Symbol.iterator]() {
      for (let at = 0; at < text.length; ) {
        let end = text.indexOf('\n', at);
        if (end < 0) end = text.length;
        const l = text.slice(at, end).trim();
        at = end + 1;
        if (l === '' || l.startsWith('#')) continue;
        const flow = l.slice(2);
        yield fastProbe(flow) ?? parseYaml(flow);
      }
    },
  };
}

function toProbe(p: unknown, i: number): Probe {
  const o = p as Record<string, unknown>;
  if (typeof o?.from !== 'string' || typeof o.to !== 'string')
    throw new UsageError(`--probes item ${i + 1}: from and to are required`);
  if (typeof o.port === 'string' && !/^\d+$/.test(o.port))
    return { from: o.from, to: o.to, proto: protoNumber(o.protocol), port: o.port };
  const port = Number(o.port ?? 0);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new UsageError(`--probes item ${i + 1}: port must be 0..65535 or a port name`);
  return { from: o.from, to: o.to, proto: protoNumber(o.protocol), port };
}

/** The items of a probes file: streamed when it is one flow-style item per line, else parsed whole. */
function probeItems(path: string): Iterable<unknown> {
  let text: string;
  let items: Iterable<unknown> | undefined;
  try {
    text = readFileSync(path, 'utf8');
    items = flowItems(text);
    if (!items) {
      const list = parseYaml(text) as unknown;
      if (!Array.isArray(list))
        throw new UsageError(`--probes ${path}: must be a YAML list of {from, to, protocol, port}`);
      items = list;
    }
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(`--probes ${path}: ${(e as Error).message.split('\n')[0]}`);
  }
  return {
    *[Symbol.iterator]() {
      try {
        yield* items;
      } catch (e) {
        if (e instanceof UsageError) throw e;
        throw new UsageError(`--probes ${path}: ${(e as Error).message.split('\n')[0]}`);
      }
    },
  };
}

/**
 * Calls `f` for each probe, streamed: every item is checked first (so nothing is written before a
 * bad item is reported), then read again as it is simulated. Memory is the file's text, not a list
 * of probes; plain `- {from: a, to: b, protocol: TCP, port: 80}` lines skip the YAML library.
 */
export function forEachProbe(path: string, f: (p: Probe) => void): void {
  const items = probeItems(path);
  let i = 0;
  for (const p of items) toProbe(p, i++);
  i = 0;
  for (const p of items) f(toProbe(p, i++));
}

export function readProbes(path: string): Probe[] {
  const out: Probe[] = [];
  forEachProbe(path, (p) => out.push(p));
  return out;
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
  const dst = [...engine.pods.values()].find((p) => p.ips.includes(dstIp));
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
    "cascadectl netpol simulate FILES... [--probes PROBES.yaml] [-n NS] [-l SELECTOR] [-o table|json]\n  (a probe's `to` may be a Service: svc:NS/NAME or its ClusterIP, answered per backend;\n   -n, -l: the truth table's rows and columns are the pods of that namespace, with matching labels)",
  options: {
    probes: { type: 'string' },
    output: { type: 'string', short: 'o' },
    ...namespaceOptions,
    ...selectorOption,
  },
  run(values, files) {
    const format = oneOf('output', values.output, ['table', 'json'], 'table');
    if (values.probes !== undefined && (values.selector !== undefined || values.namespace !== undefined))
      throw new UsageError(
        "-l and -n select the truth table's pods; with --probes, list the probes you want",
      );
    const { engine, services, problems } = loadNetpol(files);
    if (values.probes !== undefined) {
      // Each probe's result is turned into its output at once and dropped: memory per probe is its
      // output line (JSON items are written one by one), not its full decision.
      const probes = { forEach: (f: (p: Probe) => void) => forEachProbe(String(values.probes), f) };
      if (format === 'json') {
        // '[' goes out with the first result: every item is checked before (forEachProbe)
        let chunk: string[] = ['['];
        let n = 0;
        probes.forEach((p) => {
          for (const r of simulateProbes(engine, services, p.from, p.to, p.proto, p.port))
            chunk.push(`${n++ ? ',' : ''}\n  ${JSON.stringify(r)}`);
          if (chunk.length >= 1000) {
            process.stdout.write(chunk.join(''));
            chunk = [];
          }
        });
        process.stdout.write(`${chunk.join('')}\n]\n`);
      } else {
        const by = (d: ProbeResult['egress']) =>
          d
            ? `${d.verdict} (${d.decidedBy.tier}${d.decidedBy.policy ? ` ${d.decidedBy.policy}` : ''}${d.decidedBy.rule ? ` ${d.decidedBy.rule}` : ''})`
            : '-';
        const rows: string[][] = [];
        probes.forEach((p) => {
          for (const r of simulateProbes(engine, services, p.from, p.to, p.proto, p.port))
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
