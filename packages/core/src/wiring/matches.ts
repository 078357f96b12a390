// Route-rule matches -> the CEL predicates wasm-shim evaluates to pick an action set, and the order
// of Gateway API match precedence that decides which action set a request meets first.
//
// Predicates use the attributes wasm-shim exposes (`request.url_path` is the path without the query,
// `request.headers` is keyed by lower-case names as Envoy stores them, `queryMap(request.query)` is
// wasm-shim's query-string parser). Where Kuadrant's own translation is looser than Gateway API's
// semantics, Cascade keeps Gateway API's (the difference is listed in the ratelimitpolicy README):
//   - PathPrefix matches element by element: `/v1` matches `/v1` and `/v1/x`, never `/v1x`;
//   - a header RegularExpression match is a regular expression (Kuadrant compares it as a string).
import type { RouteKind, RouteMatch, ValueMatch } from '../topology/types.ts';

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

function pathPredicate(p: NonNullable<RouteMatch['path']>): string {
  if (p.type === 'Exact') return `${PATH} == ${celString(p.value)}`;
  if (p.type === 'RegularExpression') return `${PATH}.matches(${celString(p.value)})`;
  const prefix = p.value.replace(/\/+$/, '');
  if (prefix === '') return `${PATH}.startsWith('/')`;
  return `(${PATH} == ${celString(prefix)} || ${PATH}.startsWith(${celString(`${prefix}/`)}))`;
}

function headerPredicate(h: ValueMatch): string {
  const name = celString(h.name.toLowerCase());
  const value = `request.headers[${name}]`;
  return h.type === 'RegularExpression'
    ? `${name} in request.headers && ${value}.matches(${celString(h.value)})`
    : `${name} in request.headers && ${value} == ${celString(h.value)}`;
}

function queryPredicate(q: ValueMatch): string {
  const name = celString(q.name);
  const value = `${QUERY}[${name}]`;
  const test =
    q.type === 'RegularExpression'
      ? `${value}.matches(${celString(q.value)})`
      : `${value} == ${celString(q.value)}`;
  return `${name} in ${QUERY} ? ${test} : false`;
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function grpcPredicate(g: NonNullable<RouteMatch['grpc']>): string | undefined {
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

const PATH_RANK = { Exact: 0, RegularExpression: 1, PathPrefix: 2 } as const;

/** Path or gRPC method: its rank (Exact first, then regular expressions, then prefixes) and length. */
function pathWeight(c: MatchCandidate): [number, number] {
  if (c.routeKind === 'GRPCRoute') {
    const g = c.match?.grpc;
    if (!g) return [3, 0];
    if (g.type === 'RegularExpression') return [1, (g.service ?? '').length + (g.method ?? '').length];
    if (g.service && g.method) return [0, g.service.length + g.method.length];
    return [2, (g.service ?? g.method ?? '').length];
  }
  const p = c.match?.path ?? { type: 'PathPrefix' as const, value: '/' };
  return [PATH_RANK[p.type], p.value.replace(/\/+$/, '').length];
}

/** Hostnames: exact before wildcard, then more characters first. */
function hostWeight(h: string): [number, number] {
  return [h.startsWith('*') ? 1 : 0, -h.length];
}

/**
 * Gateway API match precedence (HTTPRoute and GRPCRoute specs), the first difference deciding:
 * hostname (exact before wildcard, longer first), path (Exact, then RegularExpression, then
 * PathPrefix; longer values first), a method match, more header matches, more query-parameter
 * matches, the older route, the route's namespace/name in alphabetical order; then the rule's and the
 * match's position in the route. Kuadrant leaves ties after the query parameters in random order;
 * here they are decided, so the same input always gives the same configuration.
 */
export function compareCandidates(a: MatchCandidate, b: MatchCandidate): number {
  const ha = hostWeight(a.hostname);
  const hb = hostWeight(b.hostname);
  if (ha[0] !== hb[0]) return ha[0] - hb[0];
  if (ha[1] !== hb[1]) return ha[1] - hb[1];
  if (a.hostname !== b.hostname) return a.hostname < b.hostname ? -1 : 1;
  const pa = pathWeight(a);
  const pb = pathWeight(b);
  if (pa[0] !== pb[0]) return pa[0] - pb[0];
  if (pa[1] !== pb[1]) return pb[1] - pa[1];
  const ma = a.match?.method ? 1 : 0;
  const mb = b.match?.method ? 1 : 0;
  if (ma !== mb) return mb - ma;
  const hda = a.match?.headers?.length ?? 0;
  const hdb = b.match?.headers?.length ?? 0;
  if (hda !== hdb) return hdb - hda;
  const qa = a.match?.queryParams?.length ?? 0;
  const qb = b.match?.queryParams?.length ?? 0;
  if (qa !== qb) return qb - qa;
  const ca = a.routeCreatedAt ?? '';
  const cb = b.routeCreatedAt ?? '';
  if (ca !== cb) return ca === '' ? 1 : cb === '' ? -1 : ca < cb ? -1 : 1;
  const na = `${a.routeNamespace}/${a.routeName}/${a.routeKind}`;
  const nb = `${b.routeNamespace}/${b.routeName}/${b.routeKind}`;
  if (na !== nb) return na < nb ? -1 : 1;
  return a.ruleIndex - b.ruleIndex || a.matchIndex - b.matchIndex;
}
