// The informer's own timers: a stopped informer must not keep the process alive (graceful shutdown),
// and a failed watch must not leave a resync deadline that later aborts a healthy watch.
import { describe, expect, it } from 'vitest';
import { ApiError, type KubeClient, WatchIdle } from './client.ts';
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

describe('Informer on an idle watch', () => {
  it('resumes a watch the server left silent from its resourceVersion: no relist, no failure, the resync deadline kept from the list', async () => {
    let lists = 0;
    const paths: string[] = [];
    const client = {
      request: async () => {
        lists++;
        return { items: [], metadata: { resourceVersion: '7' } };
      },
      watch: async (path: string, _on: unknown, signal: AbortSignal) => {
        paths.push(path);
        if (paths.length <= 2) throw new WatchIdle('WATCH: no data for 90 s');
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
      },
    } as unknown as KubeClient;
    const health: (string | undefined)[] = [];
    let errors = 0;
    const inf = new Informer(client, '/api/v1/namespaces', () => {}, 60_000);
    inf.onHealth = (_p, e) => health.push(e);
    inf.onError = () => errors++;
    inf.start();
    await tick(50);
    expect(paths).toHaveLength(3);
    for (const p of paths) expect(p).toContain('resourceVersion=7');
    expect(lists).toBe(1);
    expect(health).toEqual([]);
    expect(errors).toBe(0);
    // the resumed watches ask the server to end them by the list's resync deadline, not later
    expect(paths.map((p) => Number(/timeoutSeconds=(\d+)/.exec(p)![1]))).toEqual([60, 60, 60]);
    inf.stop();
  });

  it('a watch that fails otherwise is still a failure: relisted, reported', async () => {
    let lists = 0;
    let n = 0;
    const client = {
      request: async () => {
        lists++;
        return { items: [], metadata: { resourceVersion: '7' } };
      },
      watch: async (_path: string, _on: unknown, signal: AbortSignal) => {
        if (++n === 1) throw new Error('WATCH: no answer in 90 s');
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
      },
    } as unknown as KubeClient;
    const health: (string | undefined)[] = [];
    const inf = new Informer(client, '/api/v1/namespaces', () => {}, 60_000);
    inf.onHealth = (_p, e) => health.push(e);
    inf.start();
    await tick(400);
    expect(health[0]).toMatch(/no answer/);
    expect(lists).toBe(2);
    inf.stop();
  });
});

describe('Informer of an optional resource', () => {
  it('a failure before the server says the resource is not served is over once it says so (/readyz true again)', async () => {
    let lists = 0;
    const client = {
      request: async () => {
        if (++lists === 1) throw new Error('read ECONNRESET');
        throw new ApiError(404, { message: 'the server could not find the requested resource' }, 'GET');
      },
      watch: async () => {},
    } as unknown as KubeClient;
    const health: (string | undefined)[] = [];
    const inf = new Informer(client, '/apis/x.io/v1/things', () => {}, 60_000, true);
    inf.onHealth = (_p, e) => health.push(e);
    inf.start();
    await tick(400);
    expect(lists).toBe(2);
    expect(health).toEqual(['read ECONNRESET', undefined]);
    expect(inf.synced).toBe(true);
    expect(inf.failing).toBeUndefined();
    inf.stop();
  });
});

describe('Informer scoped to namespaces', () => {
  it('inNamespace puts the namespace before the resource and keeps the query', () => {
    expect(Informer.inNamespace('/apis/gateway.networking.k8s.io/v1/httproutes', 'a')).toBe(
      '/apis/gateway.networking.k8s.io/v1/namespaces/a/httproutes',
    );
    expect(Informer.inNamespace('/api/v1/configmaps?labelSelector=x%3Dy', 'team-b')).toBe(
      '/api/v1/namespaces/team-b/configmaps?labelSelector=x%3Dy',
    );
  });

  it('lists and watches each namespace on its own into one cache; a relist of one namespace deletes only its objects', async () => {
    type O = { metadata: { name: string; namespace: string; resourceVersion: string } };
    const live = new Map<string, O[]>([
      ['a', [{ metadata: { name: 'r1', namespace: 'a', resourceVersion: '1' } }]],
      ['b', [{ metadata: { name: 'r2', namespace: 'b', resourceVersion: '1' } }]],
    ]);
    const lists: string[] = [];
    const watches: string[] = [];
    const gone = new Map<string, () => void>();
    const client = {
      request: async (_m: string, path: string) => {
        lists.push(path);
        const ns = path.split('/namespaces/')[1]!.split('/')[0]!;
        return { items: live.get(ns) ?? [], metadata: { resourceVersion: '5' } };
      },
      watch: (path: string, _on: unknown, signal: AbortSignal) => {
        watches.push(path.split('?')[0]!);
        const ns = path.split('/namespaces/')[1]!.split('/')[0]!;
        return new Promise<void>((resolve, reject) => {
          gone.set(ns, () => reject(new ApiError(410, {}, 'WATCH'))); // too old: relist this scope
          signal.addEventListener('abort', () => resolve());
        });
      },
    } as unknown as KubeClient;
    const events: string[] = [];
    const inf = new Informer(
      client,
      '/apis/gateway.networking.k8s.io/v1/httproutes',
      (t, o) => events.push(`${t} ${o.metadata.namespace}/${o.metadata.name}`),
      60_000,
      false,
      ['a', 'b', 'a'],
    );
    inf.start();
    await tick(30);
    expect(inf.synced).toBe(true);
    expect(lists.sort()).toEqual([
      '/apis/gateway.networking.k8s.io/v1/namespaces/a/httproutes',
      '/apis/gateway.networking.k8s.io/v1/namespaces/b/httproutes',
    ]);
    expect(watches.sort()).toEqual(lists);
    expect([...inf.cache.keys()].sort()).toEqual(['a/r1', 'b/r2']);
    // namespace a's watch expires with r1 gone meanwhile: the relist of a deletes r1, b's r2 stays
    live.set('a', []);
    gone.get('a')!();
    await tick(30);
    expect([...inf.cache.keys()]).toEqual(['b/r2']);
    expect(events).toContain('DELETED a/r1');
    expect(events).not.toContain('DELETED b/r2');
    inf.stop();
  });

  it('no namespace at all is synced and empty without a request', async () => {
    const { client, watches } = fakeClient(async () => {});
    const inf = new Informer(client, '/api/v1/configmaps', () => {}, 60_000, false, []);
    inf.start();
    expect(inf.synced).toBe(true);
    expect(watches()).toBe(0);
    inf.stop();
  });
});

