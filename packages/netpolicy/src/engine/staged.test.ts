import { describe, expect, it } from 'vitest';
import type { NetPolicyObject } from './model.ts';
import { applyStaged, isStagedKind, STAGED_KINDS, stagedFromObject, stagedTarget } from './staged.ts';

const np = (namespace: string, name: string, spec: unknown = { podSelector: {} }): NetPolicyObject => ({
  kind: 'NetworkPolicy',
  namespace,
  name,
  spec,
});

describe('staged policies', () => {
  it('reads each staged kind as the kind it stages, without stagedAction; Set by default', () => {
    const s = stagedFromObject('StagedNetworkPolicy', {
      metadata: { name: 'deny', namespace: 'shop' },
      spec: { podSelector: {}, policyTypes: ['Ingress'] },
    });
    expect(s).toEqual({
      kind: 'StagedNetworkPolicy',
      action: 'Set',
      policy: np('shop', 'deny', { podSelector: {}, policyTypes: ['Ingress'] }),
    });
    const a = stagedFromObject('StagedClusterNetworkPolicy', {
      metadata: { name: 'x', namespace: 'ignored' },
      spec: { stagedAction: 'Delete' },
    });
    expect(a).toEqual({
      kind: 'StagedClusterNetworkPolicy',
      action: 'Delete',
      policy: { kind: 'ClusterNetworkPolicy', name: 'x', spec: {} },
    });
    expect(stagedTarget(a as never)).toBe('ClusterNetworkPolicy/x');
    expect(Object.values(STAGED_KINDS).map((k) => k.stages)).toEqual([
      'NetworkPolicy',
      'AdminNetworkPolicy',
      'BaselineAdminNetworkPolicy',
      'ClusterNetworkPolicy',
    ]);
    expect(isStagedKind('StagedNetworkPolicy')).toBe(true);
    expect(isStagedKind('NetworkPolicy')).toBe(false);
    expect(isStagedKind('toString')).toBe(false);
  });

  it('names the field of a bad staged object', () => {
    const bad = (spec: unknown, namespace?: string) =>
      stagedFromObject('StagedNetworkPolicy', { metadata: { name: 'n', namespace }, spec });
    expect(bad({ stagedAction: 'Maybe' }, 'a')).toEqual({
      error: 'spec.stagedAction: "Maybe" is not Set or Delete',
    });
    expect(bad({ stagedAction: 7 }, 'a')).toEqual({ error: 'spec.stagedAction: "7" is not Set or Delete' });
    expect(bad(undefined, 'a')).toEqual({ error: 'spec: required, an object' });
    expect(bad([], 'a')).toEqual({ error: 'spec: required, an object' });
    expect(bad({})).toEqual({ error: 'metadata.namespace: required' });
  });

  it("applies Set (add or replace) and Delete; a Delete of nothing is that object's problem", () => {
    const enforced = new Map([
      ['NetworkPolicy/a/one', np('a', 'one')],
      ['NetworkPolicy/a/two', np('a', 'two')],
    ]);
    const set = stagedFromObject('StagedNetworkPolicy', {
      metadata: { name: 'one', namespace: 'a' },
      spec: { podSelector: { matchLabels: { x: 'y' } } },
    });
    const add = stagedFromObject('StagedNetworkPolicy', {
      metadata: { name: 'three', namespace: 'a' },
      spec: { podSelector: {} },
    });
    const del = stagedFromObject('StagedNetworkPolicy', {
      metadata: { name: 'two', namespace: 'a' },
      spec: { stagedAction: 'Delete' },
    });
    const none = stagedFromObject('StagedNetworkPolicy', {
      metadata: { name: 'four', namespace: 'a' },
      spec: { stagedAction: 'Delete' },
    });
    const r = applyStaged(enforced, [set, add, del, none] as never);
    expect([...r.policies.keys()]).toEqual(['NetworkPolicy/a/one', 'NetworkPolicy/a/three']);
    expect(r.policies.get('NetworkPolicy/a/one')!.spec).toEqual({ podSelector: { matchLabels: { x: 'y' } } });
    expect(r.problems.map((p) => p.error)).toEqual([
      'spec.stagedAction: Delete: there is no NetworkPolicy a/four to delete',
    ]);
    // the enforced set is never changed
    expect([...enforced.keys()]).toEqual(['NetworkPolicy/a/one', 'NetworkPolicy/a/two']);
  });
});
