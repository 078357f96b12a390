// Security identities: pods grouped by (namespace labels, pod labels, named ports, and the ANP network
// prefix their IP falls in), nodes by labels, CIDR peers by prefix; reserved identities for host and
// world. Numbers come from a persistent allocation table keyed by that content, so a label set keeps
// its identity across recomputation whatever the iteration order.
import { type Prefix, prefixKey } from './cidr.ts';
import type { ContainerPort } from './model.ts';

export const ID = {
  /** In MapState keys only: any remote. */
  WILDCARD: 0,
  /** The local node (each node agent maps its own addresses to it). */
  HOST: 1,
  /** IPv4 addresses outside the cluster not covered by a more specific CIDR identity. */
  WORLD: 2,
  /** In MapState keys only: any pod identity (e.g. `namespaces: {}`). */
  ALL_PODS: 3,
  /** IPv6 counterpart of WORLD. */
  WORLD6: 4,
  /**
   * In the datapath's ipcache only: a ClusterIP whose Service the node's budgets left out of the
   * translation maps. A new flow to it is dropped (fail closed), never judged as the world.
   */
  UNTRANSLATED: 5,
} as const;

export const POD_RANGE = { first: 256, last: 0x00ffffff } as const;
export const NODE_RANGE = { first: 0x01000000, last: 0x01ffffff } as const;
export const CIDR_RANGE = { first: 0x02000000, last: 0x7fffffff } as const;

export const isPodIdentity = (id: number): boolean => id >= POD_RANGE.first && id <= POD_RANGE.last;

export type IdentityKind = 'pod' | 'node' | 'cidr' | 'world' | 'host';

export interface IdentityInfo {
  id: number;
  kind: IdentityKind;
  key: string;
  namespace?: string;
  nsLabels?: Record<string, string>;
  labels?: Record<string, string>;
  ports?: ContainerPort[];
  prefix?: Prefix;
  /** Most specific ANP network prefix (prefixKey) each IP family falls in, if any. */
  netparts?: string[];
  /**
   * Past its namespace's identity cap (identity-cap.ts): other namespaces' NetworkPolicy peers do
   * not select it one by one.
   */
  capped?: boolean;
}

const sortedEntries = (o: Record<string, string> | undefined) =>
  Object.entries(o ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

export function podIdentityKey(
  ns: string,
  nsLabels: Record<string, string>,
  labels: Record<string, string>,
  ports: ContainerPort[],
  netparts: string[],
): string {
  const p = ports
    .filter((x) => x.name)
    .map((x) => `${x.name}=${x.protocol}/${x.port}`)
    .sort();
  return JSON.stringify(['pod', ns, sortedEntries(nsLabels), sortedEntries(labels), p, [...netparts].sort()]);
}

export const nodeIdentityKey = (labels: Record<string, string>): string =>
  JSON.stringify(['node', sortedEntries(labels)]);
export const cidrIdentityKey = (p: Prefix): string => `cidr:${prefixKey(p)}`;

/** Persistent identity numbers. Allocation in bulk sorts keys first, so a fresh table is deterministic. */
export class IdentityAllocator {
  private readonly byKey = new Map<string, number>();
  private next = { pod: POD_RANGE.first, node: NODE_RANGE.first, cidr: CIDR_RANGE.first };

  allocate(kind: 'pod' | 'node' | 'cidr', key: string): number {
    let id = this.byKey.get(key);
    if (id === undefined) {
      id = this.next[kind]++;
      const range = kind === 'pod' ? POD_RANGE : kind === 'node' ? NODE_RANGE : CIDR_RANGE;
      if (id > range.last) throw new RangeError(`${kind} identity space exhausted`);
      this.byKey.set(key, id);
    }
    return id;
  }

  allocateAll(kind: 'pod' | 'node' | 'cidr', keys: Iterable<string>): void {
    for (const k of [...new Set(keys)].sort()) this.allocate(kind, k);
  }

  peek(key: string): number | undefined {
    return this.byKey.get(key);
  }

  get size(): number {
    return this.byKey.size;
  }
}
