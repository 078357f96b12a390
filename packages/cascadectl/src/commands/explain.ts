import { policyName } from '@cascade/core';
import type { CountedLimitSpec } from '@cascade/wiring';
import { parse as parseYaml } from 'yaml';
import { type Command, compact, err, out, UsageError } from '../cli.ts';
import { kindOption, loadGatewayWorld } from './gateway-common.ts';
import { renderedObjects } from './render.ts';
import { gatewayWirings } from './wiring.ts';

const LEVELS = ['GatewayClass', 'Gateway', 'Listener', 'Route', 'RouteRule'];

function nsName(flag: string, v: unknown): { namespace: string; name: string } | undefined {
  if (v === undefined) return undefined;
  const m = /^([a-z0-9.-]+)\/([a-z0-9.-]+)$/.exec(String(v));
  if (!m) throw new UsageError(`--${flag} must be NAMESPACE/NAME (got "${String(v)}")`);
  return { namespace: m[1]!, name: m[2]! };
}

interface NsName {
  namespace: string;
  name: string;
}

/** Which paths to explain: a route (and rule, gateway), for one kind or all. */
interface PathFilter {
  route: NsName;
  rule?: string;
  gateway?: NsName;
  kind?: string;
}

/**
 * The reverse question: the paths an object Cascade wrote carries (an AuthConfig by its annotations,
 * a Limitador limit namespace `<route-ns>/<route-name>`, an action set by the wiring's origins), and a
 * line saying what it is. Undefined: no such object in the input.
 */
function objectPaths(
  world: ReturnType<typeof loadGatewayWorld>['world'],
  values: Record<string, unknown>,
): { header: string; filters: PathFilter[] } | undefined {
  if (values.authconfig !== undefined) {
    const ac = nsName('authconfig', values.authconfig)!;
    const o = renderedObjects(world).find(
      (x) => x.kind === 'AuthConfig' && x.metadata.namespace === ac.namespace && x.metadata.name === ac.name,
    );
    if (!o) return undefined;
    const a = o.metadata.annotations ?? {};
    const [, rns, rname] = (a['cascade.dev/route'] ?? '').split('/');
    const gw = nsName('gateway', a['cascade.dev/gateway']);
    const rules = (a['cascade.dev/route-rules'] ?? '').split(',').filter(Boolean);
    return {
      header: `AuthConfig ${ac.namespace}/${ac.name} carries ${a['cascade.dev/route']} (${rules.join(', ')}) through gateway ${a['cascade.dev/gateway']}, from ${a['cascade.dev/sources']}`,
      filters: rules.map((rule) => ({
        route: { namespace: rns!, name: rname! },
        rule,
        ...(gw ? { gateway: gw } : {}),
        kind: 'AuthPolicy',
      })),
    };
  }
  if (values.limit !== undefined) {
    const lim = nsName('limit', values.limit)!;
    const limits = renderedObjects(world)
      .filter((o) => o.kind === 'ConfigMap')
      .flatMap(
        (o) => parseYaml((o.data as Record<string, string>)['limits.yaml'] ?? '[]') as CountedLimitSpec[],
      )
      .filter((l) => l.namespace === `${lim.namespace}/${lim.name}`);
    if (!limits.length) return undefined;
    return {
      header: [
        `Limitador namespace ${lim.namespace}/${lim.name}: the limits of route ${lim.namespace}/${lim.name}`,
        ...limits.map((l) => `  ${l.max_value} per ${l.seconds}s: ${l.name ?? '(unnamed)'}`),
      ].join('\n'),
      filters: [{ route: lim, kind: 'RateLimitPolicy' }],
    };
  }
  if (values.set !== undefined) {
    const name = String(values.set);
    for (const w of gatewayWirings(world)) {
      const o = w.wiring.origins[name];
      if (!o) continue;
      const [, rns, rname] = o.route.split('/');
      const sources = [
        ...new Set(
          w.wiring.config.actionSets.find((x) => x.name === name)?.actions.flatMap((a) => a.sources ?? []) ??
            [],
        ),
      ];
      return {
        header: `action set ${name} of gateway ${w.gateway}: ${o.route} ${o.rule} (listener ${o.listener}), actions from ${sources.join(', ') || 'no policy'}`,
        filters: [
          { route: { namespace: rns!, name: rname! }, rule: o.rule, gateway: nsName('gateway', w.gateway)! },
        ],
      };
    }
    return undefined;
  }
  return undefined;
}

