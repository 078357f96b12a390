// The netpolicy-controller's plan of the PodAddressSlices, kept incrementally: a pod stays in the
// slice it was put in (so a pod change rewrites the one slice holding it, never a reshuffle), new pods
// fill their group's slices with room before new ones are made, and a slice a quarter full or less is
// merged into its group's others when they have room (scale-down). A pass costs the pods that changed,
// not the cluster. Plain data in, plain data out: the publisher feeds it the live slices (load) and
// pod changes (update), and writes what flush() says changed. Deterministic: a new leader that loads
// the same slices and sees the same pods plans the same.
import { createHash } from 'node:crypto';
import { MAX_PODS_PER_SLICE, type SlicePod, type SliceSpec } from '../cluster/slices.ts';
import type { ContainerPort, Pod } from '../engine/model.ts';

const sortedEntries = (o: Record<string, string>) => Object.entries(o).sort(([a], [b]) => (a < b ? -1 : 1));
const namedPorts = (ports: ContainerPort[]) =>
  ports
    .filter((p) => p.name)
    .map((p) => ({ name: p.name!, port: p.port, protocol: p.protocol }))
    .sort((a, b) => (a.name !== b.name ? (a.name < b.name ? -1 : 1) : a.port - b.port));

/** The group of a pod: what its identity is made of, so one group's pods share a slice. */
const groupKey = (namespace: string, labels: Record<string, string>, ports: SliceSpec['ports']) =>
  JSON.stringify([namespace, sortedEntries(labels), ports ?? []]);

const entryOf = (p: Pod): SlicePod => ({
  name: p.name,
  ...(p.node ? { node: p.node } : {}),
  ips: [...p.ips],
  ...(p.created ? { created: p.created } : {}),
});
const sameEntry = (a: SlicePod, b: SlicePod) =>
  a.node === b.node && a.created === b.created && a.ips.join() === b.ips.join();

interface Slot {
  group: string;
  namespace: string;
  labels: Record<string, string>;
  ports?: SliceSpec['ports'];
  /** pod name -> entry, in the order they were put in */
  pods: Map<string, SlicePod>;
}

