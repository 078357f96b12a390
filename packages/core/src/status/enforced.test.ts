// The Enforced ladder, rung by rung: which fact wins when several hold, and that a rung marked
// "while True" never hides a reason the fold or an earlier rung gave.
import { describe, expect, it } from 'vitest';
import { ENFORCED_LADDER, type EnforcedFacts, withEnforcement } from './enforced.ts';

const accepted = { type: 'Accepted', status: 'True', reason: 'Accepted', message: 'ok' };
const fold = (status: string, reason: string) => [
  accepted,
  { type: 'Enforced', status, reason, message: `fold says ${reason}` },
];
const enforced = (facts: EnforcedFacts, status = 'True', reason = 'Enforced') =>
  withEnforcement(fold(status, reason), facts).find((c) => c.type === 'Enforced')!;

const publish = { publishFailures: [{ object: 'Config infra/a', message: 'denied' }] };
const missing = { waiting: [{ object: 'Config infra/a', missing: true, why: 'not served' }] };
const waiting = { waiting: [{ object: 'Config infra/a', missing: false, why: 'not ready' }] };
const dataPlane = { dataPlaneGaps: ['gateway infra/gw is not wired'] };
const gateway = { gatewayGaps: ['gateway infra/gw is not programmed'] };
const backend = { backendGap: 'the limiter (Service infra/lim) has no ready endpoint' };
const allow = { failureMode: 'when the limiter cannot answer, requests are allowed (failure mode allow)' };

describe('the Enforced ladder', () => {
  it('lists its rungs in the documented order', () => {
    expect(ENFORCED_LADDER.map((r) => r.reason)).toEqual([
      'PublishFailed',
      'MissingDependency',
      'Pending',
      'MissingDependency',
      'MissingDependency',
      'TargetNotProgrammed',
    ]);
  });

  it('keeps the fold result when no fact holds, and leaves other conditions alone', () => {
    const out = withEnforcement(fold('True', 'PartiallyEnforced'), {});
    expect(out).toEqual(fold('True', 'PartiallyEnforced'));
  });

  it.each([
    [
      'publish failure',
      publish,
      'PublishFailed',
      'Policy is not enforced: could not publish Config infra/a: denied',
    ],
    [
      'object not served',
      missing,
      'MissingDependency',
      'Policy is not enforced: cannot write Config infra/a (not served)',
    ],
    [
      'object not ready',
      waiting,
      'Pending',
      'Policy is not enforced yet: waiting for Config infra/a (not ready) to be ready',
    ],
    [
      'data plane gap',
      dataPlane,
      'MissingDependency',
      'Policy is not enforced: gateway infra/gw is not wired',
    ],
    [
      'decision point down',
      backend,
      'MissingDependency',
      'Policy is not enforced: the limiter (Service infra/lim) has no ready endpoint',
    ],
    [
      'gateway gap',
      gateway,
      'TargetNotProgrammed',
      'Policy is not enforced: gateway infra/gw is not programmed',
    ],
  ])('one fact alone: %s', (_name, facts, reason, message) => {
    expect(enforced(facts)).toEqual({ type: 'Enforced', status: 'False', reason, message });
  });

  it('names the first rung that holds when several do', () => {
    const all = { ...publish, ...missing, ...dataPlane, ...gateway };
    expect(enforced(all).reason).toBe('PublishFailed');
    expect(enforced({ ...missing, ...dataPlane, ...gateway }).reason).toBe('MissingDependency');
    expect(enforced({ ...missing, ...dataPlane }).message).toContain('cannot write');
    expect(enforced({ ...waiting, ...dataPlane, ...gateway }).reason).toBe('Pending');
    expect(enforced({ ...dataPlane, ...gateway }).message).toContain('not wired');
  });

  it('a wired gateway whose decision point is down is not Enforced; the gateway gap comes after it', () => {
    expect(enforced({ ...dataPlane, ...backend }).message).toContain('not wired');
    expect(enforced({ ...backend, ...gateway }).message).toContain('no ready endpoint');
  });

  it('says the failure mode of a policy still Enforced, and only then', () => {
    expect(enforced(allow)).toEqual({
      type: 'Enforced',
      status: 'True',
      reason: 'Enforced',
      message: `fold says Enforced; ${allow.failureMode}`,
    });
    expect(enforced({ ...allow, ...backend }).message).not.toContain('failure mode');
    expect(enforced(allow, 'False', 'Overridden').message).toBe('fold says Overridden');
  });

  it('a not-served object outranks one that is only not ready', () => {
    const both = {
      waiting: [
        { object: 'A', missing: false, why: 'not ready' },
        { object: 'B', missing: true, why: 'not served' },
      ],
    };
    expect(enforced(both)).toMatchObject({
      reason: 'MissingDependency',
      message: 'Policy is not enforced: cannot write B (not served)',
    });
  });

  it('a publish failure replaces any fold result; the later rungs never hide one', () => {
    expect(enforced(publish, 'False', 'FailedClosed').reason).toBe('PublishFailed');
    expect(enforced(publish, 'False', 'Overridden').reason).toBe('PublishFailed');
    for (const facts of [missing, waiting, dataPlane, backend, gateway])
      for (const reason of ['FailedClosed', 'Overridden'])
        expect(enforced(facts, 'False', reason)).toMatchObject({
          status: 'False',
          reason,
          message: `fold says ${reason}`,
        });
  });

  it('cuts long lists after three, counting the rest', () => {
    const gaps = ['g1', 'g2', 'g3', 'g4', 'g5'];
    expect(enforced({ gatewayGaps: gaps }).message).toBe(
      'Policy is not enforced: g1; g2; g3; and 2 more gateways',
    );
    const failures = gaps.map((g) => ({ object: g, message: 'x' }));
    expect(enforced({ publishFailures: failures }).message).toBe(
      'Policy is not enforced: could not publish g1: x; g2: x; g3: x; and 2 more',
    );
    const objs = gaps.map((g) => ({ object: g, missing: false, why: 'w' }));
    expect(enforced({ waiting: objs }).message).toBe(
      'Policy is not enforced yet: waiting for g1 (w), g2 (w), g3 (w) and 2 more to be ready',
    );
  });
});
