// cascadectl request FILES... --host HOST [...]: the HTTP counterpart of `netpol explain`. Which
// action set of the gateway's wasm-shim configuration a request meets and why the earlier ones do not,
// which AuthConfig is called (its evaluators and the policies that wrote them), which Limitador limits
// count it with which counter values and namespace: in wasm-shim's order, evaluated from the same
// configuration the gateway-wiring writer publishes, with the project's bounded CEL.
import { readFileSync } from 'node:fs';
import { toPathResult } from '@cascade/core';
import {
  type CountedLimitSpec,
  countedLimits,
  DEFAULT_WIRING,
  type HttpRequest,
  type ProxyChoice,
  precedenceOf,
  proxyPort,
  proxyRoute,
  type RequestTrace,
  toTypedConfig,
  traceRequest,
  traceTypedRequest,
} from '@cascade/wiring';
import { parse as parseYaml } from 'yaml';
import { type Command, oneOf, out, UsageError } from '../cli.ts';
import { loadGatewayWorld } from './gateway-common.ts';
import { renderedObjects } from './render.ts';
import { outcomeLines, type RequestOutcome, requestOutcome } from './request-outcome.ts';
import { gatewayWirings } from './wiring.ts';

function headersOf(v: unknown): Record<string, string> {
  const list = Array.isArray(v) ? v : v === undefined ? [] : [v];
  const out: Record<string, string> = {};
  for (const h of list) {
    const m = /^([^:\s]+)\s*:\s?(.*)$/.exec(String(h));
    if (!m) throw new UsageError(`--header "${String(h).slice(0, 80)}": expected "Name: value"`);
    out[m[1]!.toLowerCase()] = m[2]!;
  }
  return out;
}

function identityOf(v: unknown): Record<string, unknown> | undefined {
  if (v === undefined) return undefined;
  try {
    const o = JSON.parse(String(v)) as unknown;
    if (o && typeof o === 'object' && !Array.isArray(o)) return o as Record<string, unknown>;
  } catch {}
  throw new UsageError('--identity: expected a JSON object, e.g. \'{"sub":"alice"}\'');
}

/** The upstream's response from a file; its content type given, or SSE when it reads as a stream. */
function responseOf(file: unknown, type: unknown): HttpRequest['response'] {
  if (file === undefined) {
    if (type !== undefined) throw new UsageError('--response-content-type needs --response-body');
    return undefined;
  }
  let body: string;
  try {
    body = readFileSync(String(file), 'utf8');
  } catch (e) {
    throw new UsageError(`--response-body ${String(file).slice(0, 200)}: ${(e as Error).message}`);
  }
  const contentType =
    type !== undefined
      ? String(type)
      : /^\s*(data|event|id|retry):/.test(body)
        ? 'text/event-stream'
        : 'application/json';
  return { body, contentType };
}

interface AuthView {
  authConfig?: string;
  evaluators: { name: string; source?: string }[];
}

interface LimitView {
  namespace: string;
  name?: string;
  max_value: number;
  seconds: number;
  counter: string[];
}

