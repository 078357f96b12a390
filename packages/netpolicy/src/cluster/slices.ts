// PodAddressSlices: what a node agent needs to know of the pods on other nodes, published by the
// netpolicy-controller so agents need not watch every Pod (the shape of Cilium's CiliumEndpointSlice
// and Antrea's AddressGroup). A slice holds up to 100 pods of one group, the pods that share a
// namespace, a label set and named ports (what makes their identity), with each pod's name, node,
// addresses and creation time (the newest of two pods claiming an address owns it, as owners.ts
// decides on every agent). Slices are cluster-scoped: only the controller writes them.
//
// The controller's side is slice-plan.ts. SliceIndex here is the agent's side: pod key -> pod from
// the slices seen, whatever order their events come in (a pod moving between slices is never lost in
// between).
import { crdFor, EFFECTIVE_GROUP } from '@cascade/core';
import { z } from 'zod';
import { hostPrefix } from '../engine/cidr.ts';
import { type Pod, zodMessage } from '../engine/model.ts';

export const MAX_PODS_PER_SLICE = 100;
/**
 * The slice without pods that says a leader has published a complete set at least once. An agent
 * fed by slices does not touch the datapath before it sees it (a restarted or upgraded agent keeps
 * the pinned maps' verdicts meanwhile), so it never enforces with half the cluster's pods unknown.
 */
export const SLICES_PUBLISHED = 'pas-published';
export const SLICE_VERSION = 'v1alpha1';
export const SLICE_PATH = `/apis/${EFFECTIVE_GROUP}/${SLICE_VERSION}/podaddressslices`;

const name = z.string().min(1).max(253);
export const sliceSpecSchema = z.object({
  namespace: z.string().min(1).max(63),
  labels: z.record(z.string().min(1).max(317), z.string().max(63)),
  /** The named container ports of every pod of the slice (unnamed ones never matter to policy). */
  ports: z
    .array(
      z.object({
        name: z.string().min(1).max(15),
        port: z.number().int().min(1).max(65535),
        protocol: z.enum(['TCP', 'UDP', 'SCTP']),
      }),
    )
    .max(256)
    .optional(),
  pods: z
    .array(
      z.object({
        name,
        node: name.optional(),
        ips: z.array(z.string().min(2).max(45)).min(1).max(2),
        created: z.string().max(40).optional(),
      }),
    )
    .max(MAX_PODS_PER_SLICE),
});
export type SliceSpec = z.infer<typeof sliceSpecSchema>;
export type SlicePod = SliceSpec['pods'][number];

export const podAddressSliceCrd = crdFor({
  group: EFFECTIVE_GROUP,
  version: SLICE_VERSION,
  kind: 'PodAddressSlice',
  plural: 'podaddressslices',
  scope: 'Cluster',
  spec: sliceSpecSchema,
  status: false,
  categories: ['cascade'],
  shortNames: ['pas'],
  printerColumns: [
    { name: 'Namespace', type: 'string', jsonPath: '.spec.namespace' },
    { name: 'Labels', type: 'string', jsonPath: '.spec.labels' },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
});

/** A slice object as read (informer, list): its spec checked, or why it is ignored. */
export function addressSliceFromObject(o: {
  metadata: { name: string };
  spec?: unknown;
}): SliceSpec | { error: string } {
  const r = sliceSpecSchema.safeParse(o.spec);
  if (!r.success) return { error: zodMessage(r.error, 'spec') };
  for (const [i, p] of r.data.pods.entries())
    for (const ip of p.ips)
      if (!hostPrefix(ip)) return { error: `spec.pods.${i}.ips: not an address: ${ip}` };
  return r.data;
}

/**
 * The agent's view of the slices: pod key (namespace/name) -> the pod, every node's (the agent reads
 * no Pod, its own node's included). A pod in two slices (moving from one to the
 * other, events in any order) is the one the most recent slice event gave.
 */
export class SliceIndex {
  private readonly slices = new Map<string, Map<string, Pod>>();
  /** pod key -> the slices holding it, the most recently applied last */
  private readonly holders = new Map<string, string[]>();
  /** The controller's SLICES_PUBLISHED marker has been seen (stays true: the slices stay valid). */
  published = false;

  get size(): number {
    return this.holders.size;
  }

  get(key: string): Pod | undefined {
    const h = this.holders.get(key);
    return h ? this.slices.get(h[h.length - 1]!)!.get(key) : undefined;
  }

  /** Applies a slice (undefined: deleted) and returns the pod keys whose pod may have changed. */
  apply(name: string, spec: SliceSpec | undefined): string[] {
    if (name === SLICES_PUBLISHED) {
      if (spec) this.published = true;
      return [];
    }
    const before = this.slices.get(name) ?? new Map<string, Pod>();
    const after = new Map<string, Pod>();
    for (const e of spec?.pods ?? []) {
      const pod: Pod = {
        namespace: spec!.namespace,
        name: e.name,
        labels: spec!.labels,
        ips: e.ips,
        ports: spec!.ports ?? [],
        ...(e.node ? { node: e.node } : {}),
        ...(e.created ? { created: e.created } : {}),
      };
      after.set(`${pod.namespace}/${pod.name}`, pod);
    }
    const touched = new Set([...before.keys(), ...after.keys()]);
    const old = new Map([...touched].map((k) => [k, this.get(k)]));
    if (after.size) this.slices.set(name, after);
    else this.slices.delete(name);
    for (const k of touched) {
      const h = (this.holders.get(k) ?? []).filter((n) => n !== name);
      if (after.has(k)) h.push(name);
      if (h.length) this.holders.set(k, h);
      else this.holders.delete(k);
    }
    return [...touched].filter((k) => !samePod(old.get(k), this.get(k)));
  }
}

function samePod(a: Pod | undefined, b: Pod | undefined): boolean {
  if (!a || !b) return a === b;
  return (
    a.node === b.node &&
    a.created === b.created &&
    a.ips.join() === b.ips.join() &&
    JSON.stringify(a.labels) === JSON.stringify(b.labels) &&
    JSON.stringify(a.ports) === JSON.stringify(b.ports)
  );
}
