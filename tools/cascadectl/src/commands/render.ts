// cascadectl render FILES...: the downstream objects the controllers publish (a Limitador limits
// ConfigMap per gateway, an Authorino AuthConfig per route), from the effective policies.
import { type RenderedObject, renderAll } from '@cascade/core';
import { stringify } from 'yaml';
import { type Command, oneOf, out } from '../cli.ts';
import { kindOption, loadGatewayWorld } from './gateway-common.ts';

export function renderedObjects(world: ReturnType<typeof loadGatewayWorld>['world']): RenderedObject[] {
  const all: RenderedObject[] = [];
  for (const engine of world.engines.values())
    all.push(
      ...renderAll(engine, `${engine.kind.kind.toLowerCase()}-controller`, world.referenceGrants).values(),
    );
  return all.sort((a, b) => {
    const ka = `${a.kind}/${a.metadata.namespace}/${a.metadata.name}`;
    const kb = `${b.kind}/${b.metadata.namespace}/${b.metadata.name}`;
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  });
}

export const renderCommand: Command = {
  name: 'render',
  summary: 'the Limitador limits ConfigMaps and Authorino AuthConfigs the controllers publish',
  usage: 'cascadectl render FILES... [--kind AuthPolicy|RateLimitPolicy] [-o yaml|json]',
  options: { ...kindOption, output: { type: 'string', short: 'o' } },
  run(values, files) {
    const format = oneOf('output', values.output, ['yaml', 'json'], 'yaml');
    const { world, problems } = loadGatewayWorld(files, values.kind);
    const objects = renderedObjects(world);
    if (format === 'json') out(JSON.stringify(objects, null, 2));
    else
      out(
        objects.map((o) => stringify(o, { lineWidth: 0, aliasDuplicateObjects: false })).join('---\n') ||
          '# nothing to render',
      );
    return problems > 0 ? 2 : 0;
  },
};
