// CEL that stops (tenants against the controller, round three): whatever the expression's shape, an
// evaluation ends at its budget. Generated expressions mix every operator and macro a condition can
// use, nest comprehensions inside the operators that absorb errors (all, exists, &&, ||), and build
// values the estimate cannot size (lists nested in themselves, compared whole).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { COST_LIMIT, compileCondition, compileWithLimit, isCompiled } from './cel.ts';

/** The time an evaluation at COST_LIMIT may take here: a unit is at least a few nanoseconds of work. */
const LIMIT_MS = 3_000;

const VARS = ['x', 'y', 'z'];
/** A list the evaluation doubles: `[0]` nested in itself `k` times, 2^k leaves, each a fresh tree. */
const dag = (k: number) => `[0]${'.map(a, [a, a])'.repeat(k)}`;

const exprs = fc.letrec<{ list: string; bool: string; str: string; int: string }>((tie) => ({
  int: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.integer({ min: 0, max: 9 }).map(String),
    fc.constantFrom(...VARS).map((v) => `size(dyn(${v}))`),
    tie('list').map((l) => `size(${l})`),
    tie('str').map((s) => `size(${s})`),
  ),
  str: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom("'a'", "'abc'", 'self.name', `'${'x'.repeat(200)}'`),
    fc.tuple(tie('str'), tie('str')).map(([a, b]) => `(${a} + ${b})`),
    tie('list').map((l) => `${l}.map(v, 'ab').join('')`),
  ),
  list: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom('self.items', '[1, 2, 3]', '[]'),
    fc.integer({ min: 4, max: 22 }).map((k) => `dyn(${dag(k)})`),
    fc.tuple(tie('int'), tie('list')).map(([a, b]) => `[dyn(${a}), dyn(${b})]`),
    fc.tuple(tie('list'), tie('list')).map(([a, b]) => `(dyn(${a}) + dyn(${b}))`),
    fc
      .tuple(tie('list'), fc.constantFrom(...VARS), tie('list'))
      .map(([l, v, b]) => `dyn(${l}.map(${v}, ${b}))`),
    fc
      .tuple(tie('list'), fc.constantFrom(...VARS), tie('bool'))
      .map(([l, v, b]) => `${l}.filter(${v}, ${b})`),
    tie('str').map((s) => `(${s}).split('')`),
  ),
  bool: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom('true', 'false'),
    fc.tuple(tie('list'), tie('list')).map(([a, b]) => `(dyn(${a}) == dyn(${b}))`),
    fc.tuple(tie('list'), tie('list')).map(([a, b]) => `(dyn(${a}) != dyn(${b}))`),
    fc.tuple(tie('list'), tie('list')).map(([a, b]) => `(dyn(${a}) in ${b})`),
    fc.tuple(tie('int'), tie('list')).map(([a, b]) => `(dyn(${a}) in ${b})`),
    fc.tuple(tie('str'), tie('str')).map(([a, b]) => `(${a}).contains(${b})`),
    fc.tuple(tie('str'), tie('str')).map(([a, b]) => `(${a}) < (${b})`),
    tie('str').map((s) => `(${s}).matches('^(a|b)*c$')`),
    fc
      .tuple(
        fc.constantFrom('all', 'exists', 'exists_one'),
        tie('list'),
        fc.constantFrom(...VARS),
        tie('bool'),
      )
      .map(([m, l, v, b]) => `${l}.${m}(${v}, ${b})`),
    fc
      .tuple(tie('bool'), fc.constantFrom('&&', '||'), tie('bool'))
      .map(([a, op, b]) => `(${a}) ${op} (${b})`),
    tie('bool').map((b) => `!(${b})`),
  ),
}));

function timed(src: string, self: unknown, limit?: number): { ms: number; ok: boolean; error?: string } {
  const c = limit === undefined ? compileCondition(src) : compileWithLimit(src, limit);
  if (!isCompiled(c)) return { ms: 0, ok: false, error: c.error };
  const t0 = performance.now();
  const r = c.evaluate(self);
  return { ms: performance.now() - t0, ok: r.ok, ...(r.ok ? {} : { error: r.error }) };
}

const SELF = {
  name: 'abc'.repeat(300),
  items: Array.from({ length: 200 }, (_, i) => ({
    i,
    tags: Array.from({ length: 50 }, (_, j) => `${i}-${j}`),
  })),
};