export const requestCommand: Command = {
  name: 'request',
  summary: "why a request gets its auth and rate-limit treatment at a gateway (wasm-shim's decision)",
  usage:
    'cascadectl request FILES... --host HOST [--gateway NS/NAME] [-X METHOD] [--path /p?q=v] [-H "Name: value"]... [--identity JSON] [--source ADDR] [--port LISTENER-PORT] [--hits N] [--response-body FILE [--response-content-type TYPE]] [--tokens N] [--config-form legacy|typed] [-o text|json]\n  (--identity: the identity authentication yields, as if the caller were authenticated; --hits: requests already counted in the window; --response-body: the upstream\'s response, whose usage.total_tokens token limits count; --tokens: tokens already counted in the window; --config-form: evaluate the typed wasm-shim configuration instead of the legacy one)',
  options: {
    host: { type: 'string' },
    gateway: { type: 'string' },
    method: { type: 'string', short: 'X' },
    path: { type: 'string' },
    header: { type: 'string', short: 'H', multiple: true },
    identity: { type: 'string' },
    source: { type: 'string' },
    port: { type: 'string' },
    hits: { type: 'string' },
    'response-body': { type: 'string' },
    'response-content-type': { type: 'string' },
    tokens: { type: 'string' },
    'config-form': { type: 'string' },
    output: { type: 'string', short: 'o' },
  },
  run(values, files) {
    const format = oneOf('output', values.output, ['text', 'json'], 'text');
    if (!values.host) throw new UsageError("--host is required (the request's Host)");
    const path = String(values.path ?? '/');
    if (!path.startsWith('/')) throw new UsageError(`--path "${path.slice(0, 80)}": must start with /`);
    const form = oneOf('config-form', values['config-form'], ['legacy', 'typed'], 'legacy');
    const upstream = responseOf(values['response-body'], values['response-content-type']);
    const req: HttpRequest = {
      host: String(values.host),
      method: String(values.method ?? 'GET'),
      path,
      headers: headersOf(values.header),
      ...(values.source ? { source: { address: String(values.source) } } : {}),
      ...(values.identity ? { identity: identityOf(values.identity)! } : {}),
      ...(upstream ? { response: upstream } : {}),
    };
    const tokens = values.tokens === undefined ? 0 : Number(values.tokens);
    if (!Number.isInteger(tokens) || tokens < 0 || tokens > 1e15)
      throw new UsageError(
        `--tokens "${String(values.tokens).slice(0, 20)}": a whole number of tokens already counted`,
      );
    const listenerPort = values.port === undefined ? undefined : Number(values.port);
    if (
      listenerPort !== undefined &&
      !(Number.isInteger(listenerPort) && listenerPort > 0 && listenerPort < 65536)
    )
      throw new UsageError(
        `--port "${String(values.port).slice(0, 20)}": expected a listener port (1-65535)`,
      );
    const hits = values.hits === undefined ? 0 : Number(values.hits);
    if (!Number.isInteger(hits) || hits < 0 || hits > 1e12)
      throw new UsageError(
        `--hits "${String(values.hits).slice(0, 20)}": a whole number of requests already counted`,
      );
    const { world, problems } = loadGatewayWorld(files, undefined);
    const wirings = gatewayWirings(world).filter((w) => !values.gateway || w.gateway === values.gateway);
    // the port the proxy receives it on (destination.port), from the listener port the client dialled
    const onPort = (provider: Parameters<typeof proxyPort>[0]): HttpRequest =>
      listenerPort === undefined ? req : { ...req, port: proxyPort(provider, listenerPort) };
    const trace1 = (w: (typeof wirings)[number]) =>
      form === 'typed'
        ? traceTypedRequest(toTypedConfig(w.wiring.config, DEFAULT_WIRING), onPort(w.provider))
        : traceRequest(w.wiring.config, onPort(w.provider));
    const traces = wirings
      .map((w) => ({ w, trace: trace1(w) }))
      .filter((t) => values.gateway || t.trace.hostname !== undefined);
    if (traces.length === 0) {
      out(
        values.gateway
          ? `gateway ${values.gateway}: no wasm-shim configuration (no policy reaches it, or no such gateway)`
          : `no gateway has an action set for host ${req.host}: wasm-shim does nothing for this request`,
      );
      return problems > 0 ? 2 : 0;
    }
    if (traces.length > 1 && !values.gateway)
      throw new UsageError(
        `host ${req.host} is served by several gateways (${traces.map((t) => t.w.gateway).join(', ')}): say which with --gateway`,
      );
    const { w, trace } = traces[0]!;
    const rendered = renderedObjects(world);
    const limits: CountedLimitSpec[] = rendered
      .filter(
        (o) => o.kind === 'ConfigMap' && (o.data as Record<string, string> | undefined)?.['limits.yaml'],
      )
      .flatMap((o) => parseYaml((o.data as Record<string, string>)['limits.yaml']!) as CountedLimitSpec[]);
    const origin = trace.matched ? w.wiring.origins[trace.matched] : undefined;
    const proxy = proxyRoute(w.wiring.paths, onPort(w.provider), precedenceOf(w.provider));
    const authOf = (scope: string): AuthView => {
      const ac = rendered.find(
        (o) => o.kind === 'AuthConfig' && ((o.spec as { hosts?: string[] }).hosts ?? []).includes(scope),
      );
      const evaluators: AuthView['evaluators'] = [];
      const engine = world.engines.get('AuthPolicy');
      const result = origin && engine && findResult(engine, w.gateway, origin);
      if (result)
        for (const [key, r] of Object.entries(toPathResult('AuthPolicy', result[0], result[1]).rules))
          evaluators.push({
            name: key,
            source: `${r.source.kind} ${r.source.namespace}/${r.source.name} (${r.as})`,
          });
      else if (ac)
        for (const section of ['authentication', 'metadata', 'authorization', 'response', 'callbacks'])
          for (const name of Object.keys(((ac.spec as Record<string, unknown>)[section] as object) ?? {}))
            evaluators.push({ name: `${section}.${name}` });
      return { ...(ac ? { authConfig: `${ac.metadata.namespace}/${ac.metadata.name}` } : {}), evaluators };
    };
    const actions = trace.actions.map((a) => ({
      ...a,
      ...(a.type === 'auth' && a.run ? { auth: authOf(a.scope) } : {}),
      ...(a.type !== 'auth' && a.type !== 'unknown' && a.descriptor
        ? {
            counted: countedLimits(limits, a.scope, a.descriptor).map(
              (c): LimitView => ({
                namespace: c.limit.namespace,
                ...(c.limit.name ? { name: c.limit.name } : {}),
                max_value: c.limit.max_value,
                seconds: c.limit.seconds,
                counter: c.counter,
              }),
            ),
          }
        : {}),
    }));
    const authMethods = (ref: string) => {
      const ac = rendered.find(
        (o) => o.kind === 'AuthConfig' && `${o.metadata.namespace}/${o.metadata.name}` === ref,
      );
      const authn = ((ac?.spec as { authentication?: Record<string, Record<string, unknown>> } | undefined)
        ?.authentication ?? {}) as Record<string, Record<string, unknown>>;
      return Object.values(authn).flatMap((e) => Object.keys(e).filter((k) => AUTH_METHODS.has(k)));
    };
    const response = requestOutcome({
      routed: proxy !== undefined,
      matched: trace.matched !== undefined,
      actions,
      failureModes: Object.fromEntries(
        Object.entries(w.wiring.config.services).map(([name, s]) => [name, s.failureMode]),
      ),
      identity: req.identity !== undefined,
      authMethods,
      hits,
      tokens,
    });
    const report = {
      gateway: w.gateway,
      provider: w.provider ?? null,
      request: onPort(w.provider),
      ...trace,
      ...(origin ? { origin } : {}),
      proxy: proxy ?? null,
      actions,
      response,
    };
    if (format === 'json') out(JSON.stringify(report, null, 2));
    else out([formatText(report, trace), ...outcomeLines(response)].join('\n'));
    return problems > 0 ? 2 : 0;
  },
};

