// cascadectl graph FILES... -o out.svg: the pictures (hierarchy with attached policies; network
// policy connectivity matrix).
import { writeFileSync } from 'node:fs';
import { type Command, err, oneOf, out, UsageError } from '../cli.ts';
import { gatewayPicture, netpolPicture, type Picture, stack } from '../graph/svg.ts';
import { hasInput, loadManifests } from '../load.ts';
import { loadGatewayWorld } from './gateway-common.ts';
import { loadNetpol, portsInUse } from './netpol.ts';

export function pictureOf(files: string[], view: string): { picture?: Picture; problems: number } {
  if (!hasInput(files))
    throw new UsageError('at least one file or folder (or --kubeconfig/--context) is required');
  // Read once; the manifests' own problems reported once, then each world from the same objects.
  const loaded = loadManifests(files);
  for (const p of loaded.problems) err(`error: ${p}`);
  const manifests = loaded.manifests;
  const hasGateway = manifests.some((m) => m.kind === 'Gateway' || m.kind.endsWith('Route'));
  const hasPods = manifests.some((m) => m.kind === 'Pod');
  let problems = loaded.problems.length;
  const pictures: Picture[] = [];
  if (view === 'gateway' || (view === 'all' && hasGateway)) {
    const { world, problems: p } = loadGatewayWorld(files, undefined, loaded);
    problems += p - loaded.problems.length;
    pictures.push(gatewayPicture(world.engines.values()));
  }
  if (view === 'netpol' || (view === 'all' && hasPods)) {
    const { engine, problems: p } = loadNetpol(files, loaded);
    problems += p - loaded.problems.length;
    pictures.push(netpolPicture(engine, portsInUse(engine)));
  }
  const picture = pictures.length === 2 ? stack(pictures[0]!, pictures[1]!) : pictures[0];
  return picture ? { picture, problems } : { problems };
}

export const graphCommand: Command = {
  name: 'graph',
  summary: 'an SVG picture: the hierarchy with each policy where it attaches, and the connectivity matrix',
  usage: 'cascadectl graph FILES... [-o OUT.svg] [--view all|gateway|netpol]',
  options: { output: { type: 'string', short: 'o' }, view: { type: 'string' } },
  run(values, files) {
    if (!hasInput(files))
      throw new UsageError('at least one file or folder (or --kubeconfig/--context) is required');
    const view = oneOf('view', values.view, ['all', 'gateway', 'netpol'], 'all');
    if (values.output !== undefined && !String(values.output).endsWith('.svg'))
      throw new UsageError(`-o must name an .svg file (got "${String(values.output)}")`);
    const { picture, problems } = pictureOf(files, view);
    if (!picture) {
      err('cascadectl graph: nothing to draw: no routes attached to gateways and no pods in the input');
      return 2;
    }
    if (values.output === undefined) out(picture.svg);
    else {
      writeFileSync(String(values.output), picture.svg);
      err(
        `wrote ${String(values.output)} (${picture.width}x${picture.height}: ${picture.pills.length} policy attachments, ${picture.cells.length} matrix cells${picture.unattached.length ? `, ${picture.unattached.length} not attached` : ''})`,
      );
    }
    return problems > 0 ? 2 : 0;
  },
};
