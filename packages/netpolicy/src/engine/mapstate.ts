// MapState: one endpoint direction's policy as (remote identity | *, protocol | any, port prefix) ->
// (verdict, precedence), organised the way the datapath looks it up. The datapath does two
// longest-prefix lookups, one with the remote identity and one with the wildcard identity, and takes
// the higher precedence (then the longer match, then deny). For that to equal "the highest-precedence
// entry covering the packet", each identity's trie must never hold an entry under a shorter entry of
// higher precedence. The insertion rules (CFP-23380's MapState rules) keep that invariant:
//   - an entry covered by a higher-precedence entry of its own identity or of the wildcard is dropped
//     (it could never win), and so is one covered by an equal entry with the same verdict;
//   - inserting an entry deletes the entries of its own identity it covers with lower precedence (they
//     would shadow it in a longest-prefix lookup), and covered equal ones with the same verdict.
import { ID, isPodIdentity } from './identities.ts';

export const WILDCARD = ID.WILDCARD;

/** The key-only identities that also cover an identity, most specific first. */
const NO_PARENTS: readonly number[] = [];
const WILD_ONLY: readonly number[] = [ID.WILDCARD];
const POD_PARENTS: readonly number[] = [ID.ALL_PODS, ID.WILDCARD];

export function parentsOf(identity: number): readonly number[] {
  if (identity === ID.WILDCARD) return NO_PARENTS;
  if (identity === ID.ALL_PODS) return WILD_ONLY;
  return isPodIdentity(identity) ? POD_PARENTS : WILD_ONLY;
}

export interface MapStateKey {
  /** Remote security identity; 0 = any. */
  identity: number;
  /** IP protocol; 0 = any (then port and plen are 0). */
  proto: number;
  port: number;
  /** Port prefix length 0..16. */
  plen: number;
}

/** pass: only in the admin layer; the lower layer decides (see verdict.ts). */
export type Verdict = 'allow' | 'deny' | 'pass';

export interface MapStateEntry extends MapStateKey {
  precedence: number;
  verdict: Verdict;
  /** verdict === 'deny' (the precedence's low bit). */
  deny: boolean;
  /** The rule that produced the entry (its id). */
  rule: string;
}

/** Match length in the datapath's LPM key (identity and proto fixed, then port bits). */
export function matchLength(k: MapStateKey): number {
  return k.proto === 0 ? 0 : 8 + k.plen;
}

/** Whether key a covers key b, ignoring identity. */
export function covers(a: MapStateKey, b: MapStateKey): boolean {
  if (a.proto === 0) return true;
  if (a.proto !== b.proto) return false;
  // prefixContains without allocating (this runs for every insertion against its bucket)
  if (a.plen > b.plen) return false;
  return a.plen === 0 || a.port >>> (16 - a.plen) === b.port >>> (16 - a.plen);
}

export function keyString(k: MapStateKey): string {
  return `${k.identity}/${k.proto}/${k.port}/${k.plen}`;
}

/** Better of two matches as the datapath picks: precedence, then longer match, then deny. */
export function better(
  a: MapStateEntry | undefined,
  b: MapStateEntry | undefined,
): MapStateEntry | undefined {
  if (!a) return b;
  if (!b) return a;
  if (a.precedence !== b.precedence) return a.precedence > b.precedence ? a : b;
  const la = matchLength(a);
  const lb = matchLength(b);
  if (la !== lb) return la > lb ? a : b;
  return a.deny ? a : b;
}

export class MapState {
  /**
   * identity -> entries (small lists; a real LPM trie per identity in the datapath). Identities whose
   * entries came out the same (the same rules selected them) share one array, whose entries carry the
   * identity that built it: `entries()` and `lookup` give every entry its own identity.
   */
  private readonly buckets = new Map<number, MapStateEntry[]>();
  /** Bucket arrays held by more than one identity: copied before any change. */
  private readonly shared = new WeakSet<MapStateEntry[]>();
  private count = 0;
  private changes = 0;

  get size(): number {
    return this.count;
  }

  /** Changes with every insertion, removal or share: derived data can be cached by it. */
  get version(): number {
    return this.changes;
  }

