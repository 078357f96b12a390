// The gateway data-plane wiring (issue 27): 5,000 HTTPRoutes x 3 rules (each rule 1-2 matches) on 25
// Istio gateways, an AuthPolicy and a RateLimitPolicy default on every gateway and one RateLimitPolicy
// per tenth route. Pure: the time to build every gateway's wasm-shim configuration, the largest
// configuration, and the WasmPlugins it is published as (split by hostname group over 64 KiB).
// Against a real kube-apiserver with Istio's CRDs: the wiring-controller's start to every WasmPlugin
// written, steady-state writes, and a route change to the WasmPlugin that carries it rewritten
// (exactly one object); then the same with --wasm-shard-bytes 0 (one WasmPlugin per gateway).

import { PolicyEngine, type PolicyObject, policyCrd, type RouteMatch, type RouteObject } from '@cascade/core';
import { Informer, KubeClient } from '@cascade/core/kube';
import { GATEWAY_POLICY_KINDS, WIRING_CONTROLLER } from '@cascade/distribution';
import { Envtest, envtestPaths, providerCrds } from '@cascade/envtest';
import {
  buildWasmConfig,
  DEFAULT_PROVIDERS,
  DEFAULT_WIRING,
  gatewayWiring,
  providerObjects,
  WiringController,
  wiringObjects,
} from '@cascade/wiring';
import { testWiringPath } from '@cascade/wiring/testing';
import { KubeConfig } from '@kubernetes/client-node';
import { type Figure, ms, summarize } from '../report.ts';

const SCALE = Number(process.env.WIRING_SCALE ?? 1);
const ROUTES = Math.round(5000 * SCALE);
const GATEWAYS = Math.max(1, Math.round(25 * SCALE));
const INPUT = `${ROUTES.toLocaleString('en')} HTTPRoutes x 3 rules (1-2 matches each), ${GATEWAYS} Istio gateways, ${GATEWAYS} AuthPolicy + ${GATEWAYS} RateLimitPolicy defaults, ${Math.round(ROUTES / 10).toLocaleString('en')} route RateLimitPolicies`;
const G = 'gateway.networking.k8s.io';

function routeSpec(r: number) {
  const rule = (i: number) => ({
    name: `r${i}`,
    matches: [
      { path: { type: 'PathPrefix', value: `/svc${r}/p${i}` }, method: i === 0 ? 'GET' : undefined },
      ...(i === 2
        ? [
            {
              path: { type: 'Exact', value: `/svc${r}/health` },
              headers: [{ type: 'Exact', name: 'x-probe', value: 'yes' }],
            },
          ]
        : []),
    ].map((m) => JSON.parse(JSON.stringify(m))),
  });
  return {
    parentRefs: [{ name: `gw-${r % GATEWAYS}`, namespace: 'infra' }],
    hostnames: [`app${r % 400}.example.com`],
    rules: [rule(0), rule(1), rule(2)],
  };
}

function policies(): { kind: string; ns: string; name: string; spec: Record<string, unknown> }[] {
  const out: { kind: string; ns: string; name: string; spec: Record<string, unknown> }[] = [];
  for (let g = 0; g < GATEWAYS; g++) {
    const targetRef = { group: G, kind: 'Gateway', name: `gw-${g}` };
    out.push({
      kind: 'AuthPolicy',
      ns: 'infra',
      name: `auth-${g}`,
      spec: {
        targetRef,
        defaults: {
          rules: { authentication: { key: { apiKey: { selector: { matchLabels: { app: 'x' } } } } } },
        },
      },
    });
    out.push({
      kind: 'RateLimitPolicy',
      ns: 'infra',
      name: `rl-${g}`,
      spec: {
        targetRef,
        defaults: { strategy: 'merge', limits: { global: { rates: [{ limit: 100, window: '1m' }] } } },
      },
    });
  }
  for (let r = 0; r < ROUTES; r += 10)
    out.push({
      kind: 'RateLimitPolicy',
      ns: `team-${r % 10}`,
      name: `route-rl-${r}`,
      spec: {
        targetRef: { group: G, kind: 'HTTPRoute', name: `route-${r}` },
        limits: {
          user: {
            rates: [{ limit: 10, window: '1s' }],
            counters: [{ expression: "request.headers['x-user']" }],
            when: [{ predicate: "request.method == 'POST'" }],
          },
        },
      },
    });
  return out;
}

