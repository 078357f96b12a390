// Every kind's actions for one gateway, assembled into its wasm-shim configuration. Kind-agnostic:
// each engine's kind contributes through PolicyKind.actions; the topology (routes and their matches)
// is the same in every engine.
import { renderContext } from '../effective/render.ts';
import type { ReferenceGrant } from '../kind.ts';
import type { PolicyEngine } from '../merge/engine.ts';
import { pathKey, routeKey } from '../topology/types.ts';
import {
  buildWasmConfig,
  type ContributedAction,
  DEFAULT_WIRING,
  type WiringPath,
  type WiringResult,
  type WiringSettings,
} from './wasm.ts';

export interface GatewayWiringOptions {
  controller: string;
  referenceGrants?: ReferenceGrant[];
  /** Each kind's controller settings (e.g. limitadorNamespace), by kind name. */
  kindSettings?: ReadonlyMap<string, Readonly<Record<string, string>>>;
  wiring?: WiringSettings;
}

/** The gateway's wasm-shim configuration from every engine that contributes actions (undefined: unknown gateway). */
export function gatewayWiring(
  engines: readonly PolicyEngine[],
  namespace: string,
  name: string,
  opts: GatewayWiringOptions,
): WiringResult | undefined {
  const byPath = new Map<string, WiringPath>();
  let known = false;
  for (const engine of engines) {
    const actions = engine.kind.actions;
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
    known = true;
    if (!actions) continue;
    const contributed = actions(ctx);
    for (const p of ctx.paths) {
      const k = pathKey(p.path);
      const mine: ContributedAction[] | undefined = contributed.get(k);
      if (!mine?.length) continue;
      let w = byPath.get(k);
      if (!w)
        byPath.set(
          k,
          (w = {
            path: p.path,
            hostnames: p.hostnames,
            route: engine.topology.routes.get(
              routeKey(p.path.route.kind, p.path.route.namespace, p.path.route.name),
            ),
            actions: [],
          }),
        );
      w.actions.push(...mine);
    }
  }
  if (!known) return undefined;
  const paths = [...byPath.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([, w]) => w);
  return buildWasmConfig(paths, opts.wiring ?? DEFAULT_WIRING);
}
