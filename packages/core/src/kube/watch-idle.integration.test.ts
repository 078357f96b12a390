// Watches against a real kube-apiserver: it leaves a watch on a kind nobody writes silent, with no
// bookmark, for minutes (its cache has no progress from etcd to report). Such a watch is resumed from
// its resourceVersion, not relisted and not reported as a failure (which flipped /readyz and cost a
// LIST of every quiet kind every 90 s); a server that is gone still is a failure.
import { apiServerTestsEnabled, Envtest, waitFor } from '@cascade/envtest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientOf } from '../testing/envtest.ts';
import type { KubeClient } from './client.ts';
import { Informer } from './informer.ts';

const CM = '/api/v1/namespaces/quiet/configmaps';

describe.skipIf(!apiServerTestsEnabled())('an idle watch on the real API server', () => {
  let env: Envtest;
  let client: KubeClient;
  beforeAll(async () => {
    env = await Envtest.start();
    expect((await env.call('POST', '/api/v1/namespaces', { metadata: { name: 'quiet' } })).status).toBe(201);
    client = clientOf(env);
    client.watchIdleMs = 1_500;
  }, 120_000);
  afterAll(async () => {
    await env?.stop();
  });

  it('is resumed where it was: one list, no failure, and the next change still arrives; a stopped server is a failure, and it recovers', async () => {
    const seen: string[] = [];
    const health: (string | undefined)[] = [];
    const inf = new Informer(client, CM, (_t, o) => seen.push(o.metadata.name));
    inf.onHealth = (_p, e) => health.push(e);
    inf.start();
    await waitFor('synced', async () => inf.synced || undefined);
    const watchesBefore = client.requests.get('WATCH') ?? 0;
    // five idle periods of silence from the server
    await new Promise((r) => setTimeout(r, 8_000));
    expect((client.requests.get('WATCH') ?? 0) - watchesBefore).toBeGreaterThanOrEqual(3);
    expect(inf.relists).toBe(1);
    expect(health).toEqual([]);
    const r = await env.call('POST', CM, { metadata: { name: 'after-silence' }, data: { a: 'b' } });
    expect(r.status).toBe(201);
    await waitFor('the change after the silence', async () => seen.includes('after-silence') || undefined);
    expect(inf.relists).toBe(1);

    await env.stopApiServer();
    await waitFor('the failure reported', async () => health.find((h) => h !== undefined), 30_000);
    await env.startApiServer();
    await waitFor('recovered', async () => (health.at(-1) === undefined ? true : undefined), 60_000);
    expect(inf.relists).toBeGreaterThanOrEqual(2);
    inf.stop();
  }, 120_000);
});
