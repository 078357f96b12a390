// cascadectl graph FILES... -o out.svg: the pictures (hierarchy with attached policies and effective
// results; network policy connectivity grid), with kubectl-style filters for large clusters.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { type Command, err, oneOf, out, UsageError } from '../cli.ts';
import { gridPicture } from '../graph/grid.ts';
import { gatewayPicture } from '../graph/hierarchy.ts';
import { type Picture, stack } from '../graph/svg.ts';
import { hasInput, loadManifests } from '../load.ts';
import { labelIndex, labelTest, selectorOption } from '../selector.ts';
import { loadGatewayWorld } from './gateway-common.ts';
import { loadNetpol, portsInUse } from './netpol.ts';

export interface GraphFilters {
  namespace?: string;
  gateway?: string;
  route?: string;
  selector?: string;
  collapse?: boolean;
}

export function pictureOf(
  files: string[],
  view: string,
  f: GraphFilters = {},
): { picture?: Picture; problems: number } {
  if (!hasInput(files))
    throw new UsageError('at least one file or folder (or --kubeconfig/--context) is required');
  // Read once; the manifests' own problems reported once, then each world from the same objects.
  const loaded = loadManifests(files);
  for (const p of loaded.problems) err(`error: ${p}`);
  const manifests = loaded.manifests;
  const hasGateway = manifests.some((m) => m.kind === 'Gateway' || m.kind.endsWith('Route'));
  const hasPods = manifests.some((m) => m.kind === 'Pod');
  const selected = labelTest(f.selector);
  const labels = labelIndex(manifests);
  let problems = loaded.problems.length;
  const pictures: Picture[] = [];
  if (view === 'gateway' || (view === 'all' && hasGateway)) {
    const { world, problems: p } = loadGatewayWorld(files, undefined, loaded);
    problems += p - loaded.problems.length;
    const filtering = f.namespace || f.gateway || f.route || f.selector;
    pictures.push(
      gatewayPicture(world.engines.values(), {
        collapse: f.collapse !== false,
        ...(filtering
          ? {
              include: (path) =>
                (!f.namespace || path.route.startsWith(`${f.namespace}/`)) &&
                (!f.gateway || path.gateway === f.gateway) &&
                (!f.route || path.route === f.route) &&
                selected(labels(path.routeKind, ...(path.route.split('/') as [string, string]))),
            }
          : {}),
      }),
    );
  }
  if (view === 'netpol' || (view === 'all' && hasPods)) {
    const { engine, problems: p } = loadNetpol(files, loaded);
    problems += p - loaded.problems.length;
    pictures.push(
      gridPicture(engine, portsInUse(engine), {
        include: (pod) => (!f.namespace || pod.namespace === f.namespace) && selected(pod.labels),
      }),
    );
  }
  const picture = pictures.length === 2 ? stack(pictures[0]!, pictures[1]!) : pictures[0];
  return picture ? { picture, problems } : { problems };
}

export const graphCommand: Command = {
  name: 'graph',
  summary:
    'an SVG picture: the hierarchy with each policy where it attaches and the effective result per rule, and the connectivity grid',
  usage:
    'cascadectl graph FILES... [-o OUT.svg] [--view all|gateway|netpol] [-n NS] [--gateway NS/NAME] [--route NS/NAME] [-l SELECTOR] [--no-collapse]\n  (-n, -l: routes and pods by namespace and label; identical sibling routes are drawn once unless --no-collapse)',
  options: {
    output: { type: 'string', short: 'o' },
    view: { type: 'string' },
    namespace: { type: 'string', short: 'n' },
    gateway: { type: 'string' },
    route: { type: 'string' },
    'no-collapse': { type: 'boolean' },
    ...selectorOption,
  },
  run(values, files) {
    if (!hasInput(files))
      throw new UsageError('at least one file or folder (or --kubeconfig/--context) is required');
    const view = oneOf('view', values.view, ['all', 'gateway', 'netpol'], 'all');
    if (values.output !== undefined && !String(values.output).endsWith('.svg'))
      throw new UsageError(`-o must name an .svg file (got "${String(values.output)}")`);
    const filters: GraphFilters = { collapse: !values['no-collapse'] };
    for (const k of ['namespace', 'gateway', 'route', 'selector'] as const)
      if (values[k] !== undefined) filters[k] = String(values[k]);
    const { picture, problems } = pictureOf(files, view, filters);
    if (!picture) {
      err('cascadectl graph: nothing to draw: no routes attached to gateways and no pods in the input');
      return 2;
    }
    if (values.output === undefined) out(picture.svg);
    else {
      const file = String(values.output);
      try {
        mkdirSync(dirname(file), { recursive: true });
        writeFileSync(file, picture.svg);
      } catch (e) {
        err(`cascadectl graph: cannot write ${file}: ${(e as Error).message}`);
        return 2;
      }
      const collapsed = picture.collapsed.reduce((a, c) => a + c.routes.length, 0);
      const what = [
        picture.pills.length || picture.marks.length ? `${picture.pills.length} policy attachments` : '',
        picture.marks.length ? `${picture.marks.length} effective rules and refused unsets` : '',
        picture.cells.length ? `${picture.cells.length} grid cells` : '',
        collapsed ? `${collapsed} identical routes drawn as ${picture.collapsed.length}` : '',
        picture.unattached.length ? `${picture.unattached.length} not attached` : '',
      ].filter(Boolean);
      err(`wrote ${String(values.output)} (${picture.width}x${picture.height}: ${what.join(', ')})`);
    }
    return problems > 0 ? 2 : 0;
  },
};