function pure(fig: (n: string, v: number, u: string, t?: string) => void): number {
  const kinds = GATEWAY_POLICY_KINDS;
  const engines = kinds.map((k) => new PolicyEngine(k));
  for (const e of engines) {
    e.upsertGatewayClass({ name: 'istio', controllerName: 'istio.io/gateway-controller' });
    for (let g = 0; g < GATEWAYS; g++)
      e.upsertGateway({
        namespace: 'infra',
        name: `gw-${g}`,
        gatewayClassName: 'istio',
        listeners: [
          { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } },
        ],
      });
    for (let r = 0; r < ROUTES; r++)
      e.upsertRoute({
        kind: 'HTTPRoute',
        namespace: `team-${r % 10}`,
        name: `route-${r}`,
        ...routeSpec(r),
      } as RouteObject);
  }
  for (const p of policies()) {
    const e = engines[p.kind === 'AuthPolicy' ? 0 : 1]!;
    const kind = kinds[p.kind === 'AuthPolicy' ? 0 : 1]!;
    e.upsertPolicy({
      apiVersion: `${kind.group}/${kind.version}`,
      kind: p.kind,
      metadata: { namespace: p.ns, name: p.name, creationTimestamp: '2026-01-01T00:00:00Z' },
      spec: p.spec,
    } as PolicyObject);
  }
  for (const e of engines) e.flush();
  const rounds: number[] = [];
  let largest = 0;
  let largestShard = 0;
  let plugins = 0;
  let sets = 0;
  for (let round = 0; round < 5; round++) {
    const t0 = process.hrtime.bigint();
    sets = 0;
    for (let g = 0; g < GATEWAYS; g++) {
      const w = gatewayWiring(engines, 'infra', `gw-${g}`, { controller: 'bench' })!;
      sets += w.config.actionSets.length;
      if (round === 0) {
        const target = { gateway: { namespace: 'infra', name: `gw-${g}` }, controller: 'bench' };
        // the whole configuration in one object (what the size cap bounds), then as published
        const [whole] = providerObjects(
          'istio',
          target,
          [{ index: 0, count: 1, config: w.config }],
          DEFAULT_PROVIDERS,
        );
        largest = Math.max(largest, Buffer.byteLength(JSON.stringify(whole)));
        for (const o of wiringObjects('istio', target, w, DEFAULT_WIRING, DEFAULT_PROVIDERS))
          if (o.kind === 'WasmPlugin') {
            plugins++;
            largestShard = Math.max(largestShard, Buffer.byteLength(JSON.stringify(o)));
          }
      }
    }
    rounds.push(ms(t0));
  }
  fig('build every gateway configuration (fastest of 5)', Math.min(...rounds), 'ms');
  fig('action sets over all gateways', sets, 'sets');
  fig(
    'largest configuration as one WasmPlugin (serialized)',
    largest,
    'bytes',
    '< 1,000,000 (configuration cap)',
  );
  fig('WasmPlugins published (configurations over 64 KiB split by hostname group)', plugins, 'objects');
  fig('largest WasmPlugin published (serialized)', largestShard, 'bytes');
  routeChange(engines, fig);
  hugeRoute(fig);
  return plugins;
}

/**
 * Where a route's change spends the controller's time, in process (20 changes, median): both kinds
 * resolving the paths it touches again (the engines' flush), its gateway's configuration rebuilt
 * (every path's actions and the build), and the provider objects made from it (shards, published form).
 */
function routeChange(
  engines: PolicyEngine[],
  fig: (n: string, v: number, u: string, t?: string) => void,
): void {
  const resolve: number[] = [];
  const build: number[] = [];
  const publish: number[] = [];
  for (let i = 0; i < 20; i++) {
    const r = (i * 37) % ROUTES;
    const spec = routeSpec(r);
    spec.rules[0]!.matches[0]!.path.value = `/changed-${i}`;
    const route = {
      kind: 'HTTPRoute',
      namespace: `team-${r % 10}`,
      name: `route-${r}`,
      ...spec,
    } as RouteObject;
    let t0 = process.hrtime.bigint();
    for (const e of engines) {
      e.upsertRoute(route);
      e.flush();
    }
    resolve.push(ms(t0));
    t0 = process.hrtime.bigint();
    const gw = `gw-${r % GATEWAYS}`;
    const w = gatewayWiring(engines, 'infra', gw, { controller: 'bench', provider: 'istio' })!;
    build.push(ms(t0));
    t0 = process.hrtime.bigint();
    const objects = wiringObjects(
      'istio',
      { gateway: { namespace: 'infra', name: gw }, controller: 'bench' },
      w,
      DEFAULT_WIRING,
      DEFAULT_PROVIDERS,
    );
    for (const o of objects) JSON.stringify(o);
    publish.push(ms(t0));
  }
  const median = (xs: number[]) => summarize(xs).median;
  fig(
    'a route change in process: both kinds re-resolve the paths it touches (median of 20)',
    median(resolve),
    'ms',
  );
  fig("a route change in process: its gateway's configuration rebuilt (median of 20)", median(build), 'ms');
  fig('a route change in process: shards made and serialised (median of 20)', median(publish), 'ms');
}

