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
//   - during evaluation: the work is metered as it is done (cel-meter.ts: every node, the sizes of
//     the values built and compared) and stopped at the limit, even inside `all`, `exists`, `&&` and
//     `||`, which absorb errors. A condition that hit the limit once is refused
//     from then on without running (`exceeded`), and its policy is Invalid naming the cost;
//   - `matches()` uses RE2 semantics (re2js: linear time, no backtracking) instead of JavaScript
//     regular expressions, whose backtracking is exponential on patterns such as '^(a+)+$'.
import { Environment } from '@marcbachmann/cel-js';
import { RE2JS } from 're2js';
import { CostEstimator, isNode, measure, type Sizes } from './cel-cost.ts';
import { CostExceeded, chargeUnits, metered, meterTree, spent } from './cel-meter.ts';

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
/** Why RE2 does not compile a pattern (undefined: it does). */
export function re2Problem(pattern: string): string | undefined {
  try {
    re2(pattern);
    return undefined;
  } catch (e) {
    return (e as Error).message.split('\n')[0];
  }
}

const re2Matches = (s: string, p: string) => {
  // RE2 is linear in the text, times the automaton (the pattern's length)
  chargeUnits(s.length * Math.max(1, p.length));
  let r: RE2JS;
  try {
    r = re2(p);
  } catch (e) {
    throw new Error(`invalid regular expression (RE2 syntax): ${p}: ${(e as Error).message}`);
  }
  return r.matcher(s).find();
};

/**
 * wasm-shim's `queryMap(request.query)`: the query string's parameters by name, the first value of
 * each, percent-decoded (a bad escape keeps its text).
 */
export function queryMap(query: string): Map<string, string> {
  const m = new Map<string, string>();
  const decode = (t: string) => {
    try {
      return decodeURIComponent(t.replace(/\+/g, ' '));
    } catch {
      return t;
    }
  };
  for (const kv of query.replace(/^\?/, '').split('&')) {
    if (!kv) continue;
    const i = kv.indexOf('=');
    const k = decode(i < 0 ? kv : kv.slice(0, i));
    if (!m.has(k)) m.set(k, i < 0 ? '' : decode(kv.slice(i + 1)));
  }
  return m;
}

const env = new Environment({ unlistedVariablesAreDyn: true })
  .registerFunction('queryMap(string): map', queryMap)
  .registerFunction('string.re2Matches(string): bool', re2Matches)
  .registerFunction('re2Matches(string, string): bool', re2Matches);

const registered = new Set<string>();
/**
 * Adds a function to the CEL of every condition (a PolicyKind's `conditionFunctions`). Once per
 * signature; conditions compiled before are compiled again. It is costed as any function: linear in
 * its operands, so it must be cheap.
 */
// biome-ignore lint/suspicious/noExplicitAny: CEL passes its own value types
export function registerConditionFunction(signature: string, impl: (...args: any[]) => unknown): void {
  if (registered.has(signature)) return;
  env.registerFunction(signature, impl);
  registered.add(signature);
  cache.clear();
}

export interface CompiledCondition {
  source: string;
  /** Estimated cost with the admission-time size assumptions. */
  cost: number;
  /** Set once an evaluation hit the run-time cost limit: the message; later evaluations are refused. */
  exceeded?: string;
  /** `rule` is the lower rule `{name, value}` for a wildcard constraint, else null. */
  evaluate(self: unknown, rule?: unknown): { ok: true; value: boolean } | { ok: false; error: string };
  /**
   * The expression over other variables (a request's attributes: `request`, `source`, `auth`...),
   * with the same cost bounds; any result type.
   */
  evaluateWith(vars: Record<string, unknown>): { ok: true; value: unknown } | { ok: false; error: string };
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

const ASSUMED: Sizes = { list: MAX_LIST, string: MAX_STRING };
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

/**
 * The uncached compile with an explicit budget: `limit` bounds both the estimate and the run-time
 * meter (compileCondition uses COST_LIMIT; tests use a small one to reach the meter).
 */
export function compileWithLimit(source: string, limit: number): CompiledCondition | { error: string } {
  return compileUncached(source, limit);
}

function compileUncached(source: string, limit = COST_LIMIT): CompiledCondition | { error: string } {
  type Program = ((ctx: Record<string, unknown>) => unknown) & { ast: unknown };
  let program: Program;
  try {
    program = env.parse(source) as unknown as Program;
  } catch (e) {
    return { error: `does not parse: ${firstLine(e)}` };
  }
  const cost = new CostEstimator(ASSUMED).cost(program.ast);
  if (cost > limit)
    return {
      error: `estimated cost ${cost > 1e15 ? 'over 10^15' : Math.round(cost)} exceeds the limit of ${limit} (lists assumed to hold up to ${MAX_LIST} items, strings ${MAX_STRING} characters; nested comprehensions multiply)`,
    };
  // the program that runs: the same tree with the run-time meter in every node
  const ast = program.ast;
  useRe2(ast);
  meterTree(ast);
  /** An input larger than assumed at admission, estimated again with its real sizes: why it is refused (undefined: within the limit). */
  const overBudget = (sizes: Sizes): string | undefined => {
    if (sizes.list <= MAX_LIST && sizes.string <= MAX_STRING) return undefined;
    const real = new CostEstimator({
      list: Math.max(sizes.list, MAX_LIST),
      string: Math.max(sizes.string, MAX_STRING),
    }).cost(ast);
    return real > limit
      ? `runtime cost limit: estimated ${Math.round(real)} over ${limit} for an input with ${sizes.list} items and ${sizes.string} characters at most; not evaluated`
      : undefined;
  };
  const run = (
    vars: Record<string, unknown>,
  ): { ok: true; value: unknown } | { ok: false; error: string } => {
    if (compiled.exceeded) return { ok: false, error: compiled.exceeded };
    try {
      return { ok: true, value: metered(limit, () => program(vars)) };
    } catch (e) {
      if (e instanceof CostExceeded || (e as { cause?: unknown })?.cause instanceof CostExceeded) {
        compiled.exceeded = `runtime cost limit: evaluation stopped after ${spent()} cost units, over the limit of ${limit} (the condition builds values larger than its estimate of ${Math.round(cost)}); refused from now on`;
        return { ok: false, error: compiled.exceeded };
      }
      return { ok: false, error: firstLine(e) };
    }
  };
  const compiled: CompiledCondition = {
    source,
    cost,
    evaluateWith(vars) {
      const over = overBudget(measure(vars));
      return over ? { ok: false, error: over } : run(vars);
    },
    evaluate(self, rule = null) {
      if (compiled.exceeded) return { ok: false, error: compiled.exceeded };
      // the real input larger than assumed: estimate again with its sizes before running anything
      let sizes = self && typeof self === 'object' ? measured.get(self) : undefined;
      if (!sizes) {
        sizes = measure(rule, measure(self));
        if (self && typeof self === 'object') measured.set(self, sizes);
      } else if (rule) sizes = measure(rule, { ...sizes });
      const over = overBudget(sizes);
      if (over) return { ok: false, error: over };
      const r = run({ self, rule });
      if (!r.ok) return r;
      if (typeof r.value !== 'boolean')
        return { ok: false, error: `evaluates to ${typeof r.value}, not bool` };
      return { ok: true, value: r.value };
    },
  };
  return compiled;
}

export function isCompiled(c: CompiledCondition | { error: string }): c is CompiledCondition {
  return 'evaluate' in c;
}
