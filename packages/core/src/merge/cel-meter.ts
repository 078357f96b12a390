// Run-time cost metering of CEL conditions, as cel-go's runtime cost tracking: the estimate cannot
// know every shape (a condition may build its values), so evaluation itself is metered and stopped at
// the limit. The evaluator (cel-js) has no hook for this, so every node of the parsed tree (and of the
// comprehensions its macros expand to) gets a metered `evaluate`:
//   - every node evaluated costs 1 (every operator, call, literal, field and each iteration of a
//     comprehension, whose body is a node evaluated once per item);
//   - a value whose making or reading is linear in its size costs its size too (items of a list or
//     map, characters of a string): what `+` and a literal build, and every operand of a function call
//     or an ordering comparison;
//   - the operands of `==` and `!=` and the range of `in` cost their whole tree (equality compares
//     item by item at every depth; a value that holds the same list twice is counted twice, so a
//     list nested in itself thirty times costs 2^30, not 30). Sizes are memoized per object, so
//     measuring costs no more than building the value did;
//   - `matches` (RE2) charges the text's length times the pattern's, from its implementation.
// The stop is sticky: cel-js catches errors inside `all`, `exists`, `&&` and `||` (CEL's error
// absorption), so once the limit is passed every metered node throws on entry, before any work, and
// the evaluation is reported as stopped whatever value it returned. The meter's state is per
// evaluation (evaluation is synchronous).
import { isNode } from './cel-cost.ts';

export class CostExceeded extends Error {}

/** The meter of the evaluation under way. */
const meter = {
  spent: 0,
  limit: 0,
  stopped: false,
  /** tree sizes of the objects measured in this evaluation */
  trees: new WeakMap<object, number>(),
};

function stop(): never {
  meter.stopped = true;
  throw new CostExceeded(`over ${meter.limit}`);
}

/** Charges `units`; throws CostExceeded past the limit (and on every call after). */
export function chargeUnits(units: number): void {
  if (meter.stopped) stop();
  meter.spent += units;
  if (meter.spent > meter.limit) stop();
}

/** Items of a list or map, characters of a string, bytes; 0 for a scalar. */
function shallowSize(v: unknown): number {
  if (typeof v === 'string' || Array.isArray(v) || v instanceof Uint8Array) return v.length;
  if (v instanceof Map || v instanceof Set) return v.size;
  if (v && typeof v === 'object' && !(v instanceof Promise)) return Object.keys(v).length;
  return 0;
}

/** The value's size counted at every depth (shared items each time they appear); stops past the limit. */
function treeSize(v: unknown): number {
  if (!v || typeof v !== 'object') return typeof v === 'string' ? v.length : 0;
  if (v instanceof Uint8Array || v instanceof Promise) return shallowSize(v);
  const known = meter.trees.get(v);
  if (known !== undefined) return known;
  const room = meter.limit - meter.spent;
  let size = 1;
  const add = (x: unknown) => {
    size += 1 + treeSize(x);
    if (size > room) {
      meter.spent += size;
      stop();
    }
  };
  if (Array.isArray(v) || v instanceof Set) for (const x of v) add(x);
  else if (v instanceof Map)
    for (const [k, x] of v) {
      add(k);
      add(x);
    }
  else for (const x of Object.values(v)) add(x);
  meter.trees.set(v, size);
  return size;
}

/** Runs `f` with a fresh meter of `limit` units (read what it spent with `spent()`, also after a throw). */
export function metered<T>(limit: number, f: () => T): T {
  meter.spent = 0;
  meter.limit = limit;
  meter.stopped = false;
  meter.trees = new WeakMap();
  const v = f();
  // a stop that an absorbing operator caught still stops the evaluation
  if (meter.stopped) throw new CostExceeded(`over ${limit}`);
  return v;
}

/** What the last metered evaluation spent. */
export function spent(): number {
  return meter.spent;
}

/** What a node's value is charged for, beyond the 1 every evaluation costs. */
const UNIT = 0;
const SHALLOW = 1;
const TREE = 2;

type Evaluate = (ev: unknown, ast: unknown, ctx: unknown) => unknown;
interface Meta {
  evaluate: Evaluate;
  alternate?: Node;
  macro?: { evaluate: Evaluate };
}
interface Node {
  op: string;
  args: unknown;
  meta: Meta;
  evaluate: Evaluate;
}

/** The work a node does, resolved at each call as cel-js does (its type check may set it late). */
function work(node: Node, ev: unknown, ctx: unknown): unknown {
  const m = node.meta;
  if (m.alternate) return m.alternate.evaluate(ev, m.alternate, ctx);
  if (m.macro) return m.macro.evaluate(ev, m.macro, ctx);
  return m.evaluate.call(node, ev, node, ctx);
}

const ORDERING = new Set(['<', '<=', '>', '>=']);

/** Every node under `root` (through the expansions of macros), each with the charge its parents need. */
function modes(root: unknown): Map<Node, number> {
  const out = new Map<Node, number>();
  const raise = (n: unknown, mode: number) => {
    if (isNode(n)) out.set(n as Node, Math.max(out.get(n as Node) ?? UNIT, mode));
  };
  const seen = new Set<unknown>();
  const walk = (n: unknown): void => {
    if (Array.isArray(n)) {
      for (const x of n) walk(x);
      return;
    }
    if (!n || typeof n !== 'object' || seen.has(n)) return;
    seen.add(n);
    if (!isNode(n)) {
      // a comprehension's parts: iterable, init, step...
      for (const x of Object.values(n)) walk(x);
      return;
    }
    const node = n as Node;
    raise(node, UNIT);
    const a = node.args as unknown[];
    if (node.op === '+' || node.op === 'list' || node.op === 'map') raise(node, SHALLOW);
    else if (node.op === '==' || node.op === '!=') for (const x of a) raise(x, TREE);
    else if (node.op === 'in') {
      raise(a[0], TREE);
      raise(a[1], TREE);
    } else if (ORDERING.has(node.op)) for (const x of a) raise(x, SHALLOW);
    else if ((node.op === 'call' || node.op === 'rcall') && !node.meta.alternate && !node.meta.macro) {
      if (node.op === 'rcall') raise(a[1], SHALLOW);
      for (const x of (node.op === 'rcall' ? a[2] : a[1]) as unknown[]) raise(x, SHALLOW);
    }
    walk(node.args);
    if (node.meta.alternate) walk(node.meta.alternate);
  };
  walk(root);
  return out;
}

/** Puts the meter into every node of a parsed expression (once per parse). */
export function meterTree(root: unknown): void {
  for (const [node, mode] of modes(root)) {
    const evaluate: Evaluate =
      mode === UNIT
        ? function (this: Node, ev, _ast, ctx) {
            chargeUnits(1);
            return work(this, ev, ctx);
          }
        : function (this: Node, ev, _ast, ctx) {
            chargeUnits(1);
            const v = work(this, ev, ctx);
            chargeUnits(mode === TREE ? treeSize(v) : shallowSize(v));
            return v;
          };
    node.evaluate = evaluate;
  }
}