describe('CEL that stops (tenants against the controller, round three)', () => {
  it('the stop is not swallowed by exists(): each later iteration stops on entry, the result is the stop', () => {
    // each iteration compares two fresh trees of 2^20 leaves; the first comparison is over the limit
    const L = JSON.stringify(Array.from({ length: 1000 }, (_, i) => i));
    for (const m of ['exists', 'all', 'exists_one']) {
      const r = timed(`${L}.${m}(i, ${dag(20)} == ${dag(20)})`, {});
      expect(r.ok, m).toBe(false);
      expect(r.error, m).toMatch(
        /runtime cost limit: evaluation stopped after \d+ cost units, over the limit/,
      );
      expect(r.ms, m).toBeLessThan(LIMIT_MS);
    }
    // nested, and behind the operators that absorb errors: && and ||
    const nested = `${L}.exists(i, ${L}.exists(j, true || ${dag(21)} == ${dag(21)} || false)) && true`;
    const r = timed(nested, {});
    expect(r.ok).toBe(false);
    expect(r.ms).toBeLessThan(LIMIT_MS);
  });

  it('list equality is charged for every item at every depth, shared items each time', () => {
    // 25 doublings: 2^25 leaves each side, under 800 characters; uncharged, the comparison ran for seconds
    const r = timed(`${dag(25)} == ${dag(25)}`, {});
    expect(r.ok).toBe(false);
    expect(r.error).toMatch(/runtime cost limit/);
    expect(r.ms).toBeLessThan(LIMIT_MS);
    // the same shape, small, is answered (equal, and not equal)
    expect(timed(`${dag(6)} == ${dag(6)}`, {})).toMatchObject({ ok: true });
    const c = compileCondition(`${dag(6)} != [1]${'.map(a, [a, a])'.repeat(6)}`);
    if (!isCompiled(c)) throw new Error(c.error);
    expect(c.evaluate({})).toEqual({ ok: true, value: true });
    // `in` searches item by item: its range is charged whole too
    expect(timed(`[0] in ${dag(24)}`, {})).toMatchObject({ ok: false });
  });

  it('the meter means the same: metered trees give the answers of the plain evaluation', () => {
    for (const [s, self, want] of [
      ['(self.a + self.b) + self.c == [1, 2, 3]', { a: [1], b: [2], c: [3] }, true],
      ["(self.s + 'x').size() == 4 && ('a' < 'b')", { s: 'abc' }, true],
      ['self.items.exists(i, i.tags.exists(t, t == "2-3"))', SELF, true],
      ['[1, 2].all(x, x > 0 || 1 / 0 == 1)', {}, true],
      ['[1, 0].exists(x, 1 / x == 1)', {}, true],
      ['has(self.a) && !has(self.z)', { a: 1 }, true],
      ["{'k': [1, 2]}['k'] == [1, 2] && 'k' in {'k': 1}", {}, true],
    ] as const) {
      const c = compileCondition(s);
      if (!isCompiled(c)) throw new Error(`${s}: ${c.error}`);
      expect(c.evaluate(self), s).toEqual({ ok: true, value: want });
    }
  });

  it('every generated expression ends within the limit: answered, refused at admission or stopped', () => {
    let slowest = 0;
    let stopped = 0;
    fc.assert(
      fc.property(exprs.bool, (src) => {
        const r = timed(src, SELF);
        slowest = Math.max(slowest, r.ms);
        if (r.error?.includes('runtime cost limit')) stopped++;
        expect(r.ms, src).toBeLessThan(LIMIT_MS);
      }),
      { numRuns: 300, seed: 43 },
    );
    expect(slowest).toBeLessThan(LIMIT_MS);
    // the generator reaches the meter (not only the estimate)
    expect(stopped).toBeGreaterThan(0);
  });

  it('at a small budget too, the generated expressions stop within the time the budget allows', () => {
    fc.assert(
      fc.property(exprs.bool, (src) => {
        // 10,000 units: well under a tenth of the full limit's time
        expect(timed(src, SELF, 10_000).ms, src).toBeLessThan(LIMIT_MS / 10);
      }),
      { numRuns: 300, seed: 7 },
    );
    expect(COST_LIMIT).toBe(1_000_000);
  });
});
