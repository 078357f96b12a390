// Enforced means enforced (issue 27 item 5): an AuthPolicy or RateLimitPolicy is Enforced only when
// every gateway it reaches has its data plane wired (a WasmPlugin or EnvoyExtensionPolicy written by
// the wiring-controller). Without the providers' CRDs, and with them but no wiring-controller, the
// policies say MissingDependency naming the gateway, with a Warning Event; once the wiring-controller
// writes the gateway's WasmPlugin they are Enforced; when it goes, they are not; when nothing fits in
// its size limit and it publishes a configuration that denies everything, they say so.
import { resolve } from 'node:path';
import { effectivePolicyCrd, type PolicyController, policyCrd } from '@cascade/core';
import { clientOf, createObjects, readObjects, startController } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, providerCrds, waitFor } from '@cascade/envtest';
import { DEFAULT_WIRING, WiringController, wiringGaps } from '@cascade/wiring';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GATEWAY_POLICY_KINDS } from '../src/manifest.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../../examples/gateway');
const RLP = '/apis/cascade.dev/v1alpha1/namespaces/infra/ratelimitpolicies/platform-limits';

type Cond = { type: string; status: string; reason: string; message: string };

describe.skipIf(!apiServerTestsEnabled())('Enforced requires the data-plane wiring', () => {
  let env: Envtest;
  const controllers: PolicyController[] = [];
  let wiring: WiringController | undefined;
  /** A wiring-controller on the test's API server, with a configuration size limit if given. */
  const startWiring = async (maxConfigBytes = DEFAULT_WIRING.maxConfigBytes) => {
    wiring = new WiringController({
      client: clientOf(env),
      kinds: GATEWAY_POLICY_KINDS,
      name: 'wiring-controller',
      leaseDurationSeconds: 3,
      log: () => {},
      wiring: { ...DEFAULT_WIRING, maxConfigBytes },
    });
    await wiring.start();
  };
  const enforced = async () =>
    ((await env.call('GET', RLP)).body as { status?: { conditions?: Cond[] } }).status?.conditions?.find(
      (c) => c.type === 'Enforced',
    );

  beforeAll(async () => {
    env = await Envtest.start({
      crdObjects: [effectivePolicyCrd, ...GATEWAY_POLICY_KINDS.map((k) => policyCrd(k))],
    });
    await createObjects(env, readObjects(EXAMPLES));
    for (const kind of GATEWAY_POLICY_KINDS)
      controllers.push(await startController(env, kind, { requireWiring: true, dataPlane: wiringGaps }));
  }, 120_000);
  afterAll(async () => {
    await wiring?.stop().catch(() => {});
    for (const c of controllers) await c.stop().catch(() => {});
    await env?.stop();
  });

  it("without the providers' CRDs: MissingDependency naming the gateway, and a Warning Event", async () => {
    const c = await waitFor('MissingDependency', async () => {
      const e = await enforced();
      return e?.reason === 'MissingDependency' ? e : undefined;
    });
    expect(c.status).toBe('False');
    expect(c.message).toMatch(
      /gateway infra\/main is not wired to its data plane: neither Istio's WasmPlugin nor Envoy Gateway's EnvoyExtensionPolicy is served/,
    );
    // the CRDs named, with their versions: not "install the provider's CRDs" and a search (issue 41)
    expect(c.message).toMatch(
      /install the provider's CRDs: istio: wasmplugins\.extensions\.istio\.io v1alpha1, envoyfilters\.networking\.istio\.io v1alpha3; envoy-gateway: envoyextensionpolicies\.gateway\.envoyproxy\.io v1alpha1/,
    );
    await waitFor('the Event', async () => {
      const r = await env.call('GET', '/api/v1/namespaces/infra/events');
      return (r.body as { items: { reason: string; involvedObject: { name: string } }[] }).items.some(
        (e) => e.reason === 'MissingDependency' && e.involvedObject.name === 'platform-limits',
      )
        ? true
        : undefined;
    });
  });

  it('the CRDs installed, no wiring-controller yet: still MissingDependency, saying nothing was written', async () => {
    await env.installCrds(providerCrds(['WasmPlugin', 'EnvoyFilter']));
    const c = await waitFor(
      'the message about the missing WasmPlugin',
      async () => {
        const e = await enforced();
        return e?.message.includes('no WasmPlugin or EnvoyExtensionPolicy has been written for it')
          ? e
          : undefined;
      },
      30_000,
    );
    expect(c.reason).toBe('MissingDependency');
  }, 40_000);

  it('the wiring-controller writes the WasmPlugin: Enforced; the WasmPlugin gone: not', async () => {
    await startWiring();
    const c = await waitFor(
      'Enforced',
      async () => {
        const e = await enforced();
        return e && e.reason !== 'MissingDependency' ? e : undefined;
      },
      30_000,
    );
    // platform-limits is partially enforced (team-c unsets its limit): True either way
    expect(c.status).toBe('True');
    for (const k of ['authpolicies', 'ratelimitpolicies']) {
      const items = (
        (await env.call('GET', `/apis/cascade.dev/v1alpha1/${k}`)).body as {
          items: { status?: { conditions?: Cond[] } }[];
        }
      ).items;
      for (const p of items)
        expect(p.status?.conditions?.find((x) => x.type === 'Enforced')?.reason).not.toBe(
          'MissingDependency',
        );
    }
    await wiring?.stop();
    wiring = undefined;
    expect(
      (
        await env.call(
          'DELETE',
          '/apis/extensions.istio.io/v1alpha1/namespaces/infra/wasmplugins/cascade-main',
        )
      ).status,
    ).toBe(200);
    await waitFor('MissingDependency again', async () =>
      (await enforced())?.reason === 'MissingDependency' ? true : undefined,
    );
  }, 60_000);

  it('nothing fits the size limit: the WasmPlugin denies everything, and the policies are not Enforced', async () => {
    await startWiring(400);
    const plugin = await waitFor('the fail-closed WasmPlugin', async () => {
      const r = await env.call(
        'GET',
        '/apis/extensions.istio.io/v1alpha1/namespaces/infra/wasmplugins/cascade-main',
      );
      const o = r.body as {
        metadata?: { annotations?: Record<string, string> };
        spec?: { pluginConfig?: { actionSets?: { name: string }[] } };
      };
      return r.status === 200 && o.metadata?.annotations?.['cascade.dev/failed-closed'] ? o : undefined;
    });
    expect(plugin.spec?.pluginConfig?.actionSets?.map((a) => a.name)).toEqual(['cascade:failed-closed']);
    const c = await waitFor('Enforced=False naming it', async () => {
      const e = await enforced();
      return e?.reason === 'MissingDependency' && /every request is denied/.test(e.message) ? e : undefined;
    });
    expect(c.status).toBe('False');
    expect(c.message).toMatch(/gateway infra\/main: the gateway's configuration takes/);
  }, 60_000);

  it('routes refused for the size budget: the policies reaching them are not Enforced, the others are', async () => {
    await wiring?.stop();
    const PLUGIN = '/apis/extensions.istio.io/v1alpha1/namespaces/infra/wasmplugins/cascade-main';
    type Plugin = { metadata: { annotations?: Record<string, string> }; spec: { pluginConfig: unknown } };
    await startWiring();
    const whole = await waitFor('the whole configuration', async () => {
      const o = (await env.call('GET', PLUGIN)).body as Plugin;
      return o.metadata?.annotations?.['cascade.dev/failed-closed'] === undefined && o.spec?.pluginConfig
        ? o
        : undefined;
    });
    const size = Buffer.byteLength(JSON.stringify(whole.spec.pluginConfig));
    await wiring!.stop();
    await startWiring(Math.floor(size * 0.85));
    const refused = await waitFor('some routes refused', async () => {
      const o = (await env.call('GET', PLUGIN)).body as Plugin;
      return o.metadata?.annotations?.['cascade.dev/refused-routes'];
    });
    const routes = refused.split(',');
    expect(routes.length).toBeGreaterThan(0);
    const conds = async () => {
      const out: { id: string; c?: Cond }[] = [];
      for (const k of ['authpolicies', 'ratelimitpolicies'])
        for (const p of (
          (await env.call('GET', `/apis/cascade.dev/v1alpha1/${k}`)).body as {
            items: { metadata: { namespace: string; name: string }; status?: { conditions?: Cond[] } }[];
          }
        ).items)
          out.push({
            id: `${k}/${p.metadata.namespace}/${p.metadata.name}`,
            c: p.status?.conditions?.find((x) => x.type === 'Enforced'),
          });
      return out;
    };
    const all = await waitFor('a policy on a refused route not Enforced', async () => {
      const cs = await conds();
      return cs.some(
        (x) =>
          x.c?.reason === 'MissingDependency' &&
          /refused by the gateway wiring's size budget/.test(x.c.message),
      )
        ? cs
        : undefined;
    });
    const named = all.filter((x) => /size budget/.test(x.c?.message ?? ''));
    for (const x of named) {
      expect(x.c!.status).toBe('False');
      expect(routes.some((r) => x.c!.message.includes(r))).toBe(true);
    }
    // policies whose routes all kept their sets stay Enforced
    expect(all.some((x) => x.c?.status === 'True')).toBe(true);
  }, 90_000);
});
