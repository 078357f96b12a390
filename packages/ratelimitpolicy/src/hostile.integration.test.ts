// One bad object never stalls the rest (against a real kube-apiserver): a route with a 66-character
// name, a gateway with a 250-character name, and a tenant's RateLimitPolicy whose Limitador ConfigMap
// would be over the API server's size limit, next to ordinary policies. The ordinary ones are
// published and Enforced; the oversized one is refused before it is sent, named in the status of the
// policy it carries (Enforced=False, PublishFailed), counted, reported as an Event, and not retried in
// a loop.
import { effectivePolicyCrd, type PolicyController, policyCrd } from '@cascade/core';
import { createGateway, createRoute, startController } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rateLimitPolicyKind } from './kind.ts';

const NS = '/apis/cascade.dev/v1alpha1/namespaces/team';
const LONG_GW = `g${'w'.repeat(248)}z`;
const LONG_ROUTE = `r${'x'.repeat(64)}z`;
type Cond = { type: string; status: string; reason: string; message: string };

describe.skipIf(!apiServerTestsEnabled())('publishing under hostile input (kube-apiserver)', () => {
  let env: Envtest;
  let controller: PolicyController;
  const conds = async (name: string) =>
    (((await env.call('GET', `${NS}/ratelimitpolicies/${name}`)).body as { status?: { conditions?: Cond[] } })
      .status?.conditions ?? []) as Cond[];
  const enforced = async (name: string) => (await conds(name)).find((c) => c.type === 'Enforced');

  beforeAll(async () => {
    env = await Envtest.start({ crdObjects: [effectivePolicyCrd, policyCrd(rateLimitPolicyKind)] });
    for (const name of ['big', LONG_GW]) await createGateway(env, { namespace: 'team', name });
    for (const [name, gateway, host] of [
      ['on-big-a', 'big', 'a.example.com'],
      ['on-big-b', 'big', 'b.example.com'],
      ['on-big-c', 'big', 'c.example.com'],
      [LONG_ROUTE, LONG_GW, 'long.example.com'],
    ] as const)
      await createRoute(env, { namespace: 'team', name, gateway, hostnames: [host] });
    // 200 KB of top-level predicates, which every effective rule carries as its context: its
    // EffectivePolicies (5 rules) are over what the API server stores; and long counters on 16 rates:
    // the Limitador limits (one entry per limit, rate and route, each with every counter) are over
    // what a ConfigMap holds
    const when = Array.from({ length: 60 }, (_, i) => ({
      predicate: `request.path == '/${String(i).padStart(3, '0')}${'a'.repeat(3350)}'`,
    }));
    const counters = Array.from({ length: 16 }, (_, i) => ({
      expression: `request.headers['x-${String(i).padStart(2, '0')}${'c'.repeat(990)}']`,
    }));
    const limits = Object.fromEntries(
      Array.from({ length: 5 }, (_, i) => [
        `l${i}`,
        { rates: Array.from({ length: 16 }, (_, r) => ({ limit: 10 + i, window: `${r + 1}m` })), counters },
      ]),
    );
    for (const [name, target, spec] of [
      ['huge', { kind: 'Gateway', name: 'big' }, { limits, when }],
      [
        'ok',
        { kind: 'Gateway', name: LONG_GW },
        { limits: { global: { rates: [{ limit: 100, window: '1m' }] } } },
      ],
      [
        'small-on-big',
        { kind: 'HTTPRoute', name: 'on-big-b' },
        { limits: { tiny: { rates: [{ limit: 3, window: '1m' }] } } },
      ],
    ] as const) {
      const r = await env.call('POST', `${NS}/ratelimitpolicies`, {
        apiVersion: 'cascade.dev/v1alpha1',
        kind: 'RateLimitPolicy',
        metadata: { name, namespace: 'team' },
        spec: { targetRef: { group: 'gateway.networking.k8s.io', ...target }, ...spec },
      });
      expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(201);
    }
    controller = await startController(env, rateLimitPolicyKind);
  }, 120_000);

  afterAll(async () => {
    await controller?.stop();
    await env?.stop();
  });

  it('every valid object is published despite the bad one; names and labels valid for long names', async () => {
    await waitFor(
      'ok Enforced',
      async () => ((await enforced('ok'))?.status === 'True' ? true : undefined),
      30_000,
    );
    const cms = (
      await env.call('GET', '/api/v1/namespaces/team/configmaps?labelSelector=cascade.dev%2Fmanaged-by')
    ).body as { items: { metadata: { name: string; annotations?: Record<string, string> } }[] };
    const small = cms.items.find(
      (c) => c.metadata.annotations?.['cascade.dev/gateway'] === `team/${LONG_GW}`,
    );
    expect(small, 'the long gateway has its ConfigMap').toBeDefined();
    expect(small!.metadata.name.length).toBeLessThanOrEqual(253);
    const eps = (await env.call('GET', `${NS}/effectivepolicies`)).body as {
      items: { spec: { targetRef: { name: string } }; metadata: { labels: Record<string, string> } }[];
    };
    const longEp = eps.items.find((e) => e.spec.targetRef.name === LONG_ROUTE);
    expect(longEp, 'the 66-character route has its EffectivePolicy').toBeDefined();
    expect(longEp!.metadata.labels['cascade.dev/target-name']!.length).toBeLessThanOrEqual(63);
  });

  it("the oversized object is refused before sending, named in its policy's status, counted, an Event; no retry loop", async () => {
    const c = await waitFor(
      'huge PublishFailed',
      async () => {
        const e = await enforced('huge');
        return e?.reason === 'PublishFailed' ? e : undefined;
      },
      30_000,
    );
    expect(c.status).toBe('False');
    // the huge policy alone is left out of Limitador's limits: the others' are published
    expect(c.message).toMatch(
      /ConfigMap team\/limitador-limits-big: its limits were left out of the Limitador limits: with them they take [\d,]+ bytes/,
    );
    const cm = (await env.call('GET', '/api/v1/namespaces/team/configmaps/limitador-limits-big')).body as {
      data: Record<string, string>;
    };
    expect(cm.data['limits.yaml']).toContain('tiny from RateLimitPolicy team/small-on-big');
    expect(cm.data['limits.yaml']).not.toContain('team/huge');
    // its EffectivePolicies are over the size too: refused before sending, named
    expect(c.message).toMatch(/EffectivePolicy team\/ratelimitpolicy-httproute-on-big-a: object too large/);
    const text = await controller.metrics.render();
    // the families operators alert on
    await waitFor('cascade_policies counts the PublishFailed policy', async () =>
      /\ncascade_policies\{kind="RateLimitPolicy",condition="Enforced",status="False",reason="PublishFailed"\} 1\n/.test(
        await controller.metrics.render(),
      )
        ? true
        : undefined,
    );
    expect(text).toMatch(/\ncascade_reconciles_total\{lane="sync",outcome="(full|incremental)"\} \d+/);
    expect(Number(/\ncascade_publish_failing_objects (\d+)/.exec(text)?.[1])).toBeGreaterThanOrEqual(1);
    expect(Number(/\ncascade_publish_failures_total (\d+)/.exec(text)?.[1])).toBeGreaterThanOrEqual(1);
    await waitFor('an Event on the policy', async () => {
      const evs = (await env.call('GET', '/api/v1/namespaces/team/events')).body as {
        items: { reason: string; involvedObject: { name: string }; message: string }[];
      };
      return evs.items.some((e) => e.reason === 'PublishFailed' && e.involvedObject.name === 'huge')
        ? true
        : undefined;
    });
    // refused writes wait for their input to change: the failure count does not grow by itself
    await controller.idle();
    const before = controller.ledger.failures.get(
      'EffectivePolicy team/ratelimitpolicy-httproute-on-big-a',
    )?.attempts;
    await new Promise((r) => setTimeout(r, 2500));
    await controller.idle();
    expect(
      controller.ledger.failures.get('EffectivePolicy team/ratelimitpolicy-httproute-on-big-a')?.attempts,
    ).toBe(before);
    // the other policy is untouched
    expect((await enforced('ok'))?.status).toBe('True');
  });

  it('removing the offending policy clears the failure', async () => {
    expect((await env.call('DELETE', `${NS}/ratelimitpolicies/huge`)).status).toBe(200);
    await waitFor(
      'no failing objects',
      async () => (controller.ledger.failures.size === 0 ? true : undefined),
      30_000,
    );
  });
});
