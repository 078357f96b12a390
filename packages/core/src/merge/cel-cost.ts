// The admission-time cost estimate of a CEL syntax tree, and the measure of a real input. Every value
// has a shape: how many items it may hold (a list or map), how many characters (a string), and the
// shape of its items. The input's values are assumed as large as `Sizes` allows, at every depth; a
// value the expression builds has the shape of what builds it: a list literal its items, `a + b` the
// sum of both, `map` one item per item of its range shaped like the body, `filter` its range. A
// comprehension's variable takes the shape of its range's items, so a chain of maps that grows a list
// grows the estimate with it, and nested comprehensions multiply. The estimate is an upper bound; the
// run-time meter (cel-meter.ts) is the backstop where a shape cannot be known.

export interface Sizes {
  list: number;
  string: number;
}

/** The estimated cost of evaluating a node, and the shape of its value. */
interface Est {
  cost: number;
  items: number;
  chars: number;
  /** the shape of its items (undefined: a scalar, or unknown: see `anything`) */
  elem?: Est;
}

type Node = { op: string; args: unknown };
export const isNode = (n: unknown): n is Node => typeof n === 'object' && n !== null && 'op' in n;
export const MACROS = new Set(['all', 'exists', 'exists_one', 'existsOne', 'map', 'filter']);
const ZERO: Est = { cost: 0, items: 0, chars: 0 };
/** Shapes joined this deep are taken as `anything` (shapes the parser allows are far shallower). */
const MAX_DEPTH = 8;

export class CostEstimator {
  /** A value of the input: as large as assumed, at every depth (its items are like itself). */
  private readonly anything: Est;

  constructor(sizes: Sizes) {
    const a: Est = { cost: 0, items: sizes.list, chars: sizes.string };
    a.elem = a;
    this.anything = a;
  }

  cost(ast: unknown): number {
    return this.est(ast, new Map()).cost;
  }

  /** The larger of two shapes, item by item. */
  private join(a: Est | undefined, b: Est | undefined, depth = 0): Est | undefined {
    if (!a) return b;
    if (!b || a === b) return a;
    if (a === this.anything || b === this.anything || depth >= MAX_DEPTH) return this.anything;
    return {
      cost: 0,
      items: Math.max(a.items, b.items),
      chars: Math.max(a.chars, b.chars),
      elem: this.join(a.elem, b.elem, depth + 1),
    };
  }

  private shapeOf(e: Est | undefined, cost: number): Est {
    const s = e ?? this.anything;
    return { cost, items: s.items, chars: s.chars, ...(s.elem ? { elem: s.elem } : {}) };
  }

  private all(ns: unknown[], scope: Map<string, Est>): Est {
    let cost = 0;
    let shape: Est | undefined;
    for (const x of ns) {
      const e = this.est(x, scope);
      cost += e.cost;
      shape = this.join(shape, e);
    }
    return {
      cost,
      items: shape?.items ?? 0,
      chars: shape?.chars ?? 0,
      ...(shape?.elem ? { elem: shape.elem } : {}),
    };
  }

  private est(n: unknown, scope: Map<string, Est>): Est {
    if (Array.isArray(n)) return this.all(n, scope);
    if (!isNode(n)) return ZERO;
    const a = n.args as unknown[];
    switch (n.op) {
      case 'value':
        return { cost: 1, items: 0, chars: typeof n.args === 'string' ? n.args.length : 0 };
      case 'id':
        return this.shapeOf(scope.get(n.args as string), 1);
      case '.':
      case '[]': {
        // an item of the receiver (a field of a map is one of its values)
        const recv = this.est(a[0], scope);
        const rest = n.op === '[]' ? this.est(a.slice(1), scope).cost : 0;
        return this.shapeOf(recv.elem, recv.cost + rest + 1);
      }
      case 'list': {
        const e = this.all(a, scope);
        return { cost: e.cost + 1, items: a.length, chars: 0, ...(a.length ? { elem: e } : {}) };
      }
      case 'map': {
        // args: the entries, each [key, value]
        const e = this.all(a, scope);
        return { cost: e.cost + 1, items: a.length, chars: 0, elem: e };
      }
      case '+': {
        const l = this.est(a[0], scope);
        const r = this.est(a[1], scope);
        const items = l.items + r.items;
        const chars = l.chars + r.chars;
        const elem = this.join(l.elem, r.elem);
        return { cost: l.cost + r.cost + items + chars, items, chars, ...(elem ? { elem } : {}) };
      }
      case 'in': {
        const l = this.est(a[0], scope);
        const r = this.est(a[1], scope);
        return { cost: l.cost + r.cost + r.items, items: 0, chars: 0 };
      }
      case 'rcall':
      case 'call':
        return this.call(n.op === 'rcall', a, scope);
      default: {
        const e = this.est(n.args, scope);
        return { ...e, cost: e.cost + 1 };
      }
    }
  }

