// --watch-namespace against a real kube-apiserver: the controller runs as its ServiceAccount with the
// chart's namespaced grant (RoleBindings to its ClusterRole in the watched namespaces, the
// cluster-scoped reads, its Lease and Limitador Roles) and nothing more. It publishes for the watched
// namespaces, leaves the others untouched, and never lists or watches outside them (a forbidden list
// would fail its readiness).
import {
  controllerClusterReads,
  controllerClusterRole,
  controllerRoles,
  controllerWatchBindings,
  effectivePolicyCrd,
  type PolicyController,
  policyCrd,
  watchNamespaces,
} from '@cascade/core';
import {
  clientOf,
  createGateway,
  createNamespace,
  createRoute,
  startController,
} from '@cascade/core/testing';
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rateLimitPolicyKind } from './kind.ts';

const NAME = 'ratelimitpolicy-controller';
const SYS = 'cascade-system';
const SETTINGS = { limitadorNamespace: 'kuadrant-system' };
const WATCHED = ['infra', 'team-a'];
const GW = '/apis/gateway.networking.k8s.io/v1';
const CD = '/apis/cascade.dev/v1alpha1';
// biome-ignore lint/suspicious/noExplicitAny: API bodies, read field by field
type Body = Record<string, any>;
const lim = (n: number) => ({ rates: [{ limit: n, window: '1m' }] });

