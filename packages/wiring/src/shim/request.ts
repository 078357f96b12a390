// One request through a gateway's wasm-shim configuration, as wasm-shim decides it: which action set
// it meets, why the earlier ones do not take it, and what each action sends (the auth scope, the
// rate-limit descriptor), then which Limitador limits count it. Pure and bounded (the project's CEL,
// with its cost limits): `cascadectl request` prints it and the Kuadrant compatibility tests compare
// Cascade's configuration with kuadrant-operator's through it.
//
// Selection (wasm-shim's index): the action sets of the longest hostname that matches the request's
// host (exact, then the longest `*.` suffix, then `*`) are the only candidates; of those, the first
// whose predicates all hold is run. The host is looked up as the client wrote it, port cut off
// (wasm-shim up to v0.14 does not fold its case; Envoy routes case-insensitively). A predicate that errors (a missing header read without `in`) does
// not hold. In an action, a `conditionalData` block whose predicates hold adds its entries to the one
// descriptor sent; an entry whose expression errors is left out (so a limit counting it does not
// count). An action's own predicates skip it whole.
import { compileCondition, isCompiled } from '@cascade/core';
import { type BodyFields, bodyFields } from './body.ts';
import { HITS_ADDEND } from './typed.ts';
import type { ActionSet, WasmAction, WasmConfig } from './wasm.ts';

export interface HttpRequest {
  host: string;
  method: string;
  /** Path with the query string, as sent. */
  path: string;
  /** Header names are compared case-insensitively (stored lower-case, as Envoy does). */
  headers?: Record<string, string>;
  source?: { address: string; port?: number };
  /** `auth.identity` as Authorino would have resolved it (for limits that read `auth.*`). */
  identity?: Record<string, unknown>;
  /** The port the proxy received the request on (`destination.port`; default 8080). */
  port?: number;
  /** The upstream's response, for actions that run on it (token limits' reports). */
  response?: { body: string; contentType?: string };
}

export type SetOutcome =
  | { outcome: 'matched' }
  | { outcome: 'other-hostname'; hostname: string }
  | { outcome: 'predicate-false'; predicate: string }
  | { outcome: 'predicate-error'; predicate: string; error: string };

export interface BlockTrace {
  predicates: string[];
  holds: boolean;
  /** Why it does not hold (the first predicate that is false or errors). */
  why?: string;
  entries: { key: string; value?: string; error?: string }[];
}

export interface ActionTrace {
  service: string;
  type: 'auth' | 'ratelimit' | 'ratelimit-check' | 'ratelimit-report' | 'unknown';
  /** When it runs: before the request goes upstream, or on the response (a report). */
  phase: 'request' | 'response';
  /** Rate-limit calls: the hits the call adds (1; a check 0; a report what the response says). */
  hits?: number;
  /** A report: what was read from the response body. */
  body?: BodyFields;
  /** Typed form: the message builder failed (the call is not made; the service's failure mode applies). */
  builderError?: string;
  scope: string;
  sources: string[];
  run: boolean;
  why?: string;
  /** ratelimit: the blocks, and the descriptor sent (undefined: nothing sent, no block held). */
  blocks?: BlockTrace[];
  descriptor?: Record<string, string>;
}

export interface RequestTrace {
  host: string;
  /** The hostname whose action sets were considered (undefined: none matches the host). */
  hostname?: string;
  sets: { name: string; hostname: string; result: SetOutcome }[];
  matched?: string;
  actions: ActionTrace[];
}

/** The request's attributes as wasm-shim exposes them to CEL. */
export function requestAttributes(req: HttpRequest): Record<string, unknown> {
  const q = req.path.indexOf('?');
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers ?? {})) headers[k.toLowerCase()] = v;
  headers[':authority'] ??= req.host;
  return {
    request: {
      url_path: q < 0 ? req.path : req.path.slice(0, q),
      path: req.path,
      query: q < 0 ? '' : req.path.slice(q + 1),
      method: req.method.toUpperCase(),
      host: req.host,
      scheme: 'http',
      protocol: 'HTTP/1.1',
      headers,
    },
    source: { address: req.source?.address ?? '10.0.0.1', port: req.source?.port ?? 40000 },
    destination: { address: '10.0.0.2', port: req.port ?? 8080 },
    ...(req.identity ? { auth: { identity: req.identity } } : {}),
  };
}

function hostMatches(pattern: string, host: string): boolean {
  if (pattern === '*') return true;
  if (pattern.startsWith('*.')) return host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1;
  return pattern === host;
}

