// The wasm-shim configuration of one gateway: what Kuadrant's wasm-shim filter in the gateway's Envoy
// does for each request (the `services` + `actionSets` form that kuadrant-operator v1.x writes and
// current wasm-shim accepts). Pure: the controller publishes it inside the provider's object
// (providers.ts), `cascadectl render` prints it and `cascadectl request` evaluates it (request.ts).
//
// - `services`: the auth service (Authorino's Check) and the rate-limit service (Limitador's
//   ShouldRateLimit), with their failure modes and timeouts (settings).
// - `actionSets`: one per (hostname, route-rule match) of every path through the gateway that has any
//   action, in Gateway API match precedence (matches.ts): wasm-shim runs the first set whose hostname
//   and predicates hold. A set's actions are what each policy kind contributes for that path
//   (PolicyKind.actions), in phase order (rate limiting before auth unless a limit reads `auth.*`).
//
// Fail closed: a rule whose match cannot be written (a regular expression RE2 does not compile) or a
// route whose action sets would not fit in the object is not left out silently: its requests meet a
// set placed after every other set of the hostname that sends them to the auth service with a scope
// no AuthConfig declares (Authorino denies an unknown host), and the problem names the route.
import { createHash } from 'node:crypto';
import { re2Problem as compileRe2 } from '../merge/cel.ts';
import type { PathRef, RouteMatch, RouteObject } from '../topology/types.ts';
import { compareCandidates, type MatchCandidate, matchPredicates, matchRegexes } from './matches.ts';

export interface WasmService {
  type: 'auth' | 'ratelimit';
  endpoint: string;
  failureMode: 'allow' | 'deny';
  timeout: string;
}

export interface DataItem {
  expression: { key: string; value: string };
}

export interface ConditionalData {
  predicates?: string[];
  data: DataItem[];
}

export interface WasmAction {
  service: string;
  scope: string;
  predicates?: string[];
  conditionalData?: ConditionalData[];
  /** The policies whose rules this action carries (`<Kind>:<ns>/<name>`), for people reading it. */
  sources?: string[];
}

/** An action a policy kind contributes for one path, and when it runs (lower phase first). */
export interface ContributedAction {
  action: WasmAction;
  phase: number;
}

/** Phases: rate limiting runs before auth, unless it reads `auth.*` (then after). */
export const PHASE = { rateLimit: 100, auth: 200, rateLimitAfterAuth: 300 } as const;

export interface ActionSet {
  name: string;
  routeRuleConditions: { hostnames: string[]; predicates?: string[] };
  actions: WasmAction[];
}

export interface WasmConfig {
  services: Record<string, WasmService>;
  actionSets: ActionSet[];
}

export const AUTH_SERVICE = 'auth-service';
export const RATELIMIT_SERVICE = 'ratelimit-service';
/** The Envoy clusters the services call (defined by the provider objects). */
export const AUTH_CLUSTER = 'kuadrant-auth-service';
export const RATELIMIT_CLUSTER = 'kuadrant-ratelimit-service';
/** The scope of a refused route's auth action: no AuthConfig declares this host, so Authorino denies. */
export const DENY_SCOPE = 'refused.cascade.internal';

export interface WiringSettings {
  authFailureMode: 'allow' | 'deny';
  authTimeout: string;
  rateLimitFailureMode: 'allow' | 'deny';
  rateLimitTimeout: string;
  /** Largest serialized configuration (bytes): past it the largest routes are refused (fail closed). */
  maxConfigBytes: number;
}

export const DEFAULT_WIRING: WiringSettings = {
  authFailureMode: 'deny',
  authTimeout: '200ms',
  rateLimitFailureMode: 'allow',
  rateLimitTimeout: '100ms',
  // an object is stored whole in etcd (1.5 MiB); leave room for the wrapper and metadata
  maxConfigBytes: 1_000_000,
};

