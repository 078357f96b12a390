// Token limits at scale (issue 45): 1,000 HTTPRoutes x 3 rules on 4 Istio gateways, an AuthPolicy
// (API key) and a TokenRateLimitPolicy default (per user, per day) on every gateway, and a route
// TokenRateLimitPolicy with two plan limits on every route. Pure: resolving every kind, building each
// gateway's wasm-shim configuration in the legacy and the typed form (time and size), and rendering
// the Limitador token limits.
import { PolicyEngine, type PolicyObject, type RouteObject, renderGateway } from '@cascade/core';
import { GATEWAY_POLICY_KINDS } from '@cascade/distribution';
import { DEFAULT_WIRING, gatewayWiring, publishedConfig } from '@cascade/wiring';
import { type Figure, ms, summarize } from '../report.ts';

const ROUTES = 1000;
const GATEWAYS = 10;
const INPUT = `${ROUTES.toLocaleString('en')} HTTPRoutes x 3 rules on ${GATEWAYS} Istio gateways; per gateway an AuthPolicy and a TokenRateLimitPolicy default; per route a TokenRateLimitPolicy with 2 plan limits`;
const G = 'gateway.networking.k8s.io';

function world(): PolicyEngine[] {
  const engines = GATEWAY_POLICY_KINDS.map((k) => new PolicyEngine(k));
  const policy = (kind: string, ns: string, name: string, spec: Record<string, unknown>) => {
    const k = GATEWAY_POLICY_KINDS.find((x) => x.kind === kind)!;
    engines[GATEWAY_POLICY_KINDS.indexOf(k)]!.upsertPolicy({
      apiVersion: `${k.group}/${k.version}`,
      kind,
      metadata: { namespace: ns, name, creationTimestamp: '2026-01-01T00:00:00Z' },
      spec,
    } as PolicyObject);
  };
  for (const e of engines) {
    e.upsertGatewayClass({ name: 'istio', controllerName: 'istio.io/gateway-controller' });
    for (let g = 0; g < GATEWAYS; g++)
      e.upsertGateway({
        namespace: 'infra',
        name: `ai-${g}`,
        gatewayClassName: 'istio',
        listeners: [
          { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } },
        ],
      });
    for (let r = 0; r < ROUTES; r++)
      e.upsertRoute({
        kind: 'HTTPRoute',
        namespace: `team-${r % 10}`,
        name: `llm-${r}`,
        parentRefs: [{ name: `ai-${r % GATEWAYS}`, namespace: 'infra' }],
        hostnames: [`model${r % 100}.ai.example.com`],
        rules: ['chat/completions', 'completions', 'embeddings'].map((p, i) => ({
          name: `r${i}`,
          matches: [{ path: { type: 'Exact', value: `/m${r}/v1/${p}` }, method: 'POST' }],
        })),
      } as RouteObject);
  }
  const plan = (name: string, limit: number) => ({
    rates: [{ limit, window: '1h' }],
    when: [{ predicate: `auth.identity.plan == "${name}"` }],
    counters: [{ expression: 'auth.identity.userid' }],
  });
  for (let g = 0; g < GATEWAYS; g++) {
    const targetRef = { group: G, kind: 'Gateway', name: `ai-${g}` };
    policy('AuthPolicy', 'infra', `keys-${g}`, {
      targetRef,
      defaults: {
        rules: { authentication: { key: { apiKey: { selector: { matchLabels: { app: 'k' } } } } } },
      },
    });
    policy('TokenRateLimitPolicy', 'infra', `daily-${g}`, {
      targetRef,
      defaults: {
        strategy: 'merge',
        limits: {
          daily: {
            rates: [{ limit: 200000, window: '24h' }],
            counters: [{ expression: 'auth.identity.userid' }],
          },
        },
      },
    });
  }
  for (let r = 0; r < ROUTES; r++)
    policy('TokenRateLimitPolicy', `team-${r % 10}`, `plans-${r}`, {
      targetRef: { group: G, kind: 'HTTPRoute', name: `llm-${r}` },
      limits: { free: plan('free', 10000), gold: plan('gold', 100000) },
    });
  return engines;
}

export async function run(): Promise<Figure[]> {
  const figures: Figure[] = [];
  const fig = (name: string, value: number, unit: string) =>
    figures.push({ suite: 'tokens', name, value, unit, input: INPUT });
  let t0 = process.hrtime.bigint();
  const engines = world();
  for (const e of engines) e.flush();
  fig('token limits: load and resolve every kind', ms(t0), 'ms');
  const trlp = engines[GATEWAY_POLICY_KINDS.findIndex((k) => k.kind === 'TokenRateLimitPolicy')]!;
  t0 = process.hrtime.bigint();
  let limitBytes = 0;
  let limitCount = 0;
  for (let g = 0; g < GATEWAYS; g++)
    for (const o of renderGateway(trlp, 'infra', `ai-${g}`, 'bench').values()) {
      const yaml = (o as unknown as { data: Record<string, string> }).data['limits.yaml']!;
      limitBytes += Buffer.byteLength(yaml);
      limitCount += (yaml.match(/^- /gm) ?? []).length;
    }
  fig('token limits: render the Limitador token limits of every gateway', ms(t0), 'ms');
  fig('token limits: Limitador limits written', limitCount, 'limits');
  fig('token limits: Limitador limits bytes (all gateways)', limitBytes, 'bytes');
  for (const form of ['legacy', 'typed'] as const) {
    // sizes measured without the budget (maxConfigBytes); then, with the default budget, what is refused
    const wiring = { ...DEFAULT_WIRING, configForm: form, maxConfigBytes: 1e9, maxSetsPerNamespace: 1e6 };
    const rounds: number[] = [];
    let largest = 0;
    let total = 0;
    for (let round = 0; round < 5; round++) {
      const t = process.hrtime.bigint();
      total = 0;
      for (let g = 0; g < GATEWAYS; g++) {
        const w = gatewayWiring(engines, 'infra', `ai-${g}`, {
          controller: 'bench',
          wiring,
          provider: 'istio',
        })!;
        if (w.problems.length) throw new Error(`ai-${g}: ${w.problems[0]!.reason}`);
        const bytes = Buffer.byteLength(JSON.stringify(publishedConfig(w.config, wiring)));
        if (bytes !== w.bytes) throw new Error(`ai-${g}: measured ${w.bytes} bytes, published ${bytes}`);
        total += bytes;
        largest = Math.max(largest, bytes);
      }
      rounds.push(ms(t));
    }
    fig(
      `token limits: build every gateway's ${form} configuration (median of 5)`,
      summarize(rounds).median,
      'ms',
    );
    fig(`token limits: ${form} configuration, largest gateway`, largest, 'bytes');
    fig(`token limits: ${form} configuration, bytes per route`, Math.round(total / ROUTES), 'bytes');
    let refused = 0;
    for (let g = 0; g < GATEWAYS; g++)
      refused += new Set(
        gatewayWiring(engines, 'infra', `ai-${g}`, {
          controller: 'bench',
          wiring: { ...DEFAULT_WIRING, configForm: form },
          provider: 'istio',
        })!.problems.map((p) => p.route),
      ).size;
    fig(
      `token limits: ${form} configuration, routes refused for size at the default budget`,
      refused,
      'routes',
    );
  }
  return figures;
}
