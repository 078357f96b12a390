// Run-time cost metering of CEL conditions, as cel-go's runtime cost tracking: the estimate cannot
// know every shape (a condition may build its values), so evaluation itself is metered and aborted at
// the limit. The evaluator (cel-js) has no hook for this, so the condition's source is instrumented:
// every place where work grows with the size of a value is wrapped in a call of the metering function,
// which charges 1 plus the size of the value passing through it (items of a list or map, characters of
// a string) and throws at the limit:
//   - each body of a comprehension (once per iteration: the work of the loop),
//   - each `a + b` (the list or string it builds),
//   - the range of `in` (a linear search) and the text of `matches` (a linear scan).
// Positions come from the parsed tree, so the instrumented source parses to the same expression with
// those calls added. The meter's state is per evaluation (evaluation is synchronous).
import { isNode, MACROS } from './cel-cost.ts';

/** The metering function's name in instrumented sources (a name no tenant has reason to use). */
export const METER_FN = 'cascade_cost_meter';

export class CostExceeded extends Error {}

/** The meter of the evaluation under way. */
const meter = { spent: 0, limit: 0 };

/** Charges a value and returns it; throws CostExceeded past the limit. */
export function charge(v: unknown): unknown {
  let size = 0;
  if (typeof v === 'string' || Array.isArray(v)) size = v.length;
  else if (v instanceof Map || v instanceof Set) size = v.size;
  else if (v instanceof Uint8Array) size = v.length;
  else if (v && typeof v === 'object') size = Object.keys(v).length;
  meter.spent += 1 + size;
  if (meter.spent > meter.limit) throw new CostExceeded(`over ${meter.limit}`);
  return v;
}

/** Runs `f` with a fresh meter of `limit` units (read what it spent with `spent()`, also after a throw). */
export function metered<T>(limit: number, f: () => T): T {
  meter.spent = 0;
  meter.limit = limit;
  return f();
}

/** What the last metered evaluation spent. */
export function spent(): number {
  return meter.spent;
}

type Span = { start: number; end: number };
const spanOf = (n: unknown): Span | undefined => {
  if (!isNode(n)) return undefined;
  const { start, end } = n as unknown as Span;
  return typeof start === 'number' && typeof end === 'number' && end > start ? { start, end } : undefined;
};

/** The spans to meter in a parsed tree (see the file's comment). */
function spans(n: unknown, out: Span[]): Span[] {
  if (Array.isArray(n)) {
    for (const x of n) spans(x, out);
    return out;
  }
  if (!isNode(n)) return out;
  const a = n.args as unknown[];
  const add = (x: unknown) => {
    const s = spanOf(x);
    if (s) out.push(s);
  };
  if (n.op === '+') add(n);
  else if (n.op === 'in') add(a[1]);
  else if (n.op === 'rcall' || n.op === 'call') {
    const name = a[0] as string;
    const args = (n.op === 'rcall' ? a[2] : a[1]) as unknown[];
    if (n.op === 'rcall' && MACROS.has(name)) for (const b of args.slice(1)) add(b);
    if (name === 'matches') add(n.op === 'rcall' ? a[1] : args[0]);
  }
  if (Array.isArray(n.args) || isNode(n.args)) spans(n.args, out);
  return out;
}

/** The source with every metered span wrapped in the metering function. */
export function instrument(source: string, ast: unknown): string {
  const events: { at: number; open: boolean; len: number }[] = [];
  for (const s of spans(ast, [])) {
    events.push({ at: s.start, open: true, len: s.end - s.start });
    events.push({ at: s.end, open: false, len: s.end - s.start });
  }
  // at one position: closes before opens; the outer span opens first and closes last
  events.sort((x, y) =>
    x.at !== y.at
      ? x.at - y.at
      : x.open !== y.open
        ? x.open
          ? 1
          : -1
        : x.open
          ? y.len - x.len
          : x.len - y.len,
  );
  let out = '';
  let from = 0;
  for (const e of events) {
    out += source.slice(from, e.at) + (e.open ? `${METER_FN}(` : ')');
    from = e.at;
  }
  return out + source.slice(from);
}
