// The netpolicy-controller's PodAddressSlice writer. Pod changes go to the incremental planner
// (slice-plan.ts) as they come; a pass plans them and writes only the slices that changed: creates
// and updates first, deletes last, so a pod moving between slices is never missing from both. A full
// pass (first as leader, every resync, after a failed write or a change to the slices by anyone else)
// starts again from the live slices and every pod. A slice event that says what the plan says (its
// own writes coming back) is not news.
import { EFFECTIVE_GROUP, MANAGED_BY } from '@cascade/core';
import { Informer, type InformerEvent, type KubeClient, type KubeObject } from '@cascade/core/kube';
import { isEqual } from 'lodash-es';
import type { AddressOwners } from '../cluster/owners.ts';
import {
  addressSliceFromObject,
  MAX_PODS_PER_SLICE,
  SLICE_PATH,
  SLICE_VERSION,
  SLICES_PUBLISHED,
  type SliceSpec,
} from '../cluster/slices.ts';
import { SlicePlanner } from './slice-plan.ts';

type Counter = { inc(n?: number): void };

export interface SlicePublisherOptions {
  client: KubeClient;
  /** Field manager and managed-by label value. */
  name: string;
  /** The controller's namespace: the marker slice names it (spec.namespace). */
  namespace: string;
  owners: AddressOwners;
  /** the live slices changed (not by this writer): publish again soon */
  changed: () => void;
  writes: Counter;
  skipped: Counter;
  max?: number;
}

export class SlicePublisher {
  readonly informer: Informer;
  private readonly opts: SlicePublisherOptions;
  private readonly planner: SlicePlanner;
  /** the next pass starts from the live slices and every pod */
  private full = true;

  constructor(opts: SlicePublisherOptions) {
    this.opts = opts;
    this.planner = new SlicePlanner(opts.max ?? MAX_PODS_PER_SLICE);
    this.informer = new Informer(
      opts.client,
      `${SLICE_PATH}?labelSelector=${encodeURIComponent(`${MANAGED_BY}=${opts.name}`)}`,
      (t: InformerEvent, o: KubeObject) => {
        // what the plan says already (this writer's own writes coming back) is not news
        const n = o.metadata.name;
        const news =
          t === 'DELETED'
            ? n === SLICES_PUBLISHED || this.planner.spec(n) !== undefined
            : n !== SLICES_PUBLISHED && !isEqual(o.spec, this.planner.spec(n));
        if (!news) return;
        this.full = true;
        opts.changed();
      },
    );
  }

  /** Slices planned. */
  get size(): number {
    return this.planner.size;
  }

  /** A pod's claim changed: planned at the next pass. */
  touch(key: string): void {
    this.planner.update(key, this.opts.owners.claimOf(key));
  }

  /** The next pass is a full one. */
  resync(): void {
    this.full = true;
  }

  async publish(): Promise<void> {
    try {
      if (this.full) await this.publishFull();
      else await this.write(this.planner.flush());
    } catch (e) {
      this.full = true; // what was written is in the informer's cache: start again from it
      throw e;
    }
  }

  private async publishFull(): Promise<void> {
    this.full = false;
    const current = new Map<string, SliceSpec>();
    for (const [n, o] of this.informer.cache) {
      if (n === SLICES_PUBLISHED) continue;
      const s = addressSliceFromObject(o);
      if (!('error' in s)) current.set(n, s); // a broken one is not loaded: deleted below
    }
    this.planner.load(current);
    const gone = new Set(this.planner.keys());
    for (const p of this.opts.owners.claimed()) {
      const key = `${p.namespace}/${p.name}`;
      gone.delete(key);
      this.planner.update(key, p);
    }
    for (const key of gone) this.planner.update(key, undefined);
    this.planner.flush();
    const all = new Map<string, SliceSpec | undefined>(this.planner.specs());
    for (const n of this.informer.cache.keys())
      if (!all.has(n) && n !== SLICES_PUBLISHED) all.set(n, undefined);
    await this.write(all);
    // the set is complete: say so once (never rewritten, so a restart or failover writes nothing)
    if (!this.informer.cache.has(SLICES_PUBLISHED))
      await this.apply(SLICES_PUBLISHED, { namespace: this.opts.namespace, labels: {}, pods: [] });
  }

  private async write(changes: Map<string, SliceSpec | undefined>): Promise<void> {
    const labels = { [MANAGED_BY]: this.opts.name };
    for (const [n, spec] of changes) {
      if (!spec) continue;
      const live = this.informer.cache.get(n);
      if (live && isEqual(live.spec, spec) && isEqual(live.metadata.labels ?? {}, labels)) {
        this.opts.skipped.inc();
        continue;
      }
      await this.apply(n, spec);
    }
    for (const [n, spec] of changes) {
      if (spec || !this.informer.cache.has(n)) continue;
      this.opts.writes.inc();
      await this.opts.client.request('DELETE', `${SLICE_PATH}/${n}`).catch((e: { status?: number }) => {
        if (e.status !== 404) throw e;
      });
      this.informer.cache.delete(n);
    }
  }

  private async apply(n: string, spec: SliceSpec): Promise<void> {
    this.opts.writes.inc();
    const applied = await this.opts.client.apply(
      `${SLICE_PATH}/${n}`,
      {
        apiVersion: `${EFFECTIVE_GROUP}/${SLICE_VERSION}`,
        kind: 'PodAddressSlice',
        metadata: { name: n, labels: { [MANAGED_BY]: this.opts.name } },
        spec,
      },
      this.opts.name,
    );
    this.informer.cache.set(n, applied);
  }
}
