import { comparePathResults, type PathResult, toPathResult } from '@cascade/core';
import { stringify } from 'yaml';
import { type Command, compact, oneOf, out, table } from '../cli.ts';
import { kindOption, loadGatewayWorld } from './gateway-common.ts';

export function pathResults(world: ReturnType<typeof loadGatewayWorld>['world']): PathResult[] {
  const all: PathResult[] = [];
  for (const [kind, engine] of world.engines)
    for (const [path, r] of engine.results()) all.push(toPathResult(kind, path, r, engine.kind));
  return all.sort((a, b) =>
    a.policyKind < b.policyKind ? -1 : a.policyKind > b.policyKind ? 1 : comparePathResults(a, b),
  );
}

export function formatPathResults(results: PathResult[]): string {
  const blocks: string[] = [];
  for (const r of results) {
    const p = r.path;
    const head = `${r.policyKind}  ${p.gateway}#${p.listener} > ${p.routeKind} ${p.route} > ${p.rule}`;
    const rows = Object.entries(r.rules).map(([k, v]) => [
      k,
      `${v.source.namespace}/${v.source.name}`,
      v.as,
      compact(v.value, 60),
    ]);
    blocks.push(
      rows.length
        ? `${head}\n${table([['RULE', 'SOURCE', 'AS', 'VALUE'], ...rows], '  ')}`
        : `${head}\n  (no rules)`,
    );
  }
  return blocks.join('\n\n');
}

export const effectiveCommand: Command = {
  name: 'effective',
  summary: 'the effective policy of every path',
  usage: 'cascadectl effective FILES... [--kind AuthPolicy|RateLimitPolicy] [-o table|yaml|json]',
  options: { ...kindOption, output: { type: 'string', short: 'o' } },
  run(values, files) {
    const format = oneOf('output', values.output, ['table', 'yaml', 'json'], 'table');
    const { world, problems } = loadGatewayWorld(files, values.kind);
    const results = pathResults(world);
    if (format === 'json') out(JSON.stringify(results, null, 2));
    else if (format === 'yaml') out(stringify(results));
    else out(results.length ? formatPathResults(results) : 'no paths: no route is attached to a gateway');
    return problems > 0 ? 2 : 0;
  },
};