function findResult(
  engine: NonNullable<
    ReturnType<typeof loadGatewayWorld>['world']['engines'] extends Map<string, infer E> ? E : never
  >,
  gateway: string,
  origin: { route: string; rule: string; listener: string },
) {
  for (const [path, r] of engine.results())
    if (
      `${path.gateway.namespace}/${path.gateway.name}` === gateway &&
      `${path.route.kind}/${path.route.namespace}/${path.route.name}` === origin.route &&
      path.rule === origin.rule &&
      path.listener === origin.listener
    )
      return [path, r] as const;
  return undefined;
}

/** Authorino's authentication methods (an evaluator's one key among its common fields). */
const AUTH_METHODS = new Set([
  'jwt',
  'apiKey',
  'anonymous',
  'oauth2Introspection',
  'x509',
  'plain',
  'kubernetesTokenReview',
]);

function formatText(
  report: {
    gateway: string;
    provider: string | null;
    proxy: ProxyChoice | null;
    origin?: { route: string; rule: string };
    response: RequestOutcome;
    actions: (RequestTrace['actions'][number] & { auth?: AuthView; counted?: LimitView[] })[];
  },
  trace: RequestTrace,
): string {
  const lines: string[] = [];
  const p = report.proxy;
  lines.push(
    p
      ? `the proxy routes it to ${p.route} ${p.rule} (match ${p.matchIndex}, virtual host ${p.hostname}, listener ${p.listener})`
      : 'the proxy has no route for it (404)',
  );
  if (p && report.origin && `${p.route}#${p.rule}` !== `${report.origin.route}#${report.origin.rule}`)
    lines.push(
      `  WARNING: wasm-shim runs the set of ${report.origin.route} ${report.origin.rule}, not the proxy's route`,
    );
  lines.push(
    `gateway ${report.gateway} (${report.provider ?? 'no known provider'}), host ${trace.host}: ${trace.hostname ? `the action sets of hostname ${trace.hostname}` : 'no hostname of the configuration matches'}`,
  );
  for (const s of trace.sets) {
    const r = s.result;
    if (r.outcome === 'matched') lines.push(`  MATCH    ${s.name}`);
    else if (r.outcome === 'other-hostname')
      lines.push(`  not met  ${s.name}: the more specific hostname ${r.hostname} is used`);
    else if (r.outcome === 'predicate-false') lines.push(`  not met  ${s.name}: ${r.predicate} is false`);
    else lines.push(`  not met  ${s.name}: ${r.predicate} errors (${r.error})`);
  }
  if (!trace.matched) {
    lines.push('no action set matches: wasm-shim neither authenticates nor limits this request');
    return lines.join('\n');
  }
  lines.push('actions, in the order wasm-shim runs them:');
  const decided = report.response.decidedAt;
  report.actions.forEach((a, i) => {
    const head = `  ${i + 1}. ${a.service} (${a.type}), scope ${a.scope}`;
    if (!a.run) {
      lines.push(`${head}: skipped (${a.why})`);
      return;
    }
    if (decided !== undefined && i > decided) {
      lines.push(`${head}: not reached (action ${decided + 1} answered the request)`);
      return;
    }
    lines.push(`${head}${a.sources.length ? `, from ${a.sources.join(', ')}` : ''}`);
    if (a.auth) {
      lines.push(`     AuthConfig ${a.auth.authConfig ?? '(none declares this host: Authorino denies)'}`);
      for (const e of a.auth.evaluators)
        lines.push(`       ${e.name}${e.source ? `  from ${e.source}` : ''}`);
    }
    for (const b of a.blocks ?? []) {
      const when = b.predicates.length ? b.predicates.join(' && ') : 'always';
      if (!b.holds) lines.push(`     block [${when}]: does not hold (${b.why})`);
      else
        lines.push(
          `     block [${when}]: sends ${b.entries.map((e) => (e.error ? `${e.key}=<error: ${e.error}>` : `${e.key}=${e.value}`)).join(', ')}`,
        );
    }
    if (a.type === 'ratelimit-check' || a.type === 'ratelimit-report')
      lines.push(
        `     hits: ${a.hits}${a.body ? ` (usage read from ${a.body.strategy === 'sse' ? `the stream's ${a.body.source}` : a.body.source})` : ''}`,
      );
    if (a.counted)
      lines.push(
        ...(a.counted.length
          ? a.counted.map(
              (c) =>
                `     counts: ${c.name ?? '(limit)'}: ${c.max_value} per ${c.seconds} s in ${c.namespace}${c.counter.length ? `, counter [${c.counter.join(', ')}]` : ''}`,
            )
          : [
              '     counts: no limit (none of the namespace has its conditions and counters in this descriptor)',
            ]),
      );
  });
  return lines.join('\n');
}