describe('Informer of a resource served in several versions', () => {
  type O = { metadata: { name: string; resourceVersion: string } };
  const BETA = '/apis/policy.x.io/v1beta1/things';
  const ALPHA = '/apis/policy.x.io/v1alpha2/things';

  function server(served: Set<string>, objects: O[]) {
    const lists: string[] = [];
    const watches: string[] = [];
    let end: ((e?: unknown) => void) | undefined;
    const client = {
      request: async (_m: string, path: string) => {
        lists.push(path);
        if (!served.has(path)) throw new ApiError(404, { message: 'not found' }, 'GET');
        return { items: objects, metadata: { resourceVersion: '7' } };
      },
      watch: (path: string, _on: unknown, signal: AbortSignal) => {
        watches.push(path.split('?')[0]!);
        return new Promise<void>((resolve, reject) => {
          end = (e) => (e ? reject(e) : resolve());
          signal.addEventListener('abort', () => resolve());
        });
      },
    } as unknown as KubeClient;
    return { client, lists, watches, end: (e?: unknown) => end?.(e) };
  }

  it('lists and watches the preferred version when it is served, the older one otherwise', async () => {
    const objects = [{ metadata: { name: 'a', resourceVersion: '3' } }];
    const both = server(new Set([BETA, ALPHA]), objects);
    const inf = new Informer(both.client, [BETA, ALPHA], () => {}, 60_000, true);
    inf.start();
    await tick(30);
    expect([both.lists, both.watches, inf.path]).toEqual([[BETA], [BETA], BETA]);
    inf.stop();
    const old = server(new Set([ALPHA]), objects);
    const inf2 = new Informer(old.client, [BETA, ALPHA], () => {}, 60_000, true);
    inf2.start();
    await tick(30);
    expect([old.lists, old.watches, inf2.path, inf2.missing]).toEqual([[BETA, ALPHA], [ALPHA], ALPHA, false]);
    expect([...inf2.cache.keys()]).toEqual(['a']);
    inf2.stop();
  });

  it('moves to the preferred version at the next list without an event: one object, never two', async () => {
    const served = new Set([ALPHA]);
    const objects = [{ metadata: { name: 'a', resourceVersion: '3' } }];
    const s = server(served, objects);
    const events: string[] = [];
    const inf = new Informer(
      s.client,
      [BETA, ALPHA],
      (t, o) => events.push(`${t} ${o.metadata.name}`),
      60_000,
      true,
    );
    const versions: string[] = [];
    inf.onVersion = (p) => versions.push(p);
    inf.start();
    await tick(30);
    expect(inf.path).toBe(ALPHA);
    served.add(BETA); // the CRD upgraded: both served
    s.end(new ApiError(410, {}, 'WATCH')); // the next relist (a resync or a watch too old)
    await tick(30);
    expect(inf.path).toBe(BETA);
    expect(s.watches).toEqual([ALPHA, BETA]);
    expect(events).toEqual(['ADDED a']);
    expect(inf.cache.size).toBe(1);
    served.delete(BETA); // a downgrade: the watched version gone, the older one listed at once
    s.end(new ApiError(404, {}, 'WATCH'));
    await tick(300);
    expect([inf.path, inf.failing, inf.missing, events]).toEqual([ALPHA, undefined, false, ['ADDED a']]);
    expect(versions).toEqual([ALPHA, BETA, ALPHA]); // each change said once (the agent logs it)
    inf.stop();
  });

  it('no version served: an optional resource is synced, empty and missing', async () => {
    const s = server(new Set(), []);
    const inf = new Informer(s.client, [BETA, ALPHA], () => {}, 60_000, true);
    inf.start();
    await tick(30);
    expect([inf.synced, inf.missing, inf.failing, s.lists]).toEqual([true, true, undefined, [BETA, ALPHA]]);
    inf.stop();
  });
});
