// The engine's cache of peer selections: which identities each rule's peer selects, computed once
// per rule object and patched in place when identities come and go (a new pod can only be selected
// by peers bound to its namespace or bound to none, so only those are looked at).
import { ID, type IdentityInfo, isPodIdentity } from './identities.ts';
import type { Rule } from './rules.ts';
import { IdentityIndex, peerSelects, type Selection } from './selection.ts';

export type SelectionEntry = { rule: Rule; index: number; s: Selection };

/** `ns/name` policy key of a rule (its id is `key#...`). */
export function policyKeyOf(r: Rule): string {
  return r.id.slice(0, r.id.indexOf('#'));
}

/** The namespace whose NetworkPolicy holds `r` (its sets leave other namespaces' capped identities out). */
export const capScope = (r: Rule): string | undefined => (r.tier === 'np' ? r.source.namespace : undefined);

export interface SelectionPatch {
  /** Rules that now select an identity that appeared: their tables need a new bucket. */
  selecting: Set<Rule>;
  /**
   * A networks peer's "every pod" flipped (e.g. an IPv6-only pod beside an IPv4 0.0.0.0/0 rule):
   * the cache was not patched and everything must be selected and lowered again.
   */
  allPodsBroken: boolean;
}

export class SelectionCache {
  private readonly index: () => IdentityIndex;
  private readonly selections = new Map<string, Selection>();
  /** The rule and peer index behind each cached selection key. */
  private readonly entries = new Map<string, SelectionEntry>();
  /** Cached selections of pod peers bound to one namespace, by it; and all the others. */
  private readonly byNs = new Map<string, Set<SelectionEntry>>();
  private readonly unbound = new Set<SelectionEntry>();
  /** Policy key -> its cached selection keys (what a change of that policy invalidates). */
  private readonly byPolicy = new Map<string, Set<string>>();
  /** Selection cache keys per rule, built once (a key built per call costs more than the lookup). */
  private readonly keys = new WeakMap<Rule, string[]>();

  /** `index`: the engine's current identity index (it is replaced on a full flush). */
  constructor(index: () => IdentityIndex) {
    this.index = index;
  }

  /** What peer `i` of `rule` selects. */
  get(rule: Rule, i: number): Selection {
    let keys = this.keys.get(rule);
    if (!keys) this.keys.set(rule, (keys = rule.peers.map((_, j) => `${rule.id}@${j}`)));
    const k = keys[i]!;
    let s = this.selections.get(k);
    if (s) return s;
    const pk = policyKeyOf(rule);
    let set = this.byPolicy.get(pk);
    if (!set) this.byPolicy.set(pk, (set = new Set()));
    set.add(k);
    s = this.index().select(rule.peers[i]!, rule.action, capScope(rule));
    this.selections.set(k, s);
    const entry: SelectionEntry = { rule, index: i, s };
    this.entries.set(k, entry);
    const peer = rule.peers[i]!;
    if (peer.kind === 'pods' && 'name' in peer.namespaces) {
      let b = this.byNs.get(peer.namespaces.name);
      if (!b) this.byNs.set(peer.namespaces.name, (b = new Set()));
      b.add(entry);
    } else this.unbound.add(entry);
    return s;
  }

  clear(): void {
    this.selections.clear();
    this.entries.clear();
    this.byPolicy.clear();
    this.byNs.clear();
    this.unbound.clear();
  }

  /** Drops a changed policy's selections (its rules are new objects with new selections). */
  forgetPolicy(key: string): void {
    for (const k of this.byPolicy.get(key) ?? []) this.forget(k);
    this.byPolicy.delete(key);
  }

  private forget(k: string): void {
    const e = this.entries.get(k);
    this.selections.delete(k);
    this.entries.delete(k);
    if (!e) return;
    const peer = e.rule.peers[e.index]!;
    if (peer.kind === 'pods' && 'name' in peer.namespaces) this.byNs.get(peer.namespaces.name)?.delete(e);
    else this.unbound.delete(e);
  }

  /**
   * Patches the cached selections of unchanged rules for identities that appeared (`added`) or
   * vanished (`removed`); the identity index already reflects both.
   */
  patch(added: IdentityInfo[], removed: Set<number>): SelectionPatch {
    const selecting = new Set<Rule>();
    let allPodsBroken = false;
    const podRemoved = [...removed].some(isPodIdentity);
    const podAdded = added.some((i) => i.kind === 'pod');
    if (removed.size)
      for (const { s } of this.entries.values())
        if (s.kind === 'set') {
          for (const id of removed) s.ids.delete(id);
          s.dense = undefined;
        }
    // New pods can only be selected by peers of their namespace or peers not bound to one.
    const candidates: Iterable<SelectionEntry>[] = [];
    if (added.length && added.every((i) => i.kind === 'pod')) {
      for (const ns of new Set(added.map((i) => i.namespace!))) candidates.push(this.byNs.get(ns) ?? []);
      candidates.push(this.unbound);
    } else if (added.length || podRemoved) candidates.push(this.entries.values());
    const select = (s: Extract<Selection, { kind: 'set' }>, rule: Rule, info: IdentityInfo) => {
      if (IdentityIndex.capped(info, capScope(rule))) return;
      s.ids.add(info.id);
      s.dense = undefined;
      selecting.add(rule);
    };
    for (const list of candidates) {
      for (const { rule, index, s } of list) {
        if (s.kind !== 'set') continue;
        const peer = rule.peers[index]!;
        if (peer.kind === 'cidr' && peer.pods) {
          // Whether a networks peer covers every pod can flip either way: an added pod outside it
          // breaks "all"; a removed pod can make an uncovered peer cover all, and so can pods added
          // to a population that had none (then count).
          let all = Boolean(s.allPods);
          if (all) {
            for (const info of added)
              if (info.kind === 'pod' && !IdentityIndex.podInside(info, peer)) all = false;
          } else if (podRemoved || podAdded) all = this.index().coversAllPods(peer);
          if (all !== Boolean(s.allPods)) {
            allPodsBroken = true;
            continue;
          }
          for (const info of added) {
            const selects =
              info.kind === 'pod'
                ? !all && IdentityIndex.podInside(info, peer)
                : info.id !== ID.HOST && peerSelects(peer, info);
            if (selects) select(s, rule, info);
          }
          continue;
        }
        for (const info of added) if (info.id !== ID.HOST && peerSelects(peer, info)) select(s, rule, info);
      }
    }
    return { selecting, allPodsBroken };
  }
}
