// The engine's live identities: which identity each pod and node has now (from its namespace labels,
// labels, named ports and the pod-matching network prefix its address falls in), who holds each
// identity (an identity lives while it has a member), and the CIDR identities the rules name.
import { contains, hostPrefix, type Prefix, prefixKey, WORLD4, WORLD6 } from './cidr.ts';
import {
  cidrIdentityKey,
  ID,
  IdentityAllocator,
  type IdentityInfo,
  nodeIdentityKey,
  podIdentityKey,
} from './identities.ts';
import { IdentityCap } from './identity-cap.ts';
import type { Node, Pod } from './model.ts';
import type { Rule } from './rules.ts';

export class IdentityBook {
  readonly allocator = new IdentityAllocator();
  readonly identities = new Map<number, IdentityInfo>();
  /** `ns/name` -> identity. */
  readonly podIdentity = new Map<string, number>();
  /** node name -> identity. */
  readonly nodeIdentity = new Map<string, number>();
  /** Identity -> its members (`ns/name`, `node:name`). */
  private readonly members = new Map<number, Set<string>>();
  /** Every prefix a pod-matching CIDR peer names: a pod's network part is the most specific holding it. */
  private networks: Prefix[] = [];
  private readonly nsLabels: (ns: string) => Record<string, string>;
  /** Which label sets other namespaces' NetworkPolicies leave out (identity-cap.ts). */
  cap: IdentityCap;
  /** The tenant of a namespace: the cap's group (tenants.ts). */
  tenantOf: (ns: string) => string = (ns) => ns;
  /** Pods placed since the last sync, with what their identity is made of (computed once). */
  private readonly pending = new Map<string, PodParts>();

  constructor(nsLabels: (ns: string) => Record<string, string>, cap?: number) {
    this.nsLabels = nsLabels;
    this.cap = new IdentityCap(cap);
  }

  /**
   * Places a pod's label set in its namespace's ranking (`pod` undefined: it is gone). Place every
   * changed pod, then `rerank()`, then sync the changed pods and the ones rerank moved.
   */
  placePod(key: string, pod: Pod | undefined): void {
    if (!pod) {
      this.cap.place(key, undefined, undefined);
      return;
    }
    const parts = this.parts(pod);
    this.pending.set(key, parts);
    this.cap.place(key, this.tenantOf(pod.namespace), parts.base, pod.created, pod.namespace);
  }

  /** Pods whose label set went in or out of their namespace's cap since the last call. */
  rerank(): string[] {
    return this.cap.rerank();
  }

  /** Forgets what placePod computed (call after the pass's syncs). */
  endPass(): void {
    this.pending.clear();
  }

  /** Pods (or nodes) holding an identity. */
  memberCount(id: number): number {
    return this.members.get(id)?.size ?? 0;
  }

  /**
   * Takes the pod-matching prefixes of `rules` (NetworkPolicy ipBlocks and their excepts too).
   * Returns whether they changed: then every pod's network part must be looked at again.
   */
  setNetworks(rules: readonly Rule[]): boolean {
    const nets = new Map<string, Prefix>();
    for (const r of rules)
      for (const p of r.peers)
        if (p.kind === 'cidr' && p.pods) {
          nets.set(prefixKey(p.cidr), p.cidr);
          for (const e of p.except) nets.set(prefixKey(e), e);
        }
    const sig = (l: Prefix[]) => l.map(prefixKey).sort().join();
    const before = sig(this.networks);
    this.networks = [...nets.values()];
    return sig(this.networks) !== before;
  }

  /** Re-derives a pod's identity (`pod` undefined: it is gone); records identities born and dead. */
  syncPod(key: string, pod: Pod | undefined, added: number[], removed: number[]): void {
    const old = this.podIdentity.get(key);
    const info = pod ? this.podInfo(pod, this.pending.get(key) ?? this.parts(pod)) : undefined;
    if (old !== undefined && old === info?.id) return;
    if (old !== undefined) {
      this.podIdentity.delete(key);
      this.drop(old, key, removed);
    }
    if (info) {
      this.podIdentity.set(key, info.id);
      this.add(info, key, added);
    }
  }

