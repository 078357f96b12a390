// The wiring-controller against a real kube-apiserver with the providers' real CRDs (Istio's
// WasmPlugin and EnvoyFilter from istio.io/api, Envoy Gateway's EnvoyExtensionPolicy and
// EnvoyPatchPolicy from envoyproxy/gateway, fetched by the set-up step): the objects it writes are
// accepted by those schemas, it writes once and then nothing in steady state, a route change
// rewrites exactly the one object that carries it, a route whose match cannot be written is refused
// alone (denied, with an Event), and a gateway's objects go when it has nothing left to wire.
import { resolve } from 'node:path';
import { policyCrd } from '@cascade/core';
import { clientOf, createObjects, readObjects } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, providerCrds, waitFor } from '@cascade/envtest';
import { isHostCaseGuard, type WasmConfig, WiringController } from '@cascade/wiring';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GATEWAY_POLICY_KINDS } from '../src/manifest.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../../examples/gateway');
const WASMPLUGINS = '/apis/extensions.istio.io/v1alpha1/namespaces/infra/wasmplugins';
const ENVOYFILTERS = '/apis/networking.istio.io/v1alpha3/namespaces/infra/envoyfilters';
const EEPS = '/apis/gateway.envoyproxy.io/v1alpha1/namespaces/infra/envoyextensionpolicies';
const EPPS = '/apis/gateway.envoyproxy.io/v1alpha1/namespaces/infra/envoypatchpolicies';
type Item = { metadata: { name: string; resourceVersion: string }; spec: Record<string, unknown> };

