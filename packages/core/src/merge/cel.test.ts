import { describe, expect, it } from 'vitest';
import { COST_LIMIT, compileCondition, compileWithLimit, isCompiled } from './cel.ts';

const nested = (levels: number) => {
  let body = 'true';
  for (let i = levels - 1; i >= 0; i--) body = `[0,1,2,3,4,5,6,7,8,9].all(x${i}, ${body})`;
  return body;
};

describe('CEL cost bounds (tenant conditions cannot stall the controller)', () => {
  it('refuses at admission an expression whose estimated cost is over the limit, with the estimate', () => {
    for (const levels of [8, 10]) {
      const c = compileCondition(nested(levels));
      expect(isCompiled(c)).toBe(false);
      expect((c as { error: string }).error).toMatch(new RegExp(`exceeds the limit of ${COST_LIMIT}`));
    }
    // the 10 levels are a few hundred characters
    expect(nested(10).length).toBeLessThan(400);
  });

  it('accepts ordinary conditions, including one comprehension over the lower policy', () => {
    for (const s of [
      'self.limits.size() > 0',
      "self.limits.exists(l, l.name == 'global')",
      "has(self.rules) && self.rules.all(r, r.name.startsWith('team-'))",
      nested(3),
    ]) {
      const c = compileCondition(s);
      expect(isCompiled(c), s).toBe(true);
      expect((c as { cost: number }).cost).toBeLessThanOrEqual(COST_LIMIT);
    }
  });

  it('an empty map literal is estimated, not a crash; a map counts its entries', () => {
    // the estimator read the first entry's pair length as the map's size and threw on `{}`
    for (const s of ['{} == {}', 'size({}) == 0', '{"a": 1, "b": 2, "c": 3}.size() == 3']) {
      const c = compileCondition(s);
      expect(isCompiled(c), s).toBe(true);
      expect((c as { evaluateWith(v: object): { ok: boolean; value?: unknown } }).evaluateWith({})).toEqual({
        ok: true,
        value: true,
      });
    }
  });

  it('matches() is RE2: linear on a pattern that backtracks exponentially in JavaScript', () => {
    const c = compileCondition("self.name.matches('^(a+)+$')");
    if (!isCompiled(c)) throw new Error(c.error);
    const t0 = performance.now();
    expect(c.evaluate({ name: `${'a'.repeat(4000)}!` })).toEqual({ ok: true, value: false });
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(c.evaluate({ name: 'aaaa' })).toEqual({ ok: true, value: true });
    // the global form too
    const g = compileCondition("matches(self.name, '^a+$')");
    if (!isCompiled(g)) throw new Error(g.error);
    expect(g.evaluate({ name: 'aaa' })).toEqual({ ok: true, value: true });
  });

  it('RE2 syntax only: backreferences and lookaround are an evaluation error, not a hang', () => {
    const c = compileCondition("self.name.matches('(a)\\\\1')");
    if (!isCompiled(c)) throw new Error(c.error);
    const r = c.evaluate({ name: 'aa' });
    expect(r.ok).toBe(false);
  });

  it('an input larger than assumed is measured at evaluation: over the limit, refused instead of run', () => {
    const c = compileCondition('self.items.all(a, self.items.all(b, a != b || true))');
    if (!isCompiled(c)) throw new Error(c.error);
    expect(c.evaluate({ items: Array.from({ length: 100 }, (_, i) => i) })).toEqual({
      ok: true,
      value: true,
    });
    const big = { items: Array.from({ length: 5_000 }, (_, i) => i) };
    const t0 = performance.now();
    const r = c.evaluate(big);
    expect(r.ok).toBe(false);
    expect((r as { error: string }).error).toMatch(/runtime cost limit/);
    expect(performance.now() - t0).toBeLessThan(500);
  });
});

