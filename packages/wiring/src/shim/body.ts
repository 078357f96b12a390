// What wasm-shim reads from a response body for `responseBodyJSON("/pointer")` (its token-usage
// task, v0.14): the strategy is chosen by the response's content-type, the fields by JSON pointer.
//   - `text/event-stream`: server-sent events are parsed as they complete (an event ends at a blank
//     line; `data:` lines joined by a newline; comments and other fields ignored; an event without
//     data is dropped); the fields come from the second-to-last event, which in an OpenAI-style stream
//     is the chunk carrying `usage`, the last being `[DONE]`. A stream cut short (no final blank line
//     after `[DONE]`) has a different second-to-last event, usually one without `usage`.
//   - anything else: the whole body as one JSON document.
// A field is set only when it is a boolean, a number or a string; a body that does not parse, a
// missing field, or null/an array/an object leaves it unset, and an expression that reads it errors
// (wasm-shim logs "Missing json property" and the call that needed it is not made). Pure and bounded.

/** Largest body read (bytes): wasm-shim buffers the whole response; Cascade's evaluator stops here. */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

export interface BodyFields {
  strategy: 'json' | 'sse';
  /** The fields found, by pointer. */
  values: Record<string, boolean | number | string>;
  /** Why a pointer is unset, by pointer. */
  missing: Record<string, string>;
  /** The event or document the fields were read from (SSE: which event, of how many). */
  source: string;
}

/** A JSON pointer (RFC 6901) into a parsed document (undefined: absent). */
function pointer(doc: unknown, ptr: string): unknown {
  if (ptr === '') return doc;
  if (!ptr.startsWith('/')) return undefined;
  let cur = doc;
  for (const raw of ptr.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(cur)) {
      if (!/^(0|[1-9][0-9]*)$/.test(key)) return undefined;
      cur = cur[Number(key)];
    } else if (cur && typeof cur === 'object' && Object.hasOwn(cur, key)) {
      cur = (cur as Record<string, unknown>)[key];
    } else return undefined;
  }
  return cur;
}

/** The completed events of a server-sent event stream (their data). */
export function sseEvents(body: string): string[] {
  const events: string[] = [];
  let data: string[] = [];
  // a line ends at CRLF, LF or CR; the text after the last line end is an incomplete line
  const lines = body.split(/\r\n|\n|\r/);
  lines.pop();
  for (const line of lines) {
    if (line === '') {
      const d = data.join('\n');
      if (d !== '') events.push(d.endsWith('\n') ? d.slice(0, -1) : d);
      data = [];
      continue;
    }
    if (line.startsWith(':')) continue;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
  }
  return events;
}

/** The fields at `pointers` of a response body, as wasm-shim reads them (see the header). */
export function bodyFields(
  body: string,
  contentType: string | undefined,
  pointers: readonly string[],
): BodyFields {
  const sse = (contentType ?? '').toLowerCase().includes('text/event-stream');
  const out: BodyFields = { strategy: sse ? 'sse' : 'json', values: {}, missing: {}, source: '' };
  const fail = (why: string) => {
    for (const p of pointers) out.missing[p] = why;
    return out;
  };
  if (Buffer.byteLength(body) > MAX_BODY_BYTES)
    return fail(`the body is over the ${MAX_BODY_BYTES.toLocaleString('en')} bytes Cascade evaluates`);
  let text = body;
  if (sse) {
    const events = sseEvents(body);
    if (events.length < 2)
      return fail(
        `the stream has ${events.length} complete event${events.length === 1 ? '' : 's'}: the fields are read from the second-to-last`,
      );
    text = events[events.length - 2]!;
    out.source = `event ${events.length - 1} of ${events.length}`;
  } else out.source = 'the whole body';
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    return fail(
      `${sse ? `the ${out.source}` : 'the body'} is not JSON (${(e as Error).message.slice(0, 80)})`,
    );
  }
  for (const p of pointers) {
    const v = pointer(doc, p);
    if (v === undefined) out.missing[p] = `${p} is not in ${out.source}`;
    else if (typeof v === 'boolean' || typeof v === 'number' || typeof v === 'string') out.values[p] = v;
    else
      out.missing[p] =
        `${p} is ${v === null ? 'null' : Array.isArray(v) ? 'an array' : 'an object'}, not a scalar`;
  }
  return out;
}
