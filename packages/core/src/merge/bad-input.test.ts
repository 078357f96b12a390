// Bad input never crashes the engine and never disturbs other policies.
import { describe, expect, it } from 'vitest';
import { policyConditions } from '../status/conditions.ts';
import { L, policy, standardTopology, testLimitKind } from '../testing/index.ts';
import { PolicyEngine } from './engine.ts';
import type { PolicyObject } from './policy.ts';

const P = 'Gateway:infra/gw#http|HTTPRoute:app/r1#read';
const good = policy('good', 'app', { kind: 'HTTPRoute', name: 'r1' }, { limits: { ok: L(10) } });

function engineWith(bad: PolicyObject[]): PolicyEngine {
  const e = new PolicyEngine(testLimitKind);
  const t = standardTopology();
  for (const g of t.gateways) e.upsertGateway(g);
  for (const r of t.routes) e.upsertRoute(r);
  for (const b of bad) e.upsertPolicy(b);
  e.upsertPolicy(good);
  e.flush();
  return e;
}

const accepted = (e: PolicyEngine, name: string, ns = 'app') =>
  policyConditions(e, `LimitPolicy:${ns}/${name}`).find((c) => c.type === 'Accepted')!;

const raw = (name: string, spec: unknown): PolicyObject => ({
  kind: 'LimitPolicy',
  metadata: { name, namespace: 'app' },
  spec,
});
const R1 = { kind: 'HTTPRoute', name: 'r1' };

