// cascadectl netpol explain: the ordered rules considered for one flow (for a Service: per backend),
// the one that decided, and the MapState entry that enforces it.
import {
  type Direction,
  evaluateDirection,
  mapConnection,
  type NetpolEngine,
  PROTO_NAMES,
  remoteOf,
  ruleSetOf,
} from '@cascade/netpolicy';
import { type Command, out, UsageError } from '../cli.ts';
import { loadNetpol, nameOf, portOf, protoNumber, resolveAddr } from './netpol.ts';
import { describeEntry, identityName } from './netpol-maps.ts';
import { serviceDestination } from './netpol-services.ts';

export const explainNetpolCommand: Command = {
  name: 'netpol explain',
  summary:
    'the ordered rules considered for one flow, the one that decided, and the MapState entry that enforces it',
  usage:
    'cascadectl netpol explain FILES... --from X --to Y|svc:NS/NAME [--protocol P] --port N|NAME\n  (a Service destination is explained per backend, each on its own port)',
  options: {
    from: { type: 'string' },
    to: { type: 'string' },
    protocol: { type: 'string' },
    port: { type: 'string' },
  },
  run(values, files) {
    if (!values.from || !values.to || values.port === undefined)
      throw new UsageError('--from, --to and --port are required');
    const { engine, services, problems } = loadNetpol(files);
    const proto = protoNumber(values.protocol);
    const src = resolveAddr(engine, String(values.from));
    const hop = serviceDestination(engine, services, src, String(values.to), proto, String(values.port));
    if (!hop) {
      const dst = resolveAddr(engine, String(values.to));
      out(explainFlow(engine, src, dst, proto, portOf(engine, String(values.port), dst, proto)).join('\n'));
      return problems > 0 ? 2 : 0;
    }
    const lines = [
      `${nameOf(engine, src)} -> Service ${hop.service} (${hop.frontend}): ${hop.backends.length ? `${hop.backends.length} backend${hop.backends.length > 1 ? 's' : ''}, each judged on its own address and port (a new flow goes to one of them at random)` : hop.note}`,
    ];
    for (const b of hop.backends) lines.push('', ...explainFlow(engine, src, b.addr, proto, b.port));
    out(lines.join('\n'));
    return problems > 0 ? 2 : 0;
  },
};

/** The explanation of one flow: both directions, the rules considered, the datapath entries. */
function explainFlow(engine: NetpolEngine, src: string, dst: string, proto: number, port: number): string[] {
  {
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
      const remote = remoteOf(engine, remoteIp);
      if (
        d.tier === 'networkpolicy' &&
        d.verdict === 'deny' &&
        remote.kind === 'pod' &&
        remote.pod.namespace !== local.pod.namespace &&
        rs.capped?.(remote.pod)
      )
        lines.push(
          `    note: ${remote.pod.namespace}/${remote.pod.name}'s label set is past namespace ${remote.pod.namespace}'s identity cap (${engine.foreignIdentityCap} label set${engine.foreignIdentityCap === 1 ? '' : 's'}, the oldest first): other namespaces' NetworkPolicies select it only through a peer that admits every pod`,
        );
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
    return lines;
  }
}
