// The informer's own timers: a stopped informer must not keep the process alive (graceful shutdown),
// and a failed watch must not leave a resync deadline that later aborts a healthy watch.
import { describe, expect, it } from 'vitest';
import { ApiError, type KubeClient } from './client.ts';
import { Informer } from './informer.ts';

function fakeClient(watch: (signal: AbortSignal) => Promise<void>) {
  let watches = 0;
  const client = {
    request: async () => ({ items: [], metadata: { resourceVersion: '1' } }),
    watch: async (_p: string, _on: unknown, signal: AbortSignal) => {
      watches++;
      return watch(signal);
    },
  } as unknown as KubeClient;
  return { client, watches: () => watches };
}

const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
const tick = (ms = 20) => new Promise((r) => setTimeout(r, ms));

describe('Informer timers', () => {
  it('leaves no timer behind when stopped during a watch that rejects on abort', async () => {
    const before = timeouts();
    const { client } = fakeClient(
      (signal) =>
        new Promise((_, reject) =>
          signal.addEventListener('abort', () => reject(new Error('connection lost'))),
        ),
    );
    const inf = new Informer(client, '/api/v1/namespaces', () => {});
    inf.start();
    await tick();
    expect(inf.synced).toBe(true);
    inf.stop();
    await tick();
    expect(timeouts()).toBeLessThanOrEqual(before);
  });

  it('a failed watch does not leave a resync deadline armed', async () => {
    let n = 0;
    const { client, watches } = fakeClient(async (signal) => {
      n++;
      if (n <= 3) throw new ApiError(410, {}, 'WATCH'); // relist and watch again, at once
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
    });
    const before = timeouts();
    const inf = new Informer(client, '/api/v1/namespaces', () => {}, 60_000);
    inf.start();
    await tick(50);
    expect(watches()).toBe(4);
    // Only the live watch's deadline (unref'd) may exist: one timer, not four.
    expect(timeouts() - before).toBeLessThanOrEqual(1);
    inf.stop();
    await tick();
    expect(timeouts()).toBeLessThanOrEqual(before);
  });
});