describe.skipIf(!apiServerTestsEnabled())('--watch-namespace against kube-apiserver', () => {
  let env: Envtest;
  let controller: PolicyController;
  const warnings: string[] = [];
  const get = async (path: string) => {
    const r = await env.call('GET', path);
    return r.status === 200 ? (r.body as Body) : undefined;
  };

  beforeAll(async () => {
    env = await Envtest.start({ crdObjects: [effectivePolicyCrd, policyCrd(rateLimitPolicyKind)] });
    for (const ns of ['infra', 'team-a', 'team-b', 'kuadrant-system']) await createNamespace(env, ns);
    await createGateway(env, {
      namespace: 'infra',
      listeners: [
        { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } },
      ],
    });
    const rlp = (ns: string, name: string, spec: unknown) =>
      env.call('POST', `${CD}/namespaces/${ns}/ratelimitpolicies`, {
        apiVersion: 'cascade.dev/v1alpha1',
        kind: 'RateLimitPolicy',
        metadata: { name, namespace: ns },
        spec,
      });
    await rlp('infra', 'platform', {
      targetRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'gw' },
      defaults: { strategy: 'merge', limits: { global: lim(100) } },
    });
    for (const ns of ['team-a', 'team-b']) {
      await createRoute(env, { namespace: ns, name: 'web', gatewayNamespace: 'infra' });
      await rlp(ns, 'own', {
        targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'web' },
        limits: { [`${ns}-burst`]: lim(5) },
      });
    }
    const kubeconfig = await env.serviceAccount(
      SYS,
      NAME,
      [
        controllerClusterRole(rateLimitPolicyKind, NAME, SETTINGS),
        ...controllerWatchBindings(NAME, SYS, WATCHED),
        ...controllerClusterReads(NAME, SYS),
        ...controllerRoles(rateLimitPolicyKind, NAME, SYS, SETTINGS),
      ],
      `${GW}/namespaces/team-a/httproutes`,
    );
    controller = await startController(env, rateLimitPolicyKind, {
      client: clientOf(env, kubeconfig),
      identity: 'a',
      leaseNamespace: SYS,
      settings: SETTINGS,
      watchNamespaces: WATCHED,
      log: (level, msg, fields) => {
        if (level === 'warn' || level === 'error') warnings.push(`${msg} ${JSON.stringify(fields)}`);
      },
    });
  }, 120_000);
  afterAll(async () => {
    await controller?.stop().catch(() => {});
    await env?.stop();
  });

  it('the flag: comma-separated namespace names, empty for every namespace, anything else refused', () => {
    expect(watchNamespaces('')).toBeUndefined();
    expect(watchNamespaces(' team-a, infra ,team-a')).toEqual(['team-a', 'infra']);
    expect(watchNamespaces('Team_A')).toMatch(/"Team_A" is not a namespace name/);
    expect(watchNamespaces('a'.repeat(64))).toMatch(/is not a namespace name/);
  });

  it('publishes for the watched namespaces, with the gateway default from a watched namespace', async () => {
    const ep = await waitFor('team-a/web EffectivePolicy', async () => {
      const o = await get(`${CD}/namespaces/team-a/effectivepolicies/ratelimitpolicy-httproute-web`);
      return JSON.stringify(o?.spec ?? {}).includes('team-a-burst') ? o : undefined;
    });
    expect(JSON.stringify(ep.spec)).toContain('limits.global');
    const own = await waitFor('team-a/own status', async () => {
      const o = await get(`${CD}/namespaces/team-a/ratelimitpolicies/own`);
      return o?.status?.conditions ? o : undefined;
    });
    expect(own.status.conditions.find((c: { type: string }) => c.type === 'Accepted')?.status).toBe('True');
    // Limitador's limits (its own namespace, a Role there) carry the watched namespaces' limits only
    const cm = await waitFor('the Limitador ConfigMap', async () => {
      const list = (await get('/api/v1/namespaces/kuadrant-system/configmaps')) as {
        items: { data?: Record<string, string> }[];
      };
      const found = list.items.find((c) => JSON.stringify(c.data ?? {}).includes('team-a-burst'));
      return found;
    });
    expect(JSON.stringify(cm.data)).not.toContain('team-b-burst');
  });

  it('leaves the other namespaces untouched, and never lists or watches outside its namespaces', async () => {
    await waitFor('ready', async () => (controller.ready ? true : undefined));
    const teamB = (await get(`${CD}/namespaces/team-b/effectivepolicies`)) as { items: unknown[] };
    expect(teamB.items).toEqual([]);
    expect((await get(`${CD}/namespaces/team-b/ratelimitpolicies/own`))?.status).toBeUndefined();
    // a list or watch outside its grant would be forbidden, logged and fail readiness: none was
    expect(controller.ready).toBe(true);
    expect(warnings.filter((w) => /forbidden|403/.test(w))).toEqual([]);
    // what the chart grants: nothing in team-b, the ClusterRole's verbs in team-a
    const can = async (verb: string, resource: string, namespace: string, group = 'cascade.dev') => {
      const r = await env.call('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: `system:serviceaccount:${SYS}:${NAME}`,
          groups: ['system:serviceaccounts', 'system:authenticated'],
          resourceAttributes: { namespace, verb, group, resource },
        },
      });
      return (r.body as { status: { allowed: boolean } }).status.allowed;
    };
    expect(await can('list', 'ratelimitpolicies', 'team-a')).toBe(true);
    expect(await can('create', 'effectivepolicies', 'team-a')).toBe(true);
    expect(await can('list', 'ratelimitpolicies', 'team-b')).toBe(false);
    expect(await can('create', 'effectivepolicies', 'team-b')).toBe(false);
    expect(await can('list', 'namespaces', '', '')).toBe(true);
  });

  it('a new policy in a watched namespace is picked up; one in another namespace is not', async () => {
    const post = (ns: string, name: string) =>
      env.call('POST', `${CD}/namespaces/${ns}/ratelimitpolicies`, {
        apiVersion: 'cascade.dev/v1alpha1',
        kind: 'RateLimitPolicy',
        metadata: { name, namespace: ns },
        spec: {
          targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'web' },
          limits: { [`${name}-late`]: lim(7) },
        },
      });
    expect((await post('team-b', 'b2')).status).toBe(201);
    expect((await post('team-a', 'a2')).status).toBe(201);
    await waitFor('a2 in team-a/web', async () => {
      const o = await get(`${CD}/namespaces/team-a/effectivepolicies/ratelimitpolicy-httproute-web`);
      return JSON.stringify(o?.spec ?? {}).includes('a2-late') ? true : undefined;
    });
    expect((await get(`${CD}/namespaces/team-b/ratelimitpolicies/b2`))?.status).toBeUndefined();
  });
});