describe('bad input', () => {
  it.each([
    ['no spec', raw('x', undefined), /spec: required, must be an object/],
    ['spec is a list', raw('x', [1, 2]), /spec: required, must be an object/],
    ['no target', raw('x', { limits: { a: L(1) } }), /spec.targetRef: required \(or targetRefs\)/],
    [
      'both targetRef and targetRefs',
      raw('x', { targetRef: R1, targetRefs: [R1], limits: {} }),
      /spec.targetRefs: set either targetRef or targetRefs/,
    ],
    ['unknown top-level field', raw('x', { targetRef: R1, limitz: {} }), /spec: unknown field\(s\) "limitz"/],
    [
      'unknown field in a block',
      raw('x', { targetRef: R1, defaults: { stratgy: 'merge' } }),
      /spec.defaults: unknown field\(s\) "stratgy"/,
    ],
    [
      'bad strategy',
      raw('x', { targetRef: R1, overrides: { strategy: 'banana' } }),
      /spec.overrides.strategy: Invalid option/,
    ],
    [
      'bad rule value',
      raw('x', { targetRef: R1, limits: { a: { rates: [{ limit: -1, window: '1m' }] } } }),
      /spec.limits.a.rates.0.limit: Too small/,
    ],
    [
      'bad window',
      raw('x', { targetRef: R1, limits: { a: { rates: [{ limit: 1, window: 'soon' }] } } }),
      /spec.limits.a.rates.0.window/,
    ],
    [
      'bare rules next to defaults',
      raw('x', { targetRef: R1, limits: { a: L(1) }, defaults: {} }),
      /spec.limits: bare rules and defaults\/overrides are mutually exclusive/,
    ],
    [
      'CEL that does not parse',
      raw('x', { targetRef: R1, overrides: { condition: 'self.limits ++', limits: {} } }),
      /spec.overrides.condition: does not parse: /,
    ],
    [
      'a target of the wrong kind',
      raw('x', { targetRef: { kind: 'Service', name: 'svc' }, limits: {} }),
      /spec.targetRef.kind: LimitPolicy cannot target Service/,
    ],
    [
      'a target in the wrong group',
      raw('x', { targetRef: { group: 'example.com', kind: 'Gateway', name: 'gw' }, limits: {} }),
      /spec.targetRef.kind: LimitPolicy cannot target Gateway \(group example.com\)/,
    ],
    [
      'a GatewayClass section',
      raw('x', { targetRef: { kind: 'GatewayClass', name: 'gc', sectionName: 'a' }, limits: {} }),
      /spec.targetRef.sectionName: a GatewayClass has no sections/,
    ],
    [
      'duplicate targets',
      raw('x', { targetRefs: [R1, R1], limits: {} }),
      /spec.targetRefs\[1\]: duplicate target/,
    ],
    ['unset is not a list', raw('x', { targetRef: R1, unset: 'a' }), /spec.unset: /],
    [
      'cyclic spec',
      (() => {
        const s: Record<string, unknown> = { targetRef: R1 };
        s.self = s;
        return raw('x', s);
      })(),
      /spec: not serializable as JSON/,
    ],
  ])('%s: Accepted=False/Invalid naming the field; others unaffected', (_name, bad, message) => {
    const e = engineWith([bad]);
    const c = accepted(e, 'x');
    expect(c.status).toBe('False');
    expect(c.reason).toBe('Invalid');
    expect(c.message).toMatch(message);
    expect(accepted(e, 'good').status).toBe('True');
    expect([...e.result(P)!.rules.keys()]).toEqual(['limits.ok']);
  });

  it('refuses a 10 MB rule body with a size message', () => {
    const huge = 'x'.repeat(10 * 1024 * 1024);
    const e = engineWith([
      raw('x', { targetRef: R1, limits: { a: { rates: [{ limit: 1, window: '1m' }], counters: [huge] } } }),
    ]);
    expect(accepted(e, 'x').message).toBe('Policy is invalid: spec: 10.0 MiB exceeds the 1 MiB limit');
    expect(accepted(e, 'good').status).toBe('True');
  });

  it('caps the list of schema problems', () => {
    const limits = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`l${i}`, { rates: [] }]));
    const e = engineWith([raw('x', { targetRef: R1, limits })]);
    expect(accepted(e, 'x').message).toMatch(/and 20 more$/);
  });

  it('holds 50 policies on one target, all accepted, with a deterministic winner', () => {
    const many = Array.from({ length: 50 }, (_, i) =>
      policy(`p${String(i).padStart(2, '0')}`, 'app', R1, {
        overrides: { strategy: 'merge', limits: { shared: L(i + 1), [`own${i}`]: L(1) } },
      }),
    );
    const e = engineWith(many);
    const r = e.result(P)!;
    // No timestamps: order of appearance; the first policy is the oldest and wins the shared override.
    expect(r.rules.get('limits.shared')!.source.name).toBe('p00');
    expect(r.rules.size).toBe(52);
    expect(accepted(e, 'p49').message).toMatch(/also targeted by .* and 45 more/);
  });

  it('an invalid edit of a valid policy removes its rules and keeps the others', () => {
    const e = engineWith([policy('x', 'app', R1, { overrides: { strategy: 'merge', limits: { a: L(1) } } })]);
    expect(e.result(P)!.rules.has('limits.a')).toBe(true);
    e.upsertPolicy(raw('x', { targetRef: R1, overrides: { strategy: 'nope' } }));
    e.flush();
    expect([...e.result(P)!.rules.keys()]).toEqual(['limits.ok']);
    expect(accepted(e, 'x').reason).toBe('Invalid');
  });

  it('a condition whose evaluation runs over the cost limit: the policy is Invalid naming the cost, the others work', () => {
    // accepted by the estimate (about 5,000), but each of the 1,000 iterations compares the 1,000-item
    // list with itself: 2,000 units each
    const L1000 = JSON.stringify(Array.from({ length: 1000 }, (_, i) => i));
    const condition = `[${L1000}].all(big, big.map(i, big).all(l, l == big))`;
    const e = engineWith([
      policy('greedy', 'app', R1, { defaults: { strategy: 'merge', condition, limits: { g: L(5) } } }),
    ]);
    const a = accepted(e, 'greedy');
    expect(a.reason).toBe('Invalid');
    expect(a.message).toMatch(
      /spec.defaults.condition: runtime cost limit: evaluation stopped after \d+ cost units, over the limit of 1000000/,
    );
    // the default was skipped (its condition failed); the other policy is untouched
    expect([...e.result(P)!.rules.keys()]).toEqual(['limits.ok']);
    expect(accepted(e, 'good').reason).toBe('Accepted');
  });

  it('a condition that passes its limit inside exists(): stopped, not absorbed; Invalid naming the cost', () => {
    // each of 500 iterations compares two fresh lists of 2^20 leaves; exists() absorbs errors, so
    // before round three the stop was caught and every iteration ran (tens of seconds)
    const L500 = JSON.stringify(Array.from({ length: 500 }, (_, i) => i));
    const dag = `[0]${'.map(a, [a, a])'.repeat(20)}`;
    const condition = `${L500}.exists(i, ${dag} == ${dag})`;
    const t0 = performance.now();
    const e = engineWith([
      policy('greedy', 'app', R1, { defaults: { strategy: 'merge', condition, limits: { g: L(5) } } }),
    ]);
    const a = accepted(e, 'greedy');
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(a.reason).toBe('Invalid');
    expect(a.message).toMatch(/spec.defaults.condition: runtime cost limit: evaluation stopped after/);
    expect(accepted(e, 'good').reason).toBe('Accepted');
  });
});