export const explainCommand: Command = {
  name: 'explain',
  summary:
    'for each effective rule of a route, the policies that offered it and why each won or lost; or which policies an AuthConfig, a Limitador limit or an action set comes from',
  usage:
    'cascadectl explain FILES... (--route NS/NAME [--rule NAME] [--gateway NS/NAME] | --authconfig NS/NAME | --limit ROUTE-NS/ROUTE-NAME | --set NAME) [--kind K]',
  options: {
    ...kindOption,
    route: { type: 'string' },
    rule: { type: 'string' },
    gateway: { type: 'string' },
    authconfig: { type: 'string' },
    limit: { type: 'string' },
    set: { type: 'string' },
  },
  run(values, files) {
    const reverse = ['authconfig', 'limit', 'set'].filter((k) => values[k] !== undefined);
    if (reverse.length > 1 || (reverse.length && values.route !== undefined))
      throw new UsageError('give one of --route, --authconfig, --limit or --set');
    const route = nsName('route', values.route);
    if (!route && !reverse.length)
      throw new UsageError('--route NS/NAME (or --authconfig, --limit, --set) is required');
    const gateway = nsName('gateway', values.gateway);
    const { world, problems } = loadGatewayWorld(files, values.kind);
    let header: string | undefined;
    let filters: PathFilter[];
    if (route)
      filters = [
        {
          route,
          ...(values.rule !== undefined ? { rule: String(values.rule) } : {}),
          ...(gateway ? { gateway } : {}),
        },
      ];
    else {
      const found = objectPaths(world, values);
      if (!found) {
        err(`cascadectl explain: no ${reverse[0]} ${String(values[reverse[0]!])} in the input`);
        return problems > 0 ? 2 : 1;
      }
      header = found.header;
      filters = found.filters;
    }
    const blocks = filters.flatMap((f) => explainBlocks(world, f));
    if (problems > 0) return 2;
    if (!blocks.length) {
      err(
        `cascadectl explain: no path of route ${filters[0]?.route.namespace}/${filters[0]?.route.name} matches (no such route, or no policy of the kind reaches it)`,
      );
      return 1;
    }
    out([...(header ? [header] : []), ...blocks].join('\n\n'));
    return 0;
  },
};

/** Each matching path's explanation: its policies, the fold, every rule with the winner and the losers. */
function explainBlocks(world: ReturnType<typeof loadGatewayWorld>['world'], f: PathFilter): string[] {
  const { route, gateway } = f;
  const blocks: string[] = [];
  for (const [kind, engine] of world.engines) {
    if (f.kind && kind !== f.kind) continue;
    const paths = [...engine.results()].filter(
      ([p]) =>
        p.route.namespace === route.namespace &&
        p.route.name === route.name &&
        (f.rule === undefined || p.rule === f.rule) &&
        (!gateway || (p.gateway.namespace === gateway.namespace && p.gateway.name === gateway.name)),
    );
    for (const [p, r] of paths.sort((a, b) =>
      `${a[0].gateway.name}${a[0].listener}${a[0].rule}` < `${b[0].gateway.name}${b[0].listener}${b[0].rule}`
        ? -1
        : 1,
    )) {
      const lines = [
        `${kind}  ${p.gateway.namespace}/${p.gateway.name}#${p.listener} > ${p.route.kind} ${p.route.namespace}/${p.route.name} > ${p.rule}`,
      ];
      lines.push('  policies, least established first:');
      for (const s of engine.chainOf(p)) lines.push(`    ${policyName(s.policy.ref)} (${LEVELS[s.level]})`);
      for (const bad of r.invalid) lines.push(`    ${policyName(bad)} (invalid: not folded)`);
      if (r.failedClosed) lines.push(`  FAIL CLOSED: ${r.failedClosed.message}`);
      lines.push('  fold:');
      r.steps.forEach((s, i) =>
        lines.push(
          `    ${i + 1}. ${policyName(s.policy)} ${s.block} ${s.strategy}: ${s.outcome}${s.detail ? ` - ${s.detail}` : ''}`,
        ),
      );
      lines.push('  rules:');
      const keys = new Set([...r.rules.keys(), ...r.lost.map((l) => l.key)]);
      for (const key of [...keys].sort()) {
        const win = r.rules.get(key);
        lines.push(
          win
            ? `    ${key} = ${compact(win.value, 60)}  WON: ${policyName(win.source)} (${win.as})`
            : `    ${key}  (not in effect)`,
        );
        for (const l of r.lost.filter((x) => x.key === key)) {
          lines.push(
            `      lost: ${policyName(l.source)} (${l.as}) ${l.reason} by ${l.by.map(policyName).join(', ')}`,
          );
        }
      }
      for (const u of r.refusedUnsets)
        lines.push(
          `  refused: ${policyName(u.by)} unsets ${u.key}, an override of ${policyName(u.override)}`,
        );
      for (const e of r.conditionErrors)
        lines.push(`  condition error: ${policyName(e.policy)} ${e.block}: ${e.message}`);
      blocks.push(lines.join('\n'));
    }
  }
  return blocks;
}
