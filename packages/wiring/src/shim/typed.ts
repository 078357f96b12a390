// The typed wasm-shim configuration (wasm-shim v0.14 and later): what kuadrant-operator main writes
// (ae698811), built from the same action sets as the legacy form (wasm.ts), so both forms come from
// one build and say the same thing. Pure; chosen by the wiring's `configForm` setting.
//
// Each legacy action becomes one `grpc` action whose message builder is a CEL expression of the
// protobuf message sent, with kuadrant-operator's replies:
//   - auth: an Authorization `CheckRequest` carrying the request, `context_extensions.host` = the
//     action's scope (the AuthConfig's host); replies: deny with Authorino's status (403 when none),
//     fail on an ok response that asks for what wasm-shim cannot do, store `auth` (the dynamic
//     metadata, for limits that read `auth.*`), add Authorino's headers to the request;
//   - rate limit (`ratelimit-service`, Limitador's ShouldRateLimit): a `RateLimitRequest` with
//     `domain` = the scope, `hits_addend` 1 and one descriptor whose entries are the blocks' data:
//     a block with predicates contributes `((p) ? [entries] : [])`; the action's predicate is its own
//     predicates and (any block's predicates); replies: 429 when over the limit;
//   - token limits: `ratelimit-check-service` (CheckRateLimit, a guard: hits 0 as Kuadrant writes
//     it, though Limitador checks one hit: 429 once the counter holds its limit) and `ratelimit-report-service` (Report, not a guard: it runs on the response
//     with `hits_addend` = the tokens the response reports). A data item `ratelimit.hits_addend`
//     gives the hits; `responseBodyJSON("/ptr")` reads are gathered in one `store` action per set
//     (`kuadrant.internal.response.body.<field>`), as kuadrant-operator does.
// A rate-limit action placed before an auth action runs `sequential` (kuadrant-operator's choice:
// the auth call waits for it).
import {
  type ActionSet,
  AUTH_CLUSTER,
  AUTH_SERVICE,
  RATELIMIT_CHECK_SERVICE,
  RATELIMIT_CLUSTER,
  RATELIMIT_REPORT_SERVICE,
  RATELIMIT_SERVICE,
  type WasmAction,
  type WasmConfig,
  type WiringSettings,
} from './config.ts';

export interface TypedService {
  type: 'dynamic';
  endpoint: string;
  failureMode: 'allow' | 'deny';
  timeout: string;
  grpcService: string;
  grpcMethod: string;
}

interface TypedBase {
  predicate: string;
  terminal: boolean;
  isGuard: boolean;
  execution?: 'sequential';
  sources?: string[];
}

export type TypedAction =
  | (TypedBase & {
      type: 'grpc';
      var: string;
      service: string;
      label: string;
      messageBuilder: string;
      onReply: TypedAction[];
    })
  | (TypedBase & { type: 'deny'; denyWith: string })
  | (TypedBase & { type: 'headers'; target: 'request' | 'response'; headers: string })
  | (TypedBase & { type: 'store'; path: string; value: string; exportToHost?: boolean })
  | (TypedBase & { type: 'fail'; logMessage: string });

export interface TypedActionSet {
  name: string;
  routeRuleConditions: ActionSet['routeRuleConditions'];
  actions: TypedAction[];
}

export interface TypedWasmConfig {
  services: Record<string, TypedService>;
  actionSets: TypedActionSet[];
}

/** Which configuration the gateways get: the legacy one (any wasm-shim) or the typed one (v0.14+). */
export type ConfigForm = 'legacy' | 'typed';

/** The data key whose value is the hits a rate-limit call adds (default 1). */
export const HITS_ADDEND = 'ratelimit.hits_addend';
/** Where the store action keeps the response body's fields that rate-limit calls read. */
export const RESPONSE_BODY_STORE = 'kuadrant.internal.response.body';
const REQUEST_BODY_STORE = 'kuadrant.internal.request.body';

