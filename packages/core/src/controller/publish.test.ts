// The publish ledger: every item is tried whatever the others do; failures say whether they are worth
// a timer (no answer, conflict, throttling, server error, a ResourceQuota) or wait for their input
// (invalid, forbidden, too large); the backoff doubles to a minute.
import { describe, expect, it } from 'vitest';
import { ApiError } from '../kube/client.ts';
import { Metrics } from '../kube/metrics.ts';
import { checkSize, PublishLedger } from './publish.ts';

const apiError = (status: number, message: string) =>
  new ApiError(status, { message } as never, `HTTP ${status}`);

describe('PublishLedger', () => {
  it('tries every item, records each failure once, and clears it on success', async () => {
    const ledger = new PublishLedger(new Metrics());
    const changes: string[] = [];
    ledger.onChange = (object, failure) => changes.push(`${object} ${failure ? 'failing' : 'ok'}`);
    const errors: Record<string, Error | undefined> = {
      a: apiError(403, 'exceeded quota: eps, requested: count/effectivepolicies.cascade.dev=1'),
      b: apiError(403, 'effectivepolicies is forbidden: User "x" cannot create'),
      c: apiError(409, 'the object has been modified'),
      d: apiError(422, 'spec.x: Invalid value'),
      e: new Error('connect ECONNREFUSED'),
      f: undefined,
    };
    const done: string[] = [];
    const what = (k: string) => ({ object: `obj ${k}`, policies: () => [] });
    const failed = await ledger.each(Object.keys(errors), 2, what, async (k) => {
      if (errors[k]) throw errors[k];
      done.push(k);
    });
    expect(done).toEqual(['f']);
    expect(Object.fromEntries(failed.map((f) => [f.item, f.failure.permanent]))).toEqual({
      a: false, // a quota is freed or raised by someone: retried on a timer
      b: true,
      c: false,
      d: true,
      e: false,
    });
    // too large is refused here, before sending
    const big = await ledger.each(['g'], 1, what, async () => {
      checkSize({ x: 'y'.repeat(2_000_000) });
    });
    expect(big[0]!.failure).toMatchObject({ status: -1, permanent: true });
    // the same failure again is not a change; success clears it
    await ledger.each(['a'], 1, what, async () => {
      throw errors.a;
    });
    await ledger.each(['a'], 1, what, async () => {});
    expect(changes.filter((c) => c.startsWith('obj a '))).toEqual(['obj a failing', 'obj a ok']);
    expect(ledger.failures.has('obj a')).toBe(false);
  });

  it('backs off from 0.5 s, doubling, to a minute', () => {
    const f = (attempts: number) => PublishLedger.backoffMs({ attempts } as never);
    expect([1, 2, 3, 8, 20].map(f)).toEqual([500, 1000, 2000, 60_000, 60_000]);
  });
});
