// An informer: list, then watch from the list's resourceVersion; relist on 410 Gone; reconnect with
// exponential backoff on errors; resume an idle watch where it was; a periodic resync relists too.
// It keeps a cache and reports changes.
// Scoped to namespaces (a controller's --watch-namespace), it lists and watches each namespace on its
// own (a Role there suffices) into the one cache.
// Given several versions of one resource (preferred first: v1beta1, then v1alpha2), every list takes
// the first one served and the watch follows it; an object is one object whichever version shows it
// (same name, same resourceVersion), so a switch between versions raises no event.
import {
  ApiError,
  errorText,
  getFirstServed,
  type KubeClient,
  type KubeObject,
  WatchIdle,
} from './client.ts';

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
  /**
   * An optional resource became served (true: its CRD was installed) or stopped being served (false):
   * called once per change. A list that is empty raises no event, so without this nothing would
   * notice a component's CRD installed after the controller started.
   */
  onServed: (served: boolean) => void = () => {};
  /** A resource of several versions: a list read it in another version than the last one (the first list too). */
  onVersion: (path: string) => void = () => {};
  private listed?: string;
  private readonly aborts = new Set<AbortController>();
  private stopped = false;
  private readonly client: KubeClient;
  /** The resource's list paths, preferred version first (one path: one version). */
  readonly paths: readonly string[];
  /** The version served and watched now (of `paths`; the preferred one before the first list). */
  private current: string;
  private readonly onChange: (type: InformerEvent, obj: KubeObject) => void;
  private readonly resyncMs: number;
  private readonly optional: boolean;
  /** The namespaces listed and watched (undefined: the whole cluster, one list and watch). */
  readonly namespaces?: readonly string[];
  private readonly syncedScopes = new Set<string>();

  /**
   * `optional`: a resource that is not served (404) counts as synced and empty; it is listed again
   * later. `namespaces`: a namespaced resource listed and watched in these namespaces only. `path`
   * several paths: versions of one resource, preferred first; each list takes the first one served.
   */
  constructor(
    client: KubeClient,
    path: string | readonly string[],
    onChange: (type: InformerEvent, obj: KubeObject) => void,
    resyncMs = 10 * 60_000,
    optional = false,
    namespaces?: readonly string[],
  ) {
    this.client = client;
    this.paths = typeof path === 'string' ? [path] : [...path];
    if (this.paths.length === 0) throw new Error('Informer: no path');
    this.current = this.paths[0]!;
    this.onChange = onChange;
    this.resyncMs = resyncMs;
    this.optional = optional;
    if (namespaces) this.namespaces = [...new Set(namespaces)];
  }

  /** PATH (a cluster-wide list path, query kept) in namespace NS: /apis/g/v/namespaces/NS/plural?q. */
  static inNamespace(path: string, ns: string): string {
    const [p, q] = path.split('?', 2) as [string, string | undefined];
    const at = p.lastIndexOf('/');
    return `${p.slice(0, at)}/namespaces/${encodeURIComponent(ns)}${p.slice(at)}${q === undefined ? '' : `?${q}`}`;
  }

  /** The list path of the version served now (the preferred one until a list said otherwise). */
  get path(): string {
    return this.current;
  }

  static key(o: KubeObject): string {
    return o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name;
  }

  start(): void {
    if (!this.namespaces) void this.loop();
    else if (this.namespaces.length === 0) this.synced = true;
    else for (const ns of this.namespaces) void this.loop(ns);
  }

  private scoped(path: string, ns?: string): string {
    return ns === undefined ? path : Informer.inNamespace(path, ns);
  }

  stop(): void {
    this.stopped = true;
    for (const a of this.aborts) a.abort();
  }

  /** Lists PATH into the cache; a relist of one namespace's scope deletes only that namespace's objects. */
  private async list(ns?: string): Promise<string> {
    const { index, body: r } = await getFirstServed<{
      items: KubeObject[];
      metadata: { resourceVersion: string };
    }>(
      this.client,
      this.paths.map((p) => this.scoped(p, ns)),
    );
    const version = this.paths[index]!;
    this.current = version;
    if (this.paths.length > 1 && this.listed !== version) {
      this.listed = version;
      this.onVersion(version);
    }
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
      if (!seen.has(k) && (ns === undefined || o.metadata.namespace === ns)) {
        this.cache.delete(k);
        this.onChange('DELETED', o);
      }
    }
    this.relists++;
    this.markSynced(ns);
    if (this.missing) {
      this.missing = false;
      this.onServed(true);
    }
    this.healthy();
    return r.metadata.resourceVersion;
  }

  /** One scope (the cluster, or one namespace) has listed: synced once every scope has. */
  private markSynced(ns?: string): void {
    this.syncedScopes.add(ns ?? '');
    this.synced = this.syncedScopes.size >= (this.namespaces?.length ?? 1);
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

  private async loop(ns?: string): Promise<void> {
    let backoff = 200;
    let rv: string | undefined;
    // the relist that resyncs is due this long after the last list, however often the watch resumed
    let resyncAt = 0;
    while (!this.stopped) {
      try {
        if (!rv) {
          rv = await this.list(ns);
          resyncAt = Date.now() + this.resyncMs;
        }
        if (this.stopped) return;
        const abort = new AbortController();
        this.aborts.add(abort);
        // The resync deadline, armed for this watch only: cleared however the watch ends, never
        // keeping the process alive, never aborting a later watch.
        const left = Math.max(0, resyncAt - Date.now());
        const timer = setTimeout(() => abort.abort(), left);
        timer.unref();
        const path = this.scoped(this.current, ns);
        const sep = path.includes('?') ? '&' : '?';
        await this.client
          .watch(
            `${path}${sep}watch=true&allowWatchBookmarks=true&resourceVersion=${rv}&timeoutSeconds=${Math.max(1, Math.round(left / 1000))}`,
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
          .finally(() => {
            clearTimeout(timer);
            this.aborts.delete(abort);
          });
        if (abort.signal.aborted && !this.stopped) rv = undefined; // resync: relist
        backoff = 200;
      } catch (e) {
        if (this.stopped) return;
        // an idle watch: resumed from where it was, no relist, nothing failed (client.ts)
        if (e instanceof WatchIdle) continue;
        // the version watched is not served any more (its CRD dropped it): list again, from the
        // preferred version, after a breath (a list may still show the old one for a moment)
        if (rv && this.paths.length > 1 && e instanceof ApiError && e.status === 404) {
          rv = undefined;
          await new Promise((r) => setTimeout(r, 200));
          continue;
        }
        if (
          !(e instanceof ApiError && e.status === 410) &&
          !(this.optional && e instanceof ApiError && e.status === 404)
        )
          this.failed(e);
        if (e instanceof ApiError && e.status === 410)
          rv = undefined; // too old: relist
        else if (this.optional && e instanceof ApiError && e.status === 404) {
          rv = undefined;
          // the server answered: an optional resource it does not serve is healthy, so a failure
          // before this (a reset connection at start) is over; left failing, /readyz stayed false
          // until the resource was installed (a wiring-controller replica unready for good)
          this.healthy();
          if (!this.missing) {
            this.missing = true;
            // not at the first list: a resource absent from the start was never served
            if (this.relists > 0) this.onServed(false);
          }
          this.markSynced(ns);
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
