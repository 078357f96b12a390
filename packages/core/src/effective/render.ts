// Rendering: a kind's `render` hook applied to every gateway's resolved paths. Pure; the controller
// publishes the result, the CLI prints it.
import type { ReferenceGrant, RenderContext, RenderedObject, RenderPath } from '../kind.ts';
import type { PolicyEngine } from '../merge/engine.ts';
import { hostnamesIntersect } from '../topology/hostnames.ts';
import { gatewayKey, pathKey } from '../topology/types.ts';

/** The more specific of two intersecting hostnames (`a.b.io` over `*.b.io`; the longer wildcard). */
function narrower(a: string, b: string): string {
  if (!a.startsWith('*')) return a;
  if (!b.startsWith('*')) return b;
  return a.length >= b.length ? a : b;
}

/** Request hosts a route serves through a listener: its hostnames narrowed by the listener's. */
export function pathHostnames(
  listenerHostname: string | undefined,
  routeHostnames: string[] | undefined,
): string[] {
  const route = routeHostnames && routeHostnames.length > 0 ? routeHostnames : undefined;
  if (!route) return [listenerHostname ?? '*'];
  if (!listenerHostname) return [...route];
  const out = route
    .filter((h) => hostnamesIntersect(h, listenerHostname))
    .map((h) => narrower(h, listenerHostname));
  return [...new Set(out)];
}

/** The render context of one gateway (undefined: unknown gateway). */
export function renderContext(
  engine: PolicyEngine,
  namespace: string,
  name: string,
  controller: string,
  uid?: string,
  referenceGrants: ReferenceGrant[] = [],
  settings: Readonly<Record<string, string>> = {},
): RenderContext | undefined {
  const key = gatewayKey(namespace, name);
  const gw = engine.topology.gateways.get(key);
  if (!gw) return undefined;
  const paths: RenderPath[] = [];
  for (const pk of engine.topology.pathsThrough(key)) {
    const path = engine.topology.paths.get(pk);
    const result = engine.result(pk);
    if (!path || !result) continue;
    const listener = gw.listeners.find((l) => l.name === path.listener);
    const route = engine.topology.routes.get(`${path.route.kind}:${path.route.namespace}/${path.route.name}`);
    paths.push({ path, result, hostnames: pathHostnames(listener?.hostname, route?.hostnames) });
  }
  paths.sort((a, b) => (pathKey(a.path) < pathKey(b.path) ? -1 : 1));
  return {
    gateway: { namespace, name, ...(uid ? { uid } : {}) },
    paths,
    controller,
    referenceGrants,
    settings,
  };
}

export const renderedKey = (o: RenderedObject): string =>
  `${o.apiVersion}/${o.kind}/${o.metadata.namespace}/${o.metadata.name}`;

/** Everything the kind renders for one gateway, keyed by apiVersion/kind/namespace/name. */
export function renderGateway(
  engine: PolicyEngine,
  namespace: string,
  name: string,
  controller: string,
  uid?: string,
  referenceGrants: ReferenceGrant[] = [],
  settings: Readonly<Record<string, string>> = {},
): Map<string, RenderedObject> {
  const out = new Map<string, RenderedObject>();
  const render = engine.kind.render;
  const ctx = render && renderContext(engine, namespace, name, controller, uid, referenceGrants, settings);
  if (!render || !ctx) return out;
  for (const o of render(ctx)) out.set(renderedKey(o), o);
  return out;
}

/** Everything the kind renders, over every gateway. */
export function renderAll(
  engine: PolicyEngine,
  controller: string,
  referenceGrants: ReferenceGrant[] = [],
  settings: Readonly<Record<string, string>> = {},
): Map<string, RenderedObject> {
  const out = new Map<string, RenderedObject>();
  for (const gw of engine.topology.gateways.values())
    for (const [k, o] of renderGateway(
      engine,
      gw.namespace,
      gw.name,
      controller,
      undefined,
      referenceGrants,
      settings,
    ))
      out.set(k, o);
  return out;
}