describe('CEL cost of values the condition builds (tenants against the controller, round two)', () => {
  const grow = (k: number) =>
    `[[0,1,2,3,4,5,6,7,8,9]]${'.map(x, x+x+x+x+x+x+x+x+x+x)'.repeat(k)}.all(y, y.all(z, z >= 0))`;

  it('a list grown by chained maps is estimated from the sizes it really reaches: refused at admission', () => {
    // under 200 characters, 10^7 items at the end: the old estimate assumed 256 items per variable
    // and accepted it (346,693), then the evaluation ran for seconds
    expect(grow(5).length).toBeLessThan(200);
    for (const k of [5, 6, 8]) {
      const c = compileCondition(grow(k));
      expect(isCompiled(c), `${k} maps`).toBe(false);
      expect((c as { error: string }).error).toMatch(/estimated cost \d+ exceeds the limit of 1000000/);
    }
    // what it really costs stays accepted and runs
    const ok = compileCondition(grow(2));
    if (!isCompiled(ok)) throw new Error(ok.error);
    expect(ok.evaluate({})).toEqual({ ok: true, value: true });
  });

  it('a string grown by join, then split into a list, is estimated from its real length', () => {
    let s = "'aaaaaaaaaa'";
    for (let i = 0; i < 5; i++) s = `[${Array(10).fill(s).join(',')}].join('')`;
    const c = compileCondition(`${s}.split('').all(ch, ch == 'a')`);
    expect(isCompiled(c)).toBe(false);
  });

  it('the run-time meter stops an evaluation at the limit, names the cost, and refuses the condition after', () => {
    // a budget small enough to reach with a cheap expression: 100 iterations over a 100-item list
    const src = `${JSON.stringify(Array.from({ length: 100 }, (_, i) => i))}.all(x, x >= 0)`;
    const fits = compileWithLimit(src, 10_000);
    if (!isCompiled(fits)) throw new Error(fits.error);
    expect(fits.evaluate({})).toEqual({ ok: true, value: true });
    // a budget the estimate fits but the evaluation does not: the estimate does not price equality,
    // the meter charges both operands' whole trees (here 250 strings of 1,000 characters, twice)
    const tight = compileWithLimit('self.items == self.items', 20_000);
    if (!isCompiled(tight)) throw new Error(tight.error);
    expect(tight.evaluate({ items: ['a', 'b', 'c'] })).toEqual({ ok: true, value: true });
    const big = { items: Array.from({ length: 250 }, (_, i) => `${i}`.padEnd(1000, '.')) }; // within the assumed sizes
    const r = tight.evaluate(big);
    expect(r.ok).toBe(false);
    expect((r as { error: string }).error).toMatch(
      /runtime cost limit: evaluation stopped after \d+ cost units, over the limit of 20000/,
    );
    expect(tight.exceeded).toMatch(/runtime cost limit/);
    // refused from then on, even on a small input: it is not run again
    expect(tight.evaluate({ items: [1] })).toEqual({ ok: false, error: tight.exceeded });
  });

  it('metered trees mean the same: metered conditions give the same answers', () => {
    for (const [s, self, want] of [
      ["self.items.exists(l, l.name == 'global')", { items: [{ name: 'global' }] }, true],
      ['[1,2,3].map(x, x * 2).filter(y, y > 2).size() == 2', {}, true],
      ["'ab' + 'cd' == 'abcd' && 2 in [1, 2, 3]", {}, true],
      ["self.name.matches('^a+$') && !('b' + self.name).matches('^a+$')", { name: 'aaa' }, true],
      ['[[1, 2], [3]].all(l, l.all(x, x + 1 > 1))', {}, true],
      ['(self.items + self.items).size() == 4', { items: [1, 2] }, true],
    ] as const) {
      const c = compileCondition(s);
      if (!isCompiled(c)) throw new Error(`${s}: ${c.error}`);
      expect(c.evaluate(self), s).toEqual({ ok: true, value: want });
    }
  });
});
