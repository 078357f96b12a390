// Integration tests against a real kube-apiserver (tools/envtest): the RateLimitPolicy controller
// publishes EffectivePolicies and status, converges on changes, issues no writes in steady state,
// survives a restart and an API server restart, and keeps working next to invalid policies.
import {
  controllerBinding,
  controllerClusterRole,
  controllerRoles,
  editClusterRole,
  effectivePolicyCrd,
  type PolicyController,
  policyCrd,
  viewClusterRole,
} from '@cascade/core';
import { newController as controllerOf, createGateway, createRoute } from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { trace } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rateLimitPolicyKind } from './kind.ts';

const RLP = '/apis/cascade.dev/v1alpha1/namespaces/team/ratelimitpolicies';
const LIMITADOR = { limitadorNamespace: 'kuadrant-system' };
const EP = '/apis/cascade.dev/v1alpha1/namespaces/team/effectivepolicies';
const lim = (n: number) => ({ rates: [{ limit: n, window: '1m' }] });
// Reconcile spans, as an OpenTelemetry collector would receive them.
const spans = new InMemorySpanExporter();
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }));

const until = waitFor;

describe.skipIf(!apiServerTestsEnabled())('RateLimitPolicy controller against kube-apiserver', () => {
  let env: Envtest;
  let controller: PolicyController;
  const newController = (identity = 'a') => controllerOf(env, rateLimitPolicyKind, { identity });
  const rlp = (name: string, spec: unknown) =>
    env.call('POST', RLP, {
      apiVersion: 'cascade.dev/v1alpha1',
      kind: 'RateLimitPolicy',
      metadata: { name, namespace: 'team' },
      spec,
    });
  const get = async (path: string) => {
    const r = await env.call('GET', path);
    return r.status === 200
      ? (r.body as {
          spec: Record<string, unknown>;
          status?: { conditions?: { type: string; status: string; reason: string; message: string }[] };
        })
      : undefined;
  };

  beforeAll(async () => {
    env = await Envtest.start({ crdObjects: [effectivePolicyCrd, policyCrd(rateLimitPolicyKind)] });
    await createGateway(env, { namespace: 'team' });
    for (const name of ['api', 'web']) await createRoute(env, { namespace: 'team', name });
    controller = newController();
    await controller.start();
  }, 120_000);
  afterAll(async () => {
    await controller?.stop().catch(() => {});
    await env?.stop();
  });

  it('publishes EffectivePolicies and status for a gateway default and a route policy', async () => {
    expect(
      (
        await rlp('platform', {
          targetRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'gw' },
          defaults: { strategy: 'merge', limits: { global: lim(100) } },
        })
      ).status,
    ).toBe(201);
    expect(
      (
        await rlp('api-own', {
          targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'api' },
          limits: { user: lim(10) },
        })
      ).status,
    ).toBe(201);
    const api = await until('EffectivePolicy for api', async () => {
      const o = await get(`${EP}/ratelimitpolicy-httproute-api`);
      return o && Object.keys((o.spec.paths as { rules: object }[])[0]!.rules).length === 2 ? o : undefined;
    });
    expect(
      (api.spec.paths as { rules: Record<string, { source: { name: string }; as: string }> }[])[0]!.rules,
    ).toMatchObject({
      'limits.global': { source: { name: 'platform' }, as: 'default' },
      'limits.user': { source: { name: 'api-own' }, as: 'intent' },
    });
    const web = await until('EffectivePolicy for web', () => get(`${EP}/ratelimitpolicy-httproute-web`));
    expect(web.spec.sources).toEqual([{ kind: 'RateLimitPolicy', namespace: 'team', name: 'platform' }]);
    await until('gateway-level EffectivePolicy', () => get(`${EP}/ratelimitpolicy-gateway-gw`));
    const status = await until('status', async () => (await get(`${RLP}/platform`))?.status?.conditions);
    expect(status.map((c) => `${c.type}=${c.reason}`)).toEqual(['Accepted=Accepted', 'Enforced=Enforced']);
  });

  it('changing a policy changes exactly the affected EffectivePolicies; deleting converges back', async () => {
    await controller.idle();
    const before = controller.writes.get();
    const cur = (await get(`${RLP}/api-own`)) as unknown as { metadata: object; spec: object };
    await env.call('PUT', `${RLP}/api-own`, {
      ...cur,
      apiVersion: 'cascade.dev/v1alpha1',
      kind: 'RateLimitPolicy',
      spec: {
        targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'api' },
        limits: { user: lim(20) },
      },
    });
    await until('api updated', async () => {
      const o = await get(`${EP}/ratelimitpolicy-httproute-api`);
      return JSON.stringify(o?.spec).includes('"limit":20') ? o : undefined;
    });
    await controller.idle();
    // one EffectivePolicy (api), the changed policy's status (generation) and the gateway's Limitador
    // ConfigMap (the limit's value changed) at most
    expect(controller.writes.get() - before).toBeLessThanOrEqual(3);
    // The change was reconciled incrementally: one route, not all of them; its span says so.
    expect(controller.reconcileStats.incremental).toBeGreaterThan(0);
    const wrote = spans
      .getFinishedSpans()
      .filter(
        (x) =>
          x.name === 'reconcile' &&
          x.attributes['cascade.key'] === 'sync' &&
          x.attributes['cascade.outcome'] === 'incremental',
      )
      .filter((x) => (x.attributes['cascade.writes'] as number) > 0);
    expect(wrote.length).toBeGreaterThan(0);
    expect(wrote.at(-1)!.attributes).toMatchObject({
      'cascade.kind': 'RateLimitPolicy',
      'cascade.key': 'sync',
      'cascade.full': false,
      'cascade.routes': 1,
    });
    await env.call('DELETE', `${RLP}/api-own`);
    await until('api back to the default only', async () => {
      const o = await get(`${EP}/ratelimitpolicy-httproute-api`);
      return o && Object.keys((o.spec.paths as { rules: object }[])[0]!.rules).join() === 'limits.global'
        ? o
        : undefined;
    });
    // What the incremental reconciles left is exactly what a full pass wants: a full resync writes nothing.
    await controller.idle();
    const settled = controller.writes.get();
    const fulls = controller.reconcileStats.full;
    controller.resyncNow();
    await until('full resync', async () => (controller.reconcileStats.full > fulls ? true : undefined));
    await controller.idle();
    expect(controller.writes.get()).toBe(settled);
  });

  it('in steady state issues zero writes; a restarted controller converges with zero writes', async () => {
    await controller.idle();
    await new Promise((r) => setTimeout(r, 500));
    const w = controller.writes.get();
    await new Promise((r) => setTimeout(r, 1000));
    expect(controller.writes.get()).toBe(w);
    await controller.stop();
    controller = newController('b');
    await controller.start();
    await until('leader', async () => (controller.leader ? true : undefined));
    await new Promise((r) => setTimeout(r, 500));
    await controller.idle();
    expect(controller.writes.get()).toBe(0);
    expect(controller.skipped.get()).toBeGreaterThan(0);
  }, 60_000);

  it('a policy the API server rejects never reaches the controller; a semantically invalid one is Invalid', async () => {
    const rejected = await rlp('bad-crd', {
      targetRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'gw' },
      limits: { a: lim(1) },
      defaults: {},
    });
    expect(rejected.status).toBe(422);
    expect(
      (
        await rlp('bad-target', {
          targetRef: { group: 'gateway.networking.k8s.io', kind: 'Service', name: 'svc' },
          limits: { a: lim(1) },
        })
      ).status,
    ).toBe(201);
    const conds = await until(
      'Invalid status',
      async () => (await get(`${RLP}/bad-target`))?.status?.conditions,
    );
    expect(conds[0]).toMatchObject({ type: 'Accepted', status: 'False', reason: 'Invalid' });
    expect(conds[0]!.message).toContain('spec.targetRef.kind: RateLimitPolicy cannot target Service');
    expect((await get(`${RLP}/platform`))?.status?.conditions?.[0]?.reason).toBe('Accepted');
  });

  it('reconnects and converges after the API server restarts', async () => {
    await env.stopApiServer();
    await new Promise((r) => setTimeout(r, 500));
    await env.startApiServer();
    expect(
      (
        await rlp('after-restart', {
          targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'web' },
          limits: { burst: lim(5) },
        })
      ).status,
    ).toBe(201);
    await until(
      'web updated after restart',
      async () => {
        const o = await get(`${EP}/ratelimitpolicy-httproute-web`);
        return JSON.stringify(o?.spec).includes('limits.burst') ? o : undefined;
      },
      40_000,
    );
  }, 90_000);

  it('RBAC: view reads EffectivePolicies but cannot write them; the controller has what it uses, no more', async () => {
    const RBAC = '/apis/rbac.authorization.k8s.io/v1';
    for (const role of [
      viewClusterRole([rateLimitPolicyKind]),
      editClusterRole([rateLimitPolicyKind]),
      controllerClusterRole(rateLimitPolicyKind, 'ratelimitpolicy-controller', LIMITADOR),
    ])
      expect((await env.call('POST', `${RBAC}/clusterroles`, role)).status).toBe(201);
    for (const ns of ['cascade-system', 'kuadrant-system'])
      await env.call('POST', '/api/v1/namespaces', { metadata: { name: ns } });
    for (const o of controllerRoles(
      rateLimitPolicyKind,
      'ratelimitpolicy-controller',
      'cascade-system',
      LIMITADOR,
    )) {
      const { namespace } = (o as { metadata: { namespace: string } }).metadata;
      const plural = (o as { kind: string }).kind === 'Role' ? 'roles' : 'rolebindings';
      expect((await env.call('POST', `${RBAC}/namespaces/${namespace}/${plural}`, o)).status).toBe(201);
    }
    expect(
      (
        await env.call(
          'POST',
          `${RBAC}/clusterrolebindings`,
          controllerBinding('ratelimitpolicy-controller', 'cascade-system'),
        )
      ).status,
    ).toBe(201);
    // The aggregation into `view` is kube-controller-manager's job (not running here): bind the role
    // to a user directly and check the label that aggregation selects on.
    expect(
      (viewClusterRole([rateLimitPolicyKind]).metadata as { labels: Record<string, string> }).labels[
        'rbac.authorization.k8s.io/aggregate-to-view'
      ],
    ).toBe('true');
    await env.call('POST', `${RBAC}/clusterrolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'alice-view' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cascade-view' },
      subjects: [{ kind: 'User', name: 'alice', apiGroup: 'rbac.authorization.k8s.io' }],
    });
    const can = async (
      user: string,
      verb: string,
      resource: string,
      group: string,
      subresource = '',
      namespace = 'team',
    ) => {
      const r = await env.call('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user,
          ...(user.startsWith('system:serviceaccount:')
            ? { groups: ['system:serviceaccounts', 'system:authenticated'] }
            : { groups: ['system:authenticated'] }),
          resourceAttributes: { namespace, verb, group, resource, subresource },
        },
      });
      return (r.body as { status: { allowed: boolean } }).status.allowed;
    };
    const C = 'cascade.dev';
    // the authorizer sees a new binding through its informer, a moment after the POST returned
    await waitFor('the binding reaches the authorizer', async () =>
      (await can('alice', 'list', 'effectivepolicies', C)) ? true : undefined,
    );
    expect(await can('alice', 'list', 'effectivepolicies', C)).toBe(true);
    expect(await can('alice', 'watch', 'effectivepolicies', C)).toBe(true);
    expect(await can('alice', 'get', 'ratelimitpolicies', C, 'status')).toBe(true);
    expect(await can('alice', 'create', 'effectivepolicies', C)).toBe(false);
    expect(await can('alice', 'delete', 'effectivepolicies', C)).toBe(false);
    expect(await can('alice', 'update', 'ratelimitpolicies', C)).toBe(false);
    const sa = 'system:serviceaccount:cascade-system:ratelimitpolicy-controller';
    const GWG = 'gateway.networking.k8s.io';
    for (const [verb, resource, group, sub] of [
      ['watch', 'httproutes', GWG, ''],
      ['list', 'gateways', GWG, ''],
      ['list', 'namespaces', '', ''],
      ['list', 'ratelimitpolicies', C, ''],
      ['patch', 'ratelimitpolicies', C, 'status'],
      ['patch', 'effectivepolicies', C, ''],
      ['delete', 'effectivepolicies', C, ''],
      ['patch', 'gateways', GWG, 'status'],
      ['update', 'httproutes', GWG, 'status'],
      ['list', 'referencegrants', GWG, ''],
    ] as const)
      expect(await can(sa, verb, resource, group, sub), `${verb} ${resource}/${sub}`).toBe(true);
    // its Lease in its own namespace only; Limitador's ConfigMaps in Limitador's namespace only
    expect(await can(sa, 'update', 'leases', 'coordination.k8s.io', '', 'cascade-system')).toBe(true);
    expect(await can(sa, 'patch', 'configmaps', '', '', 'kuadrant-system')).toBe(true);
    expect(await can(sa, 'delete', 'configmaps', '', '', 'kuadrant-system')).toBe(true);
    for (const ns of ['team', 'kube-system'])
      for (const [verb, resource, group] of [
        ['update', 'leases', 'coordination.k8s.io'],
        ['create', 'leases', 'coordination.k8s.io'],
        ['patch', 'configmaps', ''],
        ['create', 'configmaps', ''],
        ['delete', 'configmaps', ''],
        ['get', 'secrets', ''],
      ] as const)
        expect(await can(sa, verb, resource, group, '', ns), `${verb} ${resource} in ${ns}`).toBe(false);
    for (const [verb, resource, group] of [
      ['update', 'ratelimitpolicies', C],
      ['get', 'secrets', ''],
      ['patch', 'httproutes', GWG],
      ['list', 'authpolicies', C],
    ] as const)
      expect(await can(sa, verb, resource, group), `${verb} ${resource}`).toBe(false);
  });

  it('two replicas: only the leader writes; the other takes over within the lease duration', async () => {
    const second = newController('c');
    await second.start();
    await new Promise((r) => setTimeout(r, 1500));
    expect(controller.leader).toBe(true);
    expect(second.leader).toBe(false);
    const w2 = second.writes.get();
    await rlp('while-two', {
      targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'web' },
      limits: { two: lim(2) },
    });
    await until('leader published', async () => {
      const o = await get(`${EP}/ratelimitpolicy-httproute-web`);
      return JSON.stringify(o?.spec).includes('limits.two') ? o : undefined;
    });
    expect(second.writes.get()).toBe(w2);
    // Kill the leader without releasing the lease: the other replica takes over after it expires.
    await controller.stop({ releaseLease: false });
    const t0 = Date.now();
    await until('takeover', async () => (second.leader ? true : undefined), 15_000);
    // lease 3 s: expiry plus a retry or two (CI runs three envtest suites at once on 2 cores)
    expect(Date.now() - t0).toBeLessThan(3000 * 3 + 1500);
    await rlp('after-takeover', {
      targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'web' },
      limits: { three: lim(3) },
    });
    await until('new leader published', async () => {
      const o = await get(`${EP}/ratelimitpolicy-httproute-web`);
      return JSON.stringify(o?.spec).includes('limits.three') ? o : undefined;
    });
    controller = second;
  }, 60_000);
});