/**
 * One route at Gateway API's limits (16 hostnames, 128 matches whose path and 16 headers are
 * 300-character regular expressions: 2,176 patterns, about 10 MB of action sets) beside 50 routes of
 * 50 other namespaces on one gateway: how long the first build (every pattern compiled) and a later
 * one take, and that only the huge route's namespace is refused.
 */
function hugeRoute(fig: (n: string, v: number, u: string, t?: string) => void): void {
  const re = (i: number) => `/api/${i}/${'(a|b)[0-9]{1,3}x'.repeat(18)}`.slice(0, 300);
  const path = (ns: string, name: string, hostnames: string[], matches: RouteMatch[]) =>
    testWiringPath(ns, name, matches, hostnames);
  const huge = path(
    'tenant',
    'huge',
    Array.from({ length: 16 }, (_, i) => `h${i}.example.com`),
    Array.from({ length: 128 }, (_, i) => ({
      path: { type: 'RegularExpression' as const, value: re(i) },
      headers: Array.from({ length: 16 }, (_, h) => ({
        type: 'RegularExpression' as const,
        name: `x-${h}`,
        value: re(1000 + i * 16 + h),
      })),
    })),
  );
  const others = Array.from({ length: 50 }, (_, i) =>
    path(`team-${i}`, `r${i}`, [`o${i}.example.com`], [{ path: { type: 'PathPrefix', value: '/x' } }]),
  );
  const times: number[] = [];
  let refused = 0;
  for (let round = 0; round < 4; round++) {
    const t0 = process.hrtime.bigint();
    const w = buildWasmConfig([huge, ...others], DEFAULT_WIRING);
    times.push(ms(t0));
    refused = new Set(w.problems.map((p) => p.route.split('/')[1])).size;
  }
  fig('a route at Gateway API limits + 50 routes: first build', times[0]!, 'ms');
  fig(
    'a route at Gateway API limits + 50 routes: later builds (fastest of 3)',
    Math.min(...times.slice(1)),
    'ms',
  );
  fig(
    'a route at Gateway API limits + 50 routes: namespaces refused',
    refused,
    'namespaces',
    "1 (the huge route's)",
  );
}

async function pool<T>(items: T[], n: number, f: (t: T) => Promise<unknown>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (i < items.length) await f(items[i++]!);
    }),
  );
}

/**
 * The controller on a real API server; `unsplit`: with --wasm-shard-bytes 0 (one WasmPlugin per
 * gateway, as before shards), named so in every figure: the same-run comparison.
 */
