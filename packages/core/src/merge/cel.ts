// D/O conditions: CEL over the lower effective policy (`self`). Parsing happens once per policy
// revision; evaluation errors are returned, never thrown, so they can become status messages.
//
// Conditions are written by tenants, and the controller evaluates them on the event loop that also
// renews its lease, so every expression is bounded before it runs (as Kubernetes bounds CEL in CRDs):
//   - at admission (compile): an estimated cost from the syntax tree, with every list or map of the
//     input assumed to hold up to MAX_LIST items and every string MAX_STRING characters; a
//     comprehension costs its body times the size of its range, so nested loops multiply. Over
//     COST_LIMIT the expression is refused with its estimate;
//   - at evaluation: the input's real largest list and string are measured, and an input larger than
//     assumed re-estimates the cost with the real sizes: over the limit, the evaluation is refused
//     (an error, as any evaluation error) instead of run;
//   - `matches()` uses RE2 semantics (re2js: linear time, no backtracking) instead of JavaScript
//     regular expressions, whose backtracking is exponential on patterns such as '^(a+)+$'.
import { Environment } from '@marcbachmann/cel-js';
import { RE2JS } from 're2js';

/** Cost units an expression may use, estimated (Kubernetes' per-expression limit is the same). */
export const COST_LIMIT = 1_000_000;
/** Items assumed in a list or map of the input when estimating at admission. */
export const MAX_LIST = 256;
/** Characters assumed in a string of the input when estimating at admission. */
export const MAX_STRING = 1024;

const re2Cache = new Map<string, RE2JS>();
function re2(pattern: string): RE2JS {
  let r = re2Cache.get(pattern);
  if (!r) {
    r = RE2JS.compile(pattern); // throws on syntax RE2 does not have (backreferences, lookaround)
    if (re2Cache.size >= 1_000) re2Cache.delete(re2Cache.keys().next().value!);
    re2Cache.set(pattern, r);
  }
  return r;
}
const re2Matches = (s: string, p: string) => {
  let r: RE2JS;
  try {
    r = re2(p);
  } catch (e) {
    throw new Error(`invalid regular expression (RE2 syntax): ${p}: ${(e as Error).message}`);
  }
  return r.matcher(s).find();
};

const env = new Environment({ unlistedVariablesAreDyn: true })
  .registerFunction('string.re2Matches(string): bool', re2Matches)
  .registerFunction('re2Matches(string, string): bool', re2Matches);

export interface CompiledCondition {
  source: string;
  /** Estimated cost with the admission-time size assumptions. */
  cost: number;
  /** `rule` is the lower rule `{name, value}` for a wildcard constraint, else null. */
  evaluate(self: unknown, rule?: unknown): { ok: true; value: boolean } | { ok: false; error: string };
}

function firstLine(e: unknown): string {
  const msg = e instanceof Error ? e.message : String(e);
  return msg.split('\n')[0] ?? msg;
}

/** Compiled conditions by source text: many policies repeat the same constraint. Bounded. */
const cache = new Map<string, CompiledCondition | { error: string }>();
const CACHE_MAX = 10_000;

/** Parses a condition (cached by source); returns a message when it does not parse or costs too much. */
export function compileCondition(source: string): CompiledCondition | { error: string } {
  let c = cache.get(source);
  if (!c) {
    c = compileUncached(source);
    if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
    cache.set(source, c);
  }
  return c;
}

// ---- cost estimate ------------------------------------------------------------------------------

type Node = { op: string; args: unknown };
interface Sizes {
  list: number;
  string: number;
}
interface Est {
  cost: number;
  /** Items the node's value may have (a list or map), and characters (a string). */
  items: number;
  chars: number;
}
const MACROS = new Set(['all', 'exists', 'exists_one', 'existsOne', 'map', 'filter']);
const isNode = (n: unknown): n is Node => typeof n === 'object' && n !== null && 'op' in n;
const ZERO: Est = { cost: 0, items: 0, chars: 0 };

/**
 * Estimated cost of a syntax tree. Every variable (the input, a comprehension's element) is assumed
 * to be as large as `sizes` allows: an over-estimate for elements, which only makes the bound safer.
 */
