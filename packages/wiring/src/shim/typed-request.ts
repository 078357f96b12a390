// One request (and its response) through a typed wasm-shim configuration (typed.ts), as wasm-shim
// v0.14 runs it: the set is chosen as in the legacy form (request.ts selectSet); then each action in
// order: a `store` of response-body fields runs on the response; a `grpc` action whose predicate
// holds builds its message with CEL and calls its service (a guard before the request goes
// upstream, a report on the response). A message that fails to build (a counter that does not
// resolve, a body field that is missing) is not sent: wasm-shim logs it and applies the service's
// failure mode. Pure: the Kuadrant compatibility tests compare kuadrant-operator main's typed
// configuration with Cascade's through it, and `cascadectl request --form typed` prints it.
import { type BodyFields, bodyFields } from './body.ts';
import {
  type ActionTrace,
  allHold,
  BODY_CALL,
  BODY_VAR,
  evaluate,
  type HttpRequest,
  hitsOf,
  type RequestTrace,
  requestAttributes,
  selectSet,
  stringOf,
} from './request.ts';
import { RESPONSE_BODY_STORE, type TypedAction, type TypedWasmConfig } from './typed.ts';

/**
 * A message builder as a CEL map: a protobuf message construction (`pkg.Type { field: value }`)
 * becomes a map literal with the field names quoted (`{"field": value}`); strings are left alone.
 */
export function messageAsMap(src: string): string {
  let out = '';
  // each open brace or bracket; a message's `open` says a field's value is being written (in dyn())
  const stack: { kind: 'message' | 'map' | '(' | '['; open?: boolean }[] = [];
  let expectField = false;
  const top = () => stack[stack.length - 1];
  for (let i = 0; i < src.length; i++) {
    const c = src[i]!;
    if (c === '"' || c === "'") {
      let j = i + 1;
      while (j < src.length && src[j] !== c) j += src[j] === '\\' ? 2 : 1;
      out += src.slice(i, j + 1);
      i = j;
      expectField = false;
      continue;
    }
    if (expectField && /[A-Za-z_]/.test(c)) {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)\s*:/.exec(src.slice(i));
      if (m) {
        // fields differ in type: each value is dyn() (CEL map literals are homogeneous)
        out += `"${m[1]}": dyn(`;
        top()!.open = true;
        i += m[0].length - 1;
        expectField = false;
        continue;
      }
    }
    if (!/\s/.test(c)) expectField = false;
    if (c === '{') {
      const name = /[A-Za-z_][A-Za-z0-9_.]*\s*$/.exec(out);
      if (name && !/(^|[^A-Za-z0-9_])in\s*$/.test(out)) {
        out = out.slice(0, name.index);
        stack.push({ kind: 'message' });
        expectField = true;
      } else stack.push({ kind: 'map' });
      out += c;
      continue;
    }
    if (c === '(' || c === '[') stack.push({ kind: c });
    else if (c === '}' || c === ')' || c === ']') {
      const t = stack.pop();
      if (t?.open) out += ')';
    } else if (c === ',' && top()?.kind === 'message') {
      if (top()!.open) out += ')';
      top()!.open = false;
      expectField = true;
    }
    out += c;
  }
  return out;
}

const asMaps = new Map<string, string>();
/** messageAsMap, remembered per builder (a configuration's builders are few and long). */
function builderAsMap(src: string): string {
  let m = asMaps.get(src);
  if (m === undefined) {
    if (asMaps.size >= 10_000) asMaps.clear();
    asMaps.set(src, (m = messageAsMap(src)));
  }
  return m;
}

/** A field of a built message (maps from CEL may be Map objects or plain objects). */
function field(v: unknown, ...path: string[]): unknown {
  let cur = v;
  for (const k of path) {
    if (cur instanceof Map) cur = cur.get(k);
    else if (cur && typeof cur === 'object') cur = (cur as Record<string, unknown>)[k];
    else return undefined;
  }
  return cur;
}

