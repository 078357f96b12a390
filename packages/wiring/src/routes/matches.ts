// Route-rule matches -> the CEL predicates wasm-shim evaluates to pick an action set, and the order
// of Gateway API match precedence that decides which action set a request meets first.
//
// Predicates use the attributes wasm-shim exposes (`request.url_path` is the path without the query,
// `request.headers` is keyed by lower-case names as Envoy stores them, `queryMap(request.query)` is
// wasm-shim's query-string parser). A predicate holds exactly when the proxy's route match does, so
// the set wasm-shim picks is the route Envoy picks (Kuadrant's own translation is looser; the
// differences are listed in the wiring README):
//   - PathPrefix matches element by element: `/v1` matches `/v1` and `/v1/x`, never `/v1x`;
//   - every RegularExpression (path, header, query parameter, gRPC method) is anchored at both ends:
//     Envoy's safe_regex matches the whole value, CEL `matches` searches anywhere in it, so an
//     unanchored `/` would take every path of the hostname;
//   - a header RegularExpression match is a regular expression (Kuadrant compares it as a string).

import type { RouteKind, RouteMatch, ValueMatch } from '@cascade/core';
import { hostnameSpecificity } from '@cascade/core';

/** A CEL string literal: single-quoted, with backslashes, quotes and control characters escaped. */
export function celString(s: string): string {
  let out = "'";
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '\\') out += '\\\\';
    else if (ch === "'") out += "\\'";
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return `${out}'`;
}

const PATH = 'request.url_path';
const QUERY = 'queryMap(request.query)';

/** A regular expression that matches the whole value, as Envoy's safe_regex does. */
export const anchored = (pattern: string): string => `^(?:${pattern})$`;

function pathPredicate(p: NonNullable<RouteMatch['path']>): string {
  if (p.type === 'Exact') return `${PATH} == ${celString(p.value)}`;
  if (p.type === 'RegularExpression') return `${PATH}.matches(${celString(anchored(p.value))})`;
  const prefix = p.value.replace(/\/+$/, '');
  if (prefix === '') return `${PATH}.startsWith('/')`;
  return `(${PATH} == ${celString(prefix)} || ${PATH}.startsWith(${celString(`${prefix}/`)}))`;
}

function headerPredicate(h: ValueMatch): string {
  const name = celString(h.name.toLowerCase());
  const value = `request.headers[${name}]`;
  return h.type === 'RegularExpression'
    ? `${name} in request.headers && ${value}.matches(${celString(anchored(h.value))})`
    : `${name} in request.headers && ${value} == ${celString(h.value)}`;
}