  *entries(): IterableIterator<MapStateEntry> {
    for (const [id, b] of this.buckets) {
      if (b[0]!.identity !== id) for (const x of b) yield { ...x, identity: id };
      else yield* b;
    }
  }

  /** An identity's entries (of a shared bucket: as built for another identity; compare keys only). */
  bucket(identity: number): readonly MapStateEntry[] {
    return this.buckets.get(identity) ?? [];
  }

  /**
   * Gives `identities` the entries of `from`'s bucket (as returned by `bucket(from)`, non-empty): the
   * same array, whose entries keep the identity that built it (that is how a shared one is told).
   */
  share(bucket: readonly MapStateEntry[], identities: Iterable<number>): void {
    if (bucket.length === 0) throw new Error('MapState.share: an empty bucket');
    this.shared.add(bucket as MapStateEntry[]);
    this.changes++;
    for (const identity of identities) {
      const had = this.buckets.get(identity);
      if (had) this.count -= had.length;
      this.buckets.set(identity, bucket as MapStateEntry[]);
      this.count += bucket.length;
    }
  }

  /** Makes a shared bucket the identity's own before it changes (the owner's too). */
  private own(identity: number): MapStateEntry[] | undefined {
    const b = this.buckets.get(identity);
    if (!b || !this.shared.has(b)) return b;
    const mine = b[0]!.identity === identity ? [...b] : b.map((x) => ({ ...x, identity }));
    this.buckets.set(identity, mine);
    return mine;
  }

  /**
   * Inserts per the rules above; returns whether the entry was kept. (The deny bit is part of the
   * precedence, so equal precedence means the same verdict.)
   */
  insert(e: MapStateEntry): boolean {
    const own = this.own(e.identity);
    // One pass over the own bucket: covered by a higher entry (drop it), or covering lower ones.
    let coversLower = false;
    if (own)
      for (const x of own) {
        if (x.precedence >= e.precedence && covers(x, e)) return false;
        if (!coversLower && x.precedence <= e.precedence && covers(e, x)) coversLower = true;
      }
    for (const parent of parentsOf(e.identity)) {
      const wild = this.buckets.get(parent);
      if (wild) for (const x of wild) if (x.precedence >= e.precedence && covers(x, e)) return false;
    }
    this.count++;
    this.changes++;
    if (!own) {
      this.buckets.set(e.identity, [e]);
      return true;
    }
    // Entries are mostly inserted in descending precedence: usually nothing below to delete.
    if (coversLower) {
      const kept = own.filter((x) => !(x.precedence <= e.precedence && covers(e, x)));
      this.count -= own.length - kept.length;
      kept.push(e);
      this.buckets.set(e.identity, kept);
    } else own.push(e);
    return true;
  }

  /** The datapath's answer: LPM in the identity's trie and its parents' (all pods, any), then `better`. */
  lookup(identity: number, proto: number, port: number): MapStateEntry | undefined {
    const lpm = (id: number): MapStateEntry | undefined => {
      let best: MapStateEntry | undefined;
      for (const x of this.buckets.get(id) ?? []) {
        if (
          x.proto !== 0 &&
          (x.proto !== proto || (x.plen > 0 && port >>> (16 - x.plen) !== x.port >>> (16 - x.plen)))
        )
          continue;
        if (!best || matchLength(x) > matchLength(best)) best = x;
      }
      return best;
    };
    let best = identity === WILDCARD ? undefined : lpm(identity);
    if (best && best.identity !== identity) best = { ...best, identity };
    for (const parent of parentsOf(identity)) best = better(best, lpm(parent));
    return best;
  }

  /** Removes every entry of one identity (before recomputing its bucket). */
  clear(identity: number): void {
    this.count -= this.buckets.get(identity)?.length ?? 0;
    this.changes++;
    this.buckets.delete(identity);
  }

  /** Entries in a stable order (for hashing, diffing and printing). */
  sorted(): MapStateEntry[] {
    return [...this.entries()].sort(compareKeys);
  }
}

export function compareKeys(a: MapStateKey, b: MapStateKey): number {
  return a.identity - b.identity || a.proto - b.proto || a.port - b.port || a.plen - b.plen;
}
