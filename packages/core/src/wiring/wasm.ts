// The wasm-shim configuration of one gateway: what Kuadrant's wasm-shim filter in the gateway's Envoy
// does for each request (the `services` + `actionSets` form that kuadrant-operator v1.x writes and
// current wasm-shim accepts). Pure: the controller publishes it inside the provider's object
// (providers.ts), `cascadectl render` prints it and `cascadectl request` evaluates it (request.ts).
//
// - `services`: the auth service (Authorino's Check) and the rate-limit service (Limitador's
//   ShouldRateLimit), with their failure modes and timeouts (settings).
// - `actionSets`: one per (hostname, route-rule match) of every path through the gateway, with or
//   without actions, in the order the gateway's proxy tries routes (matches.ts, per provider):
//   wasm-shim runs the first set whose hostname and predicates hold, so each request meets the set
//   of the route the proxy picked, or no set where the proxy has no route. A route without any
//   policy gets a set with no action: without it, its requests would meet another route's set. A
//   set's actions are what each policy kind contributes for that path (PolicyKind.actions), in phase
//   order (rate limiting before auth unless a limit reads `auth.*`).
// - Listeners on several ports: the proxy routes per port, wasm-shim per hostname only, so each set
//   then holds `destination.port` (the port Envoy listens on: Envoy Gateway shifts ports below 1024
//   by 10000), and where a port has no virtual host as specific as a hostname another port has, the
//   port's less specific sets are repeated under that hostname (wasm-shim looks only at the sets of
//   the longest hostname matching the request).
// - Host case: wasm-shim (up to v0.14) looks the hostname up as the client wrote it, Envoy routes it
//   case-insensitively. Unless `hostLookupFoldsCase`, the first set under every wildcard hostname
//   (and under `*`, always present then) denies a host that is not in lower case, so no casing of a
//   host skips its policies (fail closed: such clients get a denial).
//
// Fail closed: a rule whose match cannot be written (a regular expression RE2 does not compile) or a
// route whose action sets would not fit in the object is not left out silently: its requests meet a
// set placed after every other set of the hostname that sends them to the auth service with a scope
// no AuthConfig declares (Authorino denies an unknown host), and the problem names the route.
import { createHash } from 'node:crypto';
import { re2Problem as compileRe2 } from '../merge/cel.ts';
import { hostnameCovers, hostnameSpecificity } from '../topology/hostnames.ts';
import type { PathRef, RouteMatch, RouteObject } from '../topology/types.ts';
import {
  compareCandidates,
  type MatchCandidate,
  matchPredicates,
  matchRegexes,
  type Precedence,
} from './matches.ts';

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
/** The predicate of the host-case guard: a host wasm-shim would look up under the wrong hostname. */
export const HOST_NOT_LOWER = 'request.host != request.host.lowerAscii()';

export interface WiringSettings {
  authFailureMode: 'allow' | 'deny';
  authTimeout: string;
  rateLimitFailureMode: 'allow' | 'deny';
  rateLimitTimeout: string;
  /** Largest serialized configuration (bytes): past it the largest routes are refused (fail closed). */
  maxConfigBytes: number;
  /**
   * Whether the wasm-shim image looks hostnames up case-insensitively (wasm-shim after v0.14); if
   * not, a host not in lower case is denied rather than let past its policies.
   */
  hostLookupFoldsCase?: boolean;
}

export const DEFAULT_WIRING: WiringSettings = {
  authFailureMode: 'deny',
  authTimeout: '200ms',
  rateLimitFailureMode: 'allow',
  rateLimitTimeout: '100ms',
  // an object is stored whole in etcd (1.5 MiB); leave room for the wrapper and metadata
  maxConfigBytes: 1_000_000,
};

/** One path through the gateway with its route and what each kind contributes to it (maybe nothing). */
export interface WiringPath {
  path: PathRef;
  hostnames: string[];
  route: RouteObject | undefined;
  actions: ContributedAction[];
  /** The port the proxy listens on for the path's listener (`destination.port`), when known. */
  port?: number;
}