  /** Re-derives a node's identity (`node` undefined: it is gone). */
  syncNode(name: string, node: Node | undefined, added: number[], removed: number[]): void {
    const old = this.nodeIdentity.get(name);
    const key = node ? nodeIdentityKey(node.labels) : undefined;
    const id = key ? this.allocator.allocate('node', key) : undefined;
    if (old === id) return;
    if (old !== undefined) this.drop(old, `node:${name}`, removed);
    if (node && id !== undefined) {
      this.nodeIdentity.set(name, id);
      this.add({ id, kind: 'node', key: key!, labels: node.labels }, `node:${name}`, added);
    } else this.nodeIdentity.delete(name);
  }

  /** CIDR identities for every prefix `rules` name, and world. */
  syncCidrs(rules: readonly Rule[], added: number[], removed: number[]): void {
    const want = new Map<string, Prefix>();
    for (const r of rules)
      for (const p of r.peers) {
        if (p.kind !== 'cidr') continue;
        for (const c of [p.cidr, ...p.except]) if (c.len > 0) want.set(cidrIdentityKey(c), c);
      }
    if (!this.identities.has(ID.WORLD)) {
      this.identities.set(ID.WORLD, { id: ID.WORLD, kind: 'world', key: 'world', prefix: WORLD4 });
      this.identities.set(ID.WORLD6, { id: ID.WORLD6, kind: 'world', key: 'world6', prefix: WORLD6 });
    }
    for (const [id, info] of [...this.identities])
      if (info.kind === 'cidr' && !want.has(info.key)) {
        this.identities.delete(id);
        removed.push(id);
      }
    for (const [key, prefix] of [...want].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const id = this.allocator.allocate('cidr', key);
      if (!this.identities.has(id)) {
        this.identities.set(id, { id, kind: 'cidr', key, prefix });
        added.push(id);
      }
    }
  }

  private netparts(pod: Pod): string[] {
    const out: string[] = [];
    for (const ip of pod.ips) {
      const h = hostPrefix(ip);
      if (!h) continue;
      let best: Prefix | undefined;
      for (const n of this.networks) if (contains(n, h) && (!best || n.len > best.len)) best = n;
      if (best) out.push(prefixKey(best));
    }
    return out;
  }

  private parts(p: Pod): PodParts {
    const nsLabels = this.nsLabels(p.namespace);
    const netparts = this.netparts(p);
    return { nsLabels, netparts, base: podIdentityKey(p.namespace, nsLabels, p.labels, p.ports, netparts) };
  }

  private podInfo(p: Pod, parts: PodParts): IdentityInfo {
    const capped = this.cap.isCapped(this.tenantOf(p.namespace), parts.base);
    const key = capped ? `${parts.base}+capped` : parts.base;
    return {
      id: this.allocator.allocate('pod', key),
      kind: 'pod',
      key,
      namespace: p.namespace,
      nsLabels: parts.nsLabels,
      labels: p.labels,
      ports: p.ports.filter((x) => x.name),
      netparts: parts.netparts,
      ...(capped ? { capped: true } : {}),
    };
  }

  private add(info: IdentityInfo, member: string, added: number[]): void {
    let m = this.members.get(info.id);
    if (!m) {
      this.members.set(info.id, (m = new Set()));
      this.identities.set(info.id, info);
      added.push(info.id);
    }
    m.add(member);
  }

  private drop(id: number, member: string, removed: number[]): void {
    const m = this.members.get(id);
    if (!m) return;
    m.delete(member);
    if (m.size === 0) {
      this.members.delete(id);
      this.identities.delete(id);
      removed.push(id);
    }
  }
}

interface PodParts {
  nsLabels: Record<string, string>;
  netparts: string[];
  /** The identity key without the cap's mark. */
  base: string;
}