function queryPredicate(q: ValueMatch): string {
  const name = celString(q.name);
  const value = `${QUERY}[${name}]`;
  const test =
    q.type === 'RegularExpression'
      ? `${value}.matches(${celString(anchored(q.value))})`
      : `${value} == ${celString(q.value)}`;
  return `${name} in ${QUERY} ? ${test} : false`;
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function grpcPredicate(g: NonNullable<RouteMatch['grpc']>): string | undefined {
  // neither service nor method (Gateway API's CRD refuses it): every request, as the proxy reads it
  if (!g.service && !g.method) return undefined;
  if (g.type === 'RegularExpression')
    return `${PATH}.matches(${celString(`^/(${g.service ?? '[^/]+'})/(${g.method ?? '[^/]+'})$`)})`;
  if (g.service && g.method) return `${PATH} == ${celString(`/${g.service}/${g.method}`)}`;
  if (g.service) return `${PATH}.startsWith(${celString(`/${g.service}/`)})`;
  if (g.method) return `${PATH}.matches(${celString(`^/[^/]+/${escapeRe(g.method)}$`)})`;
  return undefined;
}

/**
 * The predicates of one match, all of which must hold: method, path, headers, query parameters (the
 * order Kuadrant writes them in). No match (a rule without matches): HTTPRoute's default PathPrefix /,
 * nothing for a GRPCRoute (every request).
 */
export function matchPredicates(kind: RouteKind, m: RouteMatch | undefined): string[] {
  const out: string[] = [];
  if (kind === 'GRPCRoute') {
    const g = m?.grpc && grpcPredicate(m.grpc);
    if (g) out.push(g);
  } else {
    if (m?.method) out.push(`request.method == ${celString(m.method)}`);
    out.push(pathPredicate(m?.path ?? { type: 'PathPrefix', value: '/' }));
  }
  for (const h of m?.headers ?? []) out.push(headerPredicate(h));
  for (const q of m?.queryParams ?? []) out.push(queryPredicate(q));
  return out;
}

/** The regular expressions of one match (to check that RE2 compiles them before they are written). */
export function matchRegexes(m: RouteMatch | undefined): { field: string; pattern: string }[] {
  const out: { field: string; pattern: string }[] = [];
  if (m?.path?.type === 'RegularExpression') out.push({ field: 'path.value', pattern: m.path.value });
  if (m?.grpc?.type === 'RegularExpression') {
    if (m.grpc.service) out.push({ field: 'method.service', pattern: m.grpc.service });
    if (m.grpc.method) out.push({ field: 'method.method', pattern: m.grpc.method });
  }
  m?.headers?.forEach((h, i) => {
    if (h.type === 'RegularExpression') out.push({ field: `headers[${i}].value`, pattern: h.value });
  });
  m?.queryParams?.forEach((q, i) => {
    if (q.type === 'RegularExpression') out.push({ field: `queryParams[${i}].value`, pattern: q.value });
  });
  return out;
}

/** One action set before ordering: a hostname, a route rule's match, and where it comes from. */
export interface MatchCandidate {
  hostname: string;
  routeKind: RouteKind;
  routeNamespace: string;
  routeName: string;
  routeCreatedAt?: string;
  ruleIndex: number;
  matchIndex: number;
  match: RouteMatch | undefined;
}

/**
 * Whose route ordering the sets follow: each proxy sorts a virtual host's routes its own way, and
 * wasm-shim runs the first set that holds, so the sets must be in the order the proxy tries routes.
 *   - `envoy-gateway` (its gatewayapi/sort.go): path Exact > RegularExpression > PathPrefix, the
 *     longer path value first, more header matches (a method match is a `:method` header there),
 *     more exact header matches, more query-parameter matches, more exact ones, then the route name
 *     (`httproute/<ns>/<name>/rule/<i>/match/<j>/<host>`) in alphabetical order;
 *   - `istio` (pilot's conversion.go, sortHTTPRoutes): path Exact > PathPrefix > RegularExpression,
 *     the longer value first, a method match first, more header matches, more query-parameter
 *     matches; ties keep Istio's input order, the older route first, then namespace/name.
 * gRPC method matches are compared as the path match each provider writes for them: service and
 * method exact -> Exact `/s/m`; service only -> PathPrefix `/s/`; method only or RegularExpression
 * -> a regular expression.
 */
export type Precedence = 'envoy-gateway' | 'istio';

type UriType = 'Exact' | 'PathPrefix' | 'RegularExpression' | 'None';

/** The path match the proxy routes on, as it writes it: its type and the value whose length counts. */
function uriOf(c: MatchCandidate): { type: UriType; value: string } {
  if (c.routeKind === 'GRPCRoute') {
    const g = c.match?.grpc;
    if (!g || (!g.service && !g.method)) return { type: 'None', value: '' };
    if (g.type === 'RegularExpression')
      return { type: 'RegularExpression', value: `/${g.service ?? '[^/]+'}/${g.method ?? '[^/]+'}` };
    if (g.service && g.method) return { type: 'Exact', value: `/${g.service}/${g.method}` };
    if (g.service) return { type: 'PathPrefix', value: `/${g.service}/` };
    return { type: 'RegularExpression', value: `/[^/]+/${g.method}` };
  }
  const p = c.match?.path ?? { type: 'PathPrefix' as const, value: '/' };
  // both providers strip a prefix's trailing slash (and keep `/` itself)
  const value = p.type === 'PathPrefix' ? p.value.replace(/(.)\/+$/, '$1') : p.value;
  return { type: p.type, value };
}

const RANK: Record<Precedence, Record<UriType, number>> = {
  'envoy-gateway': { Exact: 0, RegularExpression: 1, PathPrefix: 2, None: 3 },
  istio: { Exact: 0, PathPrefix: 1, RegularExpression: 2, None: 3 },
};

const exactCount = (ms: { type?: string }[] | undefined) =>
  (ms ?? []).filter((m) => m.type !== 'RegularExpression').length;

/** Envoy Gateway's route name for a candidate (its last tie-break). */
function envoyGatewayName(c: MatchCandidate): string {
  return `${c.routeKind.toLowerCase()}/${c.routeNamespace}/${c.routeName}/rule/${c.ruleIndex}/match/${c.matchIndex}/${c.hostname}`;
}

/**
 * The order the proxy tries two candidates in (negative: `a` first): the hostname (a virtual host
 * of its own: exact before wildcard, longer first), then the provider's route precedence (see
 * Precedence), then a deterministic tie-break (the rule's and the match's position), so the same
 * input always gives the same configuration.
 */
export function compareCandidates(
  a: MatchCandidate,
  b: MatchCandidate,
  precedence: Precedence = 'envoy-gateway',
): number {
  const ha = hostnameSpecificity(a.hostname);
  const hb = hostnameSpecificity(b.hostname);
  if (ha !== hb) return hb - ha;
  if (a.hostname !== b.hostname) return a.hostname < b.hostname ? -1 : 1;
  const ua = uriOf(a);
  const ub = uriOf(b);
  const rank = RANK[precedence];
  if (rank[ua.type] !== rank[ub.type]) return rank[ua.type] - rank[ub.type];
  if (ua.value.length !== ub.value.length) return ub.value.length - ua.value.length;
  const ma = a.match?.method ? 1 : 0;
  const mb = b.match?.method ? 1 : 0;
  const hda = a.match?.headers?.length ?? 0;
  const hdb = b.match?.headers?.length ?? 0;
  const qa = a.match?.queryParams?.length ?? 0;
  const qb = b.match?.queryParams?.length ?? 0;
  if (precedence === 'envoy-gateway') {
    if (hda + ma !== hdb + mb) return hdb + mb - (hda + ma);
    const ea = exactCount(a.match?.headers) + ma;
    const eb = exactCount(b.match?.headers) + mb;
    if (ea !== eb) return eb - ea;
    if (qa !== qb) return qb - qa;
    const qea = exactCount(a.match?.queryParams);
    const qeb = exactCount(b.match?.queryParams);
    if (qea !== qeb) return qeb - qea;
    const na = envoyGatewayName(a);
    const nb = envoyGatewayName(b);
    return na < nb ? -1 : na > nb ? 1 : 0;
  }
  if (ma !== mb) return mb - ma;
  if (hda !== hdb) return hdb - hda;
  if (qa !== qb) return qb - qa;
  const ca = a.routeCreatedAt ?? '';
  const cb = b.routeCreatedAt ?? '';
  if (ca !== cb) return ca === '' ? 1 : cb === '' ? -1 : ca < cb ? -1 : 1;
  const na = `${a.routeNamespace}/${a.routeName}/${a.routeKind}`;
  const nb = `${b.routeNamespace}/${b.routeName}/${b.routeKind}`;
  if (na !== nb) return na < nb ? -1 : 1;
  return a.ruleIndex - b.ruleIndex || a.matchIndex - b.matchIndex;
}
