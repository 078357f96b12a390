import { describe, expect, it } from 'vitest';
import { COST_LIMIT, compileCondition, isCompiled } from './cel.ts';

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
