// Issue "reconciler runtime" figures: the RateLimitPolicy controller against a real kube-apiserver with
// 5,000 routes (15,000 paths) and 2,500 policies: time to publish everything, writes issued, steady-state
// writes, and the latency from one policy change to its EffectivePolicy.
import { effectivePolicyCrd, PolicyController, policyCrd } from '@cascade/core';
import { KubeClient } from '@cascade/core/kube';
import { Envtest, envtestPaths } from '@cascade/envtest';
import { rateLimitPolicyKind } from '@cascade/ratelimitpolicy';
import { KubeConfig } from '@kubernetes/client-node';
import { type Figure, ms, summarize } from '../report.ts';

/** CONTROLLER_SCALE=0.1 runs a tenth of the size (for a quick look). */
const SCALE = Number(process.env.CONTROLLER_SCALE ?? 1);
const ROUTES = Math.round(5000 * SCALE);
const GATEWAYS = Math.max(1, Math.round(25 * SCALE));
const POLICIES = Math.round(2500 * SCALE);
const INPUT = `${ROUTES.toLocaleString('en')} HTTPRoutes x 3 rules (${(ROUTES * 3).toLocaleString('en')} paths), ${GATEWAYS} gateways, ${POLICIES.toLocaleString('en')} RateLimitPolicies, real kube-apiserver`;

async function pool<T>(items: T[], n: number, f: (t: T) => Promise<unknown>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (i < items.length) await f(items[i++]!);
    }),
  );
}

export async function run(): Promise<Figure[]> {
  if (!envtestPaths())
    return [
      { suite: 'controller', name: 'skipped: envtest binaries missing', value: 0, unit: '-', input: '-' },
    ];
  const figures: Figure[] = [];
  const fig = (name: string, value: number, unit: string, target?: string) =>
    figures.push({ suite: 'controller', name, value, unit, input: INPUT, ...(target ? { target } : {}) });
  const env = await Envtest.start({ crdObjects: [effectivePolicyCrd, policyCrd(rateLimitPolicyKind)] });
  const progress = (m: string) => process.stderr.write(`[bench:controller] ${m}\n`);
  let stopController = async () => {};
  try {
    const G = 'gateway.networking.k8s.io/v1';
    for (let n = 0; n < 10; n++)
      await env.call('POST', '/api/v1/namespaces', {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: `team-${n}` },
      });
    await env.call('POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'infra' },
    });
    await env.call('POST', '/apis/gateway.networking.k8s.io/v1/gatewayclasses', {
      apiVersion: G,
      kind: 'GatewayClass',
      metadata: { name: 'cascade' },
      spec: { controllerName: 'cascade.dev/gw' },
    });
    await pool([...Array(GATEWAYS).keys()], 8, (g) =>
      env.call('POST', '/apis/gateway.networking.k8s.io/v1/namespaces/infra/gateways', {
        apiVersion: G,
        kind: 'Gateway',
        metadata: { name: `gw-${g}`, namespace: 'infra' },
        spec: {
          gatewayClassName: 'cascade',
          listeners: [
            { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } },
          ],
        },
      }),
    );
    await pool([...Array(ROUTES).keys()], 16, (r) =>
      env.call('POST', `/apis/gateway.networking.k8s.io/v1/namespaces/team-${r % 10}/httproutes`, {
        apiVersion: G,
        kind: 'HTTPRoute',
        metadata: { name: `route-${r}`, namespace: `team-${r % 10}` },
        spec: {
          parentRefs: [{ name: `gw-${r % GATEWAYS}`, namespace: 'infra' }],
          rules: [{ name: 'a' }, { name: 'b' }, { name: 'c' }],
        },
      }),
    );
    progress('routes created');
    const lim = (n: number) => ({ rates: [{ limit: n, window: '1m' }] });
    await pool([...Array(POLICIES).keys()], 16, (i) => {
      const gwLevel = i < POLICIES / 10;
      const ns = gwLevel ? 'infra' : `team-${i % 10}`;
      const spec = gwLevel
        ? {
            targetRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: `gw-${i % GATEWAYS}` },
            defaults: { strategy: 'merge', limits: { [`g${i}`]: lim(1000) } },
          }
        : {
            targetRef: {
              group: 'gateway.networking.k8s.io',
              kind: 'HTTPRoute',
              name: `route-${i % ROUTES}`,
            },
            limits: { own: lim(i) },
          };
      return env.call('POST', `/apis/cascade.dev/v1alpha1/namespaces/${ns}/ratelimitpolicies`, {
        apiVersion: 'cascade.dev/v1alpha1',
        kind: 'RateLimitPolicy',
        metadata: { name: `p-${i}`, namespace: ns },
        spec,
      });
    });

    progress('policies created');
    const kc = new KubeConfig();
    kc.loadFromFile(env.kubeconfig);
    const controller = new PolicyController({
      client: new KubeClient(kc),
      kind: rateLimitPolicyKind,
      name: 'ratelimitpolicy-controller',
      log: () => {},
    });
    const t0 = process.hrtime.bigint();
    stopController = () => controller.stop();
    await controller.start();
    while (!controller.leader) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 200));
    await controller.idle();
    fig('start to all EffectivePolicies and statuses published', ms(t0), 'ms');
    fig('writes issued at start (EffectivePolicies + statuses)', controller.writes.get(), 'writes');
    const eps = (await env.call('GET', '/apis/cascade.dev/v1alpha1/effectivepolicies?limit=1')).body as {
      metadata: { remainingItemCount?: number };
    };
    fig('EffectivePolicies published', (eps.metadata.remainingItemCount ?? 0) + 1, 'objects');

    progress('published');
    const before = controller.writes.get();
    await new Promise((r) => setTimeout(r, 30_000));
    fig(
      'steady-state writes per minute (observed 30 s)',
      (controller.writes.get() - before) * 2,
      'writes/min',
      '0',
    );

    progress('steady state observed');
    const lat: number[] = [];
    for (let i = 0; i < 30; i++) {
      const idx = Math.round(POLICIES / 10) + i * 7;
      const ns = `team-${idx % 10}`;
      const cur = (
        await env.call('GET', `/apis/cascade.dev/v1alpha1/namespaces/${ns}/ratelimitpolicies/p-${idx}`)
      ).body as Record<string, unknown>;
      const target = `route-${idx % ROUTES}`;
      const limit = 100_000 + i;
      const t = process.hrtime.bigint();
      await env.call('PUT', `/apis/cascade.dev/v1alpha1/namespaces/${ns}/ratelimitpolicies/p-${idx}`, {
        ...cur,
        spec: {
          targetRef: { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: target },
          limits: { own: lim(limit) },
        },
      });
      for (;;) {
        const ep = await env.call(
          'GET',
          `/apis/cascade.dev/v1alpha1/namespaces/${ns}/effectivepolicies/ratelimitpolicy-httproute-${target}`,
        );
        if (JSON.stringify(ep.body).includes(`"limit":${limit}`)) break;
        if (ms(t) > 30_000) throw new Error(`EffectivePolicy of ${ns}/${target} not updated within 30 s`);
        await new Promise((r) => setTimeout(r, 5));
      }
      lat.push(ms(t));
    }
    progress('latency probes done');
    const s = summarize(lat);
    fig('policy change to EffectivePolicy updated: median', s.median, 'ms');
    fig('policy change to EffectivePolicy updated: p99', s.p99, 'ms');
  } finally {
    await stopController().catch(() => {});
    progress('controller stopped');
    await env.stop();
    progress('API server stopped');
  }
  return figures;
}
