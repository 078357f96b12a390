import {
  affectedCondition,
  type Condition,
  gatewayKey,
  POLICY_CONTROLLER_NAME,
  policyConditions,
  routeKey,
  ruleName,
} from '@cascade/core';
import { stringify } from 'yaml';
import { type Command, err, oneOf, out, table, UsageError } from '../cli.ts';
import { hasInput, loadManifests, type Manifest } from '../load.ts';
import { labelTest, namespaceOf, namespaceOptions, selectorOption } from '../selector.ts';
import type { GatewayWorld } from '../world.ts';
import { kindOption, loadGatewayWorld } from './gateway-common.ts';

/** One object's conditions: the controllers' (live) or cascadectl's own (computed), and where they differ. */
export interface StatusEntry {
  kind: string;
  namespace: string;
  name: string;
  conditions: Condition[];
  /** `cluster`: the conditions a controller wrote, read back; `computed`: cascadectl's from the objects. */
  source?: 'cluster' | 'computed';
  /** With source cluster: where cascadectl's own computation from the same objects differs. */
  differs?: { type: string; cluster: string; computed: string; why?: string }[];
}

export interface StatusReport {
  policies: StatusEntry[];
  targets: StatusEntry[];
}

/**
 * With a live cluster: each policy read from it shows the conditions its controller wrote (what
 * `kubectl get` shows), and says where cascadectl's recomputation from the objects differs. The
 * recomputation cannot see what only the controllers know: whether the gateway is programmed and
 * wired, whether Authorino and Limitador answer, whether an object could be written.
 */
export function withLiveConditions(report: StatusReport, manifests: readonly Manifest[]): StatusReport {
  const live = new Map<string, Condition[]>();
  for (const m of manifests) {
    if (!m.source.file.startsWith('cluster ')) continue;
    const conds = writtenConditions(m);
    if (conds) live.set(`${m.kind}/${m.metadata.namespace ?? 'default'}/${m.metadata.name}`, conds);
  }
  if (!live.size) return report;
  const short = (c: Condition | undefined) => (c ? `${c.status}/${c.reason}` : 'none');
  const withLive = (p: StatusEntry, onlyComputedTypes: boolean): StatusEntry => {
    const all = live.get(`${p.kind}/${p.namespace}/${p.name}`);
    // a target's conditions are others' too (the Gateway's Accepted): only the types cascadectl computes
    const written = all?.filter((w) => !onlyComputedTypes || p.conditions.some((c) => c.type === w.type));
    if (!written?.length) return { ...p, source: 'computed' };
    const differs = p.conditions
      .map((c) => ({ c, w: written.find((x) => x.type === c.type) }))
      .filter(({ c, w }) => short(c) !== short(w))
      .map(({ c, w }) => ({
        type: c.type,
        cluster: short(w),
        computed: short(c),
        ...(w ? { why: w.message } : {}),
      }));
    const conditions = written.map((w) => ({
      type: w.type,
      status: w.status,
      reason: w.reason,
      message: w.message,
    })) as Condition[];
    return { ...p, conditions, source: 'cluster', ...(differs.length ? { differs } : {}) };
  };
  return {
    policies: report.policies.map((p) => withLive(p, false)),
    targets: report.targets.map((t) => withLive(t, true)),
  };
}

/** The conditions Cascade's controllers wrote on an object read from the cluster (undefined: none). */
function writtenConditions(m: Manifest): Condition[] | undefined {
  const status = m.status as
    | { conditions?: Condition[]; parents?: { controllerName?: string; conditions?: Condition[] }[] }
    | undefined;
  // a route's <Kind>Affected conditions are in Cascade's own entry of status.parents
  if (m.kind === 'HTTPRoute' || m.kind === 'GRPCRoute')
    return status?.parents?.find((p) => p.controllerName === POLICY_CONTROLLER_NAME)?.conditions;
  return Array.isArray(status?.conditions) ? status.conditions : undefined;
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
const ofType = (p: StatusEntry, type: string) => p.conditions.find((c) => c.type === type);

export function formatStatus(r: StatusReport): string {
  const lines: string[] = [];
  lines.push(
    table([
      ['POLICY', 'ACCEPTED', 'ENFORCED'],
      ...r.policies.map((p) => [
        `${p.kind} ${p.namespace}/${p.name}`,
        short(ofType(p, 'Accepted')),
        short(ofType(p, 'Enforced')),
      ]),
    ]),
  );
  if (r.policies.some((p) => p.source === 'cluster'))
    lines.push(
      '(from the cluster: the conditions the controllers wrote; cascadectl computed those marked "computed")',
    );
  const differ = [...r.policies, ...r.targets].filter((p) => p.differs?.length);
  if (differ.length) {
    lines.push('');
    lines.push(
      "Where cascadectl's computation from the objects differs (it cannot see gateway programming, wiring, or whether Authorino and Limitador answer):",
    );
    for (const p of differ)
      for (const d of p.differs!)
        lines.push(
          `  ${p.kind} ${p.namespace}/${p.name} ${d.type}: the controller wrote ${d.cluster}, cascadectl computes ${d.computed}`,
        );
  }
  lines.push('');
  for (const p of r.policies) {
    for (const c of p.conditions) {
      if (c.message.startsWith('Policy has been accepted') && !c.message.includes(';')) continue;
      const mark = p.source === 'computed' ? ' (computed)' : '';
      lines.push(`${p.kind} ${p.namespace}/${p.name} ${c.type}${mark}: ${c.message}`);
    }
  }
  lines.push('');
  // one column per condition type (a target read from the cluster may lack one: "-")
  const types = [...new Set(r.targets.flatMap((t) => t.conditions.map((c) => c.type)))].sort();
  lines.push(
    table([
      ['TARGET', ...types.map((t) => t.toUpperCase())],
      ...r.targets.map((t) => [
        `${t.kind} ${t.namespace}/${t.name}${t.source === 'computed' ? ' (computed)' : ''}`,
        ...types.map((type) => short(ofType(t, type))),
      ]),
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
    if (!hasInput(files))
      throw new UsageError('at least one file or folder (or --kubeconfig/--context) is required');
    const loaded = loadManifests(files);
    for (const p of loaded.problems) err(`error: ${p}`);
    const { world, problems, labels } = loadGatewayWorld(files, values.kind, loaded);
    const full = withLiveConditions(statusReport(world), loaded.manifests);
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
    if (problems + loaded.problems.length > 0) return 2;
    const short = (p: (typeof report.policies)[number]) =>
      p.conditions.every((c) => c.status === 'True') &&
      p.conditions.find((c) => c.type === 'Enforced')?.reason === 'Enforced';
    return values.strict && !report.policies.every(short) ? 1 : 0;
  },
};
