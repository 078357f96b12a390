// The gateway data-plane wiring from files: each gateway's wasm-shim configuration, its provider (by
// the GatewayClass controllerName) and the provider objects the gateway-wiring writer publishes.
import type { RenderedObject } from '@cascade/core';
import { WIRING_CONTROLLER } from '@cascade/distribution';
import {
  DEFAULT_PROVIDERS,
  DEFAULT_WIRING,
  gatewayWiring,
  hasActions,
  type Provider,
  providerOf,
  type WiringPath,
  type WiringResult,
  wiringObjects,
} from '@cascade/wiring';
import type { GatewayWorld } from '../world.ts';

export interface GatewayWiringView {
  gateway: string;
  controllerName?: string;
  provider?: Provider;
  /** The configuration and the paths it was built from. */
  wiring: WiringResult & { paths: WiringPath[] };
  objects: RenderedObject[];
}

/** Who writes the wiring (the `cascade.dev/managed-by` label): the binary's name, from the manifest. */
export { WIRING_CONTROLLER };

/** Every gateway's wiring, in namespace/name order (gateways without any action are left out). */
export function gatewayWirings(world: GatewayWorld): GatewayWiringView[] {
  const engines = [...world.engines.values()];
  const topology = engines[0]?.topology;
  if (!topology) return [];
  const out: GatewayWiringView[] = [];
  const gateways = [...topology.gateways.values()].sort((a, b) =>
    `${a.namespace}/${a.name}` < `${b.namespace}/${b.name}` ? -1 : 1,
  );
  for (const gw of gateways) {
    const controllerName = topology.classes.get(gw.gatewayClassName)?.controllerName;
    const provider = providerOf(controllerName, DEFAULT_PROVIDERS);
    const wiring = gatewayWiring(engines, gw.namespace, gw.name, {
      controller: WIRING_CONTROLLER,
      referenceGrants: world.referenceGrants,
      ...(provider ? { provider } : {}),
    });
    if (!wiring || !hasActions(wiring.config)) continue;
    out.push({
      gateway: `${gw.namespace}/${gw.name}`,
      ...(controllerName ? { controllerName } : {}),
      ...(provider ? { provider } : {}),
      wiring,
      objects: provider
        ? wiringObjects(
            provider,
            { gateway: gw, controller: WIRING_CONTROLLER },
            wiring,
            DEFAULT_WIRING,
            DEFAULT_PROVIDERS,
          )
        : [],
    });
  }
  return out;
}
