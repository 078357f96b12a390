// cascadectl netpol simulate | explain | maps: network policy from YAML, through the same engine,
// lowering and datapath lookup that the node agent uses.
import { readFileSync } from 'node:fs';
import {
  addr16,
  decodeEndpointValue,
  decodePolicyKey,
  decodePolicyValue,
  EP_FLAGS,
  encodeState,
  encodeTableEntry,
  type PolicyKey,
  type PolicyValue,
  SIZES,
} from '@cascade/bpf-datapath';
import {
  type Decision,
  type Direction,
  datapathState,
  describePrecedence,
  evaluateDirection,
  formatPortPrefix,
  formatPrefix,
  ID,
  type MapStateEntry,
  mapConnection,
  type NetpolEngine,
  oracleConnection,
  type Pod,
  PROTO,
  PROTO_NAMES,
  remoteOf,
  ruleSetOf,
} from '@cascade/netpolicy';
import { parse as parseYaml } from 'yaml';
import { type Command, err, oneOf, out, table, UsageError } from '../cli.ts';
import { hasInput, type LoadResult, loadManifests } from '../load.ts';
import { buildNetpolWorld } from '../netpol-world.ts';

/** Like loadGatewayWorld: `preloaded` manifests' read and parse problems are the caller's to report. */
export function loadNetpol(
  files: string[],
  preloaded?: LoadResult,
): { engine: NetpolEngine; problems: number } {
  if (!hasInput(files))
    throw new UsageError('at least one file or folder (or --kubeconfig/--context) is required');
  const loaded = preloaded ?? loadManifests(files);
  const world = buildNetpolWorld(loaded.manifests);
  const problems = [...(preloaded ? [] : loaded.problems), ...world.problems];
  for (const p of problems)
    err(p.includes('warning:') ? `warning: ${p.replace('warning: ', '')}` : `error: ${p}`);
  return {
    engine: world.engine,
    problems: loaded.problems.length + world.problems.filter((p) => !p.includes('warning:')).length,
  };
}

function protoNumber(p: unknown): number {
  const s = String(p ?? 'TCP').toUpperCase();
  if (s in PROTO) return PROTO[s as keyof typeof PROTO];
  if (/^\d+$/.test(s)) return Number(s);
  if (s === 'ICMP') return 1;
  throw new UsageError(`unknown protocol "${String(p)}" (TCP, UDP, SCTP, ICMP or a number)`);
}

function resolveAddr(engine: NetpolEngine, x: string): string {
  if (/^[0-9.:a-fA-F]+$/.test(x) && (x.includes('.') || x.includes(':'))) return x;
  const pod = engine.pods.get(x);
  if (!pod) throw new UsageError(`"${x}" is neither an address nor a known pod (namespace/name)`);
  return pod.ips[0]!;
}

const nameOf = (engine: NetpolEngine, ip: string) => {
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
  port: number;
}

/** A probes file: a YAML list of {from, to, protocol, port}. */
/**
 * A probes list written one flow-style item per line (`- {from: a, to: b, port: 80}`, what generators
 * write) is read line by line: no syntax tree of the whole list is built, so memory per probe is the
 * probe itself. Any other YAML is parsed whole.
 */
function parseProbeList(text: string): unknown {
  const lines = text.split('\n');
  const items: unknown[] = [];
  for (const raw of lines) {
    const l = raw.trim();
    if (l === '' || l.startsWith('#')) continue;
    if (!l.startsWith('- {') || !l.endsWith('}')) return parseYaml(text);
    items.push(parseYaml(l.slice(2)));
  }
  return items;
}

