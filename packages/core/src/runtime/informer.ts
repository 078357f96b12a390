// An informer: list, then watch from the list's resourceVersion; relist on 410 Gone; reconnect with
// exponential backoff on errors; a periodic resync relists too. It keeps a cache and reports changes.
import { ApiError, errorText, type KubeClient, type KubeObject } from './client.ts';

export type InformerEvent = 'ADDED' | 'MODIFIED' | 'DELETED';

export class Informer {
  readonly cache = new Map<string, KubeObject>();
  synced = false;
  relists = 0;
  /** Optional informers: true while the resource is not served (its CRD is not installed). */
  missing = false;
  /** The last list/watch error while it lasts (undefined: healthy). */
  failing?: string;
  /**
   * Called when the informer starts failing and when it recovers (error undefined): log once per
   * state change; onError counts every error.
   */
  onHealth: (path: string, error: string | undefined) => void = () => {};
  /** Called for every list or watch error (a counter). */
  onError: (path: string) => void = () => {};
  private abort = new AbortController();
  private stopped = false;
  private readonly client: KubeClient;
  readonly path: string;
  private readonly onChange: (type: InformerEvent, obj: KubeObject) => void;
  private readonly resyncMs: number;
  private readonly optional: boolean;

  /** `optional`: a resource that is not served (404) counts as synced and empty; it is listed again later. */
  constructor(
    client: KubeClient,
    path: string,
    onChange: (type: InformerEvent, obj: KubeObject) => void,
    resyncMs = 10 * 60_000,
    optional = false,
  ) {
    this.client = client;
    this.path = path;
    this.onChange = onChange;
    this.resyncMs = resyncMs;
    this.optional = optional;
  }

  static key(o: KubeObject): string {
    return o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name;
  }

  start(): void {
    void this.loop();
  }

  stop(): void {
    this.stopped = true;
    this.abort.abort();
  }

  private async list(): Promise<string> {
    const r = await this.client.request<{ items: KubeObject[]; metadata: { resourceVersion: string } }>(
      'GET',
      this.path,
    );
    const seen = new Set<string>();
    for (const o of r.items) {
      const k = Informer.key(o);
      seen.add(k);
      const prev = this.cache.get(k);
      if (prev?.metadata.resourceVersion === o.metadata.resourceVersion) continue;
      this.cache.set(k, o);
      this.onChange(prev ? 'MODIFIED' : 'ADDED', o);
    }
    for (const [k, o] of [...this.cache]) {
      if (!seen.has(k)) {
        this.cache.delete(k);
        this.onChange('DELETED', o);
      }
    }
    this.relists++;
    this.synced = true;
    this.missing = false;
    this.healthy();
    return r.metadata.resourceVersion;
  }

  private healthy(): void {
    if (this.failing === undefined) return;
    this.failing = undefined;
    this.onHealth(this.path, undefined);
  }

  private failed(e: unknown): void {
    this.onError(this.path);
    const msg = errorText(e);
    const was = this.failing;
    this.failing = msg;
    if (was === undefined) this.onHealth(this.path, msg); // once per state change, not per retry
  }

  private async loop(): Promise<void> {
    let backoff = 200;
    let rv: string | undefined;
    while (!this.stopped) {
      try {
        if (!rv) rv = await this.list();
        const abort = new AbortController();
        this.abort = abort;
        // The resync deadline of this watch only: cleared however the watch ends, never keeping the
        // process alive, never aborting a later watch.
        const timer = setTimeout(() => abort.abort(), this.resyncMs);
        timer.unref();
        const sep = this.path.includes('?') ? '&' : '?';
        await this.client
          .watch(
            `${this.path}${sep}watch=true&allowWatchBookmarks=true&resourceVersion=${rv}&timeoutSeconds=${Math.round(this.resyncMs / 1000)}`,
            (type, obj) => {
              if (obj.metadata?.resourceVersion) rv = obj.metadata.resourceVersion;
              if (type === 'BOOKMARK') return;
              const k = Informer.key(obj);
              if (type === 'DELETED') this.cache.delete(k);
              else this.cache.set(k, obj);
              this.onChange(type as InformerEvent, obj);
            },
            abort.signal,
          )
          .finally(() => clearTimeout(timer));
        if (abort.signal.aborted && !this.stopped) rv = undefined; // resync: relist
        backoff = 200;
      } catch (e) {
        if (this.stopped) return;
        if (
          !(e instanceof ApiError && e.status === 410) &&
          !(this.optional && e instanceof ApiError && e.status === 404)
        )
          this.failed(e);
        if (e instanceof ApiError && e.status === 410)
          rv = undefined; // too old: relist
        else if (this.optional && e instanceof ApiError && e.status === 404) {
          rv = undefined;
          this.missing = true;
          this.synced = true;
          await new Promise((r) => setTimeout(r, 10_000));
        } else {
          rv = undefined;
          await new Promise((r) => setTimeout(r, backoff));
          backoff = Math.min(backoff * 2, 5_000);
        }
      }
    }
  }
}

/** Starts informers and resolves once every cache has listed (what /readyz waits for). */
export async function startInformers(informers: readonly Informer[]): Promise<void> {
  for (const i of informers) i.start();
  while (!informers.every((i) => i.synced)) await new Promise((r) => setTimeout(r, 50));
}
