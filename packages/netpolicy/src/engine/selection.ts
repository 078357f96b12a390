// Which identities a rule's peer selects, and which pods a subject selects, from identity labels.
import { type LabelSelector, matchesSelector } from '@cascade/core';
import { contains, prefixKey } from './cidr.ts';
import { ID, type IdentityInfo } from './identities.ts';
import type { NamespaceMatch, Peer, SubjectMatch } from './rules.ts';

/**
 * Every identity; every pod identity (the ALL_PODS key); or a finite set. A set with `allPods` selects
 * every pod identity too (then `ids` holds only the other identities): a `networks: [0.0.0.0/0]` peer
 * costs one ALL_PODS key instead of one key per pod identity.
 */
export type Selection =
  | { kind: 'all' }
  | { kind: 'pods' }
  | { kind: 'set'; ids: Set<number>; allPods?: boolean; dense?: DenseIds };

export type SetSelection = Extract<Selection, { kind: 'set' }>;

/** A set selection's ids as an array and as slots (cached on it; whoever changes `ids` drops it). */
export interface DenseIds {
  list: number[];
  slots: Int32Array;
}

/** Identity -> small dense number, for per-identity scratch arrays (ids are stable, so slots are). */
const slotOf = new Map<number, number>();
export function identitySlot(id: number): number {
  let s = slotOf.get(id);
  if (s === undefined) slotOf.set(id, (s = slotOf.size));
  return s;
}
export const identitySlots = () => slotOf.size;

export function denseIds(s: SetSelection): DenseIds {
  if (!s.dense) {
    const list = [...s.ids];
    s.dense = { list, slots: Int32Array.from(list, identitySlot) };
  }
  return s.dense;
}

export function namespaceMatches(m: NamespaceMatch, ns: string, nsLabels: Record<string, string>): boolean {
  return 'name' in m ? m.name === ns : matchesSelector(m.selector, nsLabels);
}

export function subjectSelects(s: SubjectMatch, info: IdentityInfo): boolean {
  return (
    info.kind === 'pod' &&
    namespaceMatches(s.namespaces, info.namespace!, info.nsLabels!) &&
    matchesSelector(s.pods, info.labels!)
  );
}

const isEmpty = (s: LabelSelector) =>
  Object.keys(s.matchLabels ?? {}).length === 0 && (s.matchExpressions ?? []).length === 0;

/** A pods peer of every pod of every namespace (`namespaceSelector: {}`, any pod): the ALL_PODS key. */
export const selectsEveryPod = (peer: Peer): boolean =>
  peer.kind === 'pods' &&
  isEmpty(peer.pods) &&
  'selector' in peer.namespaces &&
  isEmpty(peer.namespaces.selector);

/** Whether a peer selects one identity (remote side). Unknown peers are resolved by the caller. */
export function peerSelects(peer: Peer, info: IdentityInfo): boolean {
  switch (peer.kind) {
    case 'all':
      return true;
    case 'unknown':
      return false;
    case 'pods':
      return (
        info.kind === 'pod' &&
        namespaceMatches(peer.namespaces, info.namespace!, info.nsLabels!) &&
        matchesSelector(peer.pods, info.labels!)
      );
    case 'nodes':
      return info.kind === 'node' && matchesSelector(peer.selector, info.labels!);
    case 'cidr': {
      const inside = (p: { family: 4 | 6; bits: bigint; len: number }) =>
        contains(peer.cidr, p) && !peer.except.some((e) => contains(e, p));
      if (info.kind === 'cidr' || info.kind === 'world') return inside(info.prefix!);
      if (info.kind === 'pod' && peer.pods) {
        // netparts name the most specific network prefix holding the pod's address: inside the peer's
        // CIDR exactly when the address is (prefixes holding one address are nested).
        return (info.netparts ?? []).some((n) => n === prefixKey(peer.cidr) || isInsideKey(n, peer));
      }
      return false;
    }
  }
}

const netpartPrefixes = new Map<string, { family: 4 | 6; bits: bigint; len: number }>();
function isInsideKey(key: string, peer: Extract<Peer, { kind: 'cidr' }>): boolean {
  let p = netpartPrefixes.get(key);
  if (!p) {
    const [fam, rest] = key.split(':') as [string, string];
    const [hex, len] = rest.split('/') as [string, string];
    p = { family: Number(fam) as 4 | 6, bits: BigInt(`0x${hex}`), len: Number(len) };
    netpartPrefixes.set(key, p);
  }
  return contains(peer.cidr, p) && !peer.except.some((e) => contains(e, p!));
}

/** A stable key for caching a peer's selection. */
export function peerKey(peer: Peer): string {
  return JSON.stringify(peer, (_k, v) => (typeof v === 'bigint' ? v.toString(16) : v));
}

/** Selection of a peer over all identities, using the wildcards where they are exact. */
export function selectPeer(
  peer: Peer,
  action: 'allow' | 'deny' | 'pass',
  identities: Iterable<IdentityInfo>,
): Selection {
  if (peer.kind === 'all') return { kind: 'all' };
  // Fail closed: a peer with no known field selects nothing in Allow, everything in Deny/Pass.
  if (peer.kind === 'unknown') return action === 'allow' ? { kind: 'set', ids: new Set() } : { kind: 'all' };
  if (selectsEveryPod(peer)) return { kind: 'pods' };
  const ids = new Set<number>();
  for (const info of identities) if (info.id !== ID.HOST && peerSelects(peer, info)) ids.add(info.id);
  return { kind: 'set', ids };
}