/** The most specific hostname of the configuration that matches the host (wasm-shim's longest match). */
export function longestHostname(hostnames: Iterable<string>, host: string): string | undefined {
  let best: string | undefined;
  const rank = (h: string) => (h === '*' ? [2, 0] : h.startsWith('*') ? [1, -h.length] : [0, 0]);
  for (const h of hostnames) {
    if (!hostMatches(h, host)) continue;
    if (best === undefined) best = h;
    else {
      const [a, al] = rank(h);
      const [b, bl] = rank(best);
      if (a! < b! || (a === b && al! < bl!)) best = h;
    }
  }
  return best;
}

/** Evaluates one predicate: true, false, or why it could not. */
export function evaluatePredicate(
  predicate: string,
  vars: Record<string, unknown>,
): true | false | { error: string } {
  const c = compileCondition(predicate);
  if (!isCompiled(c)) return { error: c.error };
  const r = c.evaluateWith(vars);
  if (!r.ok) return { error: r.error };
  if (typeof r.value !== 'boolean') return { error: `evaluates to ${typeof r.value}, not bool` };
  return r.value;
}

export function allHold(
  predicates: string[] | undefined,
  vars: Record<string, unknown>,
): { holds: boolean; why?: string; error?: string; predicate?: string } {
  for (const p of predicates ?? []) {
    const v = evaluatePredicate(p, vars);
    if (v === true) continue;
    if (v === false) return { holds: false, predicate: p, why: `${p} is false` };
    return { holds: false, predicate: p, error: v.error, why: `${p} errors: ${v.error}` };
  }
  return { holds: true };
}

export function stringOf(v: unknown): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'bigint' || typeof v === 'number' || typeof v === 'boolean') return String(v);
  return JSON.stringify(v);
}

export const BODY_CALL = /responseBodyJSON\(\s*(?:"([^"]*)"|'([^']*)')\s*\)/g;
/** `responseBodyJSON("/p")` read from the body fields (an unset field errors, as in wasm-shim). */
export const BODY_VAR = '__cascade_response_body';
const withBodyReads = (expr: string) =>
  expr.replace(
    BODY_CALL,
    (_, a: string | undefined, b: string | undefined) => `${BODY_VAR}[${JSON.stringify(a ?? b ?? '')}]`,
  );

export function evaluate(
  expr: string,
  vars: Record<string, unknown>,
): { ok: true; value: unknown } | { ok: false; error: string } {
  const c = compileCondition(withBodyReads(expr));
  return isCompiled(c) ? c.evaluateWith(vars) : { ok: false, error: c.error };
}

/** The hits a rate-limit call adds: 1, or its `ratelimit.hits_addend` item's value (a whole number). */
export function hitsOf(v: unknown): number | string {
  // a CEL uint is an object whose valueOf() is a bigint
  if (v && typeof v === 'object' && typeof (v as { valueOf(): unknown }).valueOf() === 'bigint')
    v = (v as { valueOf(): bigint }).valueOf();
  const n = typeof v === 'bigint' ? Number(v) : typeof v === 'string' && /^[0-9]+$/.test(v) ? Number(v) : v;
  if (typeof n === 'number' && Number.isInteger(n) && n >= 0 && n <= Number.MAX_SAFE_INTEGER) return n;
  return `${JSON.stringify(typeof v === 'bigint' ? String(v) : v)} is not a whole number of hits (uint() fails)`;
}

function traceAction(
  a: WasmAction,
  config: WasmConfig,
  vars: Record<string, unknown>,
  response: HttpRequest['response'],
): ActionTrace {
  const type = config.services[a.service]?.type ?? 'unknown';
  const phase = type === 'ratelimit-report' ? 'response' : 'request';
  const base = { service: a.service, type, phase, scope: a.scope, sources: a.sources ?? [] } as const;
  if (phase === 'response' && !response)
    return { ...base, run: false, why: 'runs on the response: no response given (--response-body)' };
  let body: BodyFields | undefined;
  if (phase === 'response') {
    const pointers = new Set<string>();
    for (const b of a.conditionalData ?? [])
      for (const d of b.data)
        for (const m of d.expression.value.matchAll(BODY_CALL)) pointers.add(m[1] ?? m[2] ?? '');
    body = bodyFields(response!.body, response!.contentType, [...pointers]);
    vars = { ...vars, [BODY_VAR]: body.values };
  }
  const gate = allHold(a.predicates, vars);
  if (!gate.holds) return { ...base, run: false, ...(gate.why ? { why: gate.why } : {}) };
  if (type === 'auth' || type === 'unknown') return { ...base, run: true };
  const blocks: BlockTrace[] = [];
  const descriptor: Record<string, string> = {};
  let any = false;
  let hits: number | string = 1;
  for (const b of a.conditionalData ?? []) {
    const h = allHold(b.predicates, vars);
    const entries: BlockTrace['entries'] = [];
    if (h.holds) {
      any = true;
      for (const d of b.data) {
        const r = evaluate(d.expression.value, vars);
        if (d.expression.key === HITS_ADDEND)
          hits = r.ok ? hitsOf(r.value) : `${d.expression.value}: ${r.error}`;
        else if (r.ok) {
          const value = stringOf(r.value);
          entries.push({ key: d.expression.key, value });
          descriptor[d.expression.key] = value;
        } else entries.push({ key: d.expression.key, error: r.error });
      }
    }
    blocks.push({
      predicates: b.predicates ?? [],
      holds: h.holds,
      ...(h.why ? { why: h.why } : {}),
      entries,
    });
  }
  const withBody = body ? { body } : {};
  if (typeof hits === 'string')
    // the message cannot be built: wasm-shim does not make the call (a report: nothing is counted)
    return {
      ...base,
      run: false,
      why: `the hits cannot be computed: ${hits}${body && Object.keys(body.missing).length ? ` (${Object.values(body.missing).join('; ')})` : ''}`,
      blocks,
      ...withBody,
    };
  return {
    ...base,
    run: any,
    ...(any ? {} : { why: 'no conditionalData block holds: nothing is sent' }),
    blocks,
    ...(any ? { descriptor, hits } : {}),
    ...withBody,
  };
}