describe.skipIf(!apiServerTestsEnabled())('wiring-controller on a real API server', () => {
  let env: Envtest;
  let controller: WiringController;
  const logs: { msg: string; fields?: Record<string, unknown> }[] = [];
  const list = async (path: string) => {
    const r = await env.call('GET', path);
    return r.status === 200 ? (r.body as { items: Item[] }).items : [];
  };

  beforeAll(async () => {
    env = await Envtest.start({
      crdObjects: [...GATEWAY_POLICY_KINDS.map((k) => policyCrd(k)), ...providerCrds()],
    });
    await createObjects(env, readObjects(EXAMPLES));
    // a second gateway run by Envoy Gateway, with one route and one limit
    await createObjects(env, [
      {
        apiVersion: 'gateway.networking.k8s.io/v1',
        kind: 'GatewayClass',
        metadata: { name: 'eg' },
        spec: { controllerName: 'gateway.envoyproxy.io/gatewayclass-controller' },
      },
      {
        apiVersion: 'gateway.networking.k8s.io/v1',
        kind: 'Gateway',
        metadata: { name: 'edge', namespace: 'infra' },
        spec: { gatewayClassName: 'eg', listeners: [{ name: 'http', port: 80, protocol: 'HTTP' }] },
      },
      {
        apiVersion: 'gateway.networking.k8s.io/v1',
        kind: 'HTTPRoute',
        metadata: { name: 'edge-api', namespace: 'infra' },
        spec: {
          parentRefs: [{ name: 'edge' }],
          hostnames: ['edge.example.com'],
          rules: [{ matches: [{ path: { type: 'PathPrefix', value: '/api' }, method: 'GET' }] }],
        },
      },
      {
        apiVersion: 'cascade.dev/v1alpha1',
        kind: 'RateLimitPolicy',
        metadata: { name: 'edge-limit', namespace: 'infra' },
        spec: {
          targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'edge-api' },
          limits: { calls: { rates: [{ limit: 10, window: '1s' }] } },
        },
      },
    ] as never);
    controller = new WiringController({
      client: clientOf(env),
      kinds: GATEWAY_POLICY_KINDS,
      name: 'wiring-controller',
      leaseDurationSeconds: 3,
      log: (_level, msg, fields) => logs.push({ msg, ...(fields ? { fields } : {}) }),
    });
    await controller.start();
    await waitFor('the WasmPlugin of infra/main', async () =>
      (await list(WASMPLUGINS)).length ? true : undefined,
    );
    await controller.idle();
  }, 120_000);
  afterAll(async () => {
    await controller?.stop().catch(() => {});
    await env?.stop();
  });

  it("writes Istio's objects for the Istio class: accepted by the real CRDs", async () => {
    const [plugin] = await list(WASMPLUGINS);
    expect(plugin!.metadata.name).toBe('cascade-main');
    const spec = plugin!.spec as {
      phase: string;
      url: string;
      pluginConfig: WasmConfig;
      targetRefs: unknown[];
    };
    expect(spec.phase).toBe('STATS');
    expect(spec.targetRefs).toEqual([{ group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'main' }]);
    // one action set per route rule of the example that any policy reaches, each calling its AuthConfig
    // (routes without policy get sets without actions; the host-case guard denies on its own scope)
    const withActions = spec.pluginConfig.actionSets.filter(
      (s) => s.actions.length > 0 && !isHostCaseGuard(s),
    );
    expect(withActions.length).toBeGreaterThanOrEqual(4);
    for (const s of withActions)
      expect(
        s.actions.some(
          (a) => a.service === 'auth-service' && a.scope.endsWith('.authconfig.cascade.internal'),
        ),
      ).toBe(true);
    expect((await list(ENVOYFILTERS)).map((f) => f.metadata.name).sort()).toEqual([
      'cascade-main-auth',
      'cascade-main-ratelimit',
    ]);
  });

  it("writes Envoy Gateway's objects for the Envoy Gateway class", async () => {
    const [eep] = await list(EEPS);
    expect(eep!.metadata.name).toBe('cascade-edge');
    const wasm = (eep!.spec as { wasm: { rootID: string; failOpen: boolean; config: WasmConfig }[] })
      .wasm[0]!;
    expect(wasm.rootID).toBe('kuadrant_wasm_shim');
    expect(wasm.failOpen).toBe(false);
    expect(
      wasm.config.actionSets.filter((s) => !isHostCaseGuard(s)).map((s) => s.routeRuleConditions),
    ).toEqual([
      {
        hostnames: ['edge.example.com'],
        predicates: [
          "request.method == 'GET'",
          "(request.url_path == '/api' || request.url_path.startsWith('/api/'))",
        ],
      },
    ]);
    expect((await list(EPPS)).map((p) => p.metadata.name).sort()).toEqual([
      'cascade-edge-auth',
      'cascade-edge-ratelimit',
    ]);
  });

  it('steady state: a full resync writes nothing', async () => {
    const before = controller.writes.get();
    controller.resyncNow();
    await controller.idle();
    expect(controller.writes.get()).toBe(before);
    expect(controller.skipped.get()).toBeGreaterThan(0);
  });

  it("a route change rewrites exactly its gateway's configuration object, once", async () => {
    const versions = async () =>
      Object.fromEntries(
        [
          ...(await list(WASMPLUGINS)),
          ...(await list(ENVOYFILTERS)),
          ...(await list(EEPS)),
          ...(await list(EPPS)),
        ].map((o) => [o.metadata.name, o.metadata.resourceVersion]),
      );
    const before = await versions();
    const writes = controller.writes.get();
    const patched = await env.call(
      'PATCH',
      '/apis/gateway.networking.k8s.io/v1/namespaces/infra/httproutes/edge-api',
      { spec: { rules: [{ matches: [{ path: { type: 'Exact', value: '/api/v2' }, method: 'POST' }] }] } },
      'application/merge-patch+json',
    );
    expect(patched.status).toBe(200);
    await waitFor('the new predicates', async () => {
      const [eep] = await list(EEPS);
      const config = (eep!.spec as { wasm: { config: WasmConfig }[] }).wasm[0]!.config;
      return config.actionSets[0]!.routeRuleConditions.predicates?.includes("request.url_path == '/api/v2'")
        ? true
        : undefined;
    });
    await controller.idle();
    const after = await versions();
    const changed = Object.keys(after).filter((k) => after[k] !== before[k]);
    expect(changed).toEqual(['cascade-edge']);
    expect(controller.writes.get() - writes).toBe(1);
    // sent as a JSON patch of what changed (an Update by the controller), not applied whole again
    const eep = (await env.call('GET', `${EEPS}/cascade-edge`)).body as {
      metadata: { managedFields: { manager: string; operation: string }[] };
    };
    expect(eep.metadata.managedFields).toContainEqual(
      expect.objectContaining({ manager: 'wiring-controller', operation: 'Update' }),
    );
    // and what it wrote is what the controller renders: a full resync writes nothing
    const settled = controller.writes.get();
    controller.resyncNow();
    await controller.idle();
    expect(controller.writes.get()).toBe(settled);
  });

  it('a route whose regex RE2 cannot compile is refused alone: denied, with a WiringRefused Event', async () => {
    await createObjects(env, [
      {
        apiVersion: 'gateway.networking.k8s.io/v1',
        kind: 'HTTPRoute',
        metadata: { name: 'bad-regex', namespace: 'infra' },
        spec: {
          parentRefs: [{ name: 'edge' }],
          hostnames: ['edge.example.com'],
          rules: [{ matches: [{ path: { type: 'RegularExpression', value: '^/(a)\\1$' } }] }],
        },
      },
      {
        apiVersion: 'cascade.dev/v1alpha1',
        kind: 'RateLimitPolicy',
        metadata: { name: 'bad-limit', namespace: 'infra' },
        spec: {
          targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'bad-regex' },
          limits: { calls: { rates: [{ limit: 1, window: '1s' }] } },
        },
      },
    ] as never);
    const config = await waitFor('the refused route in the configuration', async () => {
      const [eep] = await list(EEPS);
      const c = (eep!.spec as { wasm: { config: WasmConfig }[] }).wasm[0]!.config;
      // every route has a set, with or without policy: wait until the refused route's limit is in it
      const sets = c.actionSets.filter((s) => !isHostCaseGuard(s));
      return sets.length === 2 && sets[1]!.actions.length > 0 ? { actionSets: sets } : undefined;
    });
    // the good route first, untouched; the refused one last, sent to a scope no AuthConfig declares
    expect(config.actionSets[0]!.actions.map((a) => a.service)).toEqual(['ratelimit-service']);
    expect(config.actionSets[1]!.actions).toEqual([
      expect.objectContaining({ service: 'auth-service', scope: 'refused.cascade.internal' }),
    ]);
    const event = await waitFor('the Event on the route', async () => {
      const r = await env.call('GET', '/api/v1/namespaces/infra/events');
      return (
        r.body as { items: { reason: string; message: string; involvedObject: { name: string } }[] }
      ).items.find((e) => e.reason === 'WiringRefused' && e.involvedObject.name === 'bad-regex');
    });
    expect(event.message).toMatch(/path\.value .*its requests are denied/);
  });

  it('a gateway with nothing left to wire loses its objects (no garbage collector here: the controller deletes them)', async () => {
    for (const name of ['edge-limit', 'bad-limit'])
      expect(
        (await env.call('DELETE', `/apis/cascade.dev/v1alpha1/namespaces/infra/ratelimitpolicies/${name}`))
          .status,
      ).toBe(200);
    await waitFor('the Envoy Gateway objects deleted', async () =>
      (await list(EEPS)).length + (await list(EPPS)).length === 0 ? true : undefined,
    );
    // the Istio gateway keeps its objects
    expect((await list(WASMPLUGINS)).length).toBe(1);
  });
});