  private call(receiver: boolean, a: unknown[], scope: Map<string, Est>): Est {
    const name = a[0] as string;
    const recv = receiver ? this.est(a[1], scope) : ZERO;
    const args = (receiver ? a[2] : a[1]) as unknown[];
    const v = args[0];
    if (receiver && MACROS.has(name) && isNode(v) && v.op === 'id') {
      // the variable is an item of the range; the body runs once per item
      const inner = new Map(scope).set(v.args as string, this.shapeOf(recv.elem, 0));
      const bodies = args.slice(1).map((b) => this.est(b, inner));
      const body = bodies.reduce((s, e) => s + e.cost, 0);
      const cost = recv.cost + recv.items * (body + 1);
      if (name === 'map') {
        const out = bodies[bodies.length - 1] ?? ZERO;
        return { cost, items: recv.items, chars: 0, elem: { ...out, cost: 0 } };
      }
      if (name === 'filter')
        return { cost, items: recv.items, chars: 0, ...(recv.elem ? { elem: recv.elem } : {}) };
      return { cost, items: 0, chars: 0 };
    }
    const each = args.map((x) => this.est(x, scope));
    const cost = recv.cost + each.reduce((s, e) => s + e.cost, 0) + 1;
    if (name === 'matches' || name === 're2Matches') {
      // RE2: linear in the text, times the size of the automaton (the pattern's length)
      const [subject, pattern] = receiver ? [recv, each[0] ?? ZERO] : [each[0] ?? ZERO, each[1] ?? ZERO];
      return { cost: cost + subject.chars * Math.max(1, pattern.chars) + pattern.chars, items: 0, chars: 0 };
    }
    if (receiver && name === 'join') {
      // every item, with the separator between: as long as all of them
      const sep = each[0]?.chars ?? 0;
      const chars = recv.items * ((recv.elem?.chars ?? 0) + sep);
      return { cost: cost + chars, items: 0, chars };
    }
    if (receiver && name === 'split') {
      // at most one piece per character, each at most the whole string
      return {
        cost: cost + recv.chars,
        items: recv.chars + 1,
        chars: 0,
        elem: { cost: 0, items: 0, chars: recv.chars },
      };
    }
    // string and list functions: linear in their operands, shaped like the largest
    const operands = receiver ? [recv, ...each] : each;
    let shape: Est | undefined;
    for (const e of operands) shape = this.join(shape, e);
    const items = shape?.items ?? 0;
    const chars = shape?.chars ?? 0;
    return { cost: cost + items + chars, items, chars, ...(shape?.elem ? { elem: shape.elem } : {}) };
  }
}

/** The largest list/map and string in a value (bounded walk: at most 100,000 nodes). */
export function measure(v: unknown, into: Sizes = { list: 0, string: 0 }, budget = { left: 100_000 }): Sizes {
  if (budget.left-- <= 0) return into;
  if (typeof v === 'string') into.string = Math.max(into.string, v.length);
  else if (Array.isArray(v)) {
    into.list = Math.max(into.list, v.length);
    for (const x of v) measure(x, into, budget);
  } else if (v instanceof Map) {
    into.list = Math.max(into.list, v.size);
    for (const [k, x] of v) {
      measure(k, into, budget);
      measure(x, into, budget);
    }
  } else if (v && typeof v === 'object') {
    const values = Object.values(v);
    into.list = Math.max(into.list, values.length);
    for (const x of values) measure(x, into, budget);
  }
  return into;
}
