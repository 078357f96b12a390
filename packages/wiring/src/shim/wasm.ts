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
// Fail closed: a rule whose match cannot be written (a regular expression RE2 does not compile) is
// not left out silently: its requests meet a set placed after every other set of the hostname that
// sends them to the auth service with a scope no AuthConfig declares (Authorino denies an unknown
// host), and the problem names the route. A configuration over `maxConfigBytes` or a namespace over
// `maxSetsPerNamespace` loses routes fairly between namespaces, each replaced by deny sets (size.ts,
// budget.ts); when nothing fits, the configuration denies every request (`failedClosed`).

import type { RouteMatch } from '@cascade/core';
import { re2Problem as compileRe2, hostnameSpecificity } from '@cascade/core';
import {
  compareCandidates,
  type MatchCandidate,
  matchPredicates,
  matchRegexes,
  type Precedence,
} from '../routes/matches.ts';
import { type Built, denyAction, hash, services, setBytes } from './built.ts';
import {
  type BuildOptions,
  DEFAULT_WIRING,
  type WasmConfig,
  type WiringPath,
  type WiringProblem,
  type WiringResult,
  type WiringSettings,
} from './config.ts';
import { isHostCaseGuard, perPort, withGuards } from './layout.ts';
import { fitSize } from './size.ts';
import { publishedEnvelope } from './typed.ts';

export * from './config.ts';
export { isHostCaseGuard } from './layout.ts';

/**
 * The regular expressions of a match that RE2 does not compile, checked once per match object (a
 * route keeps its match objects until it changes): a route with 128 matches of 16 header regexes on
 * 16 hostnames is compiled 2,048 times, not 32,768 (the RE2 cache holds 1,000 patterns).
 */
const checked = new WeakMap<RouteMatch, { field: string; pattern: string; error: string }[]>();
function unwritable(match: RouteMatch | undefined): { field: string; pattern: string; error: string }[] {
  if (!match) return [];
  let bad = checked.get(match);
  if (!bad) {
    bad = matchRegexes(match).flatMap((r) => {
      const error = compileRe2(r.pattern);
      return error ? [{ ...r, error }] : [];
    });
    checked.set(match, bad);
  }
  return bad;
}

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
    // what each match becomes, the same under every hostname: computed once per match
    const written = matches.map((match, matchIndex) => {
      const bad = unwritable(match);
      if (bad.length === 0)
        return { predicates: matchPredicates(p.path.route.kind, match), setActions: actions, refused: false };
      // the predicates that can be written; the set goes after the others of its hostname
      const predicates = matchPredicates(
        p.path.route.kind,
        withoutFields(match, new Set(bad.map((x) => x.field))),
      );
      // nothing to enforce: no deny, but the set still goes last (its predicates are looser)
      if (actions.length === 0) return { predicates, setActions: actions, refused: true };
      const reason = `rule ${p.path.rule} match ${matchIndex}: ${bad.map((x) => `${x.field} ${JSON.stringify(x.pattern.slice(0, 80))}: ${x.error}`).join('; ')}`;
      problems.push({
        route: routeId,
        rule: p.path.rule,
        reason: `cannot be written for wasm-shim (${reason}): its requests are denied`,
      });
      return { predicates, setActions: [denyAction(reason)], refused: true };
    });
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
        const { predicates, setActions, refused } = written[matchIndex]!;
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
  return fitSize(
    built,
    layout,
    (sets) => assemble(sets, settings, precedence),
    settings,
    precedence,
    problems,
  );
}

/** Whether a configuration has anything for wasm-shim to do (else no provider object is wanted). */
export function hasActions(config: WasmConfig): boolean {
  return config.actionSets.some((s) => s.actions.length > 0 && !isHostCaseGuard(s));
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
  const sets = order.map((b) => b.set);
  const config: WasmConfig = { services: services(settings, sets), actionSets: sets };
  const origins: WiringResult['origins'] = {};
  for (const b of order) if (!b.guard) origins[b.set.name] = b.origin;
  // the serialized size (in the form published) without serializing it: the envelope with no set,
  // plus each set and its comma
  const form = settings.configForm ?? 'legacy';
  const envelope = Buffer.byteLength(JSON.stringify(publishedEnvelope(config, settings)));
  const bytes = envelope + order.reduce((n, b) => n + setBytes(b.set, form), 0) - (order.length ? 1 : 0);
  return { config, bytes, origins };
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
