import { describe, expect, it } from 'vitest';
import { mergeCondition, mergeRouteAffected, POLICY_CONTROLLER_NAME } from './target-status.ts';

const cond = (status: 'True' | 'False', reason: string) => ({
  type: 'LimitPolicyAffected',
  status,
  reason,
  message: `m ${reason}`,
  observedGeneration: 1,
});
const T0 = '2026-01-01T00:00:00Z';
const T1 = '2026-01-02T00:00:00Z';
const other = {
  parentRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', namespace: 'infra', name: 'gw' },
  controllerName: 'example.com/gateway',
  conditions: [{ type: 'Accepted', status: 'True', reason: 'Accepted', message: '', lastTransitionTime: T0 }],
};

describe('mergeRouteAffected', () => {
  it("adds our entry per Gateway parent and leaves the gateway controller's entry alone", () => {
    const s = mergeRouteAffected(
      { parents: [other] },
      'app',
      [{ name: 'gw', namespace: 'infra' }],
      'LimitPolicyAffected',
      cond('True', 'Affected'),
      T1,
    )!;
    expect(s.parents).toHaveLength(2);
    expect(s.parents[0]).toBe(other);
    expect(s.parents[1]).toEqual({
      parentRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', namespace: 'infra', name: 'gw' },
      controllerName: POLICY_CONTROLLER_NAME,
      conditions: [{ ...cond('True', 'Affected'), lastTransitionTime: T1 }],
    });
  });

  it("keeps the other kind's condition in our shared entry, and returns undefined when nothing changes", () => {
    const auth = {
      type: 'GuardPolicyAffected',
      status: 'True',
      reason: 'Affected',
      message: 'a',
      lastTransitionTime: T0,
    };
    const ours = {
      parentRef: { name: 'gw', namespace: 'infra' },
      controllerName: POLICY_CONTROLLER_NAME,
      conditions: [auth, { ...cond('True', 'Affected'), lastTransitionTime: T0 }],
    };
    expect(
      mergeRouteAffected(
        { parents: [ours] },
        'app',
        [{ name: 'gw', namespace: 'infra' }],
        'LimitPolicyAffected',
        cond('True', 'Affected'),
        T1,
      ),
    ).toBeUndefined();
    const s = mergeRouteAffected(
      { parents: [ours] },
      'app',
      [{ name: 'gw', namespace: 'infra' }],
      'LimitPolicyAffected',
      undefined,
      T1,
    )!;
    expect(s.parents).toEqual([{ ...ours, conditions: [auth] }]);
    // The last of our conditions gone: the entry goes too.
    expect(
      mergeRouteAffected(
        s,
        'app',
        [{ name: 'gw', namespace: 'infra' }],
        'GuardPolicyAffected',
        undefined,
        T1,
      ),
    ).toEqual({ parents: [] });
  });

  it('drops our condition from a parent the route no longer has; keeps lastTransitionTime while the status holds', () => {
    const ours = (name: string, t: string, reason = 'Affected') => ({
      parentRef: { name, namespace: 'infra' },
      controllerName: POLICY_CONTROLLER_NAME,
      conditions: [{ ...cond('True', reason), lastTransitionTime: t }],
    });
    const s = mergeRouteAffected(
      { parents: [ours('old', T0), ours('gw', T0)] },
      'app',
      [{ name: 'gw', namespace: 'infra' }],
      'LimitPolicyAffected',
      cond('True', 'PartiallyAffected'),
      T1,
    )!;
    expect(s.parents).toEqual([
      { ...ours('gw', T0), conditions: [{ ...cond('True', 'PartiallyAffected'), lastTransitionTime: T0 }] },
    ]);
  });
});

describe('mergeCondition', () => {
  it('replaces our type only, and moves lastTransitionTime when the status flips', () => {
    const list = [
      { type: 'Accepted', status: 'True', reason: 'A', message: '' },
      { ...cond('True', 'Affected'), lastTransitionTime: T0 },
    ];
    expect(mergeCondition(list, cond('False', 'Unaffected'), 'LimitPolicyAffected', T1)).toEqual([
      list[0],
      { ...cond('False', 'Unaffected'), lastTransitionTime: T1 },
    ]);
    expect(mergeCondition(list, undefined, 'LimitPolicyAffected', T1)).toEqual([list[0]]);
  });
});
