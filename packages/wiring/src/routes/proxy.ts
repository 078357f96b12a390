// The route the gateway's proxy picks for a request, from the paths themselves rather than from the
// wasm-shim configuration: the listener port, then the virtual host (the most specific hostname of
// that port covering the request's host, compared case-insensitively as Envoy does), then the
// matching route rule match that the provider's precedence puts first (matches.ts). Matches are
// evaluated directly (plain string tests and RE2 full matches), not through the CEL predicates, so
// comparing this choice with the set wasm-shim runs checks the predicates, the hostname index, the
// ports and the order together. `cascadectl request` prints it beside the set; the property test
// (proxy.property.test.ts) checks that both always name the same route rule.

import type { RouteKind, RouteMatch, ValueMatch } from '@cascade/core';
import { hostnameCovers, hostnameSpecificity, queryMap } from '@cascade/core';
import { RE2JS } from 're2js';
import type { HttpRequest } from '../shim/request.ts';
import type { WiringPath } from '../shim/wasm.ts';
import { compareCandidates, type MatchCandidate, type Precedence } from './matches.ts';

export interface ProxyChoice {
  /** `<RouteKind>/<ns>/<name>` */
  route: string;
  rule: string;
  matchIndex: number;
  /** The virtual host (the hostname the route was listed under). */
  hostname: string;
  listener: string;
}

const fullMatch = (pattern: string, value: string): boolean => {
  try {
    return RE2JS.compile(pattern).matches(value);
  } catch {
    return false; // the proxy refuses such a route; it never matches
  }
};

function valueMatches(m: ValueMatch, value: string | undefined): boolean {
  if (value === undefined) return false;
  return m.type === 'RegularExpression' ? fullMatch(m.value, value) : m.value === value;
}

function pathMatches(kind: RouteKind, m: RouteMatch | undefined, urlPath: string): boolean {
  if (kind === 'GRPCRoute') {
    const g = m?.grpc;
    if (!g || (!g.service && !g.method)) return true;
    if (g.type === 'RegularExpression')
      return fullMatch(`/(?:${g.service ?? '[^/]+'})/(?:${g.method ?? '[^/]+'})`, urlPath);
    const [, service, method, ...rest] = urlPath.split('/');
    if (rest.length > 0 || service === undefined || method === undefined) return false;
    return (!g.service || g.service === service) && (!g.method || g.method === method);
  }
  const p = m?.path ?? { type: 'PathPrefix' as const, value: '/' };
  if (p.type === 'Exact') return urlPath === p.value;
  if (p.type === 'RegularExpression') return fullMatch(p.value, urlPath);
  const prefix = p.value.replace(/\/+$/, '');
  return prefix === '' || urlPath === prefix || urlPath.startsWith(`${prefix}/`);
}

/** Whether one route rule match takes the request (Gateway API semantics, as Envoy evaluates them). */
export function routeMatchTakes(kind: RouteKind, m: RouteMatch | undefined, req: HttpRequest): boolean {
  const q = req.path.indexOf('?');
  const urlPath = q < 0 ? req.path : req.path.slice(0, q);
  if (!pathMatches(kind, m, urlPath)) return false;
  if (kind === 'HTTPRoute' && m?.method && m.method !== req.method.toUpperCase()) return false;
  const headers = new Map(Object.entries(req.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
  for (const h of m?.headers ?? []) if (!valueMatches(h, headers.get(h.name.toLowerCase()))) return false;
  const query = queryMap(q < 0 ? '' : req.path.slice(q + 1));
  for (const p of m?.queryParams ?? []) if (!valueMatches(p, query.get(p.name))) return false;
  return true;
}

/**
 * The route rule match the proxy sends the request to (undefined: none, the proxy answers 404).
 * `req.port` is the port the proxy received it on; paths without a port are on every port.
 */
export function proxyRoute(
  paths: readonly WiringPath[],
  req: HttpRequest,
  precedence: Precedence,
): ProxyChoice | undefined {
  const host = req.host.split(':')[0]!.toLowerCase();
  const onPort = paths.filter((p) => p.port === undefined || req.port === undefined || p.port === req.port);
  let vhost: string | undefined;
  for (const p of onPort)
    for (const h of p.hostnames)
      if (
        hostnameCovers(h, host) &&
        (vhost === undefined || hostnameSpecificity(h) > hostnameSpecificity(vhost))
      )
        vhost = h;
  if (vhost === undefined) return undefined;
  let best: { c: MatchCandidate; choice: ProxyChoice } | undefined;
  for (const p of onPort) {
    if (!p.hostnames.includes(vhost)) continue;
    const kind = p.path.route.kind;
    const ruleIndex = p.route?.rules.findIndex((r, i) => (r.name || `rule-${i + 1}`) === p.path.rule) ?? -1;
    const rule = ruleIndex >= 0 ? p.route?.rules[ruleIndex] : undefined;
    const matches = rule?.matches?.length ? rule.matches : [undefined];
    matches.forEach((match, matchIndex) => {
      if (!routeMatchTakes(kind, match, req)) return;
      const c: MatchCandidate = {
        hostname: vhost,
        routeKind: kind,
        routeNamespace: p.path.route.namespace,
        routeName: p.path.route.name,
        ...(p.route?.createdAt ? { routeCreatedAt: p.route.createdAt } : {}),
        ruleIndex: Math.max(ruleIndex, 0),
        matchIndex,
        match,
      };
      if (best && compareCandidates(best.c, c, precedence) <= 0) return;
      best = {
        c,
        choice: {
          route: `${kind}/${p.path.route.namespace}/${p.path.route.name}`,
          rule: p.path.rule,
          matchIndex,
          hostname: vhost,
          listener: p.path.listener,
        },
      };
    });
  }
  return best?.choice;
}
