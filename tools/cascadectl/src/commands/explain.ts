import { policyName } from '@cascade/core';
import { type Command, compact, err, out, UsageError } from '../cli.ts';
import { kindOption, loadGatewayWorld } from './gateway-common.ts';

const LEVELS = ['GatewayClass', 'Gateway', 'Listener', 'Route', 'RouteRule'];

function nsName(flag: string, v: unknown): { namespace: string; name: string } | undefined {
  if (v === undefined) return undefined;
  const m = /^([a-z0-9.-]+)\/([a-z0-9.-]+)$/.exec(String(v));
  if (!m) throw new UsageError(`--${flag} must be NAMESPACE/NAME (got "${String(v)}")`);
  return { namespace: m[1]!, name: m[2]! };
}

export const explainCommand: Command = {
  name: 'explain',
  summary: 'for each effective rule of a route, the policies that offered it and why each won or lost',
  usage: 'cascadectl explain FILES... --route NS/NAME [--rule NAME] [--gateway NS/NAME] [--kind K]',
  options: {
    ...kindOption,
    route: { type: 'string' },
    rule: { type: 'string' },
    gateway: { type: 'string' },
  },
  run(values, files) {
    const route = nsName('route', values.route);
    if (!route) throw new UsageError('--route NS/NAME is required');
    const gateway = nsName('gateway', values.gateway);
    const { world, problems } = loadGatewayWorld(files, values.kind);
    const blocks: string[] = [];
    for (const [kind, engine] of world.engines) {
      const paths = [...engine.results()].filter(
        ([p]) =>
          p.route.namespace === route.namespace &&
          p.route.name === route.name &&
          (values.rule === undefined || p.rule === values.rule) &&
          (!gateway || (p.gateway.namespace === gateway.namespace && p.gateway.name === gateway.name)),
      );
      for (const [p, r] of paths.sort((a, b) =>
        `${a[0].gateway.name}${a[0].listener}${a[0].rule}` <
        `${b[0].gateway.name}${b[0].listener}${b[0].rule}`
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
    if (problems > 0) return 2;
    if (!blocks.length) {
      err(
        `cascadectl explain: no path of route ${route.namespace}/${route.name} matches (no such route, or no policy of the kind reaches it)`,
      );
      return 1;
    }
    out(blocks.join('\n\n'));
    return 0;
  },
};
