// Every kind's actions for one gateway, assembled into its wasm-shim configuration. Kind-agnostic:
// each engine's kind contributes through PolicyKind.actions; the topology (routes and their matches)
// is the same in every engine. Every path through the gateway is wired, with or without actions, so
// a request always meets the set of the route the proxy picked (wasm.ts).

import type { DataPlaneAction, PolicyEngine, ReferenceGrant } from '@cascade/core';
import { gatewayKey, pathHostnames, pathKey, renderContext, routeKey } from '@cascade/core';
import { type Provider, precedenceOf, proxyPort } from '../providers/providers.ts';
import {
  buildWasmConfig,
  type ContributedAction,
  DEFAULT_WIRING,
  type WasmAction,
  type WiringPath,
  type WiringResult,
  type WiringSettings,
} from '../shim/wasm.ts';

export interface GatewayWiringOptions {
  controller: string;
  referenceGrants?: ReferenceGrant[];
  /** Each kind's controller settings (e.g. limitadorNamespace), by kind name. */
  kindSettings?: ReadonlyMap<string, Readonly<Record<string, string>>>;
  wiring?: WiringSettings;
  /** The gateway's provider: its route precedence and listener ports (default: Envoy Gateway's order). */
  provider?: Provider;
}

/**
 * The gateway's wasm-shim configuration from every engine that contributes actions, with the paths
 * it was built from (what the proxy routes on: proxy.ts). Undefined: unknown gateway.
 */
export function gatewayWiring(
  engines: readonly PolicyEngine[],
  namespace: string,
  name: string,
  opts: GatewayWiringOptions,
): (WiringResult & { paths: WiringPath[] }) | undefined {
  const paths = gatewayPaths(engines, namespace, name, opts);
  if (!paths) return undefined;
  const gw = engines[0]?.topology.gateways.get(gatewayKey(namespace, name));
  const ports = (gw?.listeners ?? []).flatMap((l) =>
    l.port === undefined ? [] : [proxyPort(opts.provider, l.port)],
  );
  const result = buildWasmConfig(paths, opts.wiring ?? DEFAULT_WIRING, {
    precedence: precedenceOf(opts.provider),
    ports: [...new Set(ports)],
  });
  return { ...result, paths };
}

/** Every path through the gateway with its hostnames, port and each kind's actions (undefined: unknown gateway). */
export function gatewayPaths(
  engines: readonly PolicyEngine[],
  namespace: string,
  name: string,
  opts: GatewayWiringOptions,
): WiringPath[] | undefined {
  const topology = engines[0]?.topology;
  const gw = topology?.gateways.get(gatewayKey(namespace, name));
  if (!topology || !gw) return undefined;
  const byPath = new Map<string, WiringPath>();
  for (const pk of topology.pathsThrough(gatewayKey(namespace, name))) {
    const path = topology.paths.get(pk);
    if (!path) continue;
    const listener = gw.listeners.find((l) => l.name === path.listener);
    const route = topology.routes.get(routeKey(path.route.kind, path.route.namespace, path.route.name));
    byPath.set(pk, {
      path,
      hostnames: pathHostnames(listener?.hostname, route?.hostnames),
      route,
      actions: [],
      ...(listener?.port !== undefined ? { port: proxyPort(opts.provider, listener.port) } : {}),
    });
  }
  for (const engine of engines) {
    const actions = engine.kind.actions;
    if (!actions) continue;
    const ctx = renderContext(
      engine,
      namespace,
      name,
      opts.controller,
      undefined,
      opts.referenceGrants ?? [],
      opts.kindSettings?.get(engine.kind.kind) ?? {},
    );
    if (!ctx) continue;
    const contributed = actions(ctx);
    for (const p of ctx.paths) {
      const mine = contributed.get(pathKey(p.path));
      if (mine?.length)
        byPath.get(pathKey(p.path))?.actions.push(...mine.map((a) => asWasm(engine.kind.kind, a)));
    }
  }
  return [...byPath.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([, w]) => w);
}

/**
 * A kind's contribution as a wasm-shim action. Core's contract leaves the action's shape to the data
 * plane; a kind that gives something else is a programming error, said with the kind's name.
 */
function asWasm(kind: string, a: DataPlaneAction): ContributedAction {
  const x = a.action as Partial<WasmAction> | null;
  if (typeof x !== 'object' || x === null || typeof x.service !== 'string' || typeof x.scope !== 'string')
    throw new Error(
      `${kind}: PolicyKind.actions gave an action that is not a wasm-shim action (service, scope)`,
    );
  return a as ContributedAction;
}
