// The refused-routes annotation: sorted and de-duplicated, and `*` (every route counts as refused)
// when the list would not fit, so Enforced is never claimed for a route that was refused.
import { describe, expect, it } from 'vitest';
import { refusedRoutesAnnotation } from './wiring-state.ts';

describe('refusedRoutesAnnotation', () => {
  it('lists the routes once, sorted; nothing when none', () => {
    expect(refusedRoutesAnnotation(['HTTPRoute/b/x', 'HTTPRoute/a/y', 'HTTPRoute/b/x'])).toBe(
      'HTTPRoute/a/y,HTTPRoute/b/x',
    );
    expect(refusedRoutesAnnotation([])).toBeUndefined();
  });

  it('too many to hold: `*`', () => {
    const many = Array.from({ length: 5000 }, (_, i) => `HTTPRoute/tenant/route-${i}`);
    expect(refusedRoutesAnnotation(many)).toBe('*');
  });
});