/** Identities indexed for selection: pods by namespace and by network part; the rest in a list. */
export class IdentityIndex {
  readonly byNamespace = new Map<string, IdentityInfo[]>();
  readonly nsLabels = new Map<string, Record<string, string>>();
  readonly byNetpart = new Map<string, number[]>();
  readonly others: IdentityInfo[] = [];
  podCount = 0;

  private readonly byId = new Map<number, IdentityInfo>();

  constructor(identities: Iterable<IdentityInfo>) {
    for (const info of identities) this.add(info);
  }

  add(info: IdentityInfo): void {
    if (this.byId.has(info.id)) this.remove(info.id);
    this.byId.set(info.id, info);
    if (info.kind !== 'pod') {
      if (info.id !== ID.HOST) this.others.push(info);
      return;
    }
    this.podCount++;
    let l = this.byNamespace.get(info.namespace!);
    if (!l) this.byNamespace.set(info.namespace!, (l = []));
    this.nsLabels.set(info.namespace!, info.nsLabels!);
    l.push(info);
    for (const n of info.netparts ?? []) {
      let ids = this.byNetpart.get(n);
      if (!ids) this.byNetpart.set(n, (ids = []));
      ids.push(info.id);
    }
  }

  remove(id: number): void {
    const info = this.byId.get(id);
    if (!info) return;
    this.byId.delete(id);
    if (info.kind !== 'pod') {
      const i = this.others.indexOf(info);
      if (i >= 0) this.others.splice(i, 1);
      return;
    }
    this.podCount--;
    const l = this.byNamespace.get(info.namespace!);
    if (l) {
      const i = l.indexOf(info);
      if (i >= 0) l.splice(i, 1);
      if (l.length === 0) {
        this.byNamespace.delete(info.namespace!);
        this.nsLabels.delete(info.namespace!);
      }
    }
    for (const n of info.netparts ?? []) {
      const ids = this.byNetpart.get(n);
      if (!ids) continue;
      const i = ids.indexOf(id);
      if (i >= 0) ids.splice(i, 1);
      if (ids.length === 0) this.byNetpart.delete(n);
    }
  }

  /** Whether a networks peer covers every pod identity (counted, not collected). */
  coversAllPods(peer: Extract<Peer, { kind: 'cidr' }>): boolean {
    let n = 0;
    for (const [key, list] of this.byNetpart) if (isInsideKey(key, peer)) n += list.length;
    return n > 0 && n === this.podCount;
  }

  /** Whether a pod identity's network part lies inside a networks peer. */
  static podInside(info: IdentityInfo, peer: Extract<Peer, { kind: 'cidr' }>): boolean {
    return (info.netparts ?? []).some((k) => isInsideKey(k, peer));
  }

  /** Whether a NetworkPolicy rule of namespace `ruleNs` leaves this identity out of its sets. */
  static capped(info: IdentityInfo, ruleNs: string | undefined): boolean {
    return ruleNs !== undefined && info.capped === true && info.namespace !== ruleNs;
  }

  /** The pod side of a networks peer: pod identities by network part, and whether that is all of them. */
  selectNetworkPods(peer: Extract<Peer, { kind: 'cidr' }>): { ids: number[]; all: boolean } {
    const ids: number[] = [];
    for (const [key, list] of this.byNetpart) if (isInsideKey(key, peer)) ids.push(...list);
    return { ids, all: ids.length > 0 && ids.length === this.podCount };
  }

  /**
   * selectPeer over the index: namespaces first, then pods inside the matching ones. `capFor`: the
   * namespace of a NetworkPolicy's rule; capped identities of other namespaces are left out of the
   * set (not out of the wildcards: identity-cap.ts).
   */
  select(peer: Peer, action: 'allow' | 'deny' | 'pass', capFor?: string): Selection {
    const skip = (info: IdentityInfo | undefined) => info !== undefined && IdentityIndex.capped(info, capFor);
    if (peer.kind === 'all' || peer.kind === 'unknown') return selectPeer(peer, action, []);
    if (peer.kind === 'pods') {
      if (selectsEveryPod(peer)) return { kind: 'pods' };
      const ids = new Set<number>();
      const nsList =
        'name' in peer.namespaces
          ? [peer.namespaces.name]
          : [...this.nsLabels]
              .filter(([, l]) =>
                matchesSelector((peer.namespaces as { selector: LabelSelector }).selector, l),
              )
              .map(([n]) => n);
      for (const ns of nsList)
        for (const info of this.byNamespace.get(ns) ?? [])
          if (!skip(info) && matchesSelector(peer.pods, info.labels!)) ids.add(info.id);
      return { kind: 'set', ids };
    }
    const ids = new Set<number>();
    for (const info of this.others) if (peerSelects(peer, info)) ids.add(info.id);
    if (peer.kind === 'cidr' && peer.pods) {
      const podIds: number[] = [];
      for (const [key, list] of this.byNetpart) if (isInsideKey(key, peer)) podIds.push(...list);
      if (podIds.length > 0 && podIds.length === this.podCount) return { kind: 'set', ids, allPods: true };
      for (const id of podIds) if (!skip(this.byId.get(id))) ids.add(id);
    }
    return { kind: 'set', ids };
  }
}
