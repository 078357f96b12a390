// Enforced needs the decision point too (issue 41 item 3): with its gateway wired, a RateLimitPolicy
// is Enforced only while Limitador's Service has a ready endpoint (an AuthPolicy likewise Authorino's),
// read from the Service's EndpointSlices on a real API server; and a policy that is Enforced says
// what requests get when the service cannot answer (the failure mode the chart gives both binaries).
import { resolve } from 'node:path';
import { effectivePolicyCrd, type PolicyController, policyCrd } from '@cascade/core';
import {
  clientOf,
  createNamespace,
  createObjects,
  readObjects,
  startController,
} from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, providerCrds, waitFor } from '@cascade/envtest';
import { DEFAULT_WIRING, decisionPointFlags, WiringController, wiringGapsFor } from '@cascade/wiring';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GATEWAY_POLICY_KINDS } from '../src/manifest.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../../examples/gateway');
const RLP = '/apis/cascade.dev/v1alpha1/namespaces/infra/ratelimitpolicies/platform-limits';
const AP = '/apis/cascade.dev/v1alpha1/authpolicies';
const SLICES = '/apis/discovery.k8s.io/v1/namespaces/kuadrant-system/endpointslices';

type Cond = { type: string; status: string; reason: string; message: string };
const settingsOf = (which: 'auth' | 'ratelimit', mode?: string) =>
  Object.fromEntries(
    decisionPointFlags(which).map((f) => [f.key, f.flag.endsWith('failure-mode') && mode ? mode : f.default]),
  );

/** An EndpointSlice of Service kuadrant-system/`service` with one endpoint, ready or not. */
const slice = (service: string, ready: boolean) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: {
    name: `${service}-x1`,
    namespace: 'kuadrant-system',
    labels: { 'kubernetes.io/service-name': service },
  },
  addressType: 'IPv4',
  endpoints: [{ addresses: ['10.244.0.9'], conditions: { ready } }],
  ports: [{ name: 'grpc', port: 8081, protocol: 'TCP' }],
});

describe.skipIf(!apiServerTestsEnabled())(
  'Enforced requires the decision point (Authorino, Limitador)',
  () => {
    let env: Envtest;
    const controllers: PolicyController[] = [];
    let wiring: WiringController | undefined;
    const enforced = async (path = RLP) =>
      ((await env.call('GET', path)).body as { status?: { conditions?: Cond[] } }).status?.conditions?.find(
        (c) => c.type === 'Enforced',
      );
    const authEnforced = async () =>
      (
        (await env.call('GET', AP)).body as {
          items: { metadata: { name: string }; status?: { conditions?: Cond[] } }[];
        }
      ).items.map((p) => p.status?.conditions?.find((c) => c.type === 'Enforced'));

    beforeAll(async () => {
      env = await Envtest.start({
        crdObjects: [effectivePolicyCrd, ...GATEWAY_POLICY_KINDS.map((k) => policyCrd(k))],
      });
      await env.installCrds(providerCrds(['WasmPlugin', 'EnvoyFilter']));
      await createObjects(env, readObjects(EXAMPLES));
      await createNamespace(env, 'kuadrant-system');
      for (const kind of GATEWAY_POLICY_KINDS) {
        const which = kind.kind === 'AuthPolicy' ? 'auth' : 'ratelimit';
        controllers.push(
          await startController(env, kind, {
            requireWiring: true,
            dataPlane: wiringGapsFor(which),
            settings: settingsOf(which),
          }),
        );
      }
      wiring = new WiringController({
        client: clientOf(env),
        kinds: GATEWAY_POLICY_KINDS,
        name: 'wiring-controller',
        leaseDurationSeconds: 3,
        log: () => {},
        wiring: DEFAULT_WIRING,
      });
      await wiring.start();
    }, 120_000);
    afterAll(async () => {
      await wiring?.stop().catch(() => {});
      for (const c of controllers) await c.stop().catch(() => {});
      await env?.stop();
    });

    it('the gateway wired, no Limitador: MissingDependency naming its Service and the failure mode', async () => {
      const c = await waitFor('MissingDependency for Limitador', async () => {
        const e = await enforced();
        return e?.reason === 'MissingDependency' && e.message.includes('Limitador') ? e : undefined;
      });
      expect(c.status).toBe('False');
      expect(c.message).toBe(
        'Policy is not enforced: Limitador is not answering: its Service kuadrant-system/limitador-limitador has no endpoints (is it installed, in that namespace, and does its Service select its pods?); when Limitador cannot answer, requests are allowed unchecked (failure mode allow)',
      );
      // the AuthPolicies wait for Authorino, whose failure mode is deny (their gateway's auth wiring
      // may land after the rate limits', so first they may say it is not wired: also MissingDependency)
      const auth = await waitFor('AuthPolicies held back by Authorino', async () => {
        const cs = await authEnforced();
        return cs.length &&
          cs.every((x) => x?.reason === 'MissingDependency' && x.message.includes('Authorino'))
          ? cs
          : undefined;
      });
      for (const a of auth) expect(a!.message).toMatch(/Authorino is not answering: .* requests are denied/);
    }, 60_000);

    it("Limitador's endpoint ready: Enforced, saying the failure mode; unready again: not", async () => {
      expect((await env.call('POST', SLICES, slice('limitador-limitador', true))).status).toBe(201);
      const c = await waitFor('Enforced', async () => {
        const e = await enforced();
        return e?.status === 'True' ? e : undefined;
      });
      expect(c.message).toMatch(
        /; when Limitador cannot answer, requests are allowed unchecked \(failure mode allow\)$/,
      );
      // one kind's decision point says nothing of the other's
      expect((await authEnforced()).every((x) => x?.reason === 'MissingDependency')).toBe(true);
      const put = await env.call('PUT', `${SLICES}/limitador-limitador-x1`, {
        ...slice('limitador-limitador', false),
        metadata: {
          ...slice('limitador-limitador', false).metadata,
          resourceVersion: (
            (await env.call('GET', `${SLICES}/limitador-limitador-x1`)).body as {
              metadata: { resourceVersion: string };
            }
          ).metadata.resourceVersion,
        },
      });
      expect(put.status).toBe(200);
      const again = await waitFor('MissingDependency again', async () => {
        const e = await enforced();
        return e?.reason === 'MissingDependency' ? e : undefined;
      });
      expect(again.message).toContain('has no ready endpoint;');
    }, 60_000);

    it("Authorino's endpoint ready: the AuthPolicies are Enforced, saying requests are denied when it cannot answer", async () => {
      expect((await env.call('POST', SLICES, slice('authorino-authorino-authorization', true))).status).toBe(
        201,
      );
      const cs = await waitFor('AuthPolicies Enforced', async () => {
        const xs = await authEnforced();
        return xs.some((x) => x?.status === 'True') ? xs : undefined;
      });
      for (const x of cs.filter((y) => y?.status === 'True'))
        expect(x!.message).toMatch(
          /when Authorino cannot answer, requests are denied \(failure mode deny\)$/,
        );
    }, 60_000);
  },
);
