// cascadectl netpol maps: the lowered MapState per endpoint and the BPF map contents a node would hold,
// decoded back from their bytes; and the names of identities and entries the other netpol commands use.
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
  type Direction,
  datapathState,
  describePrecedence,
  formatPortPrefix,
  formatPrefix,
  ID,
  type MapStateEntry,
  type NetpolEngine,
  type Pod,
  PROTO_NAMES,
} from '@cascade/netpolicy';
import { onAgent } from '../agent-exec.ts';
import { type Command, oneOf, out, UsageError } from '../cli.ts';
import { labelTest, namespaceOf, namespaceOptions, selectorOption } from '../selector.ts';
import { loadNetpol } from './netpol.ts';
import { type LiveState, mapsDrift, modelHostCount } from './netpol-drift.ts';

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

export function describeEntry(engine: NetpolEngine, e: MapStateEntry): string {
  const remote = identityName(engine, e.identity);
  const ports =
    e.proto === 0
      ? 'any'
      : `${PROTO_NAMES[e.proto] ?? e.proto}/${formatPortPrefix({ port: e.port, len: e.plen })}`;
  return `${remote} ${ports} -> ${e.verdict} [${describePrecedence(e.precedence)}, precedence 0x${e.precedence.toString(16)}] from ${e.rule}`;
}

/** A pod label set as explain, maps and trace name it: `ns/{k=v,...}`. */
export const labelSetName = (namespace: string, labels: Readonly<Record<string, string>>): string =>
  `${namespace}/{${Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',')}}`;

export function identityName(engine: NetpolEngine, id: number): string {
  if (id === ID.WILDCARD) return 'any';
  if (id === ID.ALL_PODS) return 'all-pods';
  if (id === ID.HOST) return 'host';
  if (id === ID.WORLD || id === 4) return 'world';
  const info = engine.identities.get(id);
  if (!info) return `#${id}`;
  if (info.kind === 'pod') return `${labelSetName(String(info.namespace), info.labels ?? {})}#${id}`;
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

export const mapsCommand: Command = {
  name: 'netpol maps',
  summary: 'the lowered MapState per endpoint (both layers, both directions), with counts and shared tables',
  usage:
    "cascadectl netpol maps FILES... [--endpoint NS/POD] [-n NS] [-l SELECTOR] [-o table|json]   (-n, -l: endpoints by namespace, by pod label)\n       cascadectl netpol maps --node N --kubeconfig PATH [-o table|json]   (the node's live maps, read by its agent's debug command, and their drift from the model; exit 1 on drift)",
  options: {
    endpoint: { type: 'string' },
    node: { type: 'string' },
    output: { type: 'string', short: 'o' },
    ...namespaceOptions,
    ...selectorOption,
  },
  async run(values, files) {
    const format = oneOf('output', values.output, ['table', 'json'], 'table');
    if (values.node !== undefined) return liveMaps(String(values.node), files, format as 'table' | 'json');
    const { engine, problems } = loadNetpol(files);
    const selected = labelTest(values.selector);
    const ns = namespaceOf(values);
    const pods = [...engine.pods.values()].filter(
      (p) =>
        (values.endpoint === undefined || `${p.namespace}/${p.name}` === values.endpoint) &&
        (ns === undefined || p.namespace === ns) &&
        selected(p.labels),
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

/** The agent image's debug command (packages/netpolicy/src/agent/debug.ts). */
const DEBUG = ['/usr/local/bin/node', '/app/packages/netpolicy/src/agent/debug.ts', 'state'];

/**
 * `--node N`: the node's live maps as its kernel holds them (the agent's debug command, through
 * pods/exec), compared with what the model says the node should hold: exit 1 when they differ.
 */
async function liveMaps(node: string, files: string[], format: 'table' | 'json'): Promise<number> {
  const { engine, services, problems } = loadNetpol(files);
  if (![...engine.pods.values()].some((p) => p.node === node) && !engine.nodes.has(node))
    throw new UsageError(`--node ${node}: no such node in the cluster's objects`);
  const agent = await onAgent('--node', node, 'the maps');
  let text = '';
  await agent.run(DEBUG, (lines) => {
    if (text.length < 64 * 1024 * 1024) text += `${lines.join('\n')}\n`;
  });
  let live: LiveState;
  try {
    live = JSON.parse(text) as LiveState;
  } catch {
    throw new UsageError(`--node ${node}: the agent ${agent.where} printed no state (${text.slice(0, 120)})`);
  }
  const model = datapathState(engine, node, { services });
  const drift = mapsDrift(model, live);
  const summary = {
    node,
    agent: agent.where,
    kernel: {
      endpoints: live.endpoints.length,
      hosts: live.hosts.length,
      services: live.services.length,
      policyEntries: live.policyEntries,
    },
    model: {
      endpoints: model.endpoints.length,
      hosts: modelHostCount(model),
      services: model.services?.length ?? 0,
    },
  };
  if (format === 'json') out(JSON.stringify({ ...summary, drift, live }, null, 2));
  else
    out(
      [
        `node ${node} (agent ${agent.where}): kernel ${summary.kernel.endpoints} endpoints, ${summary.kernel.hosts} host addresses, ${summary.kernel.services} Services, ${summary.kernel.policyEntries} policy entries; model ${summary.model.endpoints} endpoints, ${summary.model.hosts} host addresses, ${summary.model.services} Services`,
        ...(drift.length
          ? ['drift:', ...drift.map((d) => `  ${d}`)]
          : ['no drift: the kernel holds what the model says']),
      ].join('\n'),
    );
  return problems > 0 ? 2 : drift.length ? 1 : 0;
}
