import { PolicyEngine } from '@cascade/core';
import { testLimitKind } from '@cascade/core/testing';
import { generateGatewayWorld } from '/work/main/tools/bench/src/gateway-topology.ts';

const world = generateGatewayWorld(
  { gateways: 200, listenersPerGateway: 5, routes: 20_000, rulesPerRoute: 3, policies: 10_000 },
  'LimitPolicy',
);
let t = performance.now();
const engine = new PolicyEngine(testLimitKind);
for (const g of world.gateways) engine.upsertGateway(g);
console.log('gw', performance.now() - t);
t = performance.now();
for (const r of world.routes) engine.upsertRoute(r);
console.log('routes', performance.now() - t);
t = performance.now();
for (const p of world.policies) engine.upsertPolicy(p);
console.log('policies', performance.now() - t);
t = performance.now();
engine.flush();
console.log('flush', performance.now() - t);
