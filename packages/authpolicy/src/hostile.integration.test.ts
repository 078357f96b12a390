// About 1,000 objects mixing every kind of bad input with valid ones, against a real kube-apiserver
// and both controllers: 66+ character route names, a 250-character gateway name, CEL typos in
// AuthPolicy predicates, conditions whose estimated cost is over the limit, defaults whose condition
// errors, overrides whose condition errors, policies whose target does not exist, and route owners
// adding an authentication method under an override. Afterwards every valid policy is Enforced with
// its objects published, every invalid one has a precise reason, every route under an invalid
// AuthPolicy is closed (deny-all AuthConfig), nothing is retried forever, and no lease was lost.
import { effectivePolicyCrd, type PolicyController, policyCrd } from '@cascade/core';
import { createGateway, createNamespace, createRoute, startController } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { rateLimitPolicyKind } from '@cascade/ratelimitpolicy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authConfigCrd } from './authconfig-crd.ts';
import { authPolicyKind } from './kind.ts';

type Cond = { type: string; status: string; reason: string; message: string };
type Obj = {
  metadata: { name: string; namespace: string; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  status?: { conditions?: Cond[] };
};
const GWAPI = 'gateway.networking.k8s.io';
const NAMESPACES = Array.from({ length: 10 }, (_, i) => `t${i}`);
const ROUTES_PER_NS = 30;
const LONG_GW = `g${'w'.repeat(248)}z`;
const routeName = (i: number) => (i % 5 === 0 ? `r${i}-${'x'.repeat(64)}` : `r${i}`);
const jwt = { jwt: { issuerUrl: 'https://sso.example.com' } };
const rate = (n: number) => ({ rates: [{ limit: n, window: '1m' }] });
const costly = (() => {
  let body = 'true';
  for (let i = 5; i >= 0; i--) body = `[0,1,2,3,4,5,6,7,8,9].all(x${i}, ${body})`;
  return body;
})();

// conditions that would stall the controller: nested loops (refused at admission), a list grown by
// chained maps (refused at admission from the sizes it reaches), and one whose work only shows when it
// runs (each of 1,000 iterations compares a 1,000-item list whole): stopped by the run-time meter, then Invalid
const grown = `[[0,1,2,3,4,5,6,7,8,9]]${'.map(x, x+x+x+x+x+x+x+x+x+x)'.repeat(6)}.all(y, y.all(z, z >= 0))`;
const L1000 = JSON.stringify(Array.from({ length: 1000 }, (_, i) => i));
const greedy = `[${L1000}].all(big, big.map(i, big).all(l, l == big))`;
const COSTLY = [costly, grown, greedy];
const COSTLY_WANT = [
  /condition: estimated cost \d+ exceeds the limit/,
  /condition: estimated cost \d+ exceeds the limit/,
  /Invalid.*spec.defaults.condition: runtime cost limit: evaluation stopped after \d+ cost units/,
];

/** What each policy is, and what its status must say. */
type Want = { kind: 'AuthPolicy' | 'RateLimitPolicy'; ns: string; name: string; expect: 'enforced' | RegExp };

describe.skipIf(!apiServerTestsEnabled())('both controllers under ~1,000 hostile and valid objects', () => {
  let env: Envtest;
  const controllers: PolicyController[] = [];
  const wants: Want[] = [];
  let objects = 0;
  const post = async (path: string, body: unknown) => {
    const r = await env.call('POST', path, body);
    if (r.status !== 201) throw new Error(`${path}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
    objects++;
  };
  const policy = (kind: Want['kind'], ns: string, name: string, spec: unknown, expect: Want['expect']) => {
    wants.push({ kind, ns, name, expect });
    const plural = kind === 'AuthPolicy' ? 'authpolicies' : 'ratelimitpolicies';
    return post(`/apis/cascade.dev/v1alpha1/namespaces/${ns}/${plural}`, {
      apiVersion: 'cascade.dev/v1alpha1',
      kind,
      metadata: { name, namespace: ns },
      spec,
    });
  };
  const get = async (path: string) => {
    const r = await env.call('GET', path);
    return r.status === 200 ? (r.body as Obj) : undefined;
  };

  beforeAll(async () => {
    env = await Envtest.start({
      crdObjects: [
        effectivePolicyCrd,
        policyCrd(authPolicyKind),
        policyCrd(rateLimitPolicyKind),
        authConfigCrd,
      ],
    });
    for (const ns of ['infra', 'cascade-system', ...NAMESPACES]) await createNamespace(env, ns);
    const listeners = [
      { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } },
    ];
    for (const name of ['main', LONG_GW]) await createGateway(env, { namespace: 'infra', name, listeners });
    objects += 2 + NAMESPACES.length + 3;
    // the platform: an authentication override and a rate-limit default on the main gateway
    await policy(
      'AuthPolicy',
      'infra',
      'platform-auth',
      {
        targetRef: { group: GWAPI, kind: 'Gateway', name: 'main' },
        overrides: { strategy: 'merge', rules: { authentication: { sso: jwt } } },
      },
      'enforced',
    );
    await policy(
      'RateLimitPolicy',
      'infra',
      'platform-limits',
      {
        targetRef: { group: GWAPI, kind: 'Gateway', name: 'main' },
        defaults: { strategy: 'merge', limits: { global: rate(1000) } },
      },
      'enforced',
    );
    // an override whose condition errors: applied anyway (fail safe), said in status
    await policy(
      'RateLimitPolicy',
      'infra',
      'platform-cap',
      {
        targetRef: { group: GWAPI, kind: 'Gateway', name: LONG_GW },
        overrides: {
          strategy: 'merge',
          condition: 'self.limits.nope.rates[0].limit > 1',
          limits: { cap: rate(10) },
        },
      },
      'enforced',
    );
    for (const ns of NAMESPACES)
      for (let i = 0; i < ROUTES_PER_NS; i++) {
        const name = routeName(i);
        await createRoute(env, {
          namespace: ns,
          name,
          gateway: i % 10 === 9 ? LONG_GW : 'main',
          gatewayNamespace: 'infra',
          hostnames: [`${ns}-${i}.example.com`],
        });
        objects++;
        const target = { group: GWAPI, kind: 'HTTPRoute', name };
        const mod = i % 6;
        // every route: a valid rate limit
        await policy(
          'RateLimitPolicy',
          ns,
          `rl-${i}`,
          { targetRef: target, limits: { own: rate(10 + i) } },
          'enforced',
        );
        if (mod === 0)
          await policy(
            'AuthPolicy',
            ns,
            `ap-${i}`,
            {
              targetRef: target,
              rules: {
                authorization: {
                  mine: { patternMatching: { patterns: [{ selector: 'a', operator: 'eq', value: 'b' }] } },
                },
              },
            },
            'enforced',
          );
        else if (mod === 1)
          // a CEL typo only Cascade can see: Invalid, and the route is closed
          await policy(
            'AuthPolicy',
            ns,
            `ap-${i}`,
            {
              targetRef: target,
              rules: { authentication: { sso: { ...jwt, when: [{ predicate: 'request.path ==' }] } } },
            },
            /Invalid.*predicate.*CEL does not parse/,
          );
        else if (mod === 2)
          await policy(
            'RateLimitPolicy',
            ns,
            `rl-costly-${i}`,
            {
              targetRef: target,
              defaults: { condition: COSTLY[Math.floor(i / 6) % 3], limits: { x: rate(1) } },
            },
            COSTLY_WANT[Math.floor(i / 6) % 3] as RegExp,
          );
        else if (mod === 3)
          // a default whose condition errors is skipped: partially enforced, said in status
          await policy(
            'RateLimitPolicy',
            ns,
            `rl-err-${i}`,
            {
              targetRef: target,
              defaults: { condition: 'self.limits.nope.rates[0].limit > 1', limits: { y: rate(2) } },
            },
            /PartiallyEnforced.*the default was skipped/,
          );
        else if (mod === 4)
          await policy(
            'AuthPolicy',
            ns,
            `ap-missing-${i}`,
            { targetRef: { ...target, name: `missing-${i}` }, rules: { authentication: { k: jwt } } },
            /TargetNotFound/,
          );
        // tries to escape the platform's authentication override by adding a method
        else
          await policy(
            'AuthPolicy',
            ns,
            `ap-escape-${i}`,
            { targetRef: target, rules: { authentication: { anyone: { anonymous: {} } } } },
            i % 10 === 9 ? 'enforced' : /Overridden|PartiallyEnforced/, // (no override on the long gateway)
          );
      }
    for (const kind of [authPolicyKind, rateLimitPolicyKind])
      controllers.push(
        await startController(env, kind, { leaseNamespace: 'cascade-system', leaseDurationSeconds: 5 }),
      );
  }, 300_000);

  afterAll(async () => {
    for (const c of controllers) await c.stop();
    await env?.stop();
  }, 60_000);

  it('every policy gets its precise status: valid ones Enforced, each invalid one naming its problem', async () => {
    expect(objects).toBeGreaterThan(900);
    const statusOf = async (w: Want) => {
      const plural = w.kind === 'AuthPolicy' ? 'authpolicies' : 'ratelimitpolicies';
      return (
        (await get(`/apis/cascade.dev/v1alpha1/namespaces/${w.ns}/${plural}/${w.name}`))?.status
          ?.conditions ?? []
      );
    };
    const text = (cs: Cond[]) => cs.map((c) => `${c.type}=${c.status}/${c.reason}: ${c.message}`).join(' | ');
    const wrong = async () => {
      const out: string[] = [];
      for (const w of wants) {
        const cs = await statusOf(w);
        const enforced = cs.find((c) => c.type === 'Enforced');
        const ok =
          w.expect === 'enforced'
            ? (enforced?.status === 'True' && enforced.reason === 'Enforced') ||
              (enforced?.reason === 'PartiallyEnforced' && w.name.startsWith('platform'))
            : w.expect.test(text(cs));
        if (!ok) out.push(`${w.kind} ${w.ns}/${w.name}: ${text(cs) || 'no status'}`);
      }
      return out;
    };
    await waitFor(
      'every status as expected',
      async () => ((await wrong()).length === 0 ? true : undefined),
      180_000,
    ).catch(async (e) => {
      throw new Error(`${(e as Error).message}\n${(await wrong()).slice(0, 10).join('\n')}`);
    });
  }, 240_000);

  it('valid objects are published; routes under an invalid AuthPolicy are closed; nothing can escape the override', async () => {
    const acs = (
      (await env.call('GET', '/apis/authorino.kuadrant.io/v1beta3/authconfigs')).body as { items: Obj[] }
    ).items;
    const ofRoute = (ns: string, i: number) =>
      acs.find((a) => a.metadata.annotations?.['cascade.dev/route'] === `HTTPRoute/${ns}/${routeName(i)}`);
    for (const ns of NAMESPACES)
      for (let i = 0; i < ROUTES_PER_NS; i++) {
        const ac = ofRoute(ns, i);
        if (i % 10 === 9) continue; // the long gateway has no AuthPolicy
        expect(ac, `${ns}/${routeName(i)} has an AuthConfig`).toBeDefined();
        const spec = ac!.spec as {
          authentication?: Record<string, unknown>;
          authorization?: Record<string, unknown>;
        };
        if (i % 6 === 1)
          expect(ac!.metadata.annotations?.['cascade.dev/invalid-policies']).toBe(`${ns}/ap-${i}`);
        else expect(Object.keys(spec.authentication ?? {})).toEqual(['sso']); // the override's method only
      }
    const cms = ((await env.call('GET', '/api/v1/namespaces/infra/configmaps')).body as { items: Obj[] })
      .items;
    expect(cms.filter((c) => c.metadata.name.startsWith('limitador-limits-')).length).toBe(2);
    const eps = (
      (await env.call('GET', '/apis/cascade.dev/v1alpha1/effectivepolicies')).body as { items: Obj[] }
    ).items;
    expect(eps.length).toBeGreaterThanOrEqual(NAMESPACES.length * ROUTES_PER_NS);
  });

  it('nothing is retried forever, no write fails, and no lease was lost', async () => {
    for (const c of controllers) await c.idle();
    const writes = controllers.map((c) => c.writes.get());
    await new Promise((r) => setTimeout(r, 3000));
    for (const c of controllers) await c.idle();
    expect(controllers.map((c) => c.writes.get())).toEqual(writes);
    for (const c of controllers) {
      const m = await c.metrics.render();
      expect(Number(/\ncascade_publish_failing_objects (\d+)/.exec(m)?.[1])).toBe(0);
      expect(Number(/\ncascade_lease_errors_total (\d+)/.exec(m)?.[1])).toBe(0);
      expect(Number(/\ncascade_leader_transitions_total (\d+)/.exec(m)?.[1])).toBe(1);
      expect(c.leader).toBe(true);
    }
  });
});