/** How the configuration is laid out for the gateway's proxy. */
export interface BuildOptions {
  /** Whose route order the sets follow (default: Envoy Gateway's). */
  precedence?: Precedence;
  /**
   * Every port the proxy listens on for the gateway (`destination.port`), those without routes too:
   * a request on a port without routes must meet no set.
   */
  ports?: readonly number[];
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
  /** The ports of the listeners the set's path is reached through (empty: unknown). */
  ports: Set<number>;
  /** A guard placed first under its hostname. */
  guard?: boolean;
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
  options: BuildOptions = {},
): WiringResult {
  const precedence = options.precedence ?? 'envoy-gateway';
  const problems: WiringProblem[] = [];
  const built: Built[] = [];
  const byId = new Map<string, Built>();
  for (const p of paths) {
    const route = p.route;
    const routeId = `${p.path.route.kind}/${p.path.route.namespace}/${p.path.route.name}`;
    const ruleIndex = route?.rules.findIndex((r, i) => (r.name || `rule-${i + 1}`) === p.path.rule) ?? -1;
    const rule = ruleIndex >= 0 ? route?.rules[ruleIndex] : undefined;
    const matches = rule?.matches?.length ? rule.matches : [undefined];
    const actions = [...p.actions].sort((a, b) => a.phase - b.phase).map((a) => a.action);
    for (const hostname of p.hostnames) {
      matches.forEach((match, matchIndex) => {
        // one set per (hostname, route, rule, match): a route reached through two listeners with
        // the same hostname is one set holding both listeners' ports; the first path's actions win
        const id = JSON.stringify([hostname, routeId, p.path.rule, matchIndex]);
        const twin = byId.get(id);
        if (twin) {
          if (p.port !== undefined) twin.ports.add(p.port);
          return;
        }
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
        if (bad.length > 0 && actions.length === 0) {
          // nothing to enforce: no deny, but the set still goes last (its predicates are looser)
          predicates = matchPredicates(
            p.path.route.kind,
            withoutFields(match, new Set(bad.map((b) => b.field))),
          );
          refused = true;
        } else if (bad.length > 0) {
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
        const b: Built = {
          origin: { route: routeId, rule: p.path.rule, listener: p.path.listener },
          candidate,
          route: routeId,
          refused,
          ports: new Set(p.port === undefined ? [] : [p.port]),
          set: {
            name: `${routeId}#${p.path.rule}[${matchIndex}]@${hostname}|${hash(id)}`,
            routeRuleConditions: {
              hostnames: [hostname],
              ...(predicates.length ? { predicates } : {}),
            },
            actions: setActions,
          },
        };
        byId.set(id, b);
        built.push(b);
      });
    }
  }
  const layout = (sets: Built[]) => withGuards(perPort(sets, options.ports ?? []), settings);
  let result = assemble(layout(built), settings, precedence);
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
    const hosts = new Map<string, Set<number>>();
    for (let i = built.length - 1; i >= 0; i--) {
      const b = built[i]!;
      if (b.route !== worst[0]) continue;
      built.splice(i, 1);
      const ports = hosts.get(b.candidate.hostname) ?? new Set<number>();
      for (const port of b.ports) ports.add(port);
      hosts.set(b.candidate.hostname, ports);
    }
    for (const [h, ports] of hosts) {
      const [kind, ns, name] = worst[0].split('/') as [MatchCandidate['routeKind'], string, string];
      built.push({
        origin: { route: worst[0], rule: '*', listener: '*' },
        route: worst[0],
        refused: true,
        ports,
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
    result = assemble(layout(built), settings, precedence);
  }
  return { ...result, problems };
}

/** Whether a configuration has anything for wasm-shim to do (else no provider object is wanted). */
export function hasActions(config: WasmConfig): boolean {
  return config.actionSets.some((s) => s.actions.length > 0 && !isHostCaseGuard(s));
}

/**
 * Listeners on several ports (see the header): each set holds its ports, and where a hostname of
 * the configuration has, on some port, no set of its own but a less specific one, that one is
 * repeated under the hostname for that port.
 */
function perPort(built: Built[], listening: readonly number[]): Built[] {
  const ports = new Set<number>(listening);
  for (const b of built) for (const p of b.ports) ports.add(p);
  if (ports.size < 2) return built;
  const portPredicate = (ps: Iterable<number>) => {
    const list = [...ps].sort((a, b) => a - b);
    return list.length === 1 ? `destination.port == ${list[0]}` : `destination.port in [${list.join(', ')}]`;
  };
  const out: Built[] = built.map((b) =>
    b.ports.size === 0 ? b : { ...b, set: withPredicate(b.set, portPredicate(b.ports)) },
  );
  // the hostnames each port has virtual hosts for
  const hostsOf = new Map<number, Set<string>>();
  for (const b of built)
    for (const p of b.ports) {
      const hs = hostsOf.get(p) ?? new Set<string>();
      hs.add(b.candidate.hostname);
      hostsOf.set(p, hs);
    }
  const keys = [...new Set(built.map((b) => b.candidate.hostname))];
  // per (port, key): the virtual host the proxy picks for requests wasm-shim files under key
  const memo = new Map<string, string | undefined>();
  const vhost = (port: number, key: string): string | undefined => {
    const m = `${port}|${key}`;
    if (memo.has(m)) return memo.get(m);
    let best: string | undefined;
    for (const h of hostsOf.get(port) ?? [])
      if (
        hostnameCovers(h, key) &&
        (best === undefined || hostnameSpecificity(h) > hostnameSpecificity(best))
      )
        best = h;
    memo.set(m, best);
    return best;
  };
  for (const b of built) {
    const from = b.candidate.hostname;
    if (!from.startsWith('*')) continue;
    for (const key of keys) {
      if (key === from || !hostnameCovers(from, key)) continue;
      const viaPorts = [...b.ports].filter((p) => vhost(p, key) === from);
      if (viaPorts.length === 0) continue;
      const set = withPredicate(b.set, portPredicate(viaPorts));
      out.push({
        ...b,
        ports: new Set(viaPorts),
        set: {
          ...set,
          name: `${b.set.name}~${key}`,
          routeRuleConditions: { ...set.routeRuleConditions, hostnames: [key] },
        },
      });
    }
  }
  return out;
}

function withPredicate(set: ActionSet, predicate: string): ActionSet {
  return {
    ...set,
    routeRuleConditions: {
      ...set.routeRuleConditions,
      predicates: [predicate, ...(set.routeRuleConditions.predicates ?? [])],
    },
  };
}

const GUARD_PREFIX = 'cascade:host-case@';
/** Whether a set is a host-case guard (see the header). */
export const isHostCaseGuard = (s: ActionSet): boolean => s.name.startsWith(GUARD_PREFIX);

/** The host-case guards (see the header), one under `*` and one under each wildcard hostname. */
function withGuards(built: Built[], settings: WiringSettings): Built[] {
  if (settings.hostLookupFoldsCase || built.length === 0) return built;
  const keys = new Set(built.flatMap((b) => b.set.routeRuleConditions.hostnames));
  keys.add('*');
  const guards: Built[] = [...keys]
    .filter((k) => k.startsWith('*'))
    .map((k) => ({
      origin: { route: '*', rule: '*', listener: '*' },
      route: '*',
      refused: true,
      guard: true,
      ports: new Set<number>(),
      candidate: {
        hostname: k,
        routeKind: 'HTTPRoute',
        routeNamespace: '',
        routeName: '',
        ruleIndex: 0,
        matchIndex: 0,
        match: undefined,
      },
      set: {
        name: `${GUARD_PREFIX}${k}`,
        routeRuleConditions: { hostnames: [k], predicates: [HOST_NOT_LOWER] },
        actions: [
          {
            service: AUTH_SERVICE,
            scope: DENY_SCOPE,
            sources: [
              'host not in lower case: wasm-shim looks hostnames up as written and the proxy does not, so it is denied rather than let past its policies',
            ],
          },
        ],
      },
    }));
  return [...built, ...guards];
}

function assemble(
  built: Built[],
  settings: WiringSettings,
  precedence: Precedence,
): { config: WasmConfig; bytes: number; origins: WiringResult['origins'] } {
  // under one hostname: the guard first, refused sets last (only requests no other set takes reach them)
  const key = (b: Built) => b.set.routeRuleConditions.hostnames[0] ?? '';
  const order = [...built].sort((a, b) => {
    if (key(a) !== key(b)) {
      const d = hostnameSpecificity(key(b)) - hostnameSpecificity(key(a));
      return d !== 0 ? d : key(a) < key(b) ? -1 : 1;
    }
    if (Boolean(a.guard) !== Boolean(b.guard)) return a.guard ? -1 : 1;
    if (a.refused !== b.refused) return a.refused ? 1 : -1;
    return compareCandidates(a.candidate, b.candidate, precedence);
  });
  const config: WasmConfig = { services: services(settings), actionSets: order.map((b) => b.set) };
  const origins: WiringResult['origins'] = {};
  for (const b of order) if (!b.guard) origins[b.set.name] = b.origin;
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
