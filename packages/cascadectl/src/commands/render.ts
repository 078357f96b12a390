// cascadectl render FILES...: the downstream objects the controllers publish (a Limitador limits
// ConfigMap per gateway, an Authorino AuthConfig per route), from the effective policies.
import { type RenderedObject, renderAll } from '@cascade/core';
import { PROVIDER_TITLES, WIRING_CARRIERS } from '@cascade/wiring';
import { stringify } from 'yaml';
import { type Command, err, oneOf, out } from '../cli.ts';
import { kindOption, loadGatewayWorld } from './gateway-common.ts';
import { gatewayWirings } from './wiring.ts';

/** What the kind controllers render (AuthConfigs, Limitador limits), without the gateway wiring. */
export function renderedObjects(world: ReturnType<typeof loadGatewayWorld>['world']): RenderedObject[] {
  const all: RenderedObject[] = [];
  for (const engine of world.engines.values())
    all.push(
      ...renderAll(engine, `${engine.kind.kind.toLowerCase()}-controller`, world.referenceGrants).values(),
    );
  return sortObjects(all);
}

function sortObjects(all: RenderedObject[]): RenderedObject[] {
  return all.sort((a, b) => {
    const ka = `${a.kind}/${a.metadata.namespace}/${a.metadata.name}`;
    const kb = `${b.kind}/${b.metadata.namespace}/${b.metadata.name}`;
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  });
}

export const renderCommand: Command = {
  name: 'render',
  summary: `what the controllers publish: Authorino AuthConfigs, Limitador limits, and each gateway's wasm-shim wiring (${WIRING_CARRIERS.map((r) => r.kind).join(' / ')} and their clusters)`,
  usage:
    'cascadectl render FILES... [--kind AuthPolicy|RateLimitPolicy] [--wasm-config] [-o yaml|json]   (--wasm-config: only the bare wasm-shim configuration of each gateway)',
  options: { ...kindOption, output: { type: 'string', short: 'o' }, 'wasm-config': { type: 'boolean' } },
  run(values, files) {
    const format = oneOf('output', values.output, ['yaml', 'json'], 'yaml');
    const { world, problems } = loadGatewayWorld(files, values.kind);
    const wirings = gatewayWirings(world);
    for (const w of wirings) {
      for (const p of w.wiring.problems) err(`warning: gateway ${w.gateway}: ${p.route}: ${p.reason}`);
      if (!w.provider)
        err(
          `note: gateway ${w.gateway}: its GatewayClass controller ${w.controllerName ? `"${w.controllerName}"` : '(unknown class)'} is neither ${Object.values(PROVIDER_TITLES).join(' nor ')}: no wiring object (see --wasm-config for the configuration)`,
        );
    }
    if (values['wasm-config']) {
      const configs = Object.fromEntries(wirings.map((w) => [w.gateway, w.wiring.config]));
      out(
        format === 'json'
          ? JSON.stringify(configs, null, 2)
          : stringify(configs, { lineWidth: 0, aliasDuplicateObjects: false }),
      );
      return problems > 0 ? 2 : 0;
    }
    const objects = sortObjects([...renderedObjects(world), ...wirings.flatMap((w) => w.objects)]);
    if (format === 'json') out(JSON.stringify(objects, null, 2));
    else
      out(
        objects.map((o) => stringify(o, { lineWidth: 0, aliasDuplicateObjects: false })).join('---\n') ||
          '# nothing to render',
      );
    return problems > 0 ? 2 : 0;
  },
};