async function live(
  figure: (n: string, v: number, u: string, t?: string) => void,
  published: number,
  unsplit = false,
): Promise<void> {
  const fig = (n: string, v: number, u: string, t?: string) =>
    figure(unsplit ? `${n} (--wasm-shard-bytes 0)` : n, v, u, t);
  const plugins = unsplit ? GATEWAYS : published;
  const crds = providerCrds(['WasmPlugin', 'EnvoyFilter']);
  const env = await Envtest.start({
    crdObjects: [...GATEWAY_POLICY_KINDS.map((k) => policyCrd(k)), ...crds],
  });
  const progress = (m: string) => process.stderr.write(`[bench:wiring] ${m}\n`);
  let stop = async () => {};
  try {
    for (const ns of ['infra', ...Array.from({ length: 10 }, (_, i) => `team-${i}`)])
      await env.call('POST', '/api/v1/namespaces', {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: ns },
      });
    await env.call('POST', `/apis/${G}/v1/gatewayclasses`, {
      apiVersion: `${G}/v1`,
      kind: 'GatewayClass',
      metadata: { name: 'istio' },
      spec: { controllerName: 'istio.io/gateway-controller' },
    });
    await pool([...Array(GATEWAYS).keys()], 8, (g) =>
      env.call('POST', `/apis/${G}/v1/namespaces/infra/gateways`, {
        apiVersion: `${G}/v1`,
        kind: 'Gateway',
        metadata: { name: `gw-${g}`, namespace: 'infra' },
        spec: {
          gatewayClassName: 'istio',
          listeners: [
            { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } },
          ],
        },
      }),
    );
    await pool([...Array(ROUTES).keys()], 16, (r) =>
      env.call('POST', `/apis/${G}/v1/namespaces/team-${r % 10}/httproutes`, {
        apiVersion: `${G}/v1`,
        kind: 'HTTPRoute',
        metadata: { name: `route-${r}`, namespace: `team-${r % 10}` },
        spec: routeSpec(r),
      }),
    );
    await pool(policies(), 16, (p) => {
      const kind = GATEWAY_POLICY_KINDS.find((k) => k.kind === p.kind)!;
      return env.call('POST', `/apis/${kind.group}/${kind.version}/namespaces/${p.ns}/${kind.plural}`, {
        apiVersion: `${kind.group}/${kind.version}`,
        kind: p.kind,
        metadata: { name: p.name, namespace: p.ns },
        spec: p.spec,
      });
    });
    progress('objects created');
    const kc = new KubeConfig();
    kc.loadFromFile(env.kubeconfig);
    const controller = new WiringController({
      client: new KubeClient(kc),
      kinds: GATEWAY_POLICY_KINDS,
      name: WIRING_CONTROLLER,
      log: () => {},
      ...(unsplit ? { wiring: { ...DEFAULT_WIRING, shardBytes: 0 } } : {}),
    });
    const t0 = process.hrtime.bigint();
    stop = () => controller.stop();
    await controller.start();
    while (!controller.leader) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 200));
    await controller.idle();
    fig('start to every gateway wired (its WasmPlugins + 2 EnvoyFilters)', ms(t0), 'ms');
    fig('writes issued at start', controller.writes.get(), 'writes', `${plugins + GATEWAYS * 2}`);
    const before = controller.writes.get();
    controller.resyncNow();
    await controller.idle();
    await new Promise((r) => setTimeout(r, 10_000));
    fig('steady-state writes (a full resync, then 10 s)', controller.writes.get() - before, 'writes', '0');
    // the rewrite is seen on a watch of the WasmPlugins, as a proxy's control plane sees it (polling
    // GETs of a 500 KB object every few ms would load the API server and this process, which also
    // runs the controller, and slow what is measured)
    const seen: { at: bigint; text: string }[] = [];
    const watch = new Informer(
      new KubeClient(kc),
      '/apis/extensions.istio.io/v1alpha1/namespaces/infra/wasmplugins',
      (type, o) => {
        if (type === 'MODIFIED') seen.push({ at: process.hrtime.bigint(), text: JSON.stringify(o.spec) });
      },
    );
    watch.start();
    await new Promise((r) => setTimeout(r, 1000));
    const lat: number[] = [];
    let rewritten = 0;
    try {
      for (let i = 0; i < 20; i++) {
        const r = (i * 37) % ROUTES;
        const w0 = controller.writes.get();
        seen.length = 0;
        const t = process.hrtime.bigint();
        const spec = routeSpec(r);
        spec.rules[0]!.matches[0]!.path.value = `/changed-${i}`;
        await env.call(
          'PATCH',
          `/apis/${G}/v1/namespaces/team-${r % 10}/httproutes/route-${r}`,
          { spec: { rules: spec.rules } },
          'application/merge-patch+json',
        );
        for (;;) {
          const hit = seen.find((e) => e.text.includes(`/changed-${i}`));
          if (hit) {
            lat.push(Number(hit.at - t) / 1e6);
            break;
          }
          if (ms(t) > 30_000) throw new Error('WasmPlugin not rewritten within 30 s');
          await new Promise((res) => setTimeout(res, 2));
        }
        await controller.idle();
        rewritten = Math.max(rewritten, controller.writes.get() - w0);
      }
    } finally {
      watch.stop();
    }
    const s = summarize(lat);
    fig('route change to its WasmPlugin rewritten (seen on a watch): median', s.median, 'ms');
    fig('route change to its WasmPlugin rewritten (seen on a watch): p99', s.p99, 'ms');
    fig('objects rewritten per route change (most of 20)', rewritten, 'writes', '1');
  } finally {
    await stop().catch(() => {});
    await env.stop();
  }
}

export async function run(): Promise<Figure[]> {
  const figures: Figure[] = [];
  const fig = (name: string, value: number, unit: string, target?: string) =>
    figures.push({ suite: 'wiring', name, value, unit, input: INPUT, ...(target ? { target } : {}) });
  const plugins = pure(fig);
  if (envtestPaths()) {
    await live(fig, plugins);
    await live(fig, plugins, true);
  } else fig('skipped (controller): envtest binaries missing', 0, '-');
  return figures;
}
