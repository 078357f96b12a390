// Issue "AuthPolicy and RateLimitPolicy" figures: resolution plus rendering (Limitador ConfigMaps,
// Authorino AuthConfigs) for 20,000 routes and 10,000 policies of one kind: full and incremental
// times and peak RSS, next to the core figures.
import { PolicyEngine, type PolicyKind, type PolicyObject, renderGateway } from '@cascade/core';
import type { GatewayWorld } from './gateway-topology.ts';
import { type Figure, ms, peakRssMiB, summarize } from './report.ts';

export const KIND_SCALE = {
  gateways: 200,
  listenersPerGateway: 5,
  routes: 20_000,
  rulesPerRoute: 3,
  policies: 10_000,
};
export const KIND_INPUT = '200 gateways x 5 listeners, 20,000 routes x 3 rules, 10,000 policies';

export function runKind(
  suite: string,
  kind: PolicyKind,
  world: GatewayWorld,
  change: (p: PolicyObject, n: number) => PolicyObject,
): Figure[] {
  const figures: Figure[] = [];
  const fig = (name: string, value: number, unit: string, input = KIND_INPUT) =>
    figures.push({ suite, name, value, unit, input });
  const controller = `${kind.kind.toLowerCase()}-controller`;
  const renderAllGateways = (e: PolicyEngine) => {
    let objects = 0;
    for (const g of world.gateways) objects += renderGateway(e, g.namespace, g.name, controller).size;
    return objects;
  };
  const fullTimes: number[] = [];
  let engine!: PolicyEngine;
  let objects = 0;
  for (let i = 0; i < 3; i++) {
    engine = undefined as unknown as PolicyEngine;
    (globalThis as { gc?: () => void }).gc?.();
    const t0 = process.hrtime.bigint();
    engine = new PolicyEngine(kind);
    engine.upsertGatewayClass({ name: 'cascade' });
    for (const g of world.gateways) engine.upsertGateway(g);
    for (const r of world.routes) engine.upsertRoute(r);
    for (const p of world.policies) engine.upsertPolicy(p);
    engine.flush();
    objects = renderAllGateways(engine);
    fullTimes.push(ms(t0));
    if (i === 0) fig('peak RSS after full resolution + rendering', peakRssMiB(), 'MiB');
  }
  fig('full resolution + rendering (median of 3)', summarize(fullTimes).median, 'ms');
  fig('objects rendered', objects, 'objects');
  const t1 = process.hrtime.bigint();
  renderAllGateways(engine);
  fig('rendering alone, every gateway', ms(t1), 'ms');
  // Incremental: a route-level policy change, re-resolved and its gateways re-rendered (what the
  // controller does per change).
  const candidates = world.policies.filter((p) => p.metadata.name.startsWith('route-policy-'));
  const times: number[] = [];
  for (let i = 0; i < 200; i++) {
    const p = candidates[(i * 37) % candidates.length]!;
    const t = process.hrtime.bigint();
    engine.upsertPolicy(change(p, i));
    const r = engine.flush();
    const gws = new Set(r.changed.map((pk) => pk.slice('Gateway:'.length, pk.indexOf('#'))));
    for (const gw of gws) {
      const [ns, name] = gw.split('/') as [string, string];
      renderGateway(engine, ns, name, controller);
    }
    times.push(ms(t));
  }
  const s = summarize(times);
  fig(
    'route-level policy change, resolved + re-rendered: median',
    s.median,
    'ms',
    `${KIND_INPUT}; 200 changes`,
  );
  fig('route-level policy change, resolved + re-rendered: p99', s.p99, 'ms', `${KIND_INPUT}; 200 changes`);
  return figures;
}