/** Which set of a configuration (either form) a request meets, and why the earlier ones do not take it. */
export function selectSet<S extends Pick<ActionSet, 'name' | 'routeRuleConditions'>>(
  sets: readonly S[],
  req: HttpRequest,
  vars: Record<string, unknown>,
): { trace: RequestTrace; matched?: S } {
  const host = req.host.split(':')[0]!; // wasm-shim cuts at the first colon
  const hostname = longestHostname(new Set(sets.flatMap((s) => s.routeRuleConditions.hostnames)), host);
  const trace: RequestTrace = { host, ...(hostname ? { hostname } : {}), sets: [], actions: [] };
  let matched: S | undefined;
  for (const s of sets) {
    const h = s.routeRuleConditions.hostnames.includes(hostname ?? '\u0000') ? hostname! : undefined;
    if (!h) {
      if (!matched && s.routeRuleConditions.hostnames.some((x) => hostMatches(x, host)))
        trace.sets.push({
          name: s.name,
          hostname: s.routeRuleConditions.hostnames[0]!,
          result: { outcome: 'other-hostname', hostname: hostname! },
        });
      continue;
    }
    if (matched) continue;
    const r = allHold(s.routeRuleConditions.predicates, vars);
    if (r.holds) {
      matched = s;
      trace.sets.push({ name: s.name, hostname: h, result: { outcome: 'matched' } });
    } else if (r.error)
      trace.sets.push({
        name: s.name,
        hostname: h,
        result: { outcome: 'predicate-error', predicate: r.predicate!, error: r.error },
      });
    else
      trace.sets.push({
        name: s.name,
        hostname: h,
        result: { outcome: 'predicate-false', predicate: r.predicate! },
      });
  }
  if (matched) trace.matched = matched.name;
  return { trace, ...(matched ? { matched } : {}) };
}

/** What wasm-shim does with one request (see the header). */
export function traceRequest(config: WasmConfig, req: HttpRequest): RequestTrace {
  const vars = requestAttributes(req);
  const { trace, matched } = selectSet(config.actionSets, req, vars);
  if (matched) trace.actions = matched.actions.map((a) => traceAction(a, config, vars, req.response));
  return trace;
}

/** A Limitador limit as the limits file holds it. */
export interface CountedLimitSpec {
  namespace: string;
  max_value: number;
  seconds: number;
  conditions: string[];
  variables: string[];
  name?: string;
}

export interface CountedLimit {
  limit: CountedLimitSpec;
  /** The counter's key: the variables' values, in order. */
  counter: string[];
}

/**
 * The limits Limitador counts for one descriptor in one namespace: every limit of that namespace
 * whose conditions hold and whose variables are all present in the descriptor.
 */
export function countedLimits(
  limits: readonly CountedLimitSpec[],
  namespace: string,
  descriptor: Record<string, string>,
): CountedLimit[] {
  const vars = { descriptors: [descriptor] };
  const out: CountedLimit[] = [];
  for (const l of limits) {
    if (l.namespace !== namespace) continue;
    if (!l.conditions.every((c) => evaluatePredicate(c, vars) === true)) continue;
    const counter: string[] = [];
    let present = true;
    for (const v of l.variables) {
      const c = compileCondition(v);
      const r = isCompiled(c) ? c.evaluateWith(vars) : undefined;
      if (!r?.ok) {
        present = false;
        break;
      }
      counter.push(stringOf(r.value));
    }
    if (present) out.push({ limit: l, counter });
  }
  return out;
}