const METHOD_TYPES: Record<string, ActionTrace['type']> = {
  Check: 'auth',
  ShouldRateLimit: 'ratelimit',
  CheckRateLimit: 'ratelimit-check',
  Report: 'ratelimit-report',
};

/** The body pointers an expression reads. */
const pointersOf = (expr: string) => [...expr.matchAll(BODY_CALL)].map((m) => m[1] ?? m[2] ?? '');

/** What wasm-shim does with one request through a typed configuration (see the header). */
export function traceTypedRequest(config: TypedWasmConfig, req: HttpRequest): RequestTrace {
  const attrs = requestAttributes(req);
  let vars: Record<string, unknown> = {
    ...attrs,
    request: { ...(attrs.request as Record<string, unknown>), time: '1970-01-01T00:00:00Z' },
  };
  const { trace, matched } = selectSet(config.actionSets, req, vars);
  if (!matched) return trace;
  let body: BodyFields | undefined;
  for (const a of matched.actions as TypedAction[]) {
    if (a.type === 'store' && a.path === RESPONSE_BODY_STORE) {
      if (!req.response) continue;
      body = bodyFields(req.response.body, req.response.contentType, pointersOf(a.value));
      const stored: Record<string, unknown> = {};
      // each field of the stored map, read alone: a missing one stays unset, the others are kept
      const entries = /^\{(.*)\}$/s.exec(a.value.trim())?.[1] ?? '';
      for (const m of entries.matchAll(/"([^"]+)":\s*((?:response|request)BodyJSON\([^)]*\))/g)) {
        const r = evaluate(m[2]!, { ...vars, [BODY_VAR]: body.values });
        if (r.ok) stored[m[1]!] = r.value;
      }
      vars = { ...vars, kuadrant: { internal: { response: { body: stored } } } };
      continue;
    }
    if (a.type !== 'grpc') continue;
    const service = config.services[a.service];
    const type = METHOD_TYPES[service?.grpcMethod ?? ''] ?? 'unknown';
    const phase = a.isGuard ? 'request' : 'response';
    const base = { service: a.service, type, phase, scope: '', sources: a.sources ?? [] } as const;
    if (phase === 'response' && !req.response) {
      trace.actions.push({
        ...base,
        run: false,
        why: 'runs on the response: no response given (--response-body)',
      });
      continue;
    }
    const gate = allHold([a.predicate], vars);
    if (!gate.holds) {
      trace.actions.push({ ...base, run: false, ...(gate.why ? { why: gate.why } : {}) });
      continue;
    }
    const built = evaluate(builderAsMap(a.messageBuilder), vars);
    const withBody = phase === 'response' && body ? { body } : {};
    if (!built.ok) {
      const unread = phase === 'response' && body ? Object.values(body.missing) : [];
      trace.actions.push({
        ...base,
        run: false,
        why: `the message cannot be built: ${built.error}${unread.length ? ` (${unread.join('; ')})` : ''}; the call is not made (failure mode ${service?.failureMode ?? 'deny'})`,
        builderError: built.error,
        ...withBody,
      });
      continue;
    }
    if (type === 'auth') {
      trace.actions.push({
        ...base,
        scope: String(field(built.value, 'attributes', 'context_extensions', 'host') ?? ''),
        run: true,
      });
      continue;
    }
    const hits = hitsOf(field(built.value, 'hits_addend'));
    const descriptors = (field(built.value, 'descriptors') as unknown[] | undefined) ?? [];
    const descriptor: Record<string, string> = {};
    for (const d of descriptors.slice(0, 1))
      for (const e of (field(d, 'entries') as unknown[] | undefined) ?? [])
        descriptor[String(field(e, 'key'))] = stringOf(field(e, 'value'));
    trace.actions.push({
      ...base,
      scope: String(field(built.value, 'domain') ?? ''),
      run: typeof hits === 'number',
      ...(typeof hits === 'number' ? { hits, descriptor } : { why: hits, builderError: hits }),
      ...withBody,
    });
  }
  return trace;
}