/** One path through the gateway with its route and what each kind contributes to it. */
export interface WiringPath {
  path: PathRef;
  hostnames: string[];
  route: RouteObject | undefined;
  actions: ContributedAction[];
}

export interface WiringProblem {
  /** `<RouteKind>/<ns>/<name>` */
  route: string;
  rule?: string;
  reason: string;
}

export interface WiringResult {
  config: WasmConfig;
  /** Where each action set comes from (by set name): the route (`<Kind>/<ns>/<name>`), its rule, the path's listener. */
  origins: Record<string, { route: string; rule: string; listener: string }>;
  problems: WiringProblem[];
  /** Serialized size of the configuration (bytes). */
  bytes: number;
}

interface Built {
  origin: { route: string; rule: string; listener: string };
  candidate: MatchCandidate;
  set: ActionSet;
  route: string;
  refused: boolean;
}

const hash = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 16);

function services(s: WiringSettings): Record<string, WasmService> {
  return {
    [AUTH_SERVICE]: {
      type: 'auth',
      endpoint: AUTH_CLUSTER,
      failureMode: s.authFailureMode,
      timeout: s.authTimeout,
    },
    [RATELIMIT_SERVICE]: {
      type: 'ratelimit',
      endpoint: RATELIMIT_CLUSTER,
      failureMode: s.rateLimitFailureMode,
      timeout: s.rateLimitTimeout,
    },
  };
}

const denyAction = (reason: string): WasmAction => ({
  service: AUTH_SERVICE,
  scope: DENY_SCOPE,
  sources: [`refused: ${reason}`.slice(0, 300)],
});

