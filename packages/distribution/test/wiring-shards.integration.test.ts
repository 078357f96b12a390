// A large Istio gateway's configuration split over several WasmPlugins (wiring shim/shards.ts), on a
// real kube-apiserver with Istio's real CRDs: every shard is accepted, each route's sets are in
// exactly one shard, a route's change rewrites exactly one WasmPlugin, the steady state writes
// nothing, and when the configuration shrinks the shards it no longer needs are deleted.
import { policyCrd } from '@cascade/core';
import { clientOf, createObjects } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, providerCrds, waitFor } from '@cascade/envtest';
import {
  DEFAULT_WIRING,
  isHostCaseGuard,
  SHARD_ANNOTATION,
  type WasmConfig,
  WiringController,
  wasmPluginName,
} from '@cascade/wiring';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GATEWAY_POLICY_KINDS } from '../src/manifest.ts';

const G = 'gateway.networking.k8s.io';
const WASMPLUGINS = '/apis/extensions.istio.io/v1alpha1/namespaces/infra/wasmplugins';
const ROUTES = 30;
type Plugin = {
  metadata: { name: string; resourceVersion: string; annotations?: Record<string, string> };
  spec: { pluginConfig: WasmConfig };
};

const route = (i: number, path = `/svc${i}`) => ({
  apiVersion: `${G}/v1`,
  kind: 'HTTPRoute',
  metadata: { name: `r${i}`, namespace: 'infra' },
  spec: {
    parentRefs: [{ name: 'many' }],
    hostnames: [`h${i}.shards.example.com`],
    rules: [{ matches: [{ path: { type: 'PathPrefix', value: path } }] }],
  },
});

describe.skipIf(!apiServerTestsEnabled())('wiring shards on a real API server', () => {
  let env: Envtest;
  let controller: WiringController;
  const plugins = async () =>
    ((await env.call('GET', WASMPLUGINS)).body as { items: Plugin[] }).items.sort((a, b) =>
      a.metadata.name < b.metadata.name ? -1 : 1,
    );

  beforeAll(async () => {
    env = await Envtest.start({
      crdObjects: [
        ...GATEWAY_POLICY_KINDS.map((k) => policyCrd(k)),
        ...providerCrds(['WasmPlugin', 'EnvoyFilter']),
      ],
    });
    await createObjects(env, [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'infra' } },
      {
        apiVersion: `${G}/v1`,
        kind: 'GatewayClass',
        metadata: { name: 'istio' },
        spec: { controllerName: 'istio.io/gateway-controller' },
      },
      {
        apiVersion: `${G}/v1`,
        kind: 'Gateway',
        metadata: { name: 'many', namespace: 'infra' },
        spec: { gatewayClassName: 'istio', listeners: [{ name: 'http', port: 80, protocol: 'HTTP' }] },
      },
      {
        apiVersion: 'cascade.dev/v1alpha1',
        kind: 'RateLimitPolicy',
        metadata: { name: 'gw-limit', namespace: 'infra' },
        spec: {
          targetRef: { group: G, kind: 'Gateway', name: 'many' },
          defaults: { limits: { all: { rates: [{ limit: 100, window: '1m' }] } } },
        },
      },
      ...Array.from({ length: ROUTES }, (_, i) => route(i)),
    ] as never);
    controller = new WiringController({
      client: clientOf(env),
      kinds: GATEWAY_POLICY_KINDS,
      name: 'wiring-controller',
      leaseDurationSeconds: 3,
      wiring: { ...DEFAULT_WIRING, shardBytes: 2_000 },
      log: () => {},
    });
    await controller.start();
    await waitFor('the WasmPlugins', async () => ((await plugins()).length > 1 ? true : undefined));
    await controller.idle();
  }, 120_000);
  afterAll(async () => {
    await controller?.stop().catch(() => {});
    await env?.stop();
  });

  it('splits the configuration: every shard accepted, every route in exactly one', async () => {
    const all = await plugins();
    expect(all.length).toBeGreaterThan(1);
    const count = Number(all[0]!.metadata.annotations?.[SHARD_ANNOTATION]?.split('/')[1]);
    expect(count).toBeGreaterThanOrEqual(all.length);
    for (const p of all) {
      const index = Number(p.metadata.annotations?.[SHARD_ANNOTATION]?.split('/')[0]);
      expect(p.metadata.name).toBe(wasmPluginName('many', index));
    }
    const hosts = all.flatMap((p) =>
      p.spec.pluginConfig.actionSets
        .filter((s) => !isHostCaseGuard(s))
        .map((s) => s.routeRuleConditions.hostnames[0]),
    );
    expect(hosts.sort()).toEqual(Array.from({ length: ROUTES }, (_, i) => `h${i}.shards.example.com`).sort());
    // the `*` host-case guard in every shard
    for (const p of all)
      expect(
        p.spec.pluginConfig.actionSets
          .filter((s) => isHostCaseGuard(s))
          .map((s) => s.routeRuleConditions.hostnames),
      ).toEqual([['*']]);
  });

  it("a route's change rewrites exactly the WasmPlugin holding it; the steady state writes nothing", async () => {
    const before = Object.fromEntries(
      (await plugins()).map((p) => [p.metadata.name, p.metadata.resourceVersion]),
    );
    const holder = (await plugins()).find((p) =>
      p.spec.pluginConfig.actionSets.some(
        (s) => s.routeRuleConditions.hostnames[0] === 'h7.shards.example.com',
      ),
    )!.metadata.name;
    const writes = controller.writes.get();
    const r = await env.call(
      'PATCH',
      `/apis/${G}/v1/namespaces/infra/httproutes/r7`,
      { spec: route(7, '/moved').spec },
      'application/merge-patch+json',
    );
    expect(r.status).toBe(200);
    await waitFor('the moved path', async () =>
      JSON.stringify((await plugins()).map((p) => p.spec)).includes('/moved') ? true : undefined,
    );
    await controller.idle();
    const after = Object.fromEntries(
      (await plugins()).map((p) => [p.metadata.name, p.metadata.resourceVersion]),
    );
    expect(Object.keys(after).filter((k) => after[k] !== before[k])).toEqual([holder]);
    expect(controller.writes.get() - writes).toBe(1);
    const settled = controller.writes.get();
    controller.resyncNow();
    await controller.idle();
    expect(controller.writes.get()).toBe(settled);
  });

  it('a configuration that shrinks below the threshold is one WasmPlugin again; the other shards are deleted', async () => {
    for (let i = 1; i < ROUTES; i++)
      expect((await env.call('DELETE', `/apis/${G}/v1/namespaces/infra/httproutes/r${i}`)).status).toBe(200);
    await waitFor('one WasmPlugin left', async () => ((await plugins()).length === 1 ? true : undefined));
    await controller.idle();
    const [only] = await plugins();
    expect(only!.metadata.name).toBe('cascade-many');
    expect(only!.metadata.annotations?.[SHARD_ANNOTATION]).toBeUndefined();
    expect(only!.spec.pluginConfig.actionSets.filter((s) => !isHostCaseGuard(s))).toHaveLength(1);
  });
});