function estimate(n: unknown, sizes: Sizes): Est {
  const unknown = (cost: number): Est => ({ cost, items: sizes.list, chars: sizes.string });
  if (Array.isArray(n)) {
    const out = { ...ZERO };
    for (const x of n) {
      const e = estimate(x, sizes);
      out.cost += e.cost;
      out.items = Math.max(out.items, e.items);
      out.chars = Math.max(out.chars, e.chars);
    }
    return out;
  }
  if (!isNode(n)) return ZERO;
  const a = n.args as unknown[];
  switch (n.op) {
    case 'value':
      return { cost: 1, items: 0, chars: typeof n.args === 'string' ? n.args.length : 0 };
    case 'id':
      return unknown(1);
    case '.':
    case '[]':
      return unknown(estimate(a, sizes).cost + 1);
    case 'list': {
      const e = estimate(a, sizes);
      return { cost: e.cost + 1, items: a.length, chars: e.chars };
    }
    case 'map': {
      const e = estimate(a, sizes);
      return { cost: e.cost + 1, items: (a[0] as unknown[]).length, chars: e.chars };
    }
    case '+': {
      const l = estimate(a[0], sizes);
      const r = estimate(a[1], sizes);
      const items = l.items + r.items;
      const chars = l.chars + r.chars;
      return { cost: l.cost + r.cost + items + chars, items, chars };
    }
    case 'in': {
      const l = estimate(a[0], sizes);
      const r = estimate(a[1], sizes);
      return { cost: l.cost + r.cost + r.items, items: 0, chars: 0 };
    }
    case 'rcall':
    case 'call': {
      const name = a[0] as string;
      const recv = n.op === 'rcall' ? estimate(a[1], sizes) : ZERO;
      const args = (n.op === 'rcall' ? a[2] : a[1]) as unknown[];
      if (n.op === 'rcall' && MACROS.has(name) && isNode(args[0]) && args[0].op === 'id') {
        const body = estimate(args.slice(1), sizes);
        return {
          cost: recv.cost + recv.items * (body.cost + 1),
          items: name === 'map' || name === 'filter' ? recv.items : 0,
          chars: 0,
        };
      }
      const each = args.map((x) => estimate(x, sizes));
      const cost = recv.cost + each.reduce((s, e) => s + e.cost, 0) + 1;
      if (name === 'matches' || name === 're2Matches') {
        // RE2: linear in the text, times the size of the automaton (the pattern's length)
        const [subject, pattern] =
          n.op === 'rcall' ? [recv, each[0] ?? ZERO] : [each[0] ?? ZERO, each[1] ?? ZERO];
        return {
          cost: cost + subject.chars * Math.max(1, pattern.chars) + pattern.chars,
          items: 0,
          chars: 0,
        };
      }
      // string and list functions: linear in their operands
      const items = Math.max(recv.items, ...each.map((e) => e.items));
      const chars = Math.max(recv.chars, ...each.map((e) => e.chars));
      return { cost: cost + items + chars, items, chars };
    }
    default: {
      const e = estimate(n.args, sizes);
      return { ...e, cost: e.cost + 1 };
    }
  }
}

const ASSUMED: Sizes = { list: MAX_LIST, string: MAX_STRING };

/** The largest list/map and string in a value (bounded walk: at most 100,000 nodes). */
function measure(v: unknown, into: Sizes = { list: 0, string: 0 }, budget = { left: 100_000 }): Sizes {
  if (budget.left-- <= 0) return into;
  if (typeof v === 'string') into.string = Math.max(into.string, v.length);
  else if (Array.isArray(v)) {
    into.list = Math.max(into.list, v.length);
    for (const x of v) measure(x, into, budget);
  } else if (v && typeof v === 'object') {
    const values = Object.values(v);
    into.list = Math.max(into.list, values.length);
    for (const x of values) measure(x, into, budget);
  }
  return into;
}
const measured = new WeakMap<object, Sizes>();

/** Every `matches` becomes RE2's: the same syntax tree, evaluated by re2Matches. */
function useRe2(n: unknown): void {
  if (Array.isArray(n)) for (const x of n) useRe2(x);
  else if (isNode(n)) {
    const a = n.args as unknown[];
    if ((n.op === 'rcall' || n.op === 'call') && a[0] === 'matches') a[0] = 're2Matches';
    if (Array.isArray(n.args) || isNode(n.args)) useRe2(n.args);
  }
}

function compileUncached(source: string): CompiledCondition | { error: string } {
  let program: ((ctx: Record<string, unknown>) => unknown) & { ast: unknown };
  try {
    program = env.parse(source) as unknown as typeof program;
  } catch (e) {
    return { error: `does not parse: ${firstLine(e)}` };
  }
  const cost = estimate(program.ast, ASSUMED).cost;
  if (cost > COST_LIMIT)
    return {
      error: `estimated cost ${cost > 1e15 ? 'over 10^15' : Math.round(cost)} exceeds the limit of ${COST_LIMIT} (lists assumed to hold up to ${MAX_LIST} items, strings ${MAX_STRING} characters; nested comprehensions multiply)`,
    };
  useRe2(program.ast);
  return {
    source,
    cost,
    evaluate(self, rule = null) {
      // the real input larger than assumed: estimate again with its sizes before running anything
      let sizes = self && typeof self === 'object' ? measured.get(self) : undefined;
      if (!sizes) {
        sizes = measure(rule, measure(self));
        if (self && typeof self === 'object') measured.set(self, sizes);
      } else if (rule) sizes = measure(rule, { ...sizes });
      if (sizes.list > MAX_LIST || sizes.string > MAX_STRING) {
        const real = estimate(program.ast, {
          list: Math.max(sizes.list, MAX_LIST),
          string: Math.max(sizes.string, MAX_STRING),
        }).cost;
        if (real > COST_LIMIT)
          return {
            ok: false,
            error: `runtime cost limit: estimated ${Math.round(real)} over ${COST_LIMIT} for an input with ${sizes.list} items and ${sizes.string} characters at most; not evaluated`,
          };
      }
      try {
        const v = program({ self, rule });
        if (typeof v !== 'boolean') return { ok: false, error: `evaluates to ${typeof v}, not bool` };
        return { ok: true, value: v };
      } catch (e) {
        return { ok: false, error: firstLine(e) };
      }
    },
  };
}

export function isCompiled(c: CompiledCondition | { error: string }): c is CompiledCondition {
  return 'evaluate' in c;
}
