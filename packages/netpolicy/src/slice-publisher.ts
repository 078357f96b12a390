// The netpolicy-controller's PodAddressSlice writer: plans the slices from every pod claiming an
// address (planSlices: sticky, so a pod change writes the one slice holding it) and writes only the
// slices that differ from the live ones: creates and updates first, deletes last, so a pod moving
// between slices is never missing from both. Its own writes coming back through the informer are
// recognised by resourceVersion and do not plan again.
import {
  EFFECTIVE_GROUP,
  Informer,
  type InformerEvent,
  type KubeClient,
  type KubeObject,
  MANAGED_BY,
} from '@cascade/core';
import { isEqual } from 'lodash-es';
import type { AddressOwners } from './owners.ts';
import {
  addressSliceFromObject,
  MAX_PODS_PER_SLICE,
  planSlices,
  SLICE_PATH,
  SLICE_VERSION,
  SLICES_PUBLISHED,
  type SliceSpec,
} from './slices.ts';

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
  /** resourceVersions this writer produced: their watch events are not news */
  private readonly written = new Set<string>();
  /** names this writer deleted: their DELETED events are not news either */
  private readonly deleted = new Set<string>();
  /** The last plan, for figures and tests. */
  lastPlan: Map<string, SliceSpec> = new Map();

  constructor(opts: SlicePublisherOptions) {
    this.opts = opts;
    this.informer = new Informer(
      opts.client,
      `${SLICE_PATH}?labelSelector=${encodeURIComponent(`${MANAGED_BY}=${opts.name}`)}`,
      (t: InformerEvent, o: KubeObject) => {
        const rv = o.metadata.resourceVersion ?? '';
        if (t === 'DELETED' ? this.deleted.delete(o.metadata.name) : this.written.delete(rv)) return;
        opts.changed();
      },
    );
  }

  async publish(): Promise<void> {
    const { client, name } = this.opts;
    const current = new Map<string, SliceSpec>();
    for (const [n, o] of this.informer.cache) {
      if (n === SLICES_PUBLISHED) continue;
      const s = addressSliceFromObject(o);
      if (!('error' in s)) current.set(n, s); // a broken one is planned afresh (and overwritten)
    }
    const plan = planSlices(current, this.opts.owners.claimed(), this.opts.max ?? MAX_PODS_PER_SLICE);
    this.lastPlan = plan;
    const labels = { [MANAGED_BY]: name };
    const write = async (n: string, spec: SliceSpec) => {
      this.opts.writes.inc();
      const applied = await client.apply(
        `${SLICE_PATH}/${n}`,
        {
          apiVersion: `${EFFECTIVE_GROUP}/${SLICE_VERSION}`,
          kind: 'PodAddressSlice',
          metadata: { name: n, labels },
          spec,
        },
        name,
      );
      if (applied.metadata.resourceVersion) this.written.add(applied.metadata.resourceVersion);
      this.informer.cache.set(n, applied);
    };
    for (const [n, spec] of plan) {
      const live = this.informer.cache.get(n);
      if (live && isEqual(live.spec, spec) && isEqual(live.metadata.labels ?? {}, labels)) {
        this.opts.skipped.inc();
        continue;
      }
      await write(n, spec);
    }
    for (const n of [...this.informer.cache.keys()]) {
      if (plan.has(n) || n === SLICES_PUBLISHED) continue;
      this.opts.writes.inc();
      this.deleted.add(n);
      await client.request('DELETE', `${SLICE_PATH}/${n}`).catch((e: { status?: number }) => {
        if (e.status !== 404) throw e;
      });
      this.informer.cache.delete(n);
    }
    // the set is complete: say so once (never rewritten, so a restart or failover writes nothing)
    if (!this.informer.cache.has(SLICES_PUBLISHED))
      await write(SLICES_PUBLISHED, { namespace: this.opts.namespace, labels: {}, pods: [] });
    // a version never seen back (coalesced by the watch) must not hide a later foreign change forever
    if (this.written.size > 10_000) this.written.clear();
    if (this.deleted.size > 10_000) this.deleted.clear();
  }
}
