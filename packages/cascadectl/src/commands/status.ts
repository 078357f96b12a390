import {
  affectedCondition,
  type Condition,
  gatewayKey,
  policyConditions,
  routeKey,
  ruleName,
} from '@cascade/core';
import { stringify } from 'yaml';
import { type Command, oneOf, out, table } from '../cli.ts';
import { labelTest, namespaceOf, namespaceOptions, selectorOption } from '../selector.ts';
import type { GatewayWorld } from '../world.ts';
import { kindOption, loadGatewayWorld } from './gateway-common.ts';

export interface StatusReport {
  policies: { kind: string; namespace: string; name: string; conditions: Condition[] }[];
  targets: { kind: string; namespace: string; name: string; conditions: Condition[] }[];
}

export function statusReport(world: GatewayWorld): StatusReport {
  const report: StatusReport = { policies: [], targets: [] };
  for (const [, engine] of world.engines) {
    for (const id of [...engine.policyIds()].sort()) {
      const st = engine.policy(id)!;
      report.policies.push({
        kind: st.object.kind,
        namespace: st.object.metadata.namespace ?? 'default',
        name: st.object.metadata.name,
        conditions: policyConditions(engine, id),
      });
    }
  }
  const first = [...world.engines.values()][0];
  if (!first) return report;
  const topo = first.topology;
  const targets = [
    ...[...topo.gateways.values()].map((g) => ({
      kind: 'Gateway',
      namespace: g.namespace,
      name: g.name,
      key: gatewayKey(g.namespace, g.name),
      sections: g.listeners.map((l) => l.name),
    })),
    ...[...topo.routes.values()].map((r) => ({
      kind: r.kind,
      namespace: r.namespace,
      name: r.name,
      key: routeKey(r.kind, r.namespace, r.name),
      sections: r.rules.map(ruleName),
    })),
  ].sort((a, b) => (a.key < b.key ? -1 : 1));
  for (const t of targets) {
    report.targets.push({
      kind: t.kind,
      namespace: t.namespace,
      name: t.name,
      conditions: [...world.engines.values()].map((e) => affectedCondition(e, t.key, t.sections)),
    });
  }
  return report;
}

const short = (c: Condition | undefined) => (c ? `${c.status}/${c.reason}` : '-');

export function formatStatus(r: StatusReport): string {
  const lines: string[] = [];
  lines.push(
    table([
      ['POLICY', 'ACCEPTED', 'ENFORCED'],
      ...r.policies.map((p) => [
        `${p.kind} ${p.namespace}/${p.name}`,
        short(p.conditions[0]),
        short(p.conditions[1]),
      ]),
    ]),
  );
  lines.push('');
  for (const p of r.policies) {
    for (const c of p.conditions) {
      if (c.message.startsWith('Policy has been accepted') && !c.message.includes(';')) continue;
      lines.push(`${p.kind} ${p.namespace}/${p.name} ${c.type}: ${c.message}`);
    }
  }
  lines.push('');
  lines.push(
    table([
      ['TARGET', ...(r.targets[0]?.conditions.map((c) => c.type.toUpperCase()) ?? [])],
      ...r.targets.map((t) => [`${t.kind} ${t.namespace}/${t.name}`, ...t.conditions.map((c) => short(c))]),
    ]),
  );
  return lines.join('\n');
}

export const statusCommand: Command = {
  name: 'status',
  summary: 'status conditions of every policy and the <Kind>Affected conditions of targets',
  usage:
    'cascadectl status FILES... [--kind K] [-n NS | -A] [-l SELECTOR] [-o table|yaml|json] [--strict]\n  (--strict: exit 1 unless every policy shown is Accepted and Enforced; -n, -l: policies and targets by namespace and label)',
  options: {
    ...kindOption,
    ...selectorOption,
    ...namespaceOptions,
    output: { type: 'string', short: 'o' },
    strict: { type: 'boolean' },
  },
  run(values, files) {
    const format = oneOf('output', values.output, ['table', 'yaml', 'json'], 'table');
    const { world, problems, labels } = loadGatewayWorld(files, values.kind);
    const full = statusReport(world);
    const selected = labelTest(values.selector);
    const ns = namespaceOf(values);
    const shown = (o: { kind: string; namespace: string; name: string }) =>
      (!ns || o.namespace === ns) && selected(labels(o.kind, o.namespace, o.name));
    const report: StatusReport = {
      policies: full.policies.filter(shown),
      targets: full.targets.filter(shown),
    };
    if (format === 'json') out(JSON.stringify(report, null, 2));
    else if (format === 'yaml') out(stringify(report, { aliasDuplicateObjects: false }));
    else out(formatStatus(report));
    if (problems > 0) return 2;
    const short = (p: (typeof report.policies)[number]) =>
      p.conditions.every((c) => c.status === 'True') &&
      p.conditions.find((c) => c.type === 'Enforced')?.reason === 'Enforced';
    return values.strict && !report.policies.every(short) ? 1 : 0;
  },
};