const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export class SlicePlanner {
  private readonly max: number;
  private readonly slots = new Map<string, Slot>();
  private readonly where = new Map<string, string>(); // pod key -> slice name
  private readonly byGroup = new Map<string, Set<string>>();
  private readonly pending = new Map<string, Pod | undefined>();
  private readonly dirty = new Set<string>();

  constructor(max = MAX_PODS_PER_SLICE) {
    this.max = max;
  }

  get size(): number {
    return this.slots.size;
  }

  /** Starts from the live slices (a new leader): their pods stay where they are. */
  load(current: ReadonlyMap<string, SliceSpec>): void {
    this.slots.clear();
    this.where.clear();
    this.byGroup.clear();
    this.pending.clear();
    this.dirty.clear();
    for (const [n, spec] of [...current].sort(([a], [b]) => byName(a, b))) {
      const slot: Slot = {
        group: groupKey(spec.namespace, spec.labels, spec.ports),
        namespace: spec.namespace,
        labels: spec.labels,
        ...(spec.ports ? { ports: spec.ports } : {}),
        pods: new Map(),
      };
      for (const e of spec.pods) {
        const key = `${spec.namespace}/${e.name}`;
        // a pod in two slices, or past the maximum: out (rewritten), placed again when it is updated
        if (this.where.has(key) || slot.pods.size >= this.max) continue;
        slot.pods.set(e.name, e);
        this.where.set(key, n);
      }
      if (slot.pods.size !== spec.pods.length) this.dirty.add(n);
      if (!slot.pods.size) continue;
      this.slots.set(n, slot);
      this.groupSlices(slot.group).add(n);
    }
  }

  /** Keys of every pod the plan holds. */
  keys(): IterableIterator<string> {
    return this.where.keys();
  }

  /** A pod changed (undefined, or no address: it goes). Planned at the next flush. */
  update(key: string, pod: Pod | undefined): void {
    this.pending.set(key, pod?.ips.length ? pod : undefined);
  }

  /** Plans the pending changes; returns every slice that changed (undefined: delete it). */
  flush(): Map<string, SliceSpec | undefined> {
    const place = new Map<string, { pods: Pod[]; ports: SliceSpec['ports'] }>();
    const shrunk = new Set<string>();
    for (const [key, pod] of [...this.pending].sort(([a], [b]) => byName(a, b))) {
      const ports = pod && namedPorts(pod.ports);
      const g = pod && groupKey(pod.namespace, pod.labels, ports?.length ? ports : undefined);
      const cur = this.where.get(key);
      const slot = cur === undefined ? undefined : this.slots.get(cur)!;
      if (pod && slot && slot.group === g) {
        const e = entryOf(pod);
        if (!sameEntry(slot.pods.get(pod.name)!, e)) {
          slot.pods.set(pod.name, e);
          this.dirty.add(cur!);
        }
        continue;
      }
      if (slot) {
        slot.pods.delete(key.slice(key.indexOf('/') + 1));
        this.where.delete(key);
        this.dirty.add(cur!);
        shrunk.add(slot.group);
        if (!slot.pods.size) {
          this.slots.delete(cur!);
          this.byGroup.get(slot.group)!.delete(cur!);
          if (!this.byGroup.get(slot.group)!.size) this.byGroup.delete(slot.group);
        }
      }
      if (pod && g) {
        let w = place.get(g);
        if (!w) place.set(g, (w = { pods: [], ports: ports?.length ? ports : undefined }));
        w.pods.push(pod);
      }
    }
    this.pending.clear();
    for (const [g, w] of [...place].sort(([a], [b]) => byName(a, b))) this.place(g, w.pods, w.ports);
    for (const g of [...shrunk].sort(byName)) this.consolidate(g);
    const out = new Map<string, SliceSpec | undefined>();
    for (const n of [...this.dirty].sort(byName)) out.set(n, this.spec(n));
    this.dirty.clear();
    return out;
  }

  /** Every slice as planned. */
  specs(): Map<string, SliceSpec> {
    const out = new Map<string, SliceSpec>();
    for (const n of [...this.slots.keys()].sort(byName)) out.set(n, this.spec(n)!);
    return out;
  }

  /** One slice as planned (undefined: none of that name). */
  spec(n: string): SliceSpec | undefined {
    const s = this.slots.get(n);
    if (!s) return undefined;
    return {
      namespace: s.namespace,
      labels: s.labels,
      ...(s.ports ? { ports: s.ports } : {}),
      pods: [...s.pods.values()],
    };
  }

  private groupSlices(g: string): Set<string> {
    let s = this.byGroup.get(g);
    if (!s) this.byGroup.set(g, (s = new Set()));
    return s;
  }

  private place(g: string, pods: Pod[], ports: SliceSpec['ports']): void {
    const queue = [...pods];
    const put = (n: string, slot: Slot) => {
      while (queue.length && slot.pods.size < this.max) {
        const p = queue.shift()!;
        slot.pods.set(p.name, entryOf(p));
        this.where.set(`${p.namespace}/${p.name}`, n);
        this.dirty.add(n);
      }
    };
    for (const n of [...this.groupSlices(g)].sort(byName)) put(n, this.slots.get(n)!);
    const hash = createHash('sha256').update(g).digest('hex').slice(0, 16);
    for (let i = 0; queue.length; i++) {
      const n = `pas-${hash}-${i}`; // no tenant text in the name
      if (this.slots.has(n)) continue;
      const first = queue[0]!;
      const slot: Slot = {
        group: g,
        namespace: first.namespace,
        labels: { ...first.labels },
        ...(ports ? { ports } : {}),
        pods: new Map(),
      };
      this.slots.set(n, slot);
      this.groupSlices(g).add(n);
      put(n, slot);
    }
  }

  /** Scale-down: a slice a quarter full or less goes into its group's others when they have room. */
  private consolidate(g: string): void {
    const names = [...(this.byGroup.get(g) ?? [])];
    if (names.length < 2) return;
    const size = (n: string) => this.slots.get(n)!.pods.size;
    const bySize = names.sort((a, b) => size(a) - size(b) || byName(a, b));
    for (const small of bySize) {
      if (!this.slots.has(small)) continue;
      const s = this.slots.get(small)!;
      if (s.pods.size > this.max / 4) break;
      const others = bySize.filter((n) => n !== small && this.slots.has(n));
      const room = others.reduce((sum, n) => sum + this.max - size(n), 0);
      if (!others.length || room < s.pods.size) continue;
      others.sort((a, b) => size(b) - size(a) || byName(a, b)); // the fullest first: fewer slices touched
      for (const n of others) {
        const o = this.slots.get(n)!;
        for (const [name, e] of s.pods) {
          if (o.pods.size >= this.max) break;
          s.pods.delete(name);
          o.pods.set(name, e);
          this.where.set(`${s.namespace}/${name}`, n);
          this.dirty.add(n);
        }
      }
      this.slots.delete(small);
      this.byGroup.get(g)!.delete(small);
      this.dirty.add(small);
    }
  }
}

/**
 * The slices that should exist, from the live ones (name -> spec) and every pod with an address: a
 * full pass of the planner (a new leader, a resync, tests).
 */
export function planSlices(
  current: ReadonlyMap<string, SliceSpec>,
  pods: Iterable<Pod>,
  max = MAX_PODS_PER_SLICE,
): Map<string, SliceSpec> {
  const p = new SlicePlanner(max);
  p.load(current);
  const gone = new Set(p.keys());
  for (const pod of pods) {
    const key = `${pod.namespace}/${pod.name}`;
    gone.delete(key);
    p.update(key, pod);
  }
  for (const key of gone) p.update(key, undefined);
  p.flush();
  return p.specs();
}
