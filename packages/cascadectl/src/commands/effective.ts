import { comparePathResults, type PathResult, toPathResult } from '@cascade/core';
import { stringify } from 'yaml';
import { type Command, compact, oneOf, out, table } from '../cli.ts';
import { labelTest, namespaceOf, namespaceOptions, selectorOption } from '../selector.ts';
import { kindOption, loadGatewayWorld } from './gateway-common.ts';

/**
 * Every path's effective policy, for the kinds the input has policies of (as the controllers publish
 * EffectivePolicies only where a policy reaches: a kind with none in the files adds nothing).
 */
export function pathResults(world: ReturnType<typeof loadGatewayWorld>['world']): PathResult[] {
  const all: PathResult[] = [];
  for (const [kind, engine] of world.engines) {
    if (engine.policyIds().next().done) continue;
    for (const [path, r] of engine.results()) all.push(toPathResult(kind, path, r, engine.kind));
  }
  return all.sort((a, b) =>
    a.policyKind < b.policyKind ? -1 : a.policyKind > b.policyKind ? 1 : comparePathResults(a, b),
  );
}

export function formatPathResults(results: PathResult[], wide = false): string {
  const blocks: string[] = [];
  for (const r of results) {
    const p = r.path;
    const head = `${r.policyKind}  ${p.gateway}#${p.listener} > ${p.routeKind} ${p.route} > ${p.rule}`;
    const rows = Object.entries(r.rules).map(([k, v]) => [
      k,
      `${v.source.namespace}/${v.source.name}`,
      v.as,
      wide ? JSON.stringify(v.value) : compact(v.value, 60),
    ]);
    blocks.push(
      rows.length
        ? `${head}\n${table([['RULE', 'SOURCE', 'AS', 'VALUE'], ...rows], '  ', wide)}`
        : `${head}\n  (no rules)`,
    );
  }
  return blocks.join('\n\n');
}

export const effectiveCommand: Command = {
  name: 'effective',
  summary: 'the effective policy of every path',
  usage:
    'cascadectl effective FILES... [--kind ap|rlp|trlp] [-n NS] [--route NS/NAME] [--gateway NS/NAME] [-l SELECTOR] [-o table|wide|yaml|json|name]   (-o wide: values uncut; -l: routes by label)',
  options: {
    ...kindOption,
    output: { type: 'string', short: 'o' },
    ...namespaceOptions,
    route: { type: 'string' },
    gateway: { type: 'string' },
    ...selectorOption,
  },
  run(values, files) {
    const format = oneOf('output', values.output, ['table', 'wide', 'yaml', 'json', 'name'], 'table');
    const { world, problems, labels } = loadGatewayWorld(files, values.kind);
    const selected = labelTest(values.selector);
    const ns = namespaceOf(values);
    const results = pathResults(world).filter(
      (r) =>
        (!ns || r.path.route.startsWith(`${ns}/`)) &&
        (!values.route || r.path.route === values.route) &&
        (!values.gateway || r.path.gateway === values.gateway) &&
        selected(labels(r.path.routeKind, ...(r.path.route.split('/') as [string, string]))),
    );
    if (format === 'json') out(JSON.stringify(results, null, 2));
    else if (format === 'yaml') out(stringify(results, { aliasDuplicateObjects: false }));
    else if (format === 'name')
      out(
        results
          .map((r) => `${r.policyKind}/${r.path.gateway}#${r.path.listener}/${r.path.route}/${r.path.rule}`)
          .join('\n'),
      );
    else
      out(
        results.length
          ? formatPathResults(results, format === 'wide')
          : 'no paths: no route (matching the filters) is attached to a gateway',
      );
    return problems > 0 ? 2 : 0;
  },
};