/** The services of the typed form (all `dynamic`: wasm-shim calls the gRPC method named). */
export function typedServices(s: WiringSettings): Record<string, TypedService> {
  const rl = (grpcService: string, grpcMethod: string): TypedService => ({
    type: 'dynamic',
    endpoint: RATELIMIT_CLUSTER,
    failureMode: s.rateLimitFailureMode,
    timeout: s.rateLimitTimeout,
    grpcService,
    grpcMethod,
  });
  return {
    [AUTH_SERVICE]: {
      type: 'dynamic',
      endpoint: AUTH_CLUSTER,
      failureMode: s.authFailureMode,
      timeout: s.authTimeout,
      grpcService: 'envoy.service.auth.v3.Authorization',
      grpcMethod: 'Check',
    },
    [RATELIMIT_CHECK_SERVICE]: rl('kuadrant.service.ratelimit.v1.RateLimitService', 'CheckRateLimit'),
    [RATELIMIT_REPORT_SERVICE]: rl('kuadrant.service.ratelimit.v1.RateLimitService', 'Report'),
    [RATELIMIT_SERVICE]: rl('envoy.service.ratelimit.v3.RateLimitService', 'ShouldRateLimit'),
  };
}

/** A string as a CEL string literal's body (kuadrant-operator's escaping). */
export const celString = (s: string) =>
  s
    .replace(/\\/g, '\\\\')
    .replace(/"/g, '\\"')
    .replace(/\n/g, '\\n')
    .replace(/\r/g, '\\r')
    .replace(/\t/g, '\\t');

const join = (ps: readonly string[]) =>
  ps.length === 0 ? 'true' : ps.length === 1 ? ps[0]! : ps.map((p) => `(${p})`).join(' && ');

const checkRequest = (host: string) => `envoy.service.auth.v3.CheckRequest {
  attributes: envoy.service.auth.v3.AttributeContext {
    request: envoy.service.auth.v3.AttributeContext.Request {
      time: request.time,
      http: envoy.service.auth.v3.AttributeContext.HttpRequest {
        host: request.host,
        method: request.method,
        scheme: request.scheme,
        path: request.path,
        protocol: request.protocol,
        headers: request.headers
      }
    },
    destination: envoy.service.auth.v3.AttributeContext.Peer {
      address: envoy.config.core.v3.Address {
        socket_address: envoy.config.core.v3.SocketAddress {
          address: destination.address,
          port_value: uint(destination.port)
        }
      }
    },
    source: envoy.service.auth.v3.AttributeContext.Peer {
      address: envoy.config.core.v3.Address {
        socket_address: envoy.config.core.v3.SocketAddress {
          address: source.address,
          port_value: uint(source.port)
        }
      }
    },
    context_extensions: {"host": "${celString(host)}"},
    metadata_context: envoy.config.core.v3.Metadata{}
  }
}`;

const guard = { terminal: false, isGuard: true } as const;

function authReplies(v: string): TypedAction[] {
  return [
    {
      type: 'deny',
      predicate: `has(${v}.denied_response)`,
      terminal: true,
      isGuard: true,
      denyWith: `DenyResponse{status: (${v}.denied_response.status.code != 0) ? uint(${v}.denied_response.status.code) : 403u, headers: ${v}.denied_response.headers, body: ${v}.denied_response.body}`,
    },
    {
      type: 'fail',
      predicate: `has(${v}.ok_response) && (${v}.ok_response.response_headers_to_add.size() > 0 || ${v}.ok_response.headers_to_remove.size() > 0 || ${v}.ok_response.query_parameters_to_set.size() > 0 || ${v}.ok_response.query_parameters_to_remove.size() > 0)`,
      terminal: true,
      isGuard: true,
      logMessage: 'Unsupported field in OkHttpResponse',
    },
    {
      type: 'store',
      predicate: `has(${v}.ok_response) && has(${v}.dynamic_metadata)`,
      ...guard,
      path: 'auth',
      value: `${v}.dynamic_metadata`,
      exportToHost: true,
    },
    {
      type: 'headers',
      predicate: `has(${v}.ok_response)`,
      ...guard,
      target: 'request',
      headers: `${v}.ok_response.headers`,
    },
    {
      type: 'fail',
      predicate: `!has(${v}.denied_response) && !has(${v}.ok_response)`,
      terminal: true,
      isGuard: true,
      logMessage: `Auth response contained no http_response from ${v}`,
    },
  ];
}

function rateLimitReplies(v: string): TypedAction[] {
  return [
    {
      type: 'deny',
      predicate: `${v}.overall_code == 2`,
      terminal: true,
      isGuard: true,
      denyWith: `DenyResponse{status: 429u, headers: ${v}.response_headers_to_add, body: "Too Many Requests\\n"}`,
    },
    {
      type: 'headers',
      predicate: `${v}.overall_code == 1`,
      ...guard,
      target: 'response',
      headers: `${v}.response_headers_to_add`,
    },
    {
      type: 'fail',
      predicate: `${v}.overall_code != 1 && ${v}.overall_code != 2`,
      terminal: true,
      isGuard: true,
      logMessage: `Unknown rate limit response code from ${v}`,
    },
  ];
}

const reportReplies = (v: string): TypedAction[] => [
  {
    type: 'fail',
    predicate: `!has(${v}.overall_code)`,
    terminal: false,
    isGuard: false,
    logMessage: 'Rate limit report failed: invalid gRPC response',
  },
];

const entry = (key: string, value: string) =>
  `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry { key: "${celString(key)}", value: ${value} }`;

/** The RateLimitRequest of a rate-limit action (kuadrant-operator's buildRateLimitRequest). */
function rateLimitRequest(a: WasmAction): string {
  let hits = '1u';
  const unconditional: string[] = [];
  const parts: string[] = [];
  for (const b of a.conditionalData ?? []) {
    const entries: string[] = [];
    for (const d of b.data) {
      if (d.expression.key === HITS_ADDEND) {
        hits = `uint(${d.expression.value})`;
        continue;
      }
      entries.push(entry(d.expression.key, `string(${d.expression.value})`));
    }
    if (entries.length === 0) continue;
    if (!b.predicates?.length) unconditional.push(...entries);
    else parts.push(`((${join(b.predicates)}) ? [${entries.join(', ')}] : [])`);
  }
  if (unconditional.length) parts.push(`[${unconditional.join(', ')}]`);
  const descriptors = parts.length
    ? `[envoy.extensions.common.ratelimit.v3.RateLimitDescriptor { entries: ${parts.join(' + ')} }]`
    : '[]';
  return `envoy.service.ratelimit.v3.RateLimitRequest {
    domain: "${celString(a.scope)}",
    hits_addend: ${hits},
    descriptors: ${descriptors}
}`;
}

/** The predicate of a rate-limit action: its own, and (when every block has some) any block's. */
function rateLimitPredicate(a: WasmAction): string {
  const own = join(a.predicates ?? []);
  const blocks = a.conditionalData ?? [];
  const conditional =
    blocks.length === 0 || blocks.some((b) => !b.predicates?.length)
      ? 'true'
      : blocks
          .map((b) => (b.predicates!.length === 1 ? b.predicates![0]! : `(${join(b.predicates!)})`))
          .join(' || ');
  if (own === 'true') return conditional;
  if (conditional === 'true') return own;
  return `(${own}) && (${conditional})`;
}

const BODY_REF = /(response|request)BodyJSON\(["']([^"']+)["']\)/g;

/** The typed action of one legacy action. */
function typedAction(a: WasmAction, sequential: boolean): TypedAction {
  const sources = a.sources?.length ? { sources: a.sources } : {};
  if (a.service === AUTH_SERVICE)
    return {
      type: 'grpc',
      predicate: join(a.predicates ?? []),
      ...guard,
      ...sources,
      var: 'auth_response',
      service: AUTH_SERVICE,
      label: 'auth',
      messageBuilder: checkRequest(a.scope),
      onReply: authReplies('auth_response'),
    };
  const report = a.service === RATELIMIT_REPORT_SERVICE;
  const v = report ? 'report_response' : 'ratelimit_response';
  return {
    type: 'grpc',
    predicate: rateLimitPredicate(a),
    terminal: false,
    isGuard: !report,
    ...(sequential && !report ? { execution: 'sequential' as const } : {}),
    ...sources,
    var: v,
    service: a.service,
    label: report ? 'ratelimit_report' : 'ratelimit',
    messageBuilder: rateLimitRequest(a),
    onReply: report ? reportReplies(v) : rateLimitReplies(v),
  };
}

/** The actions of one set: body reads stored first (one store per direction), then each action. */
function typedActions(actions: readonly WasmAction[]): TypedAction[] {
  const refs = new Map<string, Map<string, { call: string; pointer: string; sources: Set<string> }>>();
  for (const a of actions)
    for (const b of a.conditionalData ?? [])
      for (const d of b.data)
        for (const m of d.expression.value.matchAll(BODY_REF)) {
          const dir = m[1]!;
          if (!refs.has(dir)) refs.set(dir, new Map());
          const byPointer = refs.get(dir)!;
          const r = byPointer.get(m[2]!) ?? { call: m[0], pointer: m[2]!, sources: new Set<string>() };
          for (const s of a.sources ?? []) r.sources.add(s);
          byPointer.set(m[2]!, r);
        }
  const stores: TypedAction[] = [];
  const replace: [string, string][] = [];
  for (const dir of ['request', 'response']) {
    const byPointer = refs.get(dir);
    if (!byPointer) continue;
    const leaf = (p: string) => p.replace(/^\//, '').split('/').pop()!;
    const count = new Map<string, number>();
    for (const p of byPointer.keys()) count.set(leaf(p), (count.get(leaf(p)) ?? 0) + 1);
    const store = dir === 'request' ? REQUEST_BODY_STORE : RESPONSE_BODY_STORE;
    const entries: string[] = [];
    const sources = new Set<string>();
    for (const p of [...byPointer.keys()].sort()) {
      const r = byPointer.get(p)!;
      const key = count.get(leaf(p))! > 1 ? p.replace(/^\//, '').replace(/\//g, '_') : leaf(p);
      entries.push(`"${key}": ${r.call}`);
      replace.push([r.call, `${store}.${key}`]);
      for (const s of r.sources) sources.add(s);
    }
    stores.push({
      type: 'store',
      predicate: 'true',
      terminal: false,
      isGuard: false,
      ...(sources.size ? { sources: [...sources] } : {}),
      path: store,
      value: `{${entries.join(', ')}}`,
    });
  }
  const swapped = replace.length
    ? actions.map((a) => ({
        ...a,
        ...(a.conditionalData
          ? {
              conditionalData: a.conditionalData.map((b) => ({
                ...b,
                data: b.data.map((d) => ({
                  expression: {
                    key: d.expression.key,
                    value: replace.reduce((v, [from, to]) => v.split(from).join(to), d.expression.value),
                  },
                })),
              })),
            }
          : {}),
      }))
    : actions;
  const authAt = swapped.findIndex((a) => a.service === AUTH_SERVICE);
  return [...stores, ...swapped.map((a, i) => typedAction(a, authAt > i))];
}

const typedSets = new WeakMap<ActionSet, TypedActionSet>();
/**
 * The typed form of one set (same name, same conditions), built once per set object: the size
 * budget measures it (built.ts setBytes) and the provider object carries it (publishedConfig).
 */
export function typedSet(s: ActionSet): TypedActionSet {
  let t = typedSets.get(s);
  if (!t) {
    t = { name: s.name, routeRuleConditions: s.routeRuleConditions, actions: typedActions(s.actions) };
    typedSets.set(s, t);
  }
  return t;
}

/** The typed form of a configuration built by wasm.ts (same sets, same order, same names). */
export function toTypedConfig(config: WasmConfig, settings: WiringSettings): TypedWasmConfig {
  return { services: typedServices(settings), actionSets: config.actionSets.map(typedSet) };
}

/** The configuration's envelope (its services, no set) in the form the settings choose: for sizes. */
export function publishedEnvelope(config: WasmConfig, settings: WiringSettings): object {
  return {
    services: settings.configForm === 'typed' ? typedServices(settings) : config.services,
    actionSets: [],
  };
}

/** The configuration as the provider objects carry it, in the form the settings choose. */
export function publishedConfig(config: WasmConfig, settings: WiringSettings): WasmConfig | TypedWasmConfig {
  return settings.configForm === 'typed' ? toTypedConfig(config, settings) : config;
}