export function readProbes(path: string): Probe[] {
  let list: unknown;
  try {
    list = parseProbeList(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new UsageError(`--probes ${path}: ${(e as Error).message.split('\n')[0]}`);
  }
  if (!Array.isArray(list))
    throw new UsageError(`--probes ${path}: must be a YAML list of {from, to, protocol, port}`);
  return list.map((p, i) => {
    const o = p as Record<string, unknown>;
    if (typeof o?.from !== 'string' || typeof o.to !== 'string')
      throw new UsageError(`--probes item ${i + 1}: from and to are required`);
    const port = Number(o.port ?? 0);
    if (!Number.isInteger(port) || port < 0 || port > 65535)
      throw new UsageError(`--probes item ${i + 1}: port must be 0..65535`);
    return { from: o.from, to: o.to, proto: protoNumber(o.protocol), port };
  });
}

/**
 * `--port`: a number 0..65535, or a name resolved against the destination pod's named container
 * ports (as a NetworkPolicy's named port is); anything else is a usage error naming what exists.
 */
function portOf(engine: NetpolEngine, text: string, dstIp: string, proto: number): number {
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

export function truthTable(engine: NetpolEngine): { port: string; rows: string[][] }[] {
  const pods = [...engine.pods.values()].sort((a, b) =>
    `${a.namespace}/${a.name}` < `${b.namespace}/${b.name}` ? -1 : 1,
  );
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
  usage: 'cascadectl netpol simulate FILES... [--probes PROBES.yaml] [-o table|json]',
  options: { probes: { type: 'string' }, output: { type: 'string', short: 'o' } },
  run(values, files) {
    const format = oneOf('output', values.output, ['table', 'json'], 'table');
    const { engine, problems } = loadNetpol(files);
    if (values.probes !== undefined) {
      // Each probe's result is turned into its output at once and dropped: memory per probe is its
      // output line (JSON items are written one by one), not its full decision.
      const probes = readProbes(String(values.probes));
      if (format === 'json') {
        let chunk: string[] = [];
        process.stdout.write('[');
        probes.forEach((p, i) => {
          const r = simulateProbe(engine, p.from, p.to, p.proto, p.port);
          chunk.push(`${i ? ',' : ''}\n  ${JSON.stringify(r)}`);
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
        const rows = probes.map((p) => {
          const r = simulateProbe(engine, p.from, p.to, p.proto, p.port);
          return [
            r.from,
            r.to,
            `${r.protocol}/${r.port}`,
            r.verdict.toUpperCase(),
            by(r.egress),
            by(r.ingress),
          ];
        });
        out(table([['FROM', 'TO', 'PROTO/PORT', 'VERDICT', 'EGRESS', 'INGRESS'], ...rows]));
      }
      return problems > 0 ? 2 : 0;
    }
    const tables = truthTable(engine);
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

/** A policy map entry decoded from its bytes. */
function describeBpfEntry(
  engine: NetpolEngine,
  k: PolicyKey,
  v: PolicyValue,
  rules: Map<number, string>,
): string {
  const port = k.proto === 0 ? 'any proto' : `proto ${k.proto} port ${k.port}/${k.plen}`;
  return `cascade_policy[table ${k.table}, identity ${k.identity} (${identityName(engine, k.identity)}), ${port}] = ${v.verdict}, precedence 0x${v.precedence.toString(16)}, match ${v.matchLen}, rule #${v.rule} (${rules.get(v.rule) ?? '?'})`;
}

function describeEntry(engine: NetpolEngine, e: MapStateEntry): string {
  const remote = identityName(engine, e.identity);
  const ports =
    e.proto === 0
      ? 'any'
      : `${PROTO_NAMES[e.proto] ?? e.proto}/${formatPortPrefix({ port: e.port, len: e.plen })}`;
  return `${remote} ${ports} -> ${e.verdict} [${describePrecedence(e.precedence)}, precedence 0x${e.precedence.toString(16)}] from ${e.rule}`;
}

export function identityName(engine: NetpolEngine, id: number): string {
  if (id === ID.WILDCARD) return 'any';
  if (id === ID.ALL_PODS) return 'all-pods';
  if (id === ID.HOST) return 'host';
  if (id === ID.WORLD || id === 4) return 'world';
  const info = engine.identities.get(id);
  if (!info) return `#${id}`;
  if (info.kind === 'pod')
    return `${info.namespace}/{${Object.entries(info.labels ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(',')}}#${id}`;
  if (info.kind === 'node')
    return `node{${Object.entries(info.labels ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(',')}}#${id}`;
  const m = /^cidr:([46]):([0-9a-f]+)\/(\d+)$/.exec(info.key);
  const text = m
    ? formatPrefix({ family: Number(m[1]) as 4 | 6, bits: BigInt(`0x${m[2]}`), len: Number(m[3]) })
    : info.key;
  return `cidr:${text}#${id}`;
}

export const explainNetpolCommand: Command = {
  name: 'netpol explain',
  summary:
    'the ordered rules considered for one flow, the one that decided, and the MapState entry that enforces it',
  usage: 'cascadectl netpol explain FILES... --from X --to Y [--protocol P] --port N',
  options: {
    from: { type: 'string' },
    to: { type: 'string' },
    protocol: { type: 'string' },
    port: { type: 'string' },
  },
  run(values, files) {
    if (!values.from || !values.to || values.port === undefined)
      throw new UsageError('--from, --to and --port are required');
    const { engine, problems } = loadNetpol(files);
    const proto = protoNumber(values.protocol);
    const src = resolveAddr(engine, String(values.from));
    const dst = resolveAddr(engine, String(values.to));
    const port = portOf(engine, String(values.port), dst, proto);
    const rs = ruleSetOf(engine);
    const lines: string[] = [
      `${nameOf(engine, src)} -> ${nameOf(engine, dst)} ${PROTO_NAMES[proto] ?? proto}/${port}`,
    ];
    const viaMaps = mapConnection(engine, src, dst, proto, port);
    for (const dir of ['egress', 'ingress'] as Direction[]) {
      const localIp = dir === 'egress' ? src : dst;
      const remoteIp = dir === 'egress' ? dst : src;
      const local = remoteOf(engine, localIp);
      if (local.kind !== 'pod') {
        lines.push(`  ${dir}: ${nameOf(engine, localIp)} is not a pod: not judged here`);
        continue;
      }
      const d = evaluateDirection(rs, local.pod, remoteOf(engine, remoteIp), dir, proto, port);
      const m = dir === 'egress' ? viaMaps.egress : viaMaps.ingress;
      lines.push(
        `  ${dir} at ${local.pod.namespace}/${local.pod.name}: ${d.verdict.toUpperCase()} by ${d.tier}${d.policy ? ` ${d.policy}` : ''}${d.rule ? ` ${d.rule}` : ''}${d.priority !== undefined ? ` (priority ${d.priority})` : ''}`,
      );
      if (d.passedBy) lines.push(`    passed by ${d.passedBy.join(', ')} to the NetworkPolicy/baseline tier`);
      const layers = engine.tableOf(local.pod.namespace, local.pod.name, dir);
      if (layers) {
        lines.push(
          `    rules considered, in order (admin ${layers.admin.tiers.admin.length}, ${layers.lower.tiers.isolation.length ? `NetworkPolicy ${layers.lower.tiers.np.length} + isolation` : `baseline ${layers.lower.tiers.baseline.length}`}):`,
        );
        for (const r of layers.admin.tiers.admin)
          lines.push(
            `      admin  ${r.id} ${r.action}${r.priority !== undefined ? ` priority ${r.priority}` : ''}`,
          );
        if (layers.lower.tiers.isolation.length) {
          for (const r of layers.lower.tiers.np) lines.push(`      np     ${r.id} allow`);
          lines.push(
            `      np     isolation by ${layers.lower.tiers.isolation.map((i) => i.policy).join(', ')}: deny`,
          );
        } else for (const r of layers.lower.tiers.baseline) lines.push(`      base   ${r.id} ${r.action}`);
      }
      if (m) {
        lines.push(
          `    datapath: remote identity ${identityName(engine, m.remoteIdentity)}; ${m.entry ? `${m.by} layer entry ${describeEntry(engine, m.entry)}` : m.by === 'miss' ? 'no entry: default allow' : m.by}`,
        );
        if (m.passed) lines.push(`    datapath: admin layer pass entry ${describeEntry(engine, m.passed)}`);
      }
    }
    lines.push(`  => ${viaMaps.verdict.toUpperCase()}`);
    out(lines.join('\n'));
    return problems > 0 ? 2 : 0;
  },
};

export const mapsCommand: Command = {
  name: 'netpol maps',
  summary: 'the lowered MapState per endpoint (both layers, both directions), with counts and shared tables',
  usage: 'cascadectl netpol maps FILES... [--endpoint NS/POD] [-o table|json]',
  options: { endpoint: { type: 'string' }, output: { type: 'string', short: 'o' } },
  run(values, files) {
    const format = oneOf('output', values.output, ['table', 'json'], 'table');
    const { engine, problems } = loadNetpol(files);
    const pods = [...engine.pods.values()].filter(
      (p) => values.endpoint === undefined || `${p.namespace}/${p.name}` === values.endpoint,
    );
    if (values.endpoint !== undefined && pods.length === 0)
      throw new UsageError(`--endpoint ${String(values.endpoint)}: no such pod`);
    // The BPF map contents a fresh datapath would hold (tables numbered 1..), decoded back from
    // their bytes: what `bpftool map dump` shows on a node, in words.
    const desired = datapathState(engine);
    const bpf = encodeState(desired);
    const layer = (p: Pod, d: Direction, which: 'admin' | 'lower') => {
      const l = engine.tableOf(p.namespace, p.name, d)?.[which];
      const n = l ? bpf.tableNumbers.get(l.id) : undefined;
      const encoded =
        l && n !== undefined ? (desired.tables.get(l.id) ?? []).map((te) => encodeTableEntry(n, te)) : [];
      return {
        table: l?.id,
        bpfTable: n,
        entries: [...(l?.state.entries() ?? [])].map((e) => describeEntry(engine, e)),
        bpf: encoded.map(([k, v]) => ({
          key: k.toString('hex'),
          value: v.toString('hex'),
          decoded: describeBpfEntry(engine, decodePolicyKey(k), decodePolicyValue(v), desired.rules),
        })),
      };
    };
    const report = pods.map((p) => {
      const dirs = (['ingress', 'egress'] as const).map((d) => ({
        direction: d,
        admin: layer(p, d, 'admin'),
        lower: layer(p, d, 'lower'),
      }));
      const epBytes = bpf.endpoints.find(([k]) => k.equals(addr16(p.ips[0]!)));
      const ep = epBytes ? decodeEndpointValue(epBytes[1]) : undefined;
      return {
        endpoint: `${p.namespace}/${p.name}`,
        ips: p.ips,
        identity: identityName(engine, engine.podIdentity.get(`${p.namespace}/${p.name}`) ?? 0),
        bpfEndpoint: ep
          ? `flags ${ep.flags} (${ep.flags & EP_FLAGS.FAIL_CLOSED ? 'FAIL CLOSED' : 'enforce ingress+egress'}), ingress tables admin ${ep.tables[0][0]} lower ${ep.tables[0][1]}, egress tables admin ${ep.tables[1][0]} lower ${ep.tables[1][1]}, identity ${ep.identity}`
          : 'not in the endpoints map',
        directions: dirs,
      };
    });
    let entries = 0;
    for (const t of engine.tables.values()) entries += t.state.size;
    const summary = {
      endpoints: engine.pods.size,
      identities: engine.identities.size,
      tables: engine.tables.size,
      entries,
      bpf: {
        policyEntries: bpf.policy.length,
        endpointEntries: bpf.endpoints.length,
        ipcacheEntries: bpf.ipcache.length,
        hostEntries: bpf.hosts.length,
        bytes:
          bpf.policy.length * (SIZES.policyKey + SIZES.policyValue) +
          bpf.endpoints.length * (16 + SIZES.endpointValue) +
          bpf.ipcache.length * (SIZES.ipcacheKey + 4) +
          bpf.hosts.length * (SIZES.hostKey + 4),
      },
    };
    if (format === 'json') out(JSON.stringify({ summary, endpoints: report }, null, 2));
    else {
      const lines = [
        `${summary.endpoints} endpoints, ${summary.identities} identities, ${summary.tables} shared tables (layers), ${summary.entries} entries in all`,
        `BPF maps: cascade_policy ${summary.bpf.policyEntries} entries, cascade_endpoints ${summary.bpf.endpointEntries}, cascade_hosts ${summary.bpf.hostEntries}, cascade_ipcache ${summary.bpf.ipcacheEntries} (${summary.bpf.bytes} bytes of keys and values)`,
      ];
      for (const r of report) {
        lines.push('', `${r.endpoint} ${r.ips.join(',')} identity ${r.identity}`);
        lines.push(`  bpf cascade_endpoints[${r.ips[0]}] = ${r.bpfEndpoint}`);
        for (const d of r.directions) {
          for (const layer of ['admin', 'lower'] as const) {
            lines.push(
              `  ${d.direction} ${layer} table ${d[layer].table} = BPF table ${d[layer].bpfTable} (${d[layer].entries.length} entries)`,
            );
            d[layer].entries.forEach((e, i) => {
              lines.push(`    ${e}`);
              const b = d[layer].bpf[i];
              if (b) lines.push(`      bpf ${b.decoded}`);
            });
          }
        }
      }
      out(lines.join('\n'));
    }
    return problems > 0 ? 2 : 0;
  },
};