/** The wasm-shim configuration of one gateway from its paths (see the header). */
export function buildWasmConfig(
  paths: WiringPath[],
  settings: WiringSettings = DEFAULT_WIRING,
): WiringResult {
  const problems: WiringProblem[] = [];
  const built: Built[] = [];
  const seen = new Set<string>();
  for (const p of paths) {
    if (p.actions.length === 0) continue;
    const route = p.route;
    const routeId = `${p.path.route.kind}/${p.path.route.namespace}/${p.path.route.name}`;
    const ruleIndex = route?.rules.findIndex((r, i) => (r.name || `rule-${i + 1}`) === p.path.rule) ?? -1;
    const rule = ruleIndex >= 0 ? route?.rules[ruleIndex] : undefined;
    const matches = rule?.matches?.length ? rule.matches : [undefined];
    const actions = [...p.actions].sort((a, b) => a.phase - b.phase).map((a) => a.action);
    for (const hostname of p.hostnames) {
      matches.forEach((match, matchIndex) => {
        // one set per (hostname, route, rule, match): a route reached through two listeners with
        // the same hostname is one set (wasm-shim cannot tell listeners apart); the first path wins
        const id = JSON.stringify([hostname, routeId, p.path.rule, matchIndex]);
        if (seen.has(id)) return;
        seen.add(id);
        const candidate: MatchCandidate = {
          hostname,
          routeKind: p.path.route.kind,
          routeNamespace: p.path.route.namespace,
          routeName: p.path.route.name,
          ...(route?.createdAt ? { routeCreatedAt: route.createdAt } : {}),
          ruleIndex: Math.max(ruleIndex, 0),
          matchIndex,
          match,
        };
        const bad = matchRegexes(match)
          .map((r) => ({ ...r, error: compileRe2(r.pattern) }))
          .filter((r) => r.error);
        let predicates = matchPredicates(p.path.route.kind, match);
        let setActions = actions;
        let refused = false;
        if (bad.length > 0) {
          const reason = `rule ${p.path.rule} match ${matchIndex}: ${bad.map((b) => `${b.field} ${JSON.stringify(b.pattern.slice(0, 80))}: ${b.error}`).join('; ')}`;
          problems.push({
            route: routeId,
            rule: p.path.rule,
            reason: `cannot be written for wasm-shim (${reason}): its requests are denied`,
          });
          // the predicates that can be written; the set goes after the others of its hostname
          predicates = matchPredicates(
            p.path.route.kind,
            withoutFields(match, new Set(bad.map((b) => b.field))),
          );
          setActions = [denyAction(reason)];
          refused = true;
        }
        built.push({
          origin: { route: routeId, rule: p.path.rule, listener: p.path.listener },
          candidate,
          route: routeId,
          refused,
          set: {
            name: `${routeId}#${p.path.rule}[${matchIndex}]@${hostname}|${hash(id)}`,
            routeRuleConditions: {
              hostnames: [hostname],
              ...(predicates.length ? { predicates } : {}),
            },
            actions: setActions,
          },
        });
      });
    }
  }
  let result = assemble(built, settings);
  // over the size an object may hold: the route with the largest share is refused (fail closed) until
  // it fits, so one route with thousands of matches never takes the other routes' wiring down
  for (let guard = 0; guard < 1000 && result.bytes > settings.maxConfigBytes; guard++) {
    const weight = new Map<string, number>();
    for (const b of built)
      if (!b.refused) weight.set(b.route, (weight.get(b.route) ?? 0) + JSON.stringify(b.set).length);
    const worst = [...weight].sort((a, c) => c[1] - a[1] || a[0].localeCompare(c[0]))[0];
    if (!worst) break;
    const reason = `its action sets take ${worst[1].toLocaleString('en')} bytes and the gateway's configuration ${result.bytes.toLocaleString('en')}, over the ${settings.maxConfigBytes.toLocaleString('en')} an object may hold`;
    problems.push({ route: worst[0], reason: `${reason}: its requests are denied` });
    const hosts = new Set<string>();
    for (let i = built.length - 1; i >= 0; i--) {
      const b = built[i]!;
      if (b.route !== worst[0]) continue;
      built.splice(i, 1);
      hosts.add(b.candidate.hostname);
    }
    for (const h of hosts) {
      const [kind, ns, name] = worst[0].split('/') as [MatchCandidate['routeKind'], string, string];
      built.push({
        origin: { route: worst[0], rule: '*', listener: '*' },
        route: worst[0],
        refused: true,
        candidate: {
          hostname: h,
          routeKind: kind,
          routeNamespace: ns,
          routeName: name,
          ruleIndex: 0,
          matchIndex: 0,
          match: undefined,
        },
        set: {
          name: `${worst[0]}#refused@${h}|${hash(`${worst[0]}|${h}`)}`,
          routeRuleConditions: { hostnames: [h] },
          actions: [denyAction(reason)],
        },
      });
    }
    result = assemble(built, settings);
  }
  return { ...result, problems };
}

function assemble(
  built: Built[],
  settings: WiringSettings,
): { config: WasmConfig; bytes: number; origins: WiringResult['origins'] } {
  // refused sets last within their hostname: only requests no other set takes reach them
  const order = [...built].sort((a, b) => {
    if (a.candidate.hostname === b.candidate.hostname && a.refused !== b.refused) return a.refused ? 1 : -1;
    return compareCandidates(a.candidate, b.candidate);
  });
  const config: WasmConfig = { services: services(settings), actionSets: order.map((b) => b.set) };
  const origins: WiringResult['origins'] = {};
  for (const b of order) origins[b.set.name] = b.origin;
  return { config, bytes: Buffer.byteLength(JSON.stringify(config)), origins };
}

/** A match without the fields named (as matchRegexes names them). */
function withoutFields(m: RouteMatch | undefined, fields: Set<string>): RouteMatch | undefined {
  if (!m) return m;
  const out: RouteMatch = { ...m };
  if (fields.has('path.value')) delete out.path;
  if (fields.has('method.service') || fields.has('method.method')) delete out.grpc;
  if (m.headers) out.headers = m.headers.filter((_, i) => !fields.has(`headers[${i}].value`));
  if (m.queryParams) out.queryParams = m.queryParams.filter((_, i) => !fields.has(`queryParams[${i}].value`));
  return out;
}
