// Issue "core D/O engine" figures: full resolution of 60,000 paths and 10,000 policies, then
// incremental recomputation after gateway-level and route-level policy changes.
import { PolicyEngine, policyConditions } from '@cascade/core';
import { testLimitKind } from '@cascade/core/testing';
import { bumpFirstLimit, generateGatewayWorld } from '../gateway-topology.ts';
import { type Figure, ms, peakRssMiB, summarize } from '../report.ts';

const SCALE = { gateways: 200, listenersPerGateway: 5, routes: 20_000, rulesPerRoute: 3, policies: 10_000 };
const INPUT = '200 gateways x 5 listeners, 20,000 routes x 3 rules, 10,000 policies';

const bump = bumpFirstLimit;

export async function run(): Promise<Figure[]> {
  const world = generateGatewayWorld(SCALE, 'LimitPolicy');
  const figures: Figure[] = [];
  const fig = (name: string, value: number, unit: string, target?: string, input = INPUT) =>
    figures.push({ suite: 'core', name, value, unit, input, ...(target ? { target } : {}) });

  // Full resolution from scratch, 5 times on fresh engines (the VM's timing is noisy): median and min.
  const load = () => {
    const e = new PolicyEngine(testLimitKind);
    e.upsertGatewayClass({ name: 'cascade' });
    for (const g of world.gateways) e.upsertGateway(g);
    for (const r of world.routes) e.upsertRoute(r);
    for (const p of world.policies) e.upsertPolicy(p);
    return { engine: e, report: e.flush() };
  };
  const fullTimes: number[] = [];
  let engine!: PolicyEngine;
  let report!: ReturnType<PolicyEngine['flush']>;
  for (let i = 0; i < 5; i++) {
    engine = undefined as unknown as PolicyEngine; // let the previous run's engine go before timing
    (globalThis as { gc?: () => void }).gc?.();
    const t0 = process.hrtime.bigint();
    ({ engine, report } = load());
    fullTimes.push(ms(t0));
    if (i === 0) fig('peak RSS after full resolution', peakRssMiB(), 'MiB', '< 1024 MiB');
  }
  const full = summarize(fullTimes);
  fig('full resolution (median of 5)', full.median, 'ms', '< 1500 ms');
  fig('full resolution (min of 5)', Math.min(...fullTimes), 'ms');
  fig('paths resolved', engine.pathCount, 'paths');
  fig('distinct folds (shared chains)', report.folds, 'folds');
  const t1 = process.hrtime.bigint();
  let accepted = 0;
  for (const id of engine.policyIds()) if (policyConditions(engine, id)[0]?.status === 'True') accepted++;
  fig('status of every policy', ms(t1), 'ms');
  fig('policies accepted', accepted, 'policies');

  for (const level of ['gateway', 'route'] as const) {
    const candidates = world.policies.filter((p) =>
      p.metadata.name.startsWith(level === 'gateway' ? 'gw-policy-' : 'route-policy-'),
    );
    const times: number[] = [];
    const recomputed: number[] = [];
    let expectedOk = true;
    for (let i = 0; i < 200; i++) {
      const p = candidates[(i * 37) % candidates.length]!;
      const t = process.hrtime.bigint();
      engine.upsertPolicy(bump(p, i));
      const r = engine.flush();
      times.push(ms(t));
      recomputed.push(r.recomputed);
      if (level === 'gateway') {
        // Touches only the paths of the policy's own target (gateway or listener).
        const ref = (p.spec as { targetRef: { name: string; sectionName?: string } }).targetRef;
        const key = `Gateway:${p.metadata.namespace}/${ref.name}${ref.sectionName ? `#${ref.sectionName}` : ''}`;
        if (r.recomputed !== engine.topology.pathsThrough(key).size) expectedOk = false;
      }
    }
    const s = summarize(times);
    const target = level === 'route' ? '< 2 ms median' : undefined;
    fig(`${level}-level policy change: median`, s.median, 'ms', target, `${INPUT}; 200 changes`);
    fig(`${level}-level policy change: p99`, s.p99, 'ms', undefined, `${INPUT}; 200 changes`);
    const rs = summarize(recomputed);
    fig(
      `${level}-level policy change: paths recomputed (median)`,
      rs.median,
      'paths',
      undefined,
      `${INPUT}; 200 changes`,
    );
    fig(
      `${level}-level policy change: paths recomputed (max)`,
      rs.max,
      'paths',
      undefined,
      `${INPUT}; 200 changes`,
    );
    if (level === 'gateway')
      fig('gateway-level change touches only its target paths', expectedOk ? 1 : 0, 'bool (1 = yes)');
  }
  return figures;
}
