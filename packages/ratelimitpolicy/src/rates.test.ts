import { policyConditions } from '@cascade/core';
import { policy, standardEngine } from '@cascade/core/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { rateLimitPolicyKind } from './kind.ts';
import { clipLimit, perSecond, type Rate, ratePer } from './rates.ts';

const r = (limit: number, window: string): Rate => ({ limit, window });
const PATH = 'Gateway:infra/gw#http|HTTPRoute:app/r1#read';
const tightest = (rates: Rate[]) => Math.min(...rates.map(perSecond));

describe('clipLimit: constraints compare rates per second', () => {
  it.each([
    ['5000/1h stays under a 1000/1m cap (83/min)', [r(5000, '1h')], [r(1000, '1m')], [r(5000, '1h')]],
    ['2000/1m becomes 1000/1m', [r(2000, '1m')], [r(1000, '1m')], [r(1000, '1m')]],
    [
      '100/1s keeps its burst bound and gets 1000/1m',
      [r(100, '1s')],
      [r(1000, '1m')],
      [r(100, '1s'), r(1000, '1m')],
    ],
    [
      '5000/1m and 50000/1h: the minute clipped, the hour kept',
      [r(5000, '1m'), r(50000, '1h')],
      [r(1000, '1m')],
      [r(50000, '1h'), r(1000, '1m')],
    ],
    ['equal rates in other windows stay', [r(60, '1m')], [r(1, '1s')], [r(60, '1m')]],
    [
      'a sub-second window counts as Limitador enforces it (1 s)',
      [r(10, '500ms')],
      [r(5, '1s')],
      [r(5, '1s')],
    ],
  ])('%s', (_, lower, cap, want) => {
    expect(clipLimit({ rates: lower, scope: 'route' }, { rates: cap })).toEqual({
      rates: want,
      scope: 'route',
    });
  });

  it('merge-patches the other fields; a constraint without rates keeps the lower rates', () => {
    expect(clipLimit({ rates: [r(1, '1m')], counters: [{ expression: 'a' }] }, { counters: null })).toEqual({
      rates: [r(1, '1m')],
    });
    expect(clipLimit({ rates: [r(1, '1m')] }, { rates: null })).toEqual({ rates: [r(1, '1m')] });
  });

  const window = fc.constantFrom('1s', '10s', '1m', '5m', '1h', '1h30m', '500ms', '24h');
  const rate = fc.record({ limit: fc.integer({ min: 0, max: 1_000_000 }), window });
  const rates = fc.array(rate, { minLength: 1, maxLength: 4 });
  it('property: the clipped rate is never above either input, and a limit within the cap is unchanged', () => {
    fc.assert(
      fc.property(rates, rates, (lower, cap) => {
        const out = clipLimit({ rates: lower }, { rates: cap }) as { rates: Rate[] };
        expect(tightest(out.rates)).toBeLessThanOrEqual(tightest(lower) + 1e-12);
        expect(tightest(out.rates)).toBeLessThanOrEqual(tightest(cap) + 1e-12);
        // every window the lower limit bounded is bounded as tightly or more
        for (const l of lower)
          expect(
            out.rates.some((o) => o.window === l.window && o.limit <= l.limit) ||
              out.rates.some((o) => perSecond(o) <= perSecond(l) && o.window !== l.window),
          ).toBe(true);
        if (lower.every((l) => perSecond(l) <= tightest(cap))) expect(out.rates).toEqual(lower);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('ratePer in conditions', () => {
  it('expresses a rate per another window', () => {
    expect(ratePer({ limit: 5000, window: '1h' }, '1m')).toBeCloseTo(83.33, 2);
    expect(
      ratePer(
        new Map<string, unknown>([
          ['limit', 10n],
          ['window', '1s'],
        ]),
        '1m',
      ),
    ).toBe(600);
    expect(() => ratePer({ limit: 1 }, '1m')).toThrow(/rate \{limit, window\}/);
    expect(() => ratePer({ limit: 1, window: '1m' }, 'a minute')).toThrow(/not a duration/);
  });

  const engineWith = (condition: string, tenant: Rate[]) =>
    standardEngine(
      [
        policy(
          'cap',
          'infra',
          { kind: 'Gateway', name: 'gw' },
          {
            overrides: { strategy: 'merge', condition, limits: { '*': { rates: [r(1000, '1m')] } } },
          },
          { kind: 'RateLimitPolicy', created: '2026-01-01T00:00:00Z' },
        ),
        policy(
          'tenant',
          'app',
          { kind: 'HTTPRoute', name: 'r1' },
          { limits: { mine: { rates: tenant } } },
          {
            kind: 'RateLimitPolicy',
          },
        ),
      ],
      rateLimitPolicyKind,
    );

  it.each([
    ['5000/1h is not above 1000/min: not clipped, not reported', [r(5000, '1h')], [r(5000, '1h')], false],
    ['5000/1m is: clipped to 1000/1m and reported', [r(5000, '1m')], [r(1000, '1m')], true],
  ])('%s', (_, tenant, want, clipped) => {
    const e = engineWith("rule.value.rates.exists(r, ratePer(r, '1m') > 1000.0)", tenant);
    expect(e.result(PATH)?.rules.get('limits.mine')?.value).toEqual({ rates: want });
    const enforced = policyConditions(e, 'RateLimitPolicy:app/tenant').find((c) => c.type === 'Enforced');
    expect(enforced?.message.includes('clipped')).toBe(clipped);
  });
});
